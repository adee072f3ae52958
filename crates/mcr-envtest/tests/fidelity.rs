//! The differential check behind `cargo xtask fidelity`: the same seeded request sequences go
//! to the emulator and to a second server, and every answer (status code and body with
//! volatile fields normalised) and every watch event must match.
//!
//! - `differential_check_against_kube_apiserver` (ignored; `cargo xtask fidelity` runs it)
//!   compares the emulator with a real kube-apiserver. Known divergences are listed, each with
//!   its reason, in `tests/fidelity-accepted.json`; any other fails the run and is printed with
//!   a minimal repro.
//! - `generated_sequences_agree_between_two_emulators` runs the same machinery emulator against
//!   emulator, so the normalisation is checked on every `cargo test`.
//!
//! What is drawn: every kind the emulator's discovery serves that has a row in
//! `fidelity/kinds.rs` (the check fails on a served kind with neither a row nor a reason not
//! to draw it), except the rows still `PENDING` unless `MCR_FIDELITY_ALL=1`. Each sequence
//! draws three kinds in a fresh namespace: creates, updates (some with a stale
//! resourceVersion), merge, JSON, strategic and apply patches (several managers, `force`),
//! finalizers and deletes that wait for them, gets, the kind's subresource requests, invalid
//! objects, then a labelled list, a paginated list (two items a page, each server following
//! its own continue tokens) and a watch per kind from the resourceVersion before the sequence
//! (events compared in order).

use std::time::Duration;

use mcr_envtest::{Backend, TestCluster};
use serde_json::{Map, Value, json};

#[path = "fidelity/kinds.rs"]
mod kinds;

/// Bound on waiting for a watch to deliver the end marker.
const WATCH_DEADLINE: Duration = Duration::from_secs(30);

/// splitmix64: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// One request of a sequence.
#[derive(Clone, Debug)]
struct Req {
    /// What it does, for reports and accepted-divergence signatures: `apply ConfigMap`.
    op: String,
    /// `configmaps/o1`: requests on other objects are left out of a repro.
    object: String,
    method: http::Method,
    path: String,
    content_type: &'static str,
    body: Option<Value>,
}

impl std::fmt::Display for Req {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        if let Some(body) = &self.body {
            write!(f, " ({}) {body}", self.content_type)?;
        }
        Ok(())
    }
}

const MANAGERS: &[&str] = &["m1", "m2", "m3"];
const FINALIZER: &str = "fidelity.example.com/hold";
/// Kinds whose `DELETE` orphans dependents unless told otherwise. kube-apiserver marks such an
/// object with the `orphan` finalizer, which the garbage collector of kube-controller-manager
/// removes; a kube-apiserver alone keeps the object forever, while the emulator's collector
/// removes it at once. Their deletes are drawn with `propagationPolicy=Background`.
const ORPHAN_BY_DEFAULT: &[&str] = &["Job", "ReplicationController"];
/// Kinds whose `DELETE` waits for a kubelet: kube-apiserver keeps a bound Pod terminating
/// for its grace period until the kubelet confirms, and no kubelet runs; the emulator, which
/// runs no kubelet either, removes it at once. Their deletes are drawn with
/// `gracePeriodSeconds=0`, which removes the Pod at once on both.
const DELETED_WITHOUT_GRACE: &[&str] = &["Pod"];
/// Kinds drawn in one sequence (watched, listed and paginated at its end).
const KINDS_PER_SEQUENCE: usize = 3;

/// A drawn kind as the emulator's discovery serves it, with its row of [`kinds::rows`].
struct Kind {
    name: String,
    plural: String,
    /// `/api/v1` or `/apis/<group>/<version>`.
    api: String,
    api_version: String,
    namespaced: bool,
    row: kinds::Row,
}

impl Kind {
    /// The collection path in sequence namespace `ns`.
    fn collection(&self, ns: &str) -> String {
        if self.namespaced {
            format!("{}/namespaces/{ns}/{}", self.api, self.plural)
        } else {
            format!("{}/{}", self.api, self.plural)
        }
    }

    /// An object name: cluster-scoped objects carry the sequence's namespace in theirs.
    fn object_name(&self, ns: &str, name: &str) -> String {
        if self.namespaced {
            name.to_string()
        } else {
            format!("{ns}-{name}")
        }
    }
}

