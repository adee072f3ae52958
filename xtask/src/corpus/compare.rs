//! Normalising and comparing what two servers answered to the same kubectl steps.
//!
//! Normalised, on both sides alike: what a server allocates or stamps and no client chooses
//! (uids, resourceVersions, timestamps, cluster IPs, node ports, kubectl's temporary diff
//! folders). Nothing else: a value only one side has, or that differs once normalised, is a
//! difference.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::definition::{Object, Prepared};
use super::steps::Records;

/// One difference between the two servers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Difference {
    /// The set.
    pub set: String,
    /// The step key (`<mode>/<step>/<phase>`).
    pub step: String,
    /// The file or template and object it concerns (or the kubectl command).
    pub subject: String,
    /// The field path, or `exit code`, `stdout`, `stderr`.
    pub path: String,
    /// The left side's value (`(absent)` when it has none).
    pub left: String,
    /// The right side's value.
    pub right: String,
    /// The kind of difference, for the summary.
    pub class: String,
}

impl Difference {
    /// The report line, naming the two sides.
    pub fn line(&self, left: &str, right: &str) -> String {
        format!(
            "{}/{} [{}]: {}: {left}={} {right}={}",
            self.set, self.subject, self.step, self.path, self.left, self.right
        )
    }
}

const ABSENT: &str = "(absent)";

static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?( ?(Z|[+-]\d\d:?\d\d))?").unwrap()
});
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
});
static IPV4: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b").unwrap());
static TEMP_DIR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"/tmp/(LIVE|MERGED)-\d+").unwrap());
static RESOURCE_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"resourceVersion(\\?"?): *(\\?")\d+(\\?")"#).unwrap());
static NODE_PORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"((?:nodePort|healthCheckNodePort)\\?"?: *)\d+"#).unwrap());

/// A text with what a server allocates or stamps replaced.
pub fn normalise_text(text: &str) -> String {
    let text = TIMESTAMP.replace_all(text, "<time>");
    let text = UUID.replace_all(&text, "<uid>");
    let text = IPV4.replace_all(&text, "<ip>");
    let text = TEMP_DIR.replace_all(&text, "/tmp/$1");
    let text = RESOURCE_VERSION.replace_all(&text, "resourceVersion$1: $2<rv>$3");
    NODE_PORT.replace_all(&text, "$1<port>").into_owned()
}

/// An object with what a server allocates or stamps replaced.
fn normalise_value(key: &str, value: &Value) -> Value {
    match value {
        // Field managers by who they are, not by their place in the list: kube-apiserver
        // keeps no fixed order among them (its own status writer of a CRD comes before or
        // after kubectl's entry from run to run).
        Value::Array(entries) if key == "managedFields" => {
            let mut by_manager = serde_json::Map::new();
            for entry in entries {
                let name = format!(
                    "{} {} {}",
                    entry["manager"].as_str().unwrap_or("?"),
                    entry["operation"].as_str().unwrap_or("?"),
                    entry["subresource"].as_str().unwrap_or("")
                );
                let mut unique = name.trim_end().to_owned();
                let mut n = 1;
                while by_manager.contains_key(&unique) {
                    n += 1;
                    unique = format!("{} #{n}", name.trim_end());
                }
                by_manager.insert(unique, normalise_value("", entry));
            }
            Value::Object(by_manager)
        }
        Value::String(_) if key == "resourceVersion" => Value::String("<rv>".into()),
        Value::Number(_) if key == "nodePort" || key == "healthCheckNodePort" => {
            Value::String("<port>".into())
        }
        Value::String(s) => Value::String(normalise_text(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| normalise_value("", v)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normalise_value(k, v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every leaf of a value by path (empty objects and arrays are leaves).
fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, v) in map {
                let path = if key.contains(['.', '/', ' ']) || key.is_empty() {
                    format!("{prefix}[{key:?}]")
                } else if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&path, v, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, out);
            }
        }
        leaf => {
            out.insert(prefix.to_owned(), leaf.to_string());
        }
    }
}

