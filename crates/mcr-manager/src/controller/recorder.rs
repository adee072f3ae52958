//! [`Recorder`]: Kubernetes Events published into the cluster a reconcile runs in.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Resource,
    runtime::events::{self, Event, Reporter},
};
use mcr_core::{Cluster, ClusterName};

/// How long one publish may take by default before it is given up.
pub const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an Event was not published. Names the cluster; carries no credentials.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecorderError {
    /// The cluster's API server refused the Event (e.g. no RBAC for `events.k8s.io` `create`
    /// and `patch`).
    #[error("cluster {cluster}: publishing an event failed: {source}")]
    Publish {
        /// The cluster the Event was for.
        cluster: ClusterName,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The cluster did not answer within the publish timeout.
    #[error("cluster {cluster}: publishing an event took longer than {timeout:?}; given up")]
    Timeout {
        /// The cluster the Event was for.
        cluster: ClusterName,
        /// The bound that passed.
        timeout: Duration,
    },
}

struct Inner {
    cluster: ClusterName,
    client: Via,
    /// Shared by every cluster of one controller.
    reporter: Arc<Reporter>,
    timeout: Duration,
    /// kube-runtime's recorder, built on first use: it keeps the series cache, so repeats of
    /// one event (same object, reason, action, note) become one Event with a growing count.
    /// Boxed: most engaged clusters never publish, and the recorder is several hundred bytes.
    recorder: OnceLock<Box<events::Recorder>>,
}

/// What a [`Recorder`] publishes through: the handle of the cluster it publishes into (what
/// the runtime's recorders use: a pointer, not a client of their own in every engaged
/// cluster), or a client (boxed: a `kube::Client` is about a hundred bytes).
#[derive(Clone)]
enum Via {
    Cluster(Cluster),
    Client(Box<kube::Client>),
}

impl Via {
    fn client(&self) -> kube::Client {
        match self {
            Via::Cluster(cluster) => cluster.client(),
            Via::Client(client) => kube::Client::clone(client),
        }
    }
}

/// Publishes `events.k8s.io/v1` Events into one cluster, reported by one controller: what
/// [`Context::recorder`](crate::Context::recorder) hands a reconcile. Cheap to clone.
///
/// The runtime's recorder publishes through its cluster's handle, as the
/// [`Context`](crate::Context) does: a clone kept after the reconcile keeps that cluster
/// instance (its client, cache and credential renewal) alive, and a sharded replica's handoff
/// of the cluster waits for it (at most the lease duration, then it is forced and reported).
/// Keep a recorder no longer than the reconcile that got it.
///
/// Built on kube-runtime's [`events::Recorder`], one per controller and cluster for the life of
/// the engagement, so repeats are aggregated into a series (one Event whose `series.count`
/// grows) rather than one Event per call. Every write is bounded
/// ([`DEFAULT_PUBLISH_TIMEOUT`], see [`with_timeout`](Self::with_timeout)), so a member that
/// hangs or refuses Events never holds up the reconcile for longer;
/// [`record`](Self::record) does not wait at all.
///
/// RBAC: `create` and `patch` on `events.k8s.io` `events` in the object's namespace, in every
/// cluster where the controller publishes.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::runtime::{controller::Action, events::{Event, EventType}};
/// use mcr_manager::Context;
///
/// async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
///     let event = Event {
///         type_: EventType::Normal,
///         reason: "Synced".into(),
///         note: Some(format!("copied to {}", ctx.cluster_name())),
///         action: "Sync".into(),
///         secondary: None,
///     };
///     if let Err(err) = ctx.recorder().publish_for(&event, cm.as_ref()).await {
///         tracing::debug!(error = %err, "event not published");
///     }
///     Ok(Action::await_change())
/// }
/// ```
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("cluster", &self.inner.cluster)
            .field("controller", &self.inner.reporter.controller)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder publishing into `cluster` (reached through `client`) as `controller`. The
    /// reporting instance is `$POD_NAME`, else `$HOSTNAME`, else the controller's name.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) {
    /// let recorder = mcr_manager::Recorder::new("member-1".into(), client, "configmap-sync");
    /// # }
    /// ```
    pub fn new(cluster: ClusterName, client: kube::Client, controller: impl Into<String>) -> Self {
        let client = Via::Client(Box::new(client));
        Self::with(cluster, client, Self::reporter(controller))
    }

    /// The reporter of `controller`'s events: the instance is `$POD_NAME`, else `$HOSTNAME`.
    pub(crate) fn reporter(controller: impl Into<String>) -> Arc<Reporter> {
        let instance = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .ok();
        Arc::new(Reporter {
            controller: controller.into(),
            instance,
        })
    }

    /// A recorder publishing into `cluster` as `reporter` (one for all of a controller's
    /// clusters: the same for each, so kept once).
    pub(crate) fn reporting(cluster: &Cluster, reporter: Arc<Reporter>) -> Self {
        let via = Via::Cluster(cluster.clone());
        Self::with(cluster.name().clone(), via, reporter)
    }

    fn with(cluster: ClusterName, client: Via, reporter: Arc<Reporter>) -> Self {
        Recorder {
            inner: Arc::new(Inner {
                cluster,
                client,
                reporter,
                timeout: DEFAULT_PUBLISH_TIMEOUT,
                recorder: OnceLock::new(),
            }),
        }
    }

    /// This recorder with another bound on each publish (a new series cache).
    ///
    /// ```no_run
    /// # fn demo(r: mcr_manager::Recorder) {
    /// let r = r.with_timeout(std::time::Duration::from_secs(2));
    /// # }
    /// ```
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let inner = &self.inner;
        Recorder {
            inner: Arc::new(Inner {
                cluster: inner.cluster.clone(),
                client: inner.client.clone(),
                reporter: inner.reporter.clone(),
                timeout,
                recorder: OnceLock::new(),
            }),
        }
    }

    /// The reporting controller's name.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>) {
    /// println!("events are reported by {}", ctx.recorder().controller());
    /// # }
    /// ```
    pub fn controller(&self) -> &str {
        &self.inner.reporter.controller
    }

    /// Publishes `event` about the object `regarding` in this recorder's cluster, waiting at
    /// most the publish timeout. A repeat of an event published in the last minutes is
    /// aggregated into the first one's series.
    ///
    /// ```no_run
    /// # async fn demo(ctx: mcr_manager::Context<()>, reference: k8s_openapi::api::core::v1::ObjectReference,
    /// #               event: kube::runtime::events::Event) -> Result<(), mcr_manager::RecorderError> {
    /// ctx.recorder().publish(&event, &reference).await?;
    /// # Ok(()) }
    /// ```
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), RecorderError> {
        let inner = &self.inner;
        let recorder = inner.recorder.get_or_init(|| {
            Box::new(events::Recorder::new(
                inner.client.client(),
                Reporter::clone(&inner.reporter),
            ))
        });
        match tokio::time::timeout(inner.timeout, recorder.publish(event, regarding)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(RecorderError::Publish {
                cluster: inner.cluster.clone(),
                source,
            }),
            Err(_) => Err(RecorderError::Timeout {
                cluster: inner.cluster.clone(),
                timeout: inner.timeout,
            }),
        }
    }

    /// [`publish`](Self::publish) about `object` (a typed resource).
    ///
    /// ```no_run
    /// # async fn demo(ctx: mcr_manager::Context<()>, cm: k8s_openapi::api::core::v1::ConfigMap,
    /// #               event: kube::runtime::events::Event) -> Result<(), mcr_manager::RecorderError> {
    /// ctx.recorder().publish_for(&event, &cm).await?;
    /// # Ok(()) }
    /// ```
    pub async fn publish_for<K>(&self, event: &Event, object: &K) -> Result<(), RecorderError>
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish(event, &object.object_ref(&())).await
    }

    /// Publishes `event` about `regarding` in the background and returns at once: the
    /// reconcile never waits for it. A failure is logged at DEBUG with the cluster's name.
    ///
    /// ```no_run
    /// # fn demo(ctx: mcr_manager::Context<()>, reference: k8s_openapi::api::core::v1::ObjectReference,
    /// #         event: kube::runtime::events::Event) {
    /// ctx.recorder().record(event, reference);
    /// # }
    /// ```
    pub fn record(&self, event: Event, regarding: ObjectReference) {
        let this = self.clone();
        tokio::spawn(async move {
            if let Err(err) = this.publish(&event, &regarding).await {
                tracing::debug!(cluster = %this.inner.cluster, error = %err, "event not published");
            }
        });
    }
}
