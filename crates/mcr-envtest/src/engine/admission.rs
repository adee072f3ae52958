//! Two of kube-apiserver's admission plugins, as they act on a kube-apiserver without
//! kube-controller-manager: `LimitRanger` and `ResourceQuota`.
//!
//! - `LimitRanger`, on a Pod's create: each LimitRange of the namespace fills the containers'
//!   missing limits from its `Container` items' `default` and missing requests from their
//!   `defaultRequest`, noting what it set in the `kubernetes.io/limit-ranger` annotation (the
//!   last LimitRange that set anything writes it); then each checks `min`, `max` and
//!   `maxLimitRequestRatio` of its `Container` items per container and of its `Pod` items on
//!   the sums, and the first LimitRange with a violation refuses the Pod (403, its violations
//!   listed). Not on a Pod's update (kube-apiserver skips them), nor on `pods/resize`, nor
//!   for PersistentVolumeClaims (not emulated).
//!
//!   Order: kube-apiserver takes the namespace's LimitRanges from an informer's index, in no
//!   fixed order (a Go map's), so with several LimitRanges whose defaults differ for one
//!   resource, which default a Pod gets (and whether another LimitRange's `max` then refuses
//!   it) changes from one request to the next. The emulator takes them by name, one of the
//!   orders kube-apiserver may take.
//! - `ResourceQuota`, on a create (and on a Pod update that makes it terminating or not): for
//!   each quota of the namespace whose `status.hard` names a resource the object uses, the
//!   object's usage is added to `status.used` (written by kube-apiserver as an `Update` of the
//!   `status` subresource), or the request is refused (403) when that would go over
//!   `status.hard`, when `status.used` lacks a resource of `status.hard`, or when a Pod
//!   leaves out a request or limit the quota counts. Nothing else writes the quota: no
//!   controller fills `status.hard` from `spec.hard` or takes a deleted object's usage back
//!   (kube-controller-manager's quota controller does, and does not run). Usage: Pods
//!   (`pods`, `count/pods`, `cpu`, `memory`, `ephemeral-storage`, their `requests.` and
//!   `limits.` forms; terminal Pods count only as `count/pods`), Services (`services`,
//!   `services.nodeports`, `services.loadbalancers`), PersistentVolumeClaims
//!   (`persistentvolumeclaims`, `requests.storage`), every other kind as `count/<resource>`
//!   (and `configmaps`, `secrets`, `resourcequotas`, `replicationcontrollers`). Scopes:
//!   `Terminating`, `NotTerminating`, `BestEffort`, `NotBestEffort`, `PriorityClass` on Pods;
//!   a quota with scopes matches no other kind. Quotas are checked in name order (kube-apiserver's
//!   order is an informer's, as for LimitRanges).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::managed::Operation;
use super::quantity::Quantity;
use super::registry::{Special, TypeInfo};
use super::state::Store;
use super::update::finish_update;
use super::{ApiError, WriteOptions};

/// The annotation `LimitRanger` writes on a Pod it gave defaults.
const LIMIT_RANGER_ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Resource names to quantities, sorted as kube-apiserver prints them.
type Resources = BTreeMap<String, Quantity>;

/// The objects of `res` in namespace `ns`, by name.
fn in_namespace(store: &Store, res: &str, ns: &str) -> Vec<Arc<Value>> {
    let Some(objects) = store.objects.get(res) else {
        return Vec::new();
    };
    let from = (ns.to_string(), String::new());
    objects
        .range(from..)
        .take_while(|((n, _), _)| n == ns)
        .filter_map(|(key, _)| store.get(res, key))
        .collect()
}

/// The namespace's LimitRanges, in the order the emulator applies them (by name).
pub(crate) fn limit_ranges(store: &Store, ns: &str) -> Vec<Arc<Value>> {
    in_namespace(store, "limitranges", ns)
}

