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
//! Covered now: ConfigMaps, Secrets and a custom resource (a CRD with a keyed list, a set, a
//! map and a status subresource), in a fresh namespace per sequence: create, update (PUT, with
//! and without a stale resourceVersion), merge, JSON, strategic and apply patches (several
//! managers, `force`), merge and apply patches of `status`, finalizers and deletes that wait
//! for them, gets, lists with a label selector, and a watch per type from the resourceVersion
//! before the sequence (events compared in order), and a paginated list per type (two items
//! a page, each server following its own continue tokens). Not yet: Deployments (the emulator
//! does not default built-in types), dry runs.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, WatchEvent, WatchParams};
use mcr_envtest::{Backend, TestCluster};
use serde_json::{Map, Value, json};

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

const KEYS: &[&str] = &["a", "b", "c"];
const MANAGERS: &[&str] = &["m1", "m2", "m3"];
const FINALIZER: &str = "fidelity.example.com/hold";

struct Kind {
    name: &'static str,
    plural: &'static str,
    /// `/api/v1` or `/apis/<group>/<version>`.
    api: &'static str,
    api_version: &'static str,
    /// Values of the map the requests edit: `data` for the built-ins, `spec.settings` for
    /// the custom resource.
    values: &'static [&'static str],
    /// The custom resource of [`gadget_crd`]: `spec` with a keyed list, a set and a map, and
    /// a status subresource.
    custom: bool,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "ConfigMap",
        plural: "configmaps",
        api: "/api/v1",
        api_version: "v1",
        values: &["1", "2"],
        custom: false,
    },
    Kind {
        name: "Secret",
        plural: "secrets",
        api: "/api/v1",
        api_version: "v1",
        values: &["MQ==", "Mg=="],
        custom: false,
    },
    Kind {
        name: "Gadget",
        plural: "gadgets",
        api: "/apis/fid.example.com/v1",
        api_version: "fid.example.com/v1",
        values: &["1", "2"],
        custom: true,
    },
];

/// The CustomResourceDefinition of `Gadget`.
fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.fid.example.com"},
        "spec": {
            "group": "fid.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "items": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "size": {"type": "integer"},
                            }},
                        },
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                        "settings": {"type": "object", "additionalProperties": {"type": "string"}},
                    }},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                }}},
            }],
        },
    })
}

/// The map the requests edit: `data`, or a custom resource's `spec` (whose `settings` map
/// plays that part, next to a keyed list and a set).
fn random_content(rng: &mut Rng, kind: &Kind) -> (&'static str, Value) {
    let mut data = Map::new();
    for key in KEYS {
        if rng.chance(50) {
            data.insert((*key).into(), json!(rng.pick(kind.values)));
        }
    }
    if !kind.custom {
        return ("data", Value::Object(data));
    }
    let mut spec = Map::new();
    spec.insert("settings".into(), Value::Object(data));
    let mut items = Vec::new();
    for name in ["a", "b"] {
        if rng.chance(50) {
            items.push(json!({"name": name, "size": rng.below(2) + 1}));
        }
    }
    if !items.is_empty() || rng.chance(20) {
        spec.insert("items".into(), Value::Array(items));
    }
    let mut tags = Vec::new();
    for tag in ["x", "y"] {
        if rng.chance(50) {
            tags.push(json!(tag));
        }
    }
    if !tags.is_empty() {
        spec.insert("tags".into(), Value::Array(tags));
    }
    ("spec", Value::Object(spec))
}

/// Where a key of the edited map lives, as a JSON pointer.
fn map_pointer(kind: &Kind, key: &str) -> String {
    if kind.custom {
        format!("/spec/settings/{key}")
    } else {
        format!("/data/{key}")
    }
}

/// A patch body setting one key of the edited map (`null` removes it).
fn map_patch(kind: &Kind, key: &str, value: Value) -> Value {
    if kind.custom {
        json!({"spec": {"settings": {key: value}}})
    } else {
        json!({"data": {key: value}})
    }
}

fn random_labels(rng: &mut Rng) -> Value {
    let mut labels = Map::new();
    if rng.chance(50) {
        labels.insert("tier".into(), json!(rng.pick(&["web", "db"])));
    }
    if rng.chance(30) {
        labels.insert("team".into(), json!("x"));
    }
    Value::Object(labels)
}

