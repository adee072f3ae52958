//! example-sync-local-to-remote against a host and members (emulated, or real under
//! `cargo xtask e2e`): copies appear, drift is reverted, deletion propagates.

use std::collections::BTreeMap;

use example_support::{Env, Running, client, run_to_end, unique, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};

const BIN: &str = env!("CARGO_BIN_EXE_example-sync-local-to-remote");

fn color(cm: &Option<ConfigMap>) -> Option<&str> {
    cm.as_ref()?.data.as_ref()?.get("color").map(String::as_str)
}

#[tokio::test]
async fn copies_reverts_drift_and_deletes() -> anyhow::Result<()> {
    let env = Env::start(2).await?;
    let host_path = env.host_kubeconfig().to_string_lossy().into_owned();
    let dir = env.members_dir().to_string_lossy().into_owned();
    let mut example = Running::start(BIN, &["--kubeconfig", &host_path, "--kubeconfig-dir", &dir])?;

    let name = unique("sync");
    let host: Api<ConfigMap> = Api::namespaced(env.host_client().await?, "default");
    let source = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([("mcr.example/sync".into(), "true".into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("color".into(), "blue".into())])),
        ..ConfigMap::default()
    };
    host.create(&PostParams::default(), &source).await?;
    let mut members = Vec::new();
    for member in env.members() {
        members.push(Api::<ConfigMap>::namespaced(
            client(&member.kubeconfig).await?,
            "default",
        ));
    }
    for api in &members {
        wait_for("the copy", || async {
            let copy = api.get_opt(&name).await.ok().flatten();
            color(&copy) == Some("blue")
                && copy
                    .as_ref()
                    .and_then(|c| c.metadata.labels.as_ref())
                    .is_some_and(|l| {
                        l.get("mcr.example/synced-from-host")
                            .is_some_and(|v| v == "true")
                    })
        })
        .await?;
    }

    // A change at the source propagates.
    let edit = serde_json::json!({ "data": { "color": "green" } });
    host.patch(&name, &PatchParams::default(), &Patch::Merge(&edit))
        .await?;
    for api in &members {
        wait_for("the update", || async {
            color(&api.get_opt(&name).await.ok().flatten()) == Some("green")
        })
        .await?;
    }

    // Drift in a member is reverted.
    let drift = serde_json::json!({ "data": { "color": "red" } });
    members[0]
        .patch(&name, &PatchParams::default(), &Patch::Merge(&drift))
        .await?;
    wait_for("the drift reverted", || async {
        color(&members[0].get_opt(&name).await.ok().flatten()) == Some("green")
    })
    .await?;

    // A copy deleted in a member comes back.
    members[1].delete(&name, &DeleteParams::default()).await?;
    wait_for("the deleted copy restored", || async {
        color(&members[1].get_opt(&name).await.ok().flatten()) == Some("green")
    })
    .await?;

    // Deleting the source deletes every copy.
    host.delete(&name, &DeleteParams::default()).await?;
    for api in &members {
        wait_for("the copy deleted", || async {
            matches!(api.get_opt(&name).await, Ok(None))
        })
        .await?;
    }
    example.assert_running()?;
    Ok(())
}

#[tokio::test]
async fn embedded_demo_succeeds() -> anyhow::Result<()> {
    let (ok, stdout, stderr) = run_to_end(BIN, &[]).await?;
    assert!(ok, "demo failed:\n{stdout}\n{stderr}");
    for line in [
        "member-1: default/settings copied (color=blue)",
        "member-2: default/settings copied (color=blue)",
        "member-1: drift reverted (color=blue again)",
        "member-2: copy deleted",
        "done",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    Ok(())
}
