//! Event intake: turning watch events and raw triggers into queued requests.

use std::{fmt::Debug, hash::Hash};

use futures::StreamExt;
use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::trace;

use super::{Loop, member::Member};
use crate::controller::{
    input::{Arrival, Batch},
    request::Request,
};

impl<K, Ctx> Loop<'_, K, Ctx>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// Raw triggers live as long as the controller.
    pub(super) fn start_static_inputs(&mut self, stop: &CancellationToken) {
        for trigger in self.spec.triggers.drain(..) {
            self.streams.push(
                trigger
                    .map(|r| Arrival {
                        batch: Batch::One(r),
                        initial: false,
                    })
                    .take_until(stop.clone().cancelled_owned())
                    .boxed(),
            );
        }
    }

    /// Queues the requests of one event; those of an initial list wait behind live changes.
    pub(super) fn push(&mut self, arrival: Arrival<K>, at: Instant) {
        let initial = arrival.initial;
        match arrival.batch {
            Batch::One(r) => self.queue_request(r, at, initial),
            Batch::Many(all) => {
                for r in all {
                    self.queue_request(r, at, initial);
                }
            }
        }
    }

    /// Queues one request as a live change.
    pub(super) fn push_one(&mut self, r: Request<K>, at: Instant) {
        self.queue_request(r, at, false);
    }

    fn queue_request(&mut self, r: Request<K>, at: Instant, initial: bool) {
        let Some(e) = self.members.get(&r.cluster).and_then(Member::engaged) else {
            trace!(controller = %self.spec.name, request = %r, "cluster not engaged; dropped");
            return;
        };
        if initial && self.spec.live_first {
            self.queue.push_initial(&r.cluster, r.object, at);
        } else {
            self.queue.push(&r.cluster, r.object, at);
        }
        e.metrics.depth.set(self.queue.ready_len(&r.cluster) as i64);
    }
}
