//! A multicluster-runtime provider that engages the member clusters of a ClusterProfile
//! inventory (KEP-4322, `multicluster.x-k8s.io/v1alpha1`), the portable inventory that OCM,
//! Fleet, Karmada, Clusternet and GKE Fleet expose on a hub cluster.
//!
//! # What it watches
//!
//! `ClusterProfile`s in the chosen [`Namespaces`] of the hub (optionally label-selected, e.g.
//! `x-k8s.io/cluster-manager=ocm`), and with the Secret strategy the Secrets labelled for this
//! consumer in the same namespaces. Each profile is converted on its own, so one malformed
//! profile is reported and the others carry on.
//!
//! # Credentials: exactly one [`Strategy`]
//!
//! * **Access providers (KEP-5339).** The operator's provider file ([`AccessProviders`], the
//!   JSON format of the Go library) lists credential plugins. The first plugin (in file order)
//!   that the profile's `status.accessProviders` (or deprecated `credentialProviders`;
//!   `accessProviders` wins on the same name) names is used. The server, CA data and proxy
//!   come from the profile's entry; the `client.authentication.k8s.io/exec` extension reaches
//!   the plugin as `ExecCredential.spec.cluster.config` (with `provideClusterInfo`); the
//!   `additional-args` / `additional-envs` extensions are applied under the file's
//!   [`ArgsPolicy`] / [`EnvPolicy`] to a fresh copy of the file's entry each time (a profile
//!   sets only the variables listed with [`AccessProviders::profile_env`]). The client is
//!   built with an exec policy allowing exactly the file's command, for the API servers the
//!   operator lists with [`AccessProviders::servers`] (every profile is refused until then);
//!   a profile's proxy is refused unless [`AccessProviders::allow_profile_proxy`]. Nothing in
//!   a profile can choose a command or send the plugin's credential elsewhere.
//! * **Secret (deprecated upstream).** The one Secret in the profile's namespace labelled
//!   `x-k8s.io/cluster-inventory-consumer=<consumer>` and `x-k8s.io/cluster-profile=<profile>`,
//!   kubeconfig under data key `Config`. None or several is a per-profile error. Such
//!   kubeconfigs are untrusted: exec plugins and local file references are refused unless
//!   the policy of [`Options::members`] allows them.
//!
//! # Lifecycle
//!
//! The provider reads profiles (and Secrets) and says what it wants under each cluster name: the
//! owning profile's connection. The [`mcr_core::Engagements`] table does the rest, for every
//! provider alike: it builds the client (running the plugin), probes it, starts, syncs, indexes
//! and engages it, renews or replaces it, and retries it after a failure.
//!
//! * **Ready** ([`Options::is_ready`], default: condition `ControlPlaneHealthy` is `True`): its
//!   connection is wanted: the client is built (running the plugin, bounded by
//!   [`Options::credential_timeout`]), probed with `GET /version`, then started, synced,
//!   indexed and engaged.
//! * **Updated**: only a material change re-engages. The connection hash covers the server,
//!   CA, proxy, the plugin's cluster config and the plugin's command, arguments and
//!   environment after the policies; a condition, property, label or ignored extension change
//!   keeps the running cluster.
//! * **No longer ready**: by default the cluster stays wanted as it was, so an engaged one is
//!   kept (a health flap would otherwise drop caches and queued work; the member's watches
//!   retry on their own) and no new connection is built from the profile until it is ready
//!   again. [`Options::disengage_when_unhealthy`] disengages it instead.
//! * **Deleted**, or `deletionTimestamp` set: the cluster is removed.
//! * **Failure** (plugin fails, hangs past the bound, prints garbage; server unreachable):
//!   reported as [`ProfileState::Failed`] with the reason (naming the cluster) and retried by
//!   the table with a capped backoff; no other cluster is affected, an instance engaged before
//!   keeps serving. Plugin output never reaches logs or errors.
//! * **Cannot be resolved** (no matching provider, no or several Secrets, malformed extension,
//!   a kubeconfig that does not parse): [`ProfileState::Invalid`] until the profile or its
//!   Secrets change.
//! * **Refused by the policy** (an exec plugin, auth-provider, local file or `proxy-url` in a
//!   Secret's kubeconfig, a server the operator did not allow): [`ProfileState::PolicyDenied`],
//!   not retried until the profile or its Secrets change.
//! * **Sharded manager**: a cluster name another replica owns is [`ProfileState::Elsewhere`]:
//!   this replica builds no client, runs no plugin and retries nothing for it. A cluster given
//!   to another replica is stopped at once.
//!
//! # Naming
//!
//! `<namespace>/<name>` by default; [`Naming::ClusterSetProperty`] uses the KEP-2149
//! property `cluster.clusterset.k8s.io`. If two profiles map to one name, the oldest
//! (`creationTimestamp`, then `namespace/name`) owns it whatever the list order, and nothing
//! is engaged before the initial lists are complete; the other is logged with both profiles
//! and reported as [`ProfileState::Conflict`] until it ranks first.
//!
//! # RBAC on the hub
//!
//! `list`, `watch` on `clusterprofiles.multicluster.x-k8s.io` in the watched namespaces, and
//! with the Secret strategy `list`, `watch` on `secrets` too. The access-provider strategy's
//! rule is shown to be needed and enough on a real kube-apiserver by
//! `examples/cluster-inventory/tests/rbac.rs` (the repository's
//! `deploy/components/rbac-cluster-inventory`).
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcr_core::{ProviderRunnable, Engagements};
//! use mcr_provider_cluster_inventory::{
//!     AccessProviders, ClusterInventoryProvider, Namespaces, Options, Strategy,
//! };
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // A malformed file is a startup error naming the file and the problem.
//! let file = AccessProviders::from_file("clusterprofile-provider-file.json".as_ref())?
//!     .servers(["*.fleet.example.com"]);
//! let hub = kube::Client::try_default().await?;
//! let provider = ClusterInventoryProvider::new(hub, Options {
//!     namespaces: Namespaces::One("fleet-system".into()),
//!     ..Options::new(Strategy::AccessProviders(Arc::new(file)))
//! })?;
//! // Usually handed to the Manager, which starts it; here driven by hand:
//! let registry = Engagements::new();
//! let token = CancellationToken::new();
//! tokio::spawn({
//!     let (provider, token) = (provider.clone(), token.clone());
//!     async move { provider.start(token, registry).await }
//! });
//! # Ok(()) }
//! ```

mod access;
mod dispatch;
mod error;
mod options;
mod profile;
mod provider;
mod resolve;
mod status;

pub use access::{
    ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, AccessProviders, ArgsPolicy,
    EXEC_EXTENSION, EnvPolicy, EnvVar, ExecSpec, ProviderConfig,
};
pub use error::{Error, ProviderFileError};
pub use mcr_core::members::{MemberOptions, StatusProvider};
/// The namespace scope shared by mcr providers (`One` / `List` / `AllExcept`).
pub use mcr_core::scope::Namespaces;
pub use options::{
    Naming, Options, ReadyFn, SECRET_DATA_KEY, SECRET_LABEL_CONSUMER, SECRET_LABEL_PROFILE,
    Strategy,
};
pub use profile::{
    AccessProvider, CONDITION_CONTROL_PLANE_HEALTHY, ClusterManager, ClusterProfile,
    ClusterProfileSpec, ClusterProfileStatus, Condition, GROUP, KIND, LABEL_CLUSTER_MANAGER,
    PLURAL, PROPERTY_CLUSTER_NAME, ProfileRef, Property, VERSION,
};
pub use provider::ClusterInventoryProvider;
pub use status::{ProfileState, ProfileStatus};
