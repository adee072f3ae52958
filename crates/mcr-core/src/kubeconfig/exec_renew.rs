//! Exec-plugin credentials renewed in place.
//!
//! mcr runs `exec` credential plugins itself (bounded, see [`ClientOptions::exec_timeout`]) and
//! hands kube the credential they return, so kube never re-runs a plugin on its own. A
//! credential with an expiry (EKS tokens last 15 minutes) must therefore be renewed by mcr:
//! [`cluster_for_context`](super::cluster_for_context) builds such a member on a
//! [`RenewableClient`](crate::credentials::RenewableClient) and re-runs the plugin before the
//! credential expires, swapping the result in under the same client and cache (nothing is
//! relisted). The renewal stops when the last handle to the [`Cluster`](crate::Cluster) is
//! dropped.
//!
//! [`ClientOptions::exec_timeout`]: super::ClientOptions::exec_timeout

use std::time::Duration;

use kube::config::AuthInfo;

use super::exec::resolve_exec;
use super::exec_rule::ExecEnv;
use crate::credentials::{Credentials, Renew};
use crate::{BoxError, BoxFuture};

/// Re-runs the plugin of one kubeconfig user (its original `exec` stanza).
pub(crate) struct ExecRenew {
    /// The user as the kubeconfig gives it, `exec` included.
    pub(crate) auth: AuthInfo,
    /// How long one plugin run may take.
    pub(crate) timeout: Duration,
    /// The environment the policy gives the plugin.
    pub(crate) env: ExecEnv,
    /// The context, for errors (never the plugin's arguments or output).
    pub(crate) context: String,
}

impl Renew for ExecRenew {
    fn renew(&self) -> BoxFuture<'_, Result<Credentials, BoxError>> {
        Box::pin(async move {
            let mut auth = self.auth.clone();
            let issued = resolve_exec(&mut auth, self.timeout, &self.env)
                .await
                .map_err(|reason| format!("context {:?}: {reason}", self.context))?;
            let credentials = Credentials::from_auth_info(&auth)?;
            Ok(match issued.and_then(|c| c.expires_at) {
                Some(at) => credentials.with_expiry(at),
                None => credentials,
            })
        })
    }
}
