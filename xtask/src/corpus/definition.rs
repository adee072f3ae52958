//! The corpus definition (`xtask/corpus/sets.json`) and the manifests it names: each set's Go
//! module downloaded through the module proxy (`go mod download`, checked against the pinned
//! go.sum hash), rendered (Helm charts, kustomizations) and split into the phases kubectl
//! applies in order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// The phases of a set, applied in this order (deleted in the reverse one): namespaces, then
/// CRDs (waited for until established), then everything else.
pub const PHASES: &[&str] = &["0-namespaces", "1-crds", "2-objects"];

/// `xtask/corpus/sets.json`.
#[derive(Debug, Deserialize)]
pub struct Definition {
    /// The sets, run in this order.
    pub sets: Vec<Set>,
}

/// One set of manifests from one Go module.
#[derive(Debug, Deserialize)]
pub struct Set {
    /// The set's name (its objects without a namespace go to `corpus-<name>`).
    pub name: String,
    /// The Go module that holds the manifests.
    pub module: String,
    /// Its version, pinned.
    pub version: String,
    /// Its go.sum hash (`h1:...`), checked after the download.
    pub sum: String,
    /// Where the manifests are in the module.
    pub sources: Vec<Source>,
    /// Steps that exit non-zero on kube-apiserver: `<mode>/<step>/<phase>` to the exit code.
    #[serde(default)]
    pub expect: BTreeMap<String, i32>,
}

/// Manifests inside a module: plain files, a Helm chart, or a kustomization.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Source {
    /// Files (a path ending in `/`: the `.yaml`, `.yml` and `.json` files directly in it).
    Files {
        /// Paths inside the module.
        files: Vec<String>,
    },
    /// A chart folder rendered with `helm template`.
    Helm {
        /// The chart's folder inside the module.
        helm: String,
        /// The release name.
        release: String,
        /// `--set` pairs.
        #[serde(default)]
        values: BTreeMap<String, String>,
    },
    /// A kustomization folder rendered with `kubectl kustomize`.
    Kustomize {
        /// The folder inside the module.
        kustomize: String,
    },
}

/// Reads the definition.
pub fn load(path: &Path) -> Result<Definition> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// What a document says it is (enough to name it in a report).
#[derive(Debug, Default, Deserialize)]
struct Head {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Option<HeadMeta>,
    #[serde(default)]
    items: Option<Vec<Head>>,
}

#[derive(Debug, Default, Deserialize)]
struct HeadMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

/// One object of the corpus, with the file (or template) it comes from.
#[derive(Debug, Clone)]
pub struct Object {
    /// Where it comes from: a path in the module, or a chart template.
    pub label: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
}

/// A set ready to run: its files by phase, in a folder of its own.
#[derive(Debug)]
pub struct Prepared {
    /// The set's name.
    pub name: String,
    /// The folder holding one subfolder per phase.
    pub dir: PathBuf,
    /// The namespace of objects that name none.
    pub namespace: String,
    /// Namespaces the objects name and the set does not create: made before the set runs.
    pub namespaces: Vec<String>,
    /// Phases that have files, in order.
    pub phases: Vec<&'static str>,
    /// Every object, in the order of the files.
    pub objects: Vec<Object>,
    /// Steps expected to exit non-zero on kube-apiserver.
    pub expect: BTreeMap<String, i32>,
}

/// The namespace of a set's objects that name none.
pub fn namespace_of(set: &str) -> String {
    format!("corpus-{set}")
}

