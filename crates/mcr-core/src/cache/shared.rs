//! The state behind an [`Informer`](super::Informer) and its watch task: the reflector
//! writer, sync state, subscribers and field indexes of one watch.

use std::{
    fmt::Debug,
    hash::Hash,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use futures::{StreamExt, channel::mpsc::UnboundedSender, future::BoxFuture, stream::BoxStream};
use kube::{
    Resource,
    runtime::{
        reflector::{Lookup, ObjectRef, Store, store::Writer},
        watcher,
    },
};
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{CacheEvent, indexer::IndexSet};
use crate::ClusterName;

#[derive(Clone, Default)]
pub(super) struct SyncState {
    pub(super) synced: bool,
    pub(super) stopped: bool,
    /// Why the API server refuses the initial list or watch, until it lists.
    pub(super) refused: Option<Arc<Refusal>>,
}

/// An informer's [`SyncState`] and a wake-up for whoever waits for it to change: what a
/// `tokio::sync::watch` channel would give, in a tenth of its bytes (a watch channel keeps
/// nine notifiers; every engaged member's informer has one of these).
pub(super) struct Signal {
    state: Mutex<SyncState>,
    changed: Notify,
}

impl Signal {
    fn new() -> Self {
        Signal {
            state: Mutex::new(SyncState::default()),
            changed: Notify::new(),
        }
    }

    /// The state now.
    pub(super) fn borrow(&self) -> parking_lot::MutexGuard<'_, SyncState> {
        self.state.lock()
    }

    /// Changes the state and wakes every waiter.
    fn send_modify(&self, change: impl FnOnce(&mut SyncState)) {
        change(&mut self.state.lock());
        self.changed.notify_waiters();
    }

    /// Changes the state, and wakes every waiter if `change` says it changed.
    fn send_if_modified(&self, change: impl FnOnce(&mut SyncState) -> bool) {
        let modified = change(&mut self.state.lock());
        if modified {
            self.changed.notify_waiters();
        }
    }

    /// The state, once `ready` holds for it.
    async fn wait_for(&self, ready: impl Fn(&SyncState) -> bool) -> SyncState {
        loop {
            // Registered before the state is read: a change after the read wakes it.
            let changed = self.changed.notified();
            {
                let state = self.state.lock();
                if ready(&state) {
                    return state.clone();
                }
            }
            changed.await;
        }
    }
}

/// The API server refused an informer's list or watch with an answer that retrying will not
/// change until someone changes something (RBAC, credentials, the resource being served):
/// 401, 403, or 404 of the resource.
#[derive(Clone, Debug)]
pub(crate) struct Refusal {
    /// `list` or `watch`.
    verb: &'static str,
    /// The API server's answer.
    status: Box<kube::core::Status>,
}

impl Refusal {
    /// The refusal `err` is, if it is one.
    fn of(err: &watcher::Error) -> Option<Refusal> {
        let (verb, err) = match err {
            watcher::Error::InitialListFailed(e) => ("list", e),
            watcher::Error::WatchStartFailed(e) => ("watch", e),
            _ => return None,
        };
        match err {
            kube::Error::Api(status) if matches!(status.code, 401 | 403 | 404) => Some(Refusal {
                verb,
                status: status.clone(),
            }),
            _ => None,
        }
    }

    /// The [`Error::Refused`](crate::Error::Refused) of this refusal of a watch of `resource`
    /// in `namespace` (`None`: every namespace) in `cluster`.
    pub(crate) fn error(
        &self,
        cluster: &ClusterName,
        resource: &str,
        namespace: Option<&str>,
    ) -> crate::Error {
        crate::Error::Refused {
            cluster: cluster.clone(),
            verb: self.verb,
            resource: resource.to_owned(),
            namespace: namespace.map(str::to_owned),
            status: self.status.clone(),
        }
    }
}

/// How waiting for an informer's first list ended.
pub(crate) enum Ready {
    /// It listed.
    Synced,
    /// It stopped (its cluster's token fired).
    Stopped,
    /// The API server refuses its list or watch (it keeps retrying meanwhile).
    Refused(Arc<Refusal>),
}

pub(super) struct Subscribers<K> {
    pub(super) senders: Vec<UnboundedSender<CacheEvent<K>>>,
    pub(super) closed: bool,
}

pub(crate) type EventStream<K> = BoxStream<'static, watcher::Result<watcher::Event<K>>>;

