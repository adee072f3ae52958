//! One engagement of a member by [`MemberConfigurations`](super::MemberConfigurations): its
//! task writes the configurations (again on every new CA bundle) and, once the member is
//! disengaged, keeps them (handed to another replica, replaced) or removes them (left the
//! fleet), retrying, conditioned on its own write.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::{
    Api, Client, Resource,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
};
use mcr_core::{Cluster, ClusterName, MemberState, Ownership, backoff::Backoff};
use mcr_manager::Fleet;
use parking_lot::Mutex;
use serde::{Serialize, de::DeserializeOwned};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{FIELD_MANAGER, Source};

/// Where each member stands, with the engagement that recorded it.
pub(super) type Statuses = Mutex<BTreeMap<ClusterName, (u64, MemberState)>>;

/// Records the state of `name` for engagement `generation`, unless a later engagement
/// recorded one already.
pub(super) fn set_status(
    statuses: &Statuses,
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

/// Takes `pem` as the CA bundle if it is one and differs from the current one; whether it did.
/// Under the statuses' lock, every `engaged` member becomes `pending` in the same step, so
/// `engaged` always means "has the current bundle" (see [`set_engaged`]).
pub(super) fn offer_ca_bundle(
    statuses: &Statuses,
    bundle: &tokio::sync::watch::Sender<Vec<u8>>,
    pem: Vec<u8>,
) -> Result<bool, String> {
    let mut statuses = statuses.lock();
    let changed = crate::ca_bundle::offer(bundle, pem)?;
    if changed {
        for (_, state) in statuses.values_mut() {
            if *state == MemberState::Engaged {
                *state = MemberState::Pending;
            }
        }
    }
    Ok(changed)
}

/// Records `name` as `engaged` for engagement `generation`, which wrote `written`, unless the
/// CA bundle changed since (it stays `pending`: the rewrite follows) or a later engagement
/// recorded a state already.
fn set_engaged(
    statuses: &Statuses,
    name: &ClusterName,
    generation: u64,
    written: &[u8],
    bundle: &tokio::sync::watch::Sender<Vec<u8>>,
) {
    let mut statuses = statuses.lock();
    if *bundle.borrow() != written {
        return;
    }
    match statuses.get(name) {
        Some((g, _)) if *g > generation => {}
        _ => {
            statuses.insert(name.clone(), (generation, MemberState::Engaged));
        }
    }
}

/// Forgets `name`, if engagement `generation` recorded its state last.
fn clear_status(statuses: &Statuses, name: &ClusterName, generation: u64) {
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
pub(super) trait Configuration:
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
pub(super) struct Written<K> {
    resource_version: Option<String>,
    /// Removed, found gone, or found rewritten by someone else: nothing left to delete.
    done: bool,
    _k: std::marker::PhantomData<fn() -> K>,
}

impl<K: Configuration> Written<K> {
    pub(super) fn new() -> Self {
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
pub(super) struct Engagement {
    pub(super) name: ClusterName,
    pub(super) cluster: Cluster,
    pub(super) generation: u64,
    pub(super) config_name: String,
    pub(super) source: Arc<Source>,
    pub(super) timeout: Duration,
    pub(super) validating: Written<ValidatingWebhookConfiguration>,
    pub(super) mutating: Written<MutatingWebhookConfiguration>,
    pub(super) fleet: Fleet,
    pub(super) stopping: CancellationToken,
    pub(super) statuses: Arc<Statuses>,
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
    pub(super) async fn run(mut self, token: CancellationToken) {
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
                        set_engaged(
                            &self.statuses,
                            &self.name,
                            self.generation,
                            &bundle,
                            &self.source.ca_bundle,
                        );
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
