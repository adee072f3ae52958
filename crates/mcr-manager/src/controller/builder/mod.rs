//! The controller builder.
//!
//! [`Controller::new`] gives a [`Start`]; `for_` picks the reconciled type and gives a
//! [`Builder<K>`]; `register` hands the finished controller to the manager. Because `owns` and
//! `watches` only exist after `for_`, and `for_` only before, those two classic mistakes do not
//! compile:
//!
//! ```compile_fail
//! # fn demo(mgr: mcr_manager::Manager) {
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! mcr_manager::Controller::new(&mgr).owns::<Secret>(); // owns without for_
//! # }
//! ```
//!
//! ```compile_fail
//! # fn demo(mgr: mcr_manager::Manager) {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! mcr_manager::Controller::new(&mgr).for_::<ConfigMap>().for_::<ConfigMap>(); // two for_
//! # }
//! ```
//!
//! The builder is split by concept: `start` (choosing the reconciled type), `watches` (the
//! secondary inputs), `watch_options` (selectors and predicates of one input), `options`
//! (concurrency, debounce, engage options, ...) and `register` (checks, then hand-over to the
//! manager).

mod limits;
mod membership;
mod options;
mod register;
mod run;
mod start;
mod watch_options;
mod watches;

use std::{fmt::Debug, hash::Hash, sync::Arc, time::Duration};

use kube::Resource;
use mcr_core::{Cache, Cluster, ClusterName, Informer};
use serde::de::DeserializeOwned;

pub use self::{run::RunError, watch_options::WatchOptions};
use super::membership::{JoinFn, LeaveFn, Sweep};
use super::runner::Limits;
use super::{
    input::{Batch, Input, InputFn, PredicateFn, PrimaryFn, Scope, subscribe_filtered},
    request::{IntoRequest, Request},
    scope::ClusterFilter,
};
use crate::Manager;

/// Entry point of the controller builder.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// # fn demo(mgr: mcr_manager::Manager) {
/// let builder = mcr_manager::Controller::new(&mgr).named("configmaps").for_::<ConfigMap>();
/// # }
/// ```
#[derive(Debug)]
pub struct Controller;

impl Controller {
    /// Starts building a controller that will run on `mgr`.
    ///
    /// ```no_run
    /// # fn demo(mgr: mcr_manager::Manager) {
    /// let start = mcr_manager::Controller::new(&mgr);
    /// # }
    /// ```
    #[allow(clippy::new_ret_no_self)]
    pub fn new(mgr: &Manager) -> Start {
        Start {
            mgr: mgr.clone(),
            name: None,
        }
    }
}

/// A controller builder before its reconciled type is chosen (see [`Controller::new`]).
#[derive(Debug)]
pub struct Start {
    mgr: Manager,
    name: Option<String>,
}

/// A controller builder for the reconciled type `K` (see [`Controller::new`]).
pub struct Builder<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    mgr: Manager,
    name: String,
    dyntype: K::DynamicType,
    primary: PrimaryFn<K>,
    /// The scope of the reconciled type (`None`: the controller's default).
    primary_scope: Option<super::ClusterScope>,
    /// The reconciled type's own cluster filter (`WatchOptions::cluster_filter`).
    primary_filter: Option<ClusterFilter>,
    primary_watch: bool,
    inputs: Vec<Input<K>>,
    triggers: Vec<futures::stream::BoxStream<'static, Request<K>>>,
    concurrency: usize,
    debounce: Duration,
    /// The controller's default scope (inputs without one of their own take it).
    scope: super::ClusterScope,
    filter: Option<ClusterFilter>,
    retry_when_gone: bool,
    live_first: bool,
    on_outcome: Vec<crate::controller::outcome::OutcomeHook<K>>,
    on_join: Option<JoinFn<K>>,
    on_leave: Option<LeaveFn>,
    sweep: Option<Sweep>,
    limits: Limits,
}

impl<K> Debug for Builder<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("inputs", &self.inputs.len())
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl<K> Builder<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    fn new(mgr: Manager, name: String, dyntype: K::DynamicType, primary: PrimaryFn<K>) -> Self {
        let has_provider = mgr.provider().is_some();
        Self {
            mgr,
            name,
            dyntype,
            primary,
            primary_scope: None,
            primary_filter: None,
            primary_watch: true,
            inputs: Vec::new(),
            triggers: Vec::new(),
            concurrency: 16,
            debounce: Duration::ZERO,
            scope: if has_provider {
                super::ClusterScope::Provider
            } else {
                super::ClusterScope::All
            },
            filter: None,
            retry_when_gone: false,
            live_first: true,
            on_outcome: Vec::new(),
            on_join: None,
            on_leave: None,
            sweep: None,
            limits: Limits::default(),
        }
    }

    fn add_input<O>(
        mut self,
        scope: Scope,
        open: impl Fn(&Cache) -> Informer<O> + Send + Sync + 'static,
        predicate: Option<PredicateFn<O>>,
        filter: Option<ClusterFilter>,
        map: impl Fn(&Arc<O>, &ClusterName) -> Option<Batch<K>> + Send + Sync + 'static,
    ) -> Self
    where
        O: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        O::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
    {
        let map = Arc::new(map);
        let open = Arc::new(open);
        let opener = open.clone();
        let subscribe: InputFn<K> = Arc::new(move |cluster: &Cluster, name: &ClusterName| {
            let informer = opener(cluster.cache());
            let map = map.clone();
            let name = name.clone();
            let cluster = name.clone();
            subscribe_filtered(informer, cluster, predicate.clone(), move |o| map(o, &name))
        });
        let open = Arc::new(move |cache: &Cache| {
            open(cache);
        });
        self.inputs.push(Input {
            scope,
            filter,
            subscribe,
            open,
        });
        self
    }
}
