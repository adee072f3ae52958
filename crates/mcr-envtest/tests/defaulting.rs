//! What kube-apiserver does to a body before it stores it, on objects shaped like real-world
//! manifests: defaulting (every value here is what kube-apiserver 1.36 answers: the tests run
//! on both backends), values written back in canonical form, Go's zero-value rules, unknown
//! fields (`fieldValidation`), decoding errors, and strategic merge patches that follow the
//! schema's merge keys.

use mcr_envtest::TestCluster;
use raw::send;
use serde_json::{Value, json};

mod raw;

async fn create(client: &kube::Client, path: &str, body: Value) -> Value {
    let answer = send(client, "POST", path, "application/json", body).await;
    assert_eq!(answer.code, 201, "{path}: {}", answer.body);
    answer.body
}

fn template(spec: Value) -> Value {
    json!({"metadata": {"labels": {"a": "b"}}, "spec": spec})
}

/// The defaults of a container and a Pod spec that every template gets.
fn pod_spec_defaults(containers: Value) -> Value {
    json!({"containers": containers, "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
        "schedulerName": "default-scheduler", "securityContext": {},
        "terminationGracePeriodSeconds": 30})
}

#[tokio::test]
async fn workload_templates_get_the_defaults_of_pods_volumes_and_probes() {
    let cluster = TestCluster::start("defaults-workloads").await.unwrap();
    let client = cluster.client();
    let set = create(
        &client,
        "/apis/apps/v1/namespaces/default/statefulsets",
        json!({"metadata": {"name": "ss"}, "spec": {
            "serviceName": "s", "selector": {"matchLabels": {"a": "b"}},
            "template": template(json!({"serviceAccount": "legacy", "containers": [{
                "name": "c", "image": "registry.k8s.io/pause:3.10",
                "startupProbe": {"grpc": {"port": 9000}},
                "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 0},
                "env": [{"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
                "volumes": [
                    {"name": "v", "configMap": {"name": "cm"}},
                    {"name": "h", "hostPath": {"path": "/tmp"}},
                    {"name": "s", "secret": {"secretName": "s"}},
                    {"name": "p", "projected": {"sources": [{"configMap": {"name": "x"}},
                        {"serviceAccountToken": {"path": "t"}}]}},
                    {"name": "d", "downwardAPI": {"items": [{"path": "a", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                    {"name": "e"}]})),
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
    )
    .await;
    let mut pod = pod_spec_defaults(json!([{
        "env": [{"name": "NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
        "image": "registry.k8s.io/pause:3.10", "imagePullPolicy": "IfNotPresent", "name": "c",
        "readinessProbe": {"failureThreshold": 3, "periodSeconds": 10, "successThreshold": 1,
            "tcpSocket": {"port": 80}, "timeoutSeconds": 1},
        "resources": {},
        "startupProbe": {"failureThreshold": 3, "grpc": {"port": 9000, "service": ""},
            "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}]));
    pod["serviceAccount"] = json!("legacy");
    pod["serviceAccountName"] = json!("legacy");
    pod["volumes"] = json!([
        {"configMap": {"defaultMode": 420, "name": "cm"}, "name": "v"},
        {"hostPath": {"path": "/tmp", "type": ""}, "name": "h"},
        {"name": "s", "secret": {"defaultMode": 420, "secretName": "s"}},
        {"name": "p", "projected": {"defaultMode": 420, "sources": [{"configMap": {"name": "x"}},
            {"serviceAccountToken": {"expirationSeconds": 3600, "path": "t"}}]}},
        {"downwardAPI": {"defaultMode": 420, "items": [{"fieldRef": {"apiVersion": "v1",
            "fieldPath": "metadata.name"}, "path": "a"}]}, "name": "d"},
        {"emptyDir": {}, "name": "e"}]);
    assert_eq!(
        set["spec"],
        json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "podManagementPolicy": "OrderedReady", "replicas": 1, "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"a": "b"}}, "serviceName": "s",
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod},
            "updateStrategy": {"rollingUpdate": {"partition": 0}, "type": "RollingUpdate"},
            "volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
                "status": {"phase": "Pending"}}]})
    );

    // A host-network template's ports get no host port (only a Pod's do).
    let daemons = create(
        &client,
        "/apis/apps/v1/namespaces/default/daemonsets",
        json!({"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": template(json!({"hostNetwork": true,
                "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 8080}]}]}))}}),
    )
    .await;
    let mut pod = pod_spec_defaults(json!([{"image": "nginx", "imagePullPolicy": "Always",
        "name": "c", "ports": [{"containerPort": 8080, "protocol": "TCP"}], "resources": {},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}]));
    pod["hostNetwork"] = json!(true);
    assert_eq!(
        daemons["spec"],
        json!({"revisionHistoryLimit": 10, "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod},
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"}})
    );

    // A Pod's containers request what they limit, rounded up to milli-units; a volume
    // without a source is an emptyDir.
    let p = create(
        &client,
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx",
            "resources": {"limits": {"cpu": "0.0001", "memory": "100M"}}}], "volumes": [{"name": "e"}]}}),
    )
    .await;
    assert_eq!(
        p["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "1m", "memory": "100M"}, "requests": {"cpu": "1m", "memory": "100M"}})
    );
    assert_eq!(p["spec"]["volumes"], json!([{"emptyDir": {}, "name": "e"}]));
}

#[tokio::test]
async fn policies_webhooks_and_drivers_get_their_groups_defaults() {
    let cluster = TestCluster::start("defaults-policies").await.unwrap();
    let client = cluster.client();
    let np = create(
        &client,
        "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
        json!({"metadata": {"name": "np"}, "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}),
    )
    .await;
    assert_eq!(
        np["spec"],
        json!({"egress": [{"ports": [{"port": 53, "protocol": "TCP"}]}], "podSelector": {},
            "policyTypes": ["Ingress", "Egress"]})
    );
    let hpa = create(
        &client,
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        json!({"metadata": {"name": "hpa"}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
    )
    .await;
    assert_eq!(
        hpa["spec"],
        json!({"behavior": {
                "scaleDown": {"policies": [{"periodSeconds": 15, "type": "Percent", "value": 100}],
                    "selectPolicy": "Max", "stabilizationWindowSeconds": 60},
                "scaleUp": {"policies": [{"periodSeconds": 15, "type": "Pods", "value": 4},
                    {"periodSeconds": 15, "type": "Percent", "value": 100}],
                    "selectPolicy": "Max", "stabilizationWindowSeconds": 0}},
            "maxReplicas": 3,
            "metrics": [{"resource": {"name": "cpu", "target": {"averageUtilization": 80, "type": "Utilization"}},
                "type": "Resource"}],
            "minReplicas": 1,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}})
    );
    let webhook = json!({"name": "a.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "s", "namespace": "default"}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}]});
    let defaulted = json!({"admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "s", "namespace": "default", "port": 443}},
        "failurePolicy": "Fail", "matchPolicy": "Equivalent", "name": "a.example.com",
        "namespaceSelector": {}, "objectSelector": {},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["widgets"], "scope": "*"}],
        "sideEffects": "None", "timeoutSeconds": 10});
    let vwc = create(
        &client,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        json!({"metadata": {"name": "vwc"}, "webhooks": [webhook]}),
    )
    .await;
    assert_eq!(vwc["webhooks"], json!([defaulted]));
    let mwc = create(
        &client,
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        json!({"metadata": {"name": "mwc"}, "webhooks": [webhook]}),
    )
    .await;
    let mut mutating = defaulted.clone();
    mutating["reinvocationPolicy"] = json!("Never");
    assert_eq!(mwc["webhooks"], json!([mutating]));
    let vap = create(
        &client,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        json!({"metadata": {"name": "vap"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}}),
    )
    .await;
    assert_eq!(
        vap["spec"],
        json!({"failurePolicy": "Fail", "matchConstraints": {"matchPolicy": "Equivalent",
            "namespaceSelector": {}, "objectSelector": {}, "resourceRules": [{"apiGroups": ["apps"],
            "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"], "scope": "*"}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]})
    );
    let rb = create(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json!({"metadata": {"name": "rb"}, "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
    )
    .await;
    assert_eq!(
        (&rb["roleRef"], &rb["subjects"]),
        (
            &json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}),
            &json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "u"},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "default"}])
        )
    );
    let csi = create(
        &client,
        "/apis/storage.k8s.io/v1/csidrivers",
        json!({"metadata": {"name": "csi.example.com"}, "spec": {}}),
    )
    .await;
    assert_eq!(
        csi["spec"],
        json!({"attachRequired": true, "fsGroupPolicy": "ReadWriteOnceWithFSType",
            "podInfoOnMount": false, "requiresRepublish": false, "seLinuxMount": false,
            "storageCapacity": false, "volumeLifecycleModes": ["Persistent"]})
    );
    let api = create(
        &client,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        json!({"metadata": {"name": "v1alpha1.example.com"}, "spec": {"group": "example.com",
            "version": "v1alpha1", "service": {"name": "s", "namespace": "default"},
            "groupPriorityMinimum": 100, "versionPriority": 10, "insecureSkipTLSVerify": true}}),
    )
    .await;
    assert_eq!(
        api["spec"]["service"],
        json!({"name": "s", "namespace": "default", "port": 443})
    );
}

/// A Deployment as a careless manifest writes it: an unknown field, quantities as written,
/// zero values.
fn careless_deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "careless"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "minReadySeconds": 0,
            "template": template(json!({"containers": [{"name": "c", "image": "nginx", "foo": "bar",
                "env": [], "ports": [{"containerPort": 80, "name": "http"}],
                "resources": {"requests": {"cpu": "0.5", "memory": "1.5Gi"},
                    "limits": {"cpu": "1000m", "memory": "1e10"}},
                "volumeMounts": [{"name": "v", "mountPath": "/x", "readOnly": false}],
                "livenessProbe": {"httpGet": {"port": "http"}}}],
                "volumes": [{"name": "v", "configMap": {"name": "cm"}}]}))}})
}

#[tokio::test]
async fn bodies_are_decoded_and_written_back_as_kube_apiserver_does() {
    let cluster = TestCluster::start("decoding").await.unwrap();
    let client = cluster.client();
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let refused = send(
        &client,
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        "application/json",
        careless_deployment(),
    )
    .await;
    assert_eq!(refused.code, 400);
    assert_eq!(
        refused.body["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.template.spec.containers[0].foo\""
    );
    let bad = send(
        &client,
        "POST",
        &format!("{path}?fieldValidation=strict"),
        "application/json",
        careless_deployment(),
    )
    .await;
    assert_eq!(bad.code, 422);
    assert_eq!(
        bad.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );

    // Without `fieldValidation` the field is dropped with a warning.
    let created = send(
        &client,
        "POST",
        path,
        "application/json",
        careless_deployment(),
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert_eq!(
        created.warnings,
        ["299 - \"unknown field \\\"spec.template.spec.containers[0].foo\\\"\""]
    );
    let spec = &created.body["spec"];
    assert_eq!(spec.get("minReadySeconds"), None);
    assert_eq!(
        spec["strategy"],
        json!({"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"})
    );
    let c = &spec["template"]["spec"]["containers"][0];
    assert_eq!(c.get("foo"), None);
    assert_eq!(c.get("env"), None);
    assert_eq!(c["volumeMounts"], json!([{"mountPath": "/x", "name": "v"}]));
    assert_eq!(
        c["resources"],
        json!({"limits": {"cpu": "1", "memory": "10e9"}, "requests": {"cpu": "500m", "memory": "1536Mi"}})
    );
    assert_eq!(
        c["livenessProbe"],
        json!({"failureThreshold": 3, "httpGet": {"path": "/", "port": "http", "scheme": "HTTP"},
            "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1})
    );
    assert_eq!(created.body["status"], json!({}));

    // `Ignore` drops it silently.
    let mut other = careless_deployment();
    other["metadata"]["name"] = json!("ignored");
    let ignored = send(
        &client,
        "POST",
        &format!("{path}?fieldValidation=Ignore"),
        "application/json",
        other,
    )
    .await;
    assert_eq!((ignored.code, ignored.warnings.len()), (201, 0));
}

#[tokio::test]
async fn values_of_the_wrong_type_are_refused_naming_the_go_field() {
    let cluster = TestCluster::start("decoding-errors").await.unwrap();
    let client = cluster.client();
    let refused = |container: Value| {
        let client = client.clone();
        async move {
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [container]}});
            let answer = send(
                &client,
                "POST",
                "/api/v1/namespaces/default/pods",
                "application/json",
                pod,
            )
            .await;
            assert_eq!(answer.code, 400, "{}", answer.body);
            answer.body["message"].as_str().unwrap().to_string()
        }
    };
    let prefix = "Pod in version \"v1\" cannot be handled as a Pod: ";
    assert_eq!(
        refused(json!({"name": "c", "image": "i", "env": [{"name": "a", "value": 5}]})).await,
        format!(
            "{prefix}json: cannot unmarshal number into Go struct field EnvVar.spec.containers.env.value of type string"
        )
    );
    assert_eq!(
        refused(json!({"name": "c", "image": "i", "livenessProbe": {"httpGet": {"port": 1.5}}}))
            .await,
        format!(
            "{prefix}json: cannot unmarshal number 1.5 into Go struct field HTTPGetAction.spec.containers.livenessProbe.ProbeHandler.httpGet.port of type int32"
        )
    );
    assert_eq!(
        refused(json!({"name": "c", "image": "i", "resources": {"limits": {"cpu": "lots"}}})).await,
        format!(
            "{prefix}quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    );
}

#[tokio::test]
async fn strategic_merge_patches_merge_by_the_schemas_keys_in_kube_apiservers_order() {
    let cluster = TestCluster::start("strategic-order").await.unwrap();
    let client = cluster.client();
    let path = "/apis/apps/v1/namespaces/default/deployments";
    create(
        &client,
        path,
        json!({"metadata": {"name": "smp"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": template(json!({"containers": [
                {"name": "main", "image": "nginx:1", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "b"}, {"name": "c", "image": "c"}]}))}}),
    )
    .await;
    let names = |d: &Value| -> Vec<String> {
        d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    let smp = "application/strategic-merge-patch+json";
    let patched = send(
        &client,
        "PATCH",
        &format!("{path}/smp"),
        smp,
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "sidecar", "image": "envoy:1"},
            {"name": "main", "image": "nginx:2", "env": [{"name": "Y", "value": "2"}]}]}}}}),
    )
    .await;
    assert_eq!(patched.code, 200, "{}", patched.body);
    assert_eq!(names(&patched.body), ["sidecar", "main", "b", "c"]);
    assert_eq!(
        patched.body["spec"]["template"]["spec"]["containers"][1]["env"],
        json!([{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}])
    );
    let reordered = send(
        &client,
        "PATCH",
        &format!("{path}/smp"),
        smp,
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "main"}],
            "containers": [{"name": "c", "image": "x"}]}}}}),
    )
    .await;
    assert_eq!(names(&reordered.body), ["sidecar", "b", "c", "main"]);

    // Webhooks merge by name: a client-side apply's patch of one field keeps the others.
    create(
        &client,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        json!({"metadata": {"name": "vwc"}, "webhooks": [{"name": "a.example.com",
            "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://example.com/a"}}]}),
    )
    .await;
    let patched = send(
        &client,
        "PATCH",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/vwc",
        smp,
        json!({"webhooks": [{"name": "a.example.com", "timeoutSeconds": 30}]}),
    )
    .await;
    let hook = &patched.body["webhooks"][0];
    assert_eq!(
        (
            &hook["timeoutSeconds"],
            &hook["sideEffects"],
            &hook["clientConfig"]
        ),
        (
            &json!(30),
            &json!("None"),
            &json!({"url": "https://example.com/a"})
        )
    );
}
