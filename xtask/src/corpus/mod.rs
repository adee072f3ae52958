//! `cargo xtask corpus`: real-world manifests through kubectl on the emulator and on
//! kube-apiserver, compared.
//!
//! The corpus is `xtask/corpus/sets.json`: sets of public manifests (Helm charts rendered,
//! install bundles, example folders), each from a Go module pinned by version and go.sum hash,
//! downloaded into Go's module cache, never into this repository. Every set goes through the
//! same kubectl steps ([`steps`]) in both apply modes (server-side on one cluster, client-side
//! on another): apply, read back, apply again, read back, `kubectl diff`, a `--dry-run=server`
//! patch, delete, and a read of what is left.
//!
//! The steps run on six clusters at once, one per mode and run: two of an emulator fleet
//! (`mcr-envtest`'s binary) and four of a kube-apiserver fleet, two runs of two
//! (`MCR_ENVTEST=real` with the binaries of `KUBEBUILDER_ASSETS` or `cargo xtask assets`). The outputs are normalised ([`compare`]:
//! uids, resourceVersions, timestamps, allocated IPs and ports; nothing else) and compared:
//!
//! - kube-apiserver against kube-apiserver must differ in nothing (a difference there is a
//!   value a server stamps that the normalisation misses, or an answer that depends on timing:
//!   the check fails);
//! - the emulator against kube-apiserver: every difference fails the check unless
//!   `xtask/corpus/accepted.json` lists it with its reason (an entry that matches nothing
//!   fails too, so the list stays short);
//! - kube-apiserver's exit codes must be the ones the definition's `expect` lists.
//!
//! Field ownership is compared too (`--show-managed-fields`; managers keyed by name, operation
//! and subresource, since kube-apiserver keeps no fixed order among them). Not compared: which
//! CRDs are left right after their delete (kube-apiserver's finalizer retries with a backoff).
//!
//! `--one-apiserver-run` (what CI runs, for time) compares the emulator with one kube-apiserver
//! run and skips the check of kube-apiserver against itself.
//!
//! `--emulator-only` runs the emulator alone and checks each step's exit code against
//! `expect` (for machines without kube-apiserver). The report (counts by field and by step,
//! then one difference a line) is written to `target/corpus/report.txt`, every command with
//! both answers to `target/corpus/records/<run>-<mode>/<set>.txt`.

mod compare;
mod definition;
mod dirhash;
mod steps;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::fleet::{self, Fleet, Kubectl};
use compare::Difference;
use definition::Prepared;
use steps::{Mode, Records};

/// What to run.
pub struct Corpus {
    /// The emulator alone: exit codes against the definition, no comparison.
    pub emulator_only: bool,
    /// One kube-apiserver run (two clusters) instead of two: no check of kube-apiserver
    /// against itself.
    pub one_apiserver_run: bool,
    /// Only these sets (all when empty).
    pub sets: Vec<String>,
}

/// `xtask/corpus/accepted.json`.
#[derive(Debug, Deserialize)]
struct Accepted {
    accepted: Vec<AcceptedEntry>,
}

/// A difference accepted with its reason.
#[derive(Debug, Deserialize)]
struct AcceptedEntry {
    /// A regular expression matched against the report line.
    pattern: String,
    /// Why the emulator answers differently, and why that is right.
    reason: String,
}

