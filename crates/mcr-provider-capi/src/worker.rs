//! One task per cluster name: reads the kubeconfig Secret of the latest desired `Cluster` and
//! keeps the matching workload cluster engaged through `mcr_core::Clusters`.
//!
//! Failures are retried with a capped exponential backoff; a missing Secret or key waits for
//! the Secret watch to poke the worker. A slow or broken cluster only delays its own worker.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use mcr_core::backoff::Backoff;
use mcr_core::{Aware, ClusterName, Clusters, kubeconfig};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::{ClusterState, ClusterStatus, Error, ObjectRef, Options};

/// What should run under one cluster name.
#[derive(Clone, Debug)]
pub(crate) enum Desired {
    /// Nothing: remove the cluster and stop the worker.
    Absent,
    /// Keep whatever runs; start nothing.
    Hold,
    /// Run the workload cluster of `cluster` from `secret`. `poke` changes on every request
    /// to look again (a Secret event).
    Engage {
        cluster: ObjectRef,
        secret: ObjectRef,
        #[allow(dead_code)] // only there to make each poke a distinct value in the logs
        poke: u64,
    },
}

/// State shared by the provider handle, the dispatcher and the workers.
pub(crate) struct Shared {
    pub(crate) host: kube::Client,
    pub(crate) opts: Options,
    pub(crate) clusters: Clusters,
    pub(crate) statuses: Mutex<BTreeMap<ObjectRef, ClusterStatus>>,
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
    /// Records `state` for `cluster` unless the name now wants another `Cluster` (or nothing):
    /// the dispatcher owns the status then.
    fn set_status(
        &self,
        rx: &watch::Receiver<Desired>,
        name: &ClusterName,
        cluster: &ObjectRef,
        state: ClusterState,
    ) {
        let mut statuses = lock(&self.shared.statuses);
        if !matches!(&*rx.borrow(), Desired::Engage { cluster: c, .. } if c == cluster) {
            return;
        }
        let status = ClusterStatus {
            name: name.clone(),
            state,
        };
        statuses.insert(cluster.clone(), status);
    }
}

