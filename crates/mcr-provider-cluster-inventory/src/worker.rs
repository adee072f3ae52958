//! One task per cluster name: turns the latest desired connection into an engaged cluster.
//!
//! The dispatcher publishes the desired state of a name into a `watch` channel (latest value
//! wins). The worker builds the client (running the credential plugin, bounded by
//! [`Options::credential_timeout`]), probes it, engages it through `mcr_core::Clusters`, and
//! retries failures with [`Backoff`]. A plugin that hangs or fails therefore only ever delays
//! its own worker.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mcr_core::backoff::Backoff;
use mcr_core::kubeconfig::{self, Kubeconfig, Policy};
use mcr_core::{Aware, ClusterId, ClusterName, Clusters};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::{Error, Options, ProfileRef, ProfileState, ProfileStatus};

/// A connection to build: a one-context kubeconfig, the exec policy it runs under, and the
/// connection hash (server, CA, proxy, credentials configuration) that decides re-engagement.
#[derive(Clone, Debug)]
pub(crate) struct Connect {
    pub(crate) kubeconfig: Kubeconfig,
    pub(crate) policy: Policy,
    pub(crate) hash: String,
}

/// What a profile wants for its cluster name.
#[derive(Clone, Debug)]
pub(crate) enum Want {
    Invalid(String),
    NotReady,
    Connect(Arc<Connect>),
}

/// What the provider should run under one cluster name.
#[derive(Clone, Debug)]
pub(crate) enum Desired {
    /// No profile maps to the name (any more): remove the cluster.
    Absent,
    /// The owning profile and what it wants.
    Profile {
        profile: ProfileRef,
        resource_version: Option<String>,
        want: Want,
    },
}

/// State shared by the provider handle, the dispatcher and the workers.
pub(crate) struct Shared {
    pub(crate) host: kube::Client,
    pub(crate) opts: Options,
    pub(crate) clusters: Clusters,
    pub(crate) statuses: Mutex<BTreeMap<ProfileRef, ProfileStatus>>,
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

/// The profile version a worker is acting on: statuses are recorded for exactly that version.
struct Seen<'a> {
    name: &'a ClusterName,
    profile: &'a ProfileRef,
    resource_version: &'a Option<String>,
}

impl RunCtx {
    /// Records `state` for the profile version `seen`, unless the name has moved to another
    /// profile meanwhile (the dispatcher owns that profile's entry then).
    fn set_status(&self, rx: &watch::Receiver<Desired>, seen: &Seen<'_>, state: ProfileState) {
        let mut statuses = lock(&self.shared.statuses);
        if !matches!(&*rx.borrow(), Desired::Profile { profile, .. } if profile == seen.profile) {
            return;
        }
        let status = ProfileStatus {
            cluster: Some(seen.name.clone()),
            resource_version: seen.resource_version.clone(),
            state,
        };
        statuses.insert(seen.profile.clone(), status);
    }
}

