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

/// A debounce period long enough that nothing expires while a test runs.
const LONG: Duration = Duration::from_secs(600);

/// An instant `LONG` ago: a request asked for then is due now even with the debounce.
fn long_ago() -> Instant {
    now()
        .checked_sub(LONG)
        .expect("the monotonic clock is older than ten minutes")
}

#[tokio::test]
async fn debounce_holds_a_request_for_the_period() {
    let mut q = WorkQueue::with_debounce(LONG);
    let t0 = now();
    q.push(&c("a"), "x", t0);
    assert!(q.pop().is_none(), "held for the debounce period");
    assert_eq!(q.due_at(&c("a"), &"x"), Some(t0 + LONG));
}

#[tokio::test]
async fn each_new_event_within_the_window_pushes_it_back() {
    let mut q = WorkQueue::with_debounce(LONG);
    let t0 = now();
    q.push(&c("a"), "x", t0);
    q.push(&c("b"), "x", t0);
    let t1 = t0 + Duration::from_secs(3);
    q.push(&c("a"), "x", t1);
    assert_eq!(q.due_at(&c("a"), &"x"), Some(t1 + LONG), "pushed back");
    assert_eq!(
        q.due_at(&c("b"), &"x"),
        Some(t0 + LONG),
        "other keys keep theirs"
    );
    assert_eq!(q.len(), 2, "still one entry per key");
}

#[tokio::test]
async fn a_later_request_does_not_delay_a_waiting_key() {
    // E.g. the reconciler asks for a requeue in an hour while a change waits: the change
    // still runs at its own time (kube-runtime: the earlier request wins).
    let mut q = WorkQueue::with_debounce(LONG);
    let t0 = now();
    q.push(&c("a"), "x", t0);
    q.push(&c("a"), "x", t0 + Duration::from_secs(3600));
    assert_eq!(q.due_at(&c("a"), &"x"), Some(t0 + LONG));
}

#[tokio::test]
async fn an_earlier_request_brings_a_delayed_key_forward() {
    let mut q = WorkQueue::with_debounce(LONG);
    let t0 = now();
    q.push(&c("a"), "x", t0 + Duration::from_secs(3600));
    q.push(&c("a"), "x", t0);
    assert_eq!(q.due_at(&c("a"), &"x"), Some(t0 + LONG));
}

#[tokio::test]
async fn a_burst_runs_once_after_the_quiet_period() {
    let mut q = WorkQueue::with_debounce(Duration::from_millis(20));
    for _ in 0..5 {
        q.push(&c("a"), "x", now());
    }
    assert!(q.pop().is_none(), "held while events keep coming");
    expire(&mut q).await;
    assert_eq!(q.pop().map(|(_, k)| *k), Some("x"));
    assert!(q.pop().is_none(), "a burst is one reconcile");
}

#[tokio::test]
async fn events_while_running_are_debounced_and_run_once_after() {
    let mut q = WorkQueue::with_debounce(LONG);
    q.push(&c("a"), "x", long_ago());
    let (cl, k) = q.pop().expect("due at once");
    let t1 = now();
    q.push(&c("a"), "x", t1);
    let t2 = t1 + Duration::from_secs(1);
    q.push(&c("a"), "x", t2);
    assert!(q.pop().is_none(), "a running key is not handed out");
    q.done(&cl, &k, Outcome::Success(None));
    assert_eq!(
        q.due_at(&c("a"), &"x"),
        Some(t2 + LONG),
        "the last event within the window decides"
    );
}

#[tokio::test]
async fn a_requeue_is_debounced_like_any_request() {
    let mut q = WorkQueue::with_debounce(LONG);
    q.push(&c("a"), "x", long_ago());
    let (cl, k) = q.pop().expect("due at once");
    let at = now() + Duration::from_secs(5);
    q.done(&cl, &k, Outcome::Failure(Some(at)));
    assert_eq!(q.due_at(&c("a"), &"x"), Some(at + LONG));
}

#[tokio::test]
async fn a_follow_up_already_due_is_not_delayed_by_a_requeue() {
    let mut q = WorkQueue::with_debounce(LONG);
    q.push(&c("a"), "x", long_ago());
    let (cl, k) = q.pop().expect("due at once");
    q.push(&c("a"), "x", long_ago()); // due again already, while it runs
    q.push(&c("a"), "x", now()); // ignored: the follow-up is already due
    q.done(
        &cl,
        &k,
        Outcome::Success(Some(now() + Duration::from_secs(3600))),
    );
    assert_eq!(q.pop().map(|(_, k)| *k), Some("x"), "runs right away");
}

