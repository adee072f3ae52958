//! The kubectl steps every set goes through on one cluster, in one apply mode: apply, read
//! back, apply again, read back, diff, a dry-run patch, delete, and what is left.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};

use super::definition::{PHASES, Prepared};
use crate::fleet::{Answer, Kubectl};

/// How objects are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `kubectl apply --server-side`.
    ServerSide,
    /// `kubectl apply` (client-side, the last-applied annotation).
    ClientSide,
}

impl Mode {
    /// The mode's name in step keys.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ServerSide => "ssa",
            Mode::ClientSide => "csa",
        }
    }
}

/// How many times `kubectl wait --for=condition=Established` is asked again when it found a
/// CRD without conditions.
const WAIT_ATTEMPTS: usize = 10;

/// The label every dry-run patch sets.
const PATCH_LABEL: &str = "corpus.mcr.dev/patched=true";

/// One step's command and answer.
#[derive(Debug, Clone)]
pub struct Record {
    /// The kubectl arguments (for the report).
    pub command: String,
    /// What kubectl answered.
    pub answer: Answer,
    /// Whether stdout holds objects as JSON.
    pub json: bool,
    /// Whether the output is compared (else the exit code only).
    pub output_compared: bool,
}

/// The records of one set in one mode, by `<mode>/<step>/<phase>`, in the order they ran.
pub type Records = Vec<(String, Record)>;