/// Every kind the emulator serves that has a row, from its discovery; panics on a served kind
/// with neither a row nor a reason in [`kinds::NOT_DRAWN`].
async fn served_kinds(client: &kube::Client, all_kinds: bool) -> Vec<Kind> {
    let get = |path: String| {
        let client = client.clone();
        async move {
            let req = Req {
                op: String::new(),
                object: String::new(),
                method: http::Method::GET,
                path,
                content_type: "application/json",
                body: None,
            };
            let (code, body) = send(&client, &req).await;
            assert_eq!(code, 200, "discovery: {body}");
            body
        }
    };
    let mut lists = vec![("/api/v1".to_string(), "v1".to_string(), String::new())];
    let groups = get("/apis".into()).await;
    for g in groups["groups"].as_array().into_iter().flatten() {
        let gv = g["preferredVersion"]["groupVersion"]
            .as_str()
            .unwrap_or_default();
        let group = g["name"].as_str().unwrap_or_default().to_string();
        lists.push((format!("/apis/{gv}"), gv.to_string(), group));
    }
    let mut rows: Vec<Option<kinds::Row>> = kinds::rows().into_iter().map(Some).collect();
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for (api, api_version, group) in lists {
        let list = get(api.clone()).await;
        for r in list["resources"].as_array().into_iter().flatten() {
            let plural = r["name"].as_str().unwrap_or_default();
            let kind = r["kind"].as_str().unwrap_or_default();
            if plural.contains('/') {
                continue;
            }
            let row = rows.iter_mut().find(|row| {
                row.as_ref()
                    .is_some_and(|row| row.group == group && row.kind == kind)
            });
            let pending = kinds::PENDING
                .iter()
                .any(|(g, k, _)| *g == group && *k == kind);
            match row.and_then(Option::take) {
                Some(_) if pending && !all_kinds => {}
                Some(row) => out.push(Kind {
                    name: kind.to_string(),
                    plural: plural.to_string(),
                    api: api.clone(),
                    api_version: api_version.clone(),
                    namespaced: r["namespaced"].as_bool().unwrap_or(false),
                    row,
                }),
                None if kinds::NOT_DRAWN
                    .iter()
                    .any(|(g, k, _)| *g == group && *k == kind) => {}
                None => missing.push(format!("{group}/{kind}")),
            }
        }
    }
    assert!(
        missing.is_empty(),
        "served kinds without a row in tests/fidelity/kinds.rs or a reason in NOT_DRAWN: {missing:?}"
    );
    let unserved: Vec<&str> = rows
        .iter()
        .flatten()
        .map(|r| r.kind)
        .filter(|k| !kinds::PENDING.iter().any(|(_, p, _)| p == k))
        .collect();
    assert!(
        unserved.is_empty(),
        "rows of kinds not served: {unserved:?}"
    );
    out
}

/// Sets the field at JSON pointer `ptr` (creating objects on the way); `null` removes it.
fn set_field(obj: &mut Value, ptr: &str, value: Value) {
    let mut at = obj;
    let parts: Vec<&str> = ptr.split('/').skip(1).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match at {
            Value::Array(items) => {
                let index: usize = part.parse().expect("an array index");
                if last {
                    if value.is_null() {
                        items.remove(index);
                    } else {
                        items[index] = value;
                    }
                    return;
                }
                at = &mut items[index];
            }
            _ => {
                if !at.is_object() {
                    *at = json!({});
                }
                let map = at.as_object_mut().unwrap();
                if last {
                    if value.is_null() {
                        map.remove(*part);
                    } else {
                        map.insert(part.to_string(), value);
                    }
                    return;
                }
                at = map.entry(part.to_string()).or_insert(json!({}));
            }
        }
    }
}

/// A merge patch that sets `ptr` in `full` to what it is there: objects down the pointer, and
/// a list on the way whole (merge patches replace lists).
fn patch_for(full: &Value, ptr: &str, value: &Value) -> Value {
    let parts: Vec<&str> = ptr.split('/').skip(1).collect();
    fn build(full: &Value, parts: &[&str], value: &Value) -> Value {
        match parts.split_first() {
            None => value.clone(),
            Some((part, rest)) => match full.get(*part) {
                Some(Value::Array(items)) if !rest.is_empty() => {
                    json!({*part: items})
                }
                Some(inner) => json!({*part: build(inner, rest, value)}),
                None => json!({*part: build(&Value::Null, rest, value)}),
            },
        }
    }
    build(full, &parts, value)
}

fn random_labels(rng: &mut Rng, ns: &str) -> Value {
    let mut labels = Map::new();
    labels.insert("fid".into(), json!(ns));
    if rng.chance(50) {
        labels.insert("tier".into(), json!(rng.pick(&["web", "db"])));
    }
    if rng.chance(30) {
        labels.insert("team".into(), json!("x"));
    }
    Value::Object(labels)
}

/// Replaces the name placeholder in a body.
fn with_name(body: &Value, name: &str) -> Value {
    match body {
        Value::String(s) if s == kinds::NAME => json!(name),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), with_name(v, name)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| with_name(v, name)).collect()),
        other => other.clone(),
    }
}

