//! The [`CapiProvider`]: one engaged workload cluster per ready Cluster API `Cluster`.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use mcr_core::members::{MemberProvider, Members, MembersOptions, ProviderShared, StatusProvider};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::dispatch::{Dispatcher, Incoming};
use crate::{ClusterStatus, ObjectRef, Options};

/// State shared by the provider handle and its dispatcher.
pub(crate) type Shared = ProviderShared<Options, ObjectRef, ClusterStatus>;

/// Discovers workload clusters from Cluster API `Cluster` objects in a management cluster.
///
/// Cheap to clone (an `Arc` inside). Start it once, through the Manager or
/// [`ProviderRunnable::start`](mcr_core::ProviderRunnable::start). See the crate documentation
/// for the lifecycle. Its accessors (`options`, `names`, `status`, `statuses`) come with
/// [`StatusProvider`].
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_core::{ProviderRunnable, Engagements};
/// use mcr_core::scope::Namespaces;
/// use mcr_provider_capi::{CapiProvider, Options};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let host = kube::Client::try_default().await?;
/// let provider = CapiProvider::new(host, Options {
///     namespaces: Namespaces::List(vec!["tenant-a".into(), "tenant-b".into()]),
///     ..Options::default()
/// });
/// let registry = Engagements::new();
/// provider.start(CancellationToken::new(), registry.clone()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CapiProvider {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CapiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapiProvider")
            .field("options", &self.shared.opts)
            .field("members", &self.shared.members)
            .finish()
    }
}

/// The accessors: `options`, `names`, `status` (what the provider made of one `Cluster`
/// object; `None` if the watch never delivered it — out of scope or label selector — or it is
/// gone) and `statuses` (every `Cluster` the watch delivered, by `namespace/name`).
impl StatusProvider<Options, ObjectRef, ClusterStatus> for CapiProvider {
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl CapiProvider {
    /// A provider reading `Cluster` objects and Secrets through `host` (the management
    /// cluster's client).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), kube::Error> {
    /// let host = kube::Client::try_default().await?;
    /// let provider = mcr_provider_capi::CapiProvider::new(host, Default::default());
    /// # Ok(()) }
    /// ```
    pub fn new(host: kube::Client, opts: Options) -> Self {
        let members = Members::new(MembersOptions {
            // Bounds the kubeconfig Secret's read as well as the client's build.
            build_timeout: opts.members.sync_timeout,
            ..opts.members.members_options()
        });
        CapiProvider {
            shared: Arc::new(Shared::new(host, opts, members)),
        }
    }
}

/// The `Cluster` watches of the scope (one per namespace, or one cluster-wide watch with a
/// field selector for `AllExcept`) and as many metadata-only Secret watches.
fn watches(host: &kube::Client, opts: &Options) -> Vec<BoxStream<'static, Incoming>> {
    let resource = opts.version.api_resource();
    let mut cluster_config = watcher::Config::default();
    if let Some(labels) = &opts.label_selector {
        cluster_config = cluster_config.labels(labels);
    }
    let mut secret_config = watcher::Config::default();
    if let Some(labels) = &opts.secret_label_selector {
        secret_config = secret_config.labels(labels);
    }
    let mut streams = Vec::new();
    for (i, w) in opts.namespaces.watches().into_iter().enumerate() {
        let api = w.api_dynamic(host.clone(), &resource);
        let clusters = mcr_core::watch(api, w.config(cluster_config.clone()))
            .default_backoff()
            .map(move |e| Incoming::Cluster(i, e));
        streams.push(clusters.boxed());
        let secret_api = w.api::<PartialObjectMeta<Secret>>(host.clone());
        let secrets = mcr_core::watch_metadata(secret_api, w.config(secret_config.clone()))
            .default_backoff()
            .map(Incoming::Secret);
        streams.push(secrets.boxed());
    }
    streams
}

impl MemberProvider for CapiProvider {
    fn members(&self) -> &Members {
        &self.shared.members
    }

    #[tracing::instrument(name = "capi_provider", skip_all)]
    async fn run(&self, token: CancellationToken) -> Result<(), mcr_core::Error> {
        let opts = &self.shared.opts;
        opts.namespaces
            .validate()
            .map_err(|err| mcr_core::Error::Provider {
                provider: "capi".to_string(),
                source: Box::new(err),
            })?;
        let guard = self.shared.members.start_run("capi")?;
        info!(version = opts.version.as_str(), namespaces = ?opts.namespaces, labels = ?opts.label_selector, "Cluster API provider starting");
        let events = futures::stream::select_all(watches(&self.shared.host, opts));
        let mut dispatcher = Dispatcher::new(self.shared.clone(), token.clone());
        let mut events = std::pin::pin!(events.take_until(token.cancelled()));
        while let Some(event) = events.next().await {
            dispatcher.handle(event);
        }
        self.shared.statuses.lock().clear();
        drop(guard);
        info!("Cluster API provider stopped");
        Ok(())
    }
}
