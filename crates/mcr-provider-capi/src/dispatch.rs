//! Turns `Cluster` and Secret watch events into the desired state of each cluster name.
//!
//! Every `Cluster` the watch delivers gets a status. A ready one is handed to the worker of its
//! cluster name; a Secret event pokes the worker of every Cluster that uses that Secret, so a
//! rotated kubeconfig is read without waiting for a `Cluster` event.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use mcr_core::ClusterName;
use mcr_core::members::{Dispatch, Relists, Track, Workers};
use tracing::{debug, error, warn};

use crate::connect::{Connect, Desired, Shared};
use crate::{ClusterState, ClusterStatus, NotReady, ObjectRef, Paused, is_paused};

/// What a `Cluster` asks for.
#[derive(Clone, Debug)]
enum Want {
    /// Ready: run it.
    Engage,
    /// Not ready (or paused) with [`NotReady::Keep`]: keep what runs, start nothing.
    Hold(ClusterState),
    /// Filtered, paused or not ready with `Disengage`: nothing may run.
    Off(ClusterState),
}

struct Tracked {
    stream: usize,
    name: ClusterName,
    secret: ObjectRef,
    want: Want,
}

/// One event of the provider's host watches: a `Cluster` event (from watch `i`) or a
/// metadata-only Secret event.
pub(crate) enum Incoming {
    Cluster(usize, Result<watcher::Event<DynamicObject>, watcher::Error>),
    Secret(Result<watcher::Event<PartialObjectMeta<Secret>>, watcher::Error>),
}

pub(crate) struct Dispatcher {
    shared: Arc<Shared>,
    workers: Workers<Connect>,
    clusters: BTreeMap<ObjectRef, Tracked>,
    owners: HashMap<ClusterName, ObjectRef>,
    by_secret: HashMap<ObjectRef, BTreeSet<ObjectRef>>,
    secret_versions: HashMap<ObjectRef, Option<String>>,
    relisting: Relists<ObjectRef>,
    pokes: u64,
}

impl Dispatcher {
    /// Handles one event of a (metadata-only) Secret watch: pokes the Clusters using it.
    pub(crate) fn secret_event(&mut self, event: Event<PartialObjectMeta<Secret>>) {
        let (meta, deleted) = match event {
            Event::Apply(s) | Event::InitApply(s) => (s.metadata, false),
            Event::Delete(s) => (s.metadata, true),
            Event::Init | Event::InitDone => return,
        };
        let Some(secret) = ObjectRef::of(&meta) else {
            return;
        };
        // Cluster API labels a cluster's CA, etcd and service-account Secrets too: only the
        // ones a Cluster uses matter (one that comes before its Cluster is read with it).
        if !self.by_secret.contains_key(&secret) {
            return;
        }
        let version = if deleted { None } else { meta.resource_version };
        if self.secret_versions.get(&secret) == Some(&version) {
            return;
        }
        if deleted {
            self.secret_versions.remove(&secret);
        } else {
            self.secret_versions.insert(secret.clone(), version);
        }
        let users: Vec<ObjectRef> = self
            .by_secret
            .get(&secret)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for key in users {
            let Some(t) = self.clusters.get(&key) else {
                continue;
            };
            if matches!(t.want, Want::Engage) && self.owners.get(&t.name) == Some(&key) {
                debug!(cluster = %t.name, secret = %secret, deleted, "kubeconfig Secret changed");
                let name = t.name.clone();
                self.publish_engage(&name, &key);
            }
        }
    }

    /// Whether the worker of `key` is engaged, engaging or retrying on its own.
    fn worker_on_it(&self, key: &ObjectRef) -> bool {
        let statuses = self.shared.statuses.lock();
        matches!(
            statuses.get(key).map(|s| &s.state),
            Some(
                ClusterState::Engaged { .. } | ClusterState::Pending | ClusterState::Failed { .. }
            )
        )
    }

    /// Makes the worker of an owning `Cluster` follow what it wants.
    fn follow(&mut self, key: &ObjectRef) {
        let Some(t) = self.clusters.get(key) else {
            return;
        };
        let name = t.name.clone();
        match t.want.clone() {
            Want::Engage => self.publish_engage(&name, key),
            Want::Hold(state) => {
                self.workers.ensure(&name, Desired::Hold);
                if self.shared.members.engagements().get(&name).is_err() {
                    self.set_status(key, &name, state);
                }
            }
            Want::Off(state) => {
                self.workers.remove(&name);
                self.set_status(key, &name, state);
            }
        }
    }

    fn publish_engage(&mut self, name: &ClusterName, key: &ObjectRef) {
        let Some(t) = self.clusters.get(key) else {
            return;
        };
        self.pokes += 1;
        let desired = Desired::Engage {
            cluster: key.clone(),
            secret: t.secret.clone(),
            poke: self.pokes,
        };
        self.workers.ensure(name, desired);
    }

    fn set_status(&self, key: &ObjectRef, name: &ClusterName, state: ClusterState) {
        let status = ClusterStatus {
            name: name.clone(),
            state,
        };
        self.shared.statuses.lock().insert(key.clone(), status);
    }
}

