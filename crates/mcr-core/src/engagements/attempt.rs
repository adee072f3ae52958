//! One attempt of the table to bring a member to its wanted source: ask a
//! [`Connect`](super::Connect) source, renew the running instance's credentials in place or
//! build a new instance (bounded), probe it (bounded), start its cache, engage it with every
//! subscriber, apply the field indexes and wait for its informers to list (bounded). The
//! outcome goes back to the converge step ([`Engagements::finish`]); a removal, a newer source
//! or a change of ownership cancels the attempt's token, which drops it wherever it is.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::converge::Outcome;
use super::{Engagements, Source};
use crate::members::{Connection, Error as MemberError, ProbeError};
use crate::{Cluster, ClusterName, Error, credentials, kubeconfig};

/// An attempt, as the converge step spawned it.
pub(super) struct Attempt {
    /// The table, through the handle the member was wanted with.
    pub(super) handle: Engagements,
    /// The member's full name.
    pub(super) name: ClusterName,
    pub(super) id: u64,
    pub(super) token: CancellationToken,
    pub(super) source: Source,
    /// The instance serving now, if any: renewed in place, or replaced once the new one synced.
    pub(super) running: Option<Cluster>,
}

impl Attempt {
    /// Runs the attempt and hands its outcome to the table; returns at once when cancelled.
    pub(super) async fn run(self) {
        // A panic in a provider's code (a `Connect` source, a subscriber) costs the member one
        // attempt, retried with backoff, not its entry.
        let attempt = AssertUnwindSafe(self.bring_up()).catch_unwind();
        let outcome = tokio::select! {
            biased;
            // Removed, superseded or given away: the converge step that cancelled it decided
            // what comes next.
            () = self.token.cancelled() => return,
            outcome = attempt => outcome.unwrap_or_else(|panic| {
                Err(Error::Engage {
                    cluster: self.local(),
                    source: format!(
                        "bringing the member up panicked: {}",
                        crate::panic_message(panic.as_ref())
                    )
                    .into(),
                })
            }),
        };
        if outcome.is_err() {
            // Nothing it started keeps running.
            self.token.cancel();
        }
        self.handle.finish(&self.name, self.id, outcome);
    }

    /// The name the provider knows the member by (without the handle's prefix).
    fn local(&self) -> ClusterName {
        self.handle
            .local(&self.name)
            .unwrap_or_else(|| self.name.clone())
    }

    async fn bring_up(&self) -> Result<Outcome, Error> {
        let source = match &self.source {
            Source::Connect(connect) => {
                let after = self.handle.view.opts.build_timeout;
                let connected = tokio::time::timeout(after, connect.connect()).await;
                match connected {
                    Ok(Ok(Source::Connect(_))) => {
                        return Err(self.refused("a Connect source answered with another Connect"));
                    }
                    Ok(Ok(source)) => source,
                    Ok(Err(source)) => {
                        let retryable = connect.is_retryable(&source);
                        return Err(MemberError::Connect {
                            cluster: self.local(),
                            source,
                            retryable,
                        }
                        .into());
                    }
                    Err(_) => {
                        return Err(MemberError::BuildTimeout {
                            cluster: self.local(),
                            after,
                        }
                        .into());
                    }
                }
            }
            source => source.clone(),
        };
        let cluster = match source {
            Source::Cluster(cluster) => cluster,
            Source::Kubeconfig(connection) => {
                if let Some(running) = &self.running
                    && self.renew(running, &connection).await
                {
                    return Ok(Outcome::Renewed);
                }
                let cluster = self.build(&connection).await?;
                self.probe(&cluster).await?;
                cluster
            }
            Source::Connect(_) => unreachable!("answered above"),
        };
        self.start(cluster).await
    }

    fn refused(&self, why: &'static str) -> Error {
        Error::Engage {
            cluster: self.local(),
            source: why.into(),
        }
    }

    /// Renews the running instance's credentials in place when that is all that changed. The
    /// rotated kubeconfig goes through the member's policy like a new one (a rotation to a
    /// `tokenFile` or a `proxy-url` the policy refuses is not applied in place; the build that
    /// follows reports the refusal).
    async fn renew(&self, running: &Cluster, connection: &Connection) -> bool {
        if !connection.is_renewable() {
            return false;
        }
        let opts = &self.handle.view.opts;
        let renew = credentials::renew_in_place(
            running,
            connection.kubeconfig(),
            connection.context(),
            &opts.client_options,
            connection.policy().unwrap_or(&opts.policy),
        );
        matches!(
            tokio::time::timeout(opts.build_timeout, renew).await,
            Ok(Ok(true))
        )
    }

    /// A new instance: renewable when its credentials are static, else the kubeconfig path;
    /// both check the member's policy before anything runs or is read.
    async fn build(&self, connection: &Connection) -> Result<Cluster, Error> {
        let opts = &self.handle.view.opts;
        let name = self.local();
        let (kc, context) = (connection.kubeconfig(), connection.context());
        let policy = connection.policy().unwrap_or(&opts.policy);
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
        let err = match tokio::time::timeout(opts.build_timeout, build).await {
            Ok(Ok(cluster)) => return Ok(cluster.with_connection_hash(connection.hash())),
            Ok(Err(source)) if source.is_policy_denial() => MemberError::PolicyDenied {
                cluster: name,
                source,
            },
            Ok(Err(source)) => MemberError::Kubeconfig {
                cluster: name,
                source,
            },
            Err(_) => MemberError::BuildTimeout {
                cluster: name,
                after: opts.build_timeout,
            },
        };
        Err(err.into())
    }

