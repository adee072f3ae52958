//! [`MemberConfigurations`]: opt-in; writes the webhook configurations into each member as it
//! is engaged (its apiserver then calls `{base_url}/clusters/{name}/...`), keeps them when the
//! member is handed to another replica, and removes them when the member leaves the fleet,
//! retrying until it can, never over a newer write.

mod engagement;

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use mcr_core::{Aware, BoxFuture, Cluster, ClusterName, MemberState, MemberStatus};
use mcr_manager::{BoxError, Runnable};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span};

use self::engagement::{Engagement, Statuses, Written, set_status};
use crate::{
    ConfigOptions, Error, Webhooks, ca_bundle, member_path, mutating_configuration,
    validating_configuration,
};

/// The field manager of the writes.
const FIELD_MANAGER: &str = "mcr-webhook";

/// The annotation each write carries: which writer and engagement wrote it. Every engagement
/// writes a new value, so its write always changes the object's `resourceVersion`, and a
/// delete conditioned on an older one fails.
pub const WRITTEN_BY_ANNOTATION: &str = "webhook.mcr.sigs.k8s.io/written-by";

/// The provider name of [`MemberConfigurations::member_statuses`].
const STATUS_PROVIDER: &str = "webhook-configurations";

/// Writes the configurations of the registered defaulters and validators into every engaged
/// member, calling `{base_url}/clusters/{name}/{path}` with `ca_bundle`, by server-side apply.
/// A write is bounded by `write_timeout` and retried with backoff until it succeeds or the
/// member is disengaged; each member has its own task, so one unreachable member delays
/// nobody.
///
/// When a member is disengaged:
/// - **handed to another replica** (sharded mode: the fleet says another replica owns it), its
///   configurations stay: the new owner's write replaces them (with its own URL when each
///   replica has one), so the member is never left without them;
/// - **replaced** by a new instance under the same name, the new engagement writes them;
/// - **gone from the fleet**, they are deleted, retried with backoff until the delete succeeds
///   (shown meanwhile in [`member_statuses`](Self::member_statuses)), the member comes back,
///   or the manager stops. Each delete is conditioned on the `resourceVersion` of this
///   engagement's own write (every write carries a fresh [`WRITTEN_BY_ANNOTATION`]), so a
///   late delete never removes what another replica or a later engagement wrote since.
///
/// Shutting the manager down leaves them in place, so a restart or another replica keeps
/// serving them.
///
/// Add it to the manager; register the webhooks first (a member engaged before registration
/// gets what was registered then).
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
    source: Arc<Source>,
    /// The CA bundle file followed, and how often it is read.
    ca_file: Option<(PathBuf, Duration)>,
    write_timeout: Duration,
    stopping: CancellationToken,
    /// Where each member stands, with the engagement that set it.
    statuses: Arc<Statuses>,
    engagements: AtomicU64,
}

/// What a configuration is built from, shared with the engagement tasks.
struct Source {
    webhooks: Webhooks,
    base_url: String,
    options: ConfigOptions,
    /// The CA bundle of the moment: a change rewrites every engaged member's configurations.
    ca_bundle: watch::Sender<Vec<u8>>,
    /// Tells this writer's writes from others' in [`WRITTEN_BY_ANNOTATION`].
    writer: String,
}

impl Source {
    /// The configurations for member `name`, trusting `ca_bundle`, marked as written by
    /// engagement `generation`.
    fn configurations(
        &self,
        name: &ClusterName,
        ca_bundle: &[u8],
        generation: u64,
    ) -> (
        Option<ValidatingWebhookConfiguration>,
        Option<MutatingWebhookConfiguration>,
    ) {
        let base = format!("{}{}", self.base_url, member_path(name, ""));
        // The options were checked when the writer was built.
        let mut validating =
            validating_configuration(&self.webhooks, &base, ca_bundle, &self.options)
                .ok()
                .flatten();
        let mut mutating = mutating_configuration(&self.webhooks, &base, ca_bundle, &self.options)
            .ok()
            .flatten();
        let written_by = format!("{}/{generation}", self.writer);
        for meta in [
            validating.as_mut().map(|c| &mut c.metadata),
            mutating.as_mut().map(|c| &mut c.metadata),
        ]
        .into_iter()
        .flatten()
        {
            meta.annotations
                .get_or_insert_default()
                .insert(WRITTEN_BY_ANNOTATION.into(), written_by.clone());
        }
        (validating, mutating)
    }
}