/// Downloads, renders and splits one set into `dir/<set>/<phase>/`.
pub fn prepare(set: &Set, tools: &Tools, dir: &Path) -> Result<Prepared> {
    let module = download(&set.module, &set.version, &set.sum).with_context(|| {
        format!(
            "set {}: the module {}@{}",
            set.name, set.module, set.version
        )
    })?;
    let namespace = namespace_of(&set.name);
    let mut documents: Vec<(String, String)> = Vec::new();
    for source in &set.sources {
        documents.extend(
            render(source, &module, &namespace, tools)
                .with_context(|| format!("set {}: rendering {source:?}", set.name))?,
        );
    }
    let out = dir.join(&set.name);
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    // One file per source file (or template) and phase, numbered in the corpus order, so
    // `kubectl -f <phase folder>` visits them in that order.
    let mut files: BTreeMap<(&'static str, usize), (String, String)> = BTreeMap::new();
    let mut labels: Vec<String> = Vec::new();
    let mut objects = Vec::new();
    let mut created_namespaces = BTreeSet::new();
    let mut named_namespaces = BTreeSet::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (label, text) in &documents {
        let index = match labels.iter().position(|l| l == label) {
            Some(index) => index,
            None => {
                labels.push(label.clone());
                labels.len() - 1
            }
        };
        let head: Head = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).unwrap_or_default()
        } else {
            serde_saphyr::from_str(text).unwrap_or_default()
        };
        let phase = match (head.api_version.as_deref(), head.kind.as_deref()) {
            (Some("v1"), Some("Namespace")) => PHASES[0],
            (Some(v), Some("CustomResourceDefinition"))
                if v.starts_with("apiextensions.k8s.io/") =>
            {
                PHASES[1]
            }
            _ => PHASES[2],
        };
        let items = match head.items {
            Some(items) => items,
            None => vec![head],
        };
        for item in items {
            let (Some(kind), Some(meta)) = (item.kind, item.metadata) else {
                continue;
            };
            let Some(name) = meta.name else { continue };
            if kind == "Namespace" {
                created_namespaces.insert(name.clone());
            }
            if let Some(ns) = &meta.namespace {
                named_namespaces.insert(ns.clone());
            }
            let id = format!(
                "{kind} {}/{name}",
                meta.namespace.as_deref().unwrap_or(&namespace)
            );
            if let Some(first) = seen.insert(id.clone(), label.clone()) {
                bail!(
                    "set {}: {id} is in the corpus twice ({first} and {label}): a set's objects must be distinct, or deleting one fails",
                    set.name
                );
            }
            objects.push(Object {
                label: label.clone(),
                kind,
                name,
            });
        }
        let file = files
            .entry((phase, index))
            .or_insert_with(|| (label.clone(), String::new()));
        if !file.1.is_empty() {
            file.1.push_str("\n---\n");
        }
        file.1.push_str(text);
    }
    let mut phases = Vec::new();
    for ((phase, index), (label, text)) in &files {
        let folder = out.join(phase);
        std::fs::create_dir_all(&folder)
            .with_context(|| format!("creating {}", folder.display()))?;
        let extension = if text.trim_start().starts_with('{') {
            "json"
        } else {
            "yaml"
        };
        let path = folder.join(format!("{index:03}-{}.{extension}", file_name(label)));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        if !phases.contains(phase) {
            phases.push(*phase);
        }
    }
    phases.sort();
    let mut namespaces = vec![namespace.clone()];
    namespaces.extend(
        named_namespaces
            .into_iter()
            .filter(|ns| !created_namespaces.contains(ns) && *ns != namespace),
    );
    Ok(Prepared {
        name: set.name.clone(),
        dir: out,
        namespace,
        namespaces,
        phases,
        objects,
        expect: set.expect.clone(),
    })
}

/// The programs rendering needs.
pub struct Tools {
    /// `helm`.
    pub helm: PathBuf,
    /// `kubectl` (for `kubectl kustomize`).
    pub kubectl: PathBuf,
}

/// `go mod download` of `module@version`; its folder in the module cache once its go.sum hash
/// is the pinned one.
fn download(module: &str, version: &str, sum: &str) -> Result<PathBuf> {
    let target = format!("{module}@{version}");
    let out = match Command::new("go")
        .args(["mod", "download", "-json", &target])
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .current_dir(std::env::temp_dir())
        .output()
    {
        Ok(out) => out,
        // No Go: a module already in the cache is used once its hash is the pinned one.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return super::dirhash::cached(module, version, sum);
        }
        Err(err) => return Err(anyhow::Error::new(err).context("could not start go")),
    };
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "`go mod download -json {target}` printed no JSON ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    if let Some(error) = info["Error"].as_str() {
        bail!("`go mod download {target}`: {error}");
    }
    let got = info["Sum"].as_str().unwrap_or_default();
    if got != sum {
        bail!("{target} has the go.sum hash {got}, the corpus definition pins {sum}");
    }
    let dir = info["Dir"]
        .as_str()
        .context("`go mod download -json` named no folder")?;
    Ok(PathBuf::from(dir))
}

