//! `cargo xtask kube-suite`: kube-rs's own cluster tests on the emulator and on kube-apiserver.
//!
//! The `kube`, `kube-client` and `kube-runtime` crates of our Cargo.lock carry unit tests marked
//! `#[ignore = "needs cluster ..."]` (or "requires a cluster", "needs kubeconfig"): they run
//! against the current context of `KUBECONFIG`. This task copies the three crates' published
//! sources (the cargo registry's copy, or its `.crate` file) under `target/kube-suite/`, builds
//! their library tests there as a workspace of their own (their dev-dependencies from crates.io,
//! our Cargo.lock as the starting lock, our `[profile.*]` tables) into our target folder, so
//! that every dependency it shares with our workspace in version, features and profile is built
//! once (after `cargo test --workspace` the suite compiles about 55 crates, 39 s on 2 cores,
//! against 215 crates and 166 s in a folder of its own), and runs the cluster tests of each
//! crate on a fresh cluster of each backend: an `mcr-envtest` emulator fleet and a real
//! kube-apiserver fleet (`MCR_ENVTEST=real`). `MCR_KUBE_SUITE_DIR` puts the suite's sources, lock
//! and results elsewhere.
//!
//! The check: every test that fails on the emulator also fails on kube-apiserver (a test
//! kube-apiserver without nodes or controllers cannot pass, such as a Pod that must run, may fail
//! on both). Per-test results are written to `target/kube-suite/results-<backend>.txt`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::fleet::Fleet;

/// Where the suite is built (default `target/kube-suite`): a folder outside the checkout keeps
/// its build across fresh clones, as the control-plane assets' cache does.
const SUITE_DIR_ENV: &str = "MCR_KUBE_SUITE_DIR";

/// The crates whose cluster tests run.
const CRATES: &[&str] = &["kube", "kube-client", "kube-runtime"];

/// Features the tests need (`ws` for exec and attach, `derive` and `runtime` for kube's own).
const FEATURES: &str = "kube/derive,kube/runtime,kube/ws,kube/rustls-tls,kube-client/ws,kube-client/rustls-tls,kube-client/jsonpatch";

/// How long one crate's cluster tests may run on one backend (a test waiting for a Pod that no
/// kubelet runs gives up within its own timeout, far below this).
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// One test's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
}

/// Runs the suite on both backends (or the emulator alone); fails when a test fails on the
/// emulator and passes on kube-apiserver.
///
/// `build_only`: build the test binaries and stop (CI builds them before the e2e step, so the
/// run beside the e2e suite does not compile while the suite's control planes are busy).
pub fn run(emulator_only: bool, build_only: bool) -> Result<()> {
    let started = Instant::now();
    let root = crate::workspace_root();
    let suite = match std::env::var_os(SUITE_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => root.join("target").join("kube-suite"),
    };
    let crates = sources(&root, &suite)?;
    let binaries = build(&suite, &crates)?;
    eprintln!(
        "kube-suite: {} test binaries built in {:.0} s",
        binaries.len(),
        started.elapsed().as_secs_f64()
    );
    if build_only {
        return Ok(());
    }
    let binary = crate::fleet::build_binary()?;
    let assets = if emulator_only {
        None
    } else {
        Some(crate::assets::directory()?)
    };
    let mut backends = vec![("emulator", None)];
    if let Some(dir) = &assets {
        backends.push(("real", Some(dir.as_path())));
    }
    let results: Vec<Result<BTreeMap<String, Outcome>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = backends
            .iter()
            .map(|(backend, assets)| {
                let (binaries, suite, binary) = (&binaries, &suite, &binary);
                scope.spawn(move || run_backend(binary, backend, *assets, binaries, suite))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a backend's run panicked")))
            })
            .collect()
    });
    let mut by_backend = BTreeMap::new();
    for ((backend, _), result) in backends.iter().zip(results) {
        let outcomes = result.with_context(|| format!("the {backend} run"))?;
        let path = suite.join(format!("results-{backend}.txt"));
        let text: String = outcomes
            .iter()
            .map(|(name, outcome)| format!("{name}: {}\n", label(*outcome)))
            .collect();
        std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
        let passed = outcomes.values().filter(|o| **o == Outcome::Passed).count();
        eprintln!(
            "kube-suite: {backend}: {passed} of {} passed ({})",
            outcomes.len(),
            path.display()
        );
        by_backend.insert(*backend, outcomes);
    }
    eprintln!(
        "kube-suite: {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
    let emulator = &by_backend["emulator"];
    let Some(real) = by_backend.get("real") else {
        for (name, outcome) in emulator {
            eprintln!("  {name}: {}", label(*outcome));
        }
        return Ok(());
    };
    let mut only_emulator = Vec::new();
    for (name, outcome) in emulator {
        let on_real = real.get(name).copied();
        eprintln!(
            "  {name}: emulator {}, kube-apiserver {}",
            label(*outcome),
            on_real.map(label).unwrap_or("not run")
        );
        if *outcome == Outcome::Failed && on_real != Some(Outcome::Failed) {
            only_emulator.push(name.clone());
        }
    }
    if real.len() != emulator.len() {
        bail!(
            "the backends ran different tests ({} on the emulator, {} on kube-apiserver)",
            emulator.len(),
            real.len()
        );
    }
    if !only_emulator.is_empty() {
        bail!(
            "kube-rs's cluster tests that fail on the emulator and not on kube-apiserver: {}",
            only_emulator.join(", ")
        );
    }
    Ok(())
}

