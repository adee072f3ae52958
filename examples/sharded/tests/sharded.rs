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
        "[3/4] killed replica-",
        "took over after",
        "example-sharded finished: no cluster left behind.",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // The killed replica owned clusters; after the kill every cluster is owned by one of the
    // other two, and reconciled by it.
    let killed_line = stdout.lines().find(|l| l.contains("[3/4] killed")).unwrap();
    let killed = killed_line.split_whitespace().nth(2).unwrap();
    assert!(!killed_line.contains("(it owned 0 clusters)"), "{stdout}");
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
            .all(|l| l.contains("owned by replica-") && !l.ends_with(killed)),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("reconciled by replica-").count(),
        6,
        "{stdout}"
    );
    assert!(stderr.trim().is_empty(), "quiet by default, got:\n{stderr}");
}
