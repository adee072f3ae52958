//! `cargo xtask fidelity`: the emulator and a real kube-apiserver side by side.
//!
//! Runs `mcr-envtest`'s differential check (`crates/mcr-envtest/tests/fidelity.rs`): seeded
//! request sequences go to both servers, and every status code, normalised body and watch
//! event must match, except the divergences `crates/mcr-envtest/tests/fidelity-accepted.json`
//! lists with their reasons. The report gives the number of sequences, requests and watch
//! events, and each divergence with a minimal repro (the requests on the same object up to
//! the one that differed). The binaries come from `KUBEBUILDER_ASSETS` or
//! `cargo xtask assets`.

use anyhow::{Context, Result};

/// What to run.
pub struct Fidelity {
    /// Seed of the request sequences (default: from the clock, printed).
    pub seed: Option<u64>,
    /// Number of sequences (one namespace each).
    pub sequences: usize,
    /// Random requests per sequence (plus a namespace, two lists and two watch markers).
    pub steps: usize,
}

/// Runs the differential check; fails on any divergence outside the accepted list.
pub fn run(opts: Fidelity) -> Result<()> {
    let dir = super::assets::directory()?.display().to_string();
    let seed = opts.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1)
    });
    eprintln!(
        "fidelity: seed {seed}, {} sequences of {} requests (repeat with --seed {seed})",
        opts.sequences, opts.steps
    );
    let selection = selection(dir, seed.to_string(), opts);
    super::tests::run(&[selection])
        .context("the emulator diverged from kube-apiserver (see the report above)")
}

/// The differential check's test binary and environment, for [`run`] and for the
/// conformance suite, which runs it next to the others.
pub fn selection(assets: String, seed: String, opts: Fidelity) -> super::tests::Selection<'static> {
    super::tests::Selection {
        packages: &["mcr-envtest"],
        test: Some("fidelity"),
        args: &[
            "--ignored",
            "--nocapture",
            "differential_check_against_kube_apiserver",
        ],
        envs: vec![
            ("KUBEBUILDER_ASSETS", assets),
            ("MCR_FIDELITY_SEED", seed),
            ("MCR_FIDELITY_SEQUENCES", opts.sequences.to_string()),
            ("MCR_FIDELITY_STEPS", opts.steps.to_string()),
        ],
    }
}