    /// One cheap request (`GET /version`), bounded, so an unreachable or misconfigured server
    /// fails here and is retried, rather than being engaged and failing every controller.
    async fn probe(&self, cluster: &Cluster) -> Result<(), Error> {
        let opts = &self.handle.view.opts;
        let Some(timeout) = opts.probe_timeout else {
            return Ok(());
        };
        let connect_timeout = opts
            .client_options
            .connect_timeout
            .unwrap_or(kubeconfig::DEFAULT_CONNECT_TIMEOUT);
        let answered = tokio::time::timeout(timeout, cluster.client().apiserver_version()).await;
        let source = match answered {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(err)) => ProbeError::from_kube(err, connect_timeout),
            Err(_) => ProbeError::Timeout(timeout),
        };
        Err(MemberError::Unreachable {
            cluster: self.local(),
            source,
        }
        .into())
    }

    /// Starts `cluster`: opens its informers (engaging it with every subscriber, or, for a
    /// replacement, opening what the running instance watches first), applies the field
    /// indexes and waits for every informer to list.
    async fn start(&self, cluster: Cluster) -> Result<Outcome, Error> {
        let table = &self.handle.table;
        let stopped = || Error::Stopped(self.name.clone());
        // One of the table's turns to sync, waited for before the sync timeout starts.
        let _turn = table.syncing.acquire().await.map_err(|_closed| stopped())?;
        if !self.handle.started(&self.name, self.id, &cluster) {
            return Err(stopped());
        }
        let indexes = table.state.lock().indexes.clone();
        let up = Up {
            attempt: self,
            cluster: &cluster,
            indexes: &indexes,
            sync_timeout: self.handle.view.opts.sync_timeout,
        };
        match &self.running {
            None => {
                up.engage()?;
                // After the engagement, so the indexes' informers carry the engaged name.
                up.index()?;
                up.synced().await?;
            }
            Some(old) => up.replace(old).await?,
        }
        Ok(Outcome::Started(cluster, self.token.clone()))
    }
}

/// One bring-up of a started attempt: its informers, indexes and sync.
struct Up<'a> {
    attempt: &'a Attempt,
    cluster: &'a Cluster,
    indexes: &'a [crate::FieldIndex],
    sync_timeout: Duration,
}

impl Up<'_> {
    /// A replacement lists everything the running instance watches before anyone is told
    /// about it; until then the running instance keeps serving, so the name never goes
    /// missing and no change goes unseen.
    async fn replace(&self, old: &Cluster) -> Result<(), Error> {
        let cache = self.cluster.cache();
        cache.start(self.attempt.token.clone());
        cache.open_informers_of(old.cache());
        self.index()?;
        self.synced().await?;
        let subscribers = self.engage()?;
        // Informers the engagement opened beyond the running instance's (usually none).
        if let Err(err) = self.synced().await {
            // The engagement replaced the running instance wherever it was engaged: hand the
            // name back to it (its token is the active one's, untouched).
            self.attempt.token.cancel();
            if let Some(old_token) = old_token(old) {
                for s in &subscribers {
                    let _ = s.engage(old_token.clone(), self.attempt.name.clone(), old.clone());
                }
            }
            return Err(err);
        }
        Ok(())
    }

    fn index(&self) -> Result<(), Error> {
        for index in self.indexes {
            // The cache's errors name the cluster already.
            self.cluster.cache().index_field(index)?;
        }
        Ok(())
    }

    /// Starts the cache and tells every subscriber (those of the table now); an error there
    /// becomes [`Error::Engage`]. Returns the subscribers told.
    fn engage(&self) -> Result<Vec<std::sync::Arc<dyn crate::Aware>>, Error> {
        let (name, token) = (&self.attempt.name, &self.attempt.token);
        self.cluster.cache().start(token.clone());
        // Known by the engaged name in the cache's logs and errors, and its informers'.
        self.cluster.cache().engaged_as(name);
        let Some(subscribers) = self.attempt.handle.engaging(name, self.attempt.id) else {
            return Err(Error::Stopped(name.clone()));
        };
        for subscriber in &subscribers {
            subscriber
                .engage(token.clone(), name.clone(), self.cluster.clone())
                .map_err(|err| Error::Engage {
                    cluster: name.clone(),
                    source: Box::new(err),
                })?;
        }
        Ok(subscribers)
    }

    /// Waits, bounded by the sync timeout, until every informer opened so far has listed.
    async fn synced(&self) -> Result<(), Error> {
        self.cluster.cache().wait_for_sync(self.sync_timeout).await
    }
}

/// The engagement token of the running instance `old`: the token its cache was started with.
fn old_token(old: &Cluster) -> Option<CancellationToken> {
    old.cache().token()
}