/// A whole object of `kind` named `name`, each field drawn.
fn whole(rng: &mut Rng, kind: &Kind, ns: &str, name: &str) -> Value {
    let mut obj = kind.row.body.clone();
    let map = obj.as_object_mut().unwrap();
    map.insert("apiVersion".into(), json!(kind.api_version));
    map.insert("kind".into(), json!(kind.name));
    map.insert(
        "metadata".into(),
        json!({"name": name, "labels": random_labels(rng, ns)}),
    );
    for (ptr, values) in &kind.row.fields {
        if rng.chance(60) {
            set_field(&mut obj, ptr, rng.pick(values).clone());
        }
    }
    obj
}

/// The requests of sequence `index`: a namespace, then `steps` random writes and reads on two
/// objects of each of a few kinds, then a list per kind.
fn generate(
    rng: &mut Rng,
    all: &[Kind],
    index: usize,
    steps: usize,
) -> (String, Vec<usize>, Vec<Req>) {
    let ns = format!("fid-{index}");
    let mut chosen: Vec<usize> = Vec::new();
    while chosen.len() < KINDS_PER_SEQUENCE.min(all.len()) {
        let k = rng.below(all.len());
        if !chosen.contains(&k) {
            chosen.push(k);
        }
    }
    let mut reqs = vec![Req {
        op: "create Namespace".into(),
        object: format!("namespaces/{ns}"),
        method: http::Method::POST,
        path: "/api/v1/namespaces".into(),
        content_type: "application/json",
        body: Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
    }];
    for _ in 0..steps {
        let kind = &all[*rng.pick(&chosen)];
        let base: &&str = rng.pick(&["o1", "o2"]);
        let base = if kinds::ONE_PER_NAMESPACE.contains(&kind.name.as_str()) {
            "o1"
        } else {
            base
        };
        let name = kind.object_name(&ns, base);
        let collection = kind.collection(&ns);
        let item = format!("{collection}/{name}");
        let object = format!("{}/{name}", kind.plural);
        let req =
            |op: &str, method: http::Method, path: &str, ct: &'static str, body: Option<Value>| {
                Req {
                    op: format!("{op} {}", kind.name),
                    object: object.clone(),
                    method,
                    path: path.to_string(),
                    content_type: ct,
                    body,
                }
            };
        let row = &kind.row;
        let r = match rng.below(14) {
            0 | 1 => req(
                "create",
                http::Method::POST,
                &collection,
                "application/json",
                Some(whole(rng, kind, &ns, &name)),
            ),
            2 => {
                let mut body = whole(rng, kind, &ns, &name);
                if rng.chance(50) {
                    // A stale resourceVersion: a conflict on both, or 404.
                    body["metadata"]["resourceVersion"] = json!("1");
                }
                req(
                    "update",
                    http::Method::PUT,
                    &item,
                    "application/json",
                    Some(body),
                )
            }
            3 => {
                let full = whole(rng, kind, &ns, &name);
                let (ptr, values) = rng.pick(&row.fields);
                let value = rng.pick(values).clone();
                let mut body = patch_for(&full, ptr, &value);
                body["metadata"]["labels"] = random_labels(rng, &ns);
                req(
                    "merge-patch",
                    http::Method::PATCH,
                    &item,
                    "application/merge-patch+json",
                    Some(body),
                )
            }
            4 => {
                let (ptr, values) = rng.pick(&row.fields);
                let value = rng.pick(values).clone();
                // `null` is a removal; a typed field set to `null` by a JSON patch becomes its
                // zero value on kube-apiserver (a Go decoding detail no client relies on).
                let op = match (rng.below(3), value.is_null()) {
                    (_, true) => json!({"op": "remove", "path": ptr}),
                    (0, false) => json!({"op": "add", "path": ptr, "value": value}),
                    (1, false) => json!({"op": "replace", "path": ptr, "value": value}),
                    _ => json!({"op": "test", "path": ptr, "value": value}),
                };
                req(
                    "json-patch",
                    http::Method::PATCH,
                    &item,
                    "application/json-patch+json",
                    Some(json!([op])),
                )
            }
            5 => {
                let full = whole(rng, kind, &ns, &name);
                let (ptr, values) = rng.pick(&row.fields);
                let value = rng.pick(values).clone();
                let mut body = patch_for(&full, ptr, &value);
                body["metadata"]["labels"] = random_labels(rng, &ns);
                req(
                    "strategic-patch",
                    http::Method::PATCH,
                    &item,
                    "application/strategic-merge-patch+json",
                    Some(body),
                )
            }
            6 | 7 => {
                let manager = rng.pick(MANAGERS);
                let force = if rng.chance(30) { "&force=true" } else { "" };
                let body = whole(rng, kind, &ns, &name);
                req(
                    "apply",
                    http::Method::PATCH,
                    &format!("{item}?fieldManager={manager}{force}"),
                    "application/apply-patch+yaml",
                    Some(body),
                )
            }
            8 => {
                let finalizers = if rng.chance(50) {
                    json!([FINALIZER])
                } else {
                    Value::Null
                };
                let body = json!({"metadata": {"finalizers": finalizers}});
                req(
                    "finalizers",
                    http::Method::PATCH,
                    &item,
                    "application/merge-patch+json",
                    Some(body),
                )
            }
            9 => {
                // Kinds whose deletes orphan by default get `Background`: kube-apiserver
                // implements orphaning with a finalizer that only kube-controller-manager's
                // garbage collector removes (see ORPHAN_BY_DEFAULT).
                let mut policy =
                    if ORPHAN_BY_DEFAULT.contains(&kind.name.as_str()) || rng.chance(30) {
                        "?propagationPolicy=Background".to_string()
                    } else {
                        String::new()
                    };
                if DELETED_WITHOUT_GRACE.contains(&kind.name.as_str()) {
                    policy.push(if policy.is_empty() { '?' } else { '&' });
                    policy.push_str("gracePeriodSeconds=0");
                }
                req(
                    "delete",
                    http::Method::DELETE,
                    &format!("{item}{policy}"),
                    "application/json",
                    None,
                )
            }
            10 => req("get", http::Method::GET, &item, "application/json", None),
            11 | 12 if !row.subs.is_empty() => {
                let sub = rng.pick(&row.subs);
                let body = (!sub.bodies.is_empty()).then(|| {
                    let body = with_name(rng.pick(&sub.bodies), &name);
                    if sub.whole {
                        let mut obj = whole(rng, kind, &ns, &name);
                        for (k, v) in body.as_object().unwrap() {
                            obj[k] = v.clone();
                        }
                        obj
                    } else {
                        body
                    }
                });
                let manager = if sub.content_type.starts_with("application/apply") {
                    format!("?fieldManager={}", rng.pick(MANAGERS))
                } else {
                    String::new()
                };
                req(
                    sub.op,
                    sub.method.clone(),
                    &format!("{item}/{}{manager}", sub.sub),
                    sub.content_type,
                    body,
                )
            }
            _ => {
                // An invalid object: a bad name, or a shape kube-apiserver refuses.
                let mut body = whole(rng, kind, &ns, &name);
                if row.invalid.is_empty() || rng.chance(30) {
                    let bad = *rng.pick(&["Bad_Name", "-x", "a.b"]);
                    // `a.b` is a valid name for most kinds: not a second object of a kind drawn
                    // once per namespace.
                    let bad =
                        if bad == "a.b" && kinds::ONE_PER_NAMESPACE.contains(&kind.name.as_str()) {
                            "Bad_Name"
                        } else {
                            bad
                        };
                    body["metadata"]["name"] = json!(bad);
                } else {
                    let (ptr, value) = rng.pick(&row.invalid);
                    set_field(&mut body, ptr, value.clone());
                }
                req(
                    "create-invalid",
                    http::Method::POST,
                    &collection,
                    "application/json",
                    Some(body),
                )
            }
        };
        reqs.push(r);
    }
    for &k in &chosen {
        let kind = &all[k];
        reqs.push(Req {
            op: format!("list {}", kind.name),
            object: String::new(),
            method: http::Method::GET,
            path: format!(
                "{}?labelSelector=fid%3D{ns},tier%3Dweb",
                kind.collection(&ns)
            ),
            content_type: "application/json",
            body: None,
        });
    }
    (ns, chosen, reqs)
}

