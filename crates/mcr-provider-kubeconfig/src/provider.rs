//! The [`KubeconfigProvider`]: one engaged cluster per labelled kubeconfig Secret.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use mcr_core::members::{MemberProvider, Members, ProviderShared, StatusProvider};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::dispatch::{Dispatcher, SecretEvent};
use crate::{Options, SecretRef, SecretStatus};

/// State shared by the provider handle and its dispatcher.
pub(crate) type Shared = ProviderShared<Options, SecretRef, SecretStatus>;

/// Discovers member clusters from kubeconfig Secrets in a management ("host") cluster.
///
/// Each Secret in the watched [`Namespaces`](crate::Namespaces) labelled
/// `<Options::label>: "true"` with a kubeconfig under `data[<Options::data_key>]` becomes a
/// cluster named after the Secret: the provider wants the kubeconfig's current context under
/// that name, and the [`Engagements`](mcr_core::Engagements) table builds, probes, engages,
/// renews and retries it. See the crate documentation for the full lifecycle.
///
/// Cheap to clone (an `Arc` inside). Start it once, through the Manager or
/// [`ProviderRunnable::start`](mcr_core::ProviderRunnable::start). Its accessors (`options`,
/// `names`, `status`, `statuses`) come with [`StatusProvider`].
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_core::{ProviderRunnable, Engagements};
/// use mcr_provider_kubeconfig::{KubeconfigProvider, Namespaces, Options};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let host = kube::Client::try_default().await?;
/// let provider = KubeconfigProvider::new(host, Options {
///     namespaces: Namespaces::One("fleet".into()),
///     ..Options::default()
/// });
/// let registry = Engagements::new();
/// let token = CancellationToken::new();
/// provider.start(token.clone(), registry.clone()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct KubeconfigProvider {
    shared: Arc<Shared>,
}

/// The accessors: `options`, `names`, `status` (what the provider made of one watched Secret:
/// engaged, pending, failed and retrying, refused by the policy, owned by another replica,
/// missing its key, invalid, or in a name conflict) and `statuses` (every watched Secret, by
/// `namespace/name`).
impl StatusProvider<Options, SecretRef, SecretStatus> for KubeconfigProvider {
    fn shared(&self) -> &Shared {
        &self.shared
    }
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
        let members = Members::new(opts.members.members_options());
        KubeconfigProvider {
            shared: Arc::new(Shared::new(host, opts, members)),
        }
    }
}

type SecretEvents = futures::stream::BoxStream<'static, SecretEvent>;

/// One label-selected watch per namespace, or one cluster-wide watch for `AllExcept` whose
/// excluded namespaces the server filters out (a field selector).
fn secret_watches(host: &kube::Client, opts: &Options) -> Vec<SecretEvents> {
    let config = watcher::Config::default().labels(&opts.label_selector());
    (opts.namespaces.watches().into_iter().enumerate())
        .map(|(i, w)| {
            let api: Api<Secret> = w.api(host.clone());
            mcr_core::watch(api, w.config(config.clone()))
                .default_backoff()
                .map(move |e| (i, e))
                .boxed()
        })
        .collect()
}

impl MemberProvider for KubeconfigProvider {
    fn members(&self) -> &Members {
        &self.shared.members
    }

    #[tracing::instrument(name = "kubeconfig_provider", skip_all)]
    async fn run(&self, token: CancellationToken) -> Result<(), mcr_core::Error> {
        let guard = self.shared.members.start_run("kubeconfig")?;
        let opts = &self.shared.opts;
        info!(namespaces = ?opts.namespaces, label = %opts.label, key = %opts.data_key, "kubeconfig provider starting");
        let events = futures::stream::select_all(secret_watches(&self.shared.host, opts));
        let mut dispatcher = Dispatcher::new(self.shared.clone(), token.clone());
        let mut events = std::pin::pin!(events.take_until(token.cancelled()));
        while let Some(event) = events.next().await {
            dispatcher.handle(event);
        }
        self.shared.statuses.lock().clear();
        drop(guard);
        info!("kubeconfig provider stopped");
        Ok(())
    }
}
