//! Which namespaces of a management cluster a provider watches: [`Namespaces`].
//!
//! Several provider instances (in one process or in several controllers) can split one
//! management cluster: each watches its own list of namespaces, and one "last resort" instance
//! watches every namespace except those. This is the scope model of Cluster API's
//! multiple-instances proposal (`--namespace` / `--excluded-namespace`), shared by every mcr
//! provider that reads a management cluster.
//!
//! [`Namespaces::watches`] turns a scope into the watches to open, so that the filtering
//! happens on the API server:
//!
//! | scope | watches |
//! |---|---|
//! | `One(a)` | one watch in namespace `a` |
//! | `List[a, b]` | one watch per namespace (`a`, `b`) |
//! | `AllExcept[a, b]` | **one** cluster-wide watch with the field selector `metadata.namespace!=a,metadata.namespace!=b` |
//!
//! ```
//! use mcr_core::scope::Namespaces;
//! let central = Namespaces::AllExcept(vec!["tenant-b".into(), "tenant-a".into()]);
//! let watches = central.watches();
//! assert_eq!(watches.len(), 1);
//! assert_eq!(watches[0].namespace, None);
//! assert_eq!(
//!     watches[0].field_selector.as_deref(),
//!     Some("metadata.namespace!=tenant-a,metadata.namespace!=tenant-b"),
//! );
//! ```

use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;

/// Namespace watched by [`Namespaces::default`].
pub const DEFAULT_NAMESPACE: &str = "default";

/// Errors of [`Namespaces::validate`] and [`Namespaces::from_lists`].
///
/// ```
/// use mcr_core::scope::{Namespaces, ScopeError};
/// let err = Namespaces::List(vec![]).validate().unwrap_err();
/// assert!(matches!(err, ScopeError::EmptyList));
/// ```
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScopeError {
    /// A namespace name is empty.
    #[error("a namespace name in the scope is empty")]
    EmptyName,
    /// `List` with no namespace: the provider would watch nothing.
    #[error("the namespace list is empty: nothing would be watched")]
    EmptyList,
    /// Every listed namespace is also excluded (exclusion wins): nothing would be watched.
    #[error("every listed namespace is also excluded ({excluded:?}): nothing would be watched")]
    AllExcluded {
        /// The listed namespaces, all of them excluded.
        excluded: Vec<String>,
    },
}

/// Which namespaces a provider watches.
///
/// ```
/// use mcr_core::scope::Namespaces;
/// let one = Namespaces::One("fleet".into());
/// let two = Namespaces::List(vec!["fleet-a".into(), "fleet-b".into()]);
/// let rest = Namespaces::AllExcept(vec!["tenant-x".into()]);
/// assert!(rest.contains("fleet") && !rest.contains("tenant-x"));
/// assert!(two.contains("fleet-b") && !one.contains("fleet-a"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// Exactly one namespace (one namespaced watch).
    One(String),
    /// Several namespaces (one namespaced watch each; duplicates are ignored).
    List(Vec<String>),
    /// Every namespace except these: one cluster-wide watch whose field selector excludes them
    /// on the server. An empty list means every namespace.
    AllExcept(Vec<String>),
}

impl Default for Namespaces {
    /// `Namespaces::One("default")`.
    fn default() -> Self {
        Namespaces::One(DEFAULT_NAMESPACE.to_string())
    }
}

/// One watch to open for a [`Namespaces`] scope: a namespace (or `None`, cluster-wide) and a
/// field selector to send to the server.
///
/// ```
/// use mcr_core::scope::Namespaces;
/// let w = &Namespaces::One("fleet".into()).watches()[0];
/// assert_eq!(w.namespace.as_deref(), Some("fleet"));
/// assert_eq!(w.field_selector, None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeWatch {
    /// The namespace of a namespaced watch; `None` for a cluster-wide watch.
    pub namespace: Option<String>,
    /// A field selector the server applies (`metadata.namespace!=x,...`), if any.
    pub field_selector: Option<String>,
}

impl ScopeWatch {
    /// An `Api` for a namespaced resource `K`, in the watch's namespace or cluster-wide.
    ///
    /// ```no_run
    /// # fn f(client: kube::Client) {
    /// use k8s_openapi::api::core::v1::Secret;
    /// use mcr_core::scope::Namespaces;
    /// for w in Namespaces::List(vec!["a".into(), "b".into()]).watches() {
    ///     let api: kube::Api<Secret> = w.api(client.clone());
    /// }
    /// # }
    /// ```
    pub fn api<K>(&self, client: kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }

