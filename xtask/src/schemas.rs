//! `cargo xtask schemas`: writes `crates/mcr-envtest/src/engine/schema/kubernetes.json`, the one
//! schema source of the emulator (its OpenAPI documents, field ownership, defaults and the way
//! values are written back), from two facts of the Kubernetes release the real backend runs:
//!
//! - the OpenAPI v3 documents a kube-apiserver with its default APIs serves: every GA
//!   group-version, the groups, `/api`, `/apis` and `/version` (`api/openapi-spec/v3` in the
//!   `k8s.io/kubernetes` module): types, formats, `required`, `default`s, `enum`s and the
//!   `x-kubernetes-*` extensions. Descriptions are dropped (no prose is copied). The
//!   `DeleteOptions` and `WatchEvent` definitions lose their per-document
//!   `x-kubernetes-group-version-kind` list, which the server writes for each document;
//! - how Go's `encoding/json` writes each struct (`xtask/schemas`, a small Go program run
//!   with `go run`: field order, `omitempty`, `omitzero`, pointer or value), which the
//!   documents do not say and which decides what kube-apiserver leaves out of an object.
//!
//! The version is the `k8s.io/kubernetes` requirement of `xtask/assets/kubernetes/go.mod`;
//! `xtask/schemas/go.mod` must require the matching `k8s.io/api` release. The output has one
//! definition per line, keys sorted, so a new release shows as a readable diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};

use crate::assets;

/// Where the table is written, from the workspace root.
const OUTPUT: &str = "crates/mcr-envtest/src/engine/schema/kubernetes.json";

/// Definitions whose group-version-kind list names every group-version of the document that
/// holds them (the server writes it per document).
const PER_DOCUMENT: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
];

/// Generates the table.
pub fn run() -> Result<()> {
    assets::go_version()?;
    let root = super::workspace_root();
    let kube_mod = std::fs::read_to_string(root.join("xtask/assets/kubernetes/go.mod"))
        .context("reading xtask/assets/kubernetes/go.mod")?;
    let kube_version = assets::required_version(&kube_mod, "k8s.io/kubernetes")?;
    let api_version = assets::staging_version(&kube_version)?;
    let program = root.join("xtask").join("schemas");
    let program_mod =
        std::fs::read_to_string(program.join("go.mod")).context("reading xtask/schemas/go.mod")?;
    let required = assets::required_version(&program_mod, "k8s.io/api")?;
    if required != api_version {
        bail!(
            "xtask/schemas/go.mod requires k8s.io/api {required}, but Kubernetes {kube_version} \
             is k8s.io/api {api_version}: update it"
        );
    }
    let spec_dir = module_dir(&format!("k8s.io/kubernetes@{kube_version}"))?
        .join("api")
        .join("openapi-spec")
        .join("v3");
    let definitions = definitions(&spec_dir)?;
    let go = go_encodings(&program)?;
    let mut encodings = BTreeMap::new();
    for (name, schema) in &definitions {
        if schema.get("properties").is_none() {
            continue;
        }
        let Some(fields) = go.get(name) else {
            bail!("{name} has properties but the Go program found no struct of that name");
        };
        let properties = schema["properties"].as_object().map(Map::len).unwrap_or(0);
        let named = fields.as_array().map(Vec::len).unwrap_or(0);
        if properties != named {
            bail!("{name}: {properties} OpenAPI properties but {named} Go fields");
        }
        encodings.insert(name.clone(), fields.clone());
    }
    let mut out = format!("{{\"kubernetes\":{:?},\n\"definitions\":{{\n", kube_version);
    write_lines(&mut out, &definitions)?;
    out.push_str("},\n\"go\":{\n");
    write_lines(&mut out, &encodings)?;
    out.push_str("}}\n");
    let path = root.join(OUTPUT);
    assets::write(&path, &out)?;
    eprintln!(
        "wrote {} ({} definitions, {} structs, {} KiB) from Kubernetes {kube_version}",
        path.display(),
        definitions.len(),
        encodings.len(),
        out.len() / 1024
    );
    Ok(())
}

fn write_lines(out: &mut String, entries: &BTreeMap<String, Value>) -> Result<()> {
    let last = entries.len().saturating_sub(1);
    for (i, (name, value)) in entries.iter().enumerate() {
        out.push_str(&serde_json::to_string(name)?);
        out.push(':');
        out.push_str(&serde_json::to_string(&sorted(value))?);
        out.push_str(if i == last { "\n" } else { ",\n" });
    }
    Ok(())
}

