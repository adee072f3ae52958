//! Turns Secret watch events into what the provider wants under each cluster name.
//!
//! Cluster name = Secret name. When Secrets in two watched namespaces claim one name, the owner
//! is decided by [`Claims`], not by arrival order: the oldest `creationTimestamp` wins, then
//! the smallest namespace (a Secret without a timestamp ranks last). Every other claimant is
//! logged (naming both Secrets, never their content) and marked [`SecretState::Conflict`].
//! Nothing is wanted before every watched namespace has been listed once ([`FirstLists`]; a
//! namespace whose list fails stops that wait), so a younger Secret is never engaged, not even
//! for a moment, while the older one's namespace is still being listed. An older Secret seen
//! later (created in a namespace that failed to list) takes the name over; when the owner goes
//! away, the next in rank does.
//!
//! The owner's kubeconfig is [wanted](mcr_core::members::Members::want) under the name; the
//! engagement table does the rest (build, probe, renewal in place, retries, sharding).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher::{self, Event};
use mcr_core::members::{Claims, Connection, FirstLists, Relists, Track};
use mcr_core::{ClusterName, ErrorChain, Source};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::provider::Shared;
use crate::{Error, SecretRef, SecretState, SecretStatus};

/// What a Secret holds under the data key.
enum Held {
    /// Nothing (the key is missing or empty).
    Missing,
    /// A kubeconfig that does not parse (the reason, naming the Secret).
    Invalid(String),
    /// A kubeconfig (its current context).
    Kubeconfig(Connection),
}

/// The last version seen of a selected Secret.
struct Seen {
    stream: usize,
    resource_version: Option<String>,
    held: Held,
}

/// One event of the provider's Secret watches, with the index of its watch.
pub(crate) type SecretEvent = (usize, Result<watcher::Event<Secret>, watcher::Error>);

/// The dispatcher of one run of the provider.
pub(crate) struct Dispatcher {
    shared: Arc<Shared>,
    /// The run: what is wanted lives as long as it.
    token: CancellationToken,
    secrets: BTreeMap<SecretRef, Seen>,
    claims: Claims<SecretRef>,
    first_lists: FirstLists,
    relisting: Relists<SecretRef>,
}

impl Dispatcher {
    /// The dispatcher of the run of `token`.
    pub(crate) fn new(shared: Arc<Shared>, token: CancellationToken) -> Self {
        let streams = shared.opts.namespaces.watches().len();
        Dispatcher {
            shared,
            token,
            secrets: BTreeMap::new(),
            claims: Claims::new(),
            first_lists: FirstLists::new(0..streams),
            relisting: Relists::default(),
        }
    }

    /// Handles one event (or watch error) of watch `stream`.
    pub(crate) fn handle(&mut self, (stream, event): SecretEvent) {
        match event {
            Ok(event) => {
                let listed = matches!(event, Event::InitDone);
                self.event(stream, event);
                if listed && self.first_lists.listed(stream) {
                    self.settle_all();
                }
            }
            Err(err) => {
                warn!(error = %err, "kubeconfig Secret watch failed; retrying with backoff");
                if self.first_lists.failed() {
                    self.settle_all();
                }
            }
        }
    }

