//! The README's dependency snippet against what builds.
//!
//! The README's Rust blocks are compiled (and the test block run) as doc-tests of this crate
//! (`src/lib.rs`). This test ties the `toml` block above them to that code and to the
//! workspace: every crate the blocks use is listed, nothing listed goes unused, each version
//! requirement is met by the version this workspace builds (`Cargo.lock`, the workspace's own
//! version for the mcr crates), and each feature asked for is one the workspace enables, so
//! the doc-tests were compiled with it.

use std::collections::{BTreeMap, BTreeSet};

mod repo;

use repo::{read, root};

/// The blocks of `markdown` fenced with a language starting with `lang`.
fn blocks(markdown: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match current.as_mut() {
            None => {
                if let Some(info) = line.strip_prefix("```")
                    && info.starts_with(lang)
                {
                    current = Some(String::new());
                }
            }
            Some(block) if line.starts_with("```") => {
                out.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    out
}

/// One dependency line of the snippet.
#[derive(Debug)]
struct Dep {
    version: String,
    features: Vec<String>,
}

/// The `[dependencies]` and `[dev-dependencies]` of a snippet of one-line entries
/// (`name = "1"` or `name = { version = "1", features = ["a"] }`, comments allowed).
fn parse_snippet(toml: &str) -> BTreeMap<String, Dep> {
    let mut deps = BTreeMap::new();
    let mut section = String::new();
    for line in toml.lines() {
        let line = line.split(" #").next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        assert!(
            section == "[dependencies]" || section == "[dev-dependencies]",
            "unexpected section {section} in the README snippet"
        );
        let (name, spec) = line.split_once('=').expect("name = spec");
        let (name, spec) = (name.trim().to_owned(), spec.trim());
        let quoted = |s: &str| s.trim().trim_matches('"').to_owned();
        let dep = if let Some(table) = spec.strip_prefix('{') {
            let version = table
                .split("version")
                .nth(1)
                .and_then(|rest| rest.split('"').nth(1))
                .unwrap_or_else(|| panic!("{name}: no version"))
                .to_owned();
            let features = table
                .split_once("features")
                .map(|(_, rest)| {
                    let list = rest
                        .split_once('[')
                        .expect("[")
                        .1
                        .split_once(']')
                        .expect("]")
                        .0;
                    list.split(',')
                        .map(quoted)
                        .filter(|f| !f.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            Dep { version, features }
        } else {
            Dep {
                version: quoted(spec),
                features: Vec::new(),
            }
        };
        assert!(
            deps.insert(name.clone(), dep).is_none(),
            "{name} listed twice"
        );
    }
    deps
}

/// The crates a block of Rust code names at the root of a path: the first segment of each
/// `use` and of each path outside `use` items (`kube::Client::try_default()`), without `std`,
/// `core`, `crate`, `self` and `super`.
fn crate_roots(code: &str) -> BTreeSet<String> {
    let mut roots = BTreeSet::new();
    let mut rest = String::new();
    let mut in_use = false;
    for line in code.lines() {
        let trimmed = line.trim_start();
        if let Some(path) = trimmed.strip_prefix("use ") {
            let root: String = path
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            roots.insert(root);
            in_use = !trimmed.ends_with(';');
            continue;
        }
        if in_use {
            in_use = !trimmed.ends_with(';');
            continue;
        }
        rest.push_str(line);
        rest.push('\n');
    }
    let bytes = rest.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        // A root starts a path: not after a word, `::` or a method call's `.`.
        let starts = i == 0 || !(word(bytes[i - 1]) || matches!(bytes[i - 1], b':' | b'.'));
        if bytes[i].is_ascii_lowercase() && starts {
            let start = i;
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
            }
            if rest[i..].starts_with("::") {
                roots.insert(rest[start..i].to_owned());
            }
        } else {
            i += 1;
        }
    }
    for builtin in ["std", "core", "alloc", "crate", "self", "super"] {
        roots.remove(builtin);
    }
    roots
}

/// Versions of each package in `Cargo.lock`.
fn locked_versions() -> BTreeMap<String, Vec<String>> {
    let lock = read("Cargo.lock");
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_owned());
        } else if let Some(v) = line.strip_prefix("version = ")
            && let Some(n) = name.take()
        {
            versions
                .entry(n)
                .or_default()
                .push(v.trim_matches('"').to_owned());
        }
    }
    versions
}

