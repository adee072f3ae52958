//! Turns ClusterProfile (and Secret) watch events into what the provider wants under each
//! cluster name.
//!
//! The dispatcher keeps the last seen version of every profile and labelled Secret, derives
//! from them what each profile wants (pure, in [`crate::resolve`]), and
//! [wants](mcr_core::members::Members::want) the owning profile's connection under its cluster
//! name; the engagement table does the rest (build with the plugin, probe, retries,
//! sharding). When two profiles map to one name, the owner is decided by [`Claims`], not by
//! arrival order: the oldest `creationTimestamp` wins, then the smallest `namespace/name`; the
//! other is logged (naming both) and reported as [`ProfileState::Conflict`] until it ranks
//! first. Nothing is engaged before every watch (profiles, and Secrets with the Secret
//! strategy) has listed once ([`FirstLists`]; a watch whose list fails stops that wait), so
//! after a restart the list order never decides.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use kube::runtime::watcher::{self, Event};
use mcr_core::members::{Claims, FirstLists, Relists};
use mcr_core::{ClusterName, ErrorChain, Source};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::provider::Shared;
use crate::resolve::{Profiles, SeenSecret, Want, Wanted};
use crate::{ProfileRef, ProfileState, ProfileStatus, Strategy};

/// One watch event, tagged with its stream.
pub(crate) enum Item {
    Profile(usize, Event<DynamicObject>),
    Secret(usize, Event<Secret>),
}

/// The dispatcher of one run of the provider.
pub(crate) struct Dispatcher {
    shared: Arc<Shared>,
    /// The run: what is wanted lives as long as it.
    token: CancellationToken,
    state: Profiles,
    /// The name each profile maps to (owned, or waiting in a conflict).
    claims: Claims<ProfileRef>,
    /// Profile watch `i` is stream `i`, Secret watch `i` is stream `profile_watches + i`.
    first_lists: FirstLists,
    profile_watches: usize,
    relisting_profiles: Relists<ProfileRef>,
    relisting_secrets: Relists<ProfileRef>,
}

impl Dispatcher {
    fn item(&mut self, item: Item) {
        let listed = match item {
            Item::Profile(stream, event) => {
                let listed = matches!(event, Event::InitDone).then_some(stream);
                self.profile_event(stream, event);
                listed
            }
            Item::Secret(stream, event) => {
                let listed = matches!(event, Event::InitDone);
                let listed = listed.then_some(self.profile_watches + stream);
                self.secret_event(stream, event);
                listed
            }
        };
        if let Some(stream) = listed
            && self.first_lists.listed(stream)
        {
            self.settle_all();
        }
    }

    fn profile_event(&mut self, stream: usize, event: Event<DynamicObject>) {
        match event {
            Event::Init => self.relisting_profiles.start(stream),
            Event::InitApply(obj) | Event::Apply(obj) => {
                let Some(key) = self.state.apply_profile(stream, obj) else {
                    return;
                };
                self.relisting_profiles.seen(stream, key.clone());
                self.refresh(&key);
            }
            Event::InitDone => {
                let known = self.state.profiles_of_stream(stream);
                for key in self.relisting_profiles.gone(stream, known) {
                    self.state.delete_profile(&key);
                    self.refresh(&key);
                }
            }
            Event::Delete(obj) => {
                if let (Some(ns), Some(name)) = (obj.metadata.namespace, obj.metadata.name) {
                    let key = ProfileRef::new(ns, name);
                    self.state.delete_profile(&key);
                    self.refresh(&key);
                }
            }
        }
    }

    fn secret_event(&mut self, stream: usize, event: Event<Secret>) {
        let affected = match event {
            Event::Init => {
                self.relisting_secrets.start(stream);
                return;
            }
            Event::InitApply(secret) | Event::Apply(secret) => {
                let seen = SeenSecret::from_secret(stream, &secret);
                let key = seen.as_ref().map(|(key, _)| key.clone());
                let affected = self.state.apply_secret(seen);
                if let Some(key) = key {
                    self.relisting_secrets.seen(stream, key);
                }
                affected
            }
            Event::InitDone => {
                let known = self.state.secrets_of_stream(stream);
                let mut affected = Vec::new();
                for key in self.relisting_secrets.gone(stream, known) {
                    affected.extend(self.state.delete_secret(&key));
                }
                affected
            }
            Event::Delete(secret) => match (secret.metadata.namespace, secret.metadata.name) {
                (Some(ns), Some(name)) => self.state.delete_secret(&ProfileRef::new(ns, name)),
                _ => Vec::new(),
            },
        };
        for profile in affected {
            self.refresh(&profile);
        }
    }

    /// Re-derives what `profile` wants and moves it to (or off) its cluster name.
    fn refresh(&mut self, profile: &ProfileRef) {
        let wanted = self.state.evaluate(profile);
        let name = wanted.as_ref().and_then(|w| w.name.clone());
        let moved_from = match &name {
            Some(name) => {
                let created = self.state.created(profile);
                self.claims.claim(profile.clone(), name.clone(), created)
            }
            None => self.claims.release(profile),
        };
        if let Some(old) = moved_from {
            self.settle(&old, None);
        }
        let Some(wanted) = wanted else {
            self.shared.statuses.lock().remove(profile);
            return;
        };
        let Some(name) = name else {
            // No name (the name property is missing): report it, engage nothing.
            let status = ProfileStatus {
                cluster: None,
                resource_version: wanted.resource_version.clone(),
                state: ProfileState::Invalid {
                    reason: wanted.reason_without_name(profile),
                },
            };
            self.shared.statuses.lock().insert(profile.clone(), status);
            return;
        };
        self.settle(&name, Some(profile));
    }

