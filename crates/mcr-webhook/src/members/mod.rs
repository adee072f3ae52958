//! [`MemberConfigurations`]: opt-in; each member's webhook configurations are a reconciled
//! resource. The replica that owns a member converges the member's two objects to our entries
//! (its apiserver then calls `{base_url}/clusters/{name}/...`), again on every reason they may
//! have drifted, leaves them to the next owner on a handoff, and takes exactly our entries out
//! when the member leaves the fleet.

mod desired;
mod member;
mod statuses;

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use mcr_core::{Aware, BoxFuture, Cluster, ClusterName, MemberState, MemberStatus};
use mcr_manager::{BoxError, Runnable};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span};

use self::{desired::Ours, member::Member, statuses::Statuses};
use crate::{ConfigOptions, Error, Webhooks, ca_bundle};

/// The field manager of the writes.
const FIELD_MANAGER: &str = "mcr-webhook";

/// Converges, in every member this replica owns, a `ValidatingWebhookConfiguration` and a
/// `MutatingWebhookConfiguration` named [`ConfigOptions::name`] to hold the webhooks of the
/// registered validators and defaulters, calling `{base_url}/clusters/{name}/{path}` and
/// trusting the CA bundle of the moment.
///
/// **Level-triggered.** The desired entries are computed afresh, and each object is read and
/// written to match them (only when it differs), on engagement, on every new CA bundle, on
/// every watch event of the two objects (so a hand edit, or an old owner's late write, is
/// repaired at once) and every [`resync`](Self::resync) (60 s by default, in case a watch
/// event was missed). Our entries are the webhooks named `<label>.<ConfigOptions::name>`;
/// other webhooks in the same objects, and the objects' other fields (labels, annotations),
/// are left alone. Each member has its own task, and every call is bounded by
/// [`write_timeout`](Self::write_timeout) and retried with backoff, so one unreachable member
/// delays nobody.
///
/// **Fenced by ownership.** A write is made only while this replica owns the member, asked of
/// the fleet right before it is sent (in a sharded fleet, the coordinator's answer; with
/// leader election and no sharding, only the leader runs this writer). It is cut when the
/// engagement ends (the member's token), and it is conditioned on the `resourceVersion` of
/// the object as just read, so a write of an old owner that lands after the new owner's is
/// refused (409), and one that lands before is seen by the new owner's watch and converged
/// away at once: the member never keeps an old owner's URL for longer than one converge of
/// the new owner (at worst one resync, if its watch is down).
///
/// When a member's engagement ends:
/// - **handed to another replica** (the fleet says another replica owns it): the objects stay
///   as they are; the new owner converges them (to its own URL when each replica has one), so
///   the member is never left without them;
/// - **replaced** by a new instance under the same name: the new engagement converges them;
/// - **gone from the fleet**: exactly our entries are taken out (the object is deleted when
///   they were all it held), whatever else changed in it, each write conditioned on the
///   object as just read; retried with backoff until done (shown meanwhile in
///   [`member_statuses`](Self::member_statuses) under `webhook-configurations-cleanup`), the
///   member comes back, or the manager stops.
///
/// Shutting the manager down leaves them in place, so a restart or another replica keeps
/// serving them.
///
/// Add it to the manager; the webhooks registered by the time of each converge are written.
///
/// ```no_run
/// use std::sync::Arc;
/// use mcr_webhook::{ConfigOptions, MemberConfigurations, Webhooks};
///
/// # fn demo(mgr: mcr_manager::Manager, webhooks: Webhooks, ca_pem: Vec<u8>) -> Result<(), Box<dyn std::error::Error>> {
/// let writer = MemberConfigurations::new(
///     webhooks,
///     "https://webhooks.example.com:9443", // how members reach this manager
///     ca_pem,
///     ConfigOptions::new("widgets.example.com"),
/// )?;
/// mgr.add(Arc::new(writer))?;
/// # Ok(()) }
/// ```
pub struct MemberConfigurations {
    shared: Arc<Shared>,
    /// The CA bundle file followed, and how often it is read.
    ca_file: Option<(PathBuf, Duration)>,
    engagements: AtomicU64,
}

/// The timings of the converge loops.
#[derive(Clone, Copy, Debug)]
struct Settings {
    write_timeout: Duration,
    resync: Duration,
}

/// What every member's task shares.
struct Shared {
    source: Source,
    settings: Settings,
    statuses: Statuses,
    /// Whether this writer runs (unsharded: only on the leader); members wait for it.
    running: watch::Sender<bool>,
    /// The manager stops: members keep their configurations.
    stopping: CancellationToken,
}

