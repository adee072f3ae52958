//! Request counting by verb and resource.

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// A snapshot of the requests a cluster has answered, counted by `(verb, resource)`.
///
/// Verbs are `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` and
/// `deletecollection`; resources are plurals (`configmaps`), subresources are counted as
/// `configmaps/status`, and discovery (`/version`, `/api`, `/apis/...`, `/openapi/...`) is
/// counted as verb `get` on resource `discovery`. A request answered with metadata only
/// (`Accept: ...;as=PartialObjectMetadata[List]`) is counted a second time, under its verb
/// with `-metadata` appended (`list-metadata`, `watch-metadata`), so a test can tell a
/// metadata-only watch from a whole-object one. Requests refused with `401 Unauthorized` (an
/// expired or unknown credential, on an HTTPS cluster) are counted as verb `unauthorized` on
/// resource `requests`.
///
/// ```no_run
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// let cluster = mcr_envtest::TestCluster::start("a").await?;
/// let counts = cluster.requests();
/// assert_eq!(counts.get("watch", "configmaps"), 0);
/// for ((verb, resource), n) in counts.iter() {
///     println!("{verb} {resource}: {n}");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    counts: BTreeMap<(String, String), u64>,
}

impl RequestCounts {
    /// How many requests with this verb went to this resource.
    ///
    /// ```
    /// let counts = mcr_envtest::RequestCounts::default();
    /// assert_eq!(counts.get("list", "configmaps"), 0);
    /// ```
    pub fn get(&self, verb: &str, resource: &str) -> u64 {
        self.counts
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// All requests counted.
    ///
    /// ```
    /// assert_eq!(mcr_envtest::RequestCounts::default().total(), 0);
    /// ```
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Every `((verb, resource), count)`, sorted by verb then resource.
    ///
    /// ```
    /// assert_eq!(mcr_envtest::RequestCounts::default().iter().count(), 0);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = ((&str, &str), u64)> + '_ {
        self.counts
            .iter()
            .map(|((v, r), n)| ((v.as_str(), r.as_str()), *n))
    }
}

/// The live counters of one cluster.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    counts: Mutex<BTreeMap<(String, String), u64>>,
}

impl Counters {
    /// Counts one request.
    pub(crate) fn record(&self, verb: &str, resource: &str) {
        let mut counts = self.counts.lock();
        *counts
            .entry((verb.to_string(), resource.to_string()))
            .or_insert(0) += 1;
    }

    /// A copy of the current counts.
    pub(crate) fn snapshot(&self) -> RequestCounts {
        let counts = self.counts.lock();
        RequestCounts {
            counts: counts.clone(),
        }
    }

    /// Forgets every count.
    pub(crate) fn reset(&self) {
        self.counts.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_verb_and_resource() {
        let c = Counters::default();
        c.record("get", "configmaps");
        c.record("get", "configmaps");
        c.record("watch", "configmaps");
        c.record("update", "configmaps/status");
        let s = c.snapshot();
        assert_eq!(s.get("get", "configmaps"), 2);
        assert_eq!(s.get("watch", "configmaps"), 1);
        assert_eq!(s.get("update", "configmaps/status"), 1);
        assert_eq!(s.get("update", "configmaps"), 0);
        assert_eq!(s.total(), 4);
        assert_eq!(s.iter().count(), 3);
        c.reset();
        assert_eq!(c.snapshot().total(), 0);
    }
}
