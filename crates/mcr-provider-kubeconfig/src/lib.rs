//! A multicluster-runtime provider that engages one member cluster per kubeconfig Secret stored
//! in a management ("host") cluster.
//!
//! # What it watches
//!
//! Secrets in the chosen [`Namespaces`] (one, a list, or all except some) that carry the label
//! `sigs.k8s.io/multicluster-runtime-kubeconfig: "true"` (key configurable, the value must be
//! `"true"`), with a kubeconfig under `data.kubeconfig` (key configurable). The watch is
//! label-selected server-side: one namespaced watch per namespace, or one cluster-wide watch
//! filtered client-side for [`Namespaces::AllExcept`], so several instances can split one
//! management cluster without seeing each other's Secrets.
//!
//! # Naming
//!
//! The cluster name is the Secret's name. If two watched namespaces hold Secrets of the same
//! name, ownership does not depend on which one the provider sees first: the Secret with the
//! oldest `creationTimestamp` owns the name, ties going to the smallest namespace. Every other
//! claimant is logged at `WARN` (naming both `namespace/name` pairs, never their content),
//! reported as [`SecretState::Conflict`] by [`StatusProvider::status`], and takes over
//! when the owner goes away. A restart therefore gives the name to the same Secret, and a
//! Secret created later in another watched namespace cannot take "prod" over; an older one
//! listed late during start-up replaces a younger one engaged moments before.
//!
//! # Lifecycle
//!
//! The provider reads Secrets and says what it wants under each cluster name (the owning
//! Secret's kubeconfig); the [`mcr_core::Engagements`] table does the rest, for every provider
//! alike: it builds the client with the client options and policy of [`Options::members`],
//! probes it with `GET /version`, starts, syncs, indexes and engages it, renews or replaces it,
//! and retries it after a failure.
//!
//! * **Created**: its kubeconfig's current context is wanted under the Secret's name.
//! * **Updated**: the connection hash of the kubeconfig's current context (server, CA,
//!   settings and credentials) decides. Unchanged (an annotation, label, other data key or
//!   only formatting changed): nothing happens. Only the credentials changed (same server, CA
//!   and settings, a static token or client certificate): they are renewed in place, keeping
//!   the cluster, its caches and watches (same [`mcr_core::ClusterId`], no relist). Anything
//!   else: a new instance replaces the old one once it has synced (new
//!   [`mcr_core::ClusterId`], indexes re-applied, re-engaged); until then, and for as long as
//!   the new kubeconfig is refused or its server does not answer, the old one keeps serving.
//! * **Deleted**, `deletionTimestamp` set, or label removed: the cluster is removed.
//! * **Key missing or empty**: logged with the Secret's `namespace/name`,
//!   [`SecretState::MissingKey`] (a cluster already engaged from it is kept); the Secret stays
//!   watched, so adding the key engages it.
//! * **Kubeconfig that does not parse** (or whose current context does not resolve): logged
//!   with the Secret's `namespace/name`, [`SecretState::Invalid`], and its cluster reported
//!   failed in `member_statuses()` with that reason; nothing is tried until the Secret changes
//!   (a cluster already engaged from it is kept).
//! * **Unreachable server, client that cannot be built, caches that do not sync**:
//!   [`SecretState::Failed`], retried by the table with a capped exponential backoff
//!   ([`Options::members`]: `backoff_initial` doubling up to `backoff_max`); no other cluster
//!   is affected.
//! * **Policy violation** (an `exec` or `auth-provider` stanza, a local file reference or a
//!   `proxy-url`, refused by default): [`SecretState::PolicyDenied`], not retried until the
//!   Secret changes.
//! * **Sharded manager**: a cluster name another replica owns is
//!   [`SecretState::Elsewhere`]: this replica keeps its kubeconfig and builds no client, makes
//!   no request to it and retries nothing. A cluster given to another replica is stopped at
//!   once (its token cancelled).
//!
//! [`StatusProvider::status`] reports the outcome per Secret; `member_statuses()` (the
//! [`Provider`](mcr_core::Provider) trait) reports the table's record of every wanted cluster.
//! Log lines carry the cluster name and Secret; kubeconfig contents and credentials are never
//! logged.
//!
//! # RBAC on the management cluster
//!
//! The provider only needs `list` and `watch` on Secrets in the watched namespaces (shown on a
//! real kube-apiserver by `examples/kubeconfig/tests/rbac.rs`). For
//! one namespace (repeat the Role and RoleBinding per namespace for a list):
//!
//! ```yaml
//! apiVersion: rbac.authorization.k8s.io/v1
//! kind: Role
//! metadata: { name: mcr-kubeconfig-provider, namespace: fleet }
//! rules:
//! - apiGroups: [""]
//!   resources: ["secrets"]
//!   verbs: ["list", "watch"]
//! ---
//! apiVersion: rbac.authorization.k8s.io/v1
//! kind: RoleBinding
//! metadata: { name: mcr-kubeconfig-provider, namespace: fleet }
//! roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: mcr-kubeconfig-provider }
//! subjects:
//! - { kind: ServiceAccount, name: my-controller, namespace: my-controller-system }
//! ```
//!
//! For [`Namespaces::AllExcept`] use a `ClusterRole` with the same rule and a
//! `ClusterRoleBinding` (the watch is cluster-wide; excluded namespaces are filtered out by
//! the provider, not by RBAC).
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcr_core::{Provider, ProviderRunnable, Engagements};
//! use mcr_provider_kubeconfig::{KubeconfigProvider, Namespaces, Options};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let host = kube::Client::try_default().await?;
//! let provider = KubeconfigProvider::new(host, Options {
//!     namespaces: Namespaces::List(vec!["fleet-eu".into(), "fleet-us".into()]),
//!     ..Options::default()
//! });
//! // Usually handed to the Manager, which starts it; here driven by hand:
//! let registry = Engagements::new();
//! let token = CancellationToken::new();
//! let running = {
//!     let provider = provider.clone();
//!     let (token, registry) = (token.clone(), registry.clone());
//!     tokio::spawn(async move { provider.start(token, registry).await })
//! };
//! // ... registry.names() lists the engaged clusters ...
//! let cluster = provider.get(&"member-1".into()).await?;
//! token.cancel();
//! running.await??;
//! # Ok(()) }
//! ```

mod dispatch;
mod error;
mod options;
mod provider;
mod status;

pub use error::Error;
pub use mcr_core::members::{MemberOptions, StatusProvider};
pub use options::{DEFAULT_DATA_KEY, DEFAULT_LABEL, DEFAULT_NAMESPACE, Namespaces, Options};
pub use provider::KubeconfigProvider;
pub use status::{SecretRef, SecretState, SecretStatus};
