//! What a member another replica owns costs this replica: its entry in the table (its name,
//! its source: a provider's [`Connection`], whose parsed kubeconfig is shared here, so only
//! the per-name overhead is counted); no task, client, cache or informer. Measured as the
//! growth of the resident memory (Linux) over 20,000 members: at most 768 bytes per member (a
//! parked task per member cost 1,719 bytes, 2026-11-28).

use mcr_core::members::{Connection, Members, MembersOptions};
use mcr_core::{ClusterName, Engagements, Source};
use mcr_test_support::{Owned, rss};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "current_thread")]
async fn a_member_owned_elsewhere_costs_at_most_768_bytes() {
    const N: usize = 20_000;
    let Some(_) = rss() else {
        eprintln!("no /proc/self/status: skipped");
        return;
    };
    let table = Engagements::new();
    let _ = table.coordinate(Owned::nothing());
    let members = Members::new(MembersOptions::default());
    members.bind(&table).unwrap();
    let token = CancellationToken::new();
    let desired = Connection::parse(
        br#"
clusters: [{name: c, cluster: {server: "https://10.0.0.1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"#,
    )
    .unwrap();
    let names: Vec<ClusterName> = (0..N)
        .map(|i| ClusterName::from(format!("member-{i:05}")))
        .collect();
    let settle = || async {
        // Current-thread runtime: anything spawned runs up to its wait before this task is
        // polled again (nothing should be).
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    };
    settle().await;
    let before = rss().unwrap();
    for name in &names {
        members
            .want(&token, name, Source::Kubeconfig(desired.clone()))
            .unwrap();
    }
    settle().await;
    let after = rss().unwrap();
    let per_member = (after - before) as f64 / N as f64;
    println!("per member owned elsewhere: {per_member:.0} bytes of RSS (name included)");
    assert!(members.engagements().names().is_empty());
    assert!(per_member <= 768.0, "{per_member} bytes per member");
    assert_eq!(members.member_statuses().len(), N);
    token.cancel();
}
