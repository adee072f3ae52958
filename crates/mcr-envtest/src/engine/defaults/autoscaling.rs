//! autoscaling/v2: `pkg/apis/autoscaling/v2/defaults.go` of Kubernetes v1.36.

use serde_json::{Value, json};

use super::{Defaulters, Obj, child, get, nil, or_nil, unset};

pub(super) const DEFAULTERS: Defaulters = &[(
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    horizontal_pod_autoscaler,
)];

/// `SetDefaults_HorizontalPodAutoscaler` and `SetDefaults_HorizontalPodAutoscalerBehavior`:
/// 80% CPU when no metric is given (`autoscaling.DefaultCPUUtilization`); a behavior's
/// missing rules are the defaults (`defaultHPAScaleUpRules`, `defaultHPAScaleDownRules`).
fn horizontal_pod_autoscaler(hpa: &mut Obj) {
    let spec = child(hpa, "spec");
    or_nil(spec, "minReplicas", json!(1));
    if unset(spec, "metrics") {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    let Some(behavior) = get(spec, "behavior") else {
        return;
    };
    let up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15}]});
    let down = json!({"selectPolicy": "Max", "policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 15}]});
    for (field, defaults) in [("scaleUp", up), ("scaleDown", down)] {
        let given = behavior.get(field).filter(|v| !v.is_null()).cloned();
        behavior.insert(field.into(), rules(given, defaults));
    }
}

/// `copyHPAScalingRules`: the given rules over the defaults, field by field (a given
/// `policies` list, even empty, replaces the default one).
fn rules(given: Option<Value>, defaults: Value) -> Value {
    let mut out = defaults;
    let (Some(Value::Object(given)), Some(out_map)) = (given, out.as_object_mut()) else {
        return out;
    };
    for field in [
        "selectPolicy",
        "stabilizationWindowSeconds",
        "policies",
        "tolerance",
    ] {
        if !nil(&given, field) {
            out_map.insert(field.into(), given[field].clone());
        }
    }
    out
}