/// Runs every step of `set` in `mode`.
pub fn run(set: &Prepared, mode: Mode, kubectl: &Kubectl) -> Result<Records> {
    // The set's namespace is the context's (not `-n`, which kubectl refuses for objects that
    // name another namespace).
    let ns = set.namespace.as_str();
    let answer = kubectl.run(
        &set.dir,
        &[
            "config",
            "set-context",
            "--current",
            &format!("--namespace={ns}"),
        ],
    )?;
    if answer.code != 0 {
        bail!(
            "set {}: kubectl config set-context failed: {}",
            set.name,
            answer.stderr.trim()
        );
    }
    for namespace in &set.namespaces {
        let answer = kubectl.run(&set.dir, &["create", "namespace", namespace])?;
        if answer.code != 0 && !answer.stderr.contains("AlreadyExists") {
            bail!(
                "set {}: creating the namespace {namespace} failed: {}",
                set.name,
                answer.stderr.trim()
            );
        }
    }
    let apply: Vec<&str> = match mode {
        Mode::ServerSide => vec!["apply", "--server-side"],
        Mode::ClientSide => vec!["apply"],
    };
    let diff: Vec<&str> = match mode {
        Mode::ServerSide => vec!["diff", "--server-side"],
        Mode::ClientSide => vec!["diff"],
    };
    // kubectl hides managedFields unless asked: field ownership is compared too.
    let get = ["get", "-o", "json", "--show-managed-fields"];
    let patch = [
        "label",
        "--dry-run=server",
        "-o",
        "json",
        "--show-managed-fields",
        PATCH_LABEL,
    ];
    let mut records = Vec::new();
    let mut step = |name: &str, phases: &[&str], args: &[&str], json: bool| -> Result<()> {
        for phase in phases {
            if !set.phases.contains(phase) {
                continue;
            }
            let mut full: Vec<&str> = args.to_vec();
            full.extend(["-f", phase]);
            let answer = kubectl
                .run(&set.dir, &full)
                .with_context(|| format!("set {}: kubectl {}", set.name, full.join(" ")))?;
            let command = format!("kubectl {}", full.join(" "));
            // kube-apiserver deletes a CRD once its own finalizer has run, which it retries with
            // a growing backoff while the CRD's storage starts (from milliseconds to minutes
            // under load): which CRDs are left right after the delete is not determined.
            let output_compared = !(name == "leftover" && *phase == PHASES[1]);
            records.push((
                format!("{}/{name}/{phase}", mode.name()),
                Record {
                    command,
                    answer,
                    json,
                    output_compared,
                },
            ));
            if *phase == PHASES[1] && (name == "apply" || name == "apply-again") {
                let wait = [
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "-f",
                    phase,
                ];
                // Right after the create, a CRD may have no conditions yet, and `kubectl wait`
                // then fails at once ("accessor error") instead of waiting: asked again, a few
                // times.
                let mut answer = kubectl.run(&set.dir, &wait)?;
                for _ in 0..WAIT_ATTEMPTS {
                    if answer.code == 0 || !answer.stderr.contains("accessor error") {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    answer = kubectl.run(&set.dir, &wait)?;
                }
                records.push((
                    format!("{}/{name}-wait/{phase}", mode.name()),
                    Record {
                        command: format!("kubectl {}", wait.join(" ")),
                        answer,
                        json: false,
                        output_compared: true,
                    },
                ));
            }
        }
        Ok(())
    };
    let forward = PHASES;
    let backward: Vec<&str> = PHASES.iter().rev().copied().collect();
    step("apply", forward, &apply, false)?;
    step("get", forward, &get, true)?;
    step("apply-again", forward, &apply, false)?;
    step("get-again", forward, &get, true)?;
    step("diff", forward, &diff, false)?;
    step("patch", forward, &patch, true)?;
    step("delete", &backward, &["delete", "--wait=false"], false)?;
    step(
        "leftover",
        &backward,
        &[
            "get",
            "-o",
            "json",
            "--show-managed-fields",
            "--ignore-not-found",
        ],
        true,
    )?;
    Ok(records)
}

/// The exit codes the records show against the ones the set expects (a step the set does not
/// name must exit 0): one line per mismatch.
pub fn unexpected_codes(set: &Prepared, records: &Records, server: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let seen: BTreeMap<&str, i32> = records
        .iter()
        .map(|(key, r)| (key.as_str(), r.answer.code))
        .collect();
    for (key, record) in records {
        let expected = set.expect.get(key).copied().unwrap_or(0);
        // `kubectl diff` exits 1 when it found differences: a finding, compared with the
        // other server, not a failed step.
        let diff_found = key.contains("/diff/") && record.answer.code == 1;
        if record.answer.code != expected && !(diff_found && expected == 0) {
            lines.push(format!(
                "{}: {key}: `{}` exited {} on {server}, the corpus definition expects {expected}: {}",
                set.name,
                record.command,
                record.answer.code,
                record.answer.stderr.lines().take(3).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    for (key, code) in &set.expect {
        if !seen.contains_key(key.as_str()) {
            lines.push(format!(
                "{}: {key}: the corpus definition expects exit code {code} from a step that did not run",
                set.name
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn record(code: i32) -> Record {
        Record {
            command: "kubectl x".into(),
            answer: Answer {
                code,
                ..Answer::default()
            },
            json: false,
            output_compared: true,
        }
    }

    #[test]
    fn exit_codes_are_checked_against_the_definition() {
        let set = Prepared {
            name: "s".into(),
            dir: PathBuf::new(),
            namespace: "corpus-s".into(),
            namespaces: Vec::new(),
            phases: Vec::new(),
            objects: Vec::new(),
            expect: BTreeMap::from([
                ("csa/apply/1-crds".to_owned(), 1),
                ("csa/delete/1-crds".to_owned(), 1),
            ]),
        };
        let records: Records = vec![
            ("ssa/apply/2-objects".into(), record(0)),
            ("csa/apply/1-crds".into(), record(1)),
            // `kubectl diff` finding differences is not a failed step.
            ("ssa/diff/2-objects".into(), record(1)),
            ("ssa/get/2-objects".into(), record(1)),
        ];
        let lines = unexpected_codes(&set, &records, "kube-apiserver");
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].contains("ssa/get/2-objects") && lines[0].contains("expects 0"));
        assert!(lines[1].contains("csa/delete/1-crds") && lines[1].contains("did not run"));
    }
}
