//! Helpers shared by the integration tests of the mcr crates (dev-only, not published):
//! deadlines, the test `tracing` subscriber, a [`Manager`](mcr_manager::Manager) over an envtest
//! fleet ([`Env`]), a provider running against an [`Engagements`] table ([`Running`]), test
//! timings for [`MemberOptions`], CRDs, object builders and API helpers over [`mcr_envtest`]
//! clusters, and a coordinator the test sets ([`Owned`]) with the process's memory ([`rss`])
//! for sharding tests; clients that alter some requests ([`listing_last`],
//! [`without_lease_lists`], [`with_deaf_lease_watches`]).
//!
//! Clusters start on the backend `MCR_ENVTEST` selects: the emulator unless it says `real`
//! (then `KUBEBUILDER_ASSETS` names the kube-apiserver and etcd binaries).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use mcr_core::members::{MemberOptions, MemberProvider};
use mcr_core::{Aware, Cluster, ClusterId, ClusterName, Engagements, ProviderRunnable};
use mcr_envtest::{Fleet, TestCluster};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod crd;
mod env;
mod held;
mod logs;
mod objects;
mod rbac;
mod refuse;
mod shard;

pub use crd::{capi_cluster, capi_cluster_crd, capi_clusters, capi_ready_status, install_crd};
pub use env::Env;
pub use held::listing_last;
pub use logs::{Logs, init_tracing};
pub use mcr_envtest::wait::{eventually, eventually_async};
pub use objects::{
    animal_configmap, animal_index, api_code, assert_watch_kept, configmap, delete_secret,
    label_index, minted_kubeconfig, request_counts, wait_renewals,
};
pub use rbac::{client_of, require_real, role_only_kubeconfig};
pub use refuse::{with_deaf_lease_watches, without_lease_lists};
pub use shard::{OTHER_REPLICA, Owned, active_token, rss};

/// A generous bound for a condition a test waits on: 30 s. It bounds a failing test; it is not
/// a timing assertion.
pub const DEADLINE: Duration = mcr_envtest::wait::DEFAULT_TIMEOUT;

/// A bound twice [`DEADLINE`], 60 s, for waits through several steps: a provider engaging a
/// cluster (fetch, TLS, informer sync), a CRD becoming served, a webhook round trip. How long
/// [`Running::wait_for`] and [`Env::run_engaged`] wait.
pub const WAIT: Duration = Duration::from_secs(60);

/// Member settings with test timings: a 10 s sync timeout, retries after 50 ms doubling up to
/// 500 ms; everything else at its default.
pub fn fast_members() -> MemberOptions {
    MemberOptions {
        sync_timeout: Duration::from_secs(10),
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        ..MemberOptions::default()
    }
}

/// A provider running in a task against a table of its own, with a subscriber `A` (none by
/// default).
pub struct Running<P, A = ()> {
    /// The provider (a clone of the one running).
    pub provider: P,
    /// The table the provider was started with, where the engaged clusters are looked up.
    pub registry: Engagements,
    /// The table's subscriber.
    pub aware: Arc<A>,
    /// Cancels the run.
    pub token: CancellationToken,
    /// The run.
    pub task: JoinHandle<Result<(), mcr_core::Error>>,
}

impl<P: MemberProvider + Clone> Running<P> {
    /// Starts `provider` against a new table.
    pub fn spawn(provider: P) -> Self {
        Self::start(provider, Engagements::new(), Arc::new(()))
    }
}

impl<P: MemberProvider + Clone, A: Aware> Running<P, A> {
    /// Starts `provider` against a new table with `aware` subscribed.
    pub fn spawn_with(provider: P, aware: Arc<A>) -> Self {
        let table = Engagements::new();
        table.subscribe(aware.clone());
        Self::start(provider, table, aware)
    }
}

impl<P: MemberProvider + Clone, A> Running<P, A> {
    fn start(provider: P, registry: Engagements, aware: Arc<A>) -> Self {
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (provider, token, table) = (provider.clone(), token.clone(), registry.clone());
            async move { provider.start(token, table).await }
        });
        Running {
            provider,
            registry,
            aware,
            token,
            task,
        }
    }

    /// Names of the engaged clusters, sorted.
    pub fn names(&self) -> Vec<String> {
        self.registry
            .names()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }

    /// Whether `name` is engaged.
    pub fn has(&self, name: &str) -> bool {
        self.registry.get(&ClusterName::new(name)).is_ok()
    }

    /// The id of the instance engaged as `name`.
    pub fn id(&self, name: &str) -> Option<ClusterId> {
        self.registry
            .get(&ClusterName::new(name))
            .ok()
            .map(|c| c.id())
    }

    /// The client of the engaged cluster `name` (panics when it is not engaged).
    pub fn client(&self, name: &str) -> kube::Client {
        self.registry.get(&ClusterName::new(name)).unwrap().client()
    }

    /// Waits (up to [`WAIT`]) until `name` is engaged, and returns it.
    pub async fn wait_for(&self, name: &str) -> Cluster {
        eventually(&format!("cluster {name} engaged"), WAIT, || self.has(name)).await;
        self.registry.get(&ClusterName::new(name)).expect("engaged")
    }

    /// Cancels the run, checks that it ended with `Ok` and that the provider removed every
    /// member.
    pub async fn stop(self) {
        self.token.cancel();
        self.task.await.unwrap().unwrap();
        assert!(
            self.provider.members().engagements().names().is_empty(),
            "clusters removed on stop"
        );
    }
}

/// The kubeconfig of an HTTPS cluster.
pub fn kubeconfig_of(tc: &TestCluster) -> String {
    tc.kubeconfig_yaml()
        .expect("https cluster has a kubeconfig")
}

/// `n` HTTPS clusters named `member-<i>`.
pub async fn https_fleet(n: usize) -> Fleet {
    Fleet::builder()
        .clusters(n)
        .name_prefix("member")
        .https(true)
        .start()
        .await
        .unwrap()
}

/// A map of owned strings.
pub fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Creates the namespace `name` with `labels`; one that already exists is left as it is.
pub async fn create_namespace(client: &kube::Client, name: &str, labels: &[(&str, &str)]) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(string_map(labels)),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => panic!("creating namespace {name}: {err}"),
    }
}

/// Creates or replaces the Secret `ns/name` as `edit` leaves it (starting from the stored one,
/// or an empty one named `name`). Returns its resourceVersion.
pub async fn apply_secret(
    client: &kube::Client,
    ns: &str,
    name: &str,
    edit: impl FnOnce(&mut Secret),
) -> String {
    let api = Api::<Secret>::namespaced(client.clone(), ns);
    let mut secret = api.get_opt(name).await.unwrap().unwrap_or_default();
    secret.metadata.name = Some(name.into());
    edit(&mut secret);
    let stored = if secret.metadata.resource_version.is_some() {
        api.replace(name, &PostParams::default(), &secret)
            .await
            .unwrap()
    } else {
        api.create(&PostParams::default(), &secret).await.unwrap()
    };
    stored.metadata.resource_version.unwrap()
}
