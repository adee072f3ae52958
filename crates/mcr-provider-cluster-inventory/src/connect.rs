//! What the provider does for one cluster name: turn the owning profile's connection into an
//! engaged cluster through [`mcr_core::members`] (per-name worker, backoff, hash short-circuit,
//! bounded client build with the credential plugin, probe) and record the outcome per profile.

use std::sync::Arc;
use std::time::Duration;

use mcr_core::members::{self, Connection, Converge, Member, ProviderShared};
use mcr_core::{BoxFuture, ErrorChain};
use tracing::{error, info, warn};

use crate::{Error, Options, ProfileRef, ProfileState, ProfileStatus};

/// What a profile wants for its cluster name.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Want {
    Invalid(String),
    NotReady,
    /// A one-context kubeconfig with the [`Policy`](mcr_core::kubeconfig::Policy) it runs under.
    Connect(Arc<Connection>),
}

/// The profile owning a cluster name and what it wants (nothing: the dispatcher removes the
/// member).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Desired {
    pub(crate) profile: ProfileRef,
    pub(crate) resource_version: Option<String>,
    pub(crate) want: Want,
}

/// State shared by the provider handle, the dispatcher and the workers.
pub(crate) type Shared = ProviderShared<Options, ProfileRef, ProfileStatus>;

/// The [`Converge`] of the cluster inventory provider.
pub(crate) struct Connect(pub(crate) Arc<Shared>);

impl Connect {
    /// Records `state` for the member's profile version, unless the name has moved to another
    /// profile meanwhile (the dispatcher owns that profile's entry then).
    fn set_status(&self, member: &Member<Desired>, state: ProfileState) {
        let desired = member.desired();
        let status = ProfileStatus {
            cluster: Some(member.name().clone()),
            resource_version: desired.resource_version.clone(),
            state,
        };
        self.0
            .statuses
            .insert_if(desired.profile.clone(), status, || {
                member.latest_is(|latest| latest.profile == desired.profile)
            });
    }
}

impl Converge for Connect {
    type Desired = Desired;
    type Error = Error;

    fn converge<'a>(&'a self, member: &'a Member<Desired>) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let (name, profile) = (member.name(), &member.desired().profile);
            let members = &self.0.members;
            let connection = match &member.desired().want {
                Want::Invalid(reason) => {
                    warn!(profile = %profile, reason = %reason, "cluster profile cannot be engaged; waiting for it to change");
                    let reason = reason.clone();
                    self.set_status(member, ProfileState::Invalid { reason });
                    return Ok(());
                }
                Want::NotReady => {
                    if self.0.opts.disengage_when_unhealthy && members.remove(name) {
                        info!(profile = %profile, "cluster profile not ready: cluster disengaged");
                    }
                    let engaged = members.engagements().get(name).is_ok();
                    self.set_status(member, ProfileState::NotReady { engaged });
                    return Ok(());
                }
                Want::Connect(connection) => connection,
            };
            if member.changes(connection) {
                self.set_status(member, ProfileState::Pending);
            }
            let ensured = member.ensure(connection).await;
            let id = ensured
                .map_err(|err| Error::from_member(profile, err))?
                .id();
            self.set_status(member, ProfileState::Engaged { id });
            Ok(())
        })
    }

    fn is_retryable(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    fn failed(&self, member: &Member<Desired>, err: &Error, retry_in: Option<Duration>) {
        let reason = err.to_string();
        let state = match retry_in {
            Some(retry_in) => {
                error!(error = %ErrorChain(err), retry_in = ?retry_in, "cluster profile not engaged; retrying");
                ProfileState::Failed { reason, retry_in }
            }
            None => {
                error!(error = %ErrorChain(err), "cluster profile not engaged; waiting for it to change");
                match err {
                    Error::PolicyDenied { .. } => ProfileState::PolicyDenied { reason },
                    _ => ProfileState::Invalid { reason },
                }
            }
        };
        self.set_status(member, state);
    }
}

impl Error {
    /// The member helper's error, about `profile`.
    fn from_member(profile: &ProfileRef, err: members::Error) -> Error {
        let profile = profile.clone();
        match err {
            members::Error::PolicyDenied { source, .. } => Error::PolicyDenied { profile, source },
            members::Error::Kubeconfig { source, .. } => Error::Client { profile, source },
            members::Error::BuildTimeout { after, .. } => Error::PluginTimeout { profile, after },
            members::Error::Engage { source, .. } => Error::Engage {
                profile,
                source: Box::new(source),
            },
            other => Error::Unreachable {
                profile,
                reason: match other {
                    members::Error::Unreachable { source, .. } => ErrorChain(&source).to_string(),
                    other => ErrorChain(&other).to_string(),
                },
            },
        }
    }
}
