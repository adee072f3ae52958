//! Smoke test with the real kubectl against an HTTPS cluster's kubeconfig file.
//! kubectl comes from PATH, else from the real backend's assets (`TEST_ASSET_KUBECTL`,
//! `KUBEBUILDER_ASSETS`, the `cargo xtask assets` cache); skipped (and passing) without one.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::api::{Api, PostParams};
use mcr_envtest::TestCluster;
use mcr_test_support::DEADLINE;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn find_kubectl() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("kubectl"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| mcr_envtest::real::Assets::find().ok()?.kubectl)
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

    /// Runs kubectl: whether it succeeded, stdout, stderr.
    async fn output(&self, args: &[&str]) -> (bool, String, String) {
        let output = tokio::time::timeout(DEADLINE, self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
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

/// An HTTPS cluster and a kubectl pointed at it; `None` (test skipped) without kubectl.
async fn setup(name: &str) -> Option<(TestCluster, tempfile::TempDir, Kubectl)> {
    let Some(bin) = find_kubectl() else {
        println!("kubectl not found: skipped");
        return None;
    };
    let cluster = TestCluster::start_https(name).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubectl.kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let kubectl = Kubectl {
        bin,
        kubeconfig,
        cache: dir.path().join("cache"),
    };
    Some((cluster, dir, kubectl))
}

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels:\n    app: demo\ndata:\n  value: \"1\"\n";

#[tokio::test]
async fn kubectl_smoke() {
    let Some((cluster, dir, kubectl)) = setup("kubectl").await else {
        return;
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
    // The listed object is printed once the initial list is done; the watch then resumes from
    // that list's resourceVersion, so anything created afterwards must show up.
    let listed = tokio::time::timeout(DEADLINE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("configmap/demo") {
                return true;
            }
        }
        false
    });
    assert!(
        listed.await.unwrap_or(false),
        "kubectl get -w did not list the existing object"
    );
    cms.create(
        &PostParams::default(),
        &mcr_test_support::configmap("watched", &[], "x"),
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
        mcr_test_support::api_code(&cms.get("demo").await.unwrap_err()),
        Some(404)
    );
}

/// kubectl's imperative generators send protobuf bodies; the objects must arrive intact.
#[tokio::test]
async fn kubectl_imperative_create() {
    let Some((cluster, _dir, kubectl)) = setup("kubectl-create").await else {
        return;
    };
    let client = cluster.client();

    let out = kubectl
        .run(&[
            "create",
            "configmap",
            "settings",
            "--from-literal=mode=fast",
            "--from-literal=empty=",
        ])
        .await;
    assert!(out.contains("configmap/settings created"), "{out}");
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get("settings")
        .await
        .unwrap();
    let data = cm.data.unwrap();
    assert_eq!(data["mode"], "fast");
    assert_eq!(data["empty"], "");
    assert_eq!(data.len(), 2);

    kubectl
        .run(&[
            "create",
            "secret",
            "generic",
            "creds",
            "--from-literal=token=s3cret",
        ])
        .await;
    let secret = Api::<Secret>::namespaced(client.clone(), "default")
        .get("creds")
        .await
        .unwrap();
    assert_eq!(secret.data.unwrap()["token"].0, b"s3cret");
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));

    kubectl.run(&["create", "namespace", "team-a"]).await;
    let ns = Api::<Namespace>::all(client.clone())
        .get("team-a")
        .await
        .unwrap();
    assert!(ns.metadata.uid.is_some());

    kubectl
        .run(&["create", "serviceaccount", "robot", "-n", "team-a"])
        .await;
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), "team-a")
        .get("robot")
        .await
        .unwrap();
    assert_eq!(sa.metadata.namespace.as_deref(), Some("team-a"));

    kubectl
        .run(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2",
            "--port=8080",
        ])
        .await;
    let deploy = Api::<Deployment>::namespaced(client.clone(), "default")
        .get("web")
        .await
        .unwrap();
    let spec = deploy.spec;
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.selector.match_labels.unwrap()["app"],
        "web",
        "selector"
    );
    let container = &spec.template.spec.unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("nginx:1.27"));
    assert_eq!(container.ports.as_ref().unwrap()[0].container_port, 8080);

    // A second create of the same name is refused by the server, as for JSON bodies.
    let output = kubectl
        .command(&["create", "namespace", "team-a"])
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already exists"), "{stderr}");
}

