//! [`Relists`]: which objects a watch stream's relist delivered again, to find those it did
//! not (deleted while the watch was down).

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

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
