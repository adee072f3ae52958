//! The [`GardenerProvider`]: one member per ready Shoot.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{StreamExt, stream::BoxStream};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use mcr_core::members::{MemberProvider, Members, MembersOptions, Relists, Track};
use mcr_core::{ClusterName, ErrorChain, Source};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::request::ShootKubeconfig;
use crate::source::ShootSource;
use crate::{Address, Options, shoot};

/// Engages the Shoots of a Gardener garden as the fleet.
///
/// Watches `core.gardener.cloud/v1beta1` Shoots in the [`Namespaces`](crate::Namespaces)
/// scope. A Shoot
/// is engaged when it is ready (`status.lastOperation` set and not an unfinished `Create`),
/// not being deleted, and not hibernated (unless [`Options::engage_hibernated`]). Its client
/// authenticates with a short-lived kubeconfig from `shoots/{name}/adminkubeconfig` (or
/// `viewerkubeconfig`), renewed **in place** before it expires: the cluster, its caches and
/// watches stay, nothing is relisted. A Shoot that is deleted, gets a deletionTimestamp,
/// hibernates or stops being ready is disengaged. The [`Engagements`](mcr_core::Engagements)
/// table brings each wanted Shoot up, retries it with backoff (one Shoot failing never holds up
/// the others) and, on a sharded manager, asks for its kubeconfig only on the replica that
/// owns it.
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_core::{ProviderRunnable, Engagements};
/// use mcr_provider_gardener::{GardenerProvider, Namespaces, Options};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let garden = kube::Client::try_default().await?;
/// let provider = GardenerProvider::new(garden, Options {
///     namespaces: Namespaces::One("garden-dev".into()),
///     ..Options::default()
/// });
/// let registry = Engagements::new();
/// provider.start(CancellationToken::new(), registry.clone()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct GardenerProvider {
    inner: Arc<Inner>,
}

struct Inner {
    garden: kube::Client,
    opts: Arc<Options>,
    members: Members,
}

impl GardenerProvider {
    /// A provider reading Shoots through `garden` (a client of the garden cluster).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), kube::Error> {
    /// let garden = kube::Client::try_default().await?;
    /// let provider = mcr_provider_gardener::GardenerProvider::new(garden, Default::default());
    /// # Ok(()) }
    /// ```
    pub fn new(garden: kube::Client, opts: Options) -> Self {
        let members = Members::new(MembersOptions {
            client_options: opts.client.clone(),
            sync_timeout: opts.sync_timeout,
            backoff_initial: opts.retry_initial,
            backoff_max: opts.retry_max,
            ..MembersOptions::default()
        });
        GardenerProvider {
            inner: Arc::new(Inner {
                garden,
                opts: Arc::new(opts),
                members,
            }),
        }
    }

    /// The names of the clusters engaged now.
    ///
    /// ```no_run
    /// # fn f(p: mcr_provider_gardener::GardenerProvider) {
    /// for name in p.cluster_names() { println!("{name}"); }
    /// # }
    /// ```
    pub fn cluster_names(&self) -> Vec<ClusterName> {
        self.inner.members.engagements().names()
    }

