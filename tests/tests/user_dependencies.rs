//! What a user's build pays for: the published crates' own dependency graph (normal and build
//! dependencies, as a user's `cargo build` resolves them) leaves out kube's `derive` machinery,
//! and the guide's feature list is each published crate's `[features]` table.
//!
//! The guide (chapter "Your first controller", "Build time") promises both: it measured a
//! new user's cold build without kube-derive, darling and schemars, and it names every feature.

use std::collections::BTreeSet;
use std::process::Command;

mod repo;

use repo::{read, root};

/// The published crates: the workspace dependencies that carry a version (the unpublished
/// ones are path-only).
fn published() -> Vec<String> {
    read("Cargo.toml")
        .lines()
        .filter(|l| l.starts_with("mcr-") && l.contains("version ="))
        .map(|l| l.split_once(' ').expect("name = spec").0.to_owned())
        .collect()
}

#[test]
fn published_crates_do_not_build_kube_derive() {
    let crates = published();
    assert!(crates.len() >= 10, "published crates: {crates:?}");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root())
        .args([
            "tree",
            "--offline",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}"]);
    for c in &crates {
        cmd.args(["-p", c]);
    }
    let out = cmd.output().expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert!(
        names.contains("kube-runtime"),
        "the graph was read: {names:?}"
    );
    let unwanted: Vec<&str> = ["kube-derive", "darling", "schemars", "schemars_derive"]
        .into_iter()
        .filter(|n| names.contains(*n))
        .collect();
    assert!(
        unwanted.is_empty(),
        "a published crate builds {unwanted:?} for every user: enable kube's `derive` only in \
         dev-dependencies"
    );
}

/// `## name` documented features of a crate's manifest, by name.
fn features(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut inside = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            inside = line == "[features]";
            continue;
        }
        if inside
            && let Some((name, _)) = line.split_once('=')
            && !line.starts_with('#')
            && name.trim() != "default"
        {
            out.insert(name.trim().to_owned());
        }
    }
    out
}

#[test]
fn the_guide_lists_every_feature_of_the_published_crates() {
    let guide = read("crates/mcr-guide/chapters/02-first-controller.md");
    let section = guide
        .split("# Build time")
        .nth(1)
        .expect("the chapter has a Build time section");
    let mut missing = Vec::new();
    for c in published() {
        for f in features(&read(&format!("crates/{c}/Cargo.toml"))) {
            let row = format!("| `{c}` | `{f}` |");
            if !section.contains(&row) {
                missing.push(row);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the guide's feature table lacks: {missing:?}"
    );
}
