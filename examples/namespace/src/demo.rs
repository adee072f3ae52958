//! The scripted demo: one emulated cluster, two tenant namespaces.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_envtest::TestCluster;
use tokio_util::sync::CancellationToken;

use crate::{ANNOTATION, LABEL};

fn labelled<K: kube::Resource + Default>(name: &str, key: &str) -> K {
    let mut obj = K::default();
    *obj.meta_mut() = ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(BTreeMap::from([(key.to_owned(), "true".to_owned())])),
        ..ObjectMeta::default()
    };
    obj
}

/// Two namespaces labelled `tenant=true` become clusters; each one's labelled ConfigMap is
/// stamped with the namespace's name.
pub async fn run() -> Result<()> {
    let cluster = TestCluster::start("shared").await?;
    let mgr = crate::manager(cluster.client(), Some("tenant=true".into()))?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });
    let result = async {
        let namespaces: Api<Namespace> = Api::all(cluster.client());
        for tenant in ["team-a", "team-b"] {
            namespaces.create(&PostParams::default(), &labelled(tenant, "tenant")).await?;
            let api: Api<ConfigMap> = Api::namespaced(cluster.client(), tenant);
            api.create(&PostParams::default(), &labelled("demo", LABEL)).await?;
            println!("namespace {tenant} created with ConfigMap demo");
        }
        for tenant in ["team-a", "team-b"] {
            let api: Api<ConfigMap> = Api::namespaced(cluster.client(), tenant);
            let start = tokio::time::Instant::now();
            while api.get("demo").await?.annotations().get(ANNOTATION).map(String::as_str)
                != Some(tenant)
            {
                if start.elapsed() > Duration::from_secs(30) {
                    bail!("{tenant}/demo was not reconciled within 30s");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            println!("cluster {tenant}: default/demo stamped {ANNOTATION}={tenant} (really {tenant}/demo)");
        }
        anyhow::Ok(())
    }
    .await;
    token.cancel();
    running.await??;
    result?;
    println!("done");
    Ok(())
}
