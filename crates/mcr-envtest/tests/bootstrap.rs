//! What a new cluster holds before anyone writes to it, and the defaults of a Service.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Endpoints, Namespace, Pod, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ListParams, PostParams};
use mcr_envtest::TestCluster;
use mcr_test_support::api_code;
use serde_json::json;

#[tokio::test]
async fn a_new_cluster_has_what_kube_apiserver_creates() {
    let cluster = TestCluster::start("bootstrap").await.unwrap();
    let client = cluster.client();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        namespaces.get(ns).await.unwrap();
    }

    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let kubernetes = services.get("kubernetes").await.unwrap();
    let spec = kubernetes.spec.unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let ip: Ipv4Addr = spec.cluster_ip.unwrap().parse().unwrap();
    assert_eq!(ip.octets()[3], 1, "the first address of the service range");
    let port = &spec.ports.unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("https"), 443));
    if !cluster.backend().is_real() {
        // The real control planes run with `--endpoint-reconciler-type=none`.
        let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
        let ep = endpoints.get("kubernetes").await.unwrap();
        assert_eq!(
            ep.subsets.unwrap()[0].ports.as_ref().unwrap()[0]
                .name
                .as_deref(),
            Some("https")
        );
    }

    let classes: Api<PriorityClass> = Api::all(client.clone());
    let node_critical = classes.get("system-node-critical").await.unwrap();
    assert_eq!(node_critical.value, Some(2_000_001_000));
    assert_eq!(
        classes.get("system-cluster-critical").await.unwrap().value,
        Some(2_000_000_000)
    );

    let roles: Api<ClusterRole> = Api::all(client.clone());
    let admin = roles.get("cluster-admin").await.unwrap();
    assert_eq!(admin.rules.unwrap()[0].verbs, ["*"]);
    for name in [
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
    ] {
        let role = roles.get(name).await.unwrap();
        assert_eq!(
            role.metadata.labels.unwrap()["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
    }
    let view = roles.get("view").await.unwrap();
    assert!(view.aggregation_rule.is_some());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding = bindings.get("cluster-admin").await.unwrap();
    assert_eq!(binding.subjects.unwrap()[0].name, "system:masters");

    let apiservices: Api<APIService> = Api::all(client);
    let apps = apiservices.get("v1.apps").await.unwrap();
    let condition = &apps.status.unwrap().conditions.unwrap()[0];
    assert_eq!(
        (condition.type_.as_str(), condition.status.as_str()),
        ("Available", "True")
    );
    let core = apiservices.get("v1.").await.unwrap();
    assert_eq!(core.spec.unwrap().version.as_deref(), Some("v1"));
}

#[tokio::test]
async fn services_get_defaults_and_a_cluster_ip() {
    let cluster = TestCluster::start("service-defaults").await.unwrap();
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let sent: Service = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "selector": { "app": "web" }, "ports": [{ "port": 80 }] },
    }))
    .unwrap();
    let created = services
        .create(&PostParams::default(), &sent)
        .await
        .unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.session_affinity.as_deref(), Some("None"));
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80))
    );
    let ip: Ipv4Addr = spec.cluster_ip.clone().unwrap().parse().unwrap();
    let kubernetes = services
        .get("kubernetes")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    assert_ne!(ip.to_string(), kubernetes);
    assert_eq!(spec.cluster_ips.unwrap(), [ip.to_string()]);
    let all = services.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), 2, "web and kubernetes");

    let node_port: Service = serde_json::from_value(json!({
        "metadata": { "name": "edge" },
        "spec": { "type": "NodePort", "selector": { "app": "web" }, "ports": [{ "port": 80 }, { "port": 443, "name": "https" }] },
    }))
    .unwrap();
    let mut ports = node_port.spec.clone().unwrap().ports.unwrap();
    ports[0].name = Some("http".into());
    let mut node_port = node_port;
    node_port.spec.as_mut().unwrap().ports = Some(ports);
    let created = services
        .create(&PostParams::default(), &node_port)
        .await
        .unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(spec.external_traffic_policy.as_deref(), Some("Cluster"));
    let node_ports: Vec<i32> = spec
        .ports
        .unwrap()
        .iter()
        .filter_map(|p| p.node_port)
        .collect();
    assert_eq!(node_ports.len(), 2, "{node_ports:?}");
    assert_ne!(node_ports[0], node_ports[1]);
    assert!(
        node_ports.iter().all(|p| (30000..=32767).contains(p)),
        "{node_ports:?}"
    );
}

#[tokio::test]
async fn pods_get_defaults_and_need_containers() {
    let cluster = TestCluster::start("pod-defaults").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let sent: Pod = serde_json::from_value(json!({
        "metadata": { "name": "p" },
        "spec": { "containers": [{ "name": "main", "image": "busybox:1.36" }] },
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &sent).await.unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    let main = &spec.containers[0];
    assert_eq!(main.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        main.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(main.termination_message_policy.as_deref(), Some("File"));
    let status = created.status.unwrap();
    assert_eq!(
        (status.phase.as_deref(), status.qos_class.as_deref()),
        (Some("Pending"), Some("BestEffort"))
    );

    let empty: Pod = serde_json::from_value(json!({
        "metadata": { "name": "empty" },
        "spec": { "containers": [] },
    }))
    .unwrap();
    let err = pods
        .create(&PostParams::default(), &empty)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
}

#[tokio::test]
async fn invalid_labels_and_configmap_keys_are_422() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let cluster = TestCluster::start("validation").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let bad_key: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "bad-key" },
        "data": { "a/b": "x" },
    }))
    .unwrap();
    let err = cms
        .create(&PostParams::default(), &bad_key)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
    let bad_label: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "bad-label", "labels": { "app": "bad value!" } },
    }))
    .unwrap();
    let err = cms
        .create(&PostParams::default(), &bad_label)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
    let bad_name: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "Bad_Name" } })).unwrap();
    let err = cms
        .create(&PostParams::default(), &bad_name)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(422), "{err}");
    let good: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "good", "labels": { "example.com/app": "web_1.0" } },
        "data": { "config.yaml": "x" },
    }))
    .unwrap();
    cms.create(&PostParams::default(), &good).await.unwrap();
}
