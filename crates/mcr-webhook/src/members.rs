//! [`MemberConfigurations`]: opt-in; writes the webhook configurations into each member as it
//! is engaged (its apiserver then calls `{base_url}/clusters/{name}/...`) and removes them
//! when the member leaves.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
};
use mcr_core::{Aware, BoxFuture, Cluster, ClusterName, backoff::Backoff};
use mcr_manager::{BoxError, Runnable};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::{
    ConfigOptions, Webhooks, member_path, mutating_configuration, validating_configuration,
};

/// The field manager of the writes.
const FIELD_MANAGER: &str = "mcr-webhook";

/// Writes the configurations of the registered defaulters and validators into every engaged
/// member, calling `{base_url}/clusters/{name}/{path}` with `ca_bundle`, by server-side apply.
/// A write is bounded by `write_timeout` and retried with backoff until it succeeds or the
/// member leaves; each member has its own task, so one unreachable member delays nobody.
/// When a member leaves while the manager runs, its configurations are deleted (one bounded
/// attempt: a member that left may be unreachable). Shutting the manager down leaves them in
/// place, so a restart or a standby replica keeps serving them.
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
    webhooks: Webhooks,
    base_url: String,
    ca_bundle: Vec<u8>,
    options: ConfigOptions,
    write_timeout: Duration,
    stopping: CancellationToken,
}

impl std::fmt::Debug for MemberConfigurations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberConfigurations")
            .field("base_url", &self.base_url)
            .field("name", &self.options.name)
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
            webhooks,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            ca_bundle,
            options,
            write_timeout: Duration::from_secs(10),
            stopping: CancellationToken::new(),
        }
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

    fn configurations(
        &self,
        name: &ClusterName,
    ) -> (
        Option<ValidatingWebhookConfiguration>,
        Option<MutatingWebhookConfiguration>,
    ) {
        let base = format!("{}{}", self.base_url, member_path(name, ""));
        (
            validating_configuration(&self.webhooks, &base, &self.ca_bundle, &self.options),
            mutating_configuration(&self.webhooks, &base, &self.ca_bundle, &self.options),
        )
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

async fn apply(
    client: &Client,
    timeout: Duration,
    validating: &Option<ValidatingWebhookConfiguration>,
    mutating: &Option<MutatingWebhookConfiguration>,
    name: &str,
) -> Result<(), String> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    if let Some(config) = validating {
        let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        bounded(
            timeout,
            "writing the ValidatingWebhookConfiguration",
            api.patch(name, &params, &Patch::Apply(config)),
        )
        .await?;
    }
    if let Some(config) = mutating {
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        bounded(
            timeout,
            "writing the MutatingWebhookConfiguration",
            api.patch(name, &params, &Patch::Apply(config)),
        )
        .await?;
    }
    Ok(())
}

/// A delete that found nothing is done.
fn gone<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

async fn remove(client: &Client, timeout: Duration, validating: bool, mutating: bool, name: &str) {
    if validating {
        let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        if let Err(err) = bounded(
            timeout,
            "deleting the ValidatingWebhookConfiguration",
            async { gone(api.delete(name, &DeleteParams::default()).await) },
        )
        .await
        {
            warn!(error = %err, "the member keeps its webhook configuration");
        }
    }
    if mutating {
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        if let Err(err) = bounded(
            timeout,
            "deleting the MutatingWebhookConfiguration",
            async { gone(api.delete(name, &DeleteParams::default()).await) },
        )
        .await
        {
            warn!(error = %err, "the member keeps its webhook configuration");
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
            token.cancelled().await;
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
        let (validating, mutating) = self.configurations(&name);
        if validating.is_none() && mutating.is_none() {
            return Ok(());
        }
        let client = cluster.client();
        let timeout = self.write_timeout;
        let config_name = self.options.name.clone();
        let stopping = self.stopping.clone();
        let fleet = self.webhooks.fleet().clone();
        let span = info_span!("webhook_configuration", cluster = %name);
        tokio::spawn(
            async move {
                let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
                loop {
                    match apply(&client, timeout, &validating, &mutating, &config_name).await {
                        Ok(()) => {
                            info!(name = %config_name, "webhook configuration written");
                            break;
                        }
                        Err(err) => {
                            let delay = backoff.next_delay();
                            warn!(error = %err, retry_in = ?delay, "webhook configuration not written");
                            tokio::select! {
                                () = token.cancelled() => break,
                                () = stopping.cancelled() => return,
                                () = tokio::time::sleep(delay) => {}
                            }
                        }
                    }
                }
                tokio::select! {
                    () = token.cancelled() => {}
                    () = stopping.cancelled() => return,
                }
                if stopping.is_cancelled() {
                    return;
                }
                // Replaced by a new instance under the same name (new credentials, new
                // server): that instance's engagement wrote the configuration; keep it.
                if fleet.get(&name).is_ok_and(|now| !now.same_instance(&cluster)) {
                    return;
                }
                debug!("member left: removing its webhook configuration");
                remove(&client, timeout, validating.is_some(), mutating.is_some(), &config_name).await;
            }
            .instrument(span),
        );
        Ok(())
    }
}
