//! [`ClusterScope`]: which clusters one input of a controller watches, and the cluster filters
//! that pick among the provider's clusters.

use std::sync::Arc;

use mcr_core::{Cluster, ClusterName};

/// Decides whether a controller, or one of its inputs, engages a provider cluster.
pub(crate) type ClusterFilter = Arc<dyn Fn(&ClusterName, &Cluster) -> bool + Send + Sync>;

/// Whether `filter` lets a controller or input engage `cluster`: the host always passes (its
/// scope decides), as does every cluster when there is no filter.
pub(crate) fn passes(
    filter: Option<&ClusterFilter>,
    name: &ClusterName,
    cluster: &Cluster,
) -> bool {
    name.is_host() || filter.is_none_or(|f| f(name, cluster))
}

/// Which clusters one input (`for_`, `owns`, `watches` and their variants) watches: the
/// manager's host cluster, the provider's clusters, or both. Set per input with
/// [`WatchOptions::scope`](crate::WatchOptions::scope); an input that sets none takes the
/// controller's default (see [`Builder::scope`](crate::Builder::scope)): the provider
/// clusters, or every cluster when the manager has no provider.
///
/// The scope of the reconciled type (`for_*`) decides **where reconciles run**: a request is
/// reconciled only in a cluster of that scope. Every other input may watch elsewhere and map
/// its objects to requests for any cluster, so both directions of Go's "primary objects on
/// one side, watched objects on the other" are one setting:
///
/// ```no_run
/// # use std::sync::Arc;
/// # use k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// # use kube::{ResourceExt, runtime::reflector::ObjectRef};
/// use mcr_core::ClusterName;
/// use mcr_manager::{ClusterScope, Controller, Request, WatchOptions};
/// # fn demo(mgr: mcr_manager::Manager) {
/// // Reconcile ConfigMaps on the host, triggered by Secrets in every member.
/// let b = Controller::new(&mgr)
///     .for_with::<ConfigMap>(WatchOptions::new().scope(ClusterScope::Host))
///     .watches_with::<Secret, _>(WatchOptions::new(), |s: Arc<Secret>, _member: &ClusterName| {
///         Some(Request::new(ClusterName::host(), ObjectRef::new(&s.name_any()).within("default")))
///     });
///
/// // Reconcile ConfigMaps in every member, triggered by Secrets on the host.
/// let b = Controller::new(&mgr)
///     .for_::<ConfigMap>()
///     .watches_with::<Secret, _>(WatchOptions::new().scope(ClusterScope::Host), |s: Arc<Secret>, _host: &ClusterName| {
///         vec![Request::new("member-1", ObjectRef::new(&s.name_any()).within("default"))]
///     });
/// # }
/// ```
///
/// A [`cluster_filter`](crate::Builder::cluster_filter) picks among provider clusters in every
/// scope; whether the host is watched is said by the scope alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClusterScope {
    /// The manager's host cluster only.
    Host,
    /// The provider's clusters (every member the controller engages).
    Provider,
    /// The host cluster and the provider's clusters.
    All,
}

impl ClusterScope {
    /// Whether a cluster (the host if `host`, else a provider cluster) is in this scope.
    ///
    /// ```
    /// use mcr_manager::ClusterScope;
    /// assert!(ClusterScope::All.includes(true) && ClusterScope::All.includes(false));
    /// assert!(ClusterScope::Host.includes(true) && !ClusterScope::Host.includes(false));
    /// assert!(!ClusterScope::Provider.includes(true));
    /// ```
    pub fn includes(self, host: bool) -> bool {
        match self {
            Self::Host => host,
            Self::Provider => !host,
            Self::All => true,
        }
    }

    /// The scope of these two flags (`None` when both are false).
    pub(crate) fn from_flags(host: bool, provider: bool) -> Option<Self> {
        match (host, provider) {
            (true, true) => Some(Self::All),
            (true, false) => Some(Self::Host),
            (false, true) => Some(Self::Provider),
            (false, false) => None,
        }
    }
}
