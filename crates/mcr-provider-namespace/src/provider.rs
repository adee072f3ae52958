//! [`NamespaceProvider`]: every namespace of the host cluster as a cluster.

use std::{collections::HashMap, sync::Arc};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use mcr_core::members::{MemberProvider, Members, MembersOptions};
use mcr_core::{Cache, CacheEvent, Cluster, ClusterName, Error, InformerOptions};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::{
    NamespaceView, Options,
    client::{NamespaceService, Scopes},
};

struct Inner {
    host: Cluster,
    opts: Options,
    engaged: Members,
    scopes: Arc<Scopes>,
}

/// A provider that engages one cluster per namespace of a host cluster, named after the
/// namespace.
///
/// Each cluster's client sees only its namespace, as `default` (see
/// [`namespace_client`](crate::namespace_client)), and its cache derives every informer from
/// the host cluster's informer of the same type ([`NamespaceView`]): N namespace clusters
/// watching ConfigMaps cause one ConfigMap watch on the host. A namespace is engaged when it
/// appears (and matches [`Options::label_selector`], and is not [excluded](Options::excluded))
/// and disengaged when it is deleted or starts terminating. Cheap to clone.
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
            .field("members", &self.inner.engaged)
            .finish_non_exhaustive()
    }
}

/// A namespace being engaged or engaged: its slot token and generation.
struct Slot {
    token: CancellationToken,
    generation: u64,
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
        let engaged = Members::new(MembersOptions {
            sync_timeout: opts.sync_timeout,
            ..MembersOptions::default()
        });
        let scopes = Arc::new(Scopes::new(host.client()));
        Self {
            inner: Arc::new(Inner {
                host,
                opts,
                engaged,
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
        self.inner.engaged.engagements().names()
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

    /// Starts engaging `name` in the background under a new slot.
    fn engage(
        &self,
        parent: &CancellationToken,
        name: String,
        generation: u64,
        retry: mpsc::UnboundedSender<(String, u64)>,
    ) -> Slot {
        let slot = parent.child_token();
        let this = self.clone();
        let token = slot.clone();
        let span = tracing::info_span!("namespace_cluster", cluster = %name);
        tokio::spawn(
            async move {
                let cluster = this.build(&name);
                let Err(err) = this.inner.engaged.engagements().add(&token, cluster).await else {
                    return;
                };
                if token.is_cancelled() {
                    return;
                }
                let delay = this.inner.opts.retry_delay;
                tracing::warn!(error = %err, ?delay, "namespace cluster not engaged, will retry");
                tokio::select! {
                    () = token.cancelled() => {}
                    () = tokio::time::sleep(delay) => { let _ = retry.send((name, generation)); }
                }
            }
            .instrument(span),
        );
        Slot {
            token: slot,
            generation,
        }
    }

    fn disengage(&self, slots: &mut HashMap<String, Slot>, name: &str) {
        if let Some(slot) = slots.remove(name) {
            slot.token.cancel();
            self.inner
                .engaged
                .engagements()
                .remove(&ClusterName::from(name));
            tracing::info!(cluster = %name, "namespace gone, cluster disengaged");
        }
    }

    async fn discover(&self, token: CancellationToken) -> Result<(), Error> {
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
        let (retry_tx, mut retry_rx) = mpsc::unbounded_channel::<(String, u64)>();
        let mut slots: HashMap<String, Slot> = HashMap::new();
        let mut generation = 0u64;
        loop {
            let (name, wanted) = tokio::select! {
                biased;
                () = token.cancelled() => return Ok(()),
                Some((name, generation)) = retry_rx.recv() => {
                    if slots.get(&name).is_none_or(|s| s.generation != generation) {
                        continue;
                    }
                    slots.remove(&name);
                    let wanted = informer.get(None, &name).is_some_and(|ns| self.wanted(&ns));
                    (name, wanted)
                }
                event = events.next() => match event {
                    Some(CacheEvent::Listed(ns) | CacheEvent::Applied(ns)) => {
                        (ns.metadata.name.clone().unwrap_or_default(), self.wanted(&ns))
                    }
                    Some(CacheEvent::Deleted(ns)) => (ns.metadata.name.clone().unwrap_or_default(), false),
                    None if token.is_cancelled() => return Ok(()),
                    None => {
                        tracing::error!("namespace informer of the host stopped");
                        return Err(Error::Stopped(host.name().clone()));
                    }
                },
            };
            if !wanted {
                self.disengage(&mut slots, &name);
            } else if let std::collections::hash_map::Entry::Vacant(entry) = slots.entry(name) {
                generation += 1;
                let name = entry.key().clone();
                tracing::debug!(cluster = %name, "namespace found, engaging");
                entry.insert(self.engage(&token, name, generation, retry_tx.clone()));
            }
        }
    }
}

impl MemberProvider for NamespaceProvider {
    fn members(&self) -> &Members {
        &self.inner.engaged
    }

    #[tracing::instrument(name = "namespace_provider", skip_all)]
    async fn run(&self, token: CancellationToken) -> Result<(), Error> {
        self.discover(token).await
    }
}
