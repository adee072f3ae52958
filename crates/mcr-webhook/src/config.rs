//! Webhook configurations (`admissionregistration.k8s.io/v1`) for the registered webhooks,
//! pointing at a URL: what [`MemberConfigurations`](crate::MemberConfigurations) writes into
//! each member, and what an operator can apply to the host.

use k8s_openapi::{
    ByteString,
    api::admissionregistration::v1::{
        MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
        ValidatingWebhookConfiguration, WebhookClientConfig,
    },
    apimachinery::pkg::apis::meta::v1::LabelSelector,
};
use kube::api::ObjectMeta;

use crate::{HookKind, Registration, Webhooks};

/// How the generated webhook configurations look. `#[non_exhaustive]`: start from
/// [`ConfigOptions::new`] and set fields.
///
/// ```
/// let mut options = mcr_webhook::ConfigOptions::new("widgets.example.com");
/// options.failure_policy = "Ignore".into();
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConfigOptions {
    /// The name of both configuration objects, and the suffix of each webhook's name (which
    /// kube-apiserver wants fully qualified, at least three dot-separated parts). A webhook is
    /// named `{path, readable, cut to fit}-{8 hex digits of the path's SHA-256}.{name}`: unique
    /// per path, the same on every replica and in every release, its first label at most 63
    /// characters.
    pub name: String,
    /// `Fail` (the default) or `Ignore`.
    pub failure_policy: String,
    /// Seconds the apiserver waits for an answer (1 to 30; default 10).
    pub timeout_seconds: i32,
    /// Only objects in namespaces matching this are sent.
    pub namespace_selector: Option<LabelSelector>,
    /// Only objects matching this are sent.
    pub object_selector: Option<LabelSelector>,
}

impl ConfigOptions {
    /// Defaults under `name` (a DNS subdomain of at least three parts, e.g.
    /// `widgets.example.com`).
    ///
    /// ```
    /// let options = mcr_webhook::ConfigOptions::new("widgets.example.com");
    /// assert_eq!(options.failure_policy, "Fail");
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            failure_policy: "Fail".into(),
            timeout_seconds: 10,
            namespace_selector: None,
            object_selector: None,
        }
    }
}

/// The longest DNS label, the first part of a webhook's name.
const MAX_LABEL: usize = 63;
/// Hex digits of the path's hash in a webhook's name (32 bits).
const HASH_DIGITS: usize = 8;

/// A webhook's name: `{readable}-{hash}.{suffix}`. `readable` is the path lower-cased, every
/// other character a dash, cut so the label fits 63 characters; `hash` is the first
/// [`HASH_DIGITS`] hex digits of the SHA-256 of the whole path, so two paths that read alike
/// once cut (`...-kubeadmcontrolplane` and `...-kubeadmcontrolplanetemplate`) still get two
/// names, and a path gets the same name in every release and on every replica.
fn hook_name(path: &str, suffix: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(path.as_bytes());
    let hash: String = digest
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(HASH_DIGITS)
        .map(|n| char::from_digit(u32::from(n), 16).unwrap_or('0'))
        .collect();
    let readable: String = path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut label: String = readable
        .trim_start_matches('-')
        .chars()
        .take(MAX_LABEL - HASH_DIGITS - 1)
        .collect();
    while label.ends_with('-') {
        label.pop();
    }
    if label.is_empty() {
        format!("{hash}.{suffix}")
    } else {
        format!("{label}-{hash}.{suffix}")
    }
}

fn rules(r: &Registration) -> Option<Vec<RuleWithOperations>> {
    Some(vec![RuleWithOperations {
        api_groups: Some(vec![r.group.clone()]),
        api_versions: Some(vec![r.version.clone()]),
        operations: Some(r.operations.clone()),
        resources: Some(vec![r.resource.clone()]),
        scope: Some("*".into()),
    }])
}

fn client_config(base_url: &str, path: &str, ca_bundle: &[u8]) -> WebhookClientConfig {
    WebhookClientConfig {
        ca_bundle: Some(ByteString(ca_bundle.to_vec())),
        service: None,
        url: Some(format!("{}{path}", base_url.trim_end_matches('/'))),
    }
}

