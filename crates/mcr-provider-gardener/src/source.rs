//! [`ShootSource`]: one Shoot as the [`Engagements`](mcr_core::Engagements) table asks for
//! it.

use std::sync::Arc;

use mcr_core::credentials::{self, RenewableClient};
use mcr_core::{BoxError, BoxFuture, Cluster, ClusterName, Connect, Source};
use tokio_util::sync::CancellationToken;

use crate::request::ShootKubeconfig;

/// The member of one Shoot: the table asks it for a cluster when it brings the member up, and
/// only then (never for a Shoot another replica owns). It requests a kubeconfig, builds a
/// cluster whose client renews its credentials in place, and renews them until the instance is
/// gone (its last handle dropped: the member was removed, replaced, given away or failed to
/// come up) or the provider's run ends.
pub(crate) struct ShootSource {
    pub(crate) shoot: Arc<ShootKubeconfig>,
    /// The member's name (as the provider knows it).
    pub(crate) name: ClusterName,
    /// The provider's run.
    pub(crate) run: CancellationToken,
}

impl Connect for ShootSource {
    /// The advertised address connected to: another one is a new instance.
    fn key(&self) -> String {
        self.shoot.server.clone().unwrap_or_default()
    }

    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        Box::pin(async move {
            let shoot = &self.shoot;
            let (config, creds) = shoot.fetch().await?;
            let (client, handle) =
                RenewableClient::build(config, creds).map_err(|e| shoot.unusable(e.to_string()))?;
            let cluster = Cluster::new(self.name.clone(), client).with_credentials(handle.clone());
            let stop = self.run.child_token();
            credentials::spawn_renewal(
                self.name.clone(),
                handle,
                shoot.clone(),
                shoot.opts.renewal.clone(),
                stop.clone(),
            );
            let released = cluster.released();
            tokio::spawn(async move {
                tokio::select! {
                    () = released.wait() => stop.cancel(),
                    () = stop.cancelled() => {}
                }
            });
            Ok(Source::Cluster(cluster))
        })
    }
}
