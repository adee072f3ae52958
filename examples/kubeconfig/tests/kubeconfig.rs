//! example-kubeconfig against a host and members (emulated, or real under `cargo xtask e2e`):
//! the provider engages members from Secrets, and `create-secret` produces such a Secret.

use std::collections::BTreeMap;
use std::path::Path;

use example_support::{Env, Running, client, run_to_end, unique, wait_for};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::config::Kubeconfig;

const BIN: &str = env!("CARGO_BIN_EXE_example-kubeconfig");
const PROVIDER_LABEL: &str = "sigs.k8s.io/multicluster-runtime-kubeconfig";

fn labelled(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("mcr.example/demo".into(), "true".into())])),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Creates a labelled ConfigMap in the member and waits for the stamp naming `cluster`.
async fn assert_stamped(member_kubeconfig: &Path, cluster: &str) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client(member_kubeconfig).await?, "default");
    let name = unique("kc");
    api.create(&PostParams::default(), &labelled(&name)).await?;
    wait_for(&format!("{name} stamped by {cluster}"), || async {
        matches!(api.get(&name).await,
            Ok(cm) if cm.annotations().get("mcr.example/reconciled-by").map(String::as_str) == Some(cluster))
    })
    .await?;
    api.delete(&name, &DeleteParams::default()).await?;
    Ok(())
}

#[tokio::test]
async fn engages_members_from_secrets() -> anyhow::Result<()> {
    let env = Env::start(2).await?;
    let secrets: Api<Secret> = Api::namespaced(env.host_client().await?, "default");
    let mut names = Vec::new();
    for member in env.members() {
        // Secrets must not reference local files: inline the kubeconfig as the tools emit it.
        let bytes = std::fs::read(&member.kubeconfig)?;
        let name = unique(&member.name);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([(PROVIDER_LABEL.into(), "true".into())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("kubeconfig".into(), ByteString(bytes))])),
            ..Secret::default()
        };
        secrets.create(&PostParams::default(), &secret).await?;
        names.push(name);
    }
    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    let mut example = Running::start(BIN, &["--kubeconfig", &host])?;
    for (member, name) in env.members().iter().zip(&names) {
        assert_stamped(&member.kubeconfig, name).await?;
    }
    example.assert_running()?;
    for name in names {
        secrets.delete(&name, &DeleteParams::default()).await?;
    }
    Ok(())
}

#[tokio::test]
async fn create_secret_then_the_provider_engages_the_member() -> anyhow::Result<()> {
    let env = Env::start(1).await?;
    let member = &env.members()[0];
    let member_client = client(&member.kubeconfig).await?;
    // Both backends answer the TokenRequest and serve RBAC (the emulator accepts the tokens
    // it issues, and authorizes everything).

    let name = unique("created");
    let sa = unique("sa");
    let (member_path, host_path) = (
        member.kubeconfig.to_string_lossy().into_owned(),
        env.host_kubeconfig().to_string_lossy().into_owned(),
    );
    let (ok, stdout, stderr) = run_to_end(
        BIN,
        &[
            "create-secret",
            "--member-kubeconfig",
            &member_path,
            "--host-kubeconfig",
            &host_path,
            "--name",
            &name,
            "--service-account",
            &sa,
            "--token-timeout",
            "60",
        ],
    )
    .await?;
    assert!(ok, "create-secret failed:\n{stdout}\n{stderr}");
    let token_line = format!("token issued for default/{sa}");
    assert!(stdout.contains(&token_line), "{stdout}");
    assert!(
        stdout.contains(&format!("Secret default/{name} stored in the host")),
        "{stdout}"
    );

    // The member has the ServiceAccount; the host has the labelled Secret.
    Api::<ServiceAccount>::namespaced(member_client, "default")
        .get(&sa)
        .await?;
    let secrets: Api<Secret> = Api::namespaced(env.host_client().await?, "default");
    let secret = secrets.get(&name).await?;
    assert_eq!(
        secret.labels().get(PROVIDER_LABEL).map(String::as_str),
        Some("true")
    );
    let data = secret.data.clone().unwrap_or_default();
    let kc = Kubeconfig::from_yaml(std::str::from_utf8(&data["kubeconfig"].0)?)?;
    let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
    assert!(
        user.token.is_some(),
        "the kubeconfig authenticates with the SA token"
    );
    assert_eq!(kc.auth_infos[0].name, sa);
    assert!(
        !stdout.contains(&format!("{:?}", user.token)) && !stderr.contains("token:"),
        "credentials never printed"
    );

    // The provider engages it: the member is reached through the service account.
    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    let mut example = Running::start(BIN, &["--kubeconfig", &host])?;
    assert_stamped(&member.kubeconfig, &name).await?;
    example.assert_running()?;
    secrets.delete(&name, &DeleteParams::default()).await?;
    Ok(())
}

#[tokio::test]
async fn embedded_demo_succeeds() -> anyhow::Result<()> {
    let (ok, stdout, stderr) = run_to_end(BIN, &[]).await?;
    assert!(ok, "demo failed:\n{stdout}\n{stderr}");
    for line in [
        "member-1: default/demo stamped mcr.example/reconciled-by=member-1",
        "member-2: default/demo stamped mcr.example/reconciled-by=member-2",
        "the provider let member-2 go",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    Ok(())
}

/// Output that is not a terminal (a file, a pipe, `kubectl logs`, `podman logs`) gets plain
/// text: no terminal colour codes around the levels and fields.
#[tokio::test]
async fn logs_not_written_to_a_terminal_carry_no_colour_codes() -> anyhow::Result<()> {
    let env = Env::start(1).await?;
    let member = &env.members()[0];
    let secrets: Api<Secret> = Api::namespaced(env.host_client().await?, "default");
    let name = unique("plain-logs");
    let secret = example_support::rbac::kubeconfig_secret(
        &name,
        &std::fs::read_to_string(&member.kubeconfig)?,
    );
    secrets.create(&PostParams::default(), &secret).await?;
    let dir = tempfile::tempdir()?;
    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    // RUST_LOG=info, stdout and stderr to a file.
    let example = example_support::rbac::Controller::start(
        BIN,
        &["--kubeconfig", &host],
        &dir.path().join("example.log"),
    )?;
    assert_stamped(&member.kubeconfig, &name).await?;
    let log = example.stop().await?;
    anyhow::ensure!(
        log.contains("cluster engaged"),
        "the info lines are written; log:\n{log}"
    );
    anyhow::ensure!(
        !log.contains('\u{1b}'),
        "no terminal escape codes in a log file; log:\n{log:?}"
    );
    secrets.delete(&name, &DeleteParams::default()).await?;
    Ok(())
}