struct PendingStart<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    writer: Writer<K>,
    stream: EventStream<K>,
}

/// Drops `metadata.managedFields` from the object an event carries (see
/// [`InformerOptions::keep_managed_fields`](super::InformerOptions::keep_managed_fields)).
fn strip_managed_fields<K: Resource>(event: &mut watcher::Event<K>) {
    if let watcher::Event::Apply(obj)
    | watcher::Event::InitApply(obj)
    | watcher::Event::Delete(obj) = event
    {
        obj.meta_mut().managed_fields = None;
    }
}

/// State shared by every handle on one informer and its watch task.
pub(crate) struct Shared<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    pub(super) cluster: ClusterName,
    pub(super) resource: String,
    /// The namespace this watch is in (`None`: every namespace).
    pub(super) namespace: Option<String>,
    pub(super) dyntype: K::DynamicType,
    pub(super) store: Store<K>,
    pub(super) state: Signal,
    pub(super) subscribers: Mutex<Subscribers<K>>,
    pub(super) indexes: RwLock<IndexSet<K>>,
    pub(super) restarts: AtomicU64,
    /// The last error of the list or watch (redacted), for a sync timeout to name.
    pub(super) last_error: Mutex<Option<Box<str>>>,
    /// [`InformerOptions::keep_managed_fields`](super::InformerOptions::keep_managed_fields).
    keep_managed_fields: bool,
    /// What the watch task takes when it starts (boxed: gone once it has started).
    pending: Mutex<Option<Box<PendingStart<K>>>>,
}

/// The type-erased face of an informer, for cache-wide operations.
pub(crate) trait ErasedInformer: Send + Sync {
    fn start(self: Arc<Self>, token: CancellationToken);
    fn is_synced(&self) -> bool;
    /// Resolves once synced, stopped, or refused by the API server.
    fn wait_ready(&self) -> BoxFuture<'_, Ready>;
    fn resource(&self) -> &str;
    /// The last error of its list or watch, if any (see [`Shared::last_error`]).
    fn last_error(&self) -> Option<String>;
    /// The namespace of the watch (`None`: every namespace).
    fn namespace(&self) -> Option<&str>;
}

