//! Reading the requeue delay out of kube-runtime's [`Action`].
//!
//! `Action` keeps its delay private and offers no getter; its `Debug` output has the form
//! `Action { requeue_after: Some(<Duration as Debug>) }`. We read that, exactly once per
//! reconcile. The format is pinned by a unit test (a kube upgrade that changes it fails CI), and
//! checked once more when a controller registers ([`check`]); should a reconcile's action still
//! be unreadable, that is an error in the log and the key is retried with backoff, never a
//! silent guess.

use std::time::Duration;

use kube::runtime::controller::Action;

/// The `Debug` output of an [`Action`] could not be read (see
/// [`BuilderError::UnreadableAction`](crate::BuilderError::UnreadableAction)).
///
/// ```
/// # fn demo(err: mcr_manager::UnreadableAction) {
/// eprintln!("{err}"); // names what was shown
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot read the requeue delay from {shown:?} (kube-runtime changed Action's Debug format?)"
)]
pub struct UnreadableAction {
    shown: String,
}

/// When to run again: `None` for [`Action::await_change`].
pub(crate) fn requeue_after(action: &Action) -> Result<Option<Duration>, UnreadableAction> {
    if *action == Action::await_change() {
        return Ok(None);
    }
    let shown = format!("{action:?}");
    shown
        .strip_prefix("Action { requeue_after: Some(")
        .and_then(|rest| rest.strip_suffix(") }"))
        .and_then(parse_duration)
        .map(Some)
        .ok_or(UnreadableAction { shown })
}

/// Whether this kube-runtime's `Action` can be read: what registering a controller checks.
pub(crate) fn check() -> Result<(), UnreadableAction> {
    let probe = Duration::from_millis(1500);
    match requeue_after(&Action::requeue(probe))? {
        Some(d) if d == probe => Ok(()),
        _ => Err(UnreadableAction {
            shown: format!("{:?}", Action::requeue(probe)),
        }),
    }
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
    fn the_debug_format_is_pinned() {
        assert_eq!(
            format!("{:?}", Action::requeue(Duration::from_secs(5))),
            "Action { requeue_after: Some(5s) }"
        );
        assert_eq!(
            format!("{:?}", Action::requeue(Duration::from_millis(250))),
            "Action { requeue_after: Some(250ms) }"
        );
        assert!(check().is_ok());
    }

    #[test]
    fn an_unreadable_format_is_an_error_not_a_guess() {
        for shown in [
            "",
            "Action { requeue_after: Some(soon) }",
            "5 minutes",
            "12h",
        ] {
            assert_eq!(parse_duration(shown), None, "{shown:?}");
        }
        let err = UnreadableAction {
            shown: "Action { later }".into(),
        };
        assert!(err.to_string().contains("Action { later }"), "{err}");
    }

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
            let got = requeue_after(&Action::requeue(d)).unwrap().unwrap();
            let diff = got.abs_diff(d);
            assert!(
                diff < Duration::from_micros(1),
                "{d:?} read back as {got:?}"
            );
        }
    }

    #[test]
    fn await_change_is_none() {
        assert_eq!(requeue_after(&Action::await_change()).unwrap(), None);
    }
}