/// A resource list (`{"cpu": "1"}`); values that are not quantities are left out.
fn resources(v: &Value) -> Resources {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| Some((k.clone(), Quantity::parse(q.as_str()?)?)))
        .collect()
}

fn to_json(list: &Resources) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, q)| (k.clone(), json!(q.to_string())))
            .collect(),
    )
}

/// The default limits and requests of a LimitRange's `Container` items (a later item's
/// value for a resource wins).
fn container_defaults(range: &Value) -> (Map<String, Value>, Map<String, Value>) {
    let mut limits = Map::new();
    let mut requests = Map::new();
    for item in range["spec"]["limits"].as_array().into_iter().flatten() {
        if item["type"] != "Container" {
            continue;
        }
        for (k, v) in item["defaultRequest"].as_object().into_iter().flatten() {
            requests.insert(k.clone(), v.clone());
        }
        for (k, v) in item["default"].as_object().into_iter().flatten() {
            limits.insert(k.clone(), v.clone());
        }
    }
    (limits, requests)
}

/// `LimitRanger`'s defaults on a new Pod, one LimitRange after the other.
pub(crate) fn limit_ranger_defaults(ranges: &[Arc<Value>], pod: &mut Value) {
    for range in ranges {
        let (limits, requests) = container_defaults(range);
        let mut notes: Vec<String> = Vec::new();
        for (list, what) in [
            ("containers", "container"),
            ("initContainers", "init container"),
        ] {
            let containers = pod
                .get_mut("spec")
                .and_then(|s| s.get_mut(list))
                .and_then(Value::as_array_mut);
            let Some(containers) = containers else {
                continue;
            };
            for c in containers {
                let name = c["name"].as_str().unwrap_or_default().to_string();
                let Some(map) = c.as_object_mut() else {
                    continue;
                };
                let res = map.entry("resources").or_insert_with(|| json!({}));
                if !res.is_object() {
                    *res = json!({});
                }
                let set_requests = fill(res, "requests", &requests);
                let set_limits = fill(res, "limits", &limits);
                if !set_requests.is_empty() {
                    notes.push(format!(
                        "{} request for {what} {name}",
                        set_requests.join(", ")
                    ));
                }
                if !set_limits.is_empty() {
                    notes.push(format!("{} limit for {what} {name}", set_limits.join(", ")));
                }
            }
        }
        if notes.is_empty() {
            continue;
        }
        let meta = super::meta::meta_mut(pod);
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[LIMIT_RANGER_ANNOTATION] =
            json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
    }
}

/// Fills `res[field]` with the defaults it lacks; the names set, sorted.
fn fill(res: &mut Value, field: &str, defaults: &Map<String, Value>) -> Vec<String> {
    if defaults.is_empty() {
        return Vec::new();
    }
    let list = res
        .as_object_mut()
        .map(|m| m.entry(field).or_insert_with(|| json!({})));
    let Some(list) = list else {
        return Vec::new();
    };
    if !list.is_object() {
        *list = json!({});
    }
    let mut set = Vec::new();
    if let Some(map) = list.as_object_mut() {
        for (k, v) in defaults {
            if !map.contains_key(k) {
                map.insert(k.clone(), v.clone());
                set.push(k.clone());
            }
        }
    }
    set.sort();
    set
}

/// `min`: a request is required and no request or limit may be below it.
fn min_violation(
    kind: &str,
    name: &str,
    min: Quantity,
    req: &Resources,
    lim: &Resources,
) -> Option<String> {
    match (req.get(name), lim.get(name)) {
        (None, _) => Some(format!(
            "minimum {name} usage per {kind} is {min}.  No request is specified"
        )),
        (Some(r), _) if *r < min => Some(format!(
            "minimum {name} usage per {kind} is {min}, but request is {r}"
        )),
        (_, Some(l)) if *l < min => Some(format!(
            "minimum {name} usage per {kind} is {min}, but limit is {l}"
        )),
        _ => None,
    }
}

