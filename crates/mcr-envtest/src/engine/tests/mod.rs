//! Engine tests: they drive the public `Engine` API directly (the transport's tests cover HTTP).

use serde_json::{Value, json};

use super::*;

mod crud;
mod lifecycle;
mod lists;
mod patches;
mod watches;

const NS: Option<&str> = Some("default");

fn rt(engine: &Engine, group: &str, version: &str, plural: &str) -> ResourceType {
    engine
        .resolve(group, version, plural)
        .unwrap_or_else(|| panic!("{group}/{version}/{plural} not served"))
}

fn cms(engine: &Engine) -> ResourceType {
    rt(engine, "", "v1", "configmaps")
}

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

fn opts() -> WriteOptions {
    WriteOptions::default()
}

fn managed(manager: &str) -> WriteOptions {
    WriteOptions {
        field_manager: Some(manager.to_string()),
        ..WriteOptions::default()
    }
}

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("resourceVersion")
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn create_ns(engine: &Engine, name: &str) -> Value {
    let nss = rt(engine, "", "v1", "namespaces");
    engine
        .create(&nss, None, json!({"metadata": {"name": name}}), &opts())
        .expect("create namespace")
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}}}
    })
}

fn widget_crd(scope: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": scope,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    })
}

fn install_widgets(engine: &Engine) -> ResourceType {
    let crds = rt(
        engine,
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
    );
    engine
        .create(&crds, None, widget_crd("Namespaced"), &opts())
        .expect("create CRD");
    rt(engine, "example.com", "v1", "widgets")
}
