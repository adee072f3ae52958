//! [`ShootSource`]: one Shoot as the [`Engagements`](mcr_core::Engagements) table asks for
//! it, and [`Renewal`], the renewal of the credentials of one instance.

use std::sync::Arc;

use mcr_core::credentials::{self, Credentials, Renew, RenewableClient};
use mcr_core::{BoxError, BoxFuture, Cluster, ClusterName, Connect, Released, Source};
use tokio_util::sync::CancellationToken;

use crate::request::ShootKubeconfig;

/// The member of one Shoot: the table asks it for a cluster when it brings the member up, and
/// only then (never for a Shoot another replica owns). It requests a kubeconfig and builds a
/// cluster whose client renews its credentials in place while the instance lives.
pub(crate) struct ShootSource {
    pub(crate) shoot: Arc<ShootKubeconfig>,
    /// The member's name (as the provider knows it).
    pub(crate) name: ClusterName,
    /// The provider's run: no renewal outlives it.
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
            let renewal = Renewal {
                shoot: shoot.clone(),
                instance: cluster.released(),
                stop: stop.clone(),
            };
            let opts = shoot.opts.renewal.clone();
            credentials::spawn_renewal(self.name.clone(), handle, Arc::new(renewal), opts, stop);
            Ok(Source::Cluster(cluster))
        })
    }
}

/// The renewal source of one instance: asks the garden while the instance lives (the member
/// engaged, or coming up). Once the instance is gone (removed, replaced, given to another
/// replica, or failed to come up: its last handle dropped), the renewal due next ends instead:
/// it cancels the renewal's token and asks nothing.
struct Renewal {
    shoot: Arc<ShootKubeconfig>,
    instance: Released,
    stop: CancellationToken,
}

impl Renew for Renewal {
    fn renew(&self) -> BoxFuture<'_, Result<Credentials, BoxError>> {
        if self.instance.is_released() {
            self.stop.cancel();
            // Never answers: the renewal ends on its cancelled token, with no failure recorded.
            return Box::pin(std::future::pending());
        }
        self.shoot.renew()
    }
}
