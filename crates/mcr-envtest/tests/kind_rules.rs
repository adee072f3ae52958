//! Rules of single built-in kinds that the differential check (`cargo xtask fidelity`) found
//! kube-apiserver to have, through kube-rs: how each kind keeps `metadata.generation`, a
//! PersistentVolume's phase transition time, fields served as `null`, Endpoints addresses,
//! LimitRange bounds, the labels a Job's name becomes and a Job's immutable selector, a
//! DaemonSet's template generation, a ControllerRevision's data owned whole, the kinds whose
//! `PUT` needs a resourceVersion or creates, the deletes that answer with the object, and a
//! PersistentVolumeClaim stored again on its first write that changes nothing, what a Pod update
//! may change, a Pod's binding, a Service's delete taking its Endpoints along, and the
//! `LimitRanger` and `ResourceQuota` admission of Pods (defaults, bounds, quota usage), names
//! checked per kind (with the warnings of the kinds whose name becomes a hostname) and the
//! total size of annotations, and the fields of a StorageClass that may not change. The same
//! expectations hold on the emulator and, with `MCR_ENVTEST=real`, on kube-apiserver.

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Binding, Endpoints, LimitRange, Namespace, PersistentVolume, PersistentVolumeClaim, Pod,
    ResourceQuota, Service,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use mcr_envtest::TestCluster;
use serde_json::{Value, json};

mod raw;

/// The 422 a write was refused with: its message and its causes as `field: message`.
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (String, Vec<String>) {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{}", status.message);
            let causes = status
                .details
                .iter()
                .flat_map(|d| d.causes.iter())
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect();
            (status.message.clone(), causes)
        }
        other => panic!("expected a 422, got {other:?}"),
    }
}

fn generation<K: kube::Resource>(obj: &K) -> Option<i64> {
    obj.meta().generation
}

#[tokio::test]
async fn each_kind_keeps_generation_as_its_strategy_does() {
    let cluster = TestCluster::start("kind-generation").await.unwrap();
    let client = cluster.client();
    let merge = |v: Value| Patch::Merge(v);
    let pp = PatchParams::default();

    // PriorityClass: 1 on create, never moved by an update.
    let pcs: Api<PriorityClass> = Api::all(client.clone());
    let pc: PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": "kind-gen-pc"}, "value": 100})).unwrap();
    let created = pcs.create(&PostParams::default(), &pc).await.unwrap();
    assert_eq!(generation(&created), Some(1));
    let patched = pcs
        .patch("kind-gen-pc", &pp, &merge(json!({"description": "d"})))
        .await
        .unwrap();
    assert_eq!(
        generation(&patched),
        Some(1),
        "a PriorityClass's generation stays 1"
    );
    pcs.delete("kind-gen-pc", &DeleteParams::default())
        .await
        .unwrap();

    // EndpointSlice: moved by a change outside metadata, and by a change of its labels.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "kind-gen-eps"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.0.1"]}],
    }))
    .unwrap();
    let created = slices.create(&PostParams::default(), &slice).await.unwrap();
    assert_eq!(generation(&created), Some(1));
    let labelled = slices
        .patch(
            "kind-gen-eps",
            &pp,
            &merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        generation(&labelled),
        Some(2),
        "a label change moves an EndpointSlice's generation"
    );
    let annotated = slices
        .patch(
            "kind-gen-eps",
            &pp,
            &merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(generation(&annotated), Some(2), "an annotation does not");
}

/// `field` of the object as served, `None` when left out.
async fn served_field<K>(client: kube::Client, ns: &str, name: &str, ptr: &str) -> Option<Value>
where
    K: kube::Resource<DynamicType = ()>,
{
    let ar = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &ar);
    let obj = api.get(name).await.unwrap();
    let (parent, field) = ptr.rsplit_once('/').unwrap();
    obj.data.pointer(parent).and_then(|p| p.get(field)).cloned()
}

#[tokio::test]
async fn unset_go_fields_are_served_as_kube_apiserver_serves_them() {
    let cluster = TestCluster::start("kind-nulls").await.unwrap();
    let client = cluster.client();
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "kind-null-eps"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.0.1"]}],
    }))
    .unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();
    assert_eq!(
        served_field::<EndpointSlice>(client.clone(), "default", "kind-null-eps", "/ports").await,
        Some(Value::Null),
        "an EndpointSlice's ports are served as null"
    );

    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), "default");
    let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
        "metadata": {"name": "kind-null-hpa"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                 "maxReplicas": 3},
    }))
    .unwrap();
    hpas.create(&PostParams::default(), &hpa).await.unwrap();
    hpas.patch_status(
        "kind-null-hpa",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"currentMetrics": null, "desiredReplicas": 2}})),
    )
    .await
    .unwrap();
    assert_eq!(
        served_field::<HorizontalPodAutoscaler>(
            client.clone(),
            "default",
            "kind-null-hpa",
            "/status/currentMetrics"
        )
        .await,
        Some(Value::Null),
        "an HPA's status.currentMetrics stays, as null"
    );

    // A Lease's spec is a Go struct: `{}` once its last field is gone.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let apply = |spec: Value| {
        Patch::Apply(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "kind-null-lease"}, "spec": spec,
        }))
    };
    let pp = PatchParams::apply("m1");
    leases
        .patch(
            "kind-null-lease",
            &pp,
            &apply(json!({"holderIdentity": "a"})),
        )
        .await
        .unwrap();
    leases
        .patch("kind-null-lease", &pp, &apply(json!({})))
        .await
        .unwrap();
    assert_eq!(
        served_field::<Lease>(client, "default", "kind-null-lease", "/spec").await,
        Some(json!({})),
        "an empty Lease spec is served as {{}}"
    );
}

