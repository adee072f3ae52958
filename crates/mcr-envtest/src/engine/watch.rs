//! Watches: replay from the shared history, then live events, filtered per watcher.
//!
//! Writers never talk to watchers directly: a write appends one [`Change`] to the history and
//! bumps a `tokio::sync::watch` value. Each watcher keeps a cursor (the last resourceVersion
//! it has seen), wakes up, and reads the history after its cursor under a read lock, so a slow
//! watcher never makes writers wait and never lags — unless it falls so far behind that its
//! cursor was compacted away, when it gets 410 Expired like from a real server.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::read::parse_rv;
use super::registry::present;
use super::selector::Selectors;
use super::state::{Change, ResKey, State};
use super::{ApiError, Engine, ResourceType, WatchEvent, WatchEventType, WatchParams, WatchStream};

/// How often a watch with `allowWatchBookmarks` gets a BOOKMARK: about every minute, as from
/// kube-apiserver's watch cache (`defaultBookmarkFrequency` in k8s.io/apiserver's cacher).
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

/// How long before its timeout a watch gets its last BOOKMARK (kube-apiserver: 2 s), so that a
/// client resumes from a recent resourceVersion.
const BOOKMARK_BEFORE_TIMEOUT: Duration = Duration::from_secs(2);

/// Annotation marking the end of the initial events of a streaming list.
pub(crate) const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// What one watcher wants to see.
struct Filter {
    rt: ResourceType,
    /// `rt.api_version()`, computed once: it is compared against every delivered event.
    api_version: String,
    res: ResKey,
    namespace: Option<String>,
    selectors: Selectors,
}

impl Filter {
    /// The event (if any) this watcher sees for a change; selector transitions become
    /// ADDED / DELETED.
    fn translate(&self, change: &Change) -> Option<WatchEvent> {
        if change.res != self.res
            || self
                .namespace
                .as_deref()
                .is_some_and(|ns| ns != change.namespace)
        {
            return None;
        }
        if self.selectors.is_empty() {
            return Some(self.versioned(&change.event));
        }
        let matches =
            |o: &Option<Arc<Value>>| o.as_deref().is_some_and(|o| self.selectors.matches(o));
        let (was, is) = (matches(&change.old), matches(&change.new));
        match (change.event.kind(), was, is) {
            (WatchEventType::Added, _, true)
            | (WatchEventType::Deleted, true, _)
            | (WatchEventType::Modified, true, true) => Some(self.versioned(&change.event)),
            (WatchEventType::Modified, false, true) => {
                Some(self.event(WatchEventType::Added, change.new.as_ref()?))
            }
            (WatchEventType::Modified, true, false) => {
                Some(self.event(WatchEventType::Deleted, change.new.as_ref()?))
            }
            _ => None,
        }
    }

    /// The shared event, unless this watcher reads another version of the resource.
    fn versioned(&self, event: &WatchEvent) -> WatchEvent {
        if event.stored().get("apiVersion").and_then(Value::as_str)
            == Some(self.api_version.as_str())
        {
            event.clone()
        } else {
            WatchEvent::new(event.kind(), Arc::new(present(event.stored(), &self.rt)))
        }
    }

    fn event(&self, kind: WatchEventType, obj: &Arc<Value>) -> WatchEvent {
        self.versioned(&WatchEvent::new(kind, obj.clone()))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> WatchEvent {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({INITIAL_EVENTS_END: "true"});
        }
        let obj =
            json!({"apiVersion": self.api_version, "kind": self.rt.kind, "metadata": metadata});
        WatchEvent::new(WatchEventType::Bookmark, Arc::new(obj))
    }
}

fn expired(rv: u64, compacted: u64) -> WatchEvent {
    let status =
        ApiError::gone(format!("too old resource version: {rv} ({compacted})")).to_status();
    WatchEvent::new(WatchEventType::Error, Arc::new(status))
}

/// One open watch.
struct Watcher {
    state: Arc<State>,
    filter: Filter,
    cursor: u64,
    pending: VecDeque<WatchEvent>,
    notify: tokio::sync::watch::Receiver<u64>,
    shutdown: tokio::sync::watch::Receiver<u64>,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    bookmarks: bool,
    next_bookmark: Option<Instant>,
    done: bool,
}

impl Watcher {
    /// Moves new matching history entries into `pending`.
    fn pull(&mut self) {
        let store = self.state.read();
        let rt = &self.filter.rt;
        if store
            .registry
            .resolve(&rt.group, &rt.version, &rt.plural)
            .is_none()
        {
            self.done = true;
            return;
        }
        if self.cursor < store.compacted {
            self.pending
                .push_back(expired(self.cursor, store.compacted));
            self.done = true;
            return;
        }
        for change in store.changes_after(self.cursor) {
            if let Some(event) = self.filter.translate(change) {
                self.pending.push_back(event);
            }
        }
        self.cursor = self.cursor.max(store.rv);
    }

