//! [`Relists`]: which objects a watch stream's relist delivered again, to find those it did
//! not (deleted while the watch was down); [`Track`]: a watcher's events handled with them.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use kube::runtime::watcher::Event;

/// The relists in progress, per watch stream: a watcher's `Init` starts one, every object it
/// lists is [`seen`](Self::seen), and at `InitDone` the objects the stream had delivered before
/// but did not list again are [`gone`](Self::gone).
///
/// ```
/// use mcr_core::members::Relists;
/// let mut relists = Relists::default();
/// relists.start(0);
/// relists.seen(0, "a");
/// assert_eq!(relists.gone(0, ["a", "b"]), ["b"]);
/// ```
#[derive(Debug)]
pub struct Relists<K> {
    seen: HashMap<usize, HashSet<K>>,
}

impl<K> Default for Relists<K> {
    fn default() -> Self {
        Relists {
            seen: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq> Relists<K> {
    /// A relist of `stream` starts (a watcher's `Init`).
    pub fn start(&mut self, stream: usize) {
        self.seen.insert(stream, HashSet::new());
    }

    /// `stream` delivered `key`; counted when a relist of that stream is in progress.
    pub fn seen(&mut self, stream: usize, key: K) {
        if let Some(seen) = self.seen.get_mut(&stream) {
            seen.insert(key);
        }
    }

    /// The relist of `stream` ended (a watcher's `InitDone`): the keys of `known` (what the
    /// stream had delivered) it did not list again.
    pub fn gone(&mut self, stream: usize, known: impl IntoIterator<Item = K>) -> Vec<K> {
        let seen = self.seen.remove(&stream).unwrap_or_default();
        known.into_iter().filter(|k| !seen.contains(k)).collect()
    }
}

/// Whether every watch stream of a provider has delivered its first complete list.
///
/// A provider that decides something across streams (which of two claimants owns a cluster
/// name) waits for this: before, an object of a stream not listed yet may change the decision.
/// The wait is bounded by the streams themselves: a stream whose list fails
/// ([`failed`](Self::failed)) stops the wait, and what it lists later is handled as it comes.
///
/// ```
/// use mcr_core::members::FirstLists;
/// let mut lists = FirstLists::new([0, 1]);
/// assert!(!lists.listed(0));
/// assert!(lists.listed(1)); // the last one: done now
/// assert!(lists.done() && !lists.listed(1));
/// ```
#[derive(Debug)]
pub struct FirstLists<S = usize> {
    waiting: Option<HashSet<S>>,
}

impl<S: Hash + Eq> FirstLists<S> {
    /// Waiting for `streams`.
    pub fn new(streams: impl IntoIterator<Item = S>) -> Self {
        let waiting: HashSet<S> = streams.into_iter().collect();
        FirstLists {
            waiting: (!waiting.is_empty()).then_some(waiting),
        }
    }

    /// Whether every stream listed (or one failed).
    pub fn done(&self) -> bool {
        self.waiting.is_none()
    }

    /// `stream` completed a list (a watcher's `InitDone`). True when that ended the wait.
    pub fn listed(&mut self, stream: S) -> bool {
        let Some(waiting) = &mut self.waiting else {
            return false;
        };
        waiting.remove(&stream);
        if waiting.is_empty() {
            self.waiting = None;
            return true;
        }
        false
    }

    /// A stream failed before its first list completed: stop waiting. True when that ended
    /// the wait.
    pub fn failed(&mut self) -> bool {
        self.waiting.take().is_some()
    }
}

/// A dispatcher's view of one watched kind `T` whose objects it tracks by key: implementing it
/// gives [`event`](Self::event), the handling of a watcher's events with relists (objects not
/// listed again by a relist of their stream are deleted).
///
/// ```
/// use std::collections::BTreeMap;
/// use kube::runtime::watcher::Event;
/// use mcr_core::members::{Relists, Track};
///
/// /// Objects are `(name, value)` pairs here; the tracker remembers each name's stream.
/// #[derive(Default)]
/// struct Names { seen: BTreeMap<String, usize>, relists: Relists<String> }
///
/// impl Track<(String, u32)> for Names {
///     type Key = String;
///     fn relists(&mut self) -> &mut Relists<String> { &mut self.relists }
///     fn known(&self, stream: usize) -> Vec<String> {
///         self.seen.iter().filter(|(_, s)| **s == stream).map(|(k, _)| k.clone()).collect()
///     }
///     fn key_of(object: &(String, u32)) -> Option<String> { Some(object.0.clone()) }
///     fn apply(&mut self, stream: usize, object: (String, u32)) -> Option<String> {
///         self.seen.insert(object.0.clone(), stream);
///         Some(object.0)
///     }
///     fn delete(&mut self, key: &String) { self.seen.remove(key); }
/// }
///
/// let mut names = Names::default();
/// names.event(0, Event::Apply(("a".into(), 1)));
/// names.event(0, Event::Init);
/// names.event(0, Event::InitApply(("b".into(), 2)));
/// names.event(0, Event::InitDone);
/// assert_eq!(names.seen.keys().collect::<Vec<_>>(), ["b"]);
/// ```
pub trait Track<T> {
    /// Names a tracked object.
    type Key: Hash + Eq;

    /// The relists in progress.
    fn relists(&mut self) -> &mut Relists<Self::Key>;

    /// The keys of the objects `stream` delivered.
    fn known(&self, stream: usize) -> Vec<Self::Key>;

    /// The key of an object (for a deletion).
    fn key_of(object: &T) -> Option<Self::Key>;

    /// Records an object `stream` delivered (listed or changed); its key when it is tracked.
    fn apply(&mut self, stream: usize, object: T) -> Option<Self::Key>;

    /// Forgets the object `key` (deleted, or not listed again by a relist).
    fn delete(&mut self, key: &Self::Key);

    /// Handles one watcher event of `stream`.
    fn event(&mut self, stream: usize, event: Event<T>) {
        match event {
            Event::Init => self.relists().start(stream),
            Event::InitApply(object) => {
                if let Some(key) = self.apply(stream, object) {
                    self.relists().seen(stream, key);
                }
            }
            Event::InitDone => {
                let known = self.known(stream);
                for key in self.relists().gone(stream, known) {
                    self.delete(&key);
                }
            }
            Event::Apply(object) => {
                self.apply(stream, object);
            }
            Event::Delete(object) => {
                if let Some(key) = Self::key_of(&object) {
                    self.delete(&key);
                }
            }
        }
    }
}
