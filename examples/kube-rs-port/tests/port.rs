//! Both versions of the ported controller have the same effect (emulated clusters, or real
//! ones under `cargo xtask e2e`).

use example_support::{Env, Running, client, run_to_end, unique, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

const BIN: &str = env!("CARGO_BIN_EXE_example-kube-rs-port");

/// Creates labelled and unlabelled ConfigMaps and checks the running controller stamped
/// exactly the labelled one in each cluster.
async fn assert_effect(kubeconfigs: &[&std::path::Path]) -> anyhow::Result<()> {
    let name = unique("port");
    for path in kubeconfigs {
        let api: Api<ConfigMap> = Api::namespaced(client(path).await?, "default");
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        cm.labels_mut()
            .insert("mcr.example/port".into(), "true".into());
        api.create(&PostParams::default(), &cm).await?;
        wait_for(&format!("{name} stamped via {}", path.display()), || async {
            matches!(api.get(&name).await,
                Ok(cm) if cm.annotations().get("mcr.example/reconciled").map(String::as_str) == Some("true"))
        })
        .await?;
        api.delete(&name, &DeleteParams::default()).await?;
    }
    Ok(())
}

#[tokio::test]
async fn single_and_multi_have_the_same_effect() -> anyhow::Result<()> {
    let env = Env::start(2).await?;
    let member = env.members()[0].kubeconfig.to_string_lossy().into_owned();
    let mut single = Running::start(BIN, &["single", "--kubeconfig", &member])?;
    assert_effect(&[&env.members()[0].kubeconfig]).await?;
    single.assert_running()?;
    drop(single);

    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    let dir = env.members_dir().to_string_lossy().into_owned();
    let mut multi = Running::start(
        BIN,
        &["multi", "--kubeconfig", &host, "--kubeconfig-dir", &dir],
    )?;
    let all: Vec<&std::path::Path> = env
        .members()
        .iter()
        .map(|m| m.kubeconfig.as_path())
        .collect();
    assert_effect(&all).await?;
    multi.assert_running()?;
    Ok(())
}

#[tokio::test]
async fn embedded_demos_succeed() -> anyhow::Result<()> {
    for (mode, lines) in [
        (
            "single",
            vec!["single: default/demo stamped", "done (Single)"],
        ),
        (
            "multi",
            vec![
                "cluster-1: default/demo stamped",
                "cluster-2: default/demo stamped",
                "done (Multi)",
            ],
        ),
    ] {
        let (ok, stdout, stderr) = run_to_end(BIN, &[mode]).await?;
        assert!(ok, "{mode} demo failed:\n{stdout}\n{stderr}");
        for line in lines {
            assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
        }
    }
    Ok(())
}
