//! A multicluster-runtime provider that engages the workload clusters of Cluster API
//! (`cluster.x-k8s.io`) `Cluster` objects in a management ("host") cluster.
//!
//! # What it watches
//!
//! * `Cluster` objects, read untyped (`DynamicObject`; no generated Cluster API crate), in
//!   [`CapiVersion::V1Beta2`] by default or [`CapiVersion::V1Beta1`] for older installations.
//! * Their kubeconfig Secrets: `<cluster>-kubeconfig`, data key `value`, in the Cluster's
//!   namespace (Cluster API's convention; [`Options::secret`], [`Options::secret_key`]).
//!
//! Both are watched in the [`Namespaces`](mcr_core::scope::Namespaces) scope shared by mcr's
//! providers: `One`, `List` (one watch per namespace) or `AllExcept` (**one** cluster-wide
//! watch whose `metadata.namespace!=` field selector is evaluated by the API server). Several
//! instances can so split one management cluster, as in Cluster API's multiple-instances
//! proposal: some instances take lists of namespaces, a last-resort instance takes everything
//! else (`Namespaces::from_lists` builds a scope from `--namespace` / `--excluded-namespace`
//! style flags; a namespace both listed and excluded is excluded).
//!
//! [`Options::label_selector`] adds a server-side label selector; Cluster API's convention is
//! the `cluster.x-k8s.io/watch-filter` label (its controllers' `--watch-filter=<value>` flag
//! selects `cluster.x-k8s.io/watch-filter=<value>`). [`Options::predicate`] is a test on the
//! object, run by the provider.
//!
//! The Secret watch is metadata-only (no Secret data travels until a kubeconfig is read) and
//! selects the label `cluster.x-k8s.io/cluster-name`, which Cluster API puts on the Secrets it
//! writes ([`Options::secret_label_selector`]). A Secret event makes the provider read the
//! kubeconfig of the Clusters that use it, so a rotation is picked up at once.
//!
//! # Lifecycle
//!
//! The provider reads `Cluster` objects and says what it wants under each cluster name: the
//! kubeconfig in the `Cluster`'s Secret. The [`mcr_core::Engagements`] table does the rest, for
//! every provider alike: it reads the Secret (only when this replica owns the name and wants a
//! new instance), builds the client, probes it, starts, syncs, indexes and engages it, renews or
//! replaces it, and retries it after a failure, each cluster on its own: one broken cluster
//! never delays another.
//!
//! * **Ready** ([`CapiVersion::is_ready`], or [`Options::is_ready`]): the workload cluster is
//!   wanted under the name `<namespace>/<name>` ([`Options::name`]): the Secret is read, the
//!   kubeconfig's current context becomes a client (exec plugins and local file references
//!   refused by default: the policy of [`Options::members`]), `GET /version` is probed, then
//!   the cluster is started, synced, indexed and engaged. Not ready: nothing is engaged.
//! * **Ready, then not ready**: kept engaged by default ([`NotReady::Keep`]: readiness means
//!   "the control plane was initialized", which flaps during upgrades while the API server still
//!   serves); [`NotReady::Disengage`] disengages until it is ready again.
//! * **Paused** (`spec.paused` or the `cluster.x-k8s.io/paused` annotation): ignored by
//!   default; [`Paused::NotReady`] treats it as not ready, [`Paused::Disengage`] disengages it.
//! * **Deleted or `deletionTimestamp` set**, or rejected by the predicate: disengaged.
//! * **Secret changed**: the Secret is read again; the kubeconfig's connection hash
//!   ([`mcr_core::kubeconfig::connection_hash`]) decides: unchanged (same content, another
//!   label, reformatted YAML) keeps the running cluster; only the credentials changed (a new
//!   token or client certificate, same server, CA and settings) renews them in place (same
//!   [`mcr_core::ClusterId`], caches and watches kept, no relist); anything else replaces the
//!   cluster once the new instance has synced (indexes re-applied, re-engaged). If the new
//!   kubeconfig does not work, the running instance stays engaged while the new one is
//!   retried. A `Cluster` event that changes nothing of what it wants reads nothing.
//! * **Secret or key missing, malformed kubeconfig, unreachable server, sync timeout**: the
//!   reason (naming the cluster and the Secret) is [`ClusterState::Failed`], retried with a
//!   capped exponential backoff ([`Options::members`]: `backoff_initial` doubling to
//!   `backoff_max`) and at once when the Secret watch sees the Secret change. A Secret deleted
//!   under an engaged cluster leaves it engaged (Cluster API writes it again); deleting the
//!   `Cluster` disengages. Refused by policy: [`ClusterState::PolicyDenied`], not retried until
//!   the Secret changes.
//! * **Sharded manager**: a cluster name another replica owns is
//!   [`ClusterState::Elsewhere`]: this replica reads no Secret, builds no client and retries
//!   nothing for it. A cluster given to another replica is stopped at once.
//!
//! [`StatusProvider::status`] reports the state of every `Cluster` the watch delivered.
//! Kubeconfig contents and credentials never reach logs, errors or statuses.
//!
//! # RBAC on the management cluster
//!
//! `list`, `watch` on `clusters.cluster.x-k8s.io`, and `get`, `list`, `watch` on `secrets`, in
//! the watched namespaces (a `Role` + `RoleBinding` per namespace for `One` / `List`; a
//! `ClusterRole` + `ClusterRoleBinding` for `AllExcept`, whose watch is cluster-wide). Each
//! verb is shown to be needed, and these to be enough, on a real kube-apiserver by
//! `examples/capi/tests/rbac.rs` (the repository's `deploy/components/rbac-capi`):
//!
//! ```yaml
//! apiVersion: rbac.authorization.k8s.io/v1
//! kind: ClusterRole
//! metadata: { name: mcr-capi-provider }
//! rules:
//! - apiGroups: ["cluster.x-k8s.io"]
//!   resources: ["clusters"]
//!   verbs: ["list", "watch"]
//! - apiGroups: [""]
//!   resources: ["secrets"]
//!   verbs: ["get", "list", "watch"]
//! ```
//!
//! # Compared with Go's `providers/cluster-api`
//!
//! Same: `v1beta2` by default with `v1beta1` selectable; the default readiness rules; the
//! `<cluster>-kubeconfig` Secret with key `value`; cluster names `<namespace>/<name>`; a content
//! hash deciding whether a new kubeconfig replaces the cluster; deletion or a
//! `deletionTimestamp` disengaging; a ready cluster that stops being ready stays engaged (by
//! default).
//!
//! Different, and why:
//! * **Secrets are watched**: Go reads the Secret only on a `Cluster` event, so a rotated
//!   kubeconfig waits for the next one; here a Secret event is enough.
//! * **Namespace scope with server-side exclusion** and a label selector, so several
//!   instances split one management cluster (Go watches every namespace).
//! * **Per-cluster isolation**: Go reconciles with concurrency 1, so one slow cluster (a cache
//!   that does not sync) holds up every other; here each cluster comes up on its own, with
//!   bounded waits and a capped backoff.
//! * **A failing new kubeconfig keeps the old cluster**: Go removes the running cluster before
//!   it parses the new kubeconfig.
//! * **Untrusted kubeconfigs**: exec plugins and local file references are refused by default.
//! * **Connection hash, not byte hash**: reformatting a kubeconfig does not restart the cluster.
//! * **Options**: pause handling and the not-ready policy are options; the predicate is a plain
//!   function on the object.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcr_core::{Provider, ProviderRunnable, Engagements};
//! use mcr_core::scope::Namespaces;
//! use mcr_provider_capi::{CapiProvider, CapiVersion, NotReady, Options};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let host = kube::Client::try_default().await?;
//! let provider = CapiProvider::new(host, Options {
//!     version: CapiVersion::V1Beta2,
//!     // the last-resort instance: everything but the tenants' own namespaces
//!     namespaces: Namespaces::from_lists(Vec::<String>::new(), ["tenant-a", "tenant-b"])?,
//!     label_selector: Some("cluster.x-k8s.io/watch-filter=fleet".into()),
//!     not_ready: NotReady::Disengage,
//!     ..Options::default()
//! });
//! // Usually handed to the Manager, which starts it; here driven by hand:
//! let registry = Engagements::new();
//! let token = CancellationToken::new();
//! let running = {
//!     let (provider, token, registry) = (provider.clone(), token.clone(), registry.clone());
//!     tokio::spawn(async move { provider.start(token, registry).await })
//! };
//! // ... later:
//! let cluster = provider.get(&"fleet/prod-1".into()).await?;
//! token.cancel();
//! running.await??;
//! # Ok(()) }
//! ```

mod dispatch;
mod error;
mod object;
mod options;
mod provider;
mod source;
mod status;

pub use error::Error;
pub use mcr_core::members::{MemberOptions, StatusProvider};
pub use object::{
    CLUSTER_NAME_LABEL, CapiVersion, GROUP, ObjectRef, PAUSED_ANNOTATION, WATCH_FILTER_LABEL,
    is_paused,
};
pub use options::{ClusterFn, DEFAULT_SECRET_KEY, NameFn, NotReady, Options, Paused, SecretFn};
pub use provider::CapiProvider;
pub use status::{ClusterState, ClusterStatus};
