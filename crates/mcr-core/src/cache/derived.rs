//! Derived caches: a [`Cache`] whose informers are filtered, rewritten views of another cache's
//! informers instead of watches of their own.
//!
//! Used by providers whose clusters are *slices* of one real cluster (the namespace provider: N
//! namespaces share the host's single watch per type). A derived informer waits for the parent
//! informer of the same type and options to sync, takes a consistent snapshot of it, replays the
//! objects the [`CacheView`] keeps as its initial list, then follows the parent's live changes.
//! It keeps its own store, subscribers and field indexes.

use std::{fmt::Debug, hash::Hash, sync::Arc};

use futures::{StreamExt, channel::mpsc::unbounded, stream};
use kube::{Resource, api::ObjectMeta, runtime::watcher};

use super::{Cache, CacheEvent, InformerOptions, shared::EventStream};

/// How a derived cache sees the objects of its parent cache (see [`Cache::derived`]).
///
/// [`view`](CacheView::view) is called on a copy of every object of the parent: return `false`
/// to hide it, or `true` to keep it after rewriting its metadata in place (for example, mapping
/// a real namespace to a virtual one).
///
/// ```
/// use kube::api::ObjectMeta;
/// use mcr_core::CacheView;
///
/// /// Shows the objects of namespace `team-a` as if they lived in `default`, and every
/// /// cluster-scoped object unchanged.
/// struct TeamA;
/// impl CacheView for TeamA {
///     fn view(&self, meta: &mut ObjectMeta) -> bool {
///         match meta.namespace.as_deref() {
///             None => true,
///             Some("team-a") => {
///                 meta.namespace = Some("default".into());
///                 true
///             }
///             Some(_) => false,
///         }
///     }
/// }
/// let mut meta = ObjectMeta { namespace: Some("team-a".into()), ..Default::default() };
/// assert!(TeamA.view(&mut meta));
/// assert_eq!(meta.namespace.as_deref(), Some("default"));
/// ```
pub trait CacheView: Send + Sync + 'static {
    /// Keeps (`true`, possibly rewriting `meta`) or hides (`false`) an object of the parent.
    fn view(&self, meta: &mut ObjectMeta) -> bool;
}

/// The parent and view of a derived cache.
#[derive(Clone)]
pub(super) struct Derived {
    pub(super) parent: Cache,
    pub(super) view: Arc<dyn CacheView>,
}

/// `obj` as `view` shows it, if it does and, given a `namespace`, in that (viewed) namespace.
fn map<K: Resource + Clone>(view: &dyn CacheView, namespace: Option<&str>, obj: &K) -> Option<K> {
    let mut obj = obj.clone();
    let shown = view.view(obj.meta_mut())
        && namespace.is_none_or(|ns| obj.meta().namespace.as_deref() == Some(ns));
    shown.then_some(obj)
}

/// The event stream of a derived informer for `K`: a view of the parent's informer of the same
/// type and options. A namespace in `opts` is one of the view (the parent's objects are
/// shown in namespaces of their own), so the parent's watch is of every namespace and the
/// namespace is kept after the view.
pub(super) fn stream<K>(
    derived: &Derived,
    dyntype: K::DynamicType,
    opts: InformerOptions,
) -> EventStream<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    let namespace = opts.namespace().map(str::to_owned);
    let opts = InformerOptions {
        namespaces: Vec::new(),
        ..opts
    };
    // Creates (and, if the parent runs, starts) the parent's informer now.
    let parent = derived.parent.shared::<K>(dyntype, opts);
    let view = derived.view.clone();
    let start = async move {
        if !parent.wait_synced().await {
            return stream::empty().boxed();
        }
        // Snapshot and registration under the subscriber lock: no event is missed or doubled.
        let (tx, rx) = unbounded::<CacheEvent<K>>();
        let snapshot = {
            let mut subs = parent.subscribers.lock();
            let snapshot = parent.store.state();
            if !subs.closed {
                subs.senders.push(tx);
            }
            snapshot
        };
        let initial: Vec<watcher::Event<K>> = std::iter::once(watcher::Event::Init)
            .chain(
                snapshot
                    .iter()
                    .filter_map(|o| map(&*view, namespace.as_deref(), &**o))
                    .map(watcher::Event::InitApply),
            )
            .chain(std::iter::once(watcher::Event::InitDone))
            .collect();
        let live = rx.filter_map(move |event| {
            let mapped = match &event {
                CacheEvent::Listed(o) | CacheEvent::Applied(o) => {
                    map(&*view, namespace.as_deref(), &**o).map(watcher::Event::Apply)
                }
                CacheEvent::Deleted(o) => {
                    map(&*view, namespace.as_deref(), &**o).map(watcher::Event::Delete)
                }
            };
            futures::future::ready(mapped)
        });
        stream::iter(initial).chain(live).boxed()
    };
    stream::once(start).flatten().map(Ok).boxed()
}
