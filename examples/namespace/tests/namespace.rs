//! example-namespace against one cluster (emulated, or the kind host under `cargo xtask e2e`).

use std::collections::BTreeMap;

use example_support::{Env, Running, run_to_end, unique, wait_for};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

const BIN: &str = env!("CARGO_BIN_EXE_example-namespace");

fn meta(name: &str, label: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(BTreeMap::from([(label.to_owned(), "true".to_owned())])),
        ..ObjectMeta::default()
    }
}

#[tokio::test]
async fn each_selected_namespace_is_a_cluster() -> anyhow::Result<()> {
    let env = Env::start(1).await?;
    let client = env.host_client().await?;
    let label = unique("tenant.mcr.example/t");
    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    let selector = format!("{label}=true");
    let mut example = Running::start(BIN, &["--kubeconfig", &host, "--selector", &selector])?;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let tenants = [unique("team-a"), unique("team-b")];
    let outsider = unique("outsider");
    for ns in tenants.iter().chain([&outsider]) {
        let label = if ns == &outsider {
            "unrelated"
        } else {
            label.as_str()
        };
        let namespace = Namespace {
            metadata: meta(ns, label),
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await?;
        let cm = ConfigMap {
            metadata: meta("demo", "mcr.example/demo"),
            ..ConfigMap::default()
        };
        Api::<ConfigMap>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &cm)
            .await?;
    }
    for ns in &tenants {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        wait_for(&format!("{ns}/demo stamped"), || async {
            matches!(api.get("demo").await,
                Ok(cm) if cm.annotations().get("mcr.example/reconciled-by") == Some(ns))
        })
        .await?;
    }
    example.assert_running()?;
    // The namespace outside the selector is no cluster (created before the others were
    // stamped, so its event would have arrived by now).
    let outside = Api::<ConfigMap>::namespaced(client.clone(), &outsider)
        .get("demo")
        .await?;
    assert!(
        outside
            .annotations()
            .get("mcr.example/reconciled-by")
            .is_none()
    );
    for ns in tenants.iter().chain([&outsider]) {
        namespaces.delete(ns, &DeleteParams::default()).await?;
    }
    Ok(())
}

#[tokio::test]
async fn embedded_demo_succeeds() -> anyhow::Result<()> {
    let (ok, stdout, stderr) = run_to_end(BIN, &[]).await?;
    assert!(ok, "demo failed:\n{stdout}\n{stderr}");
    for line in [
        "cluster team-a: default/demo stamped mcr.example/reconciled-by=team-a",
        "cluster team-b: default/demo stamped mcr.example/reconciled-by=team-b",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    Ok(())
}
