//! Turns Secret watch events into the desired state of each cluster name.
//!
//! Cluster name = Secret name. When Secrets in two watched namespaces claim one name, the owner
//! is decided by [`Claims`], not by arrival order: the oldest `creationTimestamp` wins, then
//! the smallest namespace (a Secret without a timestamp ranks last). Every other claimant is
//! logged (naming both Secrets, never their content) and marked [`SecretState::Conflict`].
//! Nothing is engaged before every watched namespace has been listed once ([`FirstLists`]; a
//! namespace whose list fails stops that wait), so a younger Secret is never engaged, not even
//! for a moment, while the older one's namespace is still being listed. An older Secret seen
//! later (created in a namespace that failed to list) takes the name over; when the owner goes
//! away, the next in rank does.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher::{self, Event};
use mcr_core::ClusterName;
use mcr_core::members::{Claims, Dispatch, FirstLists, Relists, Track, Workers};
use tracing::{info, warn};

use crate::connect::{Connect, Desired, Shared};
use crate::{SecretRef, SecretState, SecretStatus};

struct Seen {
    stream: usize,
    desired: Desired,
}

/// One event of the provider's Secret watches, with the index of its watch.
pub(crate) type SecretEvent = (usize, Result<watcher::Event<Secret>, watcher::Error>);

pub(crate) struct Dispatcher {
    shared: Arc<Shared>,
    workers: Workers<Connect>,
    secrets: BTreeMap<SecretRef, Seen>,
    claims: Claims<SecretRef>,
    first_lists: FirstLists,
    relisting: Relists<SecretRef>,
}

impl Dispatcher {
    /// Gives `name` to its best-ranked claimant (publishing that Secret's desired state when the
    /// owner changed, or when `changed` is the owner) and marks every other claimant as in
    /// conflict. Removes the name's member when nothing claims the name any more. Decides
    /// nothing before the initial list is complete.
    fn settle(&mut self, name: &ClusterName, changed: Option<&SecretRef>) {
        if !self.first_lists.done() {
            return;
        }
        let settled = self.claims.settle(name);
        let Some(winner) = settled.owner.clone() else {
            if settled.previous.is_some() {
                self.workers.remove(name);
            }
            return;
        };
        if settled.changed() || changed == Some(&winner) {
            if let Some(previous) = &settled.previous {
                info!(cluster = %name, secret = %winner, previous = %previous, "Secret takes over the cluster name (oldest claim wins)");
            }
            self.workers
                .ensure(name, self.secrets[&winner].desired.clone());
        }
        let mut statuses = self.shared.statuses.lock();
        for loser in settled.others {
            let resource_version = self.secrets[&loser].desired.resource_version.clone();
            let state = SecretState::Conflict {
                owner: winner.clone(),
            };
            let newly = statuses.get(&loser).is_none_or(|s| s.state != state);
            if newly || changed == Some(&loser) {
                warn!(
                    cluster = %name,
                    secret = %loser,
                    owner = %winner,
                    "cluster name conflict: two watched Secrets claim the same cluster name; {winner} is older (or ranks first) and owns it, {loser} is ignored until {winner} goes away"
                );
            }
            let status = SecretStatus {
                cluster: name.clone(),
                resource_version,
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
            .filter(|b| !b.0.is_empty())
            .map(|b| Arc::<[u8]>::from(b.0.as_slice()));
        let desired = Desired {
            secret: key.clone(),
            resource_version: secret.metadata.resource_version.clone(),
            data,
        };
        let created = secret.metadata.creation_timestamp.clone();
        self.secrets.insert(key.clone(), Seen { stream, desired });
        let name = key.cluster_name();
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

impl Dispatch for Dispatcher {
    type Item = SecretEvent;
    type Converge = Connect;

    fn new(workers: Workers<Connect>) -> Self {
        let shared = workers.converger().0.clone();
        let streams = shared.opts.namespaces.watched().map_or(1, |ns| ns.len());
        Dispatcher {
            shared,
            workers,
            secrets: BTreeMap::new(),
            claims: Claims::new(),
            first_lists: FirstLists::new(0..streams),
            relisting: Relists::default(),
        }
    }

    fn handle(&mut self, (stream, event): SecretEvent) {
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

    fn into_workers(self) -> Workers<Connect> {
        self.workers
    }
}
