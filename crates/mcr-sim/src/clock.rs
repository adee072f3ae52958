//! Virtual time: one global clock in milliseconds, and each runtime's paused tokio clock
//! mapped onto it.
//!
//! Every process of the simulation (each replica, the world) is a tokio `current_thread`
//! runtime whose clock is paused: it moves only when the simulator drives the runtime
//! ([`Clock::instant`] is where a drive stops), or when the runtime idles and tokio advances it
//! to its next timer. A runtime born at global time `birth` reads global time as `birth` plus
//! how far its own clock moved since then.

use std::time::Duration;

use tokio::time::Instant;

/// Global virtual time, in milliseconds since the start of a run.
pub type Ms = u64;

/// Formats `t` as seconds with milliseconds: `12.345`.
pub(crate) fn show(t: Ms) -> String {
    format!("{}.{:03}", t / 1000, t % 1000)
}

/// One runtime's view of global time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    /// Global time when the runtime was built.
    birth: Ms,
    /// The runtime's (paused) clock at `birth`.
    epoch: Instant,
}

impl Clock {
    /// The clock of `rt`, built (paused) at global time `birth`.
    pub(crate) fn of(rt: &tokio::runtime::Runtime, birth: Ms) -> Clock {
        let epoch = rt.block_on(async { Instant::now() });
        Clock { birth, epoch }
    }

    /// Global time now, as the runtime this is called in sees it. Outside any runtime, the
    /// time of the last step (`fallback`).
    pub(crate) fn now_or(&self, fallback: Ms) -> Ms {
        if tokio::runtime::Handle::try_current().is_err() {
            return fallback;
        }
        let elapsed = Instant::now().saturating_duration_since(self.epoch);
        self.birth + u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
    }

    /// The runtime's instant for global time `at` (not before its birth).
    pub(crate) fn instant(&self, at: Ms) -> Instant {
        self.epoch + Duration::from_millis(at.saturating_sub(self.birth))
    }
}
