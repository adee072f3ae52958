//! Where each member's configurations stand, for [`member_statuses`] and for the condition a
//! CA rotation waits on ([`has_written_ca_bundle`]): one record per member, set by its latest
//! engagement only; members that left the fleet are kept apart (their cleanup is reported,
//! and never holds a rotation).
//!
//! [`member_statuses`]: super::MemberConfigurations::member_statuses
//! [`has_written_ca_bundle`]: super::MemberConfigurations::has_written_ca_bundle

use std::collections::BTreeMap;

use mcr_core::{ClusterName, MemberState, MemberStatus};
use parking_lot::Mutex;
use tokio::sync::watch;

/// The provider name of the statuses of engaged members.
pub(super) const ENGAGED: &str = "webhook-configurations";
/// The provider name of the statuses of cleanups of members that left the fleet.
pub(super) const CLEANUP: &str = "webhook-configurations-cleanup";

/// One member's record.
#[derive(Clone, Debug)]
struct Record {
    /// The engagement that set it.
    generation: u64,
    state: MemberState,
    /// The member left the fleet: this is its cleanup.
    departed: bool,
}

/// The records, by member.
#[derive(Debug, Default)]
pub(super) struct Statuses {
    records: Mutex<BTreeMap<ClusterName, Record>>,
}

impl Statuses {
    /// Records `state` for engagement `generation` of `name`, unless a later engagement
    /// recorded one already.
    pub(super) fn set(&self, name: &ClusterName, generation: u64, state: MemberState) {
        self.set_record(name, generation, state, false);
    }

    /// Records that the cleanup of `name` (left the fleet) is in `state`.
    pub(super) fn set_cleanup(&self, name: &ClusterName, generation: u64, state: MemberState) {
        self.set_record(name, generation, state, true);
    }

    fn set_record(&self, name: &ClusterName, generation: u64, state: MemberState, departed: bool) {
        let mut records = self.records.lock();
        match records.get(name) {
            Some(r) if r.generation > generation => {}
            _ => {
                records.insert(
                    name.clone(),
                    Record {
                        generation,
                        state,
                        departed,
                    },
                );
            }
        }
    }

    /// Records `name` as holding `written` for engagement `generation`, unless the CA bundle
    /// changed since (it stays `pending`: the next converge writes the new one) or a later
    /// engagement recorded a state already.
    pub(super) fn set_engaged(
        &self,
        name: &ClusterName,
        generation: u64,
        written: &[u8],
        bundle: &watch::Sender<Vec<u8>>,
    ) {
        // Checked under the lock `offer_ca_bundle` takes to change the bundle.
        let mut records = self.records.lock();
        if *bundle.borrow() != written {
            return;
        }
        match records.get(name) {
            Some(r) if r.generation > generation => {}
            _ => {
                records.insert(
                    name.clone(),
                    Record {
                        generation,
                        state: MemberState::Engaged,
                        departed: false,
                    },
                );
            }
        }
    }

    /// Forgets `name`, if engagement `generation` recorded its state last.
    pub(super) fn clear(&self, name: &ClusterName, generation: u64) {
        let mut records = self.records.lock();
        if records
            .get(name)
            .is_some_and(|r| r.generation == generation)
        {
            records.remove(name);
        }
    }

    /// Takes `pem` as the CA bundle if it is one and differs from the current one; whether it
    /// did. In the same step every engaged member becomes `pending`, so `engaged` always means
    /// "holds the current bundle".
    pub(super) fn offer_ca_bundle(
        &self,
        bundle: &watch::Sender<Vec<u8>>,
        pem: Vec<u8>,
    ) -> Result<bool, String> {
        let mut records = self.records.lock();
        let changed = crate::ca_bundle::offer(bundle, pem)?;
        if changed {
            for r in records.values_mut() {
                if !r.departed && r.state == MemberState::Engaged {
                    r.state = MemberState::Pending;
                }
            }
        }
        Ok(changed)
    }

    /// Whether every member engaged here is `engaged` (holds the current bundle) or
    /// `elsewhere`; members that left the fleet do not count.
    pub(super) fn all_written(&self) -> bool {
        self.records.lock().values().all(|r| {
            r.departed
                || matches!(
                    r.state,
                    MemberState::Engaged | MemberState::Elsewhere { .. }
                )
        })
    }

    /// Every record, as the manager reports them.
    pub(super) fn list(&self) -> Vec<MemberStatus> {
        self.records
            .lock()
            .iter()
            .map(|(name, r)| {
                let provider = if r.departed { CLEANUP } else { ENGAGED };
                MemberStatus::new(provider, name.clone(), r.state.clone())
            })
            .collect()
    }
}