#[tokio::test]
async fn persistent_volume_phase_moves_its_transition_time() {
    let cluster = TestCluster::start("kind-pv").await.unwrap();
    let pvs: Api<PersistentVolume> = Api::all(cluster.client());
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "kind-pv"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/tmp/kind-pv"}},
    }))
    .unwrap();
    let created = pvs.create(&PostParams::default(), &pv).await.unwrap();
    let status = created.status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let first = status.last_phase_transition_time;
    assert!(
        first.is_some(),
        "a new PersistentVolume has status.lastPhaseTransitionTime"
    );

    let moved = pvs
        .patch_status(
            "kind-pv",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Available"}})),
        )
        .await
        .unwrap();
    let status = moved.status.unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Available"));
    assert!(status.last_phase_transition_time.is_some());
    // The `pv-protection` finalizer holds it; adding one now is refused, with one cause.
    let deleted = pvs
        .delete("kind-pv", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        deleted.is_left(),
        "a PersistentVolume's delete answers with the object"
    );
    let (_, causes) = refusal(
        pvs.patch(
            "kind-pv",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["kubernetes.io/pv-protection", "example.com/x"]}})),
        )
        .await,
    );
    assert_eq!(causes.len(), 1, "{causes:?}");
    pvs.patch(
        "kind-pv",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn endpoints_addresses_must_be_ip_addresses() {
    let cluster = TestCluster::start("kind-endpoints").await.unwrap();
    let eps: Api<Endpoints> = Api::namespaced(cluster.client(), "default");
    let bad: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "kind-ep"},
        "subsets": [{"addresses": [{"ip": "not-an-ip"}], "ports": [{"port": 80}]}],
    }))
    .unwrap();
    let (message, _) = refusal(eps.create(&PostParams::default(), &bad).await);
    assert!(
        message.contains(
            "subsets[0].addresses[0].ip: Invalid value: \"not-an-ip\": must be a valid IP address"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn limit_range_defaults_stay_under_max() {
    let cluster = TestCluster::start("kind-limits").await.unwrap();
    let limits: Api<LimitRange> = Api::namespaced(cluster.client(), "default");
    let lr: LimitRange = serde_json::from_value(json!({
        "metadata": {"name": "kind-lr"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]},
    }))
    .unwrap();
    // `default` and `defaultRequest` are defaulted from `max` (2).
    limits.create(&PostParams::default(), &lr).await.unwrap();
    let (message, causes) = refusal(
        limits
            .patch(
                "kind-lr",
                &PatchParams::default(),
                &Patch::Json::<()>(
                    serde_json::from_value(
                        json!([{"op": "replace", "path": "/spec/limits/0/max/cpu", "value": "1"}]),
                    )
                    .unwrap(),
                ),
            )
            .await,
    );
    assert!(
        message.contains("spec.limits[0].default[cpu]: Invalid value: \"1\": default value 2 is greater than max value 1"),
        "{message}"
    );
    assert_eq!(causes.len(), 2, "{causes:?}");
}

#[tokio::test]
async fn job_selector_and_generated_labels_are_checked() {
    let cluster = TestCluster::start("kind-job").await.unwrap();
    let jobs: Api<Job> = Api::namespaced(cluster.client(), "default");
    let job = |name: &str| -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "nginx:1.27"}],
                "restartPolicy": "Never",
            }}},
        }))
        .unwrap()
    };
    // The name becomes the value of the generated `job-name` labels.
    let (_, causes) = refusal(jobs.create(&PostParams::default(), &job("-x")).await);
    assert!(
        causes
            .iter()
            .any(|c| c.starts_with("spec.template.labels: Invalid value: \"-x\"")),
        "{causes:?}"
    );

    // A PUT that leaves out the generated selector is refused.
    let created = jobs
        .create(&PostParams::default(), &job("kind-job"))
        .await
        .unwrap();
    let mut replaced = job("kind-job");
    replaced.metadata.resource_version = created.metadata.resource_version.clone();
    let (message, _) = refusal(
        jobs.replace("kind-job", &PostParams::default(), &replaced)
            .await,
    );
    assert!(
        message.starts_with("Job.batch \"kind-job\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`, spec.selector: Invalid value: null: field is immutable"),
        "{message}"
    );
}