/// `max`: a limit is required and no limit or request may be above it.
fn max_violation(
    kind: &str,
    name: &str,
    max: Quantity,
    req: &Resources,
    lim: &Resources,
) -> Option<String> {
    match (req.get(name), lim.get(name)) {
        (_, None) => Some(format!(
            "maximum {name} usage per {kind} is {max}.  No limit is specified"
        )),
        (_, Some(l)) if *l > max => Some(format!(
            "maximum {name} usage per {kind} is {max}, but limit is {l}"
        )),
        (Some(r), _) if *r > max => Some(format!(
            "maximum {name} usage per {kind} is {max}, but request is {r}"
        )),
        _ => None,
    }
}

/// `maxLimitRequestRatio`: both set, non-zero, and the limit at most that many requests.
fn ratio_violation(
    kind: &str,
    name: &str,
    max: Quantity,
    req: &Resources,
    lim: &Resources,
) -> Option<String> {
    let (r, l) = (req.get(name), lim.get(name));
    match (r, l) {
        (None, _) => Some(format!(
            "{name} max limit to request ratio per {kind} is {max}, but no request is specified or request is 0"
        )),
        (Some(r), _) if r.is_zero() => Some(format!(
            "{name} max limit to request ratio per {kind} is {max}, but no request is specified or request is 0"
        )),
        (_, None) => Some(format!(
            "{name} max limit to request ratio per {kind} is {max}, but no limit is specified or limit is 0"
        )),
        (_, Some(l)) if l.is_zero() => Some(format!(
            "{name} max limit to request ratio per {kind} is {max}, but no limit is specified or limit is 0"
        )),
        (Some(r), Some(l)) => {
            let ratio = l.as_f64() / r.as_f64();
            (ratio > max.as_f64()).then(|| {
                format!(
                    "{name} max limit to request ratio per {kind} is {max}, but provided ratio is {ratio:.6}"
                )
            })
        }
    }
}

/// The violations of one LimitRange item's constraints by one set of requests and limits.
fn check_item(item: &Value, kind: &str, req: &Resources, lim: &Resources, out: &mut Vec<String>) {
    for (name, min) in resources(&item["min"]) {
        out.extend(min_violation(kind, &name, min, req, lim));
    }
    for (name, max) in resources(&item["max"]) {
        out.extend(max_violation(kind, &name, max, req, lim));
    }
    for (name, ratio) in resources(&item["maxLimitRequestRatio"]) {
        out.extend(ratio_violation(kind, &name, ratio, req, lim));
    }
}

/// A container's requests and limits.
fn container_resources(c: &Value) -> (Resources, Resources) {
    (
        resources(&c["resources"]["requests"]),
        resources(&c["resources"]["limits"]),
    )
}

fn add_into(total: &mut Resources, more: &Resources) {
    for (k, q) in more {
        let sum = match total.get(k) {
            Some(t) => t.add(*q),
            None => *q,
        };
        total.insert(k.clone(), sum);
    }
}

fn max_into(total: &mut Resources, other: &Resources) {
    for (k, q) in other {
        if total.get(k).is_none_or(|t| q > t) {
            total.insert(k.clone(), *q);
        }
    }
}

/// A Pod's effective requests (`limits = false`) or limits: its containers' sum, at least
/// what any init container needs (sidecars, init containers that keep running, add up).
fn pod_total(spec: &Value, limits: bool) -> Resources {
    let pick = |c: &Value| {
        let (r, l) = container_resources(c);
        if limits { l } else { r }
    };
    let mut total = Resources::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        add_into(&mut total, &pick(c));
    }
    let mut sidecars = Resources::new();
    let mut init = Resources::new();
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let own = pick(c);
        let needs = if c["restartPolicy"] == "Always" {
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut needs = own;
            add_into(&mut needs, &sidecars);
            needs
        };
        max_into(&mut init, &needs);
    }
    max_into(&mut total, &init);
    total
}

