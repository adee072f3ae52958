//! The example binary: the embedded demo runs end to end, and a malformed provider file is a
//! clear startup error.

use example_support::run_to_end;

const EXAMPLE: &str = env!("CARGO_BIN_EXE_example-cluster-inventory");

#[tokio::test]
async fn embedded_demo_engages_stamps_and_disengages() {
    let (ok, stdout, stderr) = run_to_end(EXAMPLE, &[]).await.unwrap();
    assert!(ok, "demo failed: {stderr}");
    assert!(
        stdout.contains("member-1: ConfigMap demo stamped by cluster default/member-1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("member-2: profile deleted, cluster disengaged"),
        "{stdout}"
    );
}

#[tokio::test]
async fn malformed_provider_file_is_a_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("providers.json");
    for (content, problem) in [
        ("{\"providers\": [", "malformed JSON"),
        (
            "{\"providers\": [{\"name\": \"a\"}]}",
            "missing field `execConfig`",
        ),
        ("{\"providers\": []}", "no providers are configured"),
    ] {
        std::fs::write(&path, content).unwrap();
        let path_s = path.display().to_string();
        // The file is checked before the hub's kubeconfig is even read.
        let args = [
            "--kubeconfig",
            "/nonexistent/hub.kubeconfig",
            "--provider-file",
            &path_s,
        ];
        let (ok, _, stderr) = run_to_end(EXAMPLE, &args).await.unwrap();
        assert!(!ok, "must not start with {content}");
        assert!(
            stderr.contains(&format!("access-provider file {path_s}")),
            "names the file: {stderr}"
        );
        assert!(stderr.contains(problem), "names the problem: {stderr}");
    }
}
