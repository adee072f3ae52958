//! [`Members::ensure`]: one attempt to bring a member to the wanted connection.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::{Connection, Ensured, Error, Members, ProbeError};
use crate::kubeconfig::{self, Policy};
use crate::{AddOutcome, Cluster, ClusterId, ClusterName, credentials};

impl Members {
    /// Brings the member `name` to `connection`, bounded in time at every step:
    ///
    /// 1. the running member already has the connection's hash: [`Ensured::Unchanged`];
    /// 2. only its credentials changed (same server, CA and settings) and it is renewable: they
    ///    are renewed in place, keeping the cluster, its caches and watches
    ///    ([`Ensured::Renewed`], no relist);
    /// 3. otherwise a new instance is built (within
    ///    [`build_timeout`](super::MembersOptions::build_timeout)), probed with `GET /version`
    ///    (within [`probe_timeout`](super::MembersOptions::probe_timeout)), started, synced,
    ///    indexed and engaged, replacing the running one ([`Ensured::Added`] or
    ///    [`Ensured::Replaced`]). Until the new instance answers, the old one stays engaged.
    ///
    /// Meanwhile the name is reported pending, and failed (with the redacted error) when the
    /// attempt fails ([`member_statuses`](Members::member_statuses)).
    ///
    /// Clusters are engaged with child tokens of `token`. The future can be dropped at any
    /// point (a credential plugin still running is killed).
    ///
    /// ```no_run
    /// # async fn f(members: mcr_core::members::Members, bytes: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
    /// use mcr_core::members::Connection;
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let conn = Connection::parse(bytes)?;
    /// let ensured = members.ensure(&token, &"member-1".into(), &conn).await?;
    /// println!("running instance {}", ensured.id());
    /// # Ok(()) }
    /// ```
    pub async fn ensure(
        &self,
        token: &CancellationToken,
        name: &ClusterName,
        connection: &Connection,
    ) -> Result<Ensured, Error> {
        if let Some(id) = self.unchanged(name, connection) {
            debug!(cluster = %name, "connection unchanged: keeping the engaged cluster");
            self.report_done(name);
            return Ok(Ensured::Unchanged(id));
        }
        self.report_pending(name);
        let ensured = self.ensure_changed(token, name, connection).await;
        match &ensured {
            Ok(_) => self.report_done(name),
            Err(err) => self.report_failure(name, err, None),
        }
        ensured
    }

    /// [`ensure`](Self::ensure) once the connection is known to differ from the running one.
    async fn ensure_changed(
        &self,
        token: &CancellationToken,
        name: &ClusterName,
        connection: &Connection,
    ) -> Result<Ensured, Error> {
        if let Some(id) = self.renew(name, connection).await {
            info!(cluster = %name, id = %id, "only the credentials changed: renewed in place");
            return Ok(Ensured::Renewed(id));
        }
        let cluster = self.build(name, connection).await?;
        self.probe(name, &cluster).await?;
        let engage = |source| Error::Engage {
            cluster: name.clone(),
            source,
        };
        let engagements = self.engagements();
        let outcome = engagements
            .add_or_replace(token, cluster)
            .await
            .map_err(engage)?;
        let id = engagements.get(name).map_err(engage)?.id();
        info!(cluster = %name, outcome = ?outcome, id = %id, "member engaged");
        Ok(match outcome {
            AddOutcome::Added => Ensured::Added(id),
            AddOutcome::Replaced => Ensured::Replaced(id),
            AddOutcome::Unchanged => Ensured::Unchanged(id),
        })
    }

