//! Smoke test with the real kubectl against an HTTPS cluster's kubeconfig file.
//! Skipped (and passing) when `kubectl` is not on PATH.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::DEADLINE;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually_async;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn find_kubectl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file())
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        cmd.kill_on_drop(true);
        cmd
    }

    /// Runs kubectl and returns stdout; panics with stderr on failure.
    async fn run(&self, args: &[&str]) -> String {
        let output = tokio::time::timeout(DEADLINE, self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {stderr}\n{stdout}"
        );
        stdout
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels:\n    app: demo\ndata:\n  value: \"1\"\n";

#[tokio::test]
async fn kubectl_smoke() {
    let Some(bin) = find_kubectl() else {
        println!("kubectl not found: skipped");
        return;
    };
    let cluster = TestCluster::start_https("kubectl").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubectl.kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let kubectl = Kubectl {
        bin,
        kubeconfig,
        cache: dir.path().join("cache"),
    };
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let value = |cm: ConfigMap| {
        cm.data
            .unwrap_or_default()
            .get("value")
            .cloned()
            .unwrap_or_default()
    };

    let resources = kubectl.run(&["api-resources"]).await;
    for expected in [
        "configmaps",
        "deployments",
        "leases",
        "customresourcedefinitions",
    ] {
        assert!(
            resources.contains(expected),
            "{expected} missing:\n{resources}"
        );
    }

    let file = write(dir.path(), "cm.yaml", CONFIGMAP);
    assert!(
        kubectl
            .run(&["create", "-f", &file])
            .await
            .contains("created")
    );
    assert_eq!(value(cms.get("demo").await.unwrap()), "1");
    let listed = kubectl.run(&["get", "configmaps", "-o", "name"]).await;
    assert!(listed.contains("configmap/demo"), "{listed}");

    let file = write(dir.path(), "cm2.yaml", &CONFIGMAP.replace("\"1\"", "\"2\""));
    kubectl.run(&["replace", "-f", &file]).await;
    assert_eq!(value(cms.get("demo").await.unwrap()), "2");

    kubectl
        .run(&[
            "patch",
            "configmap",
            "demo",
            "-p",
            r#"{"data":{"value":"3"}}"#,
        ])
        .await;
    assert_eq!(value(cms.get("demo").await.unwrap()), "3");
    kubectl
        .run(&["label", "configmap", "demo", "tier=web"])
        .await;
    kubectl
        .run(&["annotate", "configmap", "demo", "note=hello"])
        .await;
    let meta = cms.get("demo").await.unwrap().metadata;
    assert_eq!(meta.labels.unwrap()["tier"], "web");
    assert_eq!(meta.annotations.unwrap()["note"], "hello");
    let json = kubectl
        .run(&["get", "configmap", "demo", "-o", "json"])
        .await;
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed["data"]["value"], "3");

    // A watch sees an object created once it is connected.
    let mut watch = kubectl
        .command(&[
            "get",
            "configmaps",
            "-w",
            "-o",
            "name",
            "--request-timeout=60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    eventually_async("kubectl's watch request", DEADLINE, || async {
        cluster.request_count("watch", "configmaps") >= 1
    })
    .await;
    cms.create(
        &PostParams::default(),
        &common::configmap("watched", &[], "x"),
    )
    .await
    .unwrap();
    let seen = tokio::time::timeout(DEADLINE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("watched") {
                return true;
            }
        }
        false
    });
    assert!(
        seen.await.unwrap_or(false),
        "kubectl get -w did not print the new object"
    );
    watch.kill().await.unwrap();

    assert!(
        kubectl
            .run(&["delete", "configmap", "demo"])
            .await
            .contains("deleted")
    );
    assert_eq!(
        common::api_code(&cms.get("demo").await.unwrap_err()),
        Some(404)
    );
}