/// Whether `version` meets the caret requirement `req` (`"5"`, `"0.29"`, `"1.48"`).
fn caret_matches(req: &str, version: &str) -> bool {
    let parse = |s: &str| -> Vec<u64> {
        s.split(['.', '-', '+'])
            .take(3)
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    };
    let (req, ver) = (parse(req), parse(version));
    // The leftmost non-zero part of the requirement (or its last part) must match exactly,
    // the parts before it too, and the version must not be below the requirement.
    let fixed = req
        .iter()
        .position(|&p| p != 0)
        .unwrap_or(req.len() - 1)
        .min(req.len() - 1);
    req[..=fixed] == ver[..=fixed] && ver[..req.len()] >= req[..]
}

#[test]
fn caret_requirements_read_like_cargo() {
    assert!(caret_matches("5", "5.0.0"));
    assert!(caret_matches("0.29", "0.29.3"));
    assert!(!caret_matches("0.29", "0.30.0"));
    assert!(caret_matches("1.48", "1.54.1"));
    assert!(!caret_matches("1.48", "1.47.0"));
    assert!(!caret_matches("0.2", "0.3.0"));
    assert!(!caret_matches("5", "4.1.0"));
}

#[test]
fn code_roots_are_crates_named_at_the_start_of_paths() {
    let code = "use std::{sync::Arc, time::Duration};\nuse kube::{Api,\n    runtime::controller::Action};\nfn f() { let c = kube::Client::try_default(); serde_json::json!({}); Foo::bar(); c.for_::<X>(); }\n";
    let roots = crate_roots(code);
    assert_eq!(
        roots.into_iter().collect::<Vec<_>>(),
        ["kube", "serde_json"]
    );
}

#[test]
fn the_readme_dependencies_match_its_code_and_the_workspace() {
    let readme = read("README.md");
    let section = readme
        .split_once("## Dependencies")
        .expect("the README has a Dependencies section")
        .1;
    let snippet = blocks(section, "toml")
        .into_iter()
        .next()
        .expect("a toml block under Dependencies");
    let deps = parse_snippet(&snippet);

    // 1. What the README's code uses is what the snippet lists (a package `a-b` is the crate
    //    `a_b` in code).
    let used: BTreeSet<String> = blocks(&readme, "rust")
        .iter()
        .flat_map(|code| crate_roots(code))
        .collect();
    let listed: BTreeSet<String> = deps.keys().map(|name| name.replace('-', "_")).collect();
    assert_eq!(
        used, listed,
        "the README's code uses {used:?}, its dependency snippet lists {listed:?}"
    );

    // 2. Each version requirement is met by what this workspace builds.
    let workspace = read("Cargo.toml");
    let own_version = workspace
        .split_once("[workspace.package]")
        .and_then(|(_, rest)| rest.lines().find(|l| l.starts_with("version")))
        .and_then(|l| l.split('"').nth(1))
        .expect("workspace.package.version")
        .to_owned();
    let locked = locked_versions();
    for (name, dep) in &deps {
        let versions = if name.starts_with("mcr-") {
            vec![own_version.clone()]
        } else {
            locked.get(name).cloned().unwrap_or_default()
        };
        assert!(
            versions.iter().any(|v| caret_matches(&dep.version, v)),
            "README: {name} = \"{}\", but the workspace builds {versions:?}",
            dep.version
        );
    }

    // 3. Each feature asked for is enabled by some manifest of the workspace, so the
    //    README's code was compiled with it.
    let mut manifests = vec![workspace];
    for dir in ["crates", "examples"] {
        for entry in std::fs::read_dir(root().join(dir)).expect("read_dir") {
            let path = entry.expect("entry").path().join("Cargo.toml");
            if let Ok(text) = std::fs::read_to_string(&path) {
                manifests.push(text);
            }
        }
    }
    manifests.push(read("tests/Cargo.toml"));
    for (name, dep) in &deps {
        for feature in &dep.features {
            let enabled = manifests.iter().any(|m| {
                m.lines().any(|l| {
                    l.trim_start().starts_with(&format!("{name} "))
                        && l.contains("features")
                        && l.contains(&format!("\"{feature}\""))
                })
            });
            assert!(
                enabled,
                "README: {name} with feature {feature:?}, which no workspace manifest enables"
            );
        }
    }
}