/// Runs the corpus.
pub fn run(opts: Corpus) -> Result<()> {
    let started = Instant::now();
    let root = crate::workspace_root();
    let corpus_dir = root.join("xtask").join("corpus");
    let definition = definition::load(&corpus_dir.join("sets.json"))?;
    for name in &opts.sets {
        if !definition.sets.iter().any(|s| s.name == *name) {
            bail!("no set {name} in xtask/corpus/sets.json");
        }
    }
    let chosen: Vec<_> = definition
        .sets
        .iter()
        .filter(|s| opts.sets.is_empty() || opts.sets.contains(&s.name))
        .collect();
    let work = root.join("target").join("corpus");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;

    let assets = if opts.emulator_only {
        None
    } else {
        Some(crate::assets::directory()?)
    };
    let tools = definition::Tools {
        kubectl: tool("kubectl", assets.as_deref())?,
        helm: tool("helm", assets.as_deref())?,
    };
    let mut prepared = Vec::new();
    for set in &chosen {
        prepared.push(definition::prepare(set, &tools, &work.join("sets"))?);
    }
    let objects: usize = prepared.iter().map(|p| p.objects.len()).sum();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for object in prepared.iter().flat_map(|p| &p.objects) {
        *kinds.entry(object.kind.as_str()).or_default() += 1;
    }
    eprintln!(
        "corpus: {} sets, {objects} objects of {} kinds",
        prepared.len(),
        kinds.len()
    );

    let binary = fleet::build_binary()?;
    let emulator = Fleet::start(&binary, "emulator", 2, &work.join("emulator"), None)?;
    let real = match &assets {
        Some(dir) => Some(Fleet::start(
            &binary,
            "real",
            if opts.one_apiserver_run { 2 } else { 4 },
            &work.join("real"),
            Some(dir),
        )?),
        None => None,
    };
    // (run, mode, kubeconfig)
    let mut plan: Vec<(&str, Mode, PathBuf)> = vec![
        ("emulator", Mode::ServerSide, emulator.kubeconfig(0).into()),
        ("emulator", Mode::ClientSide, emulator.kubeconfig(1).into()),
    ];
    if let Some(real) = &real {
        plan.extend([
            ("apiserver", Mode::ServerSide, real.kubeconfig(0).into()),
            ("apiserver", Mode::ClientSide, real.kubeconfig(1).into()),
        ]);
        if !opts.one_apiserver_run {
            plan.extend([
                ("apiserver-2", Mode::ServerSide, real.kubeconfig(2).into()),
                ("apiserver-2", Mode::ClientSide, real.kubeconfig(3).into()),
            ]);
        }
    }
    let results: Vec<Result<Vec<Records>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .iter()
            .map(|(run, mode, kubeconfig)| {
                let kubectl = Kubectl {
                    binary: tools.kubectl.clone(),
                    kubeconfig: kubeconfig.clone(),
                    scratch: work.join("kubectl").join(format!("{run}-{}", mode.name())),
                };
                let prepared = &prepared;
                scope.spawn(move || -> Result<Vec<Records>> {
                    let _ = std::fs::remove_dir_all(&kubectl.scratch);
                    let mut all = Vec::new();
                    for set in prepared {
                        let set_started = Instant::now();
                        all.push(steps::run(set, *mode, &kubectl)?);
                        eprintln!(
                            "corpus: {run} {}: {} done in {:.1} s",
                            mode.name(),
                            set.name,
                            set_started.elapsed().as_secs_f64()
                        );
                    }
                    Ok(all)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a run panicked")))
            })
            .collect()
    });
    drop(real);
    drop(emulator);
    // By run name, then set index: the set's records of both modes, in order.
    let mut runs: BTreeMap<&str, Vec<Records>> = BTreeMap::new();
    for ((run, mode, _), result) in plan.iter().zip(results) {
        let records = result.with_context(|| format!("the {run} run"))?;
        dump(
            &work.join("records").join(format!("{run}-{}", mode.name())),
            &prepared,
            &records,
        )?;
        let entry = runs
            .entry(run)
            .or_insert_with(|| vec![Vec::new(); prepared.len()]);
        for (set, r) in entry.iter_mut().zip(records) {
            set.extend(r);
        }
    }

    let accepted: Accepted = {
        let path = corpus_dir.join("accepted.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
    };
    let patterns: Vec<regex::Regex> = accepted
        .accepted
        .iter()
        .map(|a| {
            regex::Regex::new(&a.pattern).with_context(|| {
                format!("accepted.json: the pattern {:?} ({})", a.pattern, a.reason)
            })
        })
        .collect::<Result<_>>()?;

    let mut report = Report {
        used: vec![false; patterns.len()],
        ..Report::default()
    };
    let _ = writeln!(
        report.head,
        "corpus: {} sets, {objects} objects of {} kinds ({})",
        prepared.len(),
        kinds.len(),
        kinds
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (index, set) in prepared.iter().enumerate() {
        let emulator = &runs["emulator"][index];
        match runs.get("apiserver") {
            None => report
                .codes
                .extend(steps::unexpected_codes(set, emulator, "the emulator")),
            Some(real) => {
                let real = &real[index];
                report
                    .codes
                    .extend(steps::unexpected_codes(set, real, "kube-apiserver"));
                if let Some(real2) = runs.get("apiserver-2") {
                    for d in compare::compare(set, real, &real2[index]) {
                        report.unstable.push(d.line("apiserver", "apiserver-2"));
                    }
                }
                for d in compare::compare(set, emulator, real) {
                    report.add(d, &patterns);
                }
            }
        }
    }
    let stale = stale_entries(
        &accepted.accepted,
        &report.used,
        !opts.emulator_only && opts.sets.is_empty(),
    );
    let text = report.render(&prepared, opts.emulator_only, &stale);
    let path = work.join("report.txt");
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("{}", report.summary(&stale, opts.emulator_only));
    eprintln!(
        "corpus: report in {} ({:.0} s)",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    if !report.ok(opts.emulator_only) || !stale.is_empty() {
        bail!("the corpus check failed (see {})", path.display());
    }
    Ok(())
}

/// The accepted entries no difference used, when the whole corpus was compared (`compared_all`):
/// a run of some sets, or of the emulator alone, cannot tell that an entry matches nothing.
fn stale_entries<'a>(
    accepted: &'a [AcceptedEntry],
    used: &[bool],
    compared_all: bool,
) -> Vec<&'a AcceptedEntry> {
    if !compared_all {
        return Vec::new();
    }
    accepted
        .iter()
        .zip(used)
        .filter(|(_, used)| !**used)
        .map(|(a, _)| a)
        .collect()
}

/// Every command and answer of one run, a file per set (`target/corpus/records/<run>/`), for
/// reading a difference in full.
fn dump(dir: &Path, sets: &[Prepared], records: &[Records]) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (set, records) in sets.iter().zip(records) {
        let mut text = String::new();
        for (key, record) in records {
            let _ = writeln!(
                text,
                "=== {key}: {} (exit {})\n--- stdout\n{}--- stderr\n{}",
                record.command, record.answer.code, record.answer.stdout, record.answer.stderr
            );
        }
        let path = dir.join(format!("{}.txt", set.name));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// A tool from the asset directory (`KUBEBUILDER_ASSETS` with --emulator-only), else from
/// PATH.
fn tool(name: &str, assets: Option<&Path>) -> Result<PathBuf> {
    let from_assets = assets
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from))
        .map(|dir| dir.join(name))
        .filter(|p| p.is_file());
    match from_assets {
        Some(path) => Ok(path),
        None if crate::on_path(name) => Ok(PathBuf::from(name)),
        None => {
            bail!("{name} is neither in the asset directory (`cargo xtask assets`) nor on PATH")
        }
    }
}