/// The fields `manager` owns in `obj`, as its `fieldsV1`.
fn owned_by<K: kube::Resource>(obj: &K, manager: &str) -> Value {
    obj.meta()
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some(manager))
        .and_then(|e| e.fields_v1.as_ref())
        .map(|f| f.0.clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn daemon_set_template_generation_is_the_servers() {
    const KEY: &str = "deprecated.daemonset.template.generation";
    let cluster = TestCluster::start("kind-ds").await.unwrap();
    let dss: Api<DaemonSet> = Api::namespaced(cluster.client(), "default");
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "kind-ds"},
        "spec": {"selector": {"matchLabels": {"app": "ds"}},
                 "template": {"metadata": {"labels": {"app": "ds"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
    }))
    .unwrap();
    let pp = PostParams {
        field_manager: Some("maker".into()),
        ..PostParams::default()
    };
    let created = dss.create(&pp, &ds).await.unwrap();
    let annotation = |d: &DaemonSet| {
        d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(KEY).cloned())
    };
    assert_eq!(annotation(&created).as_deref(), Some("1"));
    assert!(
        owned_by(&created, "maker")
            .pointer(&format!("/f:metadata/f:annotations/f:{KEY}"))
            .is_some(),
        "the creator owns the template generation: {}",
        owned_by(&created, "maker")
    );
    let patch = |v: Value| Patch::Merge(v);
    let image = dss
        .patch(
            "kind-ds",
            &PatchParams::default(),
            &patch(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.28"}]}}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        annotation(&image).as_deref(),
        Some("2"),
        "a template change moves it"
    );
    let other = dss
        .patch(
            "kind-ds",
            &PatchParams::default(),
            &patch(json!({"spec": {"minReadySeconds": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(
        (annotation(&other).as_deref(), other.metadata.generation),
        (Some("2"), Some(3)),
        "another spec change moves the generation only"
    );
}

#[tokio::test]
async fn controller_revision_data_is_owned_whole() {
    let cluster = TestCluster::start("kind-cr").await.unwrap();
    let crs: Api<ControllerRevision> = Api::namespaced(cluster.client(), "default");
    let cr: ControllerRevision = serde_json::from_value(json!({
        "metadata": {"name": "kind-cr"},
        "revision": 1,
        "data": {"a": 1},
    }))
    .unwrap();
    let pp = PostParams {
        field_manager: Some("maker".into()),
        ..PostParams::default()
    };
    let created = crs.create(&pp, &cr).await.unwrap();
    assert_eq!(
        owned_by(&created, "maker").pointer("/f:data"),
        Some(&json!({})),
        "{}",
        owned_by(&created, "maker")
    );
}

#[tokio::test]
async fn some_kinds_need_a_resource_version_to_update() {
    let cluster = TestCluster::start("kind-rv").await.unwrap();
    let client = cluster.client();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    // A PodDisruptionBudget's name is only a path segment.
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "Kind_PDB"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let (message, _) = refusal(pdbs.replace("Kind_PDB", &PostParams::default(), &pdb).await);
    assert_eq!(
        message,
        "poddisruptionbudgets.policy \"Kind_PDB\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );

    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "kind-lease"},
        "spec": {"holderIdentity": "a"},
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let (message, _) = refusal(
        leases
            .replace("kind-lease", &PostParams::default(), &lease)
            .await,
    );
    assert!(
        message.contains("must be specified for an update"),
        "{message}"
    );

    // A RuntimeClass is created by a PUT, and then needs a resourceVersion.
    let rcs: Api<RuntimeClass> = Api::all(client.clone());
    let rc: RuntimeClass = serde_json::from_value(json!({
        "metadata": {"name": "kind-rc"},
        "handler": "runc",
    }))
    .unwrap();
    rcs.replace("kind-rc", &PostParams::default(), &rc)
        .await
        .unwrap();
    let (message, _) = refusal(rcs.replace("kind-rc", &PostParams::default(), &rc).await);
    assert!(
        message.contains("must be specified for an update"),
        "{message}"
    );
    rcs.delete("kind-rc", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn storage_class_delete_answers_with_the_object() {
    let cluster = TestCluster::start("kind-sc").await.unwrap();
    let scs: Api<StorageClass> = Api::all(cluster.client());
    let sc: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "kind-sc"},
        "provisioner": "example.com/kind",
    }))
    .unwrap();
    scs.create(&PostParams::default(), &sc).await.unwrap();
    let deleted = scs
        .delete("kind-sc", &DeleteParams::default())
        .await
        .unwrap();
    assert!(deleted.is_left(), "{deleted:?}");
}

/// A StorageClass's provisioner, parameters, reclaim policy and binding mode are immutable (a
/// second StorageClass `standard` of Kubernetes' add-ons, applied over the first, is refused
/// naming the fields in that order); its labels and `allowVolumeExpansion` may change, and
/// parameters written as `{}` equal none.
#[tokio::test]
async fn storage_class_provisioner_and_parameters_are_immutable() {
    let cluster = TestCluster::start("kind-sc-immutable").await.unwrap();
    let scs: Api<StorageClass> = Api::all(cluster.client());
    let sc: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "kind-sc-immutable"},
        "provisioner": "kubernetes.io/gce-pd",
        "parameters": {"type": "pd-standard"},
    }))
    .unwrap();
    scs.create(&PostParams::default(), &sc).await.unwrap();
    let change = json!({
        "provisioner": "kubernetes.io/host-path",
        "parameters": null,
        "reclaimPolicy": "Retain",
        "volumeBindingMode": "WaitForFirstConsumer",
    });
    let (message, causes) = refusal(
        scs.patch(
            "kind-sc-immutable",
            &PatchParams::default(),
            &Patch::Merge(&change),
        )
        .await,
    );
    assert_eq!(
        causes,
        [
            "parameters: Invalid value: null: field is immutable",
            "provisioner: Invalid value: \"kubernetes.io/host-path\": field is immutable",
            "reclaimPolicy: Invalid value: \"Retain\": field is immutable",
            "volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable",
        ],
        "{message}"
    );
    assert!(
        message.starts_with("StorageClass.storage.k8s.io \"kind-sc-immutable\" is invalid: [parameters: Invalid value: null: field is immutable, provisioner:"),
        "{message}"
    );
    let allowed = json!({"metadata": {"labels": {"tier": "gold"}}, "allowVolumeExpansion": true});
    let changed = scs
        .patch(
            "kind-sc-immutable",
            &PatchParams::default(),
            &Patch::Merge(&allowed),
        )
        .await
        .unwrap();
    assert_eq!(changed.allow_volume_expansion, Some(true));

    let bare: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "kind-sc-bare"},
        "provisioner": "example.com/bare",
    }))
    .unwrap();
    scs.create(&PostParams::default(), &bare).await.unwrap();
    scs.patch(
        "kind-sc-bare",
        &PatchParams::default(),
        &Patch::Merge(&json!({"parameters": {}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn persistent_volume_claim_is_stored_again_on_its_first_no_op_write() {
    let cluster = TestCluster::start("kind-pvc").await.unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client(), "default");
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "kind-pvc"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    let created = pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    let same = Patch::Merge(json!({"status": {"phase": "Pending"}}));
    let first = pvcs
        .patch_status("kind-pvc", &PatchParams::default(), &same)
        .await
        .unwrap();
    assert_ne!(
        first.metadata.resource_version, created.metadata.resource_version,
        "the first write that changes nothing is stored again"
    );
    assert_eq!(first.status, created.status);
    let second = pvcs
        .patch_status("kind-pvc", &PatchParams::default(), &same)
        .await
        .unwrap();
    assert_eq!(
        second.metadata.resource_version, first.metadata.resource_version,
        "later ones are not"
    );
}

#[tokio::test]
async fn pod_updates_change_only_images_deadline_and_tolerations() {
    let cluster = TestCluster::start("kind-pod").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "kind-pod"},
        "spec": {"activeDeadlineSeconds": 60,
                 "containers": [{"name": "c", "image": "nginx:1.27"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let pp = PatchParams::default();
    // The image may change.
    pods.patch(
        "kind-pod",
        &pp,
        &Patch::Json::<()>(
            serde_json::from_value(
                json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.28"}]),
            )
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    // The deadline may not go away.
    let (message, _) = refusal(
        pods.patch(
            "kind-pod",
            &pp,
            &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": null}})),
        )
        .await,
    );
    assert_eq!(
        message,
        "Pod \"kind-pod\" is invalid: spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"
    );
    // Replacing the containers re-defaults `imagePullPolicy` (`Always` for an untagged image).
    let (message, _) = refusal(
        pods.patch(
            "kind-pod",
            &pp,
            &Patch::Merge(json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}})),
        )
        .await,
    );
    assert!(
        message.starts_with("Pod \"kind-pod\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"),
        "{message}"
    );
}

#[tokio::test]
async fn a_pod_binding_has_no_owner_and_keeps_the_generation() {
    let cluster = TestCluster::start("kind-bind").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let pod = |name: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
        }))
        .unwrap()
    };
    let binding = |name: &str| -> Binding {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
        }))
        .unwrap()
    };
    let created = pods
        .create(&PostParams::default(), &pod("kind-bound"))
        .await
        .unwrap();
    let _: Value = pods
        .create_subresource(
            "binding",
            "kind-bound",
            &PostParams::default(),
            &binding("kind-bound"),
        )
        .await
        .unwrap();
    let bound = pods.get("kind-bound").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-1"));
    assert_eq!(bound.metadata.generation, created.metadata.generation);
    assert_eq!(
        bound.metadata.managed_fields.map(|m| m.len()),
        created.metadata.managed_fields.map(|m| m.len()),
        "the binding adds no managedFields entry"
    );

    // A Pod being deleted (held by a finalizer) is not bound.
    let mut held = pod("kind-held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&PostParams::default(), &held).await.unwrap();
    pods.delete("kind-held", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let err = pods
        .create_subresource::<_, Value>(
            "binding",
            "kind-held",
            &PostParams::default(),
            &binding("kind-held"),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("expected a 409, got {err:?}")
    };
    assert_eq!(
        status.message,
        "Operation cannot be fulfilled on pods/binding \"kind-held\": pod kind-held is being deleted, cannot be assigned to a host"
    );
    pods.patch(
        "kind-held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn deleting_a_service_deletes_its_endpoints() {
    let cluster = TestCluster::start("kind-svc-ep").await.unwrap();
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let eps: Api<Endpoints> = Api::namespaced(cluster.client(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "kind-svc"},
        "spec": {"ports": [{"port": 80}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let ep: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "kind-svc"},
        "subsets": [{"addresses": [{"ip": "10.1.0.1"}], "ports": [{"port": 80}]}],
    }))
    .unwrap();
    eps.create(&PostParams::default(), &ep).await.unwrap();
    services
        .delete("kind-svc", &DeleteParams::default())
        .await
        .unwrap();
    let gone = eps.get("kind-svc").await;
    assert!(
        matches!(&gone, Err(kube::Error::Api(s)) if s.code == 404),
        "the Endpoints of a deleted Service are deleted: {gone:?}"
    );
}

/// The 403 an admission plugin refused a write with: its message.
fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{}", status.message);
            assert_eq!(status.reason, "Forbidden");
            status.message.clone()
        }
        other => panic!("expected a 403, got {other:?}"),
    }
}

