//! One task per cluster name: turns the latest desired Secret into an engaged cluster.
//!
//! The dispatcher publishes the desired state of a name into a `watch` channel (latest value
//! wins); the worker builds, probes and engages through `mcr_core::Clusters`, retries failures
//! with a capped exponential backoff and removes the cluster when the Secret goes away. A slow
//! or broken member therefore only ever delays its own worker.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mcr_core::backoff::Backoff;
use mcr_core::{Aware, ClusterId, ClusterName, Clusters, ErrorChain, credentials, kubeconfig};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::{Error, Options, ProbeError, SecretRef, SecretState, SecretStatus};

/// What the provider should run under one cluster name.
#[derive(Clone, Debug)]
pub(crate) enum Desired {
    /// No Secret maps to the name (any more): remove the cluster.
    Absent,
    /// The owning Secret; `data` is `None` when the data key is missing or empty.
    Secret {
        secret: SecretRef,
        resource_version: Option<String>,
        data: Option<Arc<[u8]>>,
    },
}

impl Desired {
    fn secret(&self) -> Option<&SecretRef> {
        match self {
            Desired::Absent => None,
            Desired::Secret { secret, .. } => Some(secret),
        }
    }
}

/// State shared by the provider handle, the dispatcher and the workers.
pub(crate) struct Shared {
    pub(crate) host: kube::Client,
    pub(crate) opts: Options,
    pub(crate) clusters: Clusters,
    pub(crate) statuses: Mutex<BTreeMap<SecretRef, SecretStatus>>,
}

/// Locks a mutex, recovering from poisoning (the protected maps stay consistent per operation).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Everything a worker needs; one per provider run.
pub(crate) struct RunCtx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) token: CancellationToken,
    pub(crate) aware: Arc<dyn Aware>,
    pub(crate) slots: Mutex<HashMap<ClusterName, watch::Sender<Desired>>>,
}

impl RunCtx {
    /// Records `state` for `secret`, unless the name's desired state has moved to another Secret
    /// (or to none) meanwhile: the dispatcher owns those entries then.
    fn set_status(
        &self,
        rx: &watch::Receiver<Desired>,
        name: &ClusterName,
        secret: &SecretRef,
        resource_version: &Option<String>,
        state: SecretState,
    ) {
        let mut statuses = lock(&self.shared.statuses);
        if rx.borrow().secret() != Some(secret) {
            return;
        }
        statuses.insert(
            secret.clone(),
            SecretStatus {
                cluster: name.clone(),
                resource_version: resource_version.clone(),
                state,
            },
        );
    }
}

