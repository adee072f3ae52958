//! The sync controller. It reconciles one **ConfigMap key in one member** at a time — "make
//! the copy `<namespace>/<name>` in this member equal to the labelled source of the same name
//! in the host, or absent if there is none" — with a request-keyed reconciler
//! (`register with a `Request``), which runs for a key whether or not the copy exists:
//!
//! * a labelled ConfigMap changes or goes in the host → `watches_host_per_cluster` hands its
//!   key to every engaged member (a member that joins later is handed every host source at
//!   once);
//! * a copy changes or goes away in a member → the `for_` watch (copies only) triggers its key;
//! * the reconciler reads the source from the host (`ctx.host()`) and the copy from the
//!   member's cache (`ctx.cached`), then applies or deletes.
//!
//! No `Manager` clone, no second client in the data: the context reaches the host.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
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

fn labelled(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.get(SYNC_LABEL).is_some_and(|v| v == "true"))
}

async fn reconcile(req: Request<ConfigMap>, ctx: Context<()>) -> Result<Action, kube::Error> {
    let namespace = req.object.namespace.clone().unwrap_or_default();
    let name = req.object.name.as_str();
    let sources: Api<ConfigMap> = Api::namespaced(ctx.host().client(), &namespace);
    let copies: Api<ConfigMap> = Api::namespaced(ctx.client(), &namespace);
    let source = sources.get_opt(name).await?.filter(labelled);
    let copy = ctx.cached(&req.object);
    match source {
        Some(source) => {
            let want = desired(&source);
            if copy.is_some_and(|copy| in_sync(&copy, &want)) {
                return Ok(Action::await_change());
            }
            tracing::info!(cluster = %ctx.cluster_name(), configmap = %name, %namespace, "copying");
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            copies.patch(name, &pp, &Patch::Apply(&want)).await?;
        }
        None if copy.is_some() => {
            tracing::info!(cluster = %ctx.cluster_name(), configmap = %name, %namespace, "source gone, deleting copy");
            match copies.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
        None => {}
    }
    Ok(Action::await_change())
}

fn error_policy(req: Request<ConfigMap>, err: &kube::Error, _: Context<()>) -> Action {
    tracing::warn!(request = %req, error = %err, "sync failed");
    Action::requeue(Duration::from_secs(2))
}

/// The whole program: a file provider over `dir` for the members, the sync controller,
/// watching only `namespaces` (the sources in the host, the copies in the members) unless
/// empty.
pub fn manager(host: kube::Client, dir: PathBuf, namespaces: Vec<String>) -> Result<Manager> {
    let provider = FileProvider::new(Options {
        dirs: vec![dir],
        ..Options::default()
    });
    let mgr = Manager::builder(host)
        .provider(Arc::new(provider))
        .default_namespaces(namespaces)
        .build();
    Controller::new(&mgr)
        .named("sync-local-to-remote")
        .for_with::<ConfigMap>(WatchOptions::new().labels(format!("{COPY_LABEL}=true")))
        .watches_host_per_cluster::<ConfigMap, _>(
            WatchOptions::new().labels(format!("{SYNC_LABEL}=true")),
            |source: Arc<ConfigMap>, _member| Some(ObjectRef::from_obj(source.as_ref())),
        )
        .register(reconcile, error_policy, Arc::new(()))?;
    Ok(mgr)
}
