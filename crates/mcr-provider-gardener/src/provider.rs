//! The [`GardenerProvider`]: one engaged cluster per ready Shoot.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::{StreamExt, stream::BoxStream};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use mcr_core::ClusterName;
use mcr_core::members::{MemberProvider, Members, MembersOptions};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, warn};

use crate::engage::engage;
use crate::request::ShootKubeconfig;
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
/// hibernates or stops being ready is disengaged. One Shoot failing never holds up the
/// others: each is engaged in its own task, retried with backoff.
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
    engaged: Members,
    members: Mutex<HashMap<ClusterName, Member>>,
}

struct Member {
    namespace: String,
    server: Option<String>,
    token: CancellationToken,
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
        let engaged = Members::new(MembersOptions {
            sync_timeout: opts.sync_timeout,
            ..MembersOptions::default()
        });
        GardenerProvider {
            inner: Arc::new(Inner {
                garden,
                opts: Arc::new(opts),
                engaged,
                members: Mutex::new(HashMap::new()),
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
        self.inner.engaged.engagements().names()
    }

    fn streams(&self) -> Vec<(Option<String>, BoxStream<'static, WatchEvent>)> {
        let resource = shoot::resource();
        self.inner
            .opts
            .namespaces
            .watches()
            .into_iter()
            .map(|w| {
                let api = w.api_dynamic(self.inner.garden.clone(), &resource);
                let stream = mcr_core::watch(api, w.config(watcher::Config::default()))
                    .default_backoff()
                    .boxed();
                (w.namespace, stream)
            })
            .collect()
    }

    async fn watch(&self, token: CancellationToken) {
        let streams = self.streams();
        let scopes: Vec<Option<String>> = streams.iter().map(|(ns, _)| ns.clone()).collect();
        let mut merged = futures::stream::select_all(
            streams
                .into_iter()
                .enumerate()
                .map(|(i, (_, s))| s.map(move |e| (i, e))),
        );
        let mut listing: HashMap<usize, HashSet<ClusterName>> = HashMap::new();
        loop {
            let (i, event) = tokio::select! {
                _ = token.cancelled() => break,
                next = merged.next() => match next {
                    Some(next) => next,
                    None => break,
                },
            };
            match event {
                Ok(watcher::Event::Init) => {
                    listing.insert(i, HashSet::new());
                }
                Ok(watcher::Event::InitApply(s)) => {
                    if let Some(name) = self.observe(&s, &token) {
                        listing.entry(i).or_default().insert(name);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    let seen = listing.remove(&i).unwrap_or_default();
                    self.sweep(scopes[i].as_deref(), &seen);
                }
                Ok(watcher::Event::Apply(s)) => {
                    self.observe(&s, &token);
                }
                Ok(watcher::Event::Delete(s)) => {
                    let name = self.name_of(&s);
                    self.forget(&name, "the Shoot was deleted");
                }
                Err(err) => warn!(error = %err, "watching Shoots failed; retrying"),
            }
        }
        let names: Vec<ClusterName> = self.inner.members.lock().keys().cloned().collect();
        for name in names {
            self.forget(&name, "the provider stopped");
        }
    }

    fn name_of(&self, s: &DynamicObject) -> ClusterName {
        let ns = s.namespace().unwrap_or_default();
        ClusterName::from((self.inner.opts.cluster_name)(&ns, &s.name_any()))
    }

    /// Engages or disengages a Shoot after a change; returns its name when in scope.
    fn observe(&self, s: &DynamicObject, token: &CancellationToken) -> Option<ClusterName> {
        let opts = &self.inner.opts;
        let namespace = s.namespace().unwrap_or_default();
        if !opts.namespaces.contains(&namespace) {
            return None;
        }
        let name = self.name_of(s);
        let server = match &opts.address {
            Address::First => None,
            Address::Named(wanted) => match shoot::address(s, wanted) {
                Some(url) => Some(url),
                None => {
                    self.forget(&name, "the Shoot has no advertised address of that name");
                    return Some(name);
                }
            },
        };
        let unwanted = if s.metadata.deletion_timestamp.is_some() {
            Some("the Shoot is being deleted")
        } else if !shoot::is_ready(s) {
            Some("the Shoot is not ready")
        } else if shoot::is_hibernated(s) && !opts.engage_hibernated {
            Some("the Shoot is hibernated")
        } else {
            None
        };
        if let Some(reason) = unwanted {
            self.forget(&name, reason);
            return Some(name);
        }
        {
            let members = self.inner.members.lock();
            if members.get(&name).is_some_and(|m| m.server == server) {
                return Some(name);
            }
        }
        self.forget(&name, "the advertised address changed");
        let member_token = token.child_token();
        self.inner.members.lock().insert(
            name.clone(),
            Member {
                namespace: namespace.clone(),
                server: server.clone(),
                token: member_token.clone(),
            },
        );
        let source = Arc::new(ShootKubeconfig {
            garden: self.inner.garden.clone(),
            namespace,
            name: s.name_any(),
            server,
            opts: opts.clone(),
        });
        let span = tracing::info_span!("engage_shoot", cluster = %name);
        tokio::spawn(
            engage(
                self.inner.engaged.clone(),
                self.inner.opts.clone(),
                name.clone(),
                source,
                member_token,
            )
            .instrument(span),
        );
        Some(name)
    }

    /// Disengages members of a re-listed scope that the list no longer has.
    fn sweep(&self, namespace: Option<&str>, seen: &HashSet<ClusterName>) {
        let gone: Vec<ClusterName> = self
            .inner
            .members
            .lock()
            .iter()
            .filter(|(name, m)| {
                namespace.is_none_or(|ns| ns == m.namespace) && !seen.contains(*name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            self.forget(&name, "the Shoot is gone");
        }
    }

    fn forget(&self, name: &ClusterName, reason: &str) {
        let member = self.inner.members.lock().remove(name);
        if let Some(member) = member {
            member.token.cancel();
            self.inner.engaged.remove(name);
            info!(cluster = %name, reason, "disengaged");
        }
    }
}

type WatchEvent = Result<watcher::Event<DynamicObject>, watcher::Error>;

impl MemberProvider for GardenerProvider {
    fn members(&self) -> &Members {
        &self.inner.engaged
    }

    async fn run(&self, token: CancellationToken) -> Result<(), mcr_core::Error> {
        info!("starting the Gardener provider");
        self.watch(token).await;
        Ok(())
    }
}