/// The worker loop of one cluster name. Returns when the name has no Secret any more (after
/// removing its cluster) or when the provider stops.
pub(crate) async fn run(ctx: Arc<RunCtx>, name: ClusterName, mut rx: watch::Receiver<Desired>) {
    let opts = &ctx.shared.opts;
    let mut backoff = Backoff::new(opts.backoff_initial, opts.backoff_max);
    let mut last_hash: Option<String> = None;
    loop {
        if ctx.token.is_cancelled() {
            return;
        }
        let desired = rx.borrow_and_update().clone();
        let retry = match desired {
            Desired::Absent => {
                if ctx.shared.clusters.remove(&name) {
                    info!("kubeconfig Secret gone: cluster removed");
                }
                let mut slots = lock(&ctx.slots);
                if matches!(*rx.borrow(), Desired::Absent) {
                    slots.remove(&name);
                    return;
                }
                continue;
            }
            Desired::Secret {
                secret,
                resource_version,
                data: None,
            } => {
                warn!(
                    secret = %secret,
                    key = %opts.data_key,
                    "Secret has no kubeconfig under its data key (missing or empty): ignored until the key is added"
                );
                ctx.set_status(
                    &rx,
                    &name,
                    &secret,
                    &resource_version,
                    SecretState::MissingKey,
                );
                None
            }
            Desired::Secret {
                secret,
                resource_version,
                data: Some(data),
            } => {
                let hash = kubeconfig::bytes_hash(&data);
                if last_hash.as_deref() != Some(hash.as_str()) {
                    backoff.reset();
                    last_hash = Some(hash.clone());
                }
                let attempt = engage(&ctx, &rx, &name, &secret, &resource_version, &data, hash);
                // Shutdown never waits for a build in flight (a credential plugin is killed).
                let attempt = tokio::select! {
                    () = ctx.token.cancelled() => return,
                    attempt = attempt => attempt,
                };
                match attempt {
                    Ok(id) => {
                        backoff.reset();
                        let state = SecretState::Engaged { id };
                        ctx.set_status(&rx, &name, &secret, &resource_version, state);
                        None
                    }
                    Err(err) if err.is_retryable() => {
                        let retry_in = backoff.next_delay();
                        error!(error = %err, retry_in = ?retry_in, "kubeconfig Secret not engaged; retrying");
                        let state = SecretState::Failed {
                            reason: ErrorChain(&err).to_string(),
                            retry_in,
                        };
                        ctx.set_status(&rx, &name, &secret, &resource_version, state);
                        Some(retry_in)
                    }
                    Err(err) => {
                        error!(error = %err, "kubeconfig Secret refused; waiting for the Secret to change");
                        let state = SecretState::ExecDenied {
                            reason: ErrorChain(&err).to_string(),
                        };
                        ctx.set_status(&rx, &name, &secret, &resource_version, state);
                        None
                    }
                }
            }
        };
        let delay = async {
            match retry {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = ctx.token.cancelled() => return,
            changed = rx.changed() => if changed.is_err() { return },
            _ = delay => {}
        }
    }
}

/// Builds, probes and engages the cluster of `secret` unless the running instance already has
/// the same kubeconfig hash. Returns the id of the engaged instance.
async fn engage(
    ctx: &RunCtx,
    rx: &watch::Receiver<Desired>,
    name: &ClusterName,
    secret: &SecretRef,
    resource_version: &Option<String>,
    data: &[u8],
    hash: String,
) -> Result<ClusterId, Error> {
    let shared = &ctx.shared;
    if let Ok(current) = shared.clusters.get(name)
        && current.connection_hash() == Some(hash.as_str())
    {
        debug!(secret = %secret, "kubeconfig unchanged: keeping the engaged cluster");
        return Ok(current.id());
    }
    ctx.set_status(rx, name, secret, resource_version, SecretState::Pending);
    let opts = &shared.opts;
    let kc = kubeconfig::parse(data).map_err(|source| Error::Kubeconfig {
        secret: secret.clone(),
        source,
    })?;
    // Only the credentials rotated (same server, CA and settings): renew in place, keeping the
    // cluster, its caches and watches (no relist).
    if let Ok(current) = shared.clusters.get(name)
        && credentials::renew_in_place(&current, &kc, None, &opts.client_options, &opts.policy)
            .await
            .unwrap_or(false)
    {
        info!(secret = %secret, id = ?current.id(), "kubeconfig Secret rotated credentials: renewed in place");
        return Ok(current.id());
    }
    // Static credentials get a renewable client; exec plugins and failures take the usual path
    // (with its policy checks and errors).
    let renewable = if credentials::is_renewable(&kc, None) {
        credentials::cluster_for_context(
            name.clone(),
            &kc,
            None,
            &opts.client_options,
            &opts.policy,
        )
        .await
        .ok()
    } else {
        None
    };
    let cluster = match renewable {
        Some(cluster) => cluster,
        None => kubeconfig::cluster_for_context(
            name.clone(),
            &kc,
            None,
            &opts.client_options,
            &opts.policy,
        )
        .await
        .map_err(|source| classify(secret, source))?,
    }
    .with_connection_hash(hash);
    probe(&cluster.client(), opts.sync_timeout)
        .await
        .map_err(|source| Error::Unreachable {
            secret: secret.clone(),
            source,
        })?;
    let outcome = shared
        .clusters
        .add_or_replace(&ctx.token, cluster, ctx.aware.as_ref())
        .await
        .map_err(|source| Error::Engage {
            secret: secret.clone(),
            source,
        })?;
    let current = shared.clusters.get(name).map_err(|source| Error::Engage {
        secret: secret.clone(),
        source,
    })?;
    info!(secret = %secret, outcome = ?outcome, id = ?current.id(), "cluster engaged from kubeconfig Secret");
    Ok(current.id())
}

fn classify(secret: &SecretRef, source: kubeconfig::Error) -> Error {
    match source {
        kubeconfig::Error::ExecNotAllowed { .. }
        | kubeconfig::Error::AuthProviderNotAllowed { .. }
        | kubeconfig::Error::FileReferenceNotAllowed { .. }
        | kubeconfig::Error::ProxyNotAllowed { .. } => Error::ExecDenied {
            secret: secret.clone(),
            source,
        },
        source => Error::Kubeconfig {
            secret: secret.clone(),
            source,
        },
    }
}

/// One cheap request (`GET /version`) so an unreachable or misconfigured server fails here and
/// is retried, rather than being engaged and failing every controller.
async fn probe(client: &kube::Client, timeout: Duration) -> Result<(), ProbeError> {
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(ProbeError::Request(err)),
        Err(_) => Err(ProbeError::Timeout(timeout)),
    }
}
