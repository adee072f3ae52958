//! Decoder tests over bytes built by a tiny encoder that writes what Go's encoder writes
//! (every value field, zero or not; pointers only when set).

use serde_json::json;

use super::*;

/// A message under construction.
#[derive(Default, Clone)]
struct Enc(Vec<u8>);

impl Enc {
    fn varint(mut self, mut v: u64) -> Self {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(byte);
                return self;
            }
            self.0.push(byte | 0x80);
        }
    }
    fn tag(self, number: u32, wire: u8) -> Self {
        self.varint((u64::from(number) << 3) | u64::from(wire))
    }
    fn int(self, number: u32, v: i64) -> Self {
        self.tag(number, 0).varint(v as u64)
    }
    fn bytes(self, number: u32, b: &[u8]) -> Self {
        let mut e = self.tag(number, 2).varint(b.len() as u64);
        e.0.extend_from_slice(b);
        e
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    fn str(self, number: u32, s: &str) -> Self {
        self.bytes(number, s.as_bytes())
    }
    fn msg(self, number: u32, m: Enc) -> Self {
        self.bytes(number, &m.0)
    }
    fn entry(self, number: u32, key: &str, value: &[u8]) -> Self {
        self.msg(number, Enc::default().str(1, key).bytes(2, value))
    }
}

/// ObjectMeta as Go writes it for a new object: every string field, even empty.
fn meta(name: &str, namespace: &str) -> Enc {
    Enc::default()
        .str(1, name)
        .str(2, "")
        .str(3, namespace)
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .int(7, 0)
        .msg(8, Enc::default())
}

/// `k8s\0` + runtime.Unknown.
fn envelope(api_version: &str, kind: &str, raw: &Enc) -> Vec<u8> {
    let type_meta = Enc::default().str(1, api_version).str(2, kind);
    let unknown = Enc::default()
        .msg(1, type_meta)
        .msg(2, raw.clone())
        .str(3, "")
        .str(4, "");
    [MAGIC, &unknown.0].concat()
}

fn api_error(body: &[u8]) -> ApiError {
    ApiError::from(decode(body).unwrap_err())
}

#[test]
fn configmap() {
    let meta = meta("settings", "default")
        .entry(11, "app", b"demo")
        .entry(12, "note", b"")
        .str(14, "example.com/keep")
        .msg(
            13,
            Enc::default()
                .str(1, "Deployment")
                .str(3, "web")
                .str(4, "u-1")
                .str(5, "apps/v1")
                .int(6, 1),
        );
    let raw = Enc::default()
        .msg(1, meta)
        .entry(2, "a", b"1")
        .entry(2, "b", b"")
        .entry(3, "bin", &[0, 159, 146, 150])
        .int(4, 0)
        // an unknown field of every wire type is skipped
        .int(90, 7)
        .str(91, "x")
        .tag(92, 1)
        .raw(&[1; 8])
        .tag(93, 5)
        .raw(&[1; 4]);
    let object = decode(&envelope("v1", "ConfigMap", &raw)).unwrap();
    assert_eq!(
        object,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "settings",
                "namespace": "default",
                "labels": {"app": "demo"},
                "annotations": {"note": ""},
                "finalizers": ["example.com/keep"],
                "ownerReferences": [{
                    "kind": "Deployment", "name": "web", "uid": "u-1",
                    "apiVersion": "apps/v1", "controller": true
                }],
            },
            "data": {"a": "1", "b": ""},
            "binaryData": {"bin": "AJ+Slg=="},
            "immutable": false,
        })
    );
}

#[test]
fn secret_namespace_serviceaccount() {
    let raw = Enc::default()
        .msg(1, meta("creds", ""))
        .entry(2, "token", b"s3cret")
        .str(3, "Opaque");
    let object = decode(&envelope("v1", "Secret", &raw)).unwrap();
    assert_eq!(object["data"], json!({"token": "czNjcmV0"}));
    assert_eq!(object["type"], "Opaque");
    assert_eq!(object["metadata"], json!({"name": "creds"}));
    assert!(object.get("immutable").is_none());

    let raw = Enc::default()
        .msg(1, meta("team-a", ""))
        .msg(2, Enc::default().str(1, "kubernetes"))
        .msg(3, Enc::default().str(1, "Active"));
    let object = decode(&envelope("v1", "Namespace", &raw)).unwrap();
    assert_eq!(
        object,
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a"},
            "spec": {"finalizers": ["kubernetes"]},
        })
    );

    let raw = Enc::default()
        .msg(1, meta("robot", "default"))
        .msg(3, Enc::default().str(1, "pull"))
        .int(4, 0);
    let object = decode(&envelope("v1", "ServiceAccount", &raw)).unwrap();
    assert_eq!(object["imagePullSecrets"], json!([{"name": "pull"}]));
    assert_eq!(object["automountServiceAccountToken"], false);
}

