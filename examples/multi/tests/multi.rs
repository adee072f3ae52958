//! example-multi against a host and two members (emulated, or real under `cargo xtask e2e`):
//! one member comes through the file provider, the other through the kubeconfig provider.

use std::collections::BTreeMap;

use example_support::{Env, Running, client, run_to_end, unique, wait_for};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

const BIN: &str = env!("CARGO_BIN_EXE_example-multi");

#[tokio::test]
async fn both_providers_feed_one_controller() -> anyhow::Result<()> {
    let env = Env::start(2).await?;
    let (by_file, by_secret) = (&env.members()[0], &env.members()[1]);
    let files = tempfile::tempdir()?;
    let copied = files.path().join(format!("{}.kubeconfig", by_file.name));
    std::fs::copy(&by_file.kubeconfig, &copied)?;
    let secret_name = unique("multi");
    let secrets: Api<Secret> = Api::namespaced(env.host_client().await?, "default");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.clone()),
            labels: Some(BTreeMap::from([(
                "sigs.k8s.io/multicluster-runtime-kubeconfig".into(),
                "true".into(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "kubeconfig".into(),
            ByteString(std::fs::read(&by_secret.kubeconfig)?),
        )])),
        ..Secret::default()
    };
    secrets.create(&PostParams::default(), &secret).await?;

    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    let dir = files.path().to_string_lossy().into_owned();
    let mut example = Running::start(BIN, &["--kubeconfig", &host, "--kubeconfig-dir", &dir])?;
    let expected = [
        (
            by_file,
            format!("files#{}+{}", copied.display(), by_file.context),
        ),
        (by_secret, format!("secrets#{secret_name}")),
    ];
    let name = unique("multi-cm");
    for (member, cluster) in &expected {
        let api: Api<ConfigMap> = Api::namespaced(client(&member.kubeconfig).await?, "default");
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        cm.labels_mut()
            .insert("mcr.example/demo".into(), "true".into());
        api.create(&PostParams::default(), &cm).await?;
        // The stamp holds the reconciler's `ctx.cluster_name()`: the engaged name,
        // `<prefix>#<child name>`.
        wait_for(&format!("{name} stamped by {cluster}"), || async {
            matches!(api.get(&name).await,
                Ok(cm) if cm.annotations().get("mcr.example/reconciled-by")
                    .is_some_and(|s| s == cluster))
        })
        .await?;
        api.delete(&name, &DeleteParams::default()).await?;
    }
    example.assert_running()?;
    secrets
        .delete(&secret_name, &DeleteParams::default())
        .await?;
    Ok(())
}

#[tokio::test]
async fn embedded_demo_succeeds() -> anyhow::Result<()> {
    let (ok, stdout, stderr) = run_to_end(BIN, &[]).await?;
    assert!(ok, "demo failed:\n{stdout}\n{stderr}");
    for (member, name) in [
        ("member-1", "member-1.kubeconfig+member-1"),
        ("member-2", "secrets#member-2"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{member}: default/demo stamped")))
            .unwrap_or_else(|| panic!("no stamp line for {member} in:\n{stdout}"));
        assert!(line.ends_with(name), "{line}");
        assert!(
            line.contains("=files#") || line.contains("=secrets#"),
            "{line}"
        );
    }
    Ok(())
}
