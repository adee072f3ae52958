//! Sharding without a shard group: a [`Coordinator`] whose answers the test sets, and the
//! process's resident memory for the tests that measure what a member owned elsewhere costs.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use mcr_core::{ClusterName, Coordinator, Ownership};
use tokio::sync::watch;

/// The replica every name this one does not own belongs to.
pub const OTHER_REPLICA: &str = "replica-2";

/// A [`Coordinator`] set by the test: this replica owns the names it was given (or every name
/// after [`all`](Owned::all)); [`OTHER_REPLICA`] owns the rest. [`set`](Owned::set) and
/// [`all`](Owned::all) announce the change, as a coordinator does once it applied one;
/// [`set_unannounced`](Owned::set_unannounced) does not, as when ownership has moved and the
/// change is not published yet.
pub struct Owned {
    names: Mutex<Names>,
    version: watch::Sender<u64>,
}

enum Names {
    All,
    These(BTreeSet<String>),
}

impl Owned {
    /// Owns `names`.
    pub fn new(names: &[&str]) -> Arc<Self> {
        Arc::new(Owned {
            names: Mutex::new(these(names)),
            version: watch::channel(0).0,
        })
    }

    /// Owns nothing.
    pub fn nothing() -> Arc<Self> {
        Self::new(&[])
    }

    /// Owns `names` from now on, announced.
    pub fn set(&self, names: &[&str]) {
        *self.names() = these(names);
        self.announce();
    }

    /// Owns every name from now on, announced.
    pub fn all(&self) {
        *self.names() = Names::All;
        self.announce();
    }

    /// Owns `names` from now on, not announced (yet).
    pub fn set_unannounced(&self, names: &[&str]) {
        *self.names() = these(names);
    }

    fn names(&self) -> MutexGuard<'_, Names> {
        self.names.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn announce(&self) {
        self.version.send_modify(|v| *v += 1);
    }
}

fn these(names: &[&str]) -> Names {
    Names::These(names.iter().map(|n| n.to_string()).collect())
}

impl Coordinator for Owned {
    fn owner(&self, name: &ClusterName) -> Ownership {
        let owned = match &*self.names() {
            Names::All => true,
            Names::These(names) => names.contains(name.as_str()),
        };
        if owned {
            Ownership::Owned
        } else {
            Ownership::Elsewhere {
                owner: Some(OTHER_REPLICA.into()),
            }
        }
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

/// This process's resident memory in bytes (Linux `VmRSS`); `None` where it cannot be read.
pub fn rss() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The engagement token of the active member `name` of `table` (tests watch it cancelled).
///
/// ```
/// let table = mcr_core::Engagements::new();
/// assert!(mcr_test_support::active_token(&table, "a").is_none());
/// ```
pub fn active_token(
    table: &mcr_core::Engagements,
    name: &str,
) -> Option<tokio_util::sync::CancellationToken> {
    table
        .active()
        .into_iter()
        .find(|(n, _, _)| n.as_str() == name)
        .map(|(_, _, token)| token)
}
