//! [`WatchOptions`]: selectors and a predicate for one watched input.

use std::fmt::Debug;

use kube::runtime::Predicate;
use mcr_core::InformerOptions;

use crate::controller::input::{PredicateFn, erase_predicate};

/// Selectors and a predicate for one watched input.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube::runtime::predicates;
/// use mcr_manager::WatchOptions;
///
/// let opts = WatchOptions::<Deployment>::new()
///     .labels("app=web")
///     .predicate(predicates::generation);
/// ```
pub struct WatchOptions<O> {
    pub(super) informer: InformerOptions,
    pub(super) predicate: Option<PredicateFn<O>>,
}

impl<O> Default for WatchOptions<O> {
    fn default() -> Self {
        Self {
            informer: InformerOptions::default(),
            predicate: None,
        }
    }
}

impl<O> Debug for WatchOptions<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchOptions")
            .field("informer", &self.informer)
            .field("predicate", &self.predicate.is_some())
            .finish()
    }
}

impl<O> WatchOptions<O> {
    /// No selectors, no predicate.
    ///
    /// ```
    /// let opts = mcr_manager::WatchOptions::<k8s_openapi::api::core::v1::Secret>::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Watch only objects matching this label selector.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Secret;
    /// let opts = mcr_manager::WatchOptions::<Secret>::new().labels("team=a,tier!=cache");
    /// ```
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.informer.label_selector = Some(selector.into());
        self
    }

    /// Watch only objects matching this field selector.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Secret;
    /// let opts = mcr_manager::WatchOptions::<Secret>::new().fields("type=Opaque");
    /// ```
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.informer.field_selector = Some(selector.into());
        self
    }

    /// Drop changes that leave the predicate's value unchanged (per cluster and object);
    /// any of `kube::runtime::predicates` works.
    ///
    /// ```
    /// # use k8s_openapi::api::apps::v1::Deployment;
    /// use kube::runtime::{Predicate, predicates};
    /// let opts = mcr_manager::WatchOptions::<Deployment>::new()
    ///     .predicate(predicates::generation.combine(predicates::labels));
    /// ```
    #[must_use]
    pub fn predicate(mut self, predicate: impl Predicate<O> + Send + Sync + 'static) -> Self {
        self.predicate = Some(erase_predicate(predicate));
        self
    }
}
