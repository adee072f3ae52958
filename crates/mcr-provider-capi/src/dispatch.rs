//! Turns `Cluster` and Secret watch events into what the provider wants under each cluster
//! name.
//!
//! Every `Cluster` the watch delivers gets a status. For a ready one, its kubeconfig Secret
//! ([`SecretSource`]) is [wanted](mcr_core::members::Members::want) under its cluster name; the
//! engagement table reads the Secret and brings the workload cluster up when (and only while)
//! this replica owns the name. A Secret event changes what is wanted for every Cluster that
//! uses that Secret, so a rotated kubeconfig is read without waiting for a `Cluster` event.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use mcr_core::members::{Relists, Track};
use mcr_core::{ClusterName, ErrorChain, Source};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, warn};

use crate::provider::Shared;
use crate::source::SecretSource;
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

/// The last version seen of a `Cluster`, as the provider reads it.
struct Seen {
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

/// The dispatcher of one run of the provider.
pub(crate) struct Dispatcher {
    shared: Arc<Shared>,
    /// The run: what is wanted lives as long as it.
    token: CancellationToken,
    /// The data key of the kubeconfig Secrets (shared by every source).
    data_key: Arc<str>,
    clusters: BTreeMap<ObjectRef, Seen>,
    owners: HashMap<ClusterName, ObjectRef>,
    by_secret: HashMap<ObjectRef, BTreeSet<ObjectRef>>,
    secret_versions: HashMap<ObjectRef, Option<String>>,
    relisting: Relists<ObjectRef>,
}

impl Dispatcher {
    /// The dispatcher of the run of `token`.
    pub(crate) fn new(shared: Arc<Shared>, token: CancellationToken) -> Self {
        Dispatcher {
            data_key: Arc::from(shared.opts.secret_key.as_str()),
            shared,
            token,
            clusters: BTreeMap::new(),
            owners: HashMap::new(),
            by_secret: HashMap::new(),
            secret_versions: HashMap::new(),
            relisting: Relists::default(),
        }
    }

    /// Handles one event (or watch error) of the provider's watches.
    pub(crate) fn handle(&mut self, item: Incoming) {
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

    /// Handles one event of a (metadata-only) Secret watch: the Clusters using it want its new
    /// version.
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
                self.follow(&key);
            }
        }
    }

    /// Wants what an owning `Cluster` asks for under its name: its kubeconfig Secret (wanting
    /// what is wanted already changes nothing), nothing new (not ready or paused, kept), or
    /// nothing at all.
    fn follow(&self, key: &ObjectRef) {
        let Some(t) = self.clusters.get(key) else {
            return;
        };
        let members = &self.shared.members;
        let state = match &t.want {
            Want::Engage => {
                let source = SecretSource {
                    host: self.shared.host.clone(),
                    secret: t.secret.clone(),
                    data_key: self.data_key.clone(),
                    version: self.secret_versions.get(&t.secret).cloned().flatten(),
                };
                let wanted = members.want(&self.token, &t.name, Source::Connect(Arc::new(source)));
                match wanted {
                    Ok(()) => ClusterState::Pending,
                    Err(err) => {
                        let reason = ErrorChain(&err).to_string();
                        error!(object = %key, error = %reason, "workload cluster refused");
                        ClusterState::Invalid { reason }
                    }
                }
            }
            Want::Hold(state) => state.clone(),
            Want::Off(state) => {
                members.remove(&t.name);
                state.clone()
            }
        };
        self.set_status(key, &t.name, state);
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
        let seen = Seen {
            stream,
            name: name.clone(),
            secret,
            want,
        };
        self.clusters.insert(key.clone(), seen);
        match self.owners.get(&name) {
            None => {
                self.owners.insert(name.clone(), key.clone());
                self.follow(&key);
            }
            // A Cluster that stays ready (status churn, labels, ...) wants what it wanted:
            // nothing happens, its Secret is not read again.
            Some(owner) if *owner == key => self.follow(&key),
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
            self.shared.members.remove(&t.name);
            let next = self
                .clusters
                .iter()
                .find(|(_, other)| other.name == t.name)
                .map(|(k, _)| k.clone());
            if let Some(next) = next {
                self.owners.insert(t.name.clone(), next.clone());
                self.follow(&next);
            }
        }
        self.shared.statuses.lock().remove(key);
    }
}