    /// The id of the running member of `name` when it already has `connection`'s hash: then
    /// [`ensure`](Members::ensure) does nothing. Lets a provider report "pending" only when
    /// something is going to happen.
    ///
    /// ```no_run
    /// # fn f(members: &mcr_core::members::Members, conn: &mcr_core::members::Connection) {
    /// if members.unchanged(&"a".into(), conn).is_none() { println!("building a"); }
    /// # }
    /// ```
    pub fn unchanged(&self, name: &ClusterName, connection: &Connection) -> Option<ClusterId> {
        let current = self.engagements().get(name).ok()?;
        let id = current.id();
        let hash = Some(connection.hash());
        let renewed = self.renewed();
        let renewed = renewed.get(name).filter(|(at, _)| *at == id);
        let same = current.connection_hash() == hash || renewed.map(|(_, h)| h.as_str()) == hash;
        same.then_some(id)
    }

    /// Renews the running member's credentials in place when that is all that changed. The
    /// rotated kubeconfig goes through the member's policy like a new one (a rotation to a
    /// `tokenFile` or a `proxy-url` the policy refuses is not applied in place; the build that
    /// follows reports the refusal).
    async fn renew(&self, name: &ClusterName, connection: &Connection) -> Option<ClusterId> {
        if !connection.is_renewable() {
            return None;
        }
        let current = self.engagements().get(name).ok()?;
        let renew = credentials::renew_in_place(
            &current,
            connection.kubeconfig(),
            connection.context(),
            &self.options().client_options,
            self.policy(connection),
        );
        match tokio::time::timeout(self.options().build_timeout, renew).await {
            Ok(Ok(true)) => {
                let applied = (current.id(), connection.hash().to_owned());
                self.renewed().insert(name.clone(), applied);
                Some(current.id())
            }
            _ => None,
        }
    }

    /// The policy `connection` runs under: its own, else the members' one.
    fn policy<'a>(&'a self, connection: &'a Connection) -> &'a Policy {
        connection.policy().unwrap_or(&self.options().policy)
    }

    /// A new instance: renewable when its credentials are static, else the kubeconfig path;
    /// both check the member's [`Policy`] before anything runs or is read.
    async fn build(&self, name: &ClusterName, connection: &Connection) -> Result<Cluster, Error> {
        let opts = self.options();
        let (kc, context) = (connection.kubeconfig(), connection.context());
        let policy = self.policy(connection);
        let build = async {
            if connection.is_renewable() && credentials::is_renewable(kc, context) {
                let renewable = credentials::cluster_for_context(
                    name.clone(),
                    kc,
                    context,
                    &opts.client_options,
                    policy,
                );
                if let Ok(cluster) = renewable.await {
                    return Ok(cluster);
                }
            }
            kubeconfig::cluster_for_context(name.clone(), kc, context, &opts.client_options, policy)
                .await
        };
        match tokio::time::timeout(opts.build_timeout, build).await {
            Ok(Ok(cluster)) => Ok(cluster.with_connection_hash(connection.hash())),
            Ok(Err(source)) if source.is_policy_denial() => Err(Error::PolicyDenied {
                cluster: name.clone(),
                source,
            }),
            Ok(Err(source)) => Err(Error::Kubeconfig {
                cluster: name.clone(),
                source,
            }),
            Err(_) => Err(Error::BuildTimeout {
                cluster: name.clone(),
                after: opts.build_timeout,
            }),
        }
    }

    /// One cheap request (`GET /version`), bounded, so an unreachable or misconfigured server
    /// fails here and is retried, rather than being engaged and failing every controller.
    async fn probe(&self, name: &ClusterName, cluster: &Cluster) -> Result<(), Error> {
        let Some(timeout) = self.options().probe_timeout else {
            return Ok(());
        };
        let connect_timeout = (self.options().client_options.connect_timeout)
            .unwrap_or(kubeconfig::DEFAULT_CONNECT_TIMEOUT);
        probe(&cluster.client(), timeout, connect_timeout)
            .await
            .map_err(|source| Error::Unreachable {
                cluster: name.clone(),
                source,
            })
    }
}

async fn probe(
    client: &kube::Client,
    timeout: Duration,
    connect_timeout: Duration,
) -> Result<(), ProbeError> {
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(ProbeError::from_kube(err, connect_timeout)),
        Err(_) => Err(ProbeError::Timeout(timeout)),
    }
}