/// What the desired entries are computed from.
struct Source {
    webhooks: Webhooks,
    base_url: String,
    options: ConfigOptions,
    ours: Ours,
    /// The CA bundle of the moment: a change converges every engaged member.
    ca_bundle: watch::Sender<Vec<u8>>,
}

impl std::fmt::Debug for MemberConfigurations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberConfigurations")
            .field("base_url", &self.shared.source.base_url)
            .field("name", &self.shared.source.options.name)
            .field("ca_file", &self.ca_file)
            .field("settings", &self.shared.settings)
            .finish_non_exhaustive()
    }
}

impl MemberConfigurations {
    /// Configurations of `webhooks` at `base_url` (how the members reach this server; no
    /// trailing path), trusting `ca_bundle` (PEM). Fails if `options` would make
    /// configurations kube-apiserver refuses (see [`ConfigOptions::check`]).
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) -> Result<(), mcr_webhook::Error> {
    /// let writer = mcr_webhook::MemberConfigurations::new(
    ///     webhooks, "https://10.0.0.5:9443", b"-----BEGIN CERTIFICATE-----...".to_vec(),
    ///     mcr_webhook::ConfigOptions::new("widgets.example.com"))?;
    /// # Ok(()) }
    /// ```
    pub fn new(
        webhooks: Webhooks,
        base_url: impl Into<String>,
        ca_bundle: Vec<u8>,
        options: ConfigOptions,
    ) -> Result<Self, Error> {
        options.check()?;
        Ok(Self {
            shared: Arc::new(Shared {
                source: Source {
                    webhooks,
                    base_url: base_url.into().trim_end_matches('/').to_owned(),
                    ours: Ours::new(&options),
                    options,
                    ca_bundle: watch::Sender::new(ca_bundle),
                },
                settings: Settings {
                    write_timeout: Duration::from_secs(10),
                    resync: Duration::from_secs(60),
                },
                statuses: Statuses::default(),
                running: watch::Sender::new(false),
                stopping: CancellationToken::new(),
            }),
            ca_file: None,
            engagements: AtomicU64::new(0),
        })
    }

    /// Changes a setting; only before the writer is shared (it is, once added to a manager).
    fn settings(mut self, change: impl FnOnce(&mut Settings)) -> Self {
        match Arc::get_mut(&mut self.shared) {
            Some(shared) => change(&mut shared.settings),
            None => {
                tracing::warn!("MemberConfigurations settings changed after it was shared: ignored")
            }
        }
        self
    }

    /// Follows the CA bundle in `path` (PEM, a bundle you manage, such as a trust-manager
    /// `Bundle` or a ConfigMap mounted into the pod), read every `poll` once the manager
    /// runs: a new bundle is converged into every engaged member's configurations, without a
    /// restart. A file that is missing or not a bundle of certificates (a half-written file)
    /// keeps the bundle in use, and is logged.
    ///
    /// To rotate the serving CA without refusing a write, trust both first: put the old and
    /// the new CA in the bundle, wait until the members have it
    /// ([`has_written_ca_bundle`](Self::has_written_ca_bundle)), switch the serving
    /// certificate, then drop the old CA from the bundle. Do not follow the `ca.crt` of the
    /// serving certificate's own Secret: it changes together with the certificate, which
    /// skips the first step.
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations) {
    /// let writer = writer.ca_bundle_file("/tls/ca.crt", std::time::Duration::from_secs(30));
    /// # }
    /// ```
    #[must_use]
    pub fn ca_bundle_file(mut self, path: impl Into<PathBuf>, poll: Duration) -> Self {
        self.ca_file = Some((path.into(), poll));
        self
    }

    /// Replaces the CA bundle (PEM): every engaged member's configurations are converged to
    /// it. `Ok(false)` if it is the bundle in use; an error, and nothing written, if it holds
    /// no certificate or anything unreadable.
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations, old_and_new: Vec<u8>) -> Result<(), mcr_webhook::Error> {
    /// writer.set_ca_bundle(old_and_new)?;
    /// # Ok(()) }
    /// ```
    pub fn set_ca_bundle(&self, pem: Vec<u8>) -> Result<bool, Error> {
        self.shared
            .statuses
            .offer_ca_bundle(&self.shared.source.ca_bundle, pem)
            .map_err(|reason| Error::CaBundle { reason })
    }

    /// Whether `ca_bundle` (PEM) is the bundle in use and converged into the configurations
    /// of every member this writer engages: each such member in
    /// [`member_statuses`](Self::member_statuses) is `engaged` (a new bundle makes them
    /// `pending` at once, and `engaged` again once converged) or `elsewhere`. The condition to
    /// wait on between the steps of a CA rotation; a member that cannot be written (`failed`)
    /// holds it false. Members that left the fleet do not count, even while the removal of
    /// our entries from them keeps failing (it is reported apart, under
    /// `webhook-configurations-cleanup`).
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations, old_and_new: Vec<u8>) {
    /// if writer.has_written_ca_bundle(&old_and_new) {
    ///     println!("every member trusts both CAs: switch the serving certificate");
    /// }
    /// # }
    /// ```
    pub fn has_written_ca_bundle(&self, ca_bundle: &[u8]) -> bool {
        *self.shared.source.ca_bundle.borrow() == ca_bundle && self.shared.statuses.all_written()
    }

    /// Bounds each read and write of a member's configurations (default 10 s).
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations) {
    /// let writer = writer.write_timeout(std::time::Duration::from_secs(5));
    /// # }
    /// ```
    #[must_use]
    pub fn write_timeout(self, timeout: Duration) -> Self {
        self.settings(|s| s.write_timeout = timeout)
    }

    /// How often each member's configurations are converged when nothing else asked for it
    /// (default 60 s; at most 60 s is kept): the bound on how long a change missed by the
    /// watch stays unrepaired.
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations) {
    /// let writer = writer.resync(std::time::Duration::from_secs(30));
    /// # }
    /// ```
    #[must_use]
    pub fn resync(self, every: Duration) -> Self {
        let every = every.clamp(Duration::from_millis(10), Duration::from_secs(60));
        self.settings(|s| s.resync = every)
    }

    /// Where each member's configurations stand: `pending` while a converge is on its way
    /// (the first one, or one with a new CA bundle), `engaged` once converged, `failed` (with
    /// the reason and the retry delay) while it keeps failing, `elsewhere` once another
    /// replica owns the member (provider name `webhook-configurations`); and, for members that
    /// left the fleet, `failed` while the removal of our entries keeps failing (provider name
    /// `webhook-configurations-cleanup`; a member whose entries were removed is not listed).
    /// The manager reports the same statuses with the provider's, in
    /// [`Manager::member_statuses`](mcr_manager::Manager::member_statuses) (and so in
    /// `cluster_statuses`, `/clusters` and the `mcr_members` gauge).
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations) {
    /// for s in writer.member_statuses() {
    ///     println!("{} {}: {}", s.provider, s.name, s.state);
    /// }
    /// # }
    /// ```
    pub fn member_statuses(&self) -> Vec<MemberStatus> {
        self.shared.statuses.list()
    }
}

