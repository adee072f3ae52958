//! Runs the example end to end: every cluster's route refuses the invalid ConfigMap, naming
//! the cluster (through real kube-apiservers with MCR_ENVTEST=real).

use std::process::Command;

#[test]
fn every_cluster_refuses_the_invalid_config_map() {
    let out = Command::new(env!("CARGO_BIN_EXE_example-webhook"))
        .args(["--clusters", "2"])
        .env_remove("RUST_LOG")
        .output()
        .expect("the example binary starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "example-webhook failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for cluster in ["<host>", "member-1", "member-2"] {
        let refused = format!("{cluster}: replicas=\"eleven\" refused: ");
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&refused))
            .unwrap_or_else(|| panic!("no refusal for {cluster} in:\n{stdout}"));
        assert!(
            line.contains(&format!(
                "data.replicas must be a number from 0 to 10, not \"eleven\" (cluster {cluster})"
            )),
            "{line}"
        );
        assert!(
            stdout.contains(&format!("{cluster}: replicas=\"3\" accepted")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("webhook example finished"), "{stdout}");
    assert!(stderr.trim().is_empty(), "quiet by default, got:\n{stderr}");
}

#[test]
fn a_sharded_fleet_calls_each_members_owner() {
    let out = Command::new(env!("CARGO_BIN_EXE_example-webhook"))
        .args(["--clusters", "4", "--replicas", "2"])
        .env_remove("RUST_LOG")
        .output()
        .expect("the example binary starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "example-webhook failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    // On the emulator the example sends each review by hand to the URL the member's owner
    // wrote and says which replica that is; on real control planes the member's API server
    // calls that URL itself, and its refusal names the webhook.
    let real = mcr_envtest::backend().is_real();
    for member in ["member-1", "member-2", "member-3", "member-4"] {
        if !real {
            assert!(
                stdout.contains(&format!("{member}: configured to call replica-")),
                "{member} has no owner's URL in:\n{stdout}"
            );
        }
        let refused = format!("{member}: replicas=\"eleven\" refused: ");
        let reason = format!(
            "data.replicas must be a number from 0 to 10, not \"eleven\" (cluster {member})"
        );
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&refused) && l.ends_with(&reason)),
            "{stdout}"
        );
    }
    // Each replica owns some of the four members (the split of these names is fixed).
    for replica in ["replica-1 (", "replica-2 ("] {
        assert!(
            real || stdout.contains(&format!("configured to call {replica}")),
            "no member calls {replica} in:\n{stdout}"
        );
    }
    assert!(stderr.trim().is_empty(), "quiet by default, got:\n{stderr}");
}