/// A value with its object keys sorted (whatever serde_json's map keeps).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let ordered: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The directory of a downloaded module (`go mod download -json`).
fn module_dir(module: &str) -> Result<PathBuf> {
    let out = assets::go_output(&["mod", "download", "-json", module])?;
    let info: Value = serde_json::from_str(&out).context("parsing `go mod download -json`")?;
    info["Dir"]
        .as_str()
        .map(PathBuf::from)
        .with_context(|| format!("`go mod download -json {module}` reported no directory"))
}

/// Whether a document file is one a kube-apiserver with its default APIs serves: a GA
/// group-version (`api__v1_openapi.json`, `apis__apps__v1_openapi.json`), a group
/// (`apis__apps_openapi.json`), `/api`, `/apis` or `/version`; not a `v1beta1` one.
fn served_document(file: &str) -> bool {
    let Some(stem) = file.strip_suffix("_openapi.json") else {
        return false;
    };
    let parts: Vec<&str> = stem.split("__").collect();
    match parts.as_slice() {
        ["api" | "apis" | "version"] => true,
        ["apis", _group] => true,
        ["api", version] | ["apis", _, version] => version
            .strip_prefix('v')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        _ => false,
    }
}

/// Every definition of the GA documents, without descriptions; a definition two documents
/// hold must be the same in both.
fn definitions(dir: &std::path::Path) -> Result<BTreeMap<String, Value>> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| served_document(f))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no OpenAPI documents in {}", dir.display());
    }
    let mut all: BTreeMap<String, Value> = BTreeMap::new();
    for file in &files {
        let text =
            std::fs::read_to_string(dir.join(file)).with_context(|| format!("reading {file}"))?;
        let doc: Value = serde_json::from_str(&text).with_context(|| format!("parsing {file}"))?;
        let Some(schemas) = doc
            .pointer("/components/schemas")
            .and_then(Value::as_object)
        else {
            bail!("{file} has no components.schemas");
        };
        for (name, schema) in schemas {
            let mut schema = strip(schema);
            if PER_DOCUMENT.contains(&name.as_str())
                && let Some(map) = schema.as_object_mut()
            {
                map.remove("x-kubernetes-group-version-kind");
            }
            match all.get(name) {
                Some(seen) if *seen != schema => bail!("{name} differs between documents ({file})"),
                Some(_) => {}
                None => {
                    all.insert(name.clone(), schema);
                }
            }
        }
    }
    Ok(all)
}

/// A schema without its `description`s (property names are kept, even `description`).
fn strip(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let value = match key.as_str() {
            "description" => continue,
            "properties" => Value::Object(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            "items" | "additionalProperties" | "not" => strip(value),
            "allOf" | "oneOf" | "anyOf" => {
                Value::Array(value.as_array().into_iter().flatten().map(strip).collect())
            }
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

/// What `xtask/schemas` prints: struct definition name to `[[json name, code], ...]`.
fn go_encodings(program: &std::path::Path) -> Result<Map<String, Value>> {
    let out = assets::go_command()
        .args(["run", "."])
        .current_dir(program)
        .output()
        .context("could not start go")?;
    if !out.status.success() {
        bail!(
            "`go run .` failed in {} ({}):\n{}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let value: Value =
        serde_json::from_slice(&out.stdout).context("parsing the output of xtask/schemas")?;
    match value {
        Value::Object(map) => Ok(map),
        _ => bail!("xtask/schemas printed no JSON object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_documents() {
        assert!(served_document("api__v1_openapi.json"));
        assert!(served_document("apis__autoscaling__v2_openapi.json"));
        assert!(served_document("apis__apps_openapi.json"));
        assert!(served_document("api_openapi.json"));
        assert!(served_document("version_openapi.json"));
        assert!(!served_document(
            "apis__resource.k8s.io__v1beta2_openapi.json"
        ));
        assert!(!served_document("openid__v1__jwks_openapi.json"));
        assert!(!served_document("logs_openapi.json"));
    }

    #[test]
    fn strip_keeps_a_property_named_description() {
        let s = serde_json::json!({"description": "x", "properties": {"description": {"type": "string", "description": "y"}}});
        assert_eq!(
            strip(&s),
            serde_json::json!({"properties": {"description": {"type": "string"}}})
        );
    }
}
