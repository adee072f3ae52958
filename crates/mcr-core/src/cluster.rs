//! [`Cluster`]: a handle on one member of the fleet (client + shared cache + identity).

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use crate::{Cache, ClusterName};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The identity of one [`Cluster`] instance.
///
/// Every call to [`Cluster::new`] gets a fresh id (a global counter), so two clusters built from
/// equal inputs are still told apart. Clones share the id. Its `Display` is the number (for
/// logs and metrics).
///
/// ```
/// # use mcr_core::ClusterId;
/// fn same(a: ClusterId, b: ClusterId) -> bool { a == b }
/// fn label(id: ClusterId) -> String { id.to_string() }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(u64);

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Clone)]
struct Inner {
    name: ClusterName,
    /// Shared with the cache built with the cluster (see [`Cluster::new`]), which requests
    /// through the same client.
    client: Arc<kube::Client>,
    cache: Cache,
    id: ClusterId,
    connection_hash: Option<String>,
    /// What another module of this crate attaches (the credentials module: the handle of the
    /// client's renewable credentials); read back by that module.
    attachment: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// Cancels work tied to this cluster (its credential renewal) when the last handle drops.
    stop_on_drop: Option<Arc<tokio_util::sync::DropGuard>>,
}

/// One cluster of the fleet: a `kube::Client`, its shared informer [`Cache`] and an identity.
///
/// Cheap to clone (an `Arc` inside); clones are the *same instance*
/// ([`same_instance`](Cluster::same_instance)). A cluster is built by a provider and handed to
/// [`Engagements::add`](crate::Engagements::add), which starts its cache.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use mcr_core::Cluster;
///
/// let client = kube::Client::try_default().await?;
/// let cluster = Cluster::new("member-1", client).with_connection_hash("sha256:…");
/// assert_eq!(cluster.name(), "member-1");
/// assert!(cluster.same_instance(&cluster.clone()));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

