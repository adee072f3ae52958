//! Which namespaces of the hub are watched.
//!
//! TODO(scope): replace with `mcr_core::scope` once the shared namespace scope type lands in
//! mcr-core; this module only exists until then and keeps the same three variants.

/// Which namespaces of the hub cluster the provider watches for ClusterProfiles (and, with the
/// Secret strategy, for their kubeconfig Secrets).
///
/// ```
/// use mcr_provider_cluster_inventory::Namespaces;
/// let one = Namespaces::One("fleet".into());
/// let rest = Namespaces::AllExcept(vec!["kube-system".into()]);
/// assert!(one.contains("fleet") && !one.contains("other"));
/// assert!(rest.contains("fleet") && !rest.contains("kube-system"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// Exactly one namespace (one namespaced watch).
    One(String),
    /// Several namespaces (one namespaced watch each; duplicates are ignored).
    List(Vec<String>),
    /// Every namespace except these (one cluster-wide watch, filtered client-side). An empty
    /// list means every namespace.
    AllExcept(Vec<String>),
}

impl Default for Namespaces {
    /// Every namespace: ClusterProfiles usually live in one namespace per cluster manager.
    fn default() -> Self {
        Namespaces::AllExcept(Vec::new())
    }
}

impl Namespaces {
    /// Whether an object in `namespace` is in scope.
    ///
    /// ```
    /// use mcr_provider_cluster_inventory::Namespaces;
    /// assert!(Namespaces::default().contains("anything"));
    /// assert!(Namespaces::List(vec!["a".into()]).contains("a"));
    /// ```
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Namespaces::One(ns) => ns == namespace,
            Namespaces::List(list) => list.iter().any(|ns| ns == namespace),
            Namespaces::AllExcept(excluded) => !excluded.iter().any(|ns| ns == namespace),
        }
    }

    /// The namespaces that get their own namespaced watch (sorted, deduplicated), or `None` for
    /// one cluster-wide watch ([`Namespaces::AllExcept`]).
    ///
    /// ```
    /// use mcr_provider_cluster_inventory::Namespaces;
    /// let ns = Namespaces::List(vec!["b".into(), "a".into(), "b".into()]);
    /// assert_eq!(ns.watched(), Some(vec!["a".to_string(), "b".to_string()]));
    /// assert_eq!(Namespaces::default().watched(), None);
    /// ```
    pub fn watched(&self) -> Option<Vec<String>> {
        match self {
            Namespaces::One(ns) => Some(vec![ns.clone()]),
            Namespaces::List(list) => {
                let mut list = list.clone();
                list.sort();
                list.dedup();
                Some(list)
            }
            Namespaces::AllExcept(_) => None,
        }
    }
}
