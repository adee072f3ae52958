//! Ordering resource versions.

/// Whether resourceVersion `a` is older than `b`: both are etcd revisions on every API server
/// mcr runs against (decimal integers, growing with every write); anything else counts as not
/// older. Informers use it to ignore an older version of an object that arrives after a newer
/// one; sharding, a replayed version of a peer's Lease.
///
/// ```
/// assert!(mcr_core::older_version("9", "10"));
/// assert!(!mcr_core::older_version("10", "10"));
/// assert!(!mcr_core::older_version("opaque", "10"));
/// ```
pub fn older_version(a: &str, b: &str) -> bool {
    matches!((a.parse::<u64>(), b.parse::<u64>()), (Ok(a), Ok(b)) if a < b)
}
