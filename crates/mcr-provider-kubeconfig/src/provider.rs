//! The [`KubeconfigProvider`]: one engaged cluster per labelled kubeconfig Secret.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use mcr_core::{
    Aware, BoxFuture, Cluster, ClusterName, Clusters, ClustersOptions, FieldIndex, Provider,
    ProviderRunnable,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, info, info_span, warn};

use crate::dispatch::Dispatcher;
use crate::worker::{RunCtx, Shared, lock};
use crate::{Options, SecretRef, SecretStatus};

/// Discovers member clusters from kubeconfig Secrets in a management ("host") cluster.
///
/// Each Secret in the watched [`Namespaces`](crate::Namespaces) labelled
/// `<Options::label>: "true"` with a kubeconfig under `data[<Options::data_key>]` becomes a
/// cluster named after the Secret, built from the kubeconfig's current context through
/// [`mcr_core::kubeconfig`] and run through [`mcr_core::Clusters`]. See the crate
/// documentation for the full lifecycle.
///
/// Cheap to clone (an `Arc` inside). Start it once, through the Manager or
/// [`ProviderRunnable::start`].
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_core::{ProviderRunnable, Registry};
/// use mcr_provider_kubeconfig::{KubeconfigProvider, Namespaces, Options};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let host = kube::Client::try_default().await?;
/// let provider = KubeconfigProvider::new(host, Options {
///     namespaces: Namespaces::One("fleet".into()),
///     ..Options::default()
/// });
/// let registry = Registry::new();
/// let token = CancellationToken::new();
/// provider.start(token.clone(), Arc::new(registry.clone())).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct KubeconfigProvider {
    shared: Arc<Shared>,
    running: Arc<AtomicBool>,
}

impl KubeconfigProvider {
    /// A provider watching Secrets through `host` (the management cluster's client).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), kube::Error> {
    /// let host = kube::Client::try_default().await?;
    /// let provider = mcr_provider_kubeconfig::KubeconfigProvider::new(host, Default::default());
    /// # Ok(()) }
    /// ```
    pub fn new(host: kube::Client, opts: Options) -> Self {
        let clusters = Clusters::with_options(ClustersOptions {
            sync_timeout: opts.sync_timeout,
        });
        KubeconfigProvider {
            shared: Arc::new(Shared {
                host,
                opts,
                clusters,
                statuses: Mutex::new(BTreeMap::new()),
            }),
            running: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The options the provider runs with.
    ///
    /// ```no_run
    /// # fn f(p: &mcr_provider_kubeconfig::KubeconfigProvider) {
    /// println!("watching {:?}", p.options().namespaces);
    /// # }
    /// ```
    pub fn options(&self) -> &Options {
        &self.shared.opts
    }

    /// Names of the currently engaged clusters, sorted.
    ///
    /// ```no_run
    /// # fn f(p: &mcr_provider_kubeconfig::KubeconfigProvider) {
    /// for name in p.names() { println!("{name}"); }
    /// # }
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        self.shared.clusters.names()
    }

    /// What the provider made of one watched Secret (engaged, pending, failed and retrying,
    /// refused by the exec policy, missing its key, or in a name conflict); `None` for Secrets
    /// it does not watch or that are gone.
    ///
    /// ```no_run
    /// use mcr_provider_kubeconfig::{SecretRef, SecretState};
    /// # fn f(p: &mcr_provider_kubeconfig::KubeconfigProvider) {
    /// if let Some(s) = p.status(&SecretRef::new("fleet", "member-1")) {
    ///     if let SecretState::Failed { reason, .. } = &s.state { eprintln!("{reason}"); }
    /// }
    /// # }
    /// ```
    pub fn status(&self, secret: &SecretRef) -> Option<SecretStatus> {
        lock(&self.shared.statuses).get(secret).cloned()
    }

    /// The status of every watched Secret, by `namespace/name`.
    ///
    /// ```no_run
    /// # fn f(p: &mcr_provider_kubeconfig::KubeconfigProvider) {
    /// for (secret, status) in p.statuses() { println!("{secret}: {:?}", status.state); }
    /// # }
    /// ```
    pub fn statuses(&self) -> BTreeMap<SecretRef, SecretStatus> {
        lock(&self.shared.statuses).clone()
    }

    async fn run(
        &self,
        token: CancellationToken,
        aware: Arc<dyn Aware>,
    ) -> Result<(), mcr_core::Error> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Err(mcr_core::Error::AlreadyRunning {
                provider: "kubeconfig".to_owned(),
            });
        }
        let opts = &self.shared.opts;
        info!(namespaces = ?opts.namespaces, label = %opts.label, key = %opts.data_key, "kubeconfig provider starting");
        let ctx = Arc::new(RunCtx {
            shared: self.shared.clone(),
            token: token.clone(),
            aware,
            slots: Mutex::new(HashMap::new()),
        });
        let tasks = TaskTracker::new();
        let mut dispatcher = Dispatcher::new(ctx, tasks.clone());
        let mut events = futures::stream::select_all(secret_watches(&self.shared.host, opts));
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                item = events.next() => match item {
                    Some((stream, Ok(event))) => dispatcher.handle(stream, event),
                    Some((_, Err(err))) => warn!(error = %err, "kubeconfig Secret watch failed; retrying with backoff"),
                    None => break,
                },
            }
        }
        drop(events);
        tasks.close();
        tasks.wait().await;
        for name in self.shared.clusters.names() {
            self.shared.clusters.remove(&name);
        }
        lock(&self.shared.statuses).clear();
        self.running.store(false, Ordering::SeqCst);
        info!("kubeconfig provider stopped");
        Ok(())
    }
}

type SecretEvents =
    futures::stream::BoxStream<'static, (usize, Result<watcher::Event<Secret>, watcher::Error>)>;

/// One label-selected watch per namespace, or one cluster-wide watch for `AllExcept`.
fn secret_watches(host: &kube::Client, opts: &Options) -> Vec<SecretEvents> {
    let config = watcher::Config::default().labels(&opts.label_selector());
    match opts.namespaces.watched() {
        Some(namespaces) => namespaces
            .into_iter()
            .enumerate()
            .map(|(i, ns)| {
                let api: Api<Secret> = Api::namespaced(host.clone(), &ns);
                watcher(api, config.clone())
                    .default_backoff()
                    .map(move |e| (i, e))
                    .boxed()
            })
            .collect(),
        None => {
            let api: Api<Secret> = Api::all(host.clone());
            vec![
                watcher(api, config)
                    .default_backoff()
                    .map(|e| (0, e))
                    .boxed(),
            ]
        }
    }
}

impl Provider for KubeconfigProvider {
    fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, mcr_core::Error>> {
        Box::pin(async move { self.shared.clusters.get(name) })
    }

    fn index_field<'a>(
        &'a self,
        index: &'a FieldIndex,
    ) -> BoxFuture<'a, Result<(), mcr_core::Error>> {
        Box::pin(self.shared.clusters.index_field(index))
    }

    fn runnable(&self) -> Option<&dyn ProviderRunnable> {
        Some(self)
    }
}

impl ProviderRunnable for KubeconfigProvider {
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        aware: Arc<dyn Aware>,
    ) -> BoxFuture<'a, Result<(), mcr_core::Error>> {
        Box::pin(
            self.run(token, aware)
                .instrument(info_span!("kubeconfig_provider")),
        )
    }
}
