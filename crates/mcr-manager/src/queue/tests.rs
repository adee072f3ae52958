use std::{future::poll_fn, time::Duration};

use tokio::time::Instant;

use super::*;

fn c(s: &str) -> ClusterName {
    ClusterName::new(s)
}

fn now() -> Instant {
    Instant::now()
}

/// Waits (up to 30 s) until at least one delayed key became ready.
async fn expire(q: &mut WorkQueue<&'static str>) {
    tokio::time::timeout(Duration::from_secs(30), poll_fn(|cx| q.poll_expired(cx)))
        .await
        .expect("a delayed key should expire");
}

#[test]
fn deduplicates_waiting_keys() {
    let mut q = WorkQueue::default();
    q.push(&c("a"), "x", now());
    q.push(&c("a"), "x", now());
    q.push(&c("b"), "x", now());
    assert_eq!(q.len(), 2, "same key in two clusters is two keys");
    assert_eq!(q.pop().map(|(c, k)| (c, *k)), Some((c("a"), "x")));
    assert_eq!(q.pop().map(|(c, k)| (c, *k)), Some((c("b"), "x")));
    assert!(q.pop().is_none());
}

#[test]
fn running_key_is_not_handed_out_twice_and_reruns_once() {
    let mut q = WorkQueue::default();
    q.push(&c("a"), "x", now());
    let (cl, k) = q.pop().unwrap();
    // Three events while it runs.
    for _ in 0..3 {
        q.push(&c("a"), "x", now());
    }
    assert!(q.pop().is_none(), "a running key must not be handed out");
    q.done(&cl, &k, Outcome::Success(None));
    assert_eq!(q.pop().map(|(_, k)| *k), Some("x"), "runs once more after");
    q.done(&cl, &k, Outcome::Success(None));
    assert!(q.pop().is_none(), "and only once");
    assert!(q.is_idle());
}

#[test]
fn fair_across_clusters_under_flood() {
    let mut q = WorkQueue::default();
    let keys: Vec<String> = (0..10_000).map(|i| format!("obj-{i}")).collect();
    for k in &keys {
        q.push(&c("flood"), k.clone(), now());
    }
    q.push(&c("quiet"), "lonely".to_string(), now());
    let first_two: Vec<ClusterName> = (0..2).map(|_| q.pop().unwrap().0).collect();
    assert!(
        first_two.contains(&c("quiet")),
        "the quiet cluster is served within the first round: {first_two:?}"
    );
}

#[tokio::test]
async fn delayed_keys_become_ready() {
    let mut q = WorkQueue::default();
    q.push(&c("a"), "x", now() + Duration::from_millis(20));
    assert!(q.pop().is_none(), "not ready before its time");
    assert_eq!(q.len(), 1);
    expire(&mut q).await;
    assert_eq!(q.pop().map(|(_, k)| *k), Some("x"));
}

#[tokio::test]
async fn earlier_request_wins_over_delay() {
    let mut q = WorkQueue::default();
    q.push(&c("a"), "x", now() + Duration::from_secs(3600));
    q.push(&c("a"), "x", now());
    assert_eq!(q.pop().map(|(_, k)| *k), Some("x"));
    assert_eq!(q.len(), 0, "the delayed copy is gone");
}

#[tokio::test]
async fn requeue_after_success_and_backoff_after_panic() {
    let mut q = WorkQueue::default();
    q.push(&c("a"), "x", now());
    let (cl, k) = q.pop().unwrap();
    q.done(
        &cl,
        &k,
        Outcome::Success(Some(now() + Duration::from_millis(10))),
    );
    assert!(q.pop().is_none());
    expire(&mut q).await;
    let (cl, k) = q.pop().unwrap();
    q.done(&cl, &k, Outcome::Backoff);
    assert!(q.pop().is_none(), "backoff delays the retry");
    expire(&mut q).await;
    assert_eq!(q.pop().map(|(_, k)| *k), Some("x"));
}

#[test]
fn failure_without_requeue_forgets_the_key() {
    let mut q = WorkQueue::default();
    q.push(&c("a"), "x", now());
    let (cl, k) = q.pop().unwrap();
    q.done(&cl, &k, Outcome::Failure(None));
    assert!(q.is_idle());
}

#[test]
fn backoff_grows_and_is_capped() {
    assert_eq!(backoff(1), Duration::from_millis(5));
    assert_eq!(backoff(2), Duration::from_millis(10));
    assert!(backoff(5) > backoff(4));
    assert_eq!(backoff(1000), BACKOFF_MAX);
}

#[tokio::test]
async fn removing_a_cluster_drops_its_waiting_keys() {
    let mut q = WorkQueue::default();
    q.push(&c("gone"), "running", now());
    let (cl, running) = q.pop().unwrap();
    q.push(&c("gone"), "ready", now());
    q.push(&c("gone"), "later", now() + Duration::from_secs(3600));
    q.push(&c("gone"), "running", now()); // would rerun after done
    q.push(&c("stays"), "y", now());

    assert_eq!(q.remove_cluster(&c("gone")), 2);
    assert_eq!(q.len(), 1);
    assert_eq!(q.ready_len(&c("gone")), 0);
    assert_eq!(q.pop().map(|(c, k)| (c, *k)), Some((c("stays"), "y")));
    // The running reconcile finishes but is not requeued.
    q.done(&cl, &running, Outcome::Success(None));
    assert!(q.pop().is_none());
}
