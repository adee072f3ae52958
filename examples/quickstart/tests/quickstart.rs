//! Runs the quickstart binary end to end and checks that every step of the tour happened.

use std::process::Command;

#[test]
fn the_tour_runs_and_narrates_every_step() {
    let out = Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .args(["--clusters", "2"])
        .env_remove("RUST_LOG")
        .output()
        .expect("the quickstart binary starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "quickstart failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for line in [
        "[1/6] started 2 emulated clusters over HTTPS",
        "[2/6] the file provider engaged cluster-1, cluster-2",
        "cluster-1: default/hello reconciled (mcr.example/reconciled-by=cluster-1)",
        "cluster-2: default/hello reconciled (mcr.example/reconciled-by=cluster-2)",
        "the file provider engaged cluster-3",
        "cluster-3: default/hello reconciled (mcr.example/reconciled-by=cluster-3)",
        "the file provider let cluster-1 go",
        "created default/after-removal in cluster-1: NOT reconciled",
        "quickstart finished: every step happened.",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // The summary table: cluster-1 reconciled `hello` only, then left; cluster-3 reconciled
    // `hello` and the barrier.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip_while(|l| !l.contains("[6/6] summary"))
        .skip(2)
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    // A real API server's kube-system ConfigMaps are reconciled too (MCR_ENVTEST=real).
    if !mcr_envtest::backend().is_real() {
        assert_eq!(
            rows,
            vec![
                vec!["cluster-1", "1", "removed"],
                vec!["cluster-2", "1", "engaged"],
                vec!["cluster-3", "2", "engaged"],
            ],
            "summary table in:\n{stdout}"
        );
    }
    assert!(stderr.trim().is_empty(), "quiet by default, got:\n{stderr}");
}

#[test]
fn help_names_the_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .arg("--help")
        .output()
        .expect("the quickstart binary starts");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--clusters",
        "--keep-running",
        "--duration",
        "--step-timeout",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}
