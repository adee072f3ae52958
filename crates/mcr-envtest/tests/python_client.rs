//! The official Kubernetes Python client (`kubernetes` on PyPI) against a cluster's kubeconfig
//! file: Pods (defaults, patch, status, watch, eviction), Services (ClusterIP allocation,
//! headless), the `kubernetes` Service, a TokenRequest and RBAC objects
//! (`tests/python/scenario.py`).
//!
//! The interpreter is `MCR_PYTHON` when set (CI points it at a virtual environment with a
//! pinned `kubernetes`, and then a missing module fails the test), else `python3` when it can
//! import `kubernetes`; without either the test prints `python client not found: skipped`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcr_envtest::TestCluster;
use tokio::process::Command;

/// The scenario's bound: it waits at most a minute at any step.
const SCENARIO_DEADLINE: Duration = Duration::from_secs(300);

/// A Python interpreter that imports `kubernetes`, or `None` (skip).
async fn python() -> Option<PathBuf> {
    let (bin, required) = match std::env::var_os("MCR_PYTHON") {
        Some(bin) => (PathBuf::from(bin), true),
        None => (PathBuf::from("python3"), false),
    };
    let probe = Command::new(&bin)
        .args(["-c", "import kubernetes; print(kubernetes.__version__)"])
        .output()
        .await;
    match probe {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout);
            println!("python client {} ({})", version.trim(), bin.display());
            Some(bin)
        }
        other => {
            assert!(
                !required,
                "MCR_PYTHON={} cannot import kubernetes: {other:?}",
                bin.display()
            );
            println!("python client not found: skipped (set MCR_PYTHON or pip install kubernetes)");
            None
        }
    }
}

#[tokio::test]
async fn official_python_client_scenario() {
    let Some(python) = python().await else {
        return;
    };
    let cluster = TestCluster::start_https("python").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("python.kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/scenario.py");
    let mut command = Command::new(&python);
    command
        .arg(&script)
        .arg(&kubeconfig)
        .arg("py-scenario")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true);
    let output = tokio::time::timeout(SCENARIO_DEADLINE, command.output())
        .await
        .expect("the Python scenario did not finish within its deadline")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the Python client scenario failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("python client: done"), "{stdout}");
}