    /// Gives `name` to its best-ranked claimant and wants that Secret's kubeconfig under it
    /// (wanting what is wanted already changes nothing); marks every other claimant as in
    /// conflict. A kubeconfig that does not parse is wanted as an unusable source ([`Source::unusable`]), so the
    /// table reports the cluster failed. Removes the name's member when nothing claims the
    /// name any more, or before it passes to a Secret without a usable kubeconfig. `changed` is the Secret whose event
    /// this is, if any (its problems are logged). Decides nothing before the initial list is
    /// complete.
    fn settle(&mut self, name: &ClusterName, changed: Option<&SecretRef>) {
        if !self.first_lists.done() {
            return;
        }
        let members = &self.shared.members;
        let settled = self.claims.settle(name);
        let Some(owner) = settled.owner.clone() else {
            if settled.previous.is_some() {
                members.remove(name);
            }
            return;
        };
        let moved = settled.changed() && settled.previous.is_some();
        if moved && let Some(previous) = &settled.previous {
            info!(cluster = %name, secret = %owner, previous = %previous, "Secret takes over the cluster name (oldest claim wins)");
        }
        let seen = &self.secrets[&owner];
        let news = settled.changed() || changed == Some(&owner);
        if moved && !matches!(seen.held, Held::Kubeconfig(_)) {
            // What runs under the name is the previous owner's.
            members.remove(name);
        }
        let (source, state) = match &seen.held {
            Held::Kubeconfig(connection) => (
                Some(Source::Kubeconfig(connection.clone())),
                SecretState::Pending,
            ),
            Held::Missing => {
                if news {
                    warn!(cluster = %name, secret = %owner, key = %self.shared.opts.data_key, "Secret has no kubeconfig under its data key (missing or empty): ignored until the key is added");
                }
                (None, SecretState::MissingKey)
            }
            Held::Invalid(reason) => {
                if news {
                    warn!(cluster = %name, secret = %owner, error = %reason, "kubeconfig Secret not usable: ignored until it changes");
                }
                let reason = reason.clone();
                (
                    Some(Source::unusable(&reason)),
                    SecretState::Invalid { reason },
                )
            }
        };
        let state = match source.map(|source| members.want(&self.token, name, source)) {
            Some(Err(err)) => {
                let reason = ErrorChain(&err).to_string();
                warn!(cluster = %name, secret = %owner, error = %reason, "kubeconfig Secret refused");
                SecretState::Invalid { reason }
            }
            _ => state,
        };
        let mut statuses = self.shared.statuses.lock();
        let status = SecretStatus {
            cluster: name.clone(),
            resource_version: seen.resource_version.clone(),
            state,
        };
        statuses.insert(owner.clone(), status);
        for loser in settled.others {
            let state = SecretState::Conflict {
                owner: owner.clone(),
            };
            let newly = statuses.get(&loser).is_none_or(|s| s.state != state);
            if newly || changed == Some(&loser) {
                warn!(
                    cluster = %name,
                    secret = %loser,
                    owner = %owner,
                    "cluster name conflict: two watched Secrets claim the same cluster name; {owner} is older (or ranks first) and owns it, {loser} is ignored until {owner} goes away"
                );
            }
            let status = SecretStatus {
                cluster: name.clone(),
                resource_version: self.secrets[&loser].resource_version.clone(),
                state,
            };
            statuses.insert(loser, status);
        }
    }

    /// The initial list is complete (or a namespace failed to list): decide every name.
    fn settle_all(&mut self) {
        for name in self.claims.names() {
            self.settle(&name, None);
        }
    }
}

fn secret_ref(secret: &Secret) -> Option<SecretRef> {
    Some(SecretRef::new(
        secret.metadata.namespace.clone()?,
        secret.metadata.name.clone()?,
    ))
}

impl Track<Secret> for Dispatcher {
    type Key = SecretRef;

    fn relists(&mut self) -> &mut Relists<SecretRef> {
        &mut self.relisting
    }

    fn known(&self, stream: usize) -> Vec<SecretRef> {
        self.secrets
            .iter()
            .filter(|(_, s)| s.stream == stream)
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn key_of(object: &Secret) -> Option<SecretRef> {
        secret_ref(object)
    }

    /// Records a created or updated Secret; returns its key when it is in scope and selected.
    fn apply(&mut self, stream: usize, secret: Secret) -> Option<SecretRef> {
        let key = secret_ref(&secret)?;
        let opts = &self.shared.opts;
        if !opts.namespaces.contains(&key.namespace) {
            return None;
        }
        let selected = secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(&opts.label))
            .is_some_and(|v| v == "true");
        if !selected || secret.metadata.deletion_timestamp.is_some() {
            self.delete(&key);
            return None;
        }
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&opts.data_key))
            .filter(|b| !b.0.is_empty());
        let held = match data.map(|b| Connection::parse(&b.0)) {
            None => Held::Missing,
            Some(Ok(connection)) => Held::Kubeconfig(connection),
            Some(Err(source)) => {
                let err = Error::Kubeconfig {
                    secret: key.clone(),
                    source,
                };
                Held::Invalid(ErrorChain(&err).to_string())
            }
        };
        let seen = Seen {
            stream,
            resource_version: secret.metadata.resource_version.clone(),
            held,
        };
        self.secrets.insert(key.clone(), seen);
        let name = key.cluster_name();
        let created = secret.metadata.creation_timestamp.clone();
        self.claims.claim(key.clone(), name.clone(), created);
        self.settle(&name, Some(&key));
        Some(key)
    }

    /// Forgets a Secret; hands its name to the next claimant in rank, if any.
    fn delete(&mut self, key: &SecretRef) {
        if self.secrets.remove(key).is_none() {
            return;
        }
        let name = key.cluster_name();
        self.claims.release(key);
        self.shared.statuses.lock().remove(key);
        self.settle(&name, None);
    }
}
