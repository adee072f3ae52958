//! What leader election and sharding both read and write on a `coordination.k8s.io/v1`
//! Lease: its times and the order of its versions.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// The lease duration assumed for a Lease that does not say (client-go's default).
const DEFAULT_DURATION: Duration = Duration::from_secs(15);

/// Now, as a Lease's `renewTime` or `acquireTime`.
pub(crate) fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// Whole seconds for `leaseDurationSeconds`, rounded *up* (at least 1): whoever reads the
/// Lease honours what is written, which must never be shorter than what its holder counts
/// with.
pub(crate) fn seconds(d: Duration) -> i32 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
}

/// The lease duration a Lease's holder promised (`leaseDurationSeconds`; 15 s when absent or
/// not positive).
pub(crate) fn duration(spec: &LeaseSpec) -> Duration {
    spec.lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(DEFAULT_DURATION, Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_seconds_are_rounded_up() {
        assert_eq!(seconds(Duration::from_millis(3_900)), 4);
        assert_eq!(seconds(Duration::from_secs(15)), 15);
        assert_eq!(seconds(Duration::from_millis(100)), 1);
    }

    #[test]
    fn durations_and_versions() {
        let spec = |s| LeaseSpec {
            lease_duration_seconds: s,
            ..LeaseSpec::default()
        };
        assert_eq!(duration(&spec(Some(4))), Duration::from_secs(4));
        assert_eq!(duration(&spec(None)), DEFAULT_DURATION);
        assert_eq!(duration(&spec(Some(-3))), DEFAULT_DURATION);
    }
}