    /// An untyped `Api` for the resource described by `resource`.
    ///
    /// ```no_run
    /// # fn f(client: kube::Client) {
    /// use kube::api::{ApiResource, GroupVersionKind};
    /// use mcr_core::scope::Namespaces;
    /// let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Cluster"));
    /// let w = &Namespaces::AllExcept(vec![]).watches()[0];
    /// let api = w.api_dynamic(client, &ar);
    /// # }
    /// ```
    pub fn api_dynamic(&self, client: kube::Client, resource: &ApiResource) -> Api<DynamicObject> {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client, ns, resource),
            None => Api::all_with(client, resource),
        }
    }

    /// `config` with this watch's field selector added (joined with `,` to one already set).
    ///
    /// ```
    /// use kube::runtime::watcher;
    /// use mcr_core::scope::Namespaces;
    /// let w = &Namespaces::AllExcept(vec!["x".into()]).watches()[0];
    /// let config = w.config(watcher::Config::default().labels("app=web"));
    /// assert_eq!(config.field_selector.as_deref(), Some("metadata.namespace!=x"));
    /// assert_eq!(config.label_selector.as_deref(), Some("app=web"));
    /// ```
    pub fn config(&self, mut config: watcher::Config) -> watcher::Config {
        if let Some(selector) = &self.field_selector {
            config.field_selector = Some(match config.field_selector.take() {
                Some(existing) if !existing.is_empty() => format!("{existing},{selector}"),
                _ => selector.clone(),
            });
        }
        config
    }
}

impl Namespaces {
    /// Builds a scope from CAPI-style flags: namespaces to watch (`--namespace`) and namespaces
    /// to exclude (`--excluded-namespace`).
    ///
    /// With no namespace to watch, the scope is `AllExcept(exclude)`. Otherwise it is the listed
    /// namespaces minus the excluded ones: **exclusion wins**, as in Cluster API's proposal,
    /// and every namespace both listed and excluded is logged as a warning. It is an error when
    /// nothing is left to watch.
    ///
    /// ```
    /// use mcr_core::scope::{Namespaces, ScopeError};
    /// let s = Namespaces::from_lists(["a", "b"], ["b"]).unwrap();
    /// assert_eq!(s, Namespaces::List(vec!["a".into()]));
    /// let s = Namespaces::from_lists(Vec::<String>::new(), ["x"]).unwrap();
    /// assert_eq!(s, Namespaces::AllExcept(vec!["x".into()]));
    /// assert!(matches!(Namespaces::from_lists(["a"], ["a"]), Err(ScopeError::AllExcluded { .. })));
    /// ```
    pub fn from_lists<I, E>(include: I, exclude: E) -> Result<Namespaces, ScopeError>
    where
        I: IntoIterator,
        I::Item: Into<String>,
        E: IntoIterator,
        E::Item: Into<String>,
    {
        let include = sorted(include.into_iter().map(Into::into).collect());
        let exclude = sorted(exclude.into_iter().map(Into::into).collect());
        if include.iter().chain(&exclude).any(String::is_empty) {
            return Err(ScopeError::EmptyName);
        }
        if include.is_empty() {
            return Ok(Namespaces::AllExcept(exclude));
        }
        let (overlap, kept): (Vec<String>, Vec<String>) =
            include.into_iter().partition(|ns| exclude.contains(ns));
        for ns in &overlap {
            tracing::warn!(namespace = %ns, "namespace is both listed and excluded: exclusion wins, it is not watched");
        }
        if kept.is_empty() {
            return Err(ScopeError::AllExcluded { excluded: overlap });
        }
        Ok(Namespaces::List(kept))
    }

