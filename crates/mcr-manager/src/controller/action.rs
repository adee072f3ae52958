//! Reading the requeue delay out of kube-runtime's [`Action`].
//!
//! `Action` keeps its delay private and offers no getter; it does promise `Debug` output of the
//! form `Action { requeue_after: Some(<Duration as Debug>) }`. We read that, exactly once per
//! reconcile, and fall back to a conservative delay if a future kube release changes the format.

use std::time::Duration;

use kube::runtime::controller::Action;

/// The delay used if the `Debug` output of `Action` cannot be understood.
const FALLBACK: Duration = Duration::from_secs(300);

/// When to run again: `None` for [`Action::await_change`].
pub(crate) fn requeue_after(action: &Action) -> Option<Duration> {
    if *action == Action::await_change() {
        return None;
    }
    let shown = format!("{action:?}");
    let parsed = shown
        .strip_prefix("Action { requeue_after: Some(")
        .and_then(|rest| rest.strip_suffix(") }"))
        .and_then(parse_duration);
    if parsed.is_none() {
        tracing::warn!(action = %shown, fallback = ?FALLBACK, "cannot read the requeue delay");
    }
    Some(parsed.unwrap_or(FALLBACK))
}

/// Parses the `Debug` output of a `Duration` (`1.5s`, `100ms`, `10µs`, `7ns`).
fn parse_duration(s: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1e-9)
    } else if let Some(n) = s.strip_suffix("µs") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    let value: f64 = number.parse().ok()?;
    Duration::try_from_secs_f64(value * scale).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_every_unit() {
        for d in [
            Duration::from_secs(5),
            Duration::from_secs(3600),
            Duration::from_millis(1500),
            Duration::from_millis(250),
            Duration::from_micros(42),
            Duration::from_nanos(7),
            Duration::ZERO,
        ] {
            let got = requeue_after(&Action::requeue(d)).unwrap();
            let diff = got.abs_diff(d);
            assert!(
                diff < Duration::from_micros(1),
                "{d:?} read back as {got:?}"
            );
        }
    }

    #[test]
    fn await_change_is_none() {
        assert_eq!(requeue_after(&Action::await_change()), None);
    }
}