impl std::fmt::Debug for MemberConfigurations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberConfigurations")
            .field("base_url", &self.source.base_url)
            .field("name", &self.source.options.name)
            .field("ca_file", &self.ca_file)
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
            source: Arc::new(Source {
                webhooks,
                base_url: base_url.into().trim_end_matches('/').to_owned(),
                options,
                ca_bundle: watch::Sender::new(ca_bundle),
                writer: writer_id(),
            }),
            ca_file: None,
            write_timeout: Duration::from_secs(10),
            stopping: CancellationToken::new(),
            statuses: Arc::default(),
            engagements: AtomicU64::new(0),
        })
    }

    /// Follows the CA bundle in `path` (PEM, a bundle you manage, such as a trust-manager
    /// `Bundle` or a ConfigMap mounted into the pod), read every `poll` once the manager
    /// runs: a new bundle is written into every engaged member's configurations, without a
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

    /// Replaces the CA bundle (PEM): every engaged member's configurations are rewritten with
    /// it. `Ok(false)` if it is the bundle in use; an error, and nothing written, if it holds
    /// no certificate or anything unreadable.
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations, old_and_new: Vec<u8>) -> Result<(), mcr_webhook::Error> {
    /// writer.set_ca_bundle(old_and_new)?;
    /// # Ok(()) }
    /// ```
    pub fn set_ca_bundle(&self, pem: Vec<u8>) -> Result<bool, Error> {
        engagement::offer_ca_bundle(&self.statuses, &self.source.ca_bundle, pem)
            .map_err(|reason| Error::CaBundle { reason })
    }

    /// Whether `ca_bundle` (PEM) is the bundle in use and written into the configurations of
    /// every member this writer engages: each member in
    /// [`member_statuses`](Self::member_statuses) is `engaged` (a new bundle makes them
    /// `pending` at once, and `engaged` again once rewritten) or `elsewhere`. The condition to
    /// wait on between the steps of a CA rotation; a member that cannot be written (`failed`)
    /// holds it false.
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations, old_and_new: Vec<u8>) {
    /// if writer.has_written_ca_bundle(&old_and_new) {
    ///     println!("every member trusts both CAs: switch the serving certificate");
    /// }
    /// # }
    /// ```
    pub fn has_written_ca_bundle(&self, ca_bundle: &[u8]) -> bool {
        let statuses = self.statuses.lock();
        *self.source.ca_bundle.borrow() == ca_bundle
            && statuses.values().all(|(_, state)| {
                matches!(state, MemberState::Engaged | MemberState::Elsewhere { .. })
            })
    }

    /// Bounds each write (default 10 s).
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations) {
    /// let writer = writer.write_timeout(std::time::Duration::from_secs(5));
    /// # }
    /// ```
    #[must_use]
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// Where each member's configurations stand: `pending` while a write is on its way (the
    /// first one, or a rewrite with a new CA bundle), `engaged` once written, `failed` (with
    /// the reason and the retry delay) while a write or, for a member that left the fleet, the
    /// removal keeps failing, `elsewhere` once handed to another replica. A member whose
    /// configurations were removed is not listed. The manager reports the same statuses with
    /// the provider's, under the provider name `webhook-configurations`, in
    /// [`Manager::member_statuses`](mcr_manager::Manager::member_statuses) (and so in
    /// `cluster_statuses`, `/clusters` and the `mcr_members` gauge).
    ///
    /// ```no_run
    /// # fn demo(writer: mcr_webhook::MemberConfigurations) {
    /// for s in writer.member_statuses() {
    ///     println!("{}: {}", s.name, s.state);
    /// }
    /// # }
    /// ```
    pub fn member_statuses(&self) -> Vec<MemberStatus> {
        self.statuses
            .lock()
            .iter()
            .map(|(name, (_, state))| {
                MemberStatus::new(STATUS_PROVIDER, name.clone(), state.clone())
            })
            .collect()
    }
}

/// A value no other writer (process, or `MemberConfigurations` in it) uses.
fn writer_id() -> String {
    static WRITERS: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        WRITERS.fetch_add(1, Ordering::Relaxed)
    )
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
            match &self.ca_file {
                Some((path, poll)) => {
                    let offer = |pem| {
                        engagement::offer_ca_bundle(&self.statuses, &self.source.ca_bundle, pem)
                    };
                    ca_bundle::follow(path, *poll, offer, token.clone()).await;
                }
                None => token.cancelled().await,
            }
            // The manager stops: members keep their configurations.
            self.stopping.cancel();
            Ok(())
        })
    }

    fn needs_leader_election(&self) -> bool {
        false
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
        if self.source.webhooks.registrations().is_empty() {
            return Ok(());
        }
        let generation = self.engagements.fetch_add(1, Ordering::SeqCst) + 1;
        set_status(&self.statuses, &name, generation, MemberState::Pending);
        let span = info_span!("webhook_configuration", cluster = %name);
        let engagement = Engagement {
            name,
            cluster,
            generation,
            config_name: self.source.options.name.clone(),
            source: self.source.clone(),
            timeout: self.write_timeout,
            validating: Written::new(),
            mutating: Written::new(),
            fleet: self.source.webhooks.fleet().clone(),
            stopping: self.stopping.clone(),
            statuses: self.statuses.clone(),
        };
        tokio::spawn(engagement.run(token).instrument(span));
        Ok(())
    }
}
