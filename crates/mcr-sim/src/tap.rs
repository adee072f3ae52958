//! Faults on an open watch: the body a replica reads, between it and the API server's stream
//! of events.
//!
//! What a real watch can do, and nothing more: events arrive late (delay); the connection
//! stops delivering without closing (hang) and is found dead later (then it closes, and the
//! client resumes from the last version it saw); the connection drops with an event in flight
//! (cut: that event is lost, and the client's resumed watch replays it); two events of
//! different objects swap places (reorder: each object's own events stay in order, as
//! behind a watch cache); an event arrives twice, or an older version of an object arrives
//! after a newer one (a stream that lags behind what a consistent list already showed).
//! Bookmarks and errors pass untouched.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::net::{Faults, Partition, WatchFaults};
use crate::wire::{BoxError, SimBody};

/// How long a reordered event is held at most, waiting for one to swap with.
const HOLD: Duration = Duration::from_millis(500);

/// The object an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    kind: String,
    namespace: String,
    name: String,
}

#[derive(serde::Deserialize)]
struct EventHead {
    #[serde(rename = "type")]
    kind: String,
    object: ObjectHead,
}

#[derive(serde::Deserialize)]
struct ObjectHead {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: MetaHead,
}

#[derive(serde::Deserialize, Default)]
struct MetaHead {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

/// The object of an ADDED, MODIFIED or DELETED event; `None` for anything else.
fn key(line: &[u8]) -> Option<Key> {
    let head: EventHead = serde_json::from_slice(line).ok()?;
    matches!(head.kind.as_str(), "ADDED" | "MODIFIED" | "DELETED").then(|| Key {
        kind: head.object.kind,
        namespace: head.object.metadata.namespace,
        name: head.object.metadata.name,
    })
}

/// A watch body of `resource` (its plural) read through the faults of its path.
struct Tap {
    inner: kube::client::Body,
    faults: watch::Receiver<Faults>,
    resource: String,
    rng: fastrand::Rng,
    /// Bytes read and not yet split into lines.
    partial: Vec<u8>,
    /// Lines ready for the client.
    out: VecDeque<Bytes>,
    /// An event held back to swap with the next one, until when.
    held: Option<(Bytes, Key, Instant)>,
    /// An event to deliver again after the next event of the same object.
    replay: Option<(Bytes, Key)>,
    /// The server's stream ended (or the connection was cut).
    done: bool,
}

/// `inner` (a watch of `resource`) as the replica reads it through `faults`; `seed` drives
/// this body's own choices.
pub(crate) fn tap(
    inner: kube::client::Body,
    faults: watch::Receiver<Faults>,
    resource: &str,
    seed: u64,
) -> SimBody {
    let tap = Tap {
        inner,
        faults,
        resource: resource.to_owned(),
        rng: fastrand::Rng::with_seed(seed),
        partial: Vec::new(),
        out: VecDeque::new(),
        held: None,
        replay: None,
        done: false,
    };
    let lines = futures::stream::unfold(tap, |mut tap| async move {
        let line = tap.next().await?;
        Some((Ok::<_, BoxError>(Frame::data(line)), tap))
    });
    StreamBody::new(lines).boxed_unsync()
}

/// Whether a fault of `per_mille` fires.
fn roll(rng: &mut fastrand::Rng, per_mille: u32) -> bool {
    per_mille > 0 && rng.u32(0..1000) < per_mille
}

impl Tap {
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(line) = self.out.pop_front() {
                return Some(line);
            }
            if self.done {
                return None;
            }
            let faults = self.faults.borrow_and_update().clone();
            match faults.partition {
                Some(Partition::Refuse) => return None,
                Some(Partition::Hang) => {
                    self.wait_while(|f| f.partition == Some(Partition::Hang))
                        .await?;
                    // Healed: the connection survived the partition, or it did not.
                    if self.rng.bool() {
                        return None;
                    }
                    continue;
                }
                None => {}
            }
            if faults.watch.hangs(&self.resource) {
                let resource = self.resource.clone();
                self.wait_while(move |f| f.watch.hangs(&resource)).await?;
                // Found dead: closed, the client resumes from what it saw.
                return None;
            }
            let release = self.held.as_ref().map(|(_, _, until)| *until);
            let line = tokio::select! {
                biased;
                changed = self.faults.changed() => {
                    changed.ok()?;
                    continue;
                }
                () = sleep_until(release) => {
                    if let Some((line, _, _)) = self.held.take() {
                        self.out.push_back(line);
                    }
                    continue;
                }
                line = read_line(&mut self.inner, &mut self.partial) => line,
            };
            match line {
                Some(line) => self.shape(line, &faults.watch).await,
                None => {
                    self.done = true;
                    if let Some((line, _, _)) = self.held.take() {
                        self.out.push_back(line);
                    }
                }
            }
        }
    }

    /// Waits while `hanging(faults)`; `None` if the faults' sender is gone.
    async fn wait_while(&mut self, hanging: impl Fn(&Faults) -> bool) -> Option<()> {
        while hanging(&self.faults.borrow_and_update()) {
            self.faults.changed().await.ok()?;
        }
        Some(())
    }

    /// Delivers one event line through `faults`.
    async fn shape(&mut self, line: Bytes, faults: &WatchFaults) {
        let Some(key) = key(&line) else {
            if let Some((held, _, _)) = self.held.take() {
                self.out.push_back(held);
            }
            self.out.push_back(line);
            return;
        };
        if roll(&mut self.rng, faults.cut) {
            // The connection drops with this event (and any held one) in flight.
            self.done = true;
            self.held = None;
            return;
        }
        if faults.delay > 0 {
            let delay = self.rng.u64(0..=faults.delay);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
        }
        match self.held.take() {
            Some((held, held_key, _)) if held_key != key => {
                self.out.push_back(line.clone());
                self.out.push_back(held);
            }
            Some((held, _, _)) => {
                self.out.push_back(held);
                self.out.push_back(line.clone());
            }
            None if roll(&mut self.rng, faults.reorder) => {
                self.held = Some((line, key, Instant::now() + HOLD));
                return;
            }
            None => self.out.push_back(line.clone()),
        }
        if let Some((old, old_key)) = self.replay.take()
            && old_key == key
        {
            // An older version after a newer one.
            self.out.push_back(old);
        }
        if roll(&mut self.rng, faults.dup) {
            if self.rng.bool() {
                self.out.push_back(line);
            } else {
                self.replay = Some((line, key));
            }
        }
    }
}

/// The next event line of the server's stream `inner` (`partial`: what was read of it
/// and not returned yet; nothing is lost if this is dropped between frames).
async fn read_line(inner: &mut kube::client::Body, partial: &mut Vec<u8>) -> Option<Bytes> {
    loop {
        if let Some(end) = partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = partial.drain(..=end).collect();
            return Some(Bytes::from(line));
        }
        match inner.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    partial.extend_from_slice(&data);
                }
            }
            Some(Err(_)) | None => {
                if partial.is_empty() {
                    return None;
                }
                return Some(Bytes::from(std::mem::take(partial)));
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
