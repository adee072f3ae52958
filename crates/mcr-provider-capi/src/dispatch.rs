//! Turns `Cluster` and Secret watch events into what the provider wants under each cluster
//! name.
//!
//! Every `Cluster` the watch delivers gets a status. For a ready one, its kubeconfig Secret
//! ([`SecretSource`]) is [wanted](mcr_core::members::Members::want) under its cluster name; the
//! engagement table reads the Secret and brings the workload cluster up when (and only while)
//! this replica owns the name. A Secret event changes what is wanted for every Cluster that
//! uses that Secret, so a rotated kubeconfig is read without waiting for a `Cluster` event.
//!
//! When two `Cluster`s map to one name, [`Claims`] decides the owner (the oldest, then the
//! smallest `namespace/name`), once every `Cluster` watch has listed ([`FirstLists`]), so
//! neither arrival nor list order ever does; the other is [`ClusterState::Conflict`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use mcr_core::members::{Claims, FirstLists, Relists, Track};
use mcr_core::{ClusterName, ErrorChain, Source};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

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

/// A kubeconfig Secret that `Cluster`s use: which ones, and its version as the Secret watch
/// last saw it.
#[derive(Default)]
struct SecretUse {
    users: BTreeSet<ObjectRef>,
    /// The Secret's `resourceVersion` (`None`: not seen yet, or deleted).
    version: Option<String>,
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
    /// The name each `Cluster` maps to (owned, or waiting in a conflict).
    claims: Claims<ObjectRef>,
    secrets: HashMap<ObjectRef, SecretUse>,
    /// `Cluster` watch `i` is stream `i`.
    first_lists: FirstLists,
    relisting: Relists<ObjectRef>,
}

impl Dispatcher {
    /// The dispatcher of the run of `token`.
    pub(crate) fn new(shared: Arc<Shared>, token: CancellationToken) -> Self {
        let streams = shared.opts.namespaces.watches().len();
        Dispatcher {
            data_key: Arc::from(shared.opts.secret_key.as_str()),
            shared,
            token,
            clusters: BTreeMap::new(),
            claims: Claims::new(),
            secrets: HashMap::new(),
            first_lists: FirstLists::new(0..streams),
            relisting: Relists::default(),
        }
    }

    /// Handles one event (or watch error) of the provider's watches.
    pub(crate) fn handle(&mut self, item: Incoming) {
        match item {
            Incoming::Cluster(stream, Ok(event)) => {
                let listed = matches!(event, Event::InitDone);
                self.event(stream, event);
                if listed && self.first_lists.listed(stream) {
                    self.settle_all();
                }
            }
            Incoming::Secret(Ok(event)) => self.secret_event(event),
            Incoming::Cluster(_, Err(err)) => {
                warn!(error = %err, "Cluster watch failed (is Cluster API {} installed?); retrying with backoff", self.shared.opts.version.as_str());
                if self.first_lists.failed() {
                    self.settle_all();
                }
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
        let Some(used) = self.secrets.get_mut(&secret) else {
            return;
        };
        let version = if deleted { None } else { meta.resource_version };
        if used.version == version {
            return;
        }
        used.version = version;
        let names: BTreeSet<ClusterName> = used
            .users
            .iter()
            .filter_map(|key| Some(self.clusters.get(key)?.name.clone()))
            .collect();
        for name in names {
            debug!(cluster = %name, secret = %secret, deleted, "kubeconfig Secret changed");
            self.settle(&name);
        }
    }

    /// Gives `name` to its best-ranked claimant and wants what that `Cluster` asks for
    /// ([`follow`](Self::follow)); marks every other claimant as in conflict. When the name
    /// changes hands, what ran under it (the previous owner's) is removed first. Decides
    /// nothing before the initial list is complete.
    fn settle(&mut self, name: &ClusterName) {
        if !self.first_lists.done() {
            return;
        }
        let settled = self.claims.settle(name);
        if let Some(previous) = settled.previous.as_ref().filter(|_| settled.changed()) {
            info!(cluster = %name, previous = %previous, owner = ?settled.owner, "the Cluster owning the cluster name changed (oldest claim wins)");
            self.shared.members.remove(name);
        }
        let Some(owner) = settled.owner else {
            return;
        };
        self.follow(&owner);
        let mut statuses = self.shared.statuses.lock();
        for loser in settled.others {
            let state = ClusterState::Conflict {
                owner: owner.clone(),
            };
            if statuses.get(&loser).is_none_or(|s| s.state != state) {
                error!(cluster = %name, object = %loser, owner = %owner, "two Clusters map to the same cluster name: {owner} is older (or ranks first) and keeps it, {loser} is ignored until {owner} goes away");
            }
            let name = name.clone();
            statuses.insert(loser, ClusterStatus { name, state });
        }
    }

    /// The initial list is complete (or a `Cluster` watch failed to list): decide every name.
    fn settle_all(&mut self) {
        for name in self.claims.names() {
            self.settle(&name);
        }
    }

    /// Wants what the owning `Cluster` `key` asks for under its name: its kubeconfig Secret
    /// (wanting what is wanted already changes nothing), nothing new (not ready or paused,
    /// kept), or nothing at all.
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
                    version: self.secrets.get(&t.secret).and_then(|u| u.version.clone()),
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
        let status = ClusterStatus {
            name: t.name.clone(),
            state,
        };
        self.shared.statuses.lock().insert(key.clone(), status);
    }

    /// `key` no longer uses the Secret `secret`; a Secret nobody uses is forgotten.
    fn unuse(&mut self, secret: &ObjectRef, key: &ObjectRef) {
        if let Some(used) = self.secrets.get_mut(secret) {
            used.users.remove(key);
            if used.users.is_empty() {
                self.secrets.remove(secret);
            }
        }
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
        {
            let old_secret = old.secret.clone();
            self.unuse(&old_secret, &key);
        }
        let used = self.secrets.entry(secret.clone()).or_default();
        used.users.insert(key.clone());
        let seen = Seen {
            stream,
            name: name.clone(),
            secret,
            want,
        };
        self.clusters.insert(key.clone(), seen);
        let created = obj.metadata.creation_timestamp;
        if let Some(before) = self.claims.claim(key.clone(), name.clone(), created) {
            self.settle(&before);
        }
        // A Cluster that stays ready (status churn, labels, ...) wants what it wanted: nothing
        // happens, its Secret is not read again.
        self.settle(&name);
        Some(key)
    }

    /// Forgets a `Cluster`; hands its name to the next claimant in rank, if any.
    fn delete(&mut self, key: &ObjectRef) {
        let Some(t) = self.clusters.remove(key) else {
            return;
        };
        self.unuse(&t.secret, key);
        self.claims.release(key);
        self.shared.statuses.lock().remove(key);
        self.settle(&t.name);
    }
}
