//! One engagement of a member by [`MemberConfigurations`](super::MemberConfigurations): a
//! converge loop, level-triggered. The desired entries (our webhooks, our URL, the CA bundle
//! of the moment) are computed afresh and the member's two objects brought to them on
//! engagement, on every new CA bundle, on every watch event of those objects (someone else's
//! write: a hand edit, an old owner's late write) and on a periodic resync. Every write is
//! conditioned on the object as just read (its `resourceVersion`), made only while this
//! replica owns the member (asked right before), and cut when the engagement ends. Once the
//! member has left the fleet, exactly our entries are taken out, retried until done.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams, Preconditions},
    runtime::{WatchStreamExt, watcher},
};
use mcr_core::{Cluster, ClusterName, MemberState, Ownership, backoff::Backoff};
use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, warn};

use super::{FIELD_MANAGER, Shared, desired::Configuration};
use crate::member_path;

/// How many of our own writes' `resourceVersion`s are remembered, to tell their watch events
/// from others' writes.
const ECHOES: usize = 8;

/// How many times a write that lost a race (409: the object changed since it was read) is
/// read and written again at once, before waiting for the next reason to converge.
const RACES: usize = 5;

/// One engagement of one member.
pub(super) struct Member {
    pub(super) name: ClusterName,
    pub(super) cluster: Cluster,
    pub(super) generation: u64,
    /// Fires when the engagement ends (the member left, was replaced, or was handed over).
    pub(super) token: CancellationToken,
    pub(super) shared: Arc<Shared>,
}

/// How a converge ended.
#[derive(Debug)]
enum Converged {
    /// The objects hold our entries as desired.
    Done,
    /// Another replica owns the member (or the engagement ended): nothing written.
    Elsewhere(Option<String>),
    /// A write lost a race every time: try again at the next reason.
    Raced,
    /// A read or write failed.
    Failed(String),
}

/// Why a call to the member's apiserver failed.
enum CallError {
    /// 409: the object changed since it was read (or was created meanwhile).
    Conflict,
    /// 404: the object is gone.
    Gone,
    /// Anything else, said for the status (credentials never shown).
    Other(String),
}

/// `fut`, bounded by `timeout`.
async fn call<T>(
    timeout: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(kube::Error::Api(s))) if s.code == 409 => Err(CallError::Conflict),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => Err(CallError::Gone),
        Ok(Err(err)) => Err(CallError::Other(format!(
            "{what}: {}",
            mcr_core::kubeconfig::redact_kube_error(&err)
        ))),
        Err(_) => Err(CallError::Other(format!(
            "{what}: no answer within {timeout:?}"
        ))),
    }
}

/// A write of one object.
enum Write<K> {
    Create(K),
    Replace(K),
    /// Delete the object read at this `resourceVersion` (our entries were all it held).
    Delete(Option<String>),
}

/// Watches the object `name` of kind `K` in the member until `stop`, waking the converge loop
/// with the `resourceVersion` of every change (`None` for a deletion or a relist).
async fn watch<K: Configuration>(
    client: Client,
    name: String,
    wake: mpsc::Sender<Option<String>>,
    stop: CancellationToken,
) {
    let api: Api<K> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let events = watcher(api, config).default_backoff();
    futures::pin_mut!(events);
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => event,
        };
        let rv = match event {
            None => return,
            Some(Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj))) => {
                obj.meta().resource_version.clone()
            }
            Some(Ok(watcher::Event::Delete(_) | watcher::Event::InitDone)) => None,
            Some(Ok(watcher::Event::Init)) => continue,
            Some(Err(err)) => {
                debug!(kind = %K::kind(&()), error = %mcr_core::ErrorChain(&err), "watching the webhook configuration failed; retrying (the resync converges meanwhile)");
                continue;
            }
        };
        // A full channel holds a wake-up already.
        let _ = wake.try_send(rv);
    }
}

impl Member {
    fn set(&self, state: MemberState) {
        self.shared.statuses.set(&self.name, self.generation, state);
    }

    /// `Some(owner)` if this replica may not write the member's configurations now: the
    /// engagement ended, or another replica owns the member.
    fn elsewhere(&self) -> Option<Option<String>> {
        if self.token.is_cancelled() {
            return Some(None);
        }
        match self.shared.source.webhooks.fleet().owner(&self.name) {
            Ownership::Owned => None,
            Ownership::Elsewhere { owner } => Some(owner),
        }
    }