/// `LimitRanger`'s checks of a new Pod (with its defaults): the first LimitRange with a
/// violation refuses it.
pub(crate) fn limit_ranger_check(
    ranges: &[Arc<Value>],
    pod: &Value,
    name: &str,
) -> Result<(), ApiError> {
    for range in ranges {
        let mut violations = Vec::new();
        for item in range["spec"]["limits"].as_array().into_iter().flatten() {
            match item["type"].as_str() {
                Some("Container") => {
                    for list in ["containers", "initContainers"] {
                        for c in pod["spec"][list].as_array().into_iter().flatten() {
                            let (req, lim) = container_resources(c);
                            check_item(item, "Container", &req, &lim, &mut violations);
                        }
                    }
                }
                Some("Pod") => {
                    let (req, lim) = (
                        pod_total(&pod["spec"], false),
                        pod_total(&pod["spec"], true),
                    );
                    check_item(item, "Pod", &req, &lim, &mut violations);
                }
                _ => {}
            }
        }
        if !violations.is_empty() {
            return Err(forbidden("", "pods", name, &aggregate(violations)));
        }
    }
    Ok(())
}

/// Several errors as one, as kube-apiserver joins them: repeats dropped, bracketed when more
/// than one is left.
fn aggregate(errors: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// An admission plugin's 403: `pods "a" is forbidden: ...` (no name for a `generateName`).
fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
    let resource = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let message = if name.is_empty() {
        format!("{resource} is forbidden: {why}")
    } else {
        format!("{resource} \"{name}\" is forbidden: {why}")
    };
    let mut err = ApiError::forbidden(message);
    let mut details = json!({"kind": plural});
    if !name.is_empty() {
        details["name"] = json!(name);
    }
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    err.details = Some(details);
    err
}

/// Whether a Pod is terminating in the quota's sense (an `activeDeadlineSeconds`).
fn terminating(pod: &Value) -> bool {
    pod["spec"]["activeDeadlineSeconds"]
        .as_i64()
        .is_some_and(|s| s >= 0)
}

/// What the quota counts for an object of `info`, and the resource names its evaluator knows.
struct Evaluator<'a> {
    info: &'a TypeInfo,
}

const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];

/// The legacy names some kinds are also counted under.
fn alias(group: &str, plural: &str) -> Option<&'static str> {
    if !group.is_empty() {
        return None;
    }
    Some(match plural {
        "configmaps" => "configmaps",
        "resourcequotas" => "resourcequotas",
        "replicationcontrollers" => "replicationcontrollers",
        "secrets" => "secrets",
        "services" => "services",
        "persistentvolumeclaims" => "persistentvolumeclaims",
        _ => return None,
    })
}

