//! What each profile wants, derived from the last seen profiles and Secrets (no I/O).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use mcr_core::ClusterName;
use mcr_core::kubeconfig;

use crate::options::{SECRET_DATA_KEY, SECRET_LABEL_CONSUMER, SECRET_LABEL_PROFILE};
use crate::{ClusterProfile, Naming, Options, PROPERTY_CLUSTER_NAME, ProfileRef, Strategy};
use mcr_core::members::Connection;

/// What a profile wants for its cluster name.
pub(crate) enum Want {
    /// Nothing can be built from it (the reason, naming the profile).
    Invalid(String),
    /// The readiness rule says no.
    NotReady,
    /// A one-context kubeconfig with the [`Policy`](mcr_core::kubeconfig::Policy) it runs under.
    Connect(Connection),
}

struct SeenProfile {
    stream: usize,
    resource_version: Option<String>,
    created: Option<Time>,
    parsed: Result<ClusterProfile, String>,
}

/// A labelled kubeconfig Secret (Secret strategy).
pub(crate) struct SeenSecret {
    stream: usize,
    consumer: String,
    profile: String,
    data: Option<Arc<[u8]>>,
}

impl SeenSecret {
    /// The Secret's key, and what it holds if it is selected (`None`: not (any more)).
    pub(crate) fn from_secret(
        stream: usize,
        secret: &Secret,
    ) -> Option<(ProfileRef, Option<SeenSecret>)> {
        let meta = &secret.metadata;
        let key = ProfileRef::new(meta.namespace.clone()?, meta.name.clone()?);
        let labels = meta.labels.clone().unwrap_or_default();
        let seen = match labels.get(SECRET_LABEL_PROFILE) {
            Some(profile) if meta.deletion_timestamp.is_none() && !profile.is_empty() => {
                Some(SeenSecret {
                    stream,
                    consumer: labels
                        .get(SECRET_LABEL_CONSUMER)
                        .cloned()
                        .unwrap_or_default(),
                    profile: profile.clone(),
                    data: secret
                        .data
                        .as_ref()
                        .and_then(|d| d.get(SECRET_DATA_KEY))
                        .filter(|b| !b.0.is_empty())
                        .map(|b| Arc::<[u8]>::from(b.0.as_slice())),
                })
            }
            _ => None,
        };
        Some((key, seen))
    }
}

/// What a profile wants: a cluster name (if it has one) and a connection (or why not).
pub(crate) struct Wanted {
    pub(crate) name: Option<ClusterName>,
    pub(crate) resource_version: Option<String>,
    pub(crate) want: Want,
}

impl Wanted {
    pub(crate) fn reason_without_name(&self, profile: &ProfileRef) -> String {
        match &self.want {
            Want::Invalid(reason) => reason.clone(),
            _ => format!("cluster profile {profile} has no cluster name"),
        }
    }
}

/// The last seen profiles and Secrets.
pub(crate) struct Profiles {
    opts: Options,
    profiles: BTreeMap<ProfileRef, SeenProfile>,
    secrets: BTreeMap<ProfileRef, SeenSecret>,
}

impl Profiles {
    pub(crate) fn new(opts: Options) -> Self {
        Profiles {
            opts,
            profiles: BTreeMap::new(),
            secrets: BTreeMap::new(),
        }
    }

    /// Records a profile; returns its key when it is in scope (a `deletionTimestamp` counts as
    /// deleted).
    pub(crate) fn apply_profile(
        &mut self,
        stream: usize,
        obj: DynamicObject,
    ) -> Option<ProfileRef> {
        let key = ProfileRef::new(obj.metadata.namespace.clone()?, obj.metadata.name.clone()?);
        if !self.opts.namespaces.contains(&key.namespace) {
            return None;
        }
        if obj.metadata.deletion_timestamp.is_some() {
            self.profiles.remove(&key);
            return Some(key);
        }
        let resource_version = obj.metadata.resource_version.clone();
        let created = obj.metadata.creation_timestamp.clone();
        let parsed = serde_json::to_value(&obj)
            .and_then(serde_json::from_value::<ClusterProfile>)
            .map_err(|e| format!("cluster profile {key} is malformed: {e}"));
        self.profiles.insert(
            key.clone(),
            SeenProfile {
                stream,
                resource_version,
                created,
                parsed,
            },
        );
        Some(key)
    }

    /// The profile's `creationTimestamp` (it ranks claims on a cluster name).
    pub(crate) fn created(&self, key: &ProfileRef) -> Option<Time> {
        self.profiles.get(key).and_then(|p| p.created.clone())
    }

    pub(crate) fn delete_profile(&mut self, key: &ProfileRef) {
        self.profiles.remove(key);
    }

    pub(crate) fn profiles_of_stream(&self, stream: usize) -> Vec<ProfileRef> {
        let of = |(k, s): (&ProfileRef, &SeenProfile)| (s.stream == stream).then(|| k.clone());
        self.profiles.iter().filter_map(of).collect()
    }

