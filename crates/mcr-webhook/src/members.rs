//! [`MemberConfigurations`]: opt-in; writes the webhook configurations into each member as it
//! is engaged (its apiserver then calls `{base_url}/clusters/{name}/...`), keeps them when the
//! member is handed to another replica, and removes them when the member leaves the fleet,
//! retrying until it can, never over a newer write.

use std::{
    collections::BTreeMap,
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
use kube::{
    Api, Client, Resource,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
};
use mcr_core::{
    Aware, BoxFuture, Cluster, ClusterName, MemberState, MemberStatus, backoff::Backoff,
    shard::Ownership,
};
use mcr_manager::{BoxError, Fleet, Runnable};
use parking_lot::Mutex;
use serde::{Serialize, de::DeserializeOwned};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

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
/// # fn demo(mgr: mcr_manager::Manager, webhooks: Webhooks, ca_pem: Vec<u8>) -> Result<(), mcr_manager::Error> {
/// let writer = MemberConfigurations::new(
///     webhooks,
///     "https://webhooks.example.com:9443", // how members reach this manager
///     ca_pem,
///     ConfigOptions::new("widgets.example.com"),
/// );
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
    statuses: Arc<Mutex<BTreeMap<ClusterName, (u64, MemberState)>>>,
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
        let mut validating =
            validating_configuration(&self.webhooks, &base, ca_bundle, &self.options);
        let mut mutating = mutating_configuration(&self.webhooks, &base, ca_bundle, &self.options);
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
    /// trailing path), trusting `ca_bundle` (PEM).
    ///
    /// ```no_run
    /// # fn demo(webhooks: mcr_webhook::Webhooks) {
    /// let writer = mcr_webhook::MemberConfigurations::new(
    ///     webhooks, "https://10.0.0.5:9443", b"-----BEGIN CERTIFICATE-----...".to_vec(),
    ///     mcr_webhook::ConfigOptions::new("widgets.example.com"));
    /// # }
    /// ```
    pub fn new(
        webhooks: Webhooks,
        base_url: impl Into<String>,
        ca_bundle: Vec<u8>,
        options: ConfigOptions,
    ) -> Self {
        Self {
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
        }
    }

    /// Follows the CA bundle in `path` (PEM, e.g. the `ca.crt` of the serving certificate's
    /// Secret), read every `poll` once the manager runs: a new bundle is written into every
    /// engaged member's configurations, without a restart. A file that is missing or not a
    /// bundle of certificates (a half-written file) keeps the bundle in use, and is logged.
    ///
    /// To rotate the serving CA without refusing a write, trust both first: put the old and
    /// the new CA in the bundle, wait until the members have it
    /// ([`member_statuses`](Self::member_statuses) all `engaged`), switch the serving
    /// certificate, then drop the old CA from the bundle.
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
        ca_bundle::offer(&self.source.ca_bundle, pem).map_err(|reason| Error::CaBundle { reason })
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
    /// configurations were removed is not listed.
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

/// Records the state of `name` for engagement `generation`, unless a later engagement
/// recorded one already.
fn set_status(
    statuses: &Mutex<BTreeMap<ClusterName, (u64, MemberState)>>,
    name: &ClusterName,
    generation: u64,
    state: MemberState,
) {
    let mut statuses = statuses.lock();
    match statuses.get(name) {
        Some((g, _)) if *g > generation => {}
        _ => {
            statuses.insert(name.clone(), (generation, state));
        }
    }
}

/// Forgets `name`, if engagement `generation` recorded its state last.
fn clear_status(
    statuses: &Mutex<BTreeMap<ClusterName, (u64, MemberState)>>,
    name: &ClusterName,
    generation: u64,
) {
    let mut statuses = statuses.lock();
    if statuses.get(name).is_some_and(|(g, _)| *g == generation) {
        statuses.remove(name);
    }
}

async fn bounded<T>(
    timeout: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(err)) => Err(format!(
            "{what}: {}",
            mcr_core::kubeconfig::redact_kube_error(&err)
        )),
        Err(_) => Err(format!("{what}: no answer within {timeout:?}")),
    }
}

/// A webhook configuration object: cluster-scoped, written whole.
trait Configuration:
    Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl Configuration for ValidatingWebhookConfiguration {}
impl Configuration for MutatingWebhookConfiguration {}

/// One configuration of an engagement: the `resourceVersion` its last write returned (what a
/// later delete is conditioned on).
struct Written<K> {
    resource_version: Option<String>,
    /// Removed, found gone, or found rewritten by someone else: nothing left to delete.
    done: bool,
    _k: std::marker::PhantomData<fn() -> K>,
}

impl<K: Configuration> Written<K> {
    fn new() -> Self {
        Self {
            resource_version: None,
            done: true,
            _k: std::marker::PhantomData,
        }
    }

    fn kind() -> String {
        K::kind(&()).into_owned()
    }

    /// Writes `config`, if there is one.
    async fn apply(
        &mut self,
        client: &Client,
        timeout: Duration,
        name: &str,
        config: Option<&K>,
    ) -> Result<(), String> {
        let Some(config) = config else {
            return Ok(());
        };
        let api: Api<K> = Api::all(client.clone());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let written = bounded(
            timeout,
            &format!("writing the {}", Self::kind()),
            api.patch(name, &params, &Patch::Apply(config)),
        )
        .await?;
        // A write always returns its resourceVersion; without one, a delete would be
        // unconditional, so keep a value no object has.
        self.resource_version = Some(written.meta().resource_version.clone().unwrap_or_default());
        self.done = false;
        Ok(())
    }