impl Evaluator<'_> {
    fn pod(&self) -> bool {
        self.info.special == Special::Pod
    }

    fn count_name(&self) -> String {
        let rt = &self.info.rt;
        if rt.group.is_empty() {
            format!("count/{}", rt.plural)
        } else {
            format!("count/{}.{}", rt.plural, rt.group)
        }
    }

    /// Which of `names` this evaluator counts.
    fn matching(&self, names: &[String]) -> Vec<String> {
        let rt = &self.info.rt;
        names
            .iter()
            .filter(|n| {
                if self.pod() {
                    POD_RESOURCES.contains(&n.as_str())
                        || n.starts_with("hugepages-")
                        || n.starts_with("requests.hugepages-")
                } else if rt.group.is_empty() && rt.plural == "services" {
                    matches!(
                        n.as_str(),
                        "count/services"
                            | "services"
                            | "services.nodeports"
                            | "services.loadbalancers"
                    )
                } else if rt.group.is_empty() && rt.plural == "persistentvolumeclaims" {
                    matches!(
                        n.as_str(),
                        "count/persistentvolumeclaims"
                            | "persistentvolumeclaims"
                            | "requests.storage"
                    )
                } else {
                    **n == self.count_name() || alias(&rt.group, &rt.plural) == Some(n.as_str())
                }
            })
            .cloned()
            .collect()
    }

    /// Whether a quota's scope selector takes the object.
    fn scope_matches(&self, scope: &Value, obj: &Value) -> bool {
        if !self.pod() {
            return false;
        }
        let best_effort = || super::defaults::qos_class(&obj["spec"]) == "BestEffort";
        match scope["scopeName"].as_str().unwrap_or_default() {
            "Terminating" => terminating(obj),
            "NotTerminating" => !terminating(obj),
            "BestEffort" => best_effort(),
            "NotBestEffort" => !best_effort(),
            "PriorityClass" => {
                let class = obj["spec"]["priorityClassName"]
                    .as_str()
                    .unwrap_or_default();
                let values: Vec<&str> = scope["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                match scope["operator"].as_str().unwrap_or_default() {
                    "Exists" => !class.is_empty(),
                    "DoesNotExist" => class.is_empty(),
                    "In" => !class.is_empty() && values.contains(&class),
                    "NotIn" => class.is_empty() || !values.contains(&class),
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// Whether a quota covers the object: its `status.hard` names something counted, and every
    /// scope takes the object.
    fn matches(&self, quota: &Value, obj: &Value) -> bool {
        let hard: Vec<String> = resources(&quota["status"]["hard"]).into_keys().collect();
        !self.matching(&hard).is_empty() && scopes(quota).iter().all(|s| self.scope_matches(s, obj))
    }

    /// What the object uses.
    fn usage(&self, obj: &Value) -> Resources {
        let one = Quantity::parse("1").unwrap_or_else(Quantity::zero);
        let mut usage = Resources::new();
        usage.insert(self.count_name(), one);
        let rt = &self.info.rt;
        if self.pod() {
            let phase = obj["status"]["phase"].as_str().unwrap_or_default();
            if phase == "Failed" || phase == "Succeeded" {
                return usage;
            }
            usage.insert("pods".into(), one);
            let requests = pod_total(&obj["spec"], false);
            let limits = pod_total(&obj["spec"], true);
            for res in ["cpu", "memory", "ephemeral-storage"] {
                if let Some(q) = requests.get(res) {
                    usage.insert(res.into(), *q);
                    usage.insert(format!("requests.{res}"), *q);
                }
                if let Some(q) = limits.get(res) {
                    usage.insert(format!("limits.{res}"), *q);
                }
            }
            for (res, q) in &requests {
                if res.starts_with("hugepages-") {
                    usage.insert(res.clone(), *q);
                    usage.insert(format!("requests.{res}"), *q);
                }
            }
            return usage;
        }
        if let Some(name) = alias(&rt.group, &rt.plural) {
            usage.insert(name.into(), one);
        }
        if rt.group.is_empty() && rt.plural == "services" {
            let kind = obj["spec"]["type"].as_str().unwrap_or("ClusterIP");
            let ports = obj["spec"]["ports"].as_array().map_or(0, Vec::len);
            let count = |n: usize| Quantity::parse(&n.to_string()).unwrap_or_else(Quantity::zero);
            let node_ports = if kind == "NodePort" || kind == "LoadBalancer" {
                ports
            } else {
                0
            };
            usage.insert("services.nodeports".into(), count(node_ports));
            usage.insert(
                "services.loadbalancers".into(),
                count(usize::from(kind == "LoadBalancer")),
            );
        }
        if rt.group.is_empty()
            && rt.plural == "persistentvolumeclaims"
            && let Some(q) = obj["spec"]["resources"]["requests"]["storage"]
                .as_str()
                .and_then(Quantity::parse)
        {
            usage.insert("requests.storage".into(), q);
        }
        usage
    }

    /// The required requests and limits of a Pod the quota counts: `must specify ...`.
    fn constraints(&self, required: &[String], obj: &Value) -> Option<String> {
        if !self.pod() {
            return None;
        }
        const CHECKED: [&str; 6] = [
            "cpu",
            "memory",
            "requests.cpu",
            "requests.memory",
            "limits.cpu",
            "limits.memory",
        ];
        let required: Vec<&str> = required
            .iter()
            .map(String::as_str)
            .filter(|r| CHECKED.contains(r))
            .collect();
        let mut missing: BTreeMap<&str, std::collections::BTreeSet<String>> = BTreeMap::new();
        for list in ["containers", "initContainers"] {
            for c in obj["spec"][list].as_array().into_iter().flatten() {
                let (req, lim) = container_resources(c);
                let has = |r: &str| match r {
                    "cpu" | "requests.cpu" => req.contains_key("cpu"),
                    "memory" | "requests.memory" => req.contains_key("memory"),
                    "limits.cpu" => lim.contains_key("cpu"),
                    "limits.memory" => lim.contains_key("memory"),
                    _ => true,
                };
                for r in &required {
                    if !has(r) {
                        missing
                            .entry(r)
                            .or_default()
                            .insert(c["name"].as_str().unwrap_or_default().to_string());
                    }
                }
            }
        }
        if missing.is_empty() {
            return None;
        }
        let parts: Vec<String> = missing
            .iter()
            .map(|(r, names)| {
                format!(
                    "{r} for: {}",
                    names.iter().cloned().collect::<Vec<_>>().join(",")
                )
            })
            .collect();
        Some(format!("must specify {}", parts.join("; ")))
    }
}

/// A quota's scope selectors: `spec.scopes` (each an `Exists`), then `spec.scopeSelector`'s.
fn scopes(quota: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = quota["spec"]["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| json!({"scopeName": s, "operator": "Exists"}))
        .collect();
    out.extend(
        quota["spec"]["scopeSelector"]["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .cloned(),
    );
    out
}

/// `a = b` value for value.
fn same(a: &Resources, b: &Resources) -> bool {
    a.len() == b.len() && a.iter().all(|(k, q)| b.get(k).is_some_and(|o| o == q))
}

fn pretty(list: &Resources) -> String {
    list.iter()
        .map(|(k, q)| format!("{k}={q}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn masked(list: &Resources, names: &[&String]) -> Resources {
    list.iter()
        .filter(|(k, _)| names.contains(k))
        .map(|(k, q)| (k.clone(), *q))
        .collect()
}

/// `ResourceQuota` admission of a create (`old = None`) or an update of an object of `info`
/// in namespace `ns`: 403 when a quota refuses it, else every quota it counts against gets its
/// new `status.used` (unless `dry_run`). `name` is the name the request gave (empty for a
/// `generateName`).
pub(crate) fn resource_quota(
    store: &mut Store,
    info: &TypeInfo,
    ns: &str,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
    dry_run: bool,
) -> Result<(), ApiError> {
    if ns.is_empty() {
        return Ok(());
    }
    let eval = Evaluator { info };
    if let Some(old) = old
        && !(eval.pod() && terminating(old) != terminating(obj))
    {
        return Ok(());
    }
    let quotas = in_namespace(store, "resourcequotas", ns);
    if quotas.is_empty() {
        return Ok(());
    }
    let rt = &info.rt;
    let mut interesting = Vec::new();
    for quota in &quotas {
        if !eval.matches(quota, obj) {
            continue;
        }
        let quota_name = super::meta::name_of(quota).to_string();
        let hard = resources(&quota["status"]["hard"]);
        let hard_names: Vec<String> = hard.keys().cloned().collect();
        let restricted = eval.matching(&hard_names);
        if let Some(why) = eval.constraints(&restricted, obj) {
            return Err(forbidden(
                &rt.group,
                &rt.plural,
                name,
                &format!("failed quota: {quota_name}: {why}"),
            ));
        }
        let used = resources(&quota["status"]["used"]);
        if restricted.iter().any(|r| !used.contains_key(r)) {
            let mut names = restricted.clone();
            names.sort();
            return Err(forbidden(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "status unknown for quota: {quota_name}, resources: {}",
                    names.join(",")
                ),
            ));
        }
        interesting.push((quota.clone(), quota_name, hard, used));
    }
    if interesting.is_empty() {
        return Ok(());
    }
    let usage = eval.usage(obj);
    let mut updates = Vec::new();
    for (quota, quota_name, hard, used) in interesting {
        let delta: Resources = match old {
            Some(old) if eval.matches(&quota, old) => {
                let before = eval.usage(old);
                usage
                    .iter()
                    .map(|(k, q)| {
                        let d = before.get(k).map_or(*q, |b| q.sub(*b));
                        (
                            k.clone(),
                            if d.is_negative() { Quantity::zero() } else { d },
                        )
                    })
                    .collect()
            }
            _ => usage.clone(),
        };
        let requested: Resources = delta
            .into_iter()
            .filter(|(k, q)| !q.is_zero() && hard.contains_key(k))
            .collect();
        if requested.is_empty() {
            continue;
        }
        let mut new_used = used.clone();
        add_into(&mut new_used, &requested);
        let exceeded: Vec<&String> = requested
            .keys()
            .filter(|k| matches!((new_used.get(*k), hard.get(*k)), (Some(u), Some(h)) if u > h))
            .collect();
        if !exceeded.is_empty() {
            return Err(forbidden(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
                    pretty(&masked(&requested, &exceeded)),
                    pretty(&masked(&used, &exceeded)),
                    pretty(&masked(&hard, &exceeded)),
                ),
            ));
        }
        if !same(&new_used, &used) {
            updates.push((quota, new_used));
        }
    }
    if dry_run {
        return Ok(());
    }
    let Some(quota_info) = store.registry.resolve("", "v1", "resourcequotas") else {
        return Ok(());
    };
    let opts = WriteOptions {
        field_manager: Some("kube-apiserver".into()),
        ..WriteOptions::default()
    };
    for (quota, new_used) in updates {
        let mut candidate = (*quota).clone();
        let status = candidate
            .as_object_mut()
            .map(|m| m.entry("status").or_insert_with(|| json!({})));
        if let Some(status) = status {
            if !status.is_object() {
                *status = json!({});
            }
            status["used"] = to_json(&new_used);
        }
        finish_update(
            store,
            &quota_info,
            &quota,
            candidate,
            Some("status"),
            &opts,
            Operation::Update,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::{limit_ranger_check, limit_ranger_defaults};

    fn range(default_cpu: &str, max_cpu: &str) -> Arc<serde_json::Value> {
        Arc::new(json!({"spec": {"limits": [{
            "type": "Container",
            "max": {"cpu": max_cpu},
            "default": {"cpu": default_cpu},
            "defaultRequest": {"cpu": default_cpu},
        }]}}))
    }

    #[test]
    fn the_first_limit_range_by_name_gives_its_defaults_and_the_others_check_them() {
        // As `limit_ranges` hands them: by name. kube-apiserver's order varies.
        let ranges = [range("2", "2"), range("1", "1")];
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        limit_ranger_defaults(&ranges, &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "2"}, "requests": {"cpu": "2"}})
        );
        assert_eq!(
            pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
            "LimitRanger plugin set: cpu request for container c; cpu limit for container c"
        );
        let err = limit_ranger_check(&ranges, &pod, "p").unwrap_err();
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
        );
        // The other order: the smaller default, within both.
        let ranges = [range("1", "1"), range("2", "2")];
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        limit_ranger_defaults(&ranges, &mut pod);
        assert!(limit_ranger_check(&ranges, &pod, "p").is_ok());
    }
}