/// The worker loop of one cluster name.
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
                    info!(
                        "Cluster gone, deleted, filtered or not ready: workload cluster disengaged"
                    );
                }
                let mut slots = lock(&ctx.slots);
                if matches!(*rx.borrow(), Desired::Absent) {
                    slots.remove(&name);
                    return;
                }
                continue;
            }
            Desired::Hold => None,
            Desired::Engage {
                cluster, secret, ..
            } => {
                let attempt = attempt(
                    &ctx,
                    &rx,
                    &name,
                    (&cluster, &secret),
                    (&mut last_hash, &mut backoff),
                );
                match attempt.await {
                    Ok(state) => {
                        if state.is_engaged() {
                            backoff.reset();
                        }
                        ctx.set_status(&rx, &name, &cluster, state);
                        None
                    }
                    Err(err) if err.is_retryable() => {
                        let retry_in = backoff.next_delay();
                        let reason = err.chain();
                        error!(object = %cluster, error = %reason, retry_in = ?retry_in, "workload cluster not engaged; retrying");
                        let state = ClusterState::Failed { reason, retry_in };
                        ctx.set_status(&rx, &name, &cluster, state);
                        Some(retry_in)
                    }
                    Err(err) => {
                        let reason = err.chain();
                        error!(object = %cluster, error = %reason, "kubeconfig refused; waiting for the Secret to change");
                        ctx.set_status(&rx, &name, &cluster, ClusterState::Refused { reason });
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

/// Reads the Secret and engages (or keeps) the workload cluster. `Ok` carries the resulting
/// state: engaged, or waiting for the Secret or its key.
async fn attempt(
    ctx: &RunCtx,
    rx: &watch::Receiver<Desired>,
    name: &ClusterName,
    (cluster, secret): (&ObjectRef, &ObjectRef),
    (last_hash, backoff): (&mut Option<String>, &mut Backoff),
) -> Result<ClusterState, Error> {
    let shared = &ctx.shared;
    let opts = &shared.opts;
    let Some(data) = read_secret(shared, cluster, secret).await? else {
        warn!(object = %cluster, secret = %secret, "kubeconfig Secret not found: waiting for it");
        return Ok(ClusterState::MissingSecret {
            secret: secret.clone(),
        });
    };
    let Some(data) = data else {
        warn!(object = %cluster, secret = %secret, key = %opts.secret_key, "kubeconfig Secret has no kubeconfig under its key: waiting for it");
        return Ok(ClusterState::MissingKey {
            secret: secret.clone(),
            key: opts.secret_key.clone(),
        });
    };
    let kubeconfig_error = |source| Error::Kubeconfig {
        cluster: cluster.clone(),
        source,
    };
    let kc = kubeconfig::parse(&data).map_err(kubeconfig_error)?;
    let hash = kubeconfig::connection_hash(&kc, None).map_err(kubeconfig_error)?;
    if let Ok(current) = shared.clusters.get(name)
        && current.connection_hash() == Some(hash.as_str())
    {
        debug!(object = %cluster, "kubeconfig connection unchanged: keeping the engaged cluster");
        return Ok(ClusterState::Engaged { id: current.id() });
    }
    if last_hash.as_deref() != Some(hash.as_str()) {
        // A new kubeconfig starts with a short delay again.
        backoff.reset();
        *last_hash = Some(hash);
    }
    ctx.set_status(rx, name, cluster, ClusterState::Pending);
    let built = kubeconfig::cluster_for_context(
        name.clone(),
        &kc,
        None,
        &opts.client_options,
        &opts.policy,
    )
    .await
    .map_err(|source| classify(cluster, source))?;
    probe(&built.client(), opts.sync_timeout)
        .await
        .map_err(|reason| Error::Unreachable {
            cluster: cluster.clone(),
            reason,
        })?;
    let engage_error = |source| Error::Engage {
        cluster: cluster.clone(),
        source,
    };
    let outcome = shared
        .clusters
        .add_or_replace(&ctx.token, built, ctx.aware.as_ref())
        .await
        .map_err(engage_error)?;
    let current = shared.clusters.get(name).map_err(engage_error)?;
    info!(object = %cluster, outcome = ?outcome, id = %current.id(), "workload cluster engaged");
    Ok(ClusterState::Engaged { id: current.id() })
}

/// The kubeconfig bytes: `None` when the Secret is missing, `Some(None)` when its key is.
async fn read_secret(
    shared: &Shared,
    cluster: &ObjectRef,
    secret: &ObjectRef,
) -> Result<Option<Option<Vec<u8>>>, Error> {
    let api: Api<Secret> = Api::namespaced(shared.host.clone(), &secret.namespace);
    let timeout = shared.opts.sync_timeout;
    let read = match tokio::time::timeout(timeout, api.get_opt(&secret.name)).await {
        Ok(read) => read,
        Err(_) => {
            return Err(Error::Unreachable {
                cluster: cluster.clone(),
                reason: format!("reading Secret {secret} took more than {timeout:?}"),
            });
        }
    };
    let found = read.map_err(|source| Error::Secret {
        cluster: cluster.clone(),
        secret: secret.clone(),
        source,
    })?;
    Ok(found.map(|s| {
        s.data
            .and_then(|mut d| d.remove(&shared.opts.secret_key))
            .map(|b| b.0)
            .filter(|b| !b.is_empty())
    }))
}

fn classify(cluster: &ObjectRef, source: kubeconfig::Error) -> Error {
    match source {
        kubeconfig::Error::ExecNotAllowed { .. }
        | kubeconfig::Error::AuthProviderNotAllowed { .. }
        | kubeconfig::Error::FileReferenceNotAllowed { .. }
        | kubeconfig::Error::ProxyNotAllowed { .. } => Error::Refused {
            cluster: cluster.clone(),
            source,
        },
        source => Error::Kubeconfig {
            cluster: cluster.clone(),
            source,
        },
    }
}

/// `GET /version`, bounded: an unreachable server fails here and is retried instead of being
/// engaged and failing every controller.
async fn probe(client: &kube::Client, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        // Redacted: a credential refresh's error carries the command line and its output.
        Ok(Err(err)) => Err(kubeconfig::redact_kube_error(&err)),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}