/// The objects of a JSON output (Lists unrolled), by `kind namespace/name` (a repeated key
/// gets `#n`).
fn objects(stdout: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut add = |mut object: Value| {
        let kind = object["kind"].as_str().unwrap_or("?").to_owned();
        // A CRD's conditions in type order: kube-apiserver's naming, establishing and
        // API-approval controllers each add theirs when they run, so two runs of
        // kube-apiserver list them in different orders (`conditions` is a map keyed by type).
        if kind == "CustomResourceDefinition"
            && let Some(conditions) = object
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
        {
            conditions.sort_by(|a, b| a["type"].as_str().cmp(&b["type"].as_str()));
        }
        let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
        let name = object["metadata"]["name"].as_str().unwrap_or("?");
        let base = format!("{kind} {ns}/{name}");
        let mut key = base.clone();
        let mut n = 1;
        while out.contains_key(&key) {
            n += 1;
            key = format!("{base}#{n}");
        }
        out.insert(key, object);
    };
    for value in serde_json::Deserializer::from_str(stdout).into_iter::<Value>() {
        let Ok(value) = value else { break };
        match value.get("items").and_then(Value::as_array) {
            Some(items) if value["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
                items.iter().cloned().for_each(&mut add)
            }
            _ => add(value),
        }
    }
    out
}

/// Names an object by the file or template it comes from.
struct Labels<'a> {
    by_name: HashMap<(&'a str, &'a str), &'a Object>,
}