    /// Checks the scope: no empty namespace name, and a `List` with at least one namespace.
    ///
    /// ```
    /// use mcr_core::scope::Namespaces;
    /// assert!(Namespaces::default().validate().is_ok());
    /// assert!(Namespaces::One(String::new()).validate().is_err());
    /// assert!(Namespaces::AllExcept(vec![]).validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<(), ScopeError> {
        let names: &[String] = match self {
            Namespaces::One(ns) => std::slice::from_ref(ns),
            Namespaces::List(list) if list.is_empty() => return Err(ScopeError::EmptyList),
            Namespaces::List(list) | Namespaces::AllExcept(list) => list,
        };
        if names.iter().any(String::is_empty) {
            return Err(ScopeError::EmptyName);
        }
        Ok(())
    }

    /// Whether an object in `namespace` is in scope.
    ///
    /// ```
    /// use mcr_core::scope::Namespaces;
    /// assert!(Namespaces::default().contains("default"));
    /// assert!(Namespaces::AllExcept(vec![]).contains("anything"));
    /// ```
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Namespaces::One(ns) => ns == namespace,
            Namespaces::List(list) => list.iter().any(|ns| ns == namespace),
            Namespaces::AllExcept(excluded) => !excluded.iter().any(|ns| ns == namespace),
        }
    }

    /// The namespaces that get their own namespaced watch (sorted, deduplicated), or `None` for
    /// a single cluster-wide watch ([`Namespaces::AllExcept`]).
    fn watched(&self) -> Option<Vec<String>> {
        match self {
            Namespaces::One(ns) => Some(vec![ns.clone()]),
            Namespaces::List(list) => Some(sorted(list.clone())),
            Namespaces::AllExcept(_) => None,
        }
    }

    /// The watches to open for this scope: one per namespace for `One` and `List` (sorted,
    /// deduplicated), and exactly one cluster-wide watch for `AllExcept`, excluding its
    /// namespaces with a `metadata.namespace!=` field selector evaluated by the server.
    ///
    /// ```
    /// use mcr_core::scope::Namespaces;
    /// let list = Namespaces::List(vec!["b".into(), "a".into()]).watches();
    /// assert_eq!(list.len(), 2);
    /// assert_eq!(list[0].namespace.as_deref(), Some("a"));
    /// assert_eq!(Namespaces::AllExcept(vec![]).watches()[0].field_selector, None);
    /// ```
    pub fn watches(&self) -> Vec<ScopeWatch> {
        match self {
            Namespaces::One(_) | Namespaces::List(_) => self
                .watched()
                .unwrap_or_default()
                .into_iter()
                .map(|ns| ScopeWatch {
                    namespace: Some(ns),
                    field_selector: None,
                })
                .collect(),
            Namespaces::AllExcept(excluded) => {
                let selector = sorted(excluded.clone())
                    .iter()
                    .map(|ns| format!("metadata.namespace!={ns}"))
                    .collect::<Vec<_>>()
                    .join(",");
                vec![ScopeWatch {
                    namespace: None,
                    field_selector: (!selector.is_empty()).then_some(selector),
                }]
            }
        }
    }
}

fn sorted(mut list: Vec<String>) -> Vec<String> {
    list.sort();
    list.dedup();
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusion_wins_over_listing() {
        let s = Namespaces::from_lists(["a", "b", "c"], ["c", "b", "z"]).unwrap();
        assert_eq!(s, Namespaces::List(vec!["a".into()]));
        assert!(!s.contains("b") && !s.contains("c"));
    }

    #[test]
    fn empty_names_are_refused() {
        assert_eq!(
            Namespaces::from_lists([""], Vec::<String>::new()),
            Err(ScopeError::EmptyName)
        );
        assert_eq!(
            Namespaces::AllExcept(vec!["".into()]).validate(),
            Err(ScopeError::EmptyName)
        );
    }

    #[test]
    fn all_except_is_one_watch_with_a_server_side_selector() {
        let w = Namespaces::AllExcept(vec!["b".into(), "a".into(), "b".into()]).watches();
        assert_eq!(
            w,
            vec![ScopeWatch {
                namespace: None,
                field_selector: Some("metadata.namespace!=a,metadata.namespace!=b".into()),
            }]
        );
        let config = w[0].config(watcher::Config::default().fields("metadata.name=x"));
        assert_eq!(
            config.field_selector.as_deref(),
            Some("metadata.name=x,metadata.namespace!=a,metadata.namespace!=b")
        );
    }

    #[test]
    fn list_is_one_watch_per_namespace() {
        let w = Namespaces::List(vec!["b".into(), "a".into(), "a".into()]).watches();
        let ns: Vec<_> = w.iter().map(|w| w.namespace.clone()).collect();
        assert_eq!(ns, vec![Some("a".to_string()), Some("b".to_string())]);
        assert!(w.iter().all(|w| w.field_selector.is_none()));
    }
}
