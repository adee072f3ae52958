//! One member as the loop sees it: its one entry in the loop's table, holding its whole state
//! there, so that it is never in two states at once nor lost between them.
//!
//! A member's entry has
//! - its **phase**: present (engaged, or only watched), departing (it left, and its leave
//!   hook has not run yet; an instance of it that came back meanwhile waits in the
//!   departure), or gone;
//! - its **reconciles in flight**, whichever of its instances started them (see `slots`):
//!   they outlive the instance they ran against, so they belong to the member.
//!
//! The entry goes when the member is gone and none of its reconciles runs any more.

use std::hash::Hash;

use kube::Resource;
use mcr_core::ClusterId;

use super::{
    engage::{Engaged, Watched},
    leave::Departing,
    slots::InFlight,
};

/// One member's entry in the loop's table (see the module documentation).
pub(super) struct Member<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    pub(super) phase: Phase<K, Ctx>,
    /// Its reconciles in flight, whichever of its instances started them.
    pub(super) in_flight: InFlight,
}

/// Where a member is in its life in the loop.
pub(super) enum Phase<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    /// An instance of it is engaged or watched here.
    Present(Instance<K, Ctx>),
    /// It left, until its leave hook has run (see `leave`); boxed, as departures are rare
    /// and the table's spare slots would each hold a whole one.
    Departing(Box<Departing<K, Ctx>>),
    /// No instance and no departure: its entry stays only while reconciles of it run.
    Gone,
}

/// An instance of a member, as the loop holds it.
pub(super) enum Instance<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    /// Reconciles run in it (once active). Boxed: the table grows by doubling, and its spare
    /// slots would each hold a whole `Engaged` (about a kilobyte per engaged cluster at 1,000
    /// clusters unboxed).
    Engaged(Box<Engaged<K, Ctx>>),
    /// Only watched, outside the reconciled type's scope (see `ClusterScope`).
    Watched(Watched),
}

impl<K, Ctx> Instance<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    /// Which instance of the cluster it is.
    pub(super) fn id(&self) -> ClusterId {
        match self {
            Self::Engaged(e) => e.cluster.id(),
            Self::Watched(w) => w.id,
        }
    }
}

impl<K, Ctx> Member<K, Ctx>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    /// A member the loop has just met.
    pub(super) fn new() -> Self {
        Self {
            phase: Phase::Gone,
            in_flight: InFlight::default(),
        }
    }

    /// Its instance here: the one present, or the one back during its departure.
    pub(super) fn instance(&self) -> Option<&Instance<K, Ctx>> {
        match &self.phase {
            Phase::Present(i) => Some(i),
            Phase::Departing(d) => d.back.as_ref(),
            Phase::Gone => None,
        }
    }

    /// Its engaged instance, if its instance is engaged (see [`Self::instance`]).
    pub(super) fn engaged(&self) -> Option<&Engaged<K, Ctx>> {
        match self.instance()? {
            Instance::Engaged(e) => Some(e),
            Instance::Watched(_) => None,
        }
    }

    /// Its engaged instance, to change it.
    pub(super) fn engaged_mut(&mut self) -> Option<&mut Engaged<K, Ctx>> {
        let instance = match &mut self.phase {
            Phase::Present(i) => i,
            Phase::Departing(d) => d.back.as_mut()?,
            Phase::Gone => return None,
        };
        match instance {
            Instance::Engaged(e) => Some(e),
            Instance::Watched(_) => None,
        }
    }

    /// Puts `instance` in place of its instance (in its departure, if it is departing).
    pub(super) fn put(&mut self, instance: Instance<K, Ctx>) {
        match &mut self.phase {
            Phase::Departing(d) => d.back_again(instance),
            phase => *phase = Phase::Present(instance),
        }
    }

    /// Takes its instance out: a present member is gone then, a departing one stays so.
    pub(super) fn take(&mut self) -> Option<Instance<K, Ctx>> {
        match std::mem::replace(&mut self.phase, Phase::Gone) {
            Phase::Present(i) => Some(i),
            Phase::Departing(mut d) => {
                let back = d.back.take();
                self.phase = Phase::Departing(d);
                back
            }
            Phase::Gone => None,
        }
    }

    /// Whether nothing of it is left: gone, and none of its reconciles running.
    pub(super) fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Gone) && self.in_flight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    /// The table grows by doubling, so its spare slots hold entries too: an entry holds its
    /// instance boxed (or a watched one's two words), its phase's tag, and one pointer for
    /// reconciles in flight, boxed while some run.
    #[test]
    fn an_entry_is_four_words() {
        assert_eq!(size_of::<InFlight>(), size_of::<usize>());
        assert!(
            size_of::<Member<ConfigMap, ()>>() <= 4 * size_of::<usize>(),
            "{} bytes",
            size_of::<Member<ConfigMap, ()>>()
        );
    }
}