/// A list two items per page, following the server's continue tokens: each page's code and
/// normalised body (`continue` removed), and the number of requests.
async fn paginate(client: &kube::Client, path: &str) -> (Vec<Value>, usize) {
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut uri = format!("{path}{sep}limit=2");
        if !token.is_empty() {
            uri.push_str(&format!("&continue={token}"));
        }
        let req = Req {
            op: String::new(),
            object: String::new(),
            method: http::Method::GET,
            path: uri,
            content_type: "application/json",
            body: None,
        };
        let (code, body) = send(client, &req).await;
        token = body["metadata"]["continue"]
            .as_str()
            .unwrap_or("")
            .to_string();
        pages.push(json!([code, normalize(&body)]));
        if token.is_empty() || code != 200 || pages.len() > 10 {
            return (pages.clone(), pages.len());
        }
    }
}

/// One answer: status code and JSON body.
async fn send(client: &kube::Client, req: &Req) -> (u16, Value) {
    let body = req
        .body
        .as_ref()
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let http_req = http::Request::builder()
        .method(req.method.clone())
        .uri(&req.path)
        .header(http::header::CONTENT_TYPE, req.content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .unwrap();
    let res = client.send(http_req.map(Into::into)).await.unwrap();
    let code = res.status().as_u16();
    let bytes = res.into_body().collect_bytes().await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The body without what legitimately differs between two servers: resourceVersions, uids,
/// timestamps (also those in `managedFields`).
fn normalize(value: &Value) -> Value {
    let mut v = value.clone();
    normalize_in_place(&mut v);
    v
}

/// Values random by nature, anywhere in a body: a Service's cluster IPs (each server
/// allocates from its own range), a Job's controller-uid labels (the Job's uid), a
/// TokenRequest's token, and timestamps.
fn normalize_random(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match (k.as_str(), &mut *v) {
                    ("clusterIP", Value::String(s)) if s != "None" => *s = "<ip>".into(),
                    ("clusterIPs", Value::Array(ips)) => ips
                        .iter_mut()
                        .filter(|ip| *ip != "None")
                        .for_each(|ip| *ip = json!("<ip>")),
                    ("controller-uid" | "batch.kubernetes.io/controller-uid", Value::String(s)) => {
                        *s = "<uid>".into()
                    }
                    ("token", Value::String(s)) if s.len() > 40 => *s = "<token>".into(),
                    (_, v) => normalize_random(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_random),
        Value::String(s) if is_timestamp(s) => *s = "<time>".into(),
        _ => {}
    }
}

/// `2026-11-27T15:07:21Z`, with or without fractional seconds.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[b.len() - 1] == b'Z'
        && b[..4].iter().all(u8::is_ascii_digit)
}

/// What follows the first line of a forbidden Pod update's message: kube-apiserver appends a
/// diff of its internal Go structs, which the emulator does not reproduce (it names the changed
/// fields instead).
fn drop_struct_diff(message: &mut String) {
    if message.contains("pod updates may not change fields other than")
        && let Some(at) = message.find('\n')
    {
        message.truncate(at);
    }
}

fn normalize_in_place(v: &mut Value) {
    normalize_random(v);
    let Some(map) = v.as_object_mut() else {
        return;
    };
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "continue",
            "remainingItemCount",
        ] {
            meta.remove(field);
        }
        if meta.contains_key("deletionTimestamp") {
            meta.insert("deletionTimestamp".into(), json!("<time>"));
        }
        if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
            for e in entries.iter_mut() {
                if let Some(e) = e.as_object_mut() {
                    e.remove("time");
                }
            }
            // Entries are ordered by their times, so their order goes with them.
            entries.sort_by_key(|e| e.to_string());
        }
    }
    if let Some(Value::Array(items)) = map.get_mut("items") {
        items.iter_mut().for_each(normalize_in_place);
    }
    if map.get("kind") == Some(&json!("Status"))
        && let Some(details) = map.get_mut("details").and_then(Value::as_object_mut)
    {
        details.remove("uid");
        // kube-apiserver lists apply conflicts manager by manager in Go map order (random
        // between two identical requests); the message sorts them, the causes do not.
        if let Some(Value::Array(causes)) = details.get_mut("causes") {
            for cause in causes.iter_mut() {
                if let Some(Value::String(m)) = cause.get_mut("message") {
                    drop_struct_diff(m);
                }
            }
            causes.sort_by_key(|c| c.to_string());
        }
    }
    if map.get("kind") == Some(&json!("Status"))
        && let Some(Value::String(m)) = map.get_mut("message")
    {
        drop_struct_diff(m);
    }
}

