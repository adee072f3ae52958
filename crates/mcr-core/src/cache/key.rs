//! How informers are told apart ([`InformerOptions`], the type tag and key) and small
//! lock helpers that never panic on a poisoned lock.

use std::{
    any::TypeId,
    sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard},
};

use kube::{Resource, runtime::watcher};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Selectors of an informer. Informers with different options are different watches.
///
/// ```
/// use mcr_core::InformerOptions;
///
/// let opts = InformerOptions {
///     label_selector: Some("app=web".into()),
///     ..Default::default()
/// };
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct InformerOptions {
    /// A label selector, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// A field selector, e.g. `metadata.name=x`.
    pub field_selector: Option<String>,
}

/// The identity of a resource type: its Rust type (`PartialObjectMeta<K>` for metadata-only)
/// and its group/version/plural.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TypeTag {
    type_id: TypeId,
    group: String,
    version: String,
    plural: String,
}

impl TypeTag {
    pub(crate) fn of<K: Resource + 'static>(dyntype: &K::DynamicType) -> Self {
        TypeTag {
            type_id: TypeId::of::<K>(),
            group: K::group(dyntype).into_owned(),
            version: K::version(dyntype).into_owned(),
            plural: K::plural(dyntype).into_owned(),
        }
    }

    /// `configmaps`, `deployments.apps`, `widgets.example.com`.
    pub(crate) fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct InformerKey {
    pub(super) tag: TypeTag,
    pub(super) opts: InformerOptions,
}

pub(super) fn watcher_config(opts: &InformerOptions) -> watcher::Config {
    let mut config = watcher::Config::default();
    if let Some(labels) = &opts.label_selector {
        config = config.labels(labels);
    }
    if let Some(fields) = &opts.field_selector {
        config = config.fields(fields);
    }
    config
}
