//! The [`ClusterInventoryProvider`]: one engaged cluster per ready ClusterProfile.

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use mcr_core::members::{MemberProvider, Members, MembersOptions, ProviderShared, StatusProvider};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::dispatch::{Dispatcher, Item};
use crate::options::{SECRET_LABEL_CONSUMER, SECRET_LABEL_PROFILE};
use crate::{ClusterProfile, Error, Options, ProfileRef, ProfileStatus, Strategy};

/// Discovers member clusters from the ClusterProfiles of a hub cluster. See the crate
/// documentation for the lifecycle, the strategies and the RBAC it needs.
///
/// Cheap to clone (an `Arc` inside). Start it once, through the Manager or
/// [`ProviderRunnable::start`](mcr_core::ProviderRunnable::start). Its accessors (`options`,
/// `names`, `status`, `statuses`) come with [`StatusProvider`].
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_provider_cluster_inventory::{AccessProviders, ClusterInventoryProvider, Options, Strategy};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let file = AccessProviders::from_file("/etc/mcr/clusterprofile-provider-file.json".as_ref())?
///     .servers(["*.fleet.example.com"]);
/// let hub = kube::Client::try_default().await?;
/// let provider = ClusterInventoryProvider::new(hub, Options::new(Strategy::AccessProviders(Arc::new(file))))?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ClusterInventoryProvider {
    shared: Arc<Shared>,
}

/// The accessors: `options`, `names`, `status` (what the provider made of one profile; `None`
/// for profiles it does not watch or that are gone) and `statuses` (every watched profile).
impl StatusProvider<Options, ProfileRef, ProfileStatus> for ClusterInventoryProvider {
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl ClusterInventoryProvider {
    /// A provider watching ClusterProfiles through `hub`. Errors with [`Error::Config`] when the
    /// Secret strategy has an empty consumer name or the label selector is empty.
    ///
    /// ```no_run
    /// use mcr_provider_cluster_inventory::{ClusterInventoryProvider, Options, Strategy};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let hub = kube::Client::try_default().await?;
    /// let provider = ClusterInventoryProvider::new(hub, Options::new(Strategy::Secret { consumer: "my-controller".into() }))?;
    /// # Ok(()) }
    /// ```
    pub fn new(hub: kube::Client, opts: Options) -> Result<Self, Error> {
        if let Strategy::Secret { consumer } = &opts.strategy
            && consumer.is_empty()
        {
            return Err(Error::Config {
                reason: "the Secret strategy needs a consumer name".to_string(),
            });
        }
        if let Err(err) = opts.namespaces.validate() {
            return Err(Error::Config {
                reason: err.to_string(),
            });
        }
        if opts.label_selector.as_deref() == Some("") {
            return Err(Error::Config {
                reason: "the label selector is empty (use None for every profile)".to_string(),
            });
        }
        let members = Members::new(MembersOptions {
            build_timeout: opts.credential_timeout,
            ..opts.members.members_options()
        });
        Ok(ClusterInventoryProvider {
            shared: Arc::new(Shared::new(hub, opts, members)),
        })
    }
}

/// State shared by the provider handle and its dispatcher.
pub(crate) type Shared = ProviderShared<Options, ProfileRef, ProfileStatus>;

type Events = BoxStream<'static, Result<Item, watcher::Error>>;

/// Profile watches as the scope says (one per namespace, or one cluster-wide watch whose
/// field selector excludes the `AllExcept` namespaces), plus the same for consumer-labelled
/// Secrets with the Secret strategy. Stream numbers are per kind.
fn watches(hub: &kube::Client, opts: &Options) -> Vec<Events> {
    let scope = opts.namespaces.watches();
    let ar = ClusterProfile::api_resource();
    let mut profile_config = watcher::Config::default();
    if let Some(selector) = &opts.label_selector {
        profile_config = profile_config.labels(selector);
    }
    let mut streams: Vec<Events> = Vec::new();
    for (i, w) in scope.iter().enumerate() {
        let stream = mcr_core::watch(
            w.api_dynamic(hub.clone(), &ar),
            w.config(profile_config.clone()),
        )
        .default_backoff()
        .map_ok(move |e| Item::Profile(i, e));
        streams.push(stream.boxed());
    }
    if let Strategy::Secret { consumer } = &opts.strategy {
        let selector = format!("{SECRET_LABEL_CONSUMER}={consumer},{SECRET_LABEL_PROFILE}");
        let config = watcher::Config::default().labels(&selector);
        for (i, w) in scope.iter().enumerate() {
            let api: Api<Secret> = w.api(hub.clone());
            let stream = mcr_core::watch(api, w.config(config.clone()))
                .default_backoff()
                .map_ok(move |e| Item::Secret(i, e));
            streams.push(stream.boxed());
        }
    }
    streams
}

impl MemberProvider for ClusterInventoryProvider {
    fn members(&self) -> &Members {
        &self.shared.members
    }

    #[tracing::instrument(name = "cluster_inventory_provider", skip_all)]
    async fn run(&self, token: CancellationToken) -> Result<(), mcr_core::Error> {
        let guard = self.shared.members.start_run("cluster-inventory")?;
        let opts = &self.shared.opts;
        info!(namespaces = ?opts.namespaces, selector = ?opts.label_selector, naming = ?opts.naming, "cluster inventory provider starting");
        let events = futures::stream::select_all(watches(&self.shared.host, opts));
        let mut dispatcher = Dispatcher::new(self.shared.clone(), token.clone());
        let mut events = std::pin::pin!(events.take_until(token.cancelled()));
        while let Some(event) = events.next().await {
            dispatcher.handle(event);
        }
        self.shared.statuses.lock().clear();
        drop(guard);
        info!("cluster inventory provider stopped");
        Ok(())
    }
}
