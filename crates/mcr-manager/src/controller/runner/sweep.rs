//! The controller's sweep (`Builder::sweep`): on a timer, the user's cleanup with the members
//! the fleet wants, once the provider has reported a settled membership.

use std::{panic::AssertUnwindSafe, sync::Arc, time::Duration};

use futures::FutureExt;
use mcr_core::{ErrorChain, MemberState, Provider};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, warn};

use crate::{
    Fleet,
    controller::membership::{Members, Sweep},
};

/// How often the first sweep checks whether the membership is known.
const FIRST_SWEEP_CHECK: Duration = Duration::from_millis(500);

/// The members the fleet wants, once the provider's report is settled (it reported members
/// and none is pending); `None` until then.
fn settled(provider: &dyn Provider, fleet: &Fleet) -> Option<Members> {
    let statuses = provider.member_statuses();
    if statuses.is_empty() || statuses.iter().any(|s| s.state == MemberState::Pending) {
        return None;
    }
    let names = statuses.into_iter().map(|s| s.name).chain(fleet.names());
    Some(Members::new(names))
}

/// Runs `sweep` until `stop` fires: first once the membership is settled, then every period
/// with the members wanted then; each run bounded by `timeout`.
pub(super) async fn run(
    controller: String,
    sweep: Sweep,
    provider: Arc<dyn Provider>,
    fleet: Fleet,
    timeout: Duration,
    stop: CancellationToken,
) {
    let mut first = true;
    loop {
        let members = if first {
            settled(&*provider, &fleet)
        } else {
            let names = (provider.member_statuses().into_iter())
                .map(|s| s.name)
                .chain(fleet.names());
            Some(Members::new(names))
        };
        let wait = match members {
            None => FIRST_SWEEP_CHECK,
            Some(members) => {
                first = false;
                let wanted = members.names().count();
                let run = AssertUnwindSafe((sweep.run)(members)).catch_unwind();
                let ran = tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    ran = tokio::time::timeout(timeout, run) => ran,
                };
                match ran {
                    Ok(Ok(Ok(()))) => debug!(controller = %controller, wanted, "swept"),
                    Ok(Ok(Err(err))) => {
                        warn!(controller = %controller, error = %ErrorChain(err.as_ref()),
                        "sweep failed; it runs again at its next period")
                    }
                    Ok(Err(panic)) => error!(controller = %controller,
                        panic = %mcr_core::panic_message(panic.as_ref()),
                        "sweep panicked; it runs again at its next period"),
                    Err(_) => warn!(controller = %controller, ?timeout,
                        "sweep timed out; it runs again at its next period"),
                }
                sweep.period
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use mcr_core::{BoxFuture, Cluster, ClusterName, Error, FieldIndex, MemberStatus};

    use super::*;

    /// A provider that reports these members (and engages none).
    struct Reports(Vec<(&'static str, MemberState)>);

    impl Provider for Reports {
        fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, Error>> {
            Box::pin(async move { Err(Error::ClusterNotFound(name.clone())) })
        }
        fn index_field<'a>(&'a self, _: &'a FieldIndex) -> BoxFuture<'a, Result<(), Error>> {
            Box::pin(async { Ok(()) })
        }
        fn member_statuses(&self) -> Vec<MemberStatus> {
            (self.0.iter())
                .map(|(n, s)| MemberStatus::new("test", (*n).into(), s.clone()))
                .collect()
        }
    }

    fn fleet() -> Fleet {
        let client = kube::Client::new(
            tower::service_fn(|_: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
            }),
            "default",
        );
        Fleet::new(Cluster::new(ClusterName::host(), client))
    }

    /// The first sweep waits for a settled report: some members, none pending. A provider
    /// that has not listed its source yet reports none, and is not an empty fleet.
    #[tokio::test]
    async fn the_first_sweep_waits_for_a_settled_membership() {
        let fleet = fleet();
        assert!(
            settled(&Reports(vec![]), &fleet).is_none(),
            "nothing reported yet"
        );
        let pending = Reports(vec![
            ("a", MemberState::Engaged),
            ("b", MemberState::Pending),
        ]);
        assert!(settled(&pending, &fleet).is_none(), "b still pending");
        let failed = MemberState::Failed {
            reason: "refused".into(),
            retry_in: None,
        };
        let elsewhere = MemberState::Elsewhere { owner: None };
        let settled_report = Reports(vec![
            ("a", MemberState::Engaged),
            ("b", failed),
            ("c", elsewhere),
        ]);
        let members = settled(&settled_report, &fleet).expect("settled");
        let names: Vec<&str> = members.names().map(|n| n.as_str()).collect();
        assert_eq!(
            names,
            ["a", "b", "c"],
            "failed and elsewhere members are wanted"
        );
    }
}
