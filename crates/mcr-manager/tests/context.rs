//! `Context` reaches the whole fleet synchronously: the host, any engaged cluster by name
//! (`ClusterNotFound` once it left), and the engaged names, with no `Manager` in the data.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt, runtime::controller::Action};
use mcr_core::{ClusterName, cluster_not_found};
use mcr_manager::{Context, Controller};

/// Logs, for each reconcile of `probe` in a member: the engaged names, the host's `source`
/// value, and whether the member named by the probe's value is reachable.
async fn probe(cm: Arc<ConfigMap>, ctx: Context<Log>) -> Res {
    let names: Vec<String> = ctx
        .engaged_clusters()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let host: Api<ConfigMap> = Api::namespaced(ctx.host().client(), "default");
    let source = host
        .get_opt("source")
        .await
        .map_err(|source| mcr_core::Error::Kube {
            cluster: ClusterName::host(),
            source,
        })?;
    let peer = ClusterName::new(value(&cm));
    let reached = match ctx.cluster(&peer) {
        Ok(cluster) => {
            let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
            let found = api
                .get_opt("probe")
                .await
                .map_err(|source| mcr_core::Error::Kube {
                    cluster: peer.clone(),
                    source,
                })?;
            format!("reached {peer} (probe there: {})", found.is_some())
        }
        Err(gone) => {
            assert!(cluster_not_found(&gone).is_some());
            format!("{gone}")
        }
    };
    ctx.data().push(format!(
        "{}/{} engaged={} host={} {reached}",
        ctx.cluster_name(),
        cm.name_any(),
        names.join(","),
        source.as_ref().map(value).unwrap_or_default(),
    ));
    Ok(Action::await_change())
}

#[tokio::test]
async fn reconcile_reaches_host_and_peers_without_a_manager() {
    let env = Env::start(2).await;
    create_cm(env.host.client(), "source", "from-host").await;
    create_cm(env.member("cluster-2").client(), "probe", "cluster-1").await;
    let log = Log::default();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register(probe, retry, Arc::new(log.clone()))
        .unwrap();
    let run = env.run();

    eventually("cluster-2 reaches the host and cluster-1", DEADLINE, || {
        log.contains(
            "cluster-2/probe engaged=cluster-1,cluster-2 host=from-host \
             reached cluster-1 (probe there: false)",
        )
    })
    .await;
    // The host itself is reachable by its name too.
    let ctx = Context::engaged_as(env.mgr.fleet(), "cluster-1".into(), Arc::new(())).unwrap();
    assert!(
        ctx.cluster(&ClusterName::host())
            .unwrap()
            .same_instance(env.mgr.host())
    );
    assert!(ctx.host().same_instance(env.mgr.host()));

    // cluster-1 leaves: a lookup by name now says ClusterNotFound, and the names shrink.
    assert!(env.provider.remove(&"cluster-1".into()));
    eventually("cluster-1 left the fleet", DEADLINE, || {
        env.mgr.fleet().names() == vec![ClusterName::new("cluster-2")]
    })
    .await;
    let err = ctx.cluster(&"cluster-1".into()).unwrap_err();
    assert_eq!(err.to_string(), "cluster \"cluster-1\" not found");
    assert!(Context::engaged_as(env.mgr.fleet(), "cluster-1".into(), Arc::new(())).is_err());

    let api: Api<ConfigMap> = Api::namespaced(env.member("cluster-2").client(), "default");
    let mut changed = api.get("probe").await.unwrap();
    changed.data = Some(
        [
            ("v".to_owned(), "cluster-1".to_owned()),
            ("n".to_owned(), "2".to_owned()),
        ]
        .into(),
    );
    api.replace("probe", &Default::default(), &changed)
        .await
        .unwrap();
    eventually("cluster-2 sees cluster-1 gone", DEADLINE, || {
        log.contains(
            "cluster-2/probe engaged=cluster-2 host=from-host cluster \"cluster-1\" not found",
        )
    })
    .await;

    env.token.cancel();
    run.await.unwrap().unwrap();
}