impl<'a> Labels<'a> {
    fn new(objects: &'a [Object]) -> Labels<'a> {
        let mut by_name = HashMap::new();
        for object in objects {
            by_name
                .entry((object.kind.as_str(), object.name.as_str()))
                .or_insert(object);
        }
        Labels { by_name }
    }

    fn subject(&self, key: &str) -> String {
        // `Kind ns/name`
        let (kind, rest) = key.split_once(' ').unwrap_or((key, ""));
        let name = rest.rsplit('/').next().unwrap_or(rest);
        let name = name.split('#').next().unwrap_or(name);
        match self.by_name.get(&(kind, name)) {
            Some(object) => format!("{} {kind}/{rest}", object.label),
            None => format!("(no file) {kind}/{rest}"),
        }
    }
}

/// `spec.template.spec.volumes[2].configMap` -> `spec.template.spec.volumes[*].configMap`.
fn class_of(path: &str) -> String {
    static INDEX: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\[\d+\]").unwrap());
    INDEX.replace_all(path, "[*]").into_owned()
}

/// The step's name without mode and phase (`ssa/get/2-objects` -> `get`).
fn step_name(key: &str) -> &str {
    key.split('/').nth(1).unwrap_or(key)
}

/// Every difference between two runs of the same set.
pub fn compare(set: &Prepared, left: &Records, right: &Records) -> Vec<Difference> {
    let labels = Labels::new(&set.objects);
    let right: BTreeMap<&str, _> = right.iter().map(|(k, r)| (k.as_str(), r)).collect();
    let mut out = Vec::new();
    for (key, l) in left {
        let Some(r) = right.get(key.as_str()) else {
            out.push(Difference {
                set: set.name.clone(),
                step: key.clone(),
                subject: "(step)".into(),
                path: "ran".into(),
                left: "yes".into(),
                right: "no".into(),
                class: "step ran on one side".into(),
            });
            continue;
        };
        let diff =
            |subject: String, path: String, lv: String, rv: String, class: String| Difference {
                set: set.name.clone(),
                step: key.clone(),
                subject,
                path,
                left: lv,
                right: rv,
                class,
            };
        let name = step_name(key);
        if l.answer.code != r.answer.code {
            out.push(diff(
                l.command.clone(),
                "exit code".into(),
                l.answer.code.to_string(),
                r.answer.code.to_string(),
                format!("{name}: exit code"),
            ));
        }
        if !l.output_compared {
            continue;
        }
        if l.json {
            let lo = objects(&l.answer.stdout);
            let ro = objects(&r.answer.stdout);
            let keys: std::collections::BTreeSet<&String> = lo.keys().chain(ro.keys()).collect();
            for k in keys {
                let subject = labels.subject(k);
                let kind = k.split(' ').next().unwrap_or("?");
                let (lv, rv) = (lo.get(k), ro.get(k));
                let (Some(lv), Some(rv)) = (lv, rv) else {
                    out.push(diff(
                        subject,
                        "(object)".into(),
                        if lv.is_some() { "present" } else { ABSENT }.into(),
                        if rv.is_some() { "present" } else { ABSENT }.into(),
                        format!("{name}: {kind} returned by one side only"),
                    ));
                    continue;
                };
                let mut lf = BTreeMap::new();
                let mut rf = BTreeMap::new();
                flatten("", &normalise_value("", lv), &mut lf);
                flatten("", &normalise_value("", rv), &mut rf);
                let paths: std::collections::BTreeSet<&String> =
                    lf.keys().chain(rf.keys()).collect();
                for path in paths {
                    let (a, b) = (lf.get(path), rf.get(path));
                    if a != b {
                        out.push(diff(
                            subject.clone(),
                            path.clone(),
                            a.cloned().unwrap_or_else(|| ABSENT.into()),
                            b.cloned().unwrap_or_else(|| ABSENT.into()),
                            format!("{name}: {kind} {}", class_of(path)),
                        ));
                    }
                }
            }
        } else {
            out.extend(text_differences(
                "stdout",
                &l.answer.stdout,
                &r.answer.stdout,
                &|a, b, class| {
                    diff(
                        l.command.clone(),
                        "stdout".into(),
                        a,
                        b,
                        format!("{name}: {class}"),
                    )
                },
            ));
        }
        out.extend(text_differences(
            "stderr",
            &l.answer.stderr,
            &r.answer.stderr,
            &|a, b, class| {
                diff(
                    l.command.clone(),
                    "stderr".into(),
                    a,
                    b,
                    format!("{name}: {class}"),
                )
            },
        ));
    }
    out
}

/// The lines one side printed and the other did not (normalised), paired by their first word
/// (an object's `kind/name` in kubectl's output; the object of a `kubectl diff` block).
fn text_differences(
    stream: &str,
    left: &str,
    right: &str,
    make: &dyn Fn(String, String, String) -> Difference,
) -> Vec<Difference> {
    let lines = |text: &str| -> Vec<(String, String)> {
        let mut block = String::new();
        let mut out = Vec::new();
        for line in normalise_text(text).lines() {
            if let Some(rest) = line.strip_prefix("diff -u -N ") {
                block = rest.rsplit('/').next().unwrap_or(rest).to_owned();
            }
            let subject = if block.is_empty() {
                line.split_whitespace().next().unwrap_or("").to_owned()
            } else {
                block.clone()
            };
            out.push((subject, line.to_owned()));
        }
        out
    };
    let mut l = lines(left);
    let mut r = lines(right);
    let mut out = Vec::new();
    // A `kubectl diff` block one side printed and the other did not is one difference, not
    // one per line (a CRD that exists on one side only is thousands of lines).
    let blocks = |lines: &[(String, String)]| -> BTreeMap<String, usize> {
        let mut blocks = BTreeMap::new();
        for (subject, line) in lines {
            if line.starts_with("diff -u -N ") {
                *blocks.entry(subject.clone()).or_default() += 0;
            }
        }
        for (subject, _) in lines {
            if let Some(n) = blocks.get_mut(subject) {
                *n += 1;
            }
        }
        blocks
    };
    let (lb, rb) = (blocks(&l), blocks(&r));
    for (subject, n) in &lb {
        if !rb.contains_key(subject) {
            out.push(make(
                format!("diff of {subject} ({n} lines)"),
                ABSENT.into(),
                format!("{stream} diff block"),
            ));
        }
    }
    for (subject, n) in &rb {
        if !lb.contains_key(subject) {
            out.push(make(
                ABSENT.into(),
                format!("diff of {subject} ({n} lines)"),
                format!("{stream} diff block"),
            ));
        }
    }
    l.retain(|(subject, _)| !lb.contains_key(subject) || rb.contains_key(subject));
    r.retain(|(subject, _)| !rb.contains_key(subject) || lb.contains_key(subject));
    // Drop the lines both printed (as many times as both printed them).
    let mut counts: HashMap<(String, String), isize> = HashMap::new();
    for line in &l {
        *counts.entry(line.clone()).or_default() += 1;
    }
    for line in &r {
        *counts.entry(line.clone()).or_default() -= 1;
    }
    let mut surplus = counts.clone();
    l.retain(|line| match surplus.get_mut(line) {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    });
    let mut surplus = counts;
    r.retain(|line| match surplus.get_mut(line) {
        Some(n) if *n < 0 => {
            *n += 1;
            true
        }
        _ => false,
    });
    for (subject, line) in l {
        let class = if line.starts_with("Warning:") {
            format!("{stream} warning")
        } else if line.starts_with("Error") || line.starts_with("error") {
            format!("{stream} error")
        } else {
            format!("{stream} line")
        };
        match r
            .iter()
            .position(|(s, _)| *s == subject && !subject.is_empty())
        {
            Some(j) => {
                let (_, other) = r.remove(j);
                out.push(make(line, other, class));
            }
            None => out.push(make(line, ABSENT.into(), class)),
        }
    }
    for (_, line) in r {
        let class = format!("{stream} line");
        out.push(make(ABSENT.into(), line, class));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalising_keeps_what_a_client_chose() {
        let text = "uid: 0a1b2c3d-0000-4000-8000-0123456789ab at 2026-12-04T07:02:18Z \
                    from 10.96.0.12, resourceVersion: \"123\", nodePort: 31234, generation: 2";
        assert_eq!(
            normalise_text(text),
            "uid: <uid> at <time> from <ip>, resourceVersion: \"<rv>\", nodePort: <port>, generation: 2"
        );
    }

    #[test]
    fn a_missing_default_is_a_difference_and_a_new_uid_is_not() {
        let left = serde_json::json!({"kind": "Pod", "metadata": {"name": "p", "uid": "0a1b2c3d-0000-4000-8000-0123456789ab"},
            "spec": {"volumes": [{"configMap": {"name": "c"}}]}});
        let right = serde_json::json!({"kind": "Pod", "metadata": {"name": "p", "uid": "99999999-0000-4000-8000-0123456789ab"},
            "spec": {"volumes": [{"configMap": {"name": "c", "defaultMode": 420}}]}});
        let (mut l, mut r) = (BTreeMap::new(), BTreeMap::new());
        flatten("", &normalise_value("", &left), &mut l);
        flatten("", &normalise_value("", &right), &mut r);
        let differing: Vec<_> = r.keys().filter(|k| l.get(*k) != r.get(*k)).collect();
        assert_eq!(differing, ["spec.volumes[0].configMap.defaultMode"]);
    }

    #[test]
    fn crd_conditions_are_compared_by_type_not_by_place() {
        let condition = |t: &str| serde_json::json!({"type": t, "status": "True"});
        let crd = |conditions: Vec<Value>| {
            serde_json::json!({"kind": "CustomResourceDefinition", "metadata": {"name": "a.b"},
                "status": {"conditions": conditions}})
        };
        let approval = condition("KubernetesAPIApprovalPolicyConformant");
        let names = condition("NamesAccepted");
        let established = condition("Established");
        let first = crd(vec![approval.clone(), names.clone(), established.clone()]);
        let last = crd(vec![names.clone(), established.clone(), approval]);
        let without = crd(vec![names, established]);
        let one = |v: &Value| objects(&v.to_string());
        assert_eq!(one(&first), one(&last));
        assert_ne!(one(&first), one(&without));
        // Other kinds keep their order.
        let mut pod = first.clone();
        pod["kind"] = "Pod".into();
        let mut pod2 = last.clone();
        pod2["kind"] = "Pod".into();
        assert_ne!(one(&pod), one(&pod2));
    }

    #[test]
    fn field_managers_are_compared_by_name_not_by_place() {
        let entry = |manager: &str, fields: Value| {
            serde_json::json!({"manager": manager, "operation": "Update",
                "time": "2026-12-04T07:02:18Z", "fieldsV1": fields})
        };
        let a = serde_json::json!({"metadata": {"managedFields": [
            entry("kubectl", serde_json::json!({"f:data": {}})),
            entry("kube-apiserver", serde_json::json!({"f:status": {}}))]}});
        let b = serde_json::json!({"metadata": {"managedFields": [
            entry("kube-apiserver", serde_json::json!({"f:status": {}})),
            entry("kubectl", serde_json::json!({"f:data": {}}))]}});
        let c = serde_json::json!({"metadata": {"managedFields": [
            entry("kubectl", serde_json::json!({"f:data": {"f:x": {}}}))]}});
        let flat = |v: &Value| {
            let mut out = BTreeMap::new();
            flatten("", &normalise_value("", v), &mut out);
            out
        };
        assert_eq!(flat(&a), flat(&b));
        assert_ne!(flat(&a), flat(&c));
        assert!(
            flat(&c).contains_key("metadata.managedFields[\"kubectl Update\"].fieldsV1.f:data.f:x")
        );
    }

    #[test]
    fn lines_pair_up_by_object() {
        let make = |a: String, b: String, class: String| Difference {
            set: "s".into(),
            step: "k".into(),
            subject: "c".into(),
            path: "stdout".into(),
            left: a,
            right: b,
            class,
        };
        let out = text_differences(
            "stdout",
            "deployment.apps/a unchanged\nservice/b unchanged\n",
            "service/b unchanged\ndeployment.apps/a configured\n",
            &make,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].left, "deployment.apps/a unchanged");
        assert_eq!(out[0].right, "deployment.apps/a configured");
    }
}
