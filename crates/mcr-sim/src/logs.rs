//! The code's logs during a replay, stamped with virtual time and the replica they came from.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use crate::clock::{Clock, show};
use crate::wire::Sender;

static ON: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The process being driven on this thread, if any.
    static DRIVEN: Cell<Option<(Clock, Sender)>> = const { Cell::new(None) };
}

/// Marks `who` (with its clock) as the process being driven until the guard drops.
pub(crate) fn driving(clock: Clock, who: Sender) -> Driving {
    if ON.load(Ordering::Relaxed) {
        DRIVEN.with(|d| d.set(Some((clock, who))));
    }
    Driving
}

/// Ends a [`driving`] mark.
pub(crate) struct Driving;

impl Drop for Driving {
    fn drop(&mut self) {
        if ON.load(Ordering::Relaxed) {
            DRIVEN.with(|d| d.set(None));
        }
    }
}

struct VirtualTime;

impl FormatTime for VirtualTime {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        match DRIVEN.with(Cell::get) {
            Some((clock, who)) => write!(w, "{:>8} {who}", show(clock.now_or(0))),
            None => write!(w, "{:>8} sim", ""),
        }
    }
}

/// Prints the logs of the code under test that pass `filter` (a `tracing` filter such as
/// `info` or `mcr_manager=debug`), each line with the virtual time and replica it came from.
pub fn logs(filter: &str) {
    ON.store(true, Ordering::Relaxed);
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_timer(VirtualTime)
        .with_ansi(false)
        .with_target(false)
        .init();
}