#[tokio::test]
async fn a_huge_requeue_is_clamped_instead_of_panicking() {
    let mut q = WorkQueue::with_debounce(Duration::MAX);
    q.push(&c("a"), "x", now());
    let due = q.due_at(&c("a"), &"x").expect("delayed");
    assert!(due <= after(now(), MAX_DELAY));
    assert!(due > now() + Duration::from_secs(3600));
}

#[test]
fn a_ready_key_is_due_from_its_request_not_from_an_earlier_at() {
    let mut q = WorkQueue::default();
    let before = now();
    q.push(&c("a"), "x", long_ago());
    let after = now();
    let (_, _, since) = q.pop_due().unwrap();
    assert!(
        before <= since && since <= after,
        "due when it was asked for"
    );
}

#[tokio::test]
async fn a_delayed_key_is_due_from_its_time_not_from_when_the_timer_fired() {
    let mut q = WorkQueue::default();
    q.push(&c("a"), "x", now() + Duration::from_millis(20));
    let due = q.due_at(&c("a"), &"x").expect("delayed");
    expire(&mut q).await;
    assert_eq!(q.pop_due().map(|(_, _, since)| since), Some(due));
}

#[test]
fn a_follow_up_while_running_is_due_from_its_arrival() {
    let mut q = WorkQueue::default();
    q.push(&c("a"), "x", now());
    let (cl, k) = q.pop().unwrap();
    let t1 = now();
    q.push(&c("a"), "x", t1);
    q.done(&cl, &k, Outcome::Success(None));
    assert_eq!(q.pop_due().map(|(_, _, since)| since), Some(t1));
}

#[test]
fn each_cluster_keeps_its_own_due_instants() {
    let mut q = WorkQueue::default();
    let t0 = now();
    q.push(&c("flood"), "f1", t0);
    q.push(&c("flood"), "f2", t0);
    let t1 = now();
    q.push(&c("quiet"), "q", t1);
    let popped: Vec<_> = std::iter::from_fn(|| q.pop_due())
        .map(|(cl, k, since)| (cl, *k, since))
        .collect();
    assert_eq!(popped[1].0, c("quiet"));
    assert!(
        popped[1].2 >= t1,
        "the quiet key waits from its own request"
    );
    assert!(popped.iter().all(|(_, _, since)| *since >= t0));
}

#[test]
fn live_keys_are_served_before_keys_of_initial_lists() {
    let mut q = WorkQueue::default();
    // A thousand clusters join: one initial key each.
    for i in 0..1000 {
        q.push_initial(&c(&format!("new-{i}")), "x", now());
    }
    // A live change in a synced cluster goes first, not after a thousand others.
    q.push(&c("synced"), "live", now());
    assert_eq!(q.pop().map(|(c, k)| (c, *k)), Some((c("synced"), "live")));
    // Then the initial keys, round-robin across clusters.
    assert_eq!(q.pop().map(|(c, _)| c), Some(c("new-0")));
    assert_eq!(q.pop().map(|(c, _)| c), Some(c("new-1")));
    assert_eq!(q.len(), 998);
}

#[test]
fn a_live_change_promotes_a_waiting_initial_key_once() {
    let mut q = WorkQueue::default();
    q.push_initial(&c("a"), "x", now());
    q.push_initial(&c("a"), "y", now());
    q.push_initial(&c("b"), "z", now());
    // `y` changes live: it moves ahead; its initial copy is skipped later.
    q.push(&c("a"), "y", now());
    // A second initial request for a waiting key changes nothing.
    q.push_initial(&c("a"), "y", now());
    assert_eq!(q.len(), 3);
    let order: Vec<&str> = std::iter::from_fn(|| q.pop()).map(|(_, k)| *k).collect();
    assert_eq!(order, ["y", "x", "z"], "each key handed out once");
}

#[test]
fn a_cluster_leaving_drops_its_initial_keys_too() {
    let mut q = WorkQueue::default();
    q.push_initial(&c("a"), "x", now());
    q.push_initial(&c("a"), "y", now());
    q.push(&c("a"), "y", now());
    q.push(&c("b"), "z", now());
    assert_eq!(q.remove_cluster(&c("a")), 2);
    assert_eq!(q.pop().map(|(c, k)| (c, *k)), Some((c("b"), "z")));
    assert!(q.pop().is_none());
}

#[test]
fn a_refused_cluster_does_not_hold_back_initial_keys_of_others() {
    let mut q = WorkQueue::default();
    q.push(&c("capped"), "live", now());
    q.push_initial(&c("new"), "x", now());
    // The live key's cluster is at its cap: the other cluster's initial key is served.
    let popped = q.pop_due_where(|name| name != &c("capped"));
    assert_eq!(popped.map(|(c, k, _)| (c, *k)), Some((c("new"), "x")));
}
