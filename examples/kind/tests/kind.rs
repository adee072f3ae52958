//! example-kind over member clusters: emulated ones behind the stand-in `kind` by default, real
//! kind clusters under `cargo xtask e2e --kind` (which sets `MCR_E2E_KIND_BIN`).

#[path = "../src/fake_kind.rs"]
mod fake_kind;

use std::collections::BTreeMap;
use std::path::PathBuf;

use example_support::{Env, Running, client, run_to_end, unique, wait_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

const BIN: &str = env!("CARGO_BIN_EXE_example-kind");

/// The `kind` to use and the prefix kind names carry in front of the member names.
struct Kind {
    bin: PathBuf,
    name_prefix: String,
    _dir: Option<tempfile::TempDir>,
}

fn kind_for(env: &Env) -> anyhow::Result<Kind> {
    if let Some(bin) = std::env::var_os("MCR_E2E_KIND_BIN") {
        // `cargo xtask e2e --kind` named the member clusters `<prefix><member>`.
        let name_prefix = std::env::var("MCR_E2E_KIND_PREFIX").unwrap_or_default();
        return Ok(Kind {
            bin: bin.into(),
            name_prefix,
            _dir: None,
        });
    }
    let dir = tempfile::tempdir()?;
    let bin = fake_kind::write(&dir.path().join("kind"), env.members_dir())?;
    Ok(Kind {
        bin,
        name_prefix: String::new(),
        _dir: Some(dir),
    })
}

#[tokio::test]
async fn stamps_labelled_configmaps_in_every_kind_cluster() -> anyhow::Result<()> {
    let env = Env::start(2).await?;
    let kind = kind_for(&env)?;
    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    let bin = kind.bin.to_string_lossy().into_owned();
    let prefix = format!("{}member-", kind.name_prefix);
    let mut example = Running::start(
        BIN,
        &[
            "--kubeconfig",
            &host,
            "--kind-bin",
            &bin,
            "--prefix",
            &prefix,
        ],
    )?;

    let name = unique("kind");
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
        // The provider names a cluster by its kind name.
        let expected = format!("{}{}", kind.name_prefix, member.name);
        wait_for(&format!("{name} stamped in {}", member.name), || async {
            let cm = api.get(&name).await;
            matches!(cm, Ok(cm) if cm.annotations().get("mcr.example/reconciled-by") == Some(&expected))
        })
        .await?;
    }
    example.assert_running()?;
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
async fn a_missing_kind_binary_is_one_clear_error() -> anyhow::Result<()> {
    let env = Env::start(1).await?;
    let host = env.host_kubeconfig().to_string_lossy().into_owned();
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("kind");
    let missing = missing.to_string_lossy();
    let (ok, stdout, stderr) =
        run_to_end(BIN, &["--kubeconfig", &host, "--kind-bin", &missing]).await?;
    assert!(!ok, "must fail:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "the kind binary \"{missing}\" does not exist: install kind"
        )),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn embedded_demo_succeeds() -> anyhow::Result<()> {
    let (ok, stdout, stderr) = run_to_end(BIN, &["--demo"]).await?;
    assert!(ok, "demo failed:\n{stdout}\n{stderr}");
    for line in [
        "fleet-1 and fleet-2 joined; dev does not match the prefix fleet-",
        "fleet-3 joined",
        "fleet-1: default/demo stamped mcr.example/reconciled-by=fleet-1",
        "fleet-3: default/demo stamped mcr.example/reconciled-by=fleet-3",
        "fleet-1 left",
        "done: every fleet cluster's labelled ConfigMap was reconciled",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    Ok(())
}

#[tokio::test]
async fn help_describes_the_options() -> anyhow::Result<()> {
    let (ok, stdout, _) = run_to_end(BIN, &["--help"]).await?;
    assert!(ok);
    for flag in ["--kind-bin", "--prefix", "--kubeconfig", "--demo"] {
        assert!(stdout.contains(flag), "missing {flag} in:\n{stdout}");
    }
    Ok(())
}