    /// When the BOOKMARK after `now` is due: a minute later, or 2 s before the deadline if
    /// that is sooner; none once that moment has passed (a watch of under 2 s gets none).
    fn bookmark_after(&self, now: Instant) -> Option<Instant> {
        let periodic = now + BOOKMARK_INTERVAL;
        let Some(deadline) = self.deadline else {
            return Some(periodic);
        };
        let before_timeout = deadline.checked_sub(BOOKMARK_BEFORE_TIMEOUT)?;
        let at = periodic.min(before_timeout);
        (at > now).then_some(at)
    }

    async fn next(&mut self) -> Option<WatchEvent> {
        let now = Instant::now();
        if self.deadline.is_none() {
            // A timeout too large to represent means "no deadline" (never a panic).
            self.deadline = self.timeout.and_then(|t| now.checked_add(t));
        }
        if self.bookmarks && self.next_bookmark.is_none() {
            self.next_bookmark = self.bookmark_after(now);
        }
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            self.notify.borrow_and_update();
            self.pull();
            if !self.pending.is_empty() || self.done {
                continue;
            }
            let deadline = self.deadline;
            let next_bookmark = self.next_bookmark;
            tokio::select! {
                changed = self.notify.changed() => {
                    if changed.is_err() {
                        self.done = true;
                    }
                }
                _ = self.shutdown.changed() => self.done = true,
                _ = sleep_until(deadline) => self.done = true,
                _ = sleep_until(next_bookmark) => {
                    self.pending.push_back(self.filter.bookmark(self.cursor, false));
                    self.next_bookmark = self.bookmark_after(Instant::now());
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Engine {
    /// Opens a watch. From an unset (or `"0"`) resourceVersion, or with
    /// `send_initial_events`, it starts with an ADDED event per current object; from a
    /// resourceVersion N it replays the history after N (410 ERROR event if compacted). Ends at
    /// `timeout` or [`Engine::shutdown`].
    ///
    /// ```no_run
    /// # use mcr_envtest::engine::*;
    /// # use futures::StreamExt;
    /// # async fn demo() {
    /// let engine = Engine::new();
    /// let rt = engine.resolve("", "v1", "namespaces").unwrap();
    /// let mut events = engine.watch(&rt, None, &WatchParams::default()).unwrap();
    /// let first = events.next().await.unwrap();
    /// assert_eq!(first.kind(), WatchEventType::Added);
    /// # }
    /// ```
    pub fn watch(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        params: &WatchParams,
    ) -> Result<WatchStream, ApiError> {
        let store = self.inner.read();
        let info = store.registry.lookup(rt)?;
        if !rt.namespaced && namespace.is_some() {
            return Err(ApiError::path_not_found());
        }
        if params.send_initial_events
            && (params.list.resource_version_match.as_deref() != Some("NotOlderThan")
                || !params.allow_bookmarks)
        {
            return Err(ApiError::invalid(
                "ListOptions",
                "",
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
            ));
        }
        let selectors = Selectors::parse(
            params.list.label_selector.as_deref(),
            params.list.field_selector.as_deref(),
            &info.field_labels(),
        )?;
        let filter = Filter {
            api_version: info.rt.api_version(),
            rt: info.rt.clone(),
            res: info.res.clone(),
            namespace: namespace.map(str::to_string),
            selectors,
        };
        let requested = parse_rv(params.list.resource_version.as_deref())?;
        let mut pending = VecDeque::new();
        let cursor = match requested {
            Some(rv) if !params.send_initial_events => {
                if rv < store.compacted {
                    let event = expired(rv, store.compacted);
                    return Ok(futures::stream::iter([event]).boxed());
                }
                rv
            }
            _ => {
                let current = store
                    .snapshot(&info.res, namespace, store.rv)
                    .unwrap_or_default();
                for obj in current.values().filter(|o| filter.selectors.matches(o)) {
                    pending.push_back(filter.event(WatchEventType::Added, obj));
                }
                if params.send_initial_events {
                    pending.push_back(filter.bookmark(store.rv, true));
                }
                store.rv
            }
        };
        let watcher = Watcher {
            state: self.inner.clone(),
            filter,
            cursor,
            pending,
            notify: self.inner.notify.subscribe(),
            shutdown: self.inner.shutdown.subscribe(),
            timeout: params.timeout,
            deadline: None,
            bookmarks: params.allow_bookmarks,
            next_bookmark: None,
            done: false,
        };
        drop(store);
        Ok(futures::stream::unfold(watcher, |mut w| async move {
            let event = w.next().await?;
            Some((event, w))
        })
        .boxed())
    }
}