    pub(crate) fn secrets_of_stream(&self, stream: usize) -> Vec<ProfileRef> {
        let of = |(k, s): (&ProfileRef, &SeenSecret)| (s.stream == stream).then(|| k.clone());
        self.secrets.iter().filter_map(of).collect()
    }

    /// Records (or forgets) a Secret; returns the profiles it affects.
    pub(crate) fn apply_secret(
        &mut self,
        seen: Option<(ProfileRef, Option<SeenSecret>)>,
    ) -> Vec<ProfileRef> {
        let Some((key, seen)) = seen else {
            return Vec::new();
        };
        // The watch is label-selected on the consumer; check it anyway.
        let consumer = match &self.opts.strategy {
            Strategy::Secret { consumer } => consumer.as_str(),
            Strategy::AccessProviders(_) => return Vec::new(),
        };
        let seen = seen
            .filter(|s| s.consumer == consumer && self.opts.namespaces.contains(&key.namespace));
        let mut affected = self.delete_secret(&key);
        if let Some(seen) = seen {
            affected.push(ProfileRef::new(key.namespace.clone(), seen.profile.clone()));
            self.secrets.insert(key, seen);
        }
        affected
    }

    pub(crate) fn delete_secret(&mut self, key: &ProfileRef) -> Vec<ProfileRef> {
        self.secrets
            .remove(key)
            .map(|s| ProfileRef::new(key.namespace.clone(), s.profile))
            .into_iter()
            .collect()
    }

    /// What `key` wants; `None` when the profile is gone.
    pub(crate) fn evaluate(&self, key: &ProfileRef) -> Option<Wanted> {
        let seen = self.profiles.get(key)?;
        let resource_version = seen.resource_version.clone();
        let wanted = |name: Option<ClusterName>, want| {
            Some(Wanted {
                name,
                resource_version: resource_version.clone(),
                want,
            })
        };
        let profile = match &seen.parsed {
            Ok(profile) => profile,
            Err(reason) => {
                let name = (self.opts.naming == Naming::NamespacedName)
                    .then(|| ClusterName::new(key.to_string()));
                return wanted(name, Want::Invalid(reason.clone()));
            }
        };
        let name = match self.opts.naming {
            Naming::NamespacedName => ClusterName::new(key.to_string()),
            Naming::ClusterSetProperty => match profile.property(PROPERTY_CLUSTER_NAME) {
                Some(value) if !value.is_empty() => ClusterName::new(value),
                _ => {
                    let reason = format!(
                        "cluster profile {key} has no {PROPERTY_CLUSTER_NAME} property to name it by"
                    );
                    return wanted(None, Want::Invalid(reason));
                }
            },
        };
        if !(self.opts.is_ready)(profile) {
            return wanted(Some(name), Want::NotReady);
        }
        let want = match self.connect(key, profile, &name) {
            Ok(connect) => Want::Connect(connect),
            Err(reason) => Want::Invalid(format!("cluster profile {key}: {reason}")),
        };
        wanted(Some(name), want)
    }

    fn connect(
        &self,
        key: &ProfileRef,
        profile: &ClusterProfile,
        name: &ClusterName,
    ) -> Result<Connection, String> {
        let (kubeconfig, policy) = match &self.opts.strategy {
            Strategy::AccessProviders(file) => {
                let resolved = file.resolve(profile, name.as_str())?;
                (resolved.kubeconfig, resolved.policy)
            }
            Strategy::Secret { .. } => {
                let data = self.secret_data(key)?;
                let kc = kubeconfig::parse(&data).map_err(|e| e.to_string())?;
                (kc, self.opts.members.policy.clone())
            }
        };
        let connection = Connection::new(kubeconfig, None).map_err(|e| e.to_string())?;
        Ok(connection.with_policy(policy))
    }

    /// The kubeconfig of the one Secret labelled for this profile.
    fn secret_data(&self, key: &ProfileRef) -> Result<Arc<[u8]>, String> {
        let matching: Vec<(&ProfileRef, &SeenSecret)> = self
            .secrets
            .iter()
            .filter(|(k, s)| k.namespace == key.namespace && s.profile == key.name)
            .collect();
        match matching.as_slice() {
            [] => Err(format!(
                "no Secret in namespace {} is labelled {SECRET_LABEL_PROFILE}={} for this consumer",
                key.namespace, key.name
            )),
            [(secret, seen)] => seen.data.clone().ok_or_else(|| {
                format!("Secret {secret} has no kubeconfig under data key {SECRET_DATA_KEY}")
            }),
            several => {
                let names: Vec<String> = several.iter().map(|(k, _)| k.to_string()).collect();
                Err(format!(
                    "{} Secrets match ({}): exactly one must",
                    names.len(),
                    names.join(", ")
                ))
            }
        }
    }
}
