//! `cargo xtask e2e`: the examples' tests and the cross-crate tests against real control planes.
//!
//! Every `mcr-envtest` cluster those tests start becomes a real `kube-apiserver` + `etcd`
//! (`MCR_ENVTEST=real`). The binaries come from `KUBEBUILDER_ASSETS` when it is set (for
//! example setup-envtest's directory), otherwise from `cargo xtask assets` (built with Go on
//! first use, cached after). `--conformance` also runs `mcr-envtest`'s own suites, which
//! compare the emulator's behaviour with the real server's, and a `cargo xtask fidelity` run
//! of the default size (120 sequences of 80 requests, about 10,000 requests per server, about
//! a minute) with a fixed seed.
//!
//! Among the examples' tests, `tests/rbac.rs` of example-kubeconfig, example-namespace,
//! example-capi and example-cluster-inventory prove the shipped `deploy/` RBAC on these real API
//! servers (RBAC authorization; kubectl from the same assets); example-kubeconfig's also checks
//! the Helm chart (`charts/mcr-controller`) with the assets' helm. Those packages are in
//! `e2e::PACKAGES`; on the emulator the same tests say they are skipped. example-sharded's
//! `tests/processes.rs` runs three replica processes (`example-sharded replica`) on real
//! control planes: their peer Leases on a real kube-apiserver, a kill -9 taken over, clean stops.
//!
//! The suites run the binaries of the workspace's test build (`tests`), not `cargo test -p`,
//! which would build every dependency again with other features; two binaries at a time
//! (`MCR_TEST_JOBS`), each one's output printed whole when it ends, the RBAC proofs first.
//!
//! mcr-webhook's tests have real kube-apiservers call the webhook server: members writing
//! through three sharded replicas behind one address while one is killed and another joins
//! (`tests/sharded.rs`), reviews answered during a flood of 1,000 silent connections
//! (`tests/connections.rs`), each member's apiserver presenting its client certificate
//! through an `AdmissionConfiguration` (`tests/auth.rs`), and a serving CA rotated while two
//! members write (`tests/members.rs`).
//!
//! When podman has the image `cargo xtask image` builds, example-kubeconfig's `tests/rbac.rs`
//! runs the controller in that container instead of as a process (`MCR_E2E_IMAGE`, set here
//! unless the caller set it; set it empty to run the process): `--network host`, read-only
//! root, no capability, the ServiceAccount token mounted as a Pod gets it.

use anyhow::{Context, Result};

/// Packages besides the examples (`e2e::PACKAGES`) whose tests make up the e2e suite.
const EXTRA_PACKAGES: &[&str] = &["mcr-tests", "quickstart", "mcr-webhook", "example-webhook"];

/// Runs the suites with `MCR_ENVTEST=real`.
pub fn run(conformance: bool) -> Result<()> {
    let dir = super::assets::directory()?;
    let dir = dir.display().to_string();
    let image = match std::env::var("MCR_E2E_IMAGE") {
        Ok(image) => image,
        Err(_) if super::image::exists() => super::image::tag(),
        Err(_) => String::new(),
    };
    if image.is_empty() {
        eprintln!(
            "xtask: no image (`cargo xtask image`): the RBAC proof runs example-kubeconfig as a process"
        );
    } else {
        eprintln!(
            "xtask: the kubeconfig RBAC proof runs the controller in {image} (rebuild it with `cargo xtask image` after changing the example)"
        );
    }
    let env = vec![
        ("MCR_ENVTEST", "real".to_owned()),
        ("KUBEBUILDER_ASSETS", dir.clone()),
        ("MCR_E2E_IMAGE", image),
    ];
    let packages: Vec<&str> = EXTRA_PACKAGES
        .iter()
        .chain(super::e2e::PACKAGES)
        .copied()
        .collect();
    let mut selections = Vec::new();
    if conformance {
        selections.push(super::tests::Selection {
            packages: &["mcr-envtest"],
            test: None,
            args: &[],
            envs: env.clone(),
        });
        // The differential run: a fixed seed, so a divergence here is reproducible.
        let fidelity = super::fidelity::Fidelity {
            seed: Some(7),
            sequences: 120,
            steps: 80,
        };
        eprintln!("fidelity: seed 7, 120 sequences of 80 requests (repeat with --seed 7)");
        selections.push(super::fidelity::selection(dir, "7".to_owned(), fidelity));
    }
    selections.push(super::tests::Selection {
        packages: &packages,
        test: None,
        args: &[],
        envs: env,
    });
    super::tests::run(&selections).context("suites failed against real control planes")
}
