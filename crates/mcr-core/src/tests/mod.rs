//! Unit tests of the lifecycle and cache rules that need no API server (a client whose
//! requests never complete stands for an unreachable cluster). The behaviour against a real
//! API server is covered by the integration tests in `tests/`.

use std::{convert::Infallible, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use mcr_envtest::wait::{DEFAULT_TIMEOUT, eventually};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::{
    Aware, Cluster, ClusterName, Engagements, Error, FieldIndex, InformerOptions, MemberState,
    Provider, Source, cluster_not_found,
    providers::{clusters::ClustersProvider, nop::NopProvider, single::SingleProvider},
};

/// A client for a cluster that never answers.
fn hanging_client() -> kube::Client {
    let service = tower::service_fn(|_req: http::Request<kube::client::Body>| {
        futures::future::pending::<Result<http::Response<kube::client::Body>, Infallible>>()
    });
    kube::Client::new(service, "default")
}

fn by_app() -> FieldIndex {
    FieldIndex::new::<ConfigMap>("app", |cm| {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned())
            .into_iter()
            .collect()
    })
}

/// Records engagements; fails them when asked to.
#[derive(Default)]
struct Recorder {
    fail: std::sync::atomic::AtomicBool,
    engaged: Mutex<Vec<(ClusterName, CancellationToken)>>,
}

impl Aware for Recorder {
    fn engage(&self, token: CancellationToken, name: ClusterName, _: Cluster) -> Result<(), Error> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Engage {
                cluster: name,
                source: "refused by test".into(),
            });
        }
        self.engaged.lock().push((name, token));
        Ok(())
    }
}

/// A short sync timeout: these clusters never answer.
const SHORT: Duration = Duration::from_millis(200);

/// A table waiting [`SHORT`] for sync, with `recorder` subscribed.
fn table(recorder: &Arc<Recorder>) -> Engagements {
    let engagements = Engagements::new().with_sync_timeout(SHORT);
    engagements.subscribe(recorder.clone());
    engagements
}

mod cache;
mod clusters;
mod providers;

/// The engagement token of the active member `name` of `table`.
fn active_token(table: &Engagements, name: &str) -> Option<CancellationToken> {
    table
        .active()
        .into_iter()
        .find(|(n, _, _)| n.as_str() == name)
        .map(|(_, _, token)| token)
}