/// The requests of sequence `index`: a namespace, then `steps` random writes and reads on two
/// ConfigMaps and two Secrets in it, then a list per type.
fn generate(rng: &mut Rng, index: usize, steps: usize) -> (String, Vec<Req>) {
    let ns = format!("fid-{index}");
    let mut reqs = vec![Req {
        op: "create Namespace".into(),
        object: format!("namespaces/{ns}"),
        method: http::Method::POST,
        path: "/api/v1/namespaces".into(),
        content_type: "application/json",
        body: Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
    }];
    for _ in 0..steps {
        let kind = rng.pick(KINDS);
        let name = *rng.pick(&["o1", "o2"]);
        let collection = format!("{}/namespaces/{ns}/{}", kind.api, kind.plural);
        let item = format!("{collection}/{name}");
        let object = format!("{}/{name}", kind.plural);
        let whole = |rng: &mut Rng| {
            let (field, content) = random_content(rng, kind);
            json!({
                "apiVersion": kind.api_version, "kind": kind.name,
                "metadata": {"name": name, "labels": random_labels(rng)},
                field: content,
            })
        };
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
        let r = match rng.below(if kind.custom { 13 } else { 11 }) {
            0 | 1 => req(
                "create",
                http::Method::POST,
                &collection,
                "application/json",
                Some(whole(rng)),
            ),
            2 => {
                let mut body = whole(rng);
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
                let key = *rng.pick(KEYS);
                let value = if rng.chance(30) {
                    Value::Null
                } else {
                    json!(rng.pick(kind.values))
                };
                let mut body = map_patch(kind, key, value);
                body["metadata"] = json!({"labels": random_labels(rng)});
                req(
                    "merge-patch",
                    http::Method::PATCH,
                    &item,
                    "application/merge-patch+json",
                    Some(body),
                )
            }
            4 => {
                let key = *rng.pick(KEYS);
                let path = map_pointer(kind, key);
                let op = match rng.below(3) {
                    0 => json!({"op": "add", "path": path, "value": rng.pick(kind.values)}),
                    1 => json!({"op": "remove", "path": path}),
                    _ => json!({"op": "test", "path": path, "value": rng.pick(kind.values)}),
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
                let (field, content) = random_content(rng, kind);
                let body = json!({"metadata": {"labels": random_labels(rng)}, field: content});
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
                let mut body = whole(rng);
                if rng.chance(30) {
                    let map = body.as_object_mut().unwrap();
                    map.remove("data");
                    map.remove("spec");
                }
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
            9 => req(
                "delete",
                http::Method::DELETE,
                &item,
                "application/json",
                None,
            ),
            10 => req("get", http::Method::GET, &item, "application/json", None),
            11 => {
                let body = json!({"status": {"phase": rng.pick(&["Ready", "Busy"])}});
                req(
                    "status-patch",
                    http::Method::PATCH,
                    &format!("{item}/status"),
                    "application/merge-patch+json",
                    Some(body),
                )
            }
            _ => {
                let manager = rng.pick(MANAGERS);
                let body = json!({
                    "apiVersion": kind.api_version, "kind": kind.name, "metadata": {"name": name},
                    "status": {"phase": rng.pick(&["Ready", "Busy"])},
                });
                req(
                    "status-apply",
                    http::Method::PATCH,
                    &format!("{item}/status?fieldManager={manager}"),
                    "application/apply-patch+yaml",
                    Some(body),
                )
            }
        };
        reqs.push(r);
    }
    for kind in KINDS {
        reqs.push(Req {
            op: format!("list {}", kind.name),
            object: String::new(),
            method: http::Method::GET,
            path: format!(
                "{}/namespaces/{ns}/{}?labelSelector=tier%3Dweb",
                kind.api, kind.plural
            ),
            content_type: "application/json",
            body: None,
        });
    }
    (ns, reqs)
}

/// A list two items per page, following the server's continue tokens: each page's code and
/// normalised body (`continue` removed), and the number of requests.
async fn paginate(client: &kube::Client, path: &str) -> (Vec<Value>, usize) {
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let mut uri = format!("{path}?limit=2");
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

fn normalize_in_place(v: &mut Value) {
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
            causes.sort_by_key(|c| c.to_string());
        }
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
            "fidelity: {} sequences, {} requests and {} watch events per server, {} divergences outside the accepted list",
            self.sequences,
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

/// A watch on one type in one namespace from a resourceVersion, collected until the object
/// `marker` appears.
async fn collect_watch(
    client: &kube::Client,
    ar: &ApiResource,
    ns: &str,
    rv: &str,
    marker: &str,
) -> Vec<Value> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    let mut stream = api
        .watch(&WatchParams::default().timeout(25), rv)
        .await
        .unwrap()
        .boxed();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + WATCH_DEADLINE;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        let Ok(Some(Ok(event))) = next else {
            panic!(
                "the watch on {} in {ns} ended before the marker {marker}",
                ar.plural
            );
        };
        let (kind, object) = match event {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        };
        if object.metadata.name.as_deref() == Some(marker) {
            return events;
        }
        events.push(
            json!({"type": kind, "object": normalize(&serde_json::to_value(&object).unwrap())}),
        );
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
        body: Some(gadget_crd()),
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
    let gadgets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("fid.example.com", "v1", "Gadget"),
        "gadgets",
    );
    let types = [
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<Secret>(&()),
        gadgets,
    ];
    for client in [&a, &b] {
        install_crd(client).await;
    }
    for index in 0..sequences {
        let (ns, reqs) = generate(&mut rng, index, steps);
        // Watches from the resourceVersion each server has before the sequence.
        let start = |client: kube::Client| async move {
            let (_, list) = send(
                &client,
                &Req {
                    op: String::new(),
                    object: String::new(),
                    method: http::Method::GET,
                    path: "/api/v1/namespaces".into(),
                    content_type: "application/json",
                    body: None,
                },
            )
            .await;
            list["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("0")
                .to_string()
        };
        let (rv_a, rv_b) = (start(a.clone()).await, start(b.clone()).await);
        let mut watches = Vec::new();
        for ar in &types {
            let marker = format!("zz-end-{index}");
            let wa = tokio::spawn({
                let (c, ar, ns, rv, m) = (
                    a.clone(),
                    ar.clone(),
                    ns.clone(),
                    rv_a.clone(),
                    marker.clone(),
                );
                async move { collect_watch(&c, &ar, &ns, &rv, &m).await }
            });
            let wb = tokio::spawn({
                let (c, ar, ns, rv, m) = (
                    b.clone(),
                    ar.clone(),
                    ns.clone(),
                    rv_b.clone(),
                    marker.clone(),
                );
                async move { collect_watch(&c, &ar, &ns, &rv, &m).await }
            });
            watches.push((ar.kind.clone(), wa, wb));
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
        // Every object of each type, two per page, following each server's own continue
        // tokens.
        for kind in KINDS {
            let path = format!("{}/namespaces/{ns}/{}", kind.api, kind.plural);
            let (x, n) = paginate(&a, &path).await;
            let (y, _) = paginate(&b, &path).await;
            report.requests += n;
            let (x, y) = (Value::Array(x), Value::Array(y));
            if let Some(pointer) = first_difference(&x, &y, String::new()) {
                let op = format!("paginate {}", kind.name);
                report.record(accepted, signature(&op, &pointer), || {
                    format!(
                        "seed {seed}, sequence {index}: pages of {path} differ at {pointer}\nemulator: {x}\nother:    {y}"
                    )
                });
            }
        }
        // End markers, then the event sequences.
        for kind in KINDS {
            let marker = Req {
                op: String::new(),
                object: String::new(),
                method: http::Method::POST,
                path: format!("{}/namespaces/{ns}/{}", kind.api, kind.plural),
                content_type: "application/json",
                body: Some(json!({
                    "apiVersion": kind.api_version, "kind": kind.name,
                    "metadata": {"name": format!("zz-end-{index}")},
                })),
            };
            let (ca, _) = send(&a, &marker).await;
            let (cb, _) = send(&b, &marker).await;
            assert_eq!((ca, cb), (201, 201), "creating the end marker in {ns}");
        }
        for (kind, wa, wb) in watches {
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
    let report = run(&ours, &theirs, 7, 5, 40, &[]).await;
    report.print(&[]);
    assert!(report.requests >= 5 * (1 + 40 + 2 * KINDS.len()));
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
