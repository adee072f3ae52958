//! [`NamespaceView`]: how a namespace cluster's cache sees the host cluster's cache.

use kube::api::ObjectMeta;
use mcr_core::CacheView;

use crate::client::VIRTUAL_NAMESPACE;

/// Shows the objects of one host namespace as objects of `default`, every cluster-scoped
/// object unchanged, and hides the objects of every other namespace. The namespace provider
/// builds each cluster's cache with it ([`mcr_core::Cache::derived`]).
///
/// ```
/// use kube::api::ObjectMeta;
/// use mcr_core::CacheView;
/// use mcr_provider_namespace::NamespaceView;
///
/// let view = NamespaceView::new("team-a");
/// let mut meta = ObjectMeta { namespace: Some("team-a".into()), ..Default::default() };
/// assert!(view.view(&mut meta));
/// assert_eq!(meta.namespace.as_deref(), Some("default"));
/// let mut other = ObjectMeta { namespace: Some("team-b".into()), ..Default::default() };
/// assert!(!view.view(&mut other));
/// ```
#[derive(Clone, Debug)]
pub struct NamespaceView {
    namespace: String,
}

impl NamespaceView {
    /// The view of host namespace `namespace`.
    ///
    /// ```
    /// let view = mcr_provider_namespace::NamespaceView::new("team-a");
    /// assert_eq!(view.namespace(), "team-a");
    /// ```
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
        }
    }

    /// The host namespace shown.
    ///
    /// ```
    /// assert_eq!(mcr_provider_namespace::NamespaceView::new("x").namespace(), "x");
    /// ```
    pub fn namespace(&self) -> &str {
        &self.namespace
    }
}

impl CacheView for NamespaceView {
    fn view(&self, meta: &mut ObjectMeta) -> bool {
        match meta.namespace.as_deref() {
            None | Some("") => true,
            Some(ns) if ns == self.namespace => {
                meta.namespace = Some(VIRTUAL_NAMESPACE.to_owned());
                true
            }
            Some(_) => false,
        }
    }
}
