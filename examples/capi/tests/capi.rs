//! example-capi: `--help`, and the scripted demo against its embedded management cluster in
//! both Cluster API versions.

use example_support::run_to_end;

const BIN: &str = env!("CARGO_BIN_EXE_example-capi");

#[tokio::test]
async fn help_names_the_flags() -> anyhow::Result<()> {
    let (ok, stdout, _) = run_to_end(BIN, &["--help"]).await?;
    assert!(ok);
    for flag in [
        "--kubeconfig",
        "--api-version",
        "--namespace",
        "--exclude-namespace",
        "--watch-filter",
    ] {
        assert!(stdout.contains(flag), "--help lacks {flag}:\n{stdout}");
    }
    Ok(())
}

#[tokio::test]
async fn demo_engages_ready_clusters_and_lets_deleted_ones_go() -> anyhow::Result<()> {
    for version in ["v1beta2", "v1beta1"] {
        let (ok, stdout, stderr) = run_to_end(BIN, &["--api-version", version]).await?;
        assert!(ok, "{version}: demo failed:\n{stdout}\n{stderr}");
        for line in [
            "prod-1: default/demo stamped mcr.example/reconciled-by=fleet/prod-1",
            "prod-2: default/demo stamped mcr.example/reconciled-by=fleet/prod-2",
            "Cluster fleet/prod-2 deleted; the provider let it go",
            "done",
        ] {
            assert!(
                stdout.contains(line),
                "{version}: output lacks {line:?}:\n{stdout}"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_scope_without_the_demo_namespace_is_refused() -> anyhow::Result<()> {
    let (ok, _, stderr) = run_to_end(
        BIN,
        &["--namespace", "fleet", "--exclude-namespace", "fleet"],
    )
    .await?;
    assert!(!ok);
    assert!(stderr.contains("excluded"), "{stderr}");
    Ok(())
}

/// The example as a controller against a management cluster and a member given as kubeconfig
/// files (emulated here, kind clusters under `cargo xtask e2e`).
#[tokio::test]
async fn runs_against_a_management_cluster_from_its_kubeconfig() -> anyhow::Result<()> {
    use std::collections::BTreeMap;

    use example_support::{Env, Running, client, unique, wait_for};
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
    use kube::ResourceExt;
    use kube::api::{Api, DeleteParams, PostParams};
    use serde_json::json;

    let env = Env::start(1).await?;
    let host = env.host_client().await?;
    let member = &env.members()[0];
    let ns = unique("capi");
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(ns.clone());
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{}-kubeconfig", member.name)),
            labels: Some(BTreeMap::from([(
                "cluster.x-k8s.io/cluster-name".into(),
                member.name.clone(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "value".into(),
            ByteString(std::fs::read(&member.kubeconfig)?),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(host.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await?;
    mcr_test_support::install_crd(&host, &mcr_test_support::capi_cluster_crd()).await;
    mcr_test_support::capi_clusters(&host, &ns, "v1beta2")
        .create(
            &PostParams::default(),
            &mcr_test_support::capi_cluster("v1beta2", &member.name, true),
        )
        .await?;

    let host_kubeconfig = env.host_kubeconfig().to_string_lossy().into_owned();
    let mut example = Running::start(BIN, &["--kubeconfig", &host_kubeconfig, "--namespace", &ns])?;
    let cm_name = unique("capi");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": cm_name, "labels": {"mcr.example/demo": "true"}}}),
    )?;
    let api = Api::<ConfigMap>::namespaced(client(&member.kubeconfig).await?, "default");
    api.create(&PostParams::default(), &cm).await?;
    let expected = format!("{ns}/{}", member.name);
    wait_for(&format!("{cm_name} stamped by {expected}"), || async {
        matches!(api.get(&cm_name).await,
            Ok(cm) if cm.annotations().get("mcr.example/reconciled-by") == Some(&expected))
    })
    .await?;
    example.assert_running()?;
    api.delete(&cm_name, &DeleteParams::default()).await?;
    Api::<Namespace>::all(host)
        .delete(&ns, &DeleteParams::default())
        .await?;
    Ok(())
}