/// A fresh namespace for one test's admission objects.
async fn namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

fn pod(name: &str, containers: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": containers}}))
        .unwrap()
}

fn limit_range(name: &str, limits: Value) -> LimitRange {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"limits": limits}})).unwrap()
}

/// Waits until a Pod created in `pods`' namespace gets no LimitRange defaults, probing with
/// dry-run creates (admitted, never stored). kube-apiserver's LimitRanger reads LimitRanges
/// from an informer and, when that shows none for the namespace, from a live list it keeps for
/// 30 s: a LimitRange just deleted may still be applied that long (CI saw it do so). The
/// emulator forgets it at once.
async fn no_limit_range_applies(pods: &Api<Pod>) {
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let probe = pods
            .create(
                &dry_run,
                &pod("probe", json!([{"name": "c", "image": "nginx"}])),
            )
            .await
            .unwrap();
        if probe.metadata.annotations.is_none() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a deleted LimitRange still applied after 120 s: {:?}",
            probe.metadata.annotations
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn limit_ranger_fills_a_new_pods_resources_and_says_so() {
    let cluster = TestCluster::start("kind-lr-defaults").await.unwrap();
    let client = cluster.client();
    namespace(&client, "lr-defaults").await;
    let ranges: Api<LimitRange> = Api::namespaced(client.clone(), "lr-defaults");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "lr-defaults");
    let pp = PostParams::default();
    // `defaultRequest.memory` is defaulted from `default.memory`.
    let range = limit_range(
        "defaults",
        json!([{"type": "Container", "default": {"cpu": "500m", "memory": "128Mi"}, "defaultRequest": {"cpu": "250m"}}]),
    );
    ranges.create(&pp, &range).await.unwrap();
    let created = pods
        .create(
            &PostParams {
                field_manager: Some("maker".into()),
                ..PostParams::default()
            },
            &pod(
                "p",
                json!([
                    {"name": "a", "image": "nginx"},
                    {"name": "b", "image": "nginx", "resources": {"limits": {"cpu": "1"}}},
                ]),
            ),
        )
        .await
        .unwrap();
    let created = serde_json::to_value(&created).unwrap();
    let containers = &created["spec"]["containers"];
    assert_eq!(
        containers[0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "128Mi"}})
    );
    // A limit the Pod set is kept, and requests what it limits (the Pod's own defaulting).
    assert_eq!(
        containers[1]["resources"],
        json!({"limits": {"cpu": "1", "memory": "128Mi"}, "requests": {"cpu": "1", "memory": "128Mi"}})
    );
    assert_eq!(
        created["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; memory request for container b; memory limit for container b"
    );
    assert_eq!(created["status"]["qosClass"], "Burstable");
    // Admission's defaults are owned by no one: the creator owns what it sent.
    let entries = created["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let owned = entries[0]["fieldsV1"].to_string();
    assert!(!owned.contains("f:kubernetes.io/limit-ranger"), "{owned}");
    let a = &entries[0]["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"];
    assert!(a["f:resources"].get("f:limits").is_none(), "{a}");

    // A dry-run create is admitted too (what `no_limit_range_applies` probes with).
    let dry = pods
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &pod("dry", json!([{"name": "c", "image": "nginx"}])),
        )
        .await
        .unwrap();
    assert!(
        dry.annotations().contains_key("kubernetes.io/limit-ranger"),
        "{:?}",
        dry.metadata.annotations
    );
    assert!(pods.get_opt("dry").await.unwrap().is_none());
    // An update is not admitted again: a Pod created before the LimitRange keeps no limits.
    ranges
        .delete("defaults", &DeleteParams::default())
        .await
        .unwrap();
    no_limit_range_applies(&pods).await;
    let plain = pods
        .create(&pp, &pod("q", json!([{"name": "c", "image": "nginx"}])))
        .await
        .unwrap();
    assert!(plain.metadata.annotations.is_none());
    ranges.create(&pp, &range).await.unwrap();
    let patched = pods
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    let resources = serde_json::to_value(&patched.spec.unwrap().containers[0].resources).unwrap();
    assert_eq!(resources, json!({}));
}

