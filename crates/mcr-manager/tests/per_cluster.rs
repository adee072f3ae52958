//! kube-runtime's reconciler shapes unchanged: `Arc<Data>` built once per cluster
//! (`register_per_cluster`), and `run` yielding every reconcile's outcome as a stream.

mod common;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
    runtime::controller::Action,
};
use mcr_manager::{Context, Controller};

/// A kube-runtime style context: a client, as single-cluster controllers keep it.
struct Data {
    client: kube::Client,
    name: String,
}

async fn stamp(cm: Arc<ConfigMap>, ctx: Arc<Data>) -> Result<Action, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
    let patch = serde_json::json!({"metadata": {"annotations": {"stamped-by": ctx.name}}});
    api.patch(
        &cm.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(Action::await_change())
}

fn again(_: Arc<ConfigMap>, _: &kube::Error, _: Arc<Data>) -> Action {
    Action::requeue(std::time::Duration::from_millis(50))
}

async fn stamped_by(client: kube::Client) -> Option<String> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm = api.get("cm").await.ok()?;
    cm.annotations().get("stamped-by").cloned()
}

#[tokio::test]
async fn per_cluster_data_holds_each_clusters_own_client() {
    let env = Env::start(2).await;
    for c in ["cluster-1", "cluster-2"] {
        create_cm(env.member(c).client(), "cm", "1").await;
    }
    let built = Arc::new(AtomicUsize::new(0));
    let counter = built.clone();
    Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .register_per_cluster(stamp, again, move |ctx: &Context| {
            counter.fetch_add(1, Ordering::SeqCst);
            Data {
                client: ctx.client(),
                name: ctx.cluster_name().to_string(),
            }
        })
        .unwrap();
    let run = env.run();
    for c in ["cluster-1", "cluster-2"] {
        let client = env.member(c).client();
        mcr_envtest::wait::eventually_async(c, DEADLINE, || {
            let client = client.clone();
            async move { stamped_by(client).await.as_deref() == Some(c) }
        })
        .await;
    }
    eventually("both members engaged", DEADLINE, || {
        env.mgr.engaged_clusters().len() == 2
    })
    .await;
    // Each object was patched through its own cluster's client, and the data was built once
    // per engaged cluster (not per reconcile).
    assert_eq!(built.load(Ordering::SeqCst), 2);
    env.token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn run_yields_every_outcome_like_kube_runtime() {
    let env = Env::start(2).await;
    for c in ["cluster-1", "cluster-2"] {
        create_cm(env.member(c).client(), "cm", "1").await;
    }
    let outcomes = Controller::new(&env.mgr)
        .for_::<ConfigMap>()
        .run(stamp, again, |ctx| Data {
            client: ctx.client(),
            name: ctx.cluster_name().to_string(),
        });
    // Each stamp changes the object, so a cluster may be reconciled more than once: read
    // outcomes until both clusters showed up.
    let mut outcomes = std::pin::pin!(outcomes);
    let mut seen = std::collections::BTreeSet::new();
    let read = async {
        while seen.len() < 2 {
            let (request, action) = outcomes
                .next()
                .await
                .expect("the stream lasts while the manager runs")
                .expect("a successful reconcile");
            assert_eq!(action, Action::await_change());
            seen.insert(request.to_string());
        }
    };
    tokio::time::timeout(DEADLINE, read)
        .await
        .expect("both clusters' outcomes within the deadline");
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [
            "cluster://cluster-1/default/cm",
            "cluster://cluster-2/default/cm"
        ]
    );
}