/// What the comparison found.
#[derive(Default)]
struct Report {
    head: String,
    differences: Vec<Difference>,
    accepted: Vec<String>,
    unstable: Vec<String>,
    codes: Vec<String>,
    used: Vec<bool>,
}

impl Report {
    /// Files a difference of the emulator: accepted when an entry of accepted.json matches
    /// its line (the entry is then in use), else a failure.
    fn add(&mut self, difference: Difference, patterns: &[regex::Regex]) {
        let line = difference.line("emulator", "apiserver");
        match patterns.iter().position(|p| p.is_match(&line)) {
            Some(i) => {
                self.used[i] = true;
                self.accepted.push(line);
            }
            None => self.differences.push(difference),
        }
    }

    fn ok(&self, emulator_only: bool) -> bool {
        self.codes.is_empty()
            && (emulator_only || (self.differences.is_empty() && self.unstable.is_empty()))
    }

    fn summary(&self, stale: &[&AcceptedEntry], emulator_only: bool) -> String {
        if emulator_only {
            return format!(
                "corpus (emulator only): {} steps exited otherwise than on kube-apiserver (the definition's `expect`)\n",
                self.codes.len()
            );
        }
        let mut by_class: BTreeMap<&str, usize> = BTreeMap::new();
        for d in &self.differences {
            *by_class.entry(d.class.as_str()).or_default() += 1;
        }
        let mut classes: Vec<(&str, usize)> = by_class.into_iter().collect();
        classes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "corpus: {} differences (emulator against kube-apiserver), {} accepted, {} between two kube-apiserver runs, {} unexpected exit codes, {} stale accepted entries",
            self.differences.len(),
            self.accepted.len(),
            self.unstable.len(),
            self.codes.len(),
            stale.len()
        );
        if !classes.is_empty() {
            // The same field, whatever the step that showed it.
            let mut by_field: BTreeMap<&str, usize> = BTreeMap::new();
            for (class, n) in &classes {
                let field = class.split_once(": ").map_or(*class, |(_, f)| f);
                *by_field.entry(field).or_default() += n;
            }
            let mut fields: Vec<(&str, usize)> = by_field.into_iter().collect();
            fields.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let _ = writeln!(out, "by field (all steps):");
            for (field, n) in fields {
                let _ = writeln!(out, "{n:6}  {field}");
            }
            let _ = writeln!(out, "by step and field:");
            for (class, n) in classes {
                let _ = writeln!(out, "{n:6}  {class}");
            }
        }
        out
    }

    fn render(&self, sets: &[Prepared], emulator_only: bool, stale: &[&AcceptedEntry]) -> String {
        let mut out = self.head.clone();
        let _ = writeln!(
            out,
            "sets: {}",
            sets.iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if emulator_only {
            let _ = writeln!(
                out,
                "mode: emulator only (exit codes against the definition)"
            );
        }
        out.push_str(&self.summary(stale, emulator_only));
        let mut section = |title: &str, lines: &mut dyn Iterator<Item = String>| {
            let lines: Vec<String> = lines.collect();
            if !lines.is_empty() {
                let _ = writeln!(out, "\n== {title} ({})", lines.len());
                for line in lines {
                    let _ = writeln!(out, "{line}");
                }
            }
        };
        section("unexpected exit codes", &mut self.codes.iter().cloned());
        section(
            "differences between two kube-apiserver runs (the normalisation is wrong)",
            &mut self.unstable.iter().cloned(),
        );
        section(
            "differences, emulator against kube-apiserver",
            &mut self
                .differences
                .iter()
                .map(|d| d.line("emulator", "apiserver")),
        );
        section("accepted differences", &mut self.accepted.iter().cloned());
        section(
            "stale accepted entries (they match nothing)",
            &mut stale.iter().map(|a| format!("{}: {}", a.pattern, a.reason)),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn difference(path: &str) -> Difference {
        Difference {
            set: "s".into(),
            step: "ssa/get/2-objects".into(),
            subject: "f.yaml Pod/ns/p".into(),
            path: path.into(),
            left: "(absent)".into(),
            right: "420".into(),
            class: "get: Pod".into(),
        }
    }

    #[test]
    fn only_a_matching_entry_accepts_a_difference_and_an_unused_one_is_stale() {
        let patterns = vec![
            regex::Regex::new(r"defaultMode: emulator=\(absent\)").unwrap(),
            regex::Regex::new("matches nothing").unwrap(),
        ];
        let mut report = Report {
            used: vec![false; patterns.len()],
            ..Report::default()
        };
        report.add(
            difference("spec.volumes[0].configMap.defaultMode"),
            &patterns,
        );
        report.add(difference("spec.serviceAccount"), &patterns);
        assert_eq!(report.accepted.len(), 1);
        assert_eq!(report.differences.len(), 1);
        assert_eq!(report.differences[0].path, "spec.serviceAccount");
        assert_eq!(report.used, [true, false]);
        assert!(!report.ok(false));
        // The emulator-only mode judges exit codes alone.
        assert!(report.ok(true));
        let entries: Vec<AcceptedEntry> = ["defaultMode", "matches nothing"]
            .map(|p| AcceptedEntry {
                pattern: p.into(),
                reason: String::new(),
            })
            .into();
        let stale = stale_entries(&entries, &report.used, true);
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].pattern, "matches nothing");
        // Nor can a run of the emulator alone or of some sets tell an entry is stale.
        assert!(stale_entries(&entries, &report.used, false).is_empty());
    }
}