/// The documents of one source, each with its label.
fn render(
    source: &Source,
    module: &Path,
    namespace: &str,
    tools: &Tools,
) -> Result<Vec<(String, String)>> {
    match source {
        Source::Files { files } => {
            let mut documents = Vec::new();
            for entry in files {
                for file in expand(module, entry)? {
                    let text = std::fs::read_to_string(module.join(&file))
                        .with_context(|| format!("reading {file}"))?;
                    documents.extend(split(&text).into_iter().map(|doc| (file.clone(), doc)));
                }
            }
            Ok(documents)
        }
        Source::Helm {
            helm,
            release,
            values,
        } => {
            let chart = module.join(helm);
            let mut args = vec![
                "template".to_owned(),
                release.clone(),
                chart.display().to_string(),
                "--namespace".to_owned(),
                namespace.to_owned(),
            ];
            for (key, value) in values {
                args.push("--set".to_owned());
                args.push(format!("{key}={value}"));
            }
            let text = output(&tools.helm, &args)?;
            Ok(split(&text)
                .into_iter()
                .map(|doc| {
                    let template = doc
                        .lines()
                        .find_map(|l| l.strip_prefix("# Source: "))
                        .unwrap_or("(no source)")
                        .to_owned();
                    (format!("{helm} {template}"), doc)
                })
                .collect())
        }
        Source::Kustomize { kustomize } => {
            let dir = module.join(kustomize);
            let text = output(
                &tools.kubectl,
                &["kustomize".to_owned(), dir.display().to_string()],
            )?;
            Ok(split(&text)
                .into_iter()
                .map(|doc| (kustomize.clone(), doc))
                .collect())
        }
    }
}

/// A path of the definition: itself, or the manifest files directly in a folder (`dir/`).
fn expand(module: &Path, entry: &str) -> Result<Vec<String>> {
    if !entry.ends_with('/') {
        return Ok(vec![entry.to_owned()]);
    }
    let dir = module.join(entry);
    let mut files = Vec::new();
    for item in std::fs::read_dir(&dir).with_context(|| format!("listing {entry}"))? {
        let item = item?;
        let name = item.file_name().to_string_lossy().into_owned();
        let manifest = [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e));
        if manifest && item.file_type()?.is_file() {
            files.push(format!("{entry}{name}"));
        }
    }
    files.sort();
    if files.is_empty() {
        bail!("{entry} holds no .yaml, .yml or .json file");
    }
    Ok(files)
}

/// The documents of a YAML stream (a JSON file is one document), without empty ones.
pub fn split(text: &str) -> Vec<String> {
    if text.trim_start().starts_with('{') {
        return vec![text.to_owned()];
    }
    let mut documents = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            documents.push(std::mem::take(&mut current));
            let rest = line[3..].trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                current.push_str(rest);
                current.push('\n');
            }
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    documents.push(current);
    documents
        .into_iter()
        .filter(|doc| {
            doc.lines().any(|l| {
                let l = l.trim();
                !l.is_empty() && !l.starts_with('#') && l != "..."
            })
        })
        .collect()
}

/// A label as a file name.
fn file_name(label: &str) -> String {
    let name: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = name.trim_end_matches(".yaml").trim_end_matches(".yml");
    let name = name.trim_end_matches(".json");
    name.chars()
        .rev()
        .take(80)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

/// Runs a renderer and returns its standard output.
fn output(program: &Path, args: &[String]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .with_context(|| format!("could not start {}", program.display()))?;
    if !out.status.success() {
        bail!(
            "`{} {}` failed ({}): {}",
            program.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("the rendered manifests are not UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_splits_on_separator_lines_and_drops_empty_documents() {
        let text = "# head\n---\na: 1\n--- # c\nb: |\n  ---x\n  y\n---\n# only a comment\n---\n";
        assert_eq!(split(text), ["a: 1\n", "b: |\n  ---x\n  y\n"]);
    }

    #[test]
    fn a_json_file_is_one_document() {
        assert_eq!(split("{\"a\": \"---\"}\n").len(), 1);
    }

    #[test]
    fn the_committed_definition_parses_and_pins_every_module() {
        let path = crate::workspace_root().join("xtask/corpus/sets.json");
        let definition = load(&path).unwrap();
        assert!(definition.sets.len() >= 8);
        for set in &definition.sets {
            assert!(set.sum.starts_with("h1:"), "{}", set.name);
            assert!(!set.version.is_empty() && !set.sources.is_empty());
        }
    }
}
