//! What the provider does for one cluster name: read the kubeconfig Secret of the latest
//! desired `Cluster` and keep the matching workload cluster engaged through
//! [`mcr_core::members`] (per-name worker, backoff, hash short-circuit, credentials renewed in
//! place, probe). A missing Secret or key waits for the Secret watch to poke the worker.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use mcr_core::members::{self, Connection, Converge, Member, ProviderShared};
use mcr_core::{BoxFuture, ErrorChain};
use tracing::{error, warn};

use crate::{ClusterState, ClusterStatus, Error, ObjectRef, Options};

/// What should run under one cluster name (nothing: the dispatcher removes the member).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Desired {
    /// Keep whatever runs; start nothing.
    Hold,
    /// Run the workload cluster of `cluster` from `secret`. `poke` changes on every request
    /// to look again (a Secret event).
    Engage {
        cluster: ObjectRef,
        secret: ObjectRef,
        poke: u64,
    },
}

/// State shared by the provider handle, the dispatcher and the workers.
pub(crate) type Shared = ProviderShared<Options, ObjectRef, ClusterStatus>;

/// The [`Converge`] of the Cluster API provider.
pub(crate) struct Connect(pub(crate) Arc<Shared>);

impl Connect {
    /// Records `state` for `cluster` unless the name now wants another `Cluster` (or nothing):
    /// the dispatcher owns the status then.
    fn set_status(&self, member: &Member<Desired>, cluster: &ObjectRef, state: ClusterState) {
        let status = ClusterStatus {
            name: member.name().clone(),
            state,
        };
        self.0.statuses.insert_if(cluster.clone(), status, || {
            member.latest_is(|d| matches!(d, Desired::Engage { cluster: c, .. } if c == cluster))
        });
    }

    /// Reads the Secret and engages (or keeps) the workload cluster; the resulting state.
    async fn attempt(
        &self,
        member: &Member<Desired>,
        cluster: &ObjectRef,
        secret: &ObjectRef,
    ) -> Result<ClusterState, Error> {
        let opts = &self.0.opts;
        let Some(data) = read_secret(&self.0, cluster, secret).await? else {
            warn!(object = %cluster, secret = %secret, "kubeconfig Secret not found: waiting for it");
            let secret = secret.clone();
            return Ok(ClusterState::MissingSecret { secret });
        };
        let Some(data) = data else {
            warn!(object = %cluster, secret = %secret, key = %opts.secret_key, "kubeconfig Secret has no kubeconfig under its key: waiting for it");
            let (secret, key) = (secret.clone(), opts.secret_key.clone());
            return Ok(ClusterState::MissingKey { secret, key });
        };
        let connection = Connection::parse(&data).map_err(|source| Error::Kubeconfig {
            cluster: cluster.clone(),
            source,
        })?;
        if member.changes(&connection) {
            self.set_status(member, cluster, ClusterState::Pending);
        }
        let ensured = member.ensure(&connection).await;
        let id = ensured
            .map_err(|err| Error::from_member(cluster, err))?
            .id();
        Ok(ClusterState::Engaged { id })
    }
}

impl Converge for Connect {
    type Desired = Desired;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Desired>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let Desired::Engage {
                cluster, secret, ..
            } = member.desired()
            else {
                return Ok(());
            };
            let state = self.attempt(member, cluster, secret).await?;
            self.set_status(member, cluster, state);
            Ok(())
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, member: &Member<Desired>, err: &Error, retry_in: Option<Duration>) {
        let Desired::Engage { cluster, .. } = member.desired() else {
            return;
        };
        let reason = err.chain();
        let state = match retry_in {
            Some(retry_in) => {
                error!(object = %cluster, error = %reason, retry_in = ?retry_in, "workload cluster not engaged; retrying");
                ClusterState::Failed { reason, retry_in }
            }
            None => {
                error!(object = %cluster, error = %reason, "kubeconfig refused; waiting for the Secret to change");
                ClusterState::PolicyDenied { reason }
            }
        };
        self.set_status(member, cluster, state);
    }
}

/// The kubeconfig bytes: `None` when the Secret is missing, `Some(None)` when its key is.
async fn read_secret(
    shared: &Shared,
    cluster: &ObjectRef,
    secret: &ObjectRef,
) -> Result<Option<Option<Vec<u8>>>, Error> {
    let api: Api<Secret> = Api::namespaced(shared.host.clone(), &secret.namespace);
    let timeout = shared.opts.members.sync_timeout;
    let read = match tokio::time::timeout(timeout, api.get_opt(&secret.name)).await {
        Ok(read) => read,
        Err(_) => {
            return Err(Error::Unreachable {
                cluster: cluster.clone(),
                reason: format!(
                    "host API server unreachable: reading Secret {secret} took more than {timeout:?}"
                ),
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

impl Error {
    /// The member helper's error, about `cluster`.
    fn from_member(cluster: &ObjectRef, err: members::Error) -> Error {
        let cluster = cluster.clone();
        match err {
            members::Error::PolicyDenied { source, .. } => Error::PolicyDenied { cluster, source },
            members::Error::Kubeconfig { source, .. } => Error::Kubeconfig { cluster, source },
            members::Error::Unreachable { source, .. } => Error::Unreachable {
                cluster,
                reason: ErrorChain(&source).to_string(),
            },
            members::Error::Engage { source, .. } => Error::Engage { cluster, source },
            source => Error::Member { cluster, source },
        }
    }
}