    fn streams(&self) -> Vec<BoxStream<'static, WatchEvent>> {
        let resource = shoot::resource();
        self.inner
            .opts
            .namespaces
            .watches()
            .into_iter()
            .map(|w| {
                let api = w.api_dynamic(self.inner.garden.clone(), &resource);
                mcr_core::watch(api, w.config(watcher::Config::default()))
                    .default_backoff()
                    .boxed()
            })
            .collect()
    }

    async fn watch(&self, token: CancellationToken) {
        let mut merged = futures::stream::select_all(
            self.streams()
                .into_iter()
                .enumerate()
                .map(|(i, s)| s.map(move |e| (i, e))),
        );
        let mut shoots = Shoots {
            provider: self,
            token: token.clone(),
            wanted: BTreeMap::new(),
            relists: Relists::default(),
        };
        loop {
            let next = tokio::select! {
                () = token.cancelled() => break,
                next = merged.next() => next,
            };
            match next {
                Some((i, Ok(event))) => shoots.event(i, event),
                Some((_, Err(err))) => warn!(error = %err, "watching Shoots failed; retrying"),
                None => break,
            }
        }
    }

    fn name_of(&self, s: &DynamicObject) -> ClusterName {
        let ns = s.namespace().unwrap_or_default();
        ClusterName::from((self.inner.opts.cluster_name)(&ns, &s.name_any()))
    }

    /// Why a Shoot in scope is not wanted now, or the advertised address (`None`: the
    /// kubeconfig's) its member connects to.
    fn wanted(&self, s: &DynamicObject) -> Result<Option<String>, &'static str> {
        let opts = &self.inner.opts;
        if s.metadata.deletion_timestamp.is_some() {
            return Err("the Shoot is being deleted");
        }
        if !shoot::is_ready(s) {
            return Err("the Shoot is not ready");
        }
        if shoot::is_hibernated(s) && !opts.engage_hibernated {
            return Err("the Shoot is hibernated");
        }
        match &opts.address {
            Address::First => Ok(None),
            Address::Named(wanted) => shoot::address(s, wanted)
                .map(Some)
                .ok_or("the Shoot has no advertised address of that name"),
        }
    }

    /// Wants the member of Shoot `s` (the same address again changes nothing); false when the
    /// table refused its name.
    fn want(&self, token: &CancellationToken, s: &DynamicObject, server: Option<String>) -> bool {
        let name = self.name_of(s);
        let source = ShootSource {
            shoot: Arc::new(ShootKubeconfig {
                garden: self.inner.garden.clone(),
                namespace: s.namespace().unwrap_or_default(),
                name: s.name_any(),
                server,
                opts: self.inner.opts.clone(),
            }),
            name: name.clone(),
            run: token.clone(),
        };
        match self
            .inner
            .members
            .want(token, &name, Source::Connect(Arc::new(source)))
        {
            Ok(()) => true,
            Err(err) => {
                warn!(cluster = %name, error = %ErrorChain(&err), "Shoot refused as a cluster");
                false
            }
        }
    }

    fn remove(&self, name: &ClusterName, reason: &str) {
        if self.inner.members.remove(name) {
            info!(cluster = %name, reason, "disengaged");
        }
    }
}

/// What the watch of one run knows of the Shoots in scope: the cluster name each wanted one
/// goes by and the watch stream it came from, so that a relist of that stream removes the
/// members whose Shoot it no longer lists.
struct Shoots<'a> {
    provider: &'a GardenerProvider,
    token: CancellationToken,
    /// By `<namespace>/<name>` of the Shoot: its cluster name and stream.
    wanted: BTreeMap<String, (ClusterName, usize)>,
    relists: Relists<String>,
}

impl Track<DynamicObject> for Shoots<'_> {
    type Key = String;

    fn relists(&mut self) -> &mut Relists<String> {
        &mut self.relists
    }

    fn known(&self, stream: usize) -> Vec<String> {
        (self.wanted.iter())
            .filter(|(_, (_, s))| *s == stream)
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn key_of(s: &DynamicObject) -> Option<String> {
        Some(format!("{}/{}", s.namespace()?, s.name_any()))
    }

    fn apply(&mut self, stream: usize, s: DynamicObject) -> Option<String> {
        let key = Self::key_of(&s)?;
        if !self
            .provider
            .inner
            .opts
            .namespaces
            .contains(s.namespace()?.as_str())
        {
            return None;
        }
        let name = self.provider.name_of(&s);
        match self.provider.wanted(&s) {
            Ok(server) => {
                if self.provider.want(&self.token, &s, server) {
                    self.wanted.insert(key.clone(), (name, stream));
                }
            }
            Err(reason) => {
                self.wanted.remove(&key);
                self.provider.remove(&name, reason);
            }
        }
        Some(key)
    }

    fn delete(&mut self, key: &String) {
        if let Some((name, _)) = self.wanted.remove(key) {
            self.provider.remove(&name, "the Shoot is gone");
        }
    }
}

type WatchEvent = Result<watcher::Event<DynamicObject>, watcher::Error>;

impl MemberProvider for GardenerProvider {
    fn members(&self) -> &Members {
        &self.inner.members
    }

    #[tracing::instrument(name = "gardener_provider", skip_all)]
    async fn run(&self, token: CancellationToken) -> Result<(), mcr_core::Error> {
        let _run = self.inner.members.start_run("gardener")?;
        info!("starting the Gardener provider");
        self.watch(token).await;
        Ok(())
    }
}
