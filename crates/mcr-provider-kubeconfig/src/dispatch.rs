//! Turns Secret watch events into the desired state of each cluster name.
//!
//! Cluster name = Secret name. When two watched namespaces hold a Secret of the same name, the
//! first one seen owns the name; the other is logged (naming both) and marked
//! [`SecretState::Conflict`] until the owner goes away, then the remaining Secret with the
//! smallest namespace takes over.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher::Event;
use mcr_core::ClusterName;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, error, info, info_span};

use crate::worker::{self, Desired, RunCtx, lock};
use crate::{SecretRef, SecretState, SecretStatus};

struct Seen {
    stream: usize,
    desired: Desired,
}

pub(crate) struct Dispatcher {
    ctx: Arc<RunCtx>,
    tasks: TaskTracker,
    secrets: BTreeMap<SecretRef, Seen>,
    owners: HashMap<ClusterName, SecretRef>,
    relisting: HashMap<usize, HashSet<SecretRef>>,
}

impl Dispatcher {
    pub(crate) fn new(ctx: Arc<RunCtx>, tasks: TaskTracker) -> Self {
        Dispatcher {
            ctx,
            tasks,
            secrets: BTreeMap::new(),
            owners: HashMap::new(),
            relisting: HashMap::new(),
        }
    }

    /// Handles one event of watch stream `stream`.
    pub(crate) fn handle(&mut self, stream: usize, event: Event<Secret>) {
        match event {
            Event::Init => {
                self.relisting.insert(stream, HashSet::new());
            }
            Event::InitApply(secret) => {
                if let Some(key) = self.apply(stream, secret) {
                    self.relisting.entry(stream).or_default().insert(key);
                }
            }
            Event::InitDone => {
                let seen = self.relisting.remove(&stream).unwrap_or_default();
                let gone: Vec<SecretRef> = self
                    .secrets
                    .iter()
                    .filter(|(key, s)| s.stream == stream && !seen.contains(*key))
                    .map(|(key, _)| key.clone())
                    .collect();
                for key in gone {
                    self.delete(&key);
                }
            }
            Event::Apply(secret) => {
                self.apply(stream, secret);
            }
            Event::Delete(secret) => {
                if let Some(key) = secret_ref(&secret) {
                    self.delete(&key);
                }
            }
        }
    }

    /// Records a created or updated Secret; returns its key when it is in scope and selected.
    fn apply(&mut self, stream: usize, secret: Secret) -> Option<SecretRef> {
        let key = secret_ref(&secret)?;
        let opts = &self.ctx.shared.opts;
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
        let resource_version = secret.metadata.resource_version.clone();
        let desired = Desired::Secret {
            secret: key.clone(),
            resource_version: resource_version.clone(),
            data,
        };
        self.secrets.insert(
            key.clone(),
            Seen {
                stream,
                desired: desired.clone(),
            },
        );
        let name = key.cluster_name();
        match self.owners.get(&name) {
            None => {
                self.owners.insert(name.clone(), key.clone());
                self.publish(&name, desired);
            }
            Some(owner) if *owner == key => self.publish(&name, desired),
            Some(owner) => {
                error!(
                    cluster = %name,
                    secret = %key,
                    owner = %owner,
                    "two watched Secrets map to the same cluster name: {owner} was seen first and keeps it, {key} is ignored until {owner} goes away"
                );
                let status = SecretStatus {
                    cluster: name.clone(),
                    resource_version,
                    state: SecretState::Conflict {
                        owner: owner.clone(),
                    },
                };
                lock(&self.ctx.shared.statuses).insert(key.clone(), status);
            }
        }
        Some(key)
    }

    /// Forgets a Secret; hands its name to the next Secret of that name, if any.
    fn delete(&mut self, key: &SecretRef) {
        if self.secrets.remove(key).is_none() {
            return;
        }
        let name = key.cluster_name();
        if self.owners.get(&name) == Some(key) {
            self.owners.remove(&name);
            let next = self
                .secrets
                .iter()
                .find(|(k, _)| k.name == key.name)
                .map(|(k, s)| (k.clone(), s.desired.clone()));
            match next {
                Some((next, desired)) => {
                    info!(cluster = %name, secret = %next, previous = %key, "Secret takes over the cluster name");
                    self.owners.insert(name.clone(), next);
                    self.publish(&name, desired);
                }
                None => self.publish(&name, Desired::Absent),
            }
        }
        lock(&self.ctx.shared.statuses).remove(key);
    }

    /// Hands `desired` to the worker of `name`, starting one if needed.
    fn publish(&self, name: &ClusterName, desired: Desired) {
        let mut slots = lock(&self.ctx.slots);
        if let Some(tx) = slots.get(name) {
            tx.send_replace(desired);
            return;
        }
        if matches!(desired, Desired::Absent) {
            return;
        }
        let (tx, rx) = watch::channel(desired);
        slots.insert(name.clone(), tx);
        let span = info_span!("kubeconfig_cluster", cluster = %name);
        let fut = worker::run(self.ctx.clone(), name.clone(), rx).instrument(span);
        self.tasks.spawn(fut);
    }
}

fn secret_ref(secret: &Secret) -> Option<SecretRef> {
    Some(SecretRef::new(
        secret.metadata.namespace.clone()?,
        secret.metadata.name.clone()?,
    ))
}
