//! Runs the sharded example end to end: three replicas share the fleet, one is killed, the
//! others take over and reconcile.

use std::process::Command;

#[test]
fn three_replicas_share_the_fleet_and_take_over_from_a_killed_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_example-sharded"))
        .args(["--clusters", "6"])
        .env_remove("RUST_LOG")
        .output()
        .expect("the example binary starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "example failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for line in [
        "[2/4] every cluster is owned by exactly one replica:",
        "[3/4] killed replica-2",
        "replica-1 and replica-3 took over after",
        "example-sharded finished: no cluster left behind.",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // After the kill, every cluster is owned by replica-1 or replica-3, and reconciled by it.
    let after: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("took over after"))
        .skip(1)
        .take(6)
        .collect();
    assert_eq!(after.len(), 6, "{stdout}");
    assert!(
        after
            .iter()
            .all(|l| l.ends_with("replica-1") || l.ends_with("replica-3")),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("reconciled by replica-").count(),
        6,
        "{stdout}"
    );
    assert!(stderr.trim().is_empty(), "quiet by default, got:\n{stderr}");
}
