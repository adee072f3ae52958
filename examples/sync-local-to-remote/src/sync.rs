//! The sync controller. It reconciles one **namespace of one member** at a time: "make the
//! copies in this namespace equal to the labelled ConfigMaps of the same namespace in the
//! host". Keying on the member's Namespace (which exists whether or not a copy does) makes
//! every case the same level-triggered pass:
//!
//! * a labelled ConfigMap changes in the host → `watches_host` maps it to its namespace in
//!   every engaged member;
//! * a copy changes or goes away in a member → `watches` maps it to its namespace there;
//! * a member joins → its namespaces are listed, so each is reconciled once.
//!
//! Copies go only to namespaces that exist in the member.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use mcr_manager::{Context, Controller, Manager, Request, WatchOptions};
use mcr_provider_file::{FileProvider, Options};

/// Host ConfigMaps with `mcr.example/sync=true` are copied.
pub const SYNC_LABEL: &str = "mcr.example/sync";
/// Copies carry `mcr.example/synced-from-host=true`.
pub const COPY_LABEL: &str = "mcr.example/synced-from-host";
const FIELD_MANAGER: &str = "mcr-example-sync";

/// The copy of `source` a member should hold.
fn desired(source: &ConfigMap) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: source.metadata.name.clone(),
            namespace: source.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(COPY_LABEL.to_owned(), "true".to_owned())])),
            ..ObjectMeta::default()
        },
        data: source.data.clone(),
        binary_data: source.binary_data.clone(),
        immutable: source.immutable,
    }
}

fn in_sync(copy: &ConfigMap, want: &ConfigMap) -> bool {
    copy.data == want.data && copy.binary_data == want.binary_data
}

async fn reconcile(ns: Arc<Namespace>, ctx: Context<()>) -> Result<Action, kube::Error> {
    let namespace = ns.name_any();
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let sources: Api<ConfigMap> = Api::namespaced(ctx.host().client(), &namespace);
    let copies: Api<ConfigMap> = Api::namespaced(ctx.client(), &namespace);
    let by_sync_label = ListParams::default().labels(&format!("{SYNC_LABEL}=true"));
    let sources = sources.list(&by_sync_label).await?.items;
    let by_copy_label = ListParams::default().labels(&format!("{COPY_LABEL}=true"));
    let existing: BTreeMap<String, ConfigMap> = copies
        .list(&by_copy_label)
        .await?
        .items
        .into_iter()
        .map(|cm| (cm.name_any(), cm))
        .collect();

    for source in &sources {
        let want = desired(source);
        let name = source.name_any();
        if existing.get(&name).is_some_and(|copy| in_sync(copy, &want)) {
            continue;
        }
        tracing::info!(cluster = %ctx.cluster_name(), configmap = %name, %namespace, "copying");
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        copies.patch(&name, &pp, &Patch::Apply(&want)).await?;
    }
    for name in existing.keys() {
        if !sources.iter().any(|s| &s.name_any() == name) {
            tracing::info!(cluster = %ctx.cluster_name(), configmap = %name, %namespace, "source gone, deleting copy");
            match copies.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Namespace>, err: &kube::Error, ctx: Context<()>) -> Action {
    tracing::warn!(cluster = %ctx.cluster_name(), error = %err, "sync failed");
    Action::requeue(Duration::from_secs(2))
}

/// The whole program: a file provider over `dir` for the members, the sync controller.
pub fn manager(host: kube::Client, dir: PathBuf) -> Result<Manager> {
    let provider = FileProvider::new(Options {
        dirs: vec![dir],
        ..Options::default()
    });
    let mgr = Manager::new(host, Some(Arc::new(provider)));
    // The host mapper fans a change out to every member engaged right now (a member that
    // joins later is covered by its own namespace listing). A `Fleet` holds no controllers:
    // no reference cycle.
    let members = mgr.fleet().clone();
    Controller::new(&mgr)
        .named("sync-local-to-remote")
        .for_::<Namespace>()
        .watches_host::<ConfigMap, _>(
            WatchOptions::new().labels(format!("{SYNC_LABEL}=true")),
            move |source: Arc<ConfigMap>, _host| {
                let ns = source.namespace().unwrap_or_default();
                members
                    .names()
                    .into_iter()
                    .map(|member| Request::new(member, ObjectRef::<Namespace>::new(&ns)))
                    .collect::<Vec<_>>()
            },
        )
        .watches_with::<ConfigMap, _>(
            (),
            WatchOptions::new().labels(format!("{COPY_LABEL}=true")),
            |copy: Arc<ConfigMap>, _member| {
                Some(ObjectRef::<Namespace>::new(
                    &copy.namespace().unwrap_or_default(),
                ))
            },
        )
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
}
