//! What a member's webhook configurations should hold: the two kinds of configuration, our
//! entries in them (the webhooks named `<label>.<ConfigOptions::name>`), and the pure steps
//! of a converge: our entries put in place among the others', or taken out.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ValidatingWebhook,
    ValidatingWebhookConfiguration,
};
use kube::{Resource, api::ObjectMeta};
use serde::{Serialize, de::DeserializeOwned};

use crate::{ConfigOptions, Webhooks, mutating_configuration, validating_configuration};

/// A webhook configuration object: cluster-scoped, a list of webhooks keyed by name.
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
    /// One webhook of the list.
    type Hook: Clone + PartialEq + std::fmt::Debug + Send + Sync + 'static;

    /// The webhooks.
    fn hooks(&self) -> &[Self::Hook];
    /// Sets the webhooks.
    fn set_hooks(&mut self, hooks: Vec<Self::Hook>);
    /// A webhook's name, its key in the list.
    fn name_of(hook: &Self::Hook) -> &str;
    /// A new object named `name` holding `hooks`.
    fn with_hooks(name: &str, hooks: Vec<Self::Hook>) -> Self;
    /// Our webhooks of this kind: calling `base` and trusting `ca_bundle`.
    fn desired(
        webhooks: &Webhooks,
        base: &str,
        ca_bundle: &[u8],
        options: &ConfigOptions,
    ) -> Vec<Self::Hook>;
}

impl Configuration for ValidatingWebhookConfiguration {
    type Hook = ValidatingWebhook;

    fn hooks(&self) -> &[ValidatingWebhook] {
        self.webhooks.as_deref().unwrap_or_default()
    }

    fn set_hooks(&mut self, hooks: Vec<ValidatingWebhook>) {
        self.webhooks = Some(hooks);
    }

    fn name_of(hook: &ValidatingWebhook) -> &str {
        &hook.name
    }

    fn with_hooks(name: &str, hooks: Vec<ValidatingWebhook>) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            webhooks: Some(hooks),
        }
    }

    fn desired(
        webhooks: &Webhooks,
        base: &str,
        ca_bundle: &[u8],
        options: &ConfigOptions,
    ) -> Vec<ValidatingWebhook> {
        // The options were checked when the writer was built.
        validating_configuration(webhooks, base, ca_bundle, options)
            .ok()
            .flatten()
            .and_then(|c| c.webhooks)
            .unwrap_or_default()
    }
}

impl Configuration for MutatingWebhookConfiguration {
    type Hook = MutatingWebhook;

    fn hooks(&self) -> &[MutatingWebhook] {
        self.webhooks.as_deref().unwrap_or_default()
    }

    fn set_hooks(&mut self, hooks: Vec<MutatingWebhook>) {
        self.webhooks = Some(hooks);
    }

    fn name_of(hook: &MutatingWebhook) -> &str {
        &hook.name
    }

    fn with_hooks(name: &str, hooks: Vec<MutatingWebhook>) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            webhooks: Some(hooks),
        }
    }

    fn desired(
        webhooks: &Webhooks,
        base: &str,
        ca_bundle: &[u8],
        options: &ConfigOptions,
    ) -> Vec<MutatingWebhook> {
        mutating_configuration(webhooks, base, ca_bundle, options)
            .ok()
            .flatten()
            .and_then(|c| c.webhooks)
            .unwrap_or_default()
    }
}

/// Which webhooks are ours: those named `<label>.<suffix>`, the names
/// [`ConfigOptions::name`] gives. Any other webhook in the object is someone else's, and left
/// alone.
#[derive(Clone, Debug)]
pub(super) struct Ours {
    suffix: String,
}

impl Ours {
    pub(super) fn new(options: &ConfigOptions) -> Self {
        Self {
            suffix: format!(".{}", options.name),
        }
    }

    pub(super) fn owns(&self, name: &str) -> bool {
        name.len() > self.suffix.len() && name.ends_with(&self.suffix)
    }

    /// `current` with our webhooks made `desired`: the others' kept where they are, ours
    /// replaced where they are, new ones after the rest, ours no longer desired taken out.
    /// `None` if that is `current` already.
    pub(super) fn merge<K: Configuration>(
        &self,
        current: &[K::Hook],
        desired: &[K::Hook],
    ) -> Option<Vec<K::Hook>> {
        let mut out = Vec::with_capacity(current.len() + desired.len());
        let mut placed = vec![false; desired.len()];
        for hook in current {
            let name = K::name_of(hook);
            if !self.owns(name) {
                out.push(hook.clone());
                continue;
            }
            if let Some(i) = desired
                .iter()
                .position(|d| K::name_of(d) == name)
                .filter(|i| !placed[*i])
            {
                placed[i] = true;
                out.push(desired[i].clone());
            }
        }
        for (hook, placed) in desired.iter().zip(placed) {
            if !placed {
                out.push(hook.clone());
            }
        }
        (out != current).then_some(out)
    }

    /// `current` without our webhooks; `None` if it holds none.
    pub(super) fn remove<K: Configuration>(&self, current: &[K::Hook]) -> Option<Vec<K::Hook>> {
        let rest: Vec<K::Hook> = current
            .iter()
            .filter(|h| !self.owns(K::name_of(h)))
            .cloned()
            .collect();
        (rest.len() != current.len()).then_some(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type V = ValidatingWebhookConfiguration;

    fn hook(name: &str, url: &str) -> ValidatingWebhook {
        ValidatingWebhook {
            name: name.into(),
            client_config: k8s_openapi::api::admissionregistration::v1::WebhookClientConfig {
                url: Some(url.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn ours() -> Ours {
        Ours::new(&ConfigOptions::new("cm.example.com"))
    }

    #[test]
    fn ours_are_put_in_place_among_the_others_and_the_others_left_alone() {
        let current = vec![
            hook("a.other.io", "https://other/a"),
            hook("v-1.cm.example.com", "https://old/1"),
            hook("b.other.io", "https://other/b"),
            hook("stale.cm.example.com", "https://old/stale"),
        ];
        let desired = vec![
            hook("v-1.cm.example.com", "https://new/1"),
            hook("v-2.cm.example.com", "https://new/2"),
        ];
        let merged = ours().merge::<V>(&current, &desired).unwrap();
        assert_eq!(
            merged,
            vec![
                hook("a.other.io", "https://other/a"),
                hook("v-1.cm.example.com", "https://new/1"),
                hook("b.other.io", "https://other/b"),
                hook("v-2.cm.example.com", "https://new/2"),
            ]
        );
        // Converged: nothing to write.
        assert_eq!(ours().merge::<V>(&merged, &desired), None);
        // A name that is only the suffix, or ends with it without the dot, is not ours.
        let theirs = vec![hook("cm.example.com", "x"), hook("xcm.example.com", "y")];
        assert_eq!(
            ours().merge::<V>(&theirs, &[]),
            None,
            "the others' webhooks were touched"
        );
    }

    #[test]
    fn removing_takes_out_exactly_ours() {
        let current = vec![
            hook("v-1.cm.example.com", "https://x/1"),
            hook("a.other.io", "https://other/a"),
            hook("v-2.cm.example.com", "https://x/2"),
        ];
        assert_eq!(
            ours().remove::<V>(&current),
            Some(vec![hook("a.other.io", "https://other/a")])
        );
        assert_eq!(ours().remove::<V>(&[hook("a.other.io", "x")]), None);
        assert_eq!(
            ours().remove::<V>(&[hook("v-1.cm.example.com", "x")]),
            Some(vec![])
        );
    }
}