fn label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Passed => "ok",
        Outcome::Failed => "FAILED",
    }
}

/// The features of the `kube` dev-dependency kube-rs's workspace gives a crate's tests.
fn kube_dev_features(name: &str) -> Option<&'static str> {
    match name {
        "kube-client" => Some(r#"["derive", "client", "ws"]"#),
        "kube-runtime" => Some(r#"["derive", "client", "runtime"]"#),
        _ => None,
    }
}

/// The version of `name` in our Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Result<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{name}\"") {
            let version = lines
                .next()
                .and_then(|l| l.strip_prefix("version = \""))
                .and_then(|l| l.strip_suffix('"'))
                .with_context(|| format!("Cargo.lock: no version after {name}"))?;
            return Ok(version.to_owned());
        }
    }
    bail!("Cargo.lock has no package {name}")
}

/// Copies each crate's published sources under `suite/src/<crate>-<version>` and writes the
/// suite's workspace manifest; returns the crate folders by name.
fn sources(root: &Path, suite: &Path) -> Result<BTreeMap<&'static str, PathBuf>> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).context("reading Cargo.lock")?;
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")?;
    let mut crates = BTreeMap::new();
    let mut patches = String::new();
    for name in CRATES {
        let version = locked_version(&lock, name)?;
        let dest = suite.join("src").join(format!("{name}-{version}"));
        if !dest.join("Cargo.toml").is_file() {
            let from = registry_copy(&cargo_home, name, &version)?;
            if dest.exists() {
                std::fs::remove_dir_all(&dest)?;
            }
            copy_dir(&from, &dest)?;
            // The published lock of one crate is not the suite's.
            let _ = std::fs::remove_file(dest.join("Cargo.lock"));
            // Publishing drops path-only dev-dependencies: kube-client's and kube-runtime's
            // tests use `kube` itself (kube-rs's workspace gives it by path).
            if let Some(features) = kube_dev_features(name) {
                let path = dest.join("Cargo.toml");
                let mut manifest = std::fs::read_to_string(&path)?;
                manifest.push_str(&format!(
                    "\n[dev-dependencies.kube]\npath = \"../kube-{}\"\nfeatures = {features}\n",
                    locked_version(&lock, "kube")?
                ));
                std::fs::write(&path, manifest)?;
            }
        }
        patches.push_str(&format!("{name} = {{ path = \"src/{name}-{version}\" }}\n"));
        crates.insert(*name, dest);
    }
    let members: Vec<String> = crates
        .values()
        .map(|p| {
            format!(
                "\"src/{}\"",
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect();
    // Our workspace's profiles, so that the suite builds its dependencies as our build does and,
    // in our target folder, reuses every one whose version and features are ours.
    let root_manifest =
        std::fs::read_to_string(root.join("Cargo.toml")).context("reading Cargo.toml")?;
    let manifest = format!(
        "# Written by `cargo xtask kube-suite`: kube-rs's published crates, to run their cluster tests.\n\
         [workspace]\nresolver = \"2\"\nmembers = [{}]\n\n[patch.crates-io]\n{patches}\n{}",
        members.join(", "),
        profiles(&root_manifest)
    );
    std::fs::write(suite.join("Cargo.toml"), manifest)?;
    if !suite.join("Cargo.lock").is_file() {
        // Start from our lock, so the dependencies the suite shares with us keep our versions.
        std::fs::copy(root.join("Cargo.lock"), suite.join("Cargo.lock"))?;
    }
    Ok(crates)
}

/// The `[profile.*]` tables of a manifest, as written there.
fn profiles(manifest: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            inside = line.starts_with("[profile.");
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The registry's unpacked sources of `name-version`, or its `.crate` file unpacked.
fn registry_copy(cargo_home: &Path, name: &str, version: &str) -> Result<PathBuf> {
    let wanted = format!("{name}-{version}");
    for kind in ["src", "cache"] {
        let dir = cargo_home.join("registry").join(kind);
        let Ok(registries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for registry in registries.flatten() {
            let path = registry.path();
            if kind == "src" && path.join(&wanted).join("Cargo.toml").is_file() {
                return Ok(path.join(&wanted));
            }
            let archive = path.join(format!("{wanted}.crate"));
            if kind == "cache" && archive.is_file() {
                let out =
                    std::env::temp_dir().join(format!("xtask-kube-suite-{}", std::process::id()));
                std::fs::create_dir_all(&out)?;
                crate::run(
                    "tar",
                    &[
                        "xzf",
                        &archive.display().to_string(),
                        "-C",
                        &out.display().to_string(),
                    ],
                    &[],
                )?;
                return Ok(out.join(&wanted));
            }
        }
    }
    bail!(
        "{wanted} is not in the cargo registry under {} (build the workspace first: `cargo build`)",
        cargo_home.display()
    )
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("listing {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// One crate's test binary and the cluster tests in it.
struct TestBinary {
    krate: &'static str,
    executable: PathBuf,
    tests: Vec<String>,
}

/// Builds the library tests of the suite and lists each crate's cluster tests.
fn build(suite: &Path, crates: &BTreeMap<&'static str, PathBuf>) -> Result<Vec<TestBinary>> {
    let manifest = suite.join("Cargo.toml");
    // Our target folder: the dependencies the suite shares with our workspace (same versions,
    // features and profile) are built once.
    let target = crate::bench::target_dir(&crate::workspace_root());
    let mut args: Vec<String> = vec![
        "test".into(),
        "--manifest-path".into(),
        manifest.display().to_string(),
        "--lib".into(),
        "--no-run".into(),
        "--message-format=json-render-diagnostics".into(),
        "--features".into(),
        FEATURES.into(),
    ];
    for name in crates.keys() {
        args.push("-p".into());
        args.push((*name).into());
    }
    eprintln!("$ cargo {}", args.join(" "));
    let out = crate::command("cargo")
        .args(&args)
        .env("CARGO_TARGET_DIR", &target)
        .stderr(Stdio::inherit())
        .output()
        .context("could not start cargo")?;
    if !out.status.success() {
        bail!("building kube-rs's tests failed ({})", out.status);
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let Some(name) = message["target"]["name"].as_str() else {
            continue;
        };
        let Some(krate) = CRATES.iter().find(|c| c.replace('-', "_") == name) else {
            continue;
        };
        let Some(executable) = message["executable"].as_str() else {
            continue;
        };
        let tests = cluster_tests(&crates[krate], Path::new(executable))?;
        binaries.push(TestBinary {
            krate,
            executable: PathBuf::from(executable),
            tests,
        });
    }
    if binaries.len() != CRATES.len() {
        bail!(
            "cargo built {} of the {} test binaries",
            binaries.len(),
            CRATES.len()
        );
    }
    Ok(binaries)
}

/// The tests of a binary that the crate's sources mark as needing a cluster (their `ignore`
/// reason names a cluster or a kubeconfig).
fn cluster_tests(source: &Path, executable: &Path) -> Result<Vec<String>> {
    let mut functions = Vec::new();
    collect_cluster_functions(&source.join("src"), &mut functions)?;
    let out = Command::new(executable)
        .args(["--list", "--ignored"])
        .output()
        .with_context(|| format!("listing the tests of {}", executable.display()))?;
    let listed = String::from_utf8_lossy(&out.stdout);
    let mut tests: Vec<String> = listed
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|name| {
            let last = name.rsplit("::").next().unwrap_or(name);
            functions.iter().any(|f| f == last)
        })
        .map(str::to_owned)
        .collect();
    tests.sort();
    Ok(tests)
}

fn collect_cluster_functions(dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            collect_cluster_functions(&path, out)?;
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let mut pending = false;
        for line in text.lines() {
            let line = line.trim();
            if let Some(reason) = line.strip_prefix("#[ignore = \"") {
                pending = reason.contains("cluster") || reason.contains("kubeconfig");
            } else if pending && line.contains("fn ") {
                let name = line
                    .split("fn ")
                    .nth(1)
                    .and_then(|rest| rest.split(['(', '<']).next())
                    .unwrap_or("");
                if !name.is_empty() {
                    out.push(name.to_owned());
                }
                pending = false;
            }
        }
    }
    Ok(())
}

/// Runs every crate's cluster tests on a fresh cluster of `backend` each.
fn run_backend(
    binary: &Path,
    backend: &str,
    assets: Option<&Path>,
    binaries: &[TestBinary],
    suite: &Path,
) -> Result<BTreeMap<String, Outcome>> {
    let dir = suite.join(format!("fleet-{backend}"));
    let fleet = Fleet::start(binary, backend, binaries.len(), &dir, assets)?;
    // Each crate's tests on a cluster of their own, the three crates at once.
    let started = Instant::now();
    let mut running = Vec::new();
    for (index, test) in binaries.iter().enumerate() {
        let log = suite.join(format!("{backend}-{}.log", test.krate));
        let mut args: Vec<&str> = vec!["--ignored", "--exact"];
        args.extend(test.tests.iter().map(String::as_str));
        let child = Command::new(&test.executable)
            .args(&args)
            .env("KUBECONFIG", fleet.kubeconfig(index))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::create(log.with_extension("stderr"))?)
            .spawn()
            .with_context(|| format!("could not start {}", test.executable.display()))?;
        running.push((test, child, log));
    }
    let mut outcomes = BTreeMap::new();
    for (test, mut child, log) in running {
        loop {
            if child.try_wait()?.is_some() {
                break;
            }
            if started.elapsed() > RUN_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!(
                    "kube-suite: {backend}: {}'s tests killed after {} s",
                    test.krate,
                    RUN_TIMEOUT.as_secs()
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        for name in &test.tests {
            let passed = text.contains(&format!("test {name} ... ok"));
            outcomes.insert(
                format!("{}::{name}", test.krate),
                if passed {
                    Outcome::Passed
                } else {
                    Outcome::Failed
                },
            );
        }
        eprintln!(
            "kube-suite: {backend}: {} done at {:.0} s (log {})",
            test.krate,
            started.elapsed().as_secs_f64(),
            log.display()
        );
    }
    drop(fleet);
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_locked_version_is_read_from_the_package_entry() {
        let lock = "[[package]]\nname = \"kube-core\"\nversion = \"1.0.0\"\n\n[[package]]\nname = \"kube\"\nversion = \"5.0.1\"\n";
        assert_eq!(locked_version(lock, "kube").unwrap(), "5.0.1");
        assert!(locked_version(lock, "kube-runtime").is_err());
    }

    #[test]
    fn cluster_tests_are_the_ones_ignored_for_a_cluster() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(
            dir.path().join("src/lib.rs"),
            "#[tokio::test]\n#[ignore = \"needs cluster (lists pods)\"]\n#[cfg(feature = \"x\")]\nasync fn lists() {}\n\
             #[ignore = \"fails on windows\"]\nfn other() {}\n#[ignore = \"requires a cluster\"]\nasync fn meta() -> R<()> {}\n",
        )
        .unwrap();
        let mut found = Vec::new();
        collect_cluster_functions(&dir.path().join("src"), &mut found).unwrap();
        assert_eq!(found, ["lists", "meta"]);
    }
}
