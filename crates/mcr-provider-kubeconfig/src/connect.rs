//! What the provider does for one cluster name: turn the owning Secret's kubeconfig into an
//! engaged cluster through [`mcr_core::members`] (per-name worker, backoff, hash short-circuit,
//! renewal in place, probe) and record the outcome per Secret.

use std::sync::Arc;
use std::time::Duration;

use mcr_core::members::{self, Connection, Converge, Member, ProviderShared};
use mcr_core::{BoxFuture, ErrorChain};
use tracing::{error, warn};

use crate::{Error, Options, SecretRef, SecretState, SecretStatus};

/// The Secret that owns a cluster name; `data` is `None` when the data key is missing or
/// empty.
#[derive(Clone, PartialEq)]
pub(crate) struct Desired {
    pub(crate) secret: SecretRef,
    pub(crate) resource_version: Option<String>,
    pub(crate) data: Option<Arc<[u8]>>,
}

/// The kubeconfig's size, never its bytes (they hold the member's credentials).
impl std::fmt::Debug for Desired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desired")
            .field("secret", &self.secret)
            .field("resource_version", &self.resource_version)
            .field("data_len", &self.data.as_ref().map(|d| d.len()))
            .finish()
    }
}

/// State shared by the provider handle, the dispatcher and the workers.
pub(crate) type Shared = ProviderShared<Options, SecretRef, SecretStatus>;

/// The [`Converge`] of the kubeconfig provider.
pub(crate) struct Connect(pub(crate) Arc<Shared>);

impl Connect {
    /// Records `state` for the member's Secret, unless the name has moved to another Secret
    /// (or to none) meanwhile: the dispatcher owns those entries then.
    fn set_status(&self, member: &Member<Desired>, state: SecretState) {
        let desired = member.desired();
        let status = SecretStatus {
            cluster: member.name().clone(),
            resource_version: desired.resource_version.clone(),
            state,
        };
        self.0
            .statuses
            .insert_if(desired.secret.clone(), status, || {
                member.latest_is(|latest| latest.secret == desired.secret)
            });
    }
}

impl Converge for Connect {
    type Desired = Desired;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Desired>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let secret = &member.desired().secret;
            let Some(data) = &member.desired().data else {
                warn!(secret = %secret, key = %self.0.opts.data_key, "Secret has no kubeconfig under its data key (missing or empty): ignored until the key is added");
                self.set_status(member, SecretState::MissingKey);
                return Ok(());
            };
            let connection = Connection::parse(data).map_err(|source| Error::Kubeconfig {
                secret: secret.clone(),
                source,
            })?;
            if member.changes(&connection) {
                self.set_status(member, SecretState::Pending);
            }
            let id = member
                .ensure(&connection)
                .await
                .map_err(|err| Error::from_member(secret, err))?
                .id();
            self.set_status(member, SecretState::Engaged { id });
            Ok(())
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, member: &Member<Desired>, err: &Error, retry_in: Option<Duration>) {
        let reason = ErrorChain(err).to_string();
        let state = match retry_in {
            Some(retry_in) => {
                error!(error = %reason, retry_in = ?retry_in, "kubeconfig Secret not engaged; retrying");
                SecretState::Failed { reason, retry_in }
            }
            None => {
                error!(error = %reason, "kubeconfig Secret refused; waiting for the Secret to change");
                SecretState::PolicyDenied { reason }
            }
        };
        self.set_status(member, state);
    }
}

impl Error {
    /// The member helper's error, about `secret`.
    fn from_member(secret: &SecretRef, err: members::Error) -> Error {
        let secret = secret.clone();
        match err {
            members::Error::PolicyDenied { source, .. } => Error::PolicyDenied { secret, source },
            members::Error::Kubeconfig { source, .. } => Error::Kubeconfig { secret, source },
            members::Error::Unreachable { source, .. } => Error::Unreachable { secret, source },
            members::Error::Engage { source, .. } => Error::Engage { secret, source },
            other => Error::Member {
                secret,
                source: other,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Secret's kubeconfig bytes never show in Debug output (they hold its credentials).
    #[test]
    fn desired_debug_shows_no_kubeconfig() {
        let desired = Desired {
            secret: SecretRef::new("ns", "a"),
            resource_version: Some("7".into()),
            data: Some(Arc::from(
                &b"users: [{name: u, user: {token: planted-token}}]"[..],
            )),
        };
        let shown = format!("{desired:?} {desired:#?}");
        assert!(!shown.contains("planted"), "{shown}");
        assert!(!shown.contains("117"), "no byte dump: {shown}");
        assert!(shown.contains("ns/a") || shown.contains("\"a\""), "{shown}");
    }
}
