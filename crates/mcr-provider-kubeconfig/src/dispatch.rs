//! Turns Secret watch events into the desired state of each cluster name.
//!
//! Cluster name = Secret name. When Secrets in two watched namespaces claim one name, the owner
//! is decided by a fixed rule, not by arrival order: the oldest `creationTimestamp` wins, then
//! the smallest namespace (a Secret without a timestamp ranks last). Every other claimant is
//! logged (naming both Secrets, never their content) and marked [`SecretState::Conflict`]. An
//! older Secret seen later (during the initial list, or after a restart) takes the name over;
//! when the owner goes away, the next in rank does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mcr_core::ClusterName;
use mcr_core::members::{Dispatch, Relists, Track, Workers};
use tracing::{info, warn};

use crate::connect::{Connect, Desired, Shared};
use crate::provider::SecretEvent;
use crate::{SecretRef, SecretState, SecretStatus};

struct Seen {
    stream: usize,
    created: Option<Time>,
    desired: Desired,
}

/// The rank of a claim on a cluster name: smaller owns it (oldest first, then namespace; no
/// timestamp ranks last).
type Rank<'a> = (bool, Option<&'a Time>, &'a str);

fn rank<'a>(key: &'a SecretRef, seen: &'a Seen) -> Rank<'a> {
    (
        seen.created.is_none(),
        seen.created.as_ref(),
        key.namespace.as_str(),
    )
}

pub(crate) struct Dispatcher {
    shared: Arc<Shared>,
    workers: Workers<Connect>,
    secrets: BTreeMap<SecretRef, Seen>,
    owners: HashMap<ClusterName, SecretRef>,
    claimants: HashMap<ClusterName, BTreeSet<SecretRef>>,
    relisting: Relists<SecretRef>,
}

impl Dispatcher {
    /// Gives `name` to its best-ranked claimant (publishing that Secret's desired state when the
    /// owner changed, or when `changed` is the owner) and marks every other claimant as in
    /// conflict. Removes the name's member when nothing claims the name any more.
    fn settle(&mut self, name: &ClusterName, changed: Option<&SecretRef>) {
        let claimants = self.claimants.get(name);
        let winner = claimants
            .into_iter()
            .flatten()
            .filter_map(|k| self.secrets.get(k).map(|s| (k, s)))
            .min_by(|(a, sa), (b, sb)| rank(a, sa).cmp(&rank(b, sb)))
            .map(|(k, s)| (k.clone(), s.desired.clone()));
        let Some((winner, desired)) = winner else {
            self.claimants.remove(name);
            if self.owners.remove(name).is_some() {
                self.workers.remove(name);
            }
            return;
        };
        let previous = self.owners.insert(name.clone(), winner.clone());
        if previous.as_ref() != Some(&winner) {
            if let Some(previous) = &previous {
                info!(cluster = %name, secret = %winner, previous = %previous, "Secret takes over the cluster name (oldest claim wins)");
            }
            self.workers.ensure(name, desired);
        } else if changed == Some(&winner) {
            self.workers.ensure(name, desired);
        }
        let losers: Vec<SecretRef> = self.claimants[name]
            .iter()
            .filter(|k| **k != winner)
            .cloned()
            .collect();
        let mut statuses = self.shared.statuses.lock();
        for loser in losers {
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
        let seen = Seen {
            stream,
            created: secret.metadata.creation_timestamp.clone(),
            desired,
        };
        self.secrets.insert(key.clone(), seen);
        let name = key.cluster_name();
        self.claimants
            .entry(name.clone())
            .or_default()
            .insert(key.clone());
        self.settle(&name, Some(&key));
        Some(key)
    }

    /// Forgets a Secret; hands its name to the next claimant in rank, if any.
    fn delete(&mut self, key: &SecretRef) {
        if self.secrets.remove(key).is_none() {
            return;
        }
        let name = key.cluster_name();
        if let Some(claimants) = self.claimants.get_mut(&name) {
            claimants.remove(key);
        }
        self.shared.statuses.lock().remove(key);
        self.settle(&name, None);
    }
}

impl Dispatch for Dispatcher {
    type Item = SecretEvent;
    type Reconcile = Connect;

    fn new(workers: Workers<Connect>) -> Self {
        let shared = workers.reconciler().0.clone();
        Dispatcher {
            shared,
            workers,
            secrets: BTreeMap::new(),
            owners: HashMap::new(),
            claimants: HashMap::new(),
            relisting: Relists::default(),
        }
    }

    fn handle(&mut self, (stream, event): SecretEvent) {
        match event {
            Ok(event) => self.event(stream, event),
            Err(err) => {
                warn!(error = %err, "kubeconfig Secret watch failed; retrying with backoff")
            }
        }
    }

    fn into_workers(self) -> Workers<Connect> {
        self.workers
    }
}
