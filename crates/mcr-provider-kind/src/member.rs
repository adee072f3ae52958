//! One kind cluster: from `kind get kubeconfig` to an engaged [`Cluster`](mcr_core::Cluster).

use std::time::Duration;

use mcr_core::{AddOutcome, ClusterName, Engagements, kubeconfig};
use tokio_util::sync::CancellationToken;

use crate::cli::KindCli;
use crate::{Error, Options};

/// Fetches the cluster's kubeconfig from kind and makes the engaged instance match it: nothing
/// to do when the connection hash is unchanged, otherwise build (through mcr-core's kubeconfig
/// policy), probe and [`Engagements::add_or_replace`] (a recreated kind cluster has a new CA and
/// client certificate, so a new hash, and replaces the old instance).
pub(crate) async fn sync(
    opts: &Options,
    cli: &KindCli,
    clusters: &Engagements,
    name: &ClusterName,
    token: &CancellationToken,
) -> Result<AddOutcome, Error> {
    let bytes = cli.kubeconfig(name.as_str(), token).await?;
    let invalid = |source| Error::Kubeconfig {
        cluster: name.clone(),
        source,
    };
    let kc = kubeconfig::parse(&bytes).map_err(invalid)?;
    drop(bytes);
    // kind sets current-context to `kind-<name>`.
    let hash = kubeconfig::connection_hash(&kc, None).map_err(invalid)?;
    if let Ok(current) = clusters.get(name)
        && current.connection_hash() == Some(hash.as_str())
    {
        return Ok(AddOutcome::Unchanged);
    }
    let cluster = kubeconfig::cluster_for_context(
        name.clone(),
        &kc,
        None,
        &opts.members.client_options,
        &opts.members.policy,
    )
    .await
    .map_err(invalid)?;
    let client = cluster.client();
    let probed = tokio::select! {
        () = token.cancelled() => Err("the provider is stopping".to_string()),
        probed = probe(&client, opts.members.sync_timeout) => probed,
    };
    probed.map_err(|reason| Error::Unreachable {
        cluster: name.clone(),
        reason,
    })?;
    clusters
        .add_or_replace(token, cluster)
        .await
        .map_err(|source| Error::Engage {
            cluster: name.clone(),
            source,
        })
}

/// One cheap request (`GET /version`), so a cluster whose API server is down fails here and is
/// retried instead of being engaged and failing every controller.
async fn probe(client: &kube::Client, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        // Redacted: a credential refresh's error carries the command line and its output.
        Ok(Err(err)) => Err(kubeconfig::redact_kube_error(&err)),
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}