impl<K> Shared<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    pub(crate) fn new(
        cluster: ClusterName,
        resource: String,
        namespace: Option<String>,
        dyntype: K::DynamicType,
        stream: EventStream<K>,
        keep_managed_fields: bool,
    ) -> Arc<Self> {
        let writer = Writer::new(dyntype.clone());
        Arc::new(Shared {
            cluster,
            resource,
            namespace,
            store: writer.as_reader(),
            dyntype,
            state: Signal::new(),
            subscribers: Mutex::new(Subscribers {
                senders: Vec::new(),
                closed: false,
            }),
            indexes: RwLock::new(IndexSet::default()),
            restarts: AtomicU64::new(0),
            last_error: Mutex::new(None),
            keep_managed_fields,
            pending: Mutex::new(Some(Box::new(PendingStart { writer, stream }))),
        })
    }

    /// Resolves to `true` once synced, `false` once stopped (refusals are waited out).
    pub(super) async fn wait_synced(&self) -> bool {
        let s = self.state.wait_for(|s| s.synced || s.stopped).await;
        !s.stopped
    }

    pub(super) async fn wait_ready_inner(&self) -> Ready {
        let s = self
            .state
            .wait_for(|s| s.synced || s.stopped || s.refused.is_some())
            .await;
        if s.stopped {
            Ready::Stopped
        } else if s.synced {
            Ready::Synced
        } else {
            match s.refused {
                Some(refusal) => Ready::Refused(refusal),
                None => Ready::Stopped,
            }
        }
    }

    /// The watch task: applies the stream's events until the token fires or the stream ends.
    /// (An `async` block, not an `async fn`: the block works on the values it captured, where
    /// an `async fn` would keep a second copy of its arguments for the task's whole life.)
    #[allow(clippy::manual_async_fn)] // see above
    fn run(
        self: Arc<Self>,
        mut writer: Writer<K>,
        mut stream: EventStream<K>,
        token: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        async move {
            tracing::debug!("informer started");
            loop {
                let next = tokio::select! {
                    biased;
                    () = token.cancelled() => break,
                    next = stream.next() => next,
                };
                match next {
                    Some(Ok(event)) => self.handle(&mut writer, event),
                    Some(Err(err)) => {
                        let restarts = self.restarts.fetch_add(1, Ordering::Relaxed) + 1;
                        let error = crate::ErrorChain(&err).to_string();
                        tracing::warn!(%error, restarts, "watch failed, retrying with backoff");
                        *self.last_error.lock() = Some(error.into());
                        if let Some(refusal) = Refusal::of(&err) {
                            // Told at once to whoever waits for the first list; kept until a
                            // list succeeds.
                            self.state
                                .send_modify(|s| s.refused = Some(Arc::new(refusal)));
                        }
                    }
                    None => {
                        tracing::warn!("watch stream ended");
                        break;
                    }
                }
            }
            self.stop();
            tracing::debug!("informer stopped");
        }
    }

    fn stop(&self) {
        self.state.send_modify(|s| s.stopped = true);
        let mut subs = self.subscribers.lock();
        subs.closed = true;
        subs.senders.clear();
    }

    fn handle(&self, writer: &mut Writer<K>, mut event: watcher::Event<K>) {
        if !self.keep_managed_fields {
            strip_managed_fields(&mut event);
        }
        match event {
            watcher::Event::Apply(obj) => {
                let key = obj.to_object_ref(self.dyntype.clone());
                if self.outdated(&key, &obj) {
                    return;
                }
                writer.apply_watcher_event(&watcher::Event::Apply(obj));
                // Take the store's Arc instead of cloning the object again.
                let Some(obj) = self.store.get(&key) else {
                    return;
                };
                self.index_apply(&obj);
                self.dispatch(|| CacheEvent::Applied(obj.clone()));
            }
            watcher::Event::Delete(obj) => {
                if self.outdated(&obj.to_object_ref(self.dyntype.clone()), &obj) {
                    return;
                }
                let event = watcher::Event::Delete(obj);
                writer.apply_watcher_event(&event);
                let watcher::Event::Delete(obj) = event else {
                    return;
                };
                {
                    let mut idx = self.indexes.write();
                    if !idx.is_empty() {
                        idx.delete(&obj);
                    }
                }
                let obj = Arc::new(obj);
                self.dispatch(|| CacheEvent::Deleted(obj.clone()));
            }
            watcher::Event::Init => {
                writer.apply_watcher_event(&watcher::Event::Init);
                self.indexes.write().init();
                tracing::debug!("relist started");
            }
            watcher::Event::InitApply(obj) => {
                {
                    let mut idx = self.indexes.write();
                    if !idx.is_empty() {
                        idx.init_apply(&obj);
                    }
                }
                writer.apply_watcher_event(&watcher::Event::InitApply(obj));
            }
            watcher::Event::InitDone => self.init_done(writer),
        }
    }

    /// Whether `obj` is older than the version of it the store holds (a stream replaying
    /// what it had delivered): then it is ignored, so the store never goes back in time.
    fn outdated(&self, key: &ObjectRef<K>, obj: &K) -> bool {
        let Some(had) = self.store.get(key) else {
            return false;
        };
        let (Some(new), Some(had)) = (
            obj.meta().resource_version.as_deref(),
            had.meta().resource_version.as_deref(),
        ) else {
            return false;
        };
        let outdated = crate::older_version(new, had);
        if outdated {
            tracing::debug!(object = %key, version = new, held = had, "an older version after a newer one: ignored");
        }
        outdated
    }

    fn index_apply(&self, obj: &K) {
        let mut idx = self.indexes.write();
        if !idx.is_empty() {
            idx.apply(obj);
        }
    }

    fn dispatch(&self, make: impl Fn() -> CacheEvent<K>) {
        let mut subs = self.subscribers.lock();
        if subs.senders.is_empty() {
            return;
        }
        subs.senders.retain(|tx| tx.unbounded_send(make()).is_ok());
    }

    fn init_done(&self, writer: &mut Writer<K>) {
        // Hold the subscriber list across the swap so that every subscriber either saw the old
        // state (and gets the diff) or registers after the swap (and gets the new state).
        let mut subs = self.subscribers.lock();
        let old = if subs.senders.is_empty() {
            Vec::new()
        } else {
            self.store.state()
        };
        // The first list reports what exists, not what changed.
        let relist = self.state.borrow().synced;
        writer.apply_watcher_event(&watcher::Event::InitDone);
        self.indexes.write().init_done(&self.store);
        *self.last_error.lock() = None;
        self.state.send_if_modified(|s| {
            let refused = s.refused.take().is_some();
            !std::mem::replace(&mut s.synced, true) || refused
        });
        tracing::debug!(objects = self.store.len(), "relist done");
        if subs.senders.is_empty() {
            return;
        }
        let current = self.store.state();
        let mut vanished: Vec<Arc<K>> = Vec::new();
        let mut before = std::collections::HashMap::with_capacity(old.len());
        for o in old {
            let key = o.to_object_ref(self.dyntype.clone());
            if self.store.get(&key).is_none() {
                vanished.push(o);
            } else {
                before.insert(key, o);
            }
        }
        // On a relist, an object at the resource version it had is `Listed`; one that is new
        // or changed while the watch was away is `Applied`.
        let event = |o: &Arc<K>| {
            let key = o.to_object_ref(self.dyntype.clone());
            let unchanged = before.get(&key).is_some_and(|b| {
                b.meta().resource_version.is_some()
                    && b.meta().resource_version == o.meta().resource_version
            });
            if relist && !unchanged {
                CacheEvent::Applied(o.clone())
            } else {
                CacheEvent::Listed(o.clone())
            }
        };
        let events: Vec<CacheEvent<K>> = current.iter().map(event).collect();
        subs.senders.retain(|tx| {
            events.iter().all(|e| tx.unbounded_send(e.clone()).is_ok())
                && vanished
                    .iter()
                    .all(|o| tx.unbounded_send(CacheEvent::Deleted(o.clone())).is_ok())
        });
    }
}