    /// Deletes what this engagement wrote, unless it was rewritten since.
    async fn remove(
        &mut self,
        client: &Client,
        timeout: Duration,
        name: &str,
    ) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        let Some(resource_version) = self.resource_version.clone() else {
            // Never written by this engagement: not ours to delete.
            self.done = true;
            return Ok(());
        };
        let api: Api<K> = Api::all(client.clone());
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(resource_version),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        let what = format!("removing the {}", Self::kind());
        match tokio::time::timeout(timeout, api.delete(name, &params)).await {
            Ok(Ok(_)) => {
                debug!(kind = %Self::kind(), "webhook configuration removed");
            }
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => {}
            Ok(Err(kube::Error::Api(s))) if s.code == 409 => {
                info!(kind = %Self::kind(), "webhook configuration rewritten since this replica wrote it: kept");
            }
            Ok(Err(err)) => {
                return Err(format!(
                    "{what}: {}",
                    mcr_core::kubeconfig::redact_kube_error(&err)
                ));
            }
            Err(_) => return Err(format!("{what}: no answer within {timeout:?}")),
        }
        self.done = true;
        Ok(())
    }
}

/// What an engagement task needs.
struct Engagement {
    name: ClusterName,
    cluster: Cluster,
    generation: u64,
    config_name: String,
    source: Arc<Source>,
    timeout: Duration,
    validating: Written<ValidatingWebhookConfiguration>,
    mutating: Written<MutatingWebhookConfiguration>,
    fleet: Fleet,
    stopping: CancellationToken,
    statuses: Arc<Mutex<BTreeMap<ClusterName, (u64, MemberState)>>>,
}

impl Engagement {
    fn set(&self, state: MemberState) {
        set_status(&self.statuses, &self.name, self.generation, state);
    }

    async fn apply(
        &mut self,
        client: &Client,
        validating: Option<&ValidatingWebhookConfiguration>,
        mutating: Option<&MutatingWebhookConfiguration>,
    ) -> Result<(), String> {
        self.validating
            .apply(client, self.timeout, &self.config_name, validating)
            .await?;
        self.mutating
            .apply(client, self.timeout, &self.config_name, mutating)
            .await
    }

    async fn remove(&mut self, client: &Client) -> Result<(), String> {
        let validating = self
            .validating
            .remove(client, self.timeout, &self.config_name)
            .await;
        let mutating = self
            .mutating
            .remove(client, self.timeout, &self.config_name)
            .await;
        validating.and(mutating)
    }

    /// Writes the configurations until disengaged (again whenever the CA bundle changes),
    /// then keeps or removes them.
    async fn run(mut self, token: CancellationToken) {
        let client = self.cluster.client();
        let mut ca_bundle = self.source.ca_bundle.subscribe();
        'engaged: loop {
            let bundle = ca_bundle.borrow_and_update().clone();
            let (validating, mutating) =
                self.source
                    .configurations(&self.name, &bundle, self.generation);
            let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
            loop {
                match self
                    .apply(&client, validating.as_ref(), mutating.as_ref())
                    .await
                {
                    Ok(()) => {
                        info!(name = %self.config_name, "webhook configuration written");
                        self.set(MemberState::Engaged);
                        break;
                    }
                    Err(err) => {
                        let delay = backoff.next_delay();
                        warn!(error = %err, retry_in = ?delay, "webhook configuration not written");
                        self.set(MemberState::Failed {
                            reason: err,
                            retry_in: Some(delay),
                        });
                        tokio::select! {
                            () = token.cancelled() => break 'engaged,
                            () = self.stopping.cancelled() => return,
                            _ = ca_bundle.changed() => continue 'engaged,
                            () = tokio::time::sleep(delay) => {}
                        }
                    }
                }
            }
            tokio::select! {
                () = token.cancelled() => break 'engaged,
                () = self.stopping.cancelled() => return,
                changed = ca_bundle.changed() => {
                    if changed.is_err() {
                        // The bundle can no longer change: wait for the end.
                        tokio::select! {
                            () = token.cancelled() => break 'engaged,
                            () = self.stopping.cancelled() => return,
                        }
                    }
                    self.set(MemberState::Pending);
                }
            }
        }
        if self.stopping.is_cancelled() {
            return;
        }
        // Replaced by a new instance under the same name (new credentials, new server): that
        // instance's engagement writes the configuration; keep it.
        if self
            .fleet
            .get(&self.name)
            .is_ok_and(|now| !now.same_instance(&self.cluster))
        {
            return;
        }
        // Handed to another replica: it writes its own configuration over this one; deleting
        // would leave the member unguarded until then, or for good if the delete came last.
        if let Ownership::Elsewhere { owner } = self.fleet.owner(&self.name) {
            info!(
                owner = owner.as_deref().unwrap_or("unknown"),
                "member handed to another replica: its webhook configuration stays"
            );
            self.set(MemberState::Elsewhere { owner });
            return;
        }
        debug!("member left the fleet: removing its webhook configuration");
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
        loop {
            match self.remove(&client).await {
                Ok(()) => {
                    clear_status(&self.statuses, &self.name, self.generation);
                    return;
                }
                Err(err) => {
                    let delay = backoff.next_delay();
                    warn!(error = %err, retry_in = ?delay, "the departed member keeps its webhook configuration for now");
                    self.set(MemberState::Failed {
                        reason: format!("member left the fleet; {err}"),
                        retry_in: Some(delay),
                    });
                    tokio::select! {
                        () = self.stopping.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                    // Back in the fleet here: the new engagement writes; stop removing.
                    if self.fleet.get(&self.name).is_ok() {
                        return;
                    }
                }
            }
        }
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
            match &self.ca_file {
                Some((path, poll)) => {
                    ca_bundle::follow(path, *poll, &self.source.ca_bundle, token.clone()).await;
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