/// The JSON pointer of the first place two values differ.
fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, format!("{at}/{k}")),
                _ => Some(format!("{at}/{k}")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, format!("{at}/{i}"))),
        _ if a == b => None,
        _ => Some(if at.is_empty() { "/".into() } else { at }),
    }
}

/// Where the two answers differ: `/code`, or a JSON pointer into the body.
fn difference(ours: &(u16, Value), theirs: &(u16, Value)) -> Option<String> {
    if ours.0 != theirs.0 {
        return Some("/code".into());
    }
    first_difference(&normalize(&ours.1), &normalize(&theirs.1), String::new())
}

/// A divergence that the accepted list explains.
struct Accepted {
    signature: String,
    reason: String,
}

fn accepted_list() -> Vec<Accepted> {
    let text = include_str!("fidelity-accepted.json");
    let entries: Vec<Value> =
        serde_json::from_str(text).expect("tests/fidelity-accepted.json is JSON");
    entries
        .into_iter()
        .map(|e| Accepted {
            signature: e["signature"].as_str().expect("signature").to_string(),
            reason: e["reason"].as_str().expect("reason").to_string(),
        })
        .collect()
}

/// Indexes in `(array index)` positions of a pointer become `*`, so one entry covers every item.
fn signature(op: &str, pointer: &str) -> String {
    let parts: Vec<String> = pointer
        .split('/')
        .map(|p| {
            if p.parse::<usize>().is_ok() {
                "*".to_string()
            } else {
                p.to_string()
            }
        })
        .collect();
    format!("{op} {}", parts.join("/"))
}