    /// Gives `name` to its best-ranked claimant (wanting what that profile wants when the owner
    /// changed, or when `changed` is the owner) and reports every other claimant in conflict.
    /// Removes the name's member when nothing claims it, or when it passes to a profile that
    /// wants no connection. Decides nothing before the initial lists are complete.
    fn settle(&mut self, name: &ClusterName, changed: Option<&ProfileRef>) {
        if !self.first_lists.done() {
            return;
        }
        let settled = self.claims.settle(name);
        let Some(owner) = settled.owner.clone() else {
            if settled.previous.is_some() {
                self.shared.members.remove(name);
            }
            return;
        };
        if settled.changed() || changed == Some(&owner) {
            let moved = settled.changed() && settled.previous.is_some();
            if moved && let Some(previous) = &settled.previous {
                info!(cluster = %name, profile = %owner, previous = %previous, "cluster profile takes over the cluster name (oldest claim wins)");
            }
            if let Some(wanted) = self.state.evaluate(&owner) {
                self.want(name, &owner, wanted, moved);
            }
        }
        for other in settled.others {
            let Some(wanted) = self.state.evaluate(&other) else {
                continue;
            };
            let state = ProfileState::Conflict {
                owner: owner.clone(),
            };
            let mut statuses = self.shared.statuses.lock();
            let newly = statuses.get(&other).is_none_or(|s| s.state != state);
            if newly || changed == Some(&other) {
                error!(cluster = %name, profile = %other, owner = %owner,
                    "two cluster profiles map to the same cluster name: {owner} is older (or ranks first) and owns it, {other} is ignored until {owner} goes away");
            }
            let status = ProfileStatus {
                cluster: Some(name.clone()),
                resource_version: wanted.resource_version,
                state,
            };
            statuses.insert(other, status);
        }
    }

    /// Wants what `profile`, the owner of `name`, wants under it, and records its status. A
    /// profile that wants no connection keeps what runs (a cluster engaged before stays)
    /// unless the name just `moved` to it from another profile, or it is not ready and
    /// [`Options::disengage_when_unhealthy`](crate::Options::disengage_when_unhealthy) says so.
    fn want(&self, name: &ClusterName, profile: &ProfileRef, wanted: Wanted, moved: bool) {
        let members = &self.shared.members;
        let state = match wanted.want {
            Want::Connect(connection) => {
                match members.want(&self.token, name, Source::Kubeconfig(connection)) {
                    Ok(()) => ProfileState::Pending,
                    Err(err) => {
                        let reason = ErrorChain(&err).to_string();
                        warn!(profile = %profile, error = %reason, "cluster profile refused");
                        ProfileState::Invalid { reason }
                    }
                }
            }
            Want::NotReady => {
                let disengage = self.shared.opts.disengage_when_unhealthy || moved;
                if disengage && members.remove(name) {
                    info!(profile = %profile, "cluster profile not ready: cluster disengaged");
                }
                ProfileState::NotReady { engaged: false }
            }
            Want::Invalid(reason) => {
                warn!(profile = %profile, reason = %reason, "cluster profile cannot be engaged; waiting for it to change");
                if moved {
                    members.remove(name);
                }
                ProfileState::Invalid { reason }
            }
        };
        let status = ProfileStatus {
            cluster: Some(name.clone()),
            resource_version: wanted.resource_version,
            state,
        };
        self.shared.statuses.lock().insert(profile.clone(), status);
    }

    /// The initial lists are complete (or a watch failed to list): decide every name.
    fn settle_all(&mut self) {
        for name in self.claims.names() {
            self.settle(&name, None);
        }
    }
}

impl Dispatcher {
    /// The dispatcher of the run of `token`.
    pub(crate) fn new(shared: Arc<Shared>, token: CancellationToken) -> Self {
        let profile_watches = shared.opts.namespaces.watches().len();
        let secret_watches = match shared.opts.strategy {
            Strategy::Secret { .. } => profile_watches,
            _ => 0,
        };
        Dispatcher {
            state: Profiles::new(shared.opts.clone()),
            shared,
            token,
            claims: Claims::new(),
            first_lists: FirstLists::new(0..profile_watches + secret_watches),
            profile_watches,
            relisting_profiles: Relists::default(),
            relisting_secrets: Relists::default(),
        }
    }

    /// Handles one event (or watch error) of the provider's watches.
    pub(crate) fn handle(&mut self, item: Result<Item, watcher::Error>) {
        match item {
            Ok(item) => self.item(item),
            Err(err) => {
                warn!(error = %err, "hub watch failed; retrying with backoff");
                if self.first_lists.failed() {
                    self.settle_all();
                }
            }
        }
    }
}
