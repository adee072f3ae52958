//! Bringing one Shoot up: request a kubeconfig, build a renewable member, engage it, start
//! renewal; retried with backoff until it works or the Shoot goes away.

use std::sync::Arc;

use mcr_core::backoff::Backoff;
use mcr_core::credentials::{self, RenewableClient};
use mcr_core::members::Members;
use mcr_core::{Cluster, ClusterName};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::request::ShootKubeconfig;
use crate::{Error, Options};

/// Requests a kubeconfig, builds the member and engages it, retrying with backoff until it
/// works or the member is forgotten; then renews its credentials in place.
pub(crate) async fn engage(
    engaged: Members,
    opts: Arc<Options>,
    name: ClusterName,
    source: Arc<ShootKubeconfig>,
    token: CancellationToken,
) {
    let mut backoff = Backoff::new(opts.retry_initial, opts.retry_max);
    loop {
        match attempt(&engaged, &opts, &name, &source, &token).await {
            Ok(()) => return engaged.report_done(&name),
            Err(err) => {
                if token.is_cancelled() {
                    return;
                }
                let delay = backoff.next_delay();
                warn!(error = %err, retry_in = ?delay, "could not engage the Shoot");
                engaged.report_failure(&name, &err, Some(delay));
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

async fn attempt(
    engaged: &Members,
    opts: &Options,
    name: &ClusterName,
    source: &Arc<ShootKubeconfig>,
    token: &CancellationToken,
) -> Result<(), Error> {
    let (config, creds) = source.fetch().await?;
    let (client, handle) =
        RenewableClient::build(config, creds).map_err(|e| Error::Kubeconfig {
            shoot: source.namespace.clone() + "/" + &source.name,
            reason: e.to_string(),
        })?;
    let cluster = Cluster::new(name.clone(), client).with_credentials(handle.clone());
    engaged.engagements().add(token, cluster).await?;
    let cluster_token = engaged
        .engagements()
        .token(name)
        .unwrap_or_else(|| token.child_token());
    credentials::spawn_renewal(
        name.clone(),
        handle,
        source.clone(),
        opts.renewal.clone(),
        cluster_token,
    );
    info!("engaged; credentials are renewed in place");
    Ok(())
}
