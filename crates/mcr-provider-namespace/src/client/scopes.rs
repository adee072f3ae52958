//! Which resources are namespaced: the host's discovery documents, fetched once per
//! group/version and shared by every namespace cluster of a provider.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Per group/version: plural -> namespaced.
pub(crate) struct Scopes {
    host: kube::Client,
    known: Mutex<HashMap<String, HashMap<String, bool>>>,
}

impl Scopes {
    pub(crate) fn new(host: kube::Client) -> Self {
        Self {
            host,
            known: Mutex::new(HashMap::new()),
        }
    }

    fn lookup(&self, group_version: &str, plural: &str) -> Option<bool> {
        let known = self.known.lock();
        known.get(group_version)?.get(plural).copied()
    }

    /// Whether `plural` in `group_version` (`v1`, `apps/v1`) is namespaced; `Ok(None)` if the
    /// host does not serve it. Unknown resources are looked up again each time (CRDs come and
    /// go).
    pub(crate) async fn namespaced(
        &self,
        group_version: &str,
        plural: &str,
    ) -> Result<Option<bool>, kube::Error> {
        if let Some(namespaced) = self.lookup(group_version, plural) {
            return Ok(Some(namespaced));
        }
        let list = if group_version.contains('/') {
            self.host.list_api_group_resources(group_version).await?
        } else {
            self.host.list_core_api_resources(group_version).await?
        };
        let resources: HashMap<String, bool> = list
            .resources
            .into_iter()
            .filter(|r| !r.name.contains('/'))
            .map(|r| (r.name, r.namespaced))
            .collect();
        tracing::debug!(
            group_version,
            resources = resources.len(),
            "discovered resource scopes"
        );
        self.known
            .lock()
            .insert(group_version.to_owned(), resources);
        Ok(self.lookup(group_version, plural))
    }
}