impl Runnable for MemberConfigurations {
    fn name(&self) -> &str {
        "webhook-member-configurations"
    }

    fn start(
        self: Arc<Self>,
        token: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move {
            self.shared.running.send_replace(true);
            match &self.ca_file {
                Some((path, poll)) => {
                    let offer = |pem| {
                        self.shared
                            .statuses
                            .offer_ca_bundle(&self.shared.source.ca_bundle, pem)
                    };
                    ca_bundle::follow(path, *poll, offer, token.clone()).await;
                }
                None => token.cancelled().await,
            }
            // The manager stops: members keep their configurations.
            self.shared.stopping.cancel();
            Ok(())
        })
    }

    /// Sharded, every replica converges the members it owns; otherwise only the leader
    /// writes (a standby's engagements wait), as the leader alone reconciles.
    fn needs_leader_election(&self) -> bool {
        !self.shared.source.webhooks.fleet().is_sharded()
    }

    fn aware(&self) -> Option<&dyn Aware> {
        Some(self)
    }

    fn member_statuses(&self) -> Vec<MemberStatus> {
        MemberConfigurations::member_statuses(self)
    }
}

impl Aware for MemberConfigurations {
    fn engage(
        &self,
        token: CancellationToken,
        name: ClusterName,
        cluster: Cluster,
    ) -> Result<(), mcr_core::Error> {
        let generation = self.engagements.fetch_add(1, Ordering::SeqCst) + 1;
        // A standby (unsharded, leader election) writes nothing: the leader does.
        let state = if *self.shared.running.borrow() {
            MemberState::Pending
        } else {
            MemberState::Elsewhere { owner: None }
        };
        self.shared.statuses.set(&name, generation, state);
        let span = info_span!("webhook_configuration", cluster = %name);
        let member = Member {
            name,
            cluster,
            generation,
            token,
            shared: self.shared.clone(),
        };
        tokio::spawn(member.run().instrument(span));
        Ok(())
    }
}