/// The worker loop of one cluster name. Returns when no profile maps to the name any more
/// (after removing its cluster) or when the provider stops.
pub(crate) async fn run(ctx: Arc<RunCtx>, name: ClusterName, mut rx: watch::Receiver<Desired>) {
    let opts = &ctx.shared.opts;
    let clusters = &ctx.shared.clusters;
    let mut backoff = Backoff::new(opts.backoff_initial, opts.backoff_max);
    let mut last_hash: Option<String> = None;
    loop {
        if ctx.token.is_cancelled() {
            return;
        }
        let desired = rx.borrow_and_update().clone();
        let retry = match desired {
            Desired::Absent => {
                if clusters.remove(&name) {
                    info!("cluster profile gone: cluster removed");
                }
                let mut slots = lock(&ctx.slots);
                if matches!(*rx.borrow(), Desired::Absent) {
                    slots.remove(&name);
                    return;
                }
                continue;
            }
            Desired::Profile {
                profile,
                resource_version,
                want,
            } => {
                let seen = Seen {
                    name: &name,
                    profile: &profile,
                    resource_version: &resource_version,
                };
                match want {
                    Want::Invalid(reason) => {
                        warn!(profile = %profile, reason = %reason, "cluster profile cannot be engaged; waiting for it to change");
                        ctx.set_status(&rx, &seen, ProfileState::Invalid { reason });
                        None
                    }
                    Want::NotReady => {
                        if opts.disengage_when_unhealthy && clusters.remove(&name) {
                            info!(profile = %profile, "cluster profile not ready: cluster disengaged");
                        }
                        last_hash = None;
                        let engaged = clusters.get(&name).is_ok();
                        ctx.set_status(&rx, &seen, ProfileState::NotReady { engaged });
                        None
                    }
                    Want::Connect(connect) => {
                        if last_hash.as_deref() != Some(connect.hash.as_str()) {
                            backoff.reset();
                            last_hash = Some(connect.hash.clone());
                        }
                        match engage(&ctx, &rx, &seen, &connect).await {
                            Ok(id) => {
                                backoff.reset();
                                ctx.set_status(&rx, &seen, ProfileState::Engaged { id });
                                None
                            }
                            Err(err) if err.is_retryable() => {
                                let retry_in = backoff.next_delay();
                                error!(error = %err, retry_in = ?retry_in, "cluster profile not engaged; retrying");
                                let reason = err.to_string();
                                ctx.set_status(
                                    &rx,
                                    &seen,
                                    ProfileState::Failed { reason, retry_in },
                                );
                                Some(retry_in)
                            }
                            Err(err) => {
                                error!(error = %err, "cluster profile refused; waiting for it to change");
                                let reason = err.to_string();
                                ctx.set_status(&rx, &seen, ProfileState::Invalid { reason });
                                None
                            }
                        }
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

/// Builds, probes and engages the connection unless the running instance has the same hash.
async fn engage(
    ctx: &RunCtx,
    rx: &watch::Receiver<Desired>,
    seen: &Seen<'_>,
    connect: &Connect,
) -> Result<ClusterId, Error> {
    let (name, profile) = (seen.name, seen.profile);
    let shared = &ctx.shared;
    let opts = &shared.opts;
    if let Ok(current) = shared.clusters.get(name)
        && current.connection_hash() == Some(connect.hash.as_str())
    {
        debug!(profile = %profile, "connection unchanged: keeping the engaged cluster");
        return Ok(current.id());
    }
    ctx.set_status(rx, seen, ProfileState::Pending);
    let build = kubeconfig::cluster_for_context(
        name.clone(),
        &connect.kubeconfig,
        None,
        &opts.client_options,
        &connect.policy,
    );
    let cluster = match tokio::time::timeout(opts.credential_timeout, build).await {
        Ok(Ok(cluster)) => cluster.with_connection_hash(connect.hash.clone()),
        Ok(Err(source)) => {
            return Err(Error::Client {
                profile: profile.clone(),
                source,
            });
        }
        Err(_) => {
            return Err(Error::PluginTimeout {
                profile: profile.clone(),
                after: opts.credential_timeout,
            });
        }
    };
    probe(&cluster.client(), opts.sync_timeout)
        .await
        .map_err(|reason| Error::Unreachable {
            profile: profile.clone(),
            reason,
        })?;
    let engage_err = |source| Error::Engage {
        profile: profile.clone(),
        source: Box::new(source),
    };
    let outcome = shared
        .clusters
        .add_or_replace(&ctx.token, cluster, ctx.aware.as_ref())
        .await
        .map_err(engage_err)?;
    let current = shared.clusters.get(name).map_err(engage_err)?;
    info!(profile = %profile, outcome = ?outcome, id = ?current.id(), "cluster engaged from cluster profile");
    Ok(current.id())
}

/// One cheap request (`GET /version`), bounded, so a server that does not answer (or refuses
/// the plugin's credentials) fails here and is retried rather than engaged.
async fn probe(client: &kube::Client, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        // A refreshed credential's error would carry the command line and output: redacted.
        Ok(Err(err)) => Err(kubeconfig::redact_kube_error(&err)),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}