/// What a `Cluster` object asks for under the options.
fn want(opts: &crate::Options, obj: &DynamicObject) -> Want {
    if opts.predicate.as_ref().is_some_and(|p| !p(obj)) {
        return Want::Off(ClusterState::Filtered);
    }
    let paused = is_paused(obj);
    if paused && opts.paused == Paused::Disengage {
        return Want::Off(ClusterState::Paused);
    }
    let paused_blocks = paused && opts.paused == Paused::NotReady;
    if opts.ready(obj) && !paused_blocks {
        return Want::Engage;
    }
    let state = if paused_blocks {
        ClusterState::Paused
    } else {
        ClusterState::NotReady
    };
    match opts.not_ready {
        NotReady::Keep => Want::Hold(state),
        NotReady::Disengage => Want::Off(state),
    }
}

impl Track<DynamicObject> for Dispatcher {
    type Key = ObjectRef;

    fn relists(&mut self) -> &mut Relists<ObjectRef> {
        &mut self.relisting
    }

    fn known(&self, stream: usize) -> Vec<ObjectRef> {
        self.clusters
            .iter()
            .filter(|(_, t)| t.stream == stream)
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn key_of(object: &DynamicObject) -> Option<ObjectRef> {
        ObjectRef::of(&object.metadata)
    }

    /// Records a created or updated `Cluster`; returns its key.
    fn apply(&mut self, stream: usize, obj: DynamicObject) -> Option<ObjectRef> {
        let key = ObjectRef::of(&obj.metadata)?;
        if obj.metadata.deletion_timestamp.is_some() {
            self.delete(&key);
            return None;
        }
        let opts = &self.shared.opts;
        let name = opts.cluster_name(&key);
        let secret = opts.secret_ref(&key);
        let want = want(opts, &obj);
        // A Cluster that stays ready (status churn, labels, ...) does not make the worker read
        // its Secret again: the Secret watch reports rotations. A Cluster event still re-reads
        // a Secret that was missing or refused, for Secrets outside the Secret watch.
        let settled = matches!(want, Want::Engage)
            && self.clusters.get(&key).is_some_and(|old| {
                matches!(old.want, Want::Engage) && old.secret == secret && old.name == name
            })
            && self.worker_on_it(&key);
        if let Some(old) = self.clusters.get(&key)
            && old.secret != secret
            && let Some(users) = self.by_secret.get_mut(&old.secret)
        {
            users.remove(&key);
            if users.is_empty() {
                let old_secret = old.secret.clone();
                self.by_secret.remove(&old_secret);
                self.secret_versions.remove(&old_secret);
            }
        }
        self.by_secret
            .entry(secret.clone())
            .or_default()
            .insert(key.clone());
        let tracked = Tracked {
            stream,
            name: name.clone(),
            secret,
            want,
        };
        self.clusters.insert(key.clone(), tracked);
        match self.owners.get(&name) {
            None => {
                self.owners.insert(name.clone(), key.clone());
                self.follow(&key);
            }
            Some(owner) if *owner == key => {
                if !settled {
                    self.follow(&key);
                }
            }
            Some(owner) => {
                error!(cluster = %name, object = %key, owner = %owner, "two Clusters map to the same cluster name: {owner} keeps it, {key} is ignored until {owner} goes away");
                let state = ClusterState::Conflict {
                    owner: owner.clone(),
                };
                self.set_status(&key, &name, state);
            }
        }
        Some(key)
    }

    /// Forgets a `Cluster`; hands its name to the next Cluster of that name, if any.
    fn delete(&mut self, key: &ObjectRef) {
        let Some(t) = self.clusters.remove(key) else {
            return;
        };
        if let Some(users) = self.by_secret.get_mut(&t.secret) {
            users.remove(key);
            if users.is_empty() {
                self.by_secret.remove(&t.secret);
                self.secret_versions.remove(&t.secret);
            }
        }
        if self.owners.get(&t.name) == Some(key) {
            self.owners.remove(&t.name);
            let next = self
                .clusters
                .iter()
                .find(|(_, other)| other.name == t.name)
                .map(|(k, _)| k.clone());
            match next {
                Some(next) => {
                    self.owners.insert(t.name.clone(), next.clone());
                    self.workers.remove(&t.name);
                    self.follow(&next);
                }
                None => self.workers.remove(&t.name),
            }
        }
        // After the worker was told: it cannot write a status for `key` any more.
        self.shared.statuses.lock().remove(key);
    }
}

impl Dispatch for Dispatcher {
    type Item = Incoming;
    type Converge = Connect;

    fn new(workers: Workers<Connect>) -> Self {
        let shared = workers.converger().0.clone();
        Dispatcher {
            shared,
            workers,
            clusters: BTreeMap::new(),
            owners: HashMap::new(),
            by_secret: HashMap::new(),
            secret_versions: HashMap::new(),
            relisting: Relists::default(),
            pokes: 0,
        }
    }

    fn handle(&mut self, item: Incoming) {
        match item {
            Incoming::Cluster(stream, Ok(event)) => self.event(stream, event),
            Incoming::Secret(Ok(event)) => self.secret_event(event),
            Incoming::Cluster(_, Err(err)) => {
                warn!(error = %err, "Cluster watch failed (is Cluster API {} installed?); retrying with backoff", self.shared.opts.version.as_str())
            }
            Incoming::Secret(Err(err)) => {
                warn!(error = %err, "kubeconfig Secret watch failed; retrying with backoff")
            }
        }
    }

    fn into_workers(self) -> Workers<Connect> {
        self.workers
    }
}
