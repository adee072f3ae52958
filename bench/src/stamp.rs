//! Send-time stamps carried inside the objects, for latencies measured across processes.
//!
//! When the writer and the reconciler live in different processes they share no `Instant`.
//! The writer puts its wall-clock send time (`SystemTime`, the same kernel clock for every
//! process of the machine) of the last [`KEEP`] values into the object; the reconciler that
//! sees value `v` knows the send time of `v` and of the values just before it, which it
//! skipped when updates were coalesced.

use std::{
    collections::VecDeque,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

/// The data key the stamps are written to.
pub const STAMP_KEY: &str = "t";

/// How many recent values carry their send time (older skipped values stay unmeasured).
pub const KEEP: usize = 16;

/// Nanoseconds since the Unix epoch, now.
pub fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The writer's record of the last [`KEEP`] send times of one object.
#[derive(Debug, Default)]
pub struct Stamps {
    recent: VecDeque<(u64, u128)>,
}

impl Stamps {
    /// Records that value `k` is sent now; returns the encoded stamps to write with it.
    pub fn push(&mut self, k: u64) -> String {
        self.push_at(k, now_nanos())
    }

    fn push_at(&mut self, k: u64, nanos: u128) -> String {
        if self.recent.len() == KEEP {
            self.recent.pop_front();
        }
        self.recent.push_back((k, nanos));
        self.recent
            .iter()
            .map(|(k, t)| format!("{k}:{t}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Decodes stamps written by [`Stamps::push`] (malformed entries are skipped).
pub fn parse(text: &str) -> impl Iterator<Item = (u64, u128)> + '_ {
    text.split(',').filter_map(|entry| {
        let (k, t) = entry.split_once(':')?;
        Some((k.parse().ok()?, t.parse().ok()?))
    })
}

/// The time from `sent` (nanoseconds since the epoch) to `now` (0 if the clock went back).
pub fn since(sent: u128, now: u128) -> Duration {
    let nanos = now.saturating_sub(sent);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_values_and_round_trips() {
        let mut s = Stamps::default();
        let mut text = String::new();
        for k in 1..=20u64 {
            text = s.push_at(k, 1000 + u128::from(k));
        }
        let got: Vec<_> = parse(&text).collect();
        assert_eq!(got.len(), KEEP);
        assert_eq!(got.first(), Some(&(5, 1005)));
        assert_eq!(got.last(), Some(&(20, 1020)));
        assert_eq!(parse("x:1,2:y,3:4").collect::<Vec<_>>(), vec![(3, 4)]);
        assert_eq!(since(10, 25), Duration::from_nanos(15));
        assert_eq!(since(25, 10), Duration::ZERO);
    }
}