#[tokio::test]
async fn limit_ranger_refuses_a_pod_outside_its_bounds() {
    let cluster = TestCluster::start("kind-lr-bounds").await.unwrap();
    let client = cluster.client();
    let pp = PostParams::default();
    namespace(&client, "lr-container").await;
    let ranges: Api<LimitRange> = Api::namespaced(client.clone(), "lr-container");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "lr-container");
    // `default.cpu` becomes 1 (from `max`), `defaultRequest` cpu 1 and memory 64Mi (from `min`).
    let range = limit_range(
        "bounds",
        json!([{"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}}]),
    );
    ranges.create(&pp, &range).await.unwrap();
    let big = pod(
        "big",
        json!([{"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "2"}}}]),
    );
    assert_eq!(
        forbidden(pods.create(&pp, &big).await),
        "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
    );
    let small = pod(
        "small",
        json!([{"name": "c", "image": "nginx", "resources": {"requests": {"memory": "32Mi"}}}]),
    );
    assert_eq!(
        forbidden(pods.create(&pp, &small).await),
        "pods \"small\" is forbidden: minimum memory usage per Container is 64Mi, but request is 32Mi"
    );
    let both = pod(
        "both",
        json!([{"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "2"}, "requests": {"memory": "32Mi"}}}]),
    );
    assert_eq!(
        forbidden(pods.create(&pp, &both).await),
        "pods \"both\" is forbidden: [minimum memory usage per Container is 64Mi, but request is 32Mi, maximum cpu usage per Container is 1, but limit is 2]"
    );
    // Within bounds: admitted with the defaults.
    let fits = pod("fits", json!([{"name": "c", "image": "nginx"}]));
    let fits = pods.create(&pp, &fits).await.unwrap();
    let resources = serde_json::to_value(&fits.spec.unwrap().containers[0].resources).unwrap();
    assert_eq!(
        resources,
        json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1", "memory": "64Mi"}})
    );

    // A `Pod` item bounds the sum of the containers.
    namespace(&client, "lr-pod").await;
    let ranges: Api<LimitRange> = Api::namespaced(client.clone(), "lr-pod");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "lr-pod");
    let range = limit_range("per-pod", json!([{"type": "Pod", "max": {"cpu": "1"}}]));
    ranges.create(&pp, &range).await.unwrap();
    let pair = pod(
        "pair",
        json!([
            {"name": "a", "image": "nginx", "resources": {"limits": {"cpu": "600m"}}},
            {"name": "b", "image": "nginx", "resources": {"limits": {"cpu": "600m"}}},
        ]),
    );
    assert_eq!(
        forbidden(pods.create(&pp, &pair).await),
        "pods \"pair\" is forbidden: maximum cpu usage per Pod is 1, but limit is 1200m"
    );
}

#[tokio::test]
async fn resource_quota_counts_creates_in_its_status_and_refuses_beyond_hard() {
    let cluster = TestCluster::start("kind-quota").await.unwrap();
    let client = cluster.client();
    let pp = PostParams::default();
    namespace(&client, "quota").await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "quota");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "quota");
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "2", "requests.cpu": "1"}},
    }))
    .unwrap();
    // No controller copies `spec.hard` into the status: the quota counts nothing yet.
    let created = quotas.create(&pp, &quota).await.unwrap();
    assert!(created.status.unwrap_or_default().hard.is_none());
    let cpu = |name: &str, cpu: &str| {
        pod(
            name,
            json!([{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]),
        )
    };
    pods.create(&pp, &cpu("early", "5")).await.unwrap();
    pods.delete("early", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();

    // What a controller would write: the quota now counts.
    quotas
        .patch_status(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "hard": {"pods": "2", "requests.cpu": "1"},
                "used": {"pods": "0", "requests.cpu": "0"},
            }})),
        )
        .await
        .unwrap();
    let bare = pod("bare", json!([{"name": "c", "image": "nginx"}]));
    assert_eq!(
        forbidden(pods.create(&pp, &bare).await),
        "pods \"bare\" is forbidden: failed quota: q: must specify requests.cpu for: c"
    );
    pods.create(&pp, &cpu("a", "500m")).await.unwrap();
    let used = |q: ResourceQuota| serde_json::to_value(q.status.unwrap().used).unwrap();
    let after = quotas.get("q").await.unwrap();
    let entries = serde_json::to_value(&after.metadata.managed_fields).unwrap();
    assert!(
        entries
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["manager"] == "kube-apiserver" && e["subresource"] == "status"),
        "{entries}"
    );
    assert_eq!(used(after), json!({"pods": "1", "requests.cpu": "500m"}));
    assert_eq!(
        forbidden(pods.create(&pp, &cpu("b", "600m")).await),
        "pods \"b\" is forbidden: exceeded quota: q, requested: requests.cpu=600m, used: requests.cpu=500m, limited: requests.cpu=1"
    );
    pods.create(&pp, &cpu("b", "500m")).await.unwrap();
    assert_eq!(
        used(quotas.get("q").await.unwrap()),
        json!({"pods": "2", "requests.cpu": "1"})
    );
    assert_eq!(
        forbidden(pods.create(&pp, &cpu("c", "0")).await),
        "pods \"c\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
    );
    // The quota is checked before the name: a taken name is refused by the quota first.
    assert_eq!(
        forbidden(pods.create(&pp, &cpu("b", "0")).await),
        "pods \"b\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
    );
    // Nothing gives a deleted Pod's usage back without kube-controller-manager.
    pods.delete("a", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert_eq!(
        used(quotas.get("q").await.unwrap()),
        json!({"pods": "2", "requests.cpu": "1"})
    );
}

