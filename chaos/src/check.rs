//! Reading what the controllers did, straight from each member's API server.
//!
//! Controller A copies an object's `data.v` into the annotation [`SEEN_A`], controller B into
//! [`SEEN_B`]. A member has caught up with a target (the loader's acknowledged values at some
//! instant) when both annotations of every object hold a value written after that instant:
//! the member was written to, and reconciled, since.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tokio::time::Instant;

use crate::world::{LABEL, NAMESPACE, object_name};

/// Annotation written by controller A.
pub const SEEN_A: &str = "mcr-chaos/seen-a";
/// Annotation written by controller B.
pub const SEEN_B: &str = "mcr-chaos/seen-b";
/// How often an unconverged member is read again.
const POLL: Duration = Duration::from_millis(100);
/// Members read at once.
const PARALLEL: usize = 16;

/// One object as the API server has it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    /// `data.v`.
    pub v: u64,
    /// Controller A's annotation (0 if absent).
    pub a: u64,
    /// Controller B's annotation (0 if absent).
    pub b: u64,
}

/// The chaos objects of a member, by index (`None` for a missing object).
pub async fn read(client: kube::Client, objects: usize) -> Option<Vec<Option<Seen>>> {
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let params = ListParams::default().labels(&format!("{LABEL}=1"));
    let list = tokio::time::timeout(Duration::from_secs(5), api.list(&params))
        .await
        .ok()?
        .ok()?;
    let num = |s: Option<&String>| s.and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let by_name: BTreeMap<String, Seen> = list
        .items
        .iter()
        .map(|cm| {
            let seen = Seen {
                v: num(cm.data.as_ref().and_then(|d| d.get("v"))),
                a: num(cm.annotations().get(SEEN_A)),
                b: num(cm.annotations().get(SEEN_B)),
            };
            (cm.name_any(), seen)
        })
        .collect();
    Some(
        (0..objects)
            .map(|i| by_name.get(&object_name(i)).copied())
            .collect(),
    )
}

/// Whether both annotations of every object hold a value above its target (values grow, so
/// a value above the target was written after the target was taken).
pub fn caught_up(seen: &[Option<Seen>], targets: &[u64]) -> bool {
    seen.iter()
        .zip(targets)
        .all(|(s, &t)| s.is_some_and(|s| s.a > t && s.b > t))
}

/// Whether every object's current value is reconciled by both controllers (writes stopped).
pub fn settled(seen: &[Option<Seen>]) -> bool {
    seen.iter()
        .all(|s| s.is_some_and(|s| s.a == s.v && s.b == s.v))
}

/// A member to wait for: its index, a client, and its targets.
pub struct Waited {
    /// Member index.
    pub member: usize,
    /// A client of the member (not the manager's).
    pub client: kube::Client,
    /// Per object, the value both controllers must pass; `None`: every current value.
    pub targets: Option<Vec<u64>>,
}

/// Polls every member until it caught up or `bound` passes; returns, per member, how long
/// it took from `since` (`None`: not within the bound), and the last reading of the laggards.
pub async fn wait_all(
    members: Vec<Waited>,
    objects: usize,
    since: Instant,
    bound: Duration,
) -> (
    Vec<(usize, Option<Duration>)>,
    Vec<(usize, Vec<Option<Seen>>)>,
) {
    let mut done = Vec::new();
    let mut pending: Vec<(Waited, Vec<Option<Seen>>)> =
        members.into_iter().map(|w| (w, Vec::new())).collect();
    loop {
        let results: Vec<(Waited, Vec<Option<Seen>>, bool)> = stream::iter(pending)
            .map(|(w, last)| async move {
                let seen = read(w.client.clone(), objects).await;
                let ok = seen.as_ref().is_some_and(|s| match &w.targets {
                    Some(t) => caught_up(s, t),
                    None => settled(s),
                });
                (w, seen.unwrap_or(last), ok)
            })
            .buffer_unordered(PARALLEL)
            .collect()
            .await;
        pending = Vec::new();
        for (w, seen, ok) in results {
            if ok {
                done.push((w.member, Some(since.elapsed())));
            } else {
                pending.push((w, seen));
            }
        }
        if pending.is_empty() || since.elapsed() >= bound {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let laggards: Vec<(usize, Vec<Option<Seen>>)> =
        pending.into_iter().map(|(w, s)| (w.member, s)).collect();
    done.extend(laggards.iter().map(|(m, _)| (*m, None)));
    (done, laggards)
}

/// `member-N` names.
pub fn names(members: &[usize]) -> String {
    let names: Vec<String> = members
        .iter()
        .map(|m| format!("member-{}", m + 1))
        .collect();
    names.join(", ")
}

/// The laggards and every object of theirs as last read (`v`, `a`, `b`).
pub fn describe(laggards: &[(usize, Vec<Option<Seen>>)]) -> String {
    let shown: Vec<String> = laggards
        .iter()
        .take(10)
        .map(|(m, seen)| {
            let objects: Vec<String> = seen
                .iter()
                .enumerate()
                .map(|(i, s)| match s {
                    Some(s) => format!("chaos-{i}: v={} a={} b={}", s.v, s.a, s.b),
                    None => format!("chaos-{i}: unread"),
                })
                .collect();
            format!("member-{} ({})", m + 1, objects.join("; "))
        })
        .collect();
    let more = laggards.len().saturating_sub(10);
    let kinds = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("{}{kinds}", shown.join(", "))
}
