//! Reconcile spans of the sharded suite (`--replicas`): each replica process appends one line
//! when a reconcile starts and one when it ends (or is dropped, cut short) to a file of its
//! own; the parent reads every file at the end and looks for overlaps and gaps.
//!
//! # The clock
//!
//! Times are `CLOCK_MONOTONIC` nanoseconds read with `clock_gettime` ([`now_ns`]). On Linux
//! that clock is one system-wide clock (time since boot, not counting suspend), so values
//! taken by different processes are directly comparable; `std::time::Instant` reads the same
//! clock but offers no way to carry a value across processes. The parent takes its own
//! readings (kill, SIGSTOP, SIGCONT) from the same clock.
//!
//! Timestamping at the source, rather than in the parent on receipt over a pipe, keeps the
//! check conservative: a start is read *before* the reconcile does anything and an end
//! *after* it stopped, so a recorded span always covers the real one. Receipt times could
//! be late for a start (a pipe read delayed by load, or by the writer being paused between
//! the event and the write), which would hide an overlap. Each line is one `write` on a file
//! opened for appending, so a process killed with SIGKILL loses at most the line it had not
//! written yet: a start without an end, which the parent ends at the moment of the kill.
//!
//! # Runs, not only spans
//!
//! A reconcile runs only while its future is polled. [`Spans::record`] also notes when the
//! last poll of the reconcile ended, and writes it with the end. The parent needs it for a
//! replica resumed after a SIGSTOP: a reconcile in flight at the stop is dropped at its first
//! poll after the resume, when its replica's hold has lapsed (the runner checks that before
//! polling the reconciler), so it runs none of its code after the resume. Its end is still
//! written after the resume, but what came after the SIGCONT is a drop, not a reconcile, and
//! the overlap check can tell the two apart (see `sharded.rs`).
//!
//! Lines: `S <seq> <ns> <cluster>` (start), `E <seq> <ns> <last poll ns>` (end),
//! `P <ns>` (a panic).

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// `CLOCK_MONOTONIC` now, in nanoseconds (comparable across the processes of this machine).
#[allow(unsafe_code)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A log timestamp on the spans' clock ([`now_ns`], in seconds), so that the logs of every
/// process of a run line up with each other and with the span files.
pub struct Monotonic;

impl tracing_subscriber::fmt::time::FormatTime for Monotonic {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        let ns = now_ns();
        write!(w, "{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
    }
}

/// The span file of this replica process.
pub struct Spans {
    file: Mutex<File>,
    seq: AtomicU64,
}

/// The process's span file, for the panic hook.
static GLOBAL: OnceLock<Arc<Spans>> = OnceLock::new();

impl Spans {
    /// Creates (truncates) the file at `path` and makes it the process's (for [`panicked`]).
    pub fn create(path: &Path) -> std::io::Result<Arc<Spans>> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)?;
        let spans = Arc::new(Spans {
            file: Mutex::new(file),
            seq: AtomicU64::new(0),
        });
        let _ = GLOBAL.set(spans.clone());
        Ok(spans)
    }

    fn line(&self, line: String) {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // One write per line (a short line is written whole or not at all by a kill).
        let _ = file.write_all(line.as_bytes());
    }

    /// Runs `reconcile` of `cluster`, recording its span: the start at its first poll, and
    /// at its end (it returned or was dropped) the end of its last poll too.
    pub async fn record<F: Future>(self: Arc<Self>, cluster: &str, reconcile: F) -> F::Output {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        self.line(format!("S {seq} {} {cluster}\n", now_ns()));
        let mut guard = SpanGuard {
            spans: self,
            seq,
            last_poll: 0,
        };
        let mut reconcile = std::pin::pin!(reconcile);
        std::future::poll_fn(move |cx| {
            // The whole guard moves in (it is dropped with the future), not a copy of a field.
            let guard = &mut guard;
            let polled = reconcile.as_mut().poll(cx);
            guard.last_poll = now_ns();
            polled
        })
        .await
    }
}

/// Records the end of a span when dropped (the reconcile returned or was dropped), with the
/// end of its last poll.
struct SpanGuard {
    spans: Arc<Spans>,
    seq: u64,
    last_poll: u64,
}

impl Drop for SpanGuard {
    fn drop(&mut self) {
        let line = format!("E {} {} {}\n", self.seq, now_ns(), self.last_poll);
        self.spans.line(line);
    }
}

/// Records a panic in this process's span file, if it has one (the parent counts them even
/// when the process is killed later).
pub fn panicked() {
    if let Some(spans) = GLOBAL.get() {
        spans.line(format!("P {}\n", now_ns()));
    }
}

/// One reconcile as read back by the parent: nanoseconds on the shared clock.
#[derive(Clone, Debug)]
pub struct Span {
    /// The cluster reconciled.
    pub cluster: String,
    /// Start.
    pub start: u64,
    /// End (`None`: the process ended without recording it).
    pub end: Option<u64>,
    /// When its last poll ended (with `end`): after it, none of its code ran.
    pub last_poll: Option<u64>,
}

/// Reads a span file: the spans in order of start, and the panics recorded.
pub fn read(path: &Path) -> std::io::Result<(Vec<Span>, u64)> {
    let text = std::fs::read_to_string(path)?;
    let mut spans: Vec<Span> = Vec::new();
    let mut by_seq = std::collections::HashMap::new();
    let mut panics = 0;
    for line in text.lines() {
        let mut parts = line.splitn(4, ' ');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("S"), Some(seq), Some(ns), Some(cluster)) => {
                if let (Ok(seq), Ok(ns)) = (seq.parse::<u64>(), ns.parse()) {
                    by_seq.insert(seq, spans.len());
                    spans.push(Span {
                        cluster: cluster.to_owned(),
                        start: ns,
                        end: None,
                        last_poll: None,
                    });
                }
            }
            (Some("E"), Some(seq), Some(ns), Some(polled)) => {
                if let (Ok(seq), Ok(ns), Ok(polled)) =
                    (seq.parse::<u64>(), ns.parse(), polled.parse())
                    && let Some(&i) = by_seq.get(&seq)
                {
                    spans[i].end = Some(ns);
                    spans[i].last_poll = Some(polled);
                }
            }
            (Some("P"), Some(_), None, None) => panics += 1,
            _ => {}
        }
    }
    Ok((spans, panics))
}
