//! Capped exponential retry delays, shared by providers that retry a failing member.
//!
//! A provider that fails to build or engage a cluster (a Secret with a broken kubeconfig, a
//! file that does not parse yet, an API server that is down) retries it after
//! [`Backoff::next_delay`], which doubles on every failure up to a cap, and calls
//! [`Backoff::reset`] once the member is healthy again.

use std::time::Duration;

/// Retry delays that double from `initial` up to `max`; [`reset`](Backoff::reset) starts over.
///
/// Bounds are made sane on construction: `initial` is at least one millisecond and `max` is at
/// least `initial`, so a zero or inverted configuration never turns into a busy loop.
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// use mcr_core::backoff::Backoff;
///
/// let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
/// assert_eq!(backoff.next_delay(), Duration::from_millis(100));
/// assert_eq!(backoff.next_delay(), Duration::from_millis(200));
/// assert_eq!(backoff.next_delay(), Duration::from_millis(350)); // capped
/// backoff.reset(); // the member recovered
/// assert_eq!(backoff.next_delay(), Duration::from_millis(100));
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    /// A backoff whose first delay is `initial` (at least 1 ms), doubling up to `max`
    /// (at least `initial`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use mcr_core::backoff::Backoff;
    /// let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
    /// assert_eq!(backoff.next_delay(), Duration::from_secs(1));
    /// ```
    pub fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.max(Duration::from_millis(1));
        let max = max.max(initial);
        Backoff {
            initial,
            max,
            failures: 0,
        }
    }

    /// The delay to wait now; the following one is twice as long (capped at `max`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use mcr_core::backoff::Backoff;
    /// let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(15));
    /// assert_eq!(backoff.next_delay(), Duration::from_millis(10));
    /// assert_eq!(backoff.next_delay(), Duration::from_millis(15));
    /// assert_eq!(backoff.next_delay(), Duration::from_millis(15));
    /// ```
    pub fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.delay_after(self.failures)
    }

    /// The delay after `failures` consecutive failures (1 = the first), without keeping state:
    /// what the `failures`-th [`next_delay`](Self::next_delay) returns.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use mcr_core::backoff::Backoff;
    /// let backoff = Backoff::new(Duration::from_millis(5), Duration::from_secs(300));
    /// assert_eq!(backoff.delay_after(3), Duration::from_millis(20));
    /// assert_eq!(backoff.delay_after(1000), Duration::from_secs(300));
    /// ```
    pub fn delay_after(&self, failures: u32) -> Duration {
        let mut delay = self.initial;
        for _ in 1..failures {
            if delay >= self.max {
                break;
            }
            delay = delay.saturating_mul(2);
        }
        delay.min(self.max)
    }

    /// Start over: the next delay is `initial` again.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use mcr_core::backoff::Backoff;
    /// let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
    /// backoff.next_delay();
    /// backoff.next_delay();
    /// backoff.reset();
    /// assert_eq!(backoff.next_delay(), Duration::from_millis(10));
    /// ```
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        let got: Vec<_> = (0..4).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(got, vec![100, 200, 350, 350]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
    }

    #[test]
    fn zero_and_inverted_bounds_are_sane() {
        let mut b = Backoff::new(Duration::ZERO, Duration::ZERO);
        assert_eq!(b.next_delay(), Duration::from_millis(1));
        assert_eq!(b.next_delay(), Duration::from_millis(1));

        let mut b = Backoff::new(Duration::from_millis(50), Duration::from_millis(10));
        assert_eq!(b.next_delay(), Duration::from_millis(50));
        assert_eq!(b.next_delay(), Duration::from_millis(50));
    }

    #[test]
    fn huge_bounds_saturate_instead_of_overflowing() {
        let mut b = Backoff::new(Duration::MAX / 2 + Duration::from_secs(1), Duration::MAX);
        b.next_delay();
        assert_eq!(b.next_delay(), Duration::MAX);
        assert_eq!(b.next_delay(), Duration::MAX);
    }
}