/// What one run found.
#[derive(Default)]
struct Report {
    sequences: usize,
    /// Kinds drawn from.
    kinds: usize,
    requests: usize,
    events: usize,
    divergences: Vec<String>,
    accepted: std::collections::BTreeMap<String, usize>,
}

impl Report {
    fn record(&mut self, accepted: &[Accepted], sig: String, repro: impl FnOnce() -> String) {
        match accepted.iter().find(|a| sig.starts_with(&a.signature)) {
            Some(a) => *self.accepted.entry(a.signature.clone()).or_default() += 1,
            None => self.divergences.push(format!("{sig}\n{}", repro())),
        }
    }

    fn print(&self, accepted: &[Accepted]) {
        println!(
            "fidelity: {} sequences over {} kinds, {} requests and {} watch events per server, {} divergences outside the accepted list",
            self.sequences,
            self.kinds,
            self.requests,
            self.events,
            self.divergences.len()
        );
        for (sig, n) in &self.accepted {
            let reason = accepted
                .iter()
                .find(|a| &a.signature == sig)
                .map(|a| a.reason.as_str())
                .unwrap_or("");
            println!("  accepted x{n}: {sig} ({reason})");
        }
        for (i, d) in self.divergences.iter().enumerate() {
            println!("--- divergence {}: {d}", i + 1);
        }
    }
}

/// A watch on one collection (`path`) from a resourceVersion, read line by line until the
/// object `marker` appears; on a cluster-scoped type, only events of objects whose names start
/// with `ns-` are kept.
async fn collect_watch(
    client: &kube::Client,
    path: &str,
    namespaced: bool,
    ns: &str,
    rv: &str,
    marker: &str,
) -> Vec<Value> {
    use http_body_util::BodyExt;
    let prefix = format!("{ns}-");
    let uri = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=25");
    let req = http::Request::get(&uri).body(Vec::new()).unwrap();
    let res = client.send(req.map(Into::into)).await.unwrap();
    assert_eq!(res.status(), 200, "watching {uri}");
    let mut body = res.into_body();
    let mut buffer: Vec<u8> = Vec::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + WATCH_DEADLINE;
    loop {
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                panic!(
                    "a watch line of {uri} is not JSON ({e}): {}",
                    String::from_utf8_lossy(&line)
                )
            });
            let kind = event["type"].as_str().unwrap_or_default().to_string();
            let object = &event["object"];
            assert!(
                matches!(kind.as_str(), "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK"),
                "watch {uri}: {event}"
            );
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            if kind == "BOOKMARK" || (!namespaced && name != marker && !name.starts_with(&prefix)) {
                continue;
            }
            if name == marker {
                return events;
            }
            events.push(json!({"type": kind, "object": normalize(object)}));
        }
        let frame = tokio::time::timeout_at(deadline, body.frame()).await;
        match frame {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    buffer.extend_from_slice(&data);
                }
            }
            _ => panic!("the watch {uri} ended before the marker {marker}"),
        }
    }
}