    /// Converges until the engagement ends, then leaves the configurations to the next owner
    /// or, if the member left the fleet, removes our entries.
    pub(super) async fn run(self) {
        // Nothing is written before the writer runs (unsharded, on the leader only).
        let mut running = self.shared.running.subscribe();
        tokio::select! {
            ran = running.wait_for(|r| *r) => if ran.is_err() { return },
            () = self.token.cancelled() => return,
            () = self.shared.stopping.cancelled() => return,
        }
        self.set(MemberState::Pending);
        let client = self.cluster.client();
        let (wake, events) = mpsc::channel(16);
        let watching = self.token.child_token();
        let name = self.shared.source.options.name.clone();
        tokio::spawn(
            watch::<ValidatingWebhookConfiguration>(
                client.clone(),
                name.clone(),
                wake.clone(),
                watching.clone(),
            )
            .in_current_span(),
        );
        tokio::spawn(
            watch::<MutatingWebhookConfiguration>(client.clone(), name, wake, watching.clone())
                .in_current_span(),
        );
        let stop_watching = watching.drop_guard();
        let mut events = Some(events);
        let mut ca = self.shared.source.ca_bundle.subscribe();
        let mut echoes = VecDeque::with_capacity(ECHOES);
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
        'engaged: loop {
            let bundle = ca.borrow_and_update().clone();
            let outcome = tokio::select! {
                biased;
                () = self.token.cancelled() => break 'engaged,
                () = self.shared.stopping.cancelled() => return,
                outcome = self.converge(&client, &bundle, &mut echoes) => outcome,
            };
            let wait = match outcome {
                Converged::Done => {
                    backoff.reset();
                    self.shared.statuses.set_engaged(
                        &self.name,
                        self.generation,
                        &bundle,
                        &self.shared.source.ca_bundle,
                    );
                    self.shared.settings.resync
                }
                Converged::Elsewhere(owner) => {
                    self.set(MemberState::Elsewhere { owner });
                    self.shared.settings.resync
                }
                Converged::Raced => {
                    let delay = backoff.next_delay();
                    self.set(MemberState::Pending);
                    delay
                }
                Converged::Failed(reason) => {
                    let delay = backoff.next_delay();
                    warn!(error = %reason, retry_in = ?delay, "webhook configuration not converged");
                    self.set(MemberState::Failed {
                        reason,
                        retry_in: Some(delay),
                    });
                    delay
                }
            };
            let until = Instant::now() + wait;
            // The next reason to converge: a new CA bundle, someone else's change to the
            // objects, the resync (or retry) timer.
            loop {
                let event = async {
                    match events.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    () = self.token.cancelled() => break 'engaged,
                    () = self.shared.stopping.cancelled() => return,
                    changed = ca.changed() => {
                        if changed.is_ok() {
                            self.set(MemberState::Pending);
                        }
                        break;
                    }
                    event = event => match event {
                        // Our own write, coming back.
                        Some(Some(rv)) if echoes.contains(&rv) => {}
                        Some(_) => break,
                        None => events = None,
                    },
                    () = tokio::time::sleep_until(until) => break,
                }
            }
        }
        drop(stop_watching);
        self.depart(&client).await;
    }

    /// One converge of both objects.
    async fn converge(
        &self,
        client: &Client,
        bundle: &[u8],
        echoes: &mut VecDeque<String>,
    ) -> Converged {
        match self
            .converge_kind::<ValidatingWebhookConfiguration>(client, bundle, echoes)
            .await
        {
            Converged::Done => {}
            other => return other,
        }
        self.converge_kind::<MutatingWebhookConfiguration>(client, bundle, echoes)
            .await
    }

    /// Brings the object of kind `K` to hold our entries as desired, the others' untouched.
    async fn converge_kind<K: Configuration>(
        &self,
        client: &Client,
        bundle: &[u8],
        echoes: &mut VecDeque<String>,
    ) -> Converged {
        let source = &self.shared.source;
        let name = source.options.name.as_str();
        let timeout = self.shared.settings.write_timeout;
        let base = format!("{}{}", source.base_url, member_path(&self.name, ""));
        let desired = K::desired(&source.webhooks, &base, bundle, &source.options);
        let api: Api<K> = Api::all(client.clone());
        let kind = K::kind(&());
        for _ in 0..RACES {
            let current =
                match call(timeout, &format!("reading the {kind}"), api.get_opt(name)).await {
                    Ok(current) => current,
                    Err(CallError::Other(reason)) => return Converged::Failed(reason),
                    Err(_) => continue,
                };
            let write = match current {
                None if desired.is_empty() => return Converged::Done,
                None => Write::Create(K::with_hooks(name, desired.clone())),
                Some(mut obj) => match source.ours.merge::<K>(obj.hooks(), &desired) {
                    None => return Converged::Done,
                    Some(hooks) if hooks.is_empty() => {
                        Write::Delete(obj.meta().resource_version.clone())
                    }
                    Some(hooks) => {
                        obj.set_hooks(hooks);
                        obj.meta_mut().managed_fields = None;
                        Write::Replace(obj)
                    }
                },
            };
            // Fenced: only while this replica owns the member, asked right before writing
            // (the write itself is cut if the engagement ends while it is on its way, and it
            // is conditioned on what was just read, so an old owner's write that lands late
            // is refused).
            if let Some(owner) = self.elsewhere() {
                return Converged::Elsewhere(owner);
            }
            match self.write(&api, name, write).await {
                Ok(rv) => {
                    info!(%kind, "webhook configuration converged");
                    if let Some(rv) = rv {
                        if echoes.len() == ECHOES {
                            echoes.pop_front();
                        }
                        echoes.push_back(rv);
                    }
                    return Converged::Done;
                }
                Err(CallError::Other(reason)) => return Converged::Failed(reason),
                Err(CallError::Conflict | CallError::Gone) => {
                    debug!(%kind, "webhook configuration changed while converging: reading it again");
                }
            }
        }
        Converged::Raced
    }

    /// Sends `write`; the `resourceVersion` it left, if any.
    async fn write<K: Configuration>(
        &self,
        api: &Api<K>,
        name: &str,
        write: Write<K>,
    ) -> Result<Option<String>, CallError> {
        let timeout = self.shared.settings.write_timeout;
        let kind = K::kind(&());
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let rv = |obj: K| obj.meta().resource_version.clone();
        match write {
            Write::Create(obj) => call(
                timeout,
                &format!("creating the {kind}"),
                api.create(&params, &obj),
            )
            .await
            .map(rv),
            Write::Replace(obj) => call(
                timeout,
                &format!("updating the {kind}"),
                api.replace(name, &params, &obj),
            )
            .await
            .map(rv),
            Write::Delete(resource_version) => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        resource_version,
                        uid: None,
                    }),
                    ..DeleteParams::default()
                };
                call(
                    timeout,
                    &format!("removing the {kind}"),
                    api.delete(name, &params),
                )
                .await
                .map(|_| None)
            }
        }
    }

    /// The engagement ended: the member was replaced (the new engagement converges), handed
    /// to another replica (it converges), or left the fleet (our entries are removed,
    /// retried until done, the member comes back, or the manager stops).
    async fn depart(&self, client: &Client) {
        if self.shared.stopping.is_cancelled() {
            return;
        }
        let fleet = self.shared.source.webhooks.fleet();
        if fleet
            .get(&self.name)
            .is_ok_and(|now| !now.same_instance(&self.cluster))
        {
            return;
        }
        if let Ownership::Elsewhere { owner } = fleet.owner(&self.name) {
            info!(
                owner = owner.as_deref().unwrap_or("unknown"),
                "member handed to another replica: it converges the webhook configurations from now on"
            );
            self.set(MemberState::Elsewhere { owner });
            return;
        }
        debug!("member left the fleet: removing our webhooks from its configurations");
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
        loop {
            let removed = async {
                let validating = self.remove::<ValidatingWebhookConfiguration>(client).await;
                let mutating = self.remove::<MutatingWebhookConfiguration>(client).await;
                validating.and(mutating)
            };
            let outcome = tokio::select! {
                () = self.shared.stopping.cancelled() => return,
                outcome = removed => outcome,
            };
            match outcome {
                Ok(()) => {
                    info!("member left the fleet: our webhooks removed from its configurations");
                    self.shared.statuses.clear(&self.name, self.generation);
                    return;
                }
                Err(err) => {
                    let delay = backoff.next_delay();
                    warn!(error = %err, retry_in = ?delay, "the departed member keeps our webhooks for now");
                    self.shared.statuses.set_cleanup(
                        &self.name,
                        self.generation,
                        MemberState::Failed {
                            reason: format!("member left the fleet; {err}"),
                            retry_in: Some(delay),
                        },
                    );
                    tokio::select! {
                        () = self.shared.stopping.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
            // Back in the fleet: its new engagement converges; stop removing.
            if fleet.get(&self.name).is_ok() {
                self.shared.statuses.clear(&self.name, self.generation);
                return;
            }
        }
    }

    /// Takes exactly our webhooks out of the object of kind `K` (deleting it when they were
    /// all it held), whatever else changed in it.
    async fn remove<K: Configuration>(&self, client: &Client) -> Result<(), String> {
        let source = &self.shared.source;
        let name = source.options.name.as_str();
        let timeout = self.shared.settings.write_timeout;
        let api: Api<K> = Api::all(client.clone());
        let kind = K::kind(&());
        for _ in 0..RACES {
            let current =
                match call(timeout, &format!("reading the {kind}"), api.get_opt(name)).await {
                    Ok(current) => current,
                    Err(CallError::Other(reason)) => return Err(reason),
                    Err(_) => continue,
                };
            let Some(mut obj) = current else {
                return Ok(());
            };
            let Some(rest) = source.ours.remove::<K>(obj.hooks()) else {
                return Ok(());
            };
            // The member came back meanwhile: its engagement converges.
            if source.webhooks.fleet().get(&self.name).is_ok() {
                return Ok(());
            }
            let write = if rest.is_empty() {
                Write::Delete(obj.meta().resource_version.clone())
            } else {
                obj.set_hooks(rest);
                obj.meta_mut().managed_fields = None;
                Write::Replace(obj)
            };
            match self.write(&api, name, write).await {
                Ok(_) | Err(CallError::Gone) => return Ok(()),
                Err(CallError::Conflict) => {}
                Err(CallError::Other(reason)) => return Err(reason),
            }
        }
        Err(format!(
            "the {kind} kept changing while our webhooks were taken out of it"
        ))
    }
}
