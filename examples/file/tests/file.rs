//! example-file against a directory of kubeconfigs (emulated clusters, or real ones under
//! `cargo xtask e2e`), and its embedded demo.

use std::collections::BTreeMap;

use example_support::{Env, Running, client, run_to_end, unique, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

const BIN: &str = env!("CARGO_BIN_EXE_example-file");

#[tokio::test]
async fn stamps_labelled_configmaps_in_every_member() -> anyhow::Result<()> {
    let env = Env::start(2).await?;
    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    let dir = env.members_dir().to_string_lossy().into_owned();
    let mut example = Running::start(BIN, &["--kubeconfig", &host, "--kubeconfig-dir", &dir])?;

    let name = unique("file");
    for member in env.members() {
        let api: Api<ConfigMap> = Api::namespaced(client(&member.kubeconfig).await?, "default");
        for (object, labelled) in [(name.clone(), true), (format!("{name}-plain"), false)] {
            let labels =
                labelled.then(|| BTreeMap::from([("mcr.example/demo".into(), "true".into())]));
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(object),
                    labels,
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            api.create(&PostParams::default(), &cm).await?;
        }
        // The provider names a cluster `<file>+<context>`.
        let expected = format!("{}+{}", member.kubeconfig.display(), member.context);
        wait_for(&format!("{name} stamped in {}", member.name), || async {
            let cm = api.get(&name).await;
            matches!(cm, Ok(cm) if cm.annotations().get("mcr.example/reconciled-by") == Some(&expected))
        })
        .await?;
    }
    example.assert_running()?;
    // The unlabelled ConfigMaps were created before the labelled ones were stamped, and the
    // controller only watches labelled ones: they stay untouched.
    for member in env.members() {
        let api: Api<ConfigMap> = Api::namespaced(client(&member.kubeconfig).await?, "default");
        let plain = api.get(&format!("{name}-plain")).await?;
        assert!(
            plain
                .annotations()
                .get("mcr.example/reconciled-by")
                .is_none()
        );
        for object in [name.clone(), format!("{name}-plain")] {
            api.delete(&object, &DeleteParams::default()).await?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn embedded_demo_succeeds() -> anyhow::Result<()> {
    let (ok, stdout, stderr) = run_to_end(BIN, &[]).await?;
    assert!(ok, "demo failed:\n{stdout}\n{stderr}");
    for line in [
        "cluster-3 joined",
        "cluster-1: default/demo stamped",
        "cluster-3: default/demo stamped",
        "done: every cluster's labelled ConfigMap was reconciled",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    Ok(())
}
