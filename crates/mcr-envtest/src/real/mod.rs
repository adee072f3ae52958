//! The real backend: `kube-apiserver` processes over a shared `etcd`, behind the same
//! [`TestCluster`](crate::TestCluster) / [`Fleet`](crate::Fleet) API as the emulator.
//!
//! Select it with `MCR_ENVTEST=real` (see [`backend`](crate::backend())) or explicitly with
//! [`FleetBuilder::backend`](crate::FleetBuilder::backend). The binaries are found like
//! controller-runtime's envtest finds them ([`Assets::find`]): `TEST_ASSET_KUBE_APISERVER`,
//! `TEST_ASSET_ETCD`, `TEST_ASSET_KUBECTL`, then the `KUBEBUILDER_ASSETS` directory, then the
//! cache `cargo xtask assets` fills ([`assets_dir`], Kubernetes [`KUBERNETES_VERSION`]).
//!
//! # What a real cluster is
//!
//! - One `etcd` per test process (started on first use, on free loopback ports, data in a
//!   temporary directory, `--unsafe-no-fsync`), shared by every API server of the process,
//!   each under its own `--etcd-prefix`.
//! - Per cluster: a generated CA, a serving certificate for `127.0.0.1`, `::1` and
//!   `localhost`, a service-account key pair; `kube-apiserver` on `127.0.0.1` with RBAC
//!   authorization and a static admin bearer token in the group `system:masters` (so
//!   kubeconfigs look like the emulator's); ready once `/readyz` is ok and the namespaces
//!   `default`, `kube-system`, `kube-public` and `kube-node-lease` exist.
//! - A loopback TCP proxy in front of the API server: [`TestCluster::url`](crate::TestCluster::url),
//!   the kubeconfig and every client point at it, so [`stop`](crate::TestCluster::stop),
//!   [`partition`](crate::TestCluster::partition) (`Refuse` / `Hang`) and
//!   [`set_latency`](crate::TestCluster::set_latency) behave as on the emulator.
//!   [`restart`](crate::TestCluster::restart) starts the API server again on the same port
//!   with the same certificates, token and data.
//! - Every cluster is served over HTTPS: [`TestCluster::start`](crate::TestCluster::start)
//!   and [`start_https`](crate::TestCluster::start_https) are the same, and
//!   [`client`](crate::TestCluster::client) is an HTTPS client through the proxy.
//! - [`TestCluster::start_with_admission_config`](crate::TestCluster::start_with_admission_config)
//!   passes an `AdmissionConfiguration` file to the API server
//!   (`--admission-control-config-file`), for example the client certificate it presents to
//!   admission webhooks.
//! - Dropping the last handle of a cluster kills its API server at once (the emulator's
//!   in-process clients keep working after that; a real cluster's do not).
//!
//! Processes never outlive the test: each runs under a small `sh` guard holding a pipe to the
//! test process; when the cluster is dropped, or the test process exits or is killed, the
//! guard SIGKILLs the binary (and the etcd guard deletes the process's temporary directory, which
//! holds etcd's data and every API server's certificates and log). A stop sends SIGTERM and SIGKILLs after 10 s. Start errors carry
//! the tail of the process's log.
//!
//! # What is not there
//!
//! As with controller-runtime's envtest, only etcd and the API server run: there is **no
//! kube-controller-manager, scheduler or kubelet**. So there is no garbage collection
//! (owner references do not delete dependents), no namespace finalization (a deleted
//! namespace stays `Terminating` forever), Deployments get no ReplicaSets or Pods, no
//! ServiceAccount token controller and no `kube-root-ca.crt` ConfigMaps. The `ServiceAccount`
//! admission plugin is off (nothing would create the `default` ServiceAccount).
//!
//! The emulator-only hooks ([`compact`](crate::TestCluster::compact),
//! [`inject_error`](crate::TestCluster::inject_error), request counters) panic on a real
//! cluster, naming the hook; tests that need them start with
//! `if !mcr_envtest::require_emulator("why") { return; }`, which prints the test as skipped.
//!
//! # Cost
//!
//! A real cluster costs seconds to start and a few hundred MiB of memory (an API server);
//! fleets on the real backend are capped at [`MAX_FLEET`] clusters.

mod apiserver;
mod assets;
mod control;
mod etcd;
mod pki;
mod process;
mod proxy;

pub use assets::{
    Assets, KUBEBUILDER_ASSETS, KUBERNETES_VERSION, TEST_ASSET_ETCD, TEST_ASSET_KUBE_APISERVER,
    TEST_ASSET_KUBECTL, assets_dir,
};
pub(crate) use control::ControlPlane;

/// The largest [`Fleet`](crate::Fleet) the real backend starts (each cluster is a
/// `kube-apiserver` process); bigger fleets are an [`Error::FleetTooLarge`](crate::Error).
pub const MAX_FLEET: usize = 8;