#[test]
fn deployment() {
    let labels = || Enc::default().entry(1, "app", b"web");
    let container = Enc::default()
        .str(1, "nginx")
        .str(2, "nginx:1")
        .str(3, "sleep")
        .str(3, "1")
        .msg(
            6,
            Enc::default().str(1, "").int(2, 0).int(3, 80).str(4, "TCP"),
        )
        .msg(
            8,
            Enc::default().entry(1, "cpu", &Enc::default().str(1, "100m").0),
        )
        .str(13, "")
        .int(16, 0);
    let template = Enc::default()
        .msg(1, meta("", "").entry(11, "app", b"web"))
        .msg(2, Enc::default().msg(2, container).str(3, ""));
    let rolling = Enc::default()
        .msg(1, Enc::default().int(1, 0).int(2, -1))
        .msg(2, Enc::default().int(1, 1).str(3, "25%"));
    let spec = Enc::default()
        .int(1, 0)
        .msg(2, labels())
        .msg(3, template)
        .msg(4, Enc::default().str(1, "").msg(2, rolling))
        .int(5, 0)
        .int(7, 0);
    let raw = Enc::default()
        .msg(
            1,
            meta("web", "default").msg(8, Enc::default().int(1, 1_700_000_000)),
        )
        .msg(2, spec)
        .msg(3, Enc::default());
    let object = decode(&envelope("apps/v1", "Deployment", &raw)).unwrap();
    assert_eq!(
        object,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "default",
                "creationTimestamp": "2023-11-14T22:13:20Z",
            },
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "nginx", "image": "nginx:1",
                        "command": ["sleep", "1"],
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "100m"}},
                    }]},
                },
                "strategy": {"rollingUpdate": {"maxUnavailable": -1, "maxSurge": "25%"}},
            },
        })
    );
}

#[test]
fn other_kinds_are_unsupported_media() {
    let raw = Enc::default().msg(1, meta("p", "default"));
    let err = api_error(&envelope("v1", "Pod", &raw));
    assert_eq!(err.code, 415);
    assert!(err.message.contains("Pod"), "{}", err.message);
    assert!(err.message.contains("kubectl create -f"), "{}", err.message);
    assert_eq!(api_error(&envelope("apps/v1", "ConfigMap", &raw)).code, 415);

    let gzip = Enc::default()
        .msg(1, Enc::default().str(1, "v1").str(2, "ConfigMap"))
        .str(3, "gzip");
    assert_eq!(api_error(&[MAGIC, &gzip.0].concat()).code, 415);
    let json = Enc::default()
        .msg(1, Enc::default().str(1, "v1").str(2, "ConfigMap"))
        .str(4, "application/json");
    assert_eq!(api_error(&[MAGIC, &json.0].concat()).code, 415);
}

#[test]
fn malformed_bodies_are_bad_requests() {
    let good = envelope("v1", "ConfigMap", &Enc::default().msg(1, meta("x", "")));
    assert!(decode(&good).is_ok());
    // Every truncation of a valid body is rejected or decodes, never panics.
    for len in 0..good.len() {
        if let Err(err) = decode(&good[..len]) {
            assert_eq!(ApiError::from(err).code, 400, "prefix of {len} bytes");
        }
    }
    let cases: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"{\"kind\":\"ConfigMap\"}".to_vec(),
        [MAGIC, &[0x0a, 0x7f]].concat(),
        envelope("", "", &Enc::default()),
        // metadata as a varint
        envelope("v1", "ConfigMap", &Enc::default().int(1, 3)),
        // data value that is not UTF-8
        envelope(
            "v1",
            "ConfigMap",
            &Enc::default().entry(2, "a", &[0xff, 0xfe]),
        ),
        // a map entry that is not a message
        envelope("v1", "Secret", &Enc::default().bytes(2, &[0xff])),
        // a creation time far out of range
        envelope(
            "v1",
            "ConfigMap",
            &Enc::default().msg(1, Enc::default().msg(8, Enc::default().int(1, i64::MAX))),
        ),
    ];
    for body in cases {
        assert_eq!(api_error(&body).code, 400, "{body:?}");
    }
}
