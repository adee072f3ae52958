//! Turns ClusterProfile (and Secret) watch events into the desired state of each cluster name.
//!
//! The dispatcher keeps the last seen version of every profile and labelled Secret, derives
//! from them what each profile wants (pure, in [`crate::resolve`]), and publishes it to the
//! worker of the profile's cluster name. When two profiles map to one name, the first seen
//! keeps it and the other is reported as [`ProfileState::Conflict`] until the name is free.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use kube::runtime::watcher::{self, Event};
use mcr_core::ClusterName;
use mcr_core::members::{Dispatch, Relists, Workers};
use tracing::{error, info, warn};

use crate::connect::{Connect, Shared};
use crate::resolve::{Profiles, SeenSecret};
use crate::{ProfileRef, ProfileState, ProfileStatus};

/// One watch event, tagged with its stream.
pub(crate) enum Item {
    Profile(usize, Event<DynamicObject>),
    Secret(usize, Event<Secret>),
}

pub(crate) struct Dispatcher {
    shared: Arc<Shared>,
    workers: Workers<Connect>,
    state: Profiles,
    /// The name each profile maps to (owned, or waiting in a conflict).
    names: BTreeMap<ProfileRef, ClusterName>,
    owners: HashMap<ClusterName, ProfileRef>,
    relisting_profiles: Relists<ProfileRef>,
    relisting_secrets: Relists<ProfileRef>,
}

impl Dispatcher {
    pub(crate) fn item(&mut self, item: Item) {
        match item {
            Item::Profile(stream, event) => self.profile_event(stream, event),
            Item::Secret(stream, event) => self.secret_event(stream, event),
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
        let new_name = wanted.as_ref().and_then(|w| w.name.clone());
        if let Some(old) = self.names.get(profile).cloned()
            && Some(&old) != new_name.as_ref()
        {
            self.release(profile, &old);
        }
        let Some(wanted) = wanted else {
            self.shared.statuses.lock().remove(profile);
            return;
        };
        let Some(name) = new_name else {
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
        self.names.insert(profile.clone(), name.clone());
        match self.owners.get(&name) {
            None => {
                self.owners.insert(name.clone(), profile.clone());
                self.workers.ensure(&name, wanted.desired(profile));
            }
            Some(owner) if owner == profile => self.workers.ensure(&name, wanted.desired(profile)),
            Some(owner) => {
                error!(cluster = %name, profile = %profile, owner = %owner,
                    "two cluster profiles map to the same cluster name: {owner} was seen first and keeps it");
                let status = ProfileStatus {
                    cluster: Some(name.clone()),
                    resource_version: wanted.resource_version.clone(),
                    state: ProfileState::Conflict {
                        owner: owner.clone(),
                    },
                };
                self.shared.statuses.lock().insert(profile.clone(), status);
            }
        }
    }

    /// `profile` no longer maps to `name`: hand the name to the next profile, or remove it.
    fn release(&mut self, profile: &ProfileRef, name: &ClusterName) {
        self.names.remove(profile);
        if self.owners.get(name) != Some(profile) {
            return;
        }
        self.owners.remove(name);
        let next = self
            .names
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(p, _)| p.clone());
        match next {
            Some(next) => {
                info!(cluster = %name, profile = %next, previous = %profile, "cluster profile takes over the cluster name");
                self.refresh(&next);
            }
            None => self.workers.remove(name),
        }
    }
}

impl Dispatch for Dispatcher {
    type Item = Result<Item, watcher::Error>;
    type Reconcile = Connect;

    fn new(workers: Workers<Connect>) -> Self {
        let shared = workers.reconciler().0.clone();
        Dispatcher {
            state: Profiles::new(shared.opts.clone()),
            shared,
            workers,
            names: BTreeMap::new(),
            owners: HashMap::new(),
            relisting_profiles: Relists::default(),
            relisting_secrets: Relists::default(),
        }
    }

    fn handle(&mut self, item: Result<Item, watcher::Error>) {
        match item {
            Ok(item) => self.item(item),
            Err(err) => warn!(error = %err, "hub watch failed; retrying with backoff"),
        }
    }

    fn into_workers(self) -> Workers<Connect> {
        self.workers
    }
}
