//! [`MultiProvider`]: several providers under name prefixes.

use std::{collections::BTreeMap, sync::Arc};

use mcr_core::{
    BoxFuture, Cluster, ClusterName, Engagements, FieldIndex, MemberStatus, Provider,
    ProviderRunnable,
};
use parking_lot::{Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

mod run;
mod status;

pub use status::{ChildStatus, RESTART_BACKOFF_INITIAL, RESTART_BACKOFF_MAX};

use crate::{DEFAULT_SEPARATOR, Error, Options};

struct Child {
    provider: Arc<dyn Provider>,
    /// Set while the child runs.
    token: Option<CancellationToken>,
    status: ChildStatus,
}

#[derive(Default)]
struct State {
    children: BTreeMap<String, Child>,
    running: Option<(CancellationToken, Engagements)>,
    indexes: Vec<FieldIndex>,
}

struct Inner {
    separator: String,
    state: Mutex<State>,
    /// (initial, max) wait before restarting a child that stopped on its own.
    restart_backoff: Mutex<(std::time::Duration, std::time::Duration)>,
    /// Serializes `add` and `index_field` so that each child gets each index exactly once.
    ops: tokio::sync::Mutex<()>,
}

/// A provider composed of named child providers; cluster `c` of child `p` is the cluster
/// `p#c` (with the default separator).
///
/// Children can be added and removed before or after [`start`](ProviderRunnable::start).
/// Runnable children are started with a child of the multi provider's token and a
/// a handle on the table whose names carry its prefix
/// ([`Engagements::prefixed`](mcr_core::Engagements::prefixed)); removing a child cancels that token, which disengages its clusters.
/// Field indexes registered on the multi provider reach every child, also children added
/// later, exactly once. [`get`](Provider::get) splits the name on the **first** separator and
/// asks that child; an unknown child or a name without separator is
/// [`ClusterNotFound`](mcr_core::Error::ClusterNotFound), a member another replica owns
/// [`NotOwned`](mcr_core::Error::NotOwned) (with its full name). Cheap to clone.
///
/// ```no_run
/// # async fn f(kind: std::sync::Arc<dyn mcr_core::Provider>, ns: std::sync::Arc<dyn mcr_core::Provider>) -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use mcr_core::{Provider, ProviderRunnable, Engagements};
/// use mcr_provider_multi::MultiProvider;
/// use tokio_util::sync::CancellationToken;
///
/// let multi = MultiProvider::new();
/// multi.add("kind", kind).await?;
/// let token = CancellationToken::new();
/// tokio::spawn({
///     let (multi, token) = (multi.clone(), token.clone());
///     async move { multi.start(token, Engagements::new()).await }
/// });
/// multi.add("ns", ns).await?; // started right away
/// let cluster = multi.get(&"ns#team-a".into()).await?;
/// multi.remove("kind"); // its clusters leave
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiProvider {
    inner: Arc<Inner>,
}

impl Default for MultiProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MultiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiProvider")
            .field("separator", &self.inner.separator)
            .field("providers", &self.provider_names())
            .finish_non_exhaustive()
    }
}