#[tokio::test]
async fn a_scoped_quota_counts_a_pod_that_becomes_terminating() {
    let cluster = TestCluster::start("kind-quota-scope").await.unwrap();
    let client = cluster.client();
    let pp = PostParams::default();
    namespace(&client, "quota-scope").await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "quota-scope");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "quota-scope");
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "t"},
        "spec": {"hard": {"pods": "5"}, "scopes": ["Terminating"]},
    }))
    .unwrap();
    quotas.create(&pp, &quota).await.unwrap();
    quotas
        .patch_status(
            "t",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"hard": {"pods": "5"}, "used": {"pods": "0"}}})),
        )
        .await
        .unwrap();
    let used = |q: ResourceQuota| serde_json::to_value(q.status.unwrap().used).unwrap();
    // Without a deadline the Pod is out of the quota's scope.
    pods.create(&pp, &pod("p", json!([{"name": "c", "image": "nginx"}])))
        .await
        .unwrap();
    assert_eq!(used(quotas.get("t").await.unwrap()), json!({"pods": "0"}));
    // With one it enters the scope, and is counted then.
    pods.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": 60}})),
    )
    .await
    .unwrap();
    assert_eq!(used(quotas.get("t").await.unwrap()), json!({"pods": "1"}));
}

/// Names are checked by each kind's rule: a ConfigMap's name is a DNS subdomain (64 to 253
/// characters are fine), a Pod's too, with a warning when it is not a DNS label (it becomes
/// the hostname), as the workloads whose names prefix their Pods' get; annotations may hold
/// 256 KiB in all.
#[tokio::test]
async fn names_follow_each_kinds_rule_and_annotations_have_a_total_size() {
    let cluster = TestCluster::start("names").await.unwrap();
    let client = cluster.client();
    let cms = "/api/v1/namespaces/default/configmaps";
    let long = "a".repeat(100);
    let created = raw::post(&client, cms, json!({"metadata": {"name": long}})).await;
    assert_eq!(created.code, 201, "{}", created.body);
    let too_long = "b".repeat(254);
    let refused = raw::post(&client, cms, json!({"metadata": {"name": too_long}})).await;
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.body["message"],
        format!(
            "ConfigMap \"{too_long}\" is invalid: metadata.name: Invalid value: \"{too_long}\": must be no more than 253 characters"
        )
    );

    let pod_name = "p".repeat(70);
    let pod = raw::post(
        &client,
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": pod_name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .await;
    assert_eq!(pod.code, 201, "{}", pod.body);
    assert_eq!(
        pod.warnings,
        [
            "299 - \"metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must be no more than 63 characters]\""
        ]
    );
    let deployment = raw::post(
        &client,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "web.v2"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}),
    )
    .await;
    assert_eq!(deployment.code, 201, "{}", deployment.body);
    assert_eq!(
        deployment.warnings,
        [
            "299 - \"metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]\""
        ]
    );

    let big = raw::post(
        &client,
        cms,
        json!({"metadata": {"name": "big", "annotations": {"a": "x".repeat(256 * 1024)}}}),
    )
    .await;
    assert_eq!(big.code, 422);
    assert_eq!(
        big.body["message"],
        "ConfigMap \"big\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
    );
    let fits = raw::post(
        &client,
        cms,
        json!({"metadata": {"name": "fits", "annotations": {"a": "x".repeat(256 * 1024 - 1)}}}),
    )
    .await;
    assert_eq!(fits.code, 201);
}