const WORKLOAD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: main
    image: nginx:1.27
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - port: 80
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: web-reader
rules:
- apiGroups: [\"\"]
  resources: [\"pods\"]
  verbs: [\"get\", \"list\"]
";

#[tokio::test]
async fn kubectl_pods_services_and_rbac() {
    let Some((cluster, dir, kubectl)) = setup("kubectl-kinds").await else {
        return;
    };
    let resources = kubectl.run(&["api-resources"]).await;
    for expected in ["pods", "services", "clusterroles", "statefulsets", "jobs"] {
        assert!(
            resources.contains(expected),
            "{expected} missing:\n{resources}"
        );
    }
    let file = write(dir.path(), "workload.yaml", WORKLOAD);
    let applied = kubectl.run(&["apply", "-f", &file]).await;
    assert!(applied.contains("pod/web created"), "{applied}");
    assert!(applied.contains("service/web created"), "{applied}");
    let listed = kubectl
        .run(&["get", "pods,services,clusterroles", "-o", "name"])
        .await;
    for name in [
        "pod/web",
        "service/web",
        "service/kubernetes",
        "clusterrole.rbac.authorization.k8s.io/cluster-admin",
    ] {
        assert!(listed.contains(name), "{name} missing:\n{listed}");
    }
    let ip = kubectl
        .run(&["get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"])
        .await;
    assert!(ip.trim().parse::<std::net::Ipv4Addr>().is_ok(), "{ip}");
    kubectl.run(&["label", "pod", "web", "tier=front"]).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(cluster.client(), "default");
    let pod = pods.get("web").await.unwrap();
    assert_eq!(pod.metadata.labels.unwrap()["tier"], "front");
    // `kubectl run`, with its own defaults (`--restart=Never`).
    let out = kubectl
        .run(&[
            "run",
            "tool",
            "--image=busybox:1.36",
            "--restart=Never",
            "--labels=app=tool",
        ])
        .await;
    assert!(out.contains("pod/tool created"), "{out}");
    let tool = pods.get("tool").await.unwrap();
    let spec = tool.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.containers[0].image.as_deref(), Some("busybox:1.36"));
    let deleted = kubectl.run(&["delete", "-f", &file, "--wait=false"]).await;
    assert!(deleted.contains("deleted"), "{deleted}");
}

const LIST: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed}
  data: {a: \"1\"}
- apiVersion: rbac.authorization.k8s.io/v1
  kind: Role
  metadata: {name: listed}
  rules: [{apiGroups: [\"\"], resources: [pods], verbs: [get]}]
";

const INVALID_LIST: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: bogus}
  bogus: 1
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: portless}
  spec:
    selector: {matchLabels: {a: b}}
    template:
      metadata: {labels: {a: b}}
      spec: {containers: [{name: c, image: nginx, ports: [{name: x}]}]}
";

const WIDGETS: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
";

/// kubectl validates the items of a `v1 List` itself, against `/openapi/v2` (protobuf), and
/// `kubectl explain` reads `/openapi/v3`, for built-in kinds and CRDs alike.
#[tokio::test]
async fn kubectl_validates_lists_and_explains_kinds_from_the_servers_schemas() {
    let Some((cluster, dir, kubectl)) = setup("kubectl-openapi").await else {
        return;
    };
    let list = write(dir.path(), "list.yaml", LIST);
    let applied = kubectl.run(&["apply", "-f", &list]).await;
    assert!(applied.contains("configmap/listed created"), "{applied}");
    assert!(
        applied.contains("role.rbac.authorization.k8s.io/listed created"),
        "{applied}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    assert!(cms.get("listed").await.is_ok());

    let invalid = write(dir.path(), "invalid.yaml", INVALID_LIST);
    let (ok, _, stderr) = kubectl.output(&["apply", "-f", &invalid]).await;
    assert!(!ok);
    for expected in [
        "ValidationError(ConfigMap): unknown field \"bogus\" in io.k8s.api.core.v1.ConfigMap",
        "ValidationError(Deployment.spec.template.spec.containers[0].ports[0]): missing required field \"containerPort\" in io.k8s.api.core.v1.ContainerPort",
    ] {
        assert!(stderr.contains(expected), "{expected} missing:\n{stderr}");
    }

    let explained = kubectl.run(&["explain", "deployment.spec.strategy"]).await;
    assert!(
        explained.contains("rollingUpdate\t<RollingUpdateDeployment>"),
        "{explained}"
    );
    let crd = write(dir.path(), "crd.yaml", WIDGETS);
    kubectl.run(&["apply", "-f", &crd]).await;
    // A new CRD is served once kube-apiserver has established it.
    mcr_envtest::wait::eventually_async("kubectl explain to know widgets", DEADLINE, || async {
        let (ok, out, _) = kubectl.output(&["explain", "widgets.spec"]).await;
        ok && out.contains("size\t<integer>")
    })
    .await;
}