impl Cluster {
    /// A new cluster instance (new [`ClusterId`], new cache that is not started yet).
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) {
    /// let cluster = mcr_core::Cluster::new("a", client);
    /// assert!(!cluster.cache().is_started());
    /// # }
    /// ```
    pub fn new(name: impl Into<ClusterName>, client: kube::Client) -> Cluster {
        let name = name.into();
        let client = Arc::new(client);
        let cache = Cache::new(name.clone(), client.clone());
        Cluster {
            inner: Arc::new(Inner {
                name,
                client,
                cache,
                id: ClusterId(NEXT_ID.fetch_add(1, Ordering::Relaxed)),
                connection_hash: None,
                attachment: None,
                stop_on_drop: None,
            }),
        }
    }

    /// A new cluster instance around a cache built by the caller (new [`ClusterId`]), e.g. a
    /// [derived](Cache::derived) cache that shares another cluster's watches. The cache should
    /// be new (not started) and belong to this cluster.
    ///
    /// ```no_run
    /// # fn f(host: mcr_core::Cluster, client: kube::Client, view: std::sync::Arc<dyn mcr_core::CacheView>) {
    /// use mcr_core::{Cache, Cluster};
    /// let cache = Cache::derived("slice".into(), client.clone(), host.cache(), view);
    /// let cluster = Cluster::with_cache("slice", client, cache);
    /// assert!(!cluster.cache().is_started());
    /// # }
    /// ```
    pub fn with_cache(name: impl Into<ClusterName>, client: kube::Client, cache: Cache) -> Cluster {
        Cluster {
            inner: Arc::new(Inner {
                name: name.into(),
                client: Arc::new(client),
                cache,
                id: ClusterId(NEXT_ID.fetch_add(1, Ordering::Relaxed)),
                connection_hash: None,
                attachment: None,
                stop_on_drop: None,
            }),
        }
    }

    /// Sets the content hash of whatever defines the connection (e.g. of the kubeconfig), used
    /// by [`Engagements::want`](crate::Engagements::want) to tell a new source from the one
    /// running. Keeps the id.
    ///
    /// ```no_run
    /// # fn f(client: kube::Client) {
    /// let c = mcr_core::Cluster::new("a", client).with_connection_hash("abc");
    /// assert_eq!(c.connection_hash(), Some("abc"));
    /// # }
    /// ```
    pub fn with_connection_hash(mut self, hash: impl Into<String>) -> Cluster {
        Arc::make_mut(&mut self.inner).connection_hash = Some(hash.into());
        self
    }

    /// Attaches `value` for the module that defines its type (see [`attachment`](Self::attachment)).
    /// Keeps the id.
    pub(crate) fn with_attachment(
        mut self,
        value: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Cluster {
        Arc::make_mut(&mut self.inner).attachment = Some(value);
        self
    }

    /// A new instance of this cluster (new [`ClusterId`], a fresh cache that is not started,
    /// the same client, connection hash and attachment, e.g. credentials), to engage again after this one was
    /// stopped (an instance is engaged at most once in its life).
    pub(crate) fn fresh(&self) -> Cluster {
        Cluster {
            inner: Arc::new(Inner {
                name: self.inner.name.clone(),
                client: self.inner.client.clone(),
                cache: self.inner.cache.fresh(),
                id: ClusterId(NEXT_ID.fetch_add(1, Ordering::Relaxed)),
                connection_hash: self.inner.connection_hash.clone(),
                attachment: self.inner.attachment.clone(),
                stop_on_drop: self.inner.stop_on_drop.clone(),
            }),
        }
    }

    /// Cancels `guard`'s token when the last handle to this cluster is dropped (used for the
    /// background renewal of its credentials).
    pub(crate) fn with_stop_on_drop(mut self, guard: tokio_util::sync::DropGuard) -> Cluster {
        Arc::make_mut(&mut self.inner).stop_on_drop = Some(Arc::new(guard));
        self
    }

    /// What [`with_attachment`](Self::with_attachment) attached, if it is a `T`.
    pub(crate) fn attachment<T: 'static>(&self) -> Option<&T> {
        self.inner.attachment.as_deref()?.downcast_ref()
    }

    /// The cluster's name.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// println!("{}", c.name());
    /// # }
    /// ```
    pub fn name(&self) -> &ClusterName {
        &self.inner.name
    }

    /// A client for the cluster (a cheap clone).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let api: kube::Api<ConfigMap> = kube::Api::default_namespaced(c.client());
    /// # }
    /// ```
    pub fn client(&self) -> kube::Client {
        kube::Client::clone(&self.inner.client)
    }

    /// The cluster's shared informer cache.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let configmaps = c.cache().informer::<ConfigMap>();
    /// # }
    /// ```
    pub fn cache(&self) -> &Cache {
        &self.inner.cache
    }

    /// The identity of this instance.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// assert_eq!(c.id(), c.clone().id());
    /// # }
    /// ```
    pub fn id(&self) -> ClusterId {
        self.inner.id
    }

    /// A handle that does not keep this instance alive: [`Released::is_released`] says when
    /// every clone of it is gone (its engagement's tasks, contexts and in-flight reconciles
    /// dropped). Sharded mode waits on it before another replica may take the cluster over.
    ///
    /// ```no_run
    /// # fn f(client: kube::Client) {
    /// let c = mcr_core::Cluster::new("a", client);
    /// let watch = c.released();
    /// drop(c);
    /// assert!(watch.is_released());
    /// # }
    /// ```
    pub fn released(&self) -> Released {
        Released(Arc::downgrade(&self.inner))
    }

    /// Whether `other` is this very instance (or a clone of it), rather than an equal new one.
    ///
    /// ```no_run
    /// # fn f(client: kube::Client) {
    /// use mcr_core::Cluster;
    /// let a = Cluster::new("a", client.clone());
    /// let b = Cluster::new("a", client);
    /// assert!(a.same_instance(&a.clone()));
    /// assert!(!a.same_instance(&b));
    /// # }
    /// ```
    pub fn same_instance(&self, other: &Cluster) -> bool {
        self.inner.id == other.inner.id
    }

    /// The connection hash set with [`with_connection_hash`](Cluster::with_connection_hash).
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// if let Some(h) = c.connection_hash() { println!("{h}"); }
    /// # }
    /// ```
    pub fn connection_hash(&self) -> Option<&str> {
        self.inner.connection_hash.as_deref()
    }
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.inner.name)
            .field("id", &self.inner.id)
            .field("connection_hash", &self.inner.connection_hash)
            .finish_non_exhaustive()
    }
}

/// Whether every clone of a [`Cluster`] instance is gone (see [`Cluster::released`]).
#[derive(Clone, Debug)]
pub struct Released(std::sync::Weak<Inner>);

impl Released {
    /// True once no clone of the instance is left.
    ///
    /// ```no_run
    /// # fn f(c: mcr_core::Cluster) {
    /// let r = c.released();
    /// assert!(!r.is_released()); // `c` still lives
    /// # }
    /// ```
    pub fn is_released(&self) -> bool {
        self.0.strong_count() == 0
    }

    /// Waits until no clone of the instance is left. Woken by the drop of an instance (one
    /// process-wide signal, so an instance carries nothing for it), not by polling.
    ///
    /// ```no_run
    /// # async fn f(c: mcr_core::Cluster) {
    /// let r = c.released();
    /// drop(c);
    /// r.wait().await;
    /// # }
    /// ```
    pub async fn wait(&self) {
        loop {
            let dropped = INSTANCE_DROPPED.notified();
            let mut dropped = std::pin::pin!(dropped);
            dropped.as_mut().enable();
            if self.is_released() {
                return;
            }
            dropped.await;
        }
    }
}

/// Signalled whenever a [`Cluster`] instance is dropped (its last clone gone): what
/// [`Released::wait`] waits on.
static INSTANCE_DROPPED: tokio::sync::Notify = tokio::sync::Notify::const_new();

impl Drop for Inner {
    fn drop(&mut self) {
        INSTANCE_DROPPED.notify_waiters();
    }
}
