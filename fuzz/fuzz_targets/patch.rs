//! mcr-envtest's merge, JSON and strategic merge patches. First byte: patch type; then the
//! current object (JSON), a NUL, and the patch body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let (current, body) = match rest.iter().position(|b| *b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (&[][..], rest),
    };
    let current: Value = serde_json::from_slice(current).unwrap_or_else(|_| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "p", "namespace": "default", "labels": { "a": "b" } },
            "spec": { "containers": [{ "name": "c", "image": "i", "ports": [{ "containerPort": 80 }] }] },
        })
    });
    mcr_envtest::fuzz::patch(&current, kind, body);
});