/// Creates the `Gadget` CRD and waits until it is served.
async fn install_crd(client: &kube::Client) {
    let req = Req {
        op: String::new(),
        object: String::new(),
        method: http::Method::POST,
        path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".into(),
        content_type: "application/json",
        body: Some(kinds::gadget_crd()),
    };
    let (code, out) = send(client, &req).await;
    assert_eq!(code, 201, "creating the CRD: {out}");
    let list = Req {
        method: http::Method::GET,
        path: "/apis/fid.example.com/v1/gadgets".into(),
        body: None,
        ..req
    };
    let deadline = tokio::time::Instant::now() + WATCH_DEADLINE;
    while send(client, &list).await.0 != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CRD was not served in time"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Watch events without a MODIFIED that repeats the previous event of the same object.
fn without_repeats(events: &[Value]) -> Vec<Value> {
    let mut last: std::collections::HashMap<String, Value> = Default::default();
    let mut out = Vec::new();
    for e in events {
        let name = e["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let repeat = e["type"] == "MODIFIED" && last.get(&name) == Some(&e["object"]);
        last.insert(name, e["object"].clone());
        if !repeat {
            out.push(e.clone());
        }
    }
    out
}

/// A request with no report fields.
fn plain(method: http::Method, path: String, body: Option<Value>) -> Req {
    Req {
        op: String::new(),
        object: String::new(),
        method,
        path,
        content_type: "application/json",
        body,
    }
}

/// Runs `sequences` sequences of `steps` random requests from `seed` against both clusters.
async fn run(
    ours: &TestCluster,
    theirs: &TestCluster,
    seed: u64,
    sequences: usize,
    steps: usize,
    accepted: &[Accepted],
) -> Report {
    let mut rng = Rng(seed);
    let mut report = Report::default();
    let (a, b) = (ours.client(), theirs.client());
    for client in [&a, &b] {
        install_crd(client).await;
    }
    let only = std::env::var("MCR_FIDELITY_KINDS").ok();
    let mut all = served_kinds(&a, env_or("MCR_FIDELITY_ALL", 0u8) == 1 || only.is_some()).await;
    // `MCR_FIDELITY_KINDS=Pod,Service`: only these kinds (pending ones included), to rerun
    // one kind's sequences while fixing it.
    if let Some(only) = only {
        let only: Vec<&str> = only.split(',').map(str::trim).collect();
        all.retain(|k| only.contains(&k.name.as_str()));
        assert!(!all.is_empty(), "MCR_FIDELITY_KINDS names no drawn kind");
    }
    report.kinds = all.len();
    for index in 0..sequences {
        let (ns, chosen, reqs) = generate(&mut rng, &all, index, steps);
        // Watches from the resourceVersion each server has before the sequence.
        let start = |client: kube::Client| async move {
            let (_, list) = send(
                &client,
                &plain(http::Method::GET, "/api/v1/namespaces".into(), None),
            )
            .await;
            list["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("0")
                .to_string()
        };
        let (rv_a, rv_b) = (start(a.clone()).await, start(b.clone()).await);
        let marker = |kind: &Kind| kind.object_name(&ns, &format!("zz-end-{index}"));
        let mut watches = Vec::new();
        for &k in &chosen {
            let kind = &all[k];
            let spawn = |client: &kube::Client, rv: &str| {
                let (c, ar, namespaced, ns, rv, m) = (
                    client.clone(),
                    kind.collection(&ns),
                    kind.namespaced,
                    ns.clone(),
                    rv.to_string(),
                    marker(kind),
                );
                tokio::spawn(async move { collect_watch(&c, &ar, namespaced, &ns, &rv, &m).await })
            };
            watches.push((kind.name.clone(), spawn(&a, &rv_a), spawn(&b, &rv_b)));
        }
        for (i, req) in reqs.iter().enumerate() {
            let (x, y) = (send(&a, req).await, send(&b, req).await);
            report.requests += 1;
            if let Some(pointer) = difference(&x, &y) {
                report.record(accepted, signature(&req.op, &pointer), || {
                    let steps: Vec<String> = reqs[..=i]
                        .iter()
                        .filter(|r| r.object == req.object || r.object.starts_with("namespaces/") || req.object.is_empty())
                        .map(|r| format!("  {r}"))
                        .collect();
                    format!(
                        "seed {seed}, sequence {index}, request {i}: {} differs\nrepro:\n{}\nemulator: {} {}\nother:    {} {}",
                        pointer,
                        steps.join("\n"),
                        x.0,
                        normalize(&x.1),
                        y.0,
                        normalize(&y.1)
                    )
                });
            }
        }
        // Every object of each kind, two per page, following each server's own continue
        // tokens.
        for &k in &chosen {
            let kind = &all[k];
            let path = format!("{}?labelSelector=fid%3D{ns}", kind.collection(&ns));
            let (x, n) = paginate(&a, &path).await;
            let (y, _) = paginate(&b, &path).await;
            report.requests += n;
            // Objects of other sequences share a cluster-scoped collection, and kube-apiserver
            // fills a page before filtering it by label, so its pages may hold fewer items than
            // the limit: there only the items, in order, are compared.
            let flat = |pages: Vec<Value>| {
                if kind.namespaced {
                    return Value::Array(pages);
                }
                let items: Vec<Value> = pages
                    .iter()
                    .flat_map(|p| p[1]["items"].as_array().cloned().unwrap_or_default())
                    .collect();
                Value::Array(items)
            };
            let (x, y) = (flat(x), flat(y));
            if let Some(pointer) = first_difference(&x, &y, String::new()) {
                let op = format!("paginate {}", kind.name);
                report.record(accepted, signature(&op, &pointer), || {
                    format!(
                        "seed {seed}, sequence {index}: pages of {path} differ at {pointer}\nemulator: {x}\nother:    {y}"
                    )
                });
            }
        }
        // End markers, then the event sequences. Those of the kinds drawn once per namespace
        // come last, so that no other request meets a second one (see ONE_PER_NAMESPACE).
        let mut unmarked: Vec<String> = Vec::new();
        let mut marked = chosen.clone();
        marked.sort_by_key(|&k| kinds::ONE_PER_NAMESPACE.contains(&all[k].name.as_str()));
        for &k in &marked {
            let kind = &all[k];
            let mut body = kind.row.body.clone();
            body["apiVersion"] = json!(kind.api_version);
            body["kind"] = json!(kind.name);
            body["metadata"] = json!({"name": marker(kind)});
            let req = plain(http::Method::POST, kind.collection(&ns), Some(body));
            let (x, y) = (send(&a, &req).await, send(&b, &req).await);
            if (x.0, y.0) == (201, 201) {
                continue;
            }
            // A marker refused (a Pod beyond a quota the sequence left full): that kind's
            // watches have no end, and their events are not compared. Both servers must
            // refuse it alike.
            unmarked.push(kind.name.clone());
            if let Some(pointer) = difference(&x, &y) {
                let op = format!("end-marker {}", kind.name);
                report.record(accepted, signature(&op, &pointer), || {
                    format!(
                        "seed {seed}, sequence {index}: the end marker of {} differs at {pointer}\nemulator: {} {}\nother:    {} {}",
                        kind.name,
                        x.0,
                        normalize(&x.1),
                        y.0,
                        normalize(&y.1)
                    )
                });
            }
        }
        for (kind, wa, wb) in watches {
            if unmarked.contains(&kind) {
                wa.abort();
                wb.abort();
                continue;
            }
            let (ea, eb) = (wa.await.unwrap(), wb.await.unwrap());
            report.events += ea.len();
            let pointer = if ea.len() != eb.len() && without_repeats(&ea) == without_repeats(&eb) {
                // The same changes, one side writing an object again without a change.
                Some(if ea.len() > eb.len() {
                    "/repeated MODIFIED on the emulator".to_string()
                } else {
                    "/repeated MODIFIED on the other server".to_string()
                })
            } else {
                first_difference(
                    &Value::Array(ea.clone()),
                    &Value::Array(eb.clone()),
                    String::new(),
                )
            };
            let (ea, eb) = (Value::Array(ea), Value::Array(eb));
            if let Some(pointer) = pointer {
                report.record(accepted, signature(&format!("watch {kind}"), &pointer), || {
                    let all: Vec<String> = reqs.iter().map(|r| format!("  {r}")).collect();
                    format!(
                        "seed {seed}, sequence {index}: watch events differ at {pointer}\nrequests:\n{}\nemulator: {ea}\nother:    {eb}",
                        all.join("\n")
                    )
                });
            }
        }
        report.sequences += 1;
    }
    report
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test]
async fn generated_sequences_agree_between_two_emulators() {
    let ours = TestCluster::start_on(Backend::Emulator, "fid-a")
        .await
        .unwrap();
    let theirs = TestCluster::start_on(Backend::Emulator, "fid-b")
        .await
        .unwrap();
    let report = run(
        &ours,
        &theirs,
        env_or("MCR_FIDELITY_SEED", 7),
        env_or("MCR_FIDELITY_SEQUENCES", 5),
        env_or("MCR_FIDELITY_STEPS", 40),
        &[],
    )
    .await;
    report.print(&[]);
    assert!(report.requests >= 5 * (1 + 40 + 2 * KINDS_PER_SEQUENCE));
    assert!(report.events > 0, "the watches saw nothing");
    assert!(report.divergences.is_empty(), "two emulators diverged");
}

/// `cargo xtask fidelity`: the emulator against kube-apiserver (`MCR_FIDELITY_SEED`,
/// `MCR_FIDELITY_SEQUENCES`, `MCR_FIDELITY_STEPS`).
#[tokio::test]
#[ignore = "needs kube-apiserver and etcd; run by `cargo xtask fidelity`"]
async fn differential_check_against_kube_apiserver() {
    let seed = env_or("MCR_FIDELITY_SEED", 1u64);
    let sequences = env_or("MCR_FIDELITY_SEQUENCES", 20usize);
    let steps = env_or("MCR_FIDELITY_STEPS", 40usize);
    let accepted = accepted_list();
    let ours = TestCluster::start_on(Backend::Emulator, "fidelity")
        .await
        .unwrap();
    let theirs = TestCluster::start_on(Backend::Real, "fidelity")
        .await
        .unwrap();
    let report = run(&ours, &theirs, seed, sequences, steps, &accepted).await;
    report.print(&accepted);
    assert!(
        report.divergences.is_empty(),
        "{} divergences outside tests/fidelity-accepted.json (seed {seed})",
        report.divergences.len()
    );
}