impl<K> ErasedInformer for Shared<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn start(self: Arc<Self>, token: CancellationToken) {
        let Some(pending) = self.pending.lock().take() else {
            return;
        };
        let PendingStart { writer, stream } = *pending;
        let span = tracing::info_span!(
            "informer",
            cluster = %self.cluster,
            resource = %self.resource,
            namespace = tracing::field::Empty,
        );
        if let Some(namespace) = &self.namespace {
            span.record("namespace", namespace.as_str());
        }
        tokio::spawn(self.run(writer, stream, token).instrument(span));
    }

    fn is_synced(&self) -> bool {
        let state = self.state.borrow();
        state.synced && !state.stopped
    }

    fn wait_ready(&self) -> BoxFuture<'_, Ready> {
        Box::pin(self.wait_ready_inner())
    }

    fn resource(&self) -> &str {
        &self.resource
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.lock().as_deref().map(str::to_owned)
    }

    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(version: &str, app: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some("default".into()),
                resource_version: Some(version.into()),
                labels: Some([("app".to_owned(), app.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn an_older_version_after_a_newer_one_leaves_the_store_as_it_is() {
        // Simulation seed 5116: a namespace unwanted then wanted again; the watch then
        // delivered the older (unwanted) version again, and the provider, reading the store,
        // let the member go for good.
        let shared = Shared::<ConfigMap>::new(
            "c".into(),
            "configmaps".into(),
            None,
            (),
            futures::stream::empty().boxed(),
            false,
        );
        let mut writer = shared.pending.lock().take().unwrap().writer;
        let app = |shared: &Shared<ConfigMap>| {
            let key = ObjectRef::new("a").within("default");
            shared.store.get(&key).map(|cm| {
                let labels = cm.metadata.labels.clone().unwrap_or_default();
                (
                    cm.metadata.resource_version.clone().unwrap_or_default(),
                    labels["app"].clone(),
                )
            })
        };
        shared.handle(&mut writer, watcher::Event::Init);
        shared.handle(&mut writer, watcher::Event::InitApply(cm("5", "x")));
        shared.handle(&mut writer, watcher::Event::InitDone);
        shared.handle(&mut writer, watcher::Event::Apply(cm("7", "y")));
        shared.handle(&mut writer, watcher::Event::Apply(cm("6", "x")));
        assert_eq!(
            app(&shared),
            Some(("7".into(), "y".into())),
            "went back to 6"
        );
        shared.handle(&mut writer, watcher::Event::Delete(cm("6", "x")));
        assert_eq!(app(&shared), Some(("7".into(), "y".into())), "deleted by 6");
        shared.handle(&mut writer, watcher::Event::Apply(cm("8", "x")));
        assert_eq!(app(&shared), Some(("8".into(), "x".into())));
        shared.handle(&mut writer, watcher::Event::Delete(cm("9", "x")));
        assert_eq!(app(&shared), None);
    }
}
