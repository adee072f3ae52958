//! [`NamespaceProvider`]: every namespace of the host cluster as a cluster.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use mcr_core::members::{MemberProvider, Members, MembersOptions};
use mcr_core::{
    Cache, CacheEvent, Cluster, ClusterName, Error, ErrorChain, InformerOptions, Source,
};
use tokio_util::sync::CancellationToken;

use crate::{
    NamespaceView, Options,
    client::{NamespaceService, Scopes},
};

struct Inner {
    host: Cluster,
    opts: Options,
    members: Members,
    scopes: Arc<Scopes>,
}
/// A provider that engages one cluster per namespace of a host cluster, named after the
/// namespace.
///
/// Each cluster's client sees only its namespace, as `default` (see
/// [`namespace_client`](crate::namespace_client)), and its cache derives every informer from
/// the host cluster's informer of the same type ([`NamespaceView`]): N namespace clusters
/// watching ConfigMaps cause one ConfigMap watch on the host. A namespace is wanted when it
/// appears (and matches [`Options::label_selector`], and is not [excluded](Options::excluded))
/// and removed when it is deleted or starts terminating; the
/// [`Engagements`](mcr_core::Engagements) table brings it up (and, on a sharded manager, only
/// on the replica that owns it). Cheap to clone.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use mcr_core::{Cluster, ProviderRunnable, Engagements};
/// use mcr_provider_namespace::{NamespaceProvider, Options};
/// use tokio_util::sync::CancellationToken;
///
/// let host = Cluster::new(mcr_core::ClusterName::host(), kube::Client::try_default().await?);
/// let provider = NamespaceProvider::new(host, Options::default());
/// // Normally handed to the mcr Manager, which starts it.
/// let registry = Engagements::new();
/// provider.start(CancellationToken::new(), registry).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct NamespaceProvider {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for NamespaceProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceProvider")
            .field("opts", &self.inner.opts)
            .field("members", &self.inner.members)
            .finish_non_exhaustive()
    }
}

impl NamespaceProvider {
    /// A provider over the namespaces of `host`.
    ///
    /// `host`'s cache is shared: the provider watches Namespaces through it and every
    /// namespace cluster derives its informers from it. If nobody started it, the provider
    /// starts it (with a child of the token given to `start`).
    ///
    /// ```no_run
    /// # fn f(host: mcr_core::Cluster) {
    /// let p = mcr_provider_namespace::NamespaceProvider::new(host, Default::default());
    /// # }
    /// ```
    pub fn new(host: Cluster, opts: Options) -> Self {
        let members = Members::new(MembersOptions {
            sync_timeout: opts.sync_timeout,
            // The documented fixed delay: a namespace's view fails to sync for reasons a
            // longer wait does not change.
            backoff_initial: opts.retry_delay,
            backoff_max: opts.retry_delay.max(Duration::from_millis(1)),
            ..MembersOptions::default()
        });
        let scopes = Arc::new(Scopes::new(host.client()));
        Self {
            inner: Arc::new(Inner {
                host,
                opts,
                members,
                scopes,
            }),
        }
    }

    /// The names of the engaged namespace clusters, sorted.
    ///
    /// ```no_run
    /// # fn f(p: mcr_provider_namespace::NamespaceProvider) {
    /// for name in p.names() { println!("{name}"); }
    /// # }
    /// ```
    pub fn names(&self) -> Vec<ClusterName> {
        self.inner.members.engagements().names()
    }

    /// The host cluster.
    ///
    /// ```no_run
    /// # fn f(p: mcr_provider_namespace::NamespaceProvider) {
    /// let host_client = p.host().client();
    /// # }
    /// ```
    pub fn host(&self) -> &Cluster {
        &self.inner.host
    }

    /// The options.
    ///
    /// ```no_run
    /// # fn f(p: mcr_provider_namespace::NamespaceProvider) {
    /// println!("{:?}", p.options().excluded);
    /// # }
    /// ```
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// A new cluster for host namespace `namespace` (not engaged).
    fn build(&self, namespace: &str) -> Cluster {
        let host = &self.inner.host;
        let client = NamespaceService::new(host.client(), self.inner.scopes.clone(), namespace)
            .into_client();
        let view = Arc::new(NamespaceView::new(namespace));
        let cache = Cache::derived(namespace.into(), client.clone(), host.cache(), view);
        Cluster::with_cache(namespace, client, cache)
    }

    /// Whether a namespace should be a cluster now.
    fn wanted(&self, ns: &Namespace) -> bool {
        let name = ns.metadata.name.as_deref().unwrap_or_default();
        let terminating = ns.metadata.deletion_timestamp.is_some()
            || ns
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|p| p == "Terminating");
        !name.is_empty() && !terminating && !self.inner.opts.is_excluded(name)
    }

    /// Wants the namespace `name` as a member, or removes it: what the table should run for
    /// it now. A namespace wanted already is left as it is (its view never changes), so no
    /// client is built for it again.
    fn converge(&self, token: &CancellationToken, name: &str, wanted: bool) {
        let members = &self.inner.members;
        let cluster = ClusterName::from(name);
        if !wanted {
            if members.remove(&cluster) {
                tracing::info!(cluster = %name, "namespace gone or terminating: cluster removed");
            }
            return;
        }
        if members.engagements().member_state(&cluster).is_some() {
            return;
        }
        tracing::debug!(cluster = %name, "namespace found: wanted");
        if let Err(err) = members.want(token, &cluster, Source::Cluster(self.build(name))) {
            tracing::error!(cluster = %name, error = %ErrorChain(&err), "namespace refused as a cluster");
        }
    }

    async fn discover(&self, token: CancellationToken) -> Result<(), Error> {
        let _run = self.inner.members.start_run("namespace")?;
        let host = &self.inner.host;
        host.cache().start(token.child_token());
        let informer = host.cache().informer_with::<Namespace>(
            (),
            InformerOptions {
                label_selector: self.inner.opts.label_selector.clone(),
                ..InformerOptions::default()
            },
        );
        let mut events = informer.subscribe();
        loop {
            let event = tokio::select! {
                biased;
                () = token.cancelled() => return Ok(()),
                event = events.next() => event,
            };
            match event {
                Some(CacheEvent::Listed(ns) | CacheEvent::Applied(ns)) => {
                    let name = ns.metadata.name.as_deref().unwrap_or_default();
                    self.converge(&token, name, self.wanted(&ns));
                }
                Some(CacheEvent::Deleted(ns)) => {
                    let name = ns.metadata.name.as_deref().unwrap_or_default();
                    self.converge(&token, name, false);
                }
                None if token.is_cancelled() => return Ok(()),
                None => {
                    tracing::error!("namespace informer of the host stopped");
                    return Err(Error::Stopped(host.name().clone()));
                }
            }
        }
    }
}

impl MemberProvider for NamespaceProvider {
    fn members(&self) -> &Members {
        &self.inner.members
    }

    #[tracing::instrument(name = "namespace_provider", skip_all)]
    async fn run(&self, token: CancellationToken) -> Result<(), Error> {
        self.discover(token).await
    }
}
