//! What [`Members`] report about each member name: engaged, pending or failed (see
//! [`Provider::member_statuses`](crate::Provider::member_statuses)).
//!
//! [`Members::ensure`] marks a name pending while it builds, probes and syncs a new instance,
//! and failed with the redacted error when that fails; [`Workers`](super::Workers) record
//! every failed attempt of a name (a kubeconfig that does not parse included) with its retry
//! delay. Success and removal clear the record, so an engaged member without one is
//! `engaged`. A provider that engages members without them calls [`Members::report_failure`]
//! and [`Members::report_done`] itself, and removes members with [`Members::remove`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::MutexGuard;

use super::Members;
use crate::{ClusterName, ErrorChain, MemberState, MemberStatus};

/// The provider name reported before [`Members::start_run`] names it.
const UNNAMED: &str = "unnamed";

/// The records of one [`Members`].
#[derive(Debug, Default)]
pub(super) struct Book {
    provider: Option<Arc<str>>,
    /// Names with a newer connection on its way (pending) or a failed last attempt.
    states: BTreeMap<ClusterName, MemberState>,
}

impl Members {
    fn book(&self) -> MutexGuard<'_, Book> {
        self.inner.book.lock()
    }

    /// Names the provider in what the members report (done by [`start_run`](Self::start_run)).
    pub(super) fn name_provider(&self, provider: &str) {
        self.book().provider = Some(Arc::from(provider));
    }

    /// The provider's name, as the last run gave it (`"provider"` before any).
    pub(super) fn provider_name(&self) -> String {
        self.book()
            .provider
            .as_deref()
            .unwrap_or("provider")
            .to_owned()
    }

    /// `name` is being brought to a new connection.
    pub(super) fn report_pending(&self, name: &ClusterName) {
        self.book()
            .states
            .insert(name.clone(), MemberState::Pending);
    }

    /// Another replica owns `name`: nothing runs under it here.
    pub(super) fn report_elsewhere(&self, name: &ClusterName, owner: Option<String>) {
        self.book()
            .states
            .insert(name.clone(), MemberState::Elsewhere { owner });
    }

    /// `name` runs as desired (or nothing is desired under it any more): its record goes.
    /// [`ensure`](Self::ensure), the workers and [`remove`](Self::remove) do it; a provider
    /// that engages members without them calls it when an attempt succeeded.
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// let err = mcr_core::Error::Engage { cluster: "a".into(), source: "refused".into() };
    /// members.report_failure(&"a".into(), &err, None);
    /// members.report_done(&"a".into());
    /// assert!(members.member_statuses().is_empty());
    /// ```
    pub fn report_done(&self, name: &ClusterName) {
        self.book().states.remove(name);
    }

    /// Drops every record.
    pub(super) fn clear_reports(&self) {
        self.book().states.clear();
    }

    /// Records that the last attempt for `name` failed with `error` (shown with its sources,
    /// redacted: [`ErrorChain`]), retried in `retry_in` (`None`: not before its source
    /// changes). [`Workers`](super::Workers) call it for every failed attempt; a provider
    /// that engages members without them calls it for its own failures.
    ///
    /// ```
    /// use mcr_core::{MemberState, members::Members};
    /// let members = Members::new(Default::default());
    /// let err = mcr_core::Error::Engage { cluster: "a".into(), source: "refused".into() };
    /// members.report_failure(&"a".into(), &err, None);
    /// let statuses = members.member_statuses();
    /// assert!(matches!(&statuses[0].state,
    ///     MemberState::Failed { reason, retry_in: None } if reason.ends_with("refused")));
    /// ```
    pub fn report_failure(
        &self,
        name: &ClusterName,
        error: &(dyn std::error::Error + 'static),
        retry_in: Option<Duration>,
    ) {
        let state = MemberState::Failed {
            reason: ErrorChain(error).to_string(),
            retry_in,
        };
        self.book().states.insert(name.clone(), state);
    }

    /// Names engaged or with a record (pending, failed), sorted: what a provider that removes
    /// the names it no longer wants goes through, so a failed member's record goes too.
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// let err = mcr_core::Error::Engage { cluster: "a".into(), source: "refused".into() };
    /// members.report_failure(&"a".into(), &err, None);
    /// assert_eq!(members.known_names(), ["a"]);
    /// assert!(members.names().is_empty());
    /// members.remove(&"a".into());
    /// assert!(members.known_names().is_empty());
    /// ```
    pub fn known_names(&self) -> Vec<ClusterName> {
        self.member_statuses().into_iter().map(|m| m.name).collect()
    }

    /// Every member name the provider knows, sorted: engaged ones, and ones pending or whose
    /// last attempt failed (an engaged member with a newer connection on its way, or whose
    /// replacement failed, is shown in that state).
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// assert!(members.member_statuses().is_empty());
    /// ```
    pub fn member_statuses(&self) -> Vec<MemberStatus> {
        let engaged = self.names();
        let book = self.book();
        let provider = book.provider.clone().unwrap_or_else(|| Arc::from(UNNAMED));
        let mut out: BTreeMap<ClusterName, MemberState> = engaged
            .into_iter()
            .map(|name| (name, MemberState::Engaged))
            .collect();
        out.extend(book.states.iter().map(|(n, s)| (n.clone(), s.clone())));
        out.into_iter()
            .map(|(name, state)| MemberStatus::new(provider.clone(), name, state))
            .collect()
    }
}
