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