impl MultiProvider {
    /// An empty multi provider with the default separator `#`.
    ///
    /// ```
    /// let multi = mcr_provider_multi::MultiProvider::new();
    /// assert!(multi.provider_names().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_options(Options::default())
    }

    /// An empty multi provider with options. An empty separator falls back to `#`.
    ///
    /// ```
    /// use mcr_provider_multi::{MultiProvider, Options};
    /// let multi = MultiProvider::with_options(Options { separator: "/".into() });
    /// assert_eq!(multi.separator(), "/");
    /// ```
    pub fn with_options(opts: Options) -> Self {
        let separator = if opts.separator.is_empty() {
            DEFAULT_SEPARATOR.to_owned()
        } else {
            opts.separator
        };
        Self {
            inner: Arc::new(Inner {
                separator,
                state: Mutex::new(State::default()),
                restart_backoff: Mutex::new((RESTART_BACKOFF_INITIAL, RESTART_BACKOFF_MAX)),
                ops: tokio::sync::Mutex::new(()),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock()
    }

    /// The separator.
    ///
    /// ```
    /// assert_eq!(mcr_provider_multi::MultiProvider::new().separator(), "#");
    /// ```
    pub fn separator(&self) -> &str {
        &self.inner.separator
    }

    /// The full name of cluster `cluster` of provider `provider`.
    ///
    /// ```
    /// let multi = mcr_provider_multi::MultiProvider::new();
    /// assert_eq!(multi.cluster_name("kind", "dev"), "kind#dev");
    /// ```
    pub fn cluster_name(&self, provider: &str, cluster: &str) -> ClusterName {
        ClusterName::from(format!("{provider}{}{cluster}", self.inner.separator))
    }

    /// Splits a full name on the first separator into (provider, cluster).
    ///
    /// ```
    /// let multi = mcr_provider_multi::MultiProvider::new();
    /// assert_eq!(multi.split("kind#dev#2"), Some(("kind", "dev#2")));
    /// assert_eq!(multi.split("plain"), None);
    /// ```
    pub fn split<'a>(&self, name: &'a str) -> Option<(&'a str, &'a str)> {
        name.split_once(self.inner.separator.as_str())
    }

    /// The names of the registered providers, sorted.
    ///
    /// ```
    /// assert!(mcr_provider_multi::MultiProvider::new().provider_names().is_empty());
    /// ```
    pub fn provider_names(&self) -> Vec<String> {
        self.state().children.keys().cloned().collect()
    }

    /// The provider registered under `name`.
    ///
    /// ```
    /// assert!(mcr_provider_multi::MultiProvider::new().provider("kind").is_none());
    /// ```
    pub fn provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.state().children.get(name).map(|c| c.provider.clone())
    }

    /// Registers `provider` under `name`: applies every field index registered so far, then,
    /// if the multi provider runs, starts it.
    ///
    /// Errors: [`Error::InvalidName`] (empty, or contains the separator),
    /// [`Error::AlreadyExists`], [`Error::Index`] (the provider is not added).
    ///
    /// ```no_run
    /// # async fn f(multi: mcr_provider_multi::MultiProvider) -> Result<(), mcr_provider_multi::Error> {
    /// use std::sync::Arc;
    /// use mcr_core::providers::clusters::ClustersProvider;
    /// multi.add("static", Arc::new(ClustersProvider::new())).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, name: &str, provider: Arc<dyn Provider>) -> Result<(), Error> {
        if name.is_empty() || name.contains(self.inner.separator.as_str()) {
            return Err(Error::InvalidName {
                name: name.to_owned(),
                reason: format!(
                    "must be non-empty and must not contain the separator \"{}\"",
                    self.inner.separator
                ),
            });
        }
        let _ops = self.inner.ops.lock().await;
        let indexes = {
            let state = self.state();
            if state.children.contains_key(name) {
                return Err(Error::AlreadyExists(name.to_owned()));
            }
            state.indexes.clone()
        };
        for index in &indexes {
            provider
                .index_field(index)
                .await
                .map_err(|source| Error::Index {
                    provider: name.to_owned(),
                    source,
                })?;
        }
        let mut state = self.state();
        let token = state
            .running
            .as_ref()
            .map(|(token, table)| self.start_child(name, &provider, token, table));
        state.children.insert(
            name.to_owned(),
            Child {
                provider,
                token,
                status: ChildStatus::default(),
            },
        );
        tracing::info!(provider = name, "provider added");
        Ok(())
    }

    /// Unregisters a provider and cancels its token: its clusters are disengaged. False if
    /// no provider has that name.
    ///
    /// ```
    /// assert!(!mcr_provider_multi::MultiProvider::new().remove("kind"));
    /// ```
    pub fn remove(&self, name: &str) -> bool {
        let child = self.state().children.remove(name);
        match child {
            Some(child) => {
                if let Some(token) = child.token {
                    token.cancel();
                }
                tracing::info!(provider = name, "provider removed");
                true
            }
            None => false,
        }
    }
}

impl Provider for MultiProvider {
    fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, mcr_core::Error>> {
        Box::pin(async move {
            let not_found = || mcr_core::Error::ClusterNotFound(name.clone());
            let (provider, cluster) = self.split(name.as_str()).ok_or_else(not_found)?;
            let child = self.provider(provider).ok_or_else(not_found)?;
            child
                .get(&ClusterName::from(cluster))
                .await
                .map_err(|err| match err {
                    mcr_core::Error::ClusterNotFound(_) => not_found(),
                    // Named as the caller knows it.
                    mcr_core::Error::NotOwned { owner, .. } => mcr_core::Error::NotOwned {
                        cluster: name.clone(),
                        owner,
                    },
                    other => other,
                })
        })
    }

    fn index_field<'a>(
        &'a self,
        index: &'a FieldIndex,
    ) -> BoxFuture<'a, Result<(), mcr_core::Error>> {
        Box::pin(async move {
            let _ops = self.inner.ops.lock().await;
            let children: Vec<(String, Arc<dyn Provider>)> = {
                let mut state = self.state();
                match state.indexes.iter().find(|i| i.name() == index.name()) {
                    // Every child has it already.
                    Some(known) if known.resource() == index.resource() => return Ok(()),
                    Some(_) => {}
                    None => state.indexes.push(index.clone()),
                }
                state
                    .children
                    .iter()
                    .map(|(n, c)| (n.clone(), c.provider.clone()))
                    .collect()
            };
            let mut first_error = None;
            for (name, child) in children {
                if let Err(err) = child.index_field(index).await {
                    tracing::warn!(provider = %name, index = index.name(), error = %err, "index not applied");
                    first_error.get_or_insert(mcr_core::Error::Provider {
                        provider: name.clone(),
                        source: Box::new(err),
                    });
                }
            }
            first_error.map_or(Ok(()), Err)
        })
    }

    fn runnable(&self) -> Option<&dyn ProviderRunnable> {
        Some(self)
    }

    /// Every child's members, under their prefixed names (`<child><separator><name>`).
    fn member_statuses(&self) -> Vec<MemberStatus> {
        let children: Vec<(String, Arc<dyn Provider>)> = (self.state().children.iter())
            .map(|(n, c)| (n.clone(), c.provider.clone()))
            .collect();
        let separator = &self.inner.separator;
        let mut out = Vec::new();
        for (child, provider) in children {
            for mut member in provider.member_statuses() {
                member.name = ClusterName::from(format!("{child}{separator}{}", member.name));
                out.push(member);
            }
        }
        out
    }
}