/// A `LoadBalancer` Service with `externalTrafficPolicy: Local` gets a health check node port,
/// kept by an update that leaves it out and released when the policy changes.
#[tokio::test]
async fn a_local_load_balancer_gets_a_health_check_node_port() {
    let cluster = TestCluster::start("health-check-port").await.unwrap();
    let services: Api<Service> = Api::namespaced(cluster.client(), "default");
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}}))
    .unwrap();
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let port = created
        .spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .expect("a health check node port");
    assert!((30000..=32767).contains(&port), "{port}");
    let node_port = created.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].node_port;
    assert_ne!(node_port, Some(port));
    let patch = json!({"metadata": {"labels": {"touched": "yes"}}});
    let kept = services
        .patch("lb", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(kept.spec.unwrap().health_check_node_port, Some(port));
    let patch = json!({"spec": {"externalTrafficPolicy": "Cluster"}});
    let released = services
        .patch("lb", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(released.spec.unwrap().health_check_node_port, None);
}

/// The `DefaultIngressClass` admission: an Ingress that names no class gets the default one.
#[tokio::test]
async fn an_ingress_without_a_class_gets_the_default_class() {
    use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
    let cluster = TestCluster::start("default-ingress-class").await.unwrap();
    let classes: Api<IngressClass> = Api::all(cluster.client());
    for (name, default) in [("plain", "false"), ("main", "true")] {
        let class: IngressClass = serde_json::from_value(json!({"metadata": {"name": name,
            "annotations": {"ingressclass.kubernetes.io/is-default-class": default}},
            "spec": {"controller": "example.com/ingress"}}))
        .unwrap();
        classes
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
    }
    let ingresses: Api<Ingress> = Api::namespaced(cluster.client(), "default");
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    let ingress = |name: &str, annotations: Value| -> Ingress {
        serde_json::from_value(
            json!({"metadata": {"name": name, "annotations": annotations},
            "spec": {"defaultBackend": backend}}),
        )
        .unwrap()
    };
    let defaulted = ingresses
        .create(&PostParams::default(), &ingress("a", json!({})))
        .await
        .unwrap();
    assert_eq!(
        defaulted.spec.unwrap().ingress_class_name.as_deref(),
        Some("main")
    );
    let annotated = ingresses
        .create(
            &PostParams::default(),
            &ingress("b", json!({"kubernetes.io/ingress.class": "other"})),
        )
        .await
        .unwrap();
    assert_eq!(annotated.spec.unwrap().ingress_class_name, None);
}

/// kube-apiserver's availability controller says why an APIService backed by a Service is
/// not available (nothing answers behind it without a controller-manager), and follows the
/// Service and its EndpointSlices as they come.
#[tokio::test]
async fn an_api_service_says_why_it_is_not_available() {
    let cluster = TestCluster::start("api-service-availability")
        .await
        .unwrap();
    let client = cluster.client();
    let path = "/apis/apiregistration.k8s.io/v1/apiservices";
    let created = raw::post(
        &client,
        path,
        json!({"metadata": {"name": "v1alpha1.example.com"}, "spec": {"group": "example.com",
            "version": "v1alpha1", "service": {"name": "s", "namespace": "default"},
            "groupPriorityMinimum": 100, "versionPriority": 10, "insecureSkipTLSVerify": true}}),
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    let condition = |reason: &'static str, message: &'static str| {
        let client = client.clone();
        async move {
            mcr_envtest::wait::eventually_async(reason, mcr_test_support::DEADLINE, || async {
                let a = raw::get(&client, &format!("{path}/v1alpha1.example.com"))
                    .await
                    .body;
                let c = &a["status"]["conditions"][0];
                c["type"] == "Available"
                    && c["status"] == "False"
                    && c["reason"] == reason
                    && c["message"] == message
            })
            .await;
        }
    };
    condition("ServiceNotFound", "service/s in \"default\" is not present").await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "s"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    condition(
        "EndpointsNotFound",
        "cannot find endpointslices for service/s in \"default\"",
    )
    .await;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice: EndpointSlice = serde_json::from_value(json!({"metadata": {"name": "s-1",
        "labels": {"kubernetes.io/service-name": "s"}}, "addressType": "IPv4",
        "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}], "endpoints": []}))
    .unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();
    condition(
        "MissingEndpoints",
        "endpointslices for service/s in \"default\" have no addresses with port name \"https\"",
    )
    .await;
    // The controller's status `Update` owns the conditions list it added (`"."`: the object
    // had no such list), and keeps it as the condition changes.
    let a = raw::get(&client, &format!("{path}/v1alpha1.example.com"))
        .await
        .body;
    let entry = a["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["manager"] == "kube-apiserver" && e["subresource"] == "status")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        entry["fieldsV1"]["f:status"]["f:conditions"]["."],
        json!({}),
        "{entry}"
    );
}

/// Checks of what real-world manifests get wrong: an Ingress host that is not a DNS name
/// (`*.` allowed), a volume mount of a volume the Pod does not declare.
#[tokio::test]
async fn ingress_hosts_and_volume_mounts_are_checked() {
    let cluster = TestCluster::start("hosts-and-mounts").await.unwrap();
    let client = cluster.client();
    let backend = json!({"service": {"name": "s", "port": {"number": 80}}});
    let ingress = raw::post(
        &client,
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
        json!({"metadata": {"name": "i"}, "spec": {
            "rules": [{"host": "registry.<your domain>", "http": {"paths": [{"path": "/",
                "pathType": "Prefix", "backend": backend}]}}, {"host": "*.example.com"}],
            "tls": [{"hosts": ["registry.<your domain>", "ok.example.com"]}]}}),
    )
    .await;
    assert_eq!(ingress.code, 422, "{}", ingress.body);
    let subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    assert_eq!(
        ingress.body["message"],
        format!(
            "Ingress.networking.k8s.io \"i\" is invalid: [spec.rules[0].host: Invalid value: \"registry.<your domain>\": {subdomain}, spec.tls[0].hosts[0]: Invalid value: \"registry.<your domain>\": {subdomain}]"
        )
    );
    let deployment = raw::post(
        &client,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
                "containers": [{"name": "c", "image": "i", "volumeMounts": [
                    {"name": "v", "mountPath": "/a"}, {"name": "missing", "mountPath": "/b"}]}],
                "volumes": [{"name": "v", "emptyDir": {}}]}}}}),
    )
    .await;
    assert_eq!(deployment.code, 422, "{}", deployment.body);
    assert_eq!(
        deployment.body["message"],
        "Deployment.apps \"d\" is invalid: spec.template.spec.containers[0].volumeMounts[1].name: Not found: \"missing\""
    );
    // A StatefulSet's claim templates are volumes of its Pods (found by the corpus:
    // Kubernetes' own e2e StatefulSets mount them).
    let set = |mount: &str| {
        json!({"metadata": {"name": "s"}, "spec": {"serviceName": "s",
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
                "containers": [{"name": "c", "image": "i", "volumeMounts": [
                    {"name": mount, "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}})
    };
    let path = "/apis/apps/v1/namespaces/default/statefulsets";
    let missing = raw::post(&client, path, set("other")).await;
    assert_eq!(missing.code, 422, "{}", missing.body);
    let claimed = raw::post(&client, path, set("data")).await;
    assert_eq!(claimed.code, 201, "{}", claimed.body);
}

/// A PersistentVolume's `Recycle` reclaim policy is deprecated: kube-apiserver warns of it on
/// every write of the volume (found by the corpus: the docs' examples still use it), not on
/// a write of its status.
#[tokio::test]
async fn a_recycled_volume_is_warned_of() {
    let cluster = TestCluster::start("recycled-volume").await.unwrap();
    let client = cluster.client();
    let warning = "299 - \"spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the recommended approach is to use dynamic provisioning.\"";
    let path = "/api/v1/persistentvolumes";
    let created = raw::post(
        &client,
        path,
        json!({"metadata": {"name": "recycled"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Recycle",
            "hostPath": {"path": "/tmp/recycled"}}}),
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert_eq!(created.warnings, [warning]);
    let merge = "application/merge-patch+json";
    let labelled = raw::send(
        &client,
        "PATCH",
        &format!("{path}/recycled"),
        merge,
        json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(labelled.code, 200, "{}", labelled.body);
    assert_eq!(labelled.warnings, [warning]);
    let status = raw::send(
        &client,
        "PATCH",
        &format!("{path}/recycled/status"),
        merge,
        json!({"status": {"message": "m"}}),
    )
    .await;
    assert_eq!(status.code, 200, "{}", status.body);
    assert!(status.warnings.is_empty(), "{:?}", status.warnings);
    let retained = raw::send(
        &client,
        "PATCH",
        &format!("{path}/recycled"),
        merge,
        json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}}),
    )
    .await;
    assert_eq!(retained.code, 200, "{}", retained.body);
    assert!(retained.warnings.is_empty(), "{:?}", retained.warnings);
}