fn of_kind(webhooks: &Webhooks, kind: HookKind) -> Vec<Registration> {
    webhooks
        .registrations()
        .into_iter()
        .filter(|r| r.kind == kind)
        .collect()
}

/// The `ValidatingWebhookConfiguration` of the registered validators, calling
/// `{base_url}{path}` and trusting `ca_bundle` (PEM); `None` if there is no validator.
///
/// ```no_run
/// # fn demo(webhooks: mcr_webhook::Webhooks, ca_pem: Vec<u8>) {
/// let options = mcr_webhook::ConfigOptions::new("widgets.example.com");
/// let config = mcr_webhook::validating_configuration(&webhooks, "https://webhooks.example.com:9443", &ca_pem, &options);
/// # }
/// ```
pub fn validating_configuration(
    webhooks: &Webhooks,
    base_url: &str,
    ca_bundle: &[u8],
    options: &ConfigOptions,
) -> Option<ValidatingWebhookConfiguration> {
    let hooks: Vec<_> = of_kind(webhooks, HookKind::Validating)
        .iter()
        .map(|r| ValidatingWebhook {
            admission_review_versions: vec!["v1".into()],
            client_config: client_config(base_url, &r.path, ca_bundle),
            failure_policy: Some(options.failure_policy.clone()),
            match_policy: Some("Equivalent".into()),
            name: hook_name(&r.path, &options.name),
            namespace_selector: options.namespace_selector.clone(),
            object_selector: options.object_selector.clone(),
            rules: rules(r),
            side_effects: "None".into(),
            timeout_seconds: Some(options.timeout_seconds),
            ..Default::default()
        })
        .collect();
    (!hooks.is_empty()).then(|| ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(options.name.clone()),
            ..Default::default()
        },
        webhooks: Some(hooks),
    })
}

/// The `MutatingWebhookConfiguration` of the registered defaulters, calling
/// `{base_url}{path}` and trusting `ca_bundle` (PEM); `None` if there is no defaulter.
///
/// ```no_run
/// # fn demo(webhooks: mcr_webhook::Webhooks, ca_pem: Vec<u8>) {
/// let options = mcr_webhook::ConfigOptions::new("widgets.example.com");
/// let config = mcr_webhook::mutating_configuration(&webhooks, "https://webhooks.example.com:9443", &ca_pem, &options);
/// # }
/// ```
pub fn mutating_configuration(
    webhooks: &Webhooks,
    base_url: &str,
    ca_bundle: &[u8],
    options: &ConfigOptions,
) -> Option<MutatingWebhookConfiguration> {
    let hooks: Vec<_> = of_kind(webhooks, HookKind::Mutating)
        .iter()
        .map(|r| MutatingWebhook {
            admission_review_versions: vec!["v1".into()],
            client_config: client_config(base_url, &r.path, ca_bundle),
            failure_policy: Some(options.failure_policy.clone()),
            match_policy: Some("Equivalent".into()),
            name: hook_name(&r.path, &options.name),
            namespace_selector: options.namespace_selector.clone(),
            object_selector: options.object_selector.clone(),
            reinvocation_policy: Some("Never".into()),
            rules: rules(r),
            side_effects: "None".into(),
            timeout_seconds: Some(options.timeout_seconds),
            ..Default::default()
        })
        .collect();
    (!hooks.is_empty()).then(|| MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(options.name.clone()),
            ..Default::default()
        },
        webhooks: Some(hooks),
    })
}

#[cfg(test)]
mod tests {
    use super::hook_name;

    #[test]
    fn names_are_dns_labels_whatever_the_path() {
        let long = format!("/validate-{}-v1-widget", "a.very.long.group".repeat(8));
        for path in [
            "/validate--v1-configmap",
            "/---",
            "/",
            long.as_str(),
            "/Ünïcode-X",
        ] {
            let name = hook_name(path, "x.example.com");
            let (label, suffix) = name.split_once('.').unwrap();
            assert_eq!(suffix, "x.example.com", "{name}");
            assert!(!label.is_empty() && label.len() <= 63, "{label}");
            assert!(
                label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{label}"
            );
            assert!(!label.starts_with('-') && !label.ends_with('-'), "{label}");
        }
        assert_ne!(hook_name("/a.b", "s"), hook_name("/a-b", "s"));
        assert_eq!(hook_name("/---", "s").len(), 8 + 2);
    }
}
