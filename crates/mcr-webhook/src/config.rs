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

use crate::{Error, HookKind, Registration, Webhooks};

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
    /// The name of both configuration objects, and the suffix of each webhook's name. A
    /// webhook is named `{path, readable, cut to fit}-{8 hex digits of the path's
    /// SHA-256}.{name}`: unique per path, the same on every replica and in every release, its
    /// first label at most 63 characters. So that every such name is one kube-apiserver
    /// takes (a DNS subdomain of at most 253 characters, with at least three dot-separated
    /// labels), `name` must be a DNS subdomain of at least two labels (lower-case letters,
    /// digits and dashes, each label at most 63 characters) and at most
    /// [`MAX_NAME`](Self::MAX_NAME) characters; [`check`](Self::check) says whether it is.
    pub name: String,
    /// `Fail` (the default) or `Ignore`.
    pub failure_policy: String,
    /// Seconds the apiserver waits for an answer (1 to 30; default 10).
    pub timeout_seconds: i32,
    /// Only objects in namespaces matching this are sent (`None`: all; written as the empty
    /// selector, as kube-apiserver stores it).
    pub namespace_selector: Option<LabelSelector>,
    /// Only objects matching this are sent (`None`: all; written as the empty selector, as
    /// kube-apiserver stores it).
    pub object_selector: Option<LabelSelector>,
}

impl ConfigOptions {
    /// The longest [`name`](Self::name): a webhook's name, `{label of at most 63}.{name}`,
    /// then fits kube-apiserver's 253 characters.
    pub const MAX_NAME: usize = 253 - MAX_LABEL - 1;

    /// Whether these options make configurations kube-apiserver takes: a usable
    /// [`name`](Self::name) (so that every webhook name generated from it is a valid name
    /// too), `failure_policy` `Fail` or `Ignore`, `timeout_seconds` from 1 to 30. Every
    /// function that builds configurations from options checks them first.
    ///
    /// ```
    /// use mcr_webhook::ConfigOptions;
    /// assert!(ConfigOptions::new("widgets.example.com").check().is_ok());
    /// let err = ConfigOptions::new("Widgets").check().unwrap_err();
    /// assert!(err.to_string().contains("not a DNS subdomain"), "{err}");
    /// let long = format!("{}.example.com", "a".repeat(63)).repeat(3);
    /// assert!(ConfigOptions::new(long).check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        let invalid = |reason: String| Error::ConfigOptions { reason };
        let name = &self.name;
        if let Some(why) = subdomain_error(name) {
            return Err(invalid(format!(
                "the name {name:?} is not a DNS subdomain: {why}"
            )));
        }
        if name.len() > Self::MAX_NAME {
            return Err(invalid(format!(
                "the name {name:?} has {} characters: the webhooks are named \
                 `<label of up to 63>.<name>`, which kube-apiserver takes up to 253 \
                 characters, so the name may have at most {}",
                name.len(),
                Self::MAX_NAME
            )));
        }
        if !name.contains('.') {
            return Err(invalid(format!(
                "the name {name:?} has one label: kube-apiserver wants webhook names of at \
                 least three labels (`<label>.<name>`), so the name needs two or more, such \
                 as `widgets.example.com`"
            )));
        }
        if !matches!(self.failure_policy.as_str(), "Fail" | "Ignore") {
            return Err(invalid(format!(
                "the failure policy {:?} is neither Fail nor Ignore",
                self.failure_policy
            )));
        }
        if !(1..=30).contains(&self.timeout_seconds) {
            return Err(invalid(format!(
                "timeout_seconds {} is not between 1 and 30",
                self.timeout_seconds
            )));
        }
        Ok(())
    }

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

/// Why `name` is not a DNS-1123 subdomain (lower-case letters, digits, `-` and `.`; labels of
/// 1 to 63 characters that start and end with a letter or digit; at most 253 in all).
pub(crate) fn subdomain_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    if name.len() > 253 {
        return Some(format!("it has {} characters, more than 253", name.len()));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Some("it has an empty label".into());
        }
        if label.len() > MAX_LABEL {
            return Some(format!(
                "its label {label:?} has {} characters, more than {MAX_LABEL}",
                label.len()
            ));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Some(format!(
                "its label {label:?} has characters other than lower-case letters, digits and `-`"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!("its label {label:?} starts or ends with `-`"));
        }
    }
    None
}
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
/// `{base_url}{path}` and trusting `ca_bundle` (PEM); `None` if there is no validator; an
/// error if the options are not usable (see [`ConfigOptions::check`]).
///
/// ```no_run
/// # fn demo(webhooks: mcr_webhook::Webhooks, ca_pem: Vec<u8>) -> Result<(), mcr_webhook::Error> {
/// let options = mcr_webhook::ConfigOptions::new("widgets.example.com");
/// let config = mcr_webhook::validating_configuration(&webhooks, "https://webhooks.example.com:9443", &ca_pem, &options)?;
/// # Ok(())
/// # }
/// ```
pub fn validating_configuration(
    webhooks: &Webhooks,
    base_url: &str,
    ca_bundle: &[u8],
    options: &ConfigOptions,
) -> Result<Option<ValidatingWebhookConfiguration>, Error> {
    options.check()?;
    let hooks: Vec<_> = of_kind(webhooks, HookKind::Validating)
        .iter()
        .map(|r| ValidatingWebhook {
            admission_review_versions: vec!["v1".into()],
            client_config: client_config(base_url, &r.path, ca_bundle),
            failure_policy: Some(options.failure_policy.clone()),
            match_policy: Some("Equivalent".into()),
            name: hook_name(&r.path, &options.name),
            namespace_selector: Some(options.namespace_selector.clone().unwrap_or_default()),
            object_selector: Some(options.object_selector.clone().unwrap_or_default()),
            rules: rules(r),
            side_effects: "None".into(),
            timeout_seconds: Some(options.timeout_seconds),
            ..Default::default()
        })
        .collect();
    Ok((!hooks.is_empty()).then(|| ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(options.name.clone()),
            ..Default::default()
        },
        webhooks: Some(hooks),
    }))
}

/// The `MutatingWebhookConfiguration` of the registered defaulters, calling
/// `{base_url}{path}` and trusting `ca_bundle` (PEM); `None` if there is no defaulter; an
/// error if the options are not usable (see [`ConfigOptions::check`]).
///
/// ```no_run
/// # fn demo(webhooks: mcr_webhook::Webhooks, ca_pem: Vec<u8>) -> Result<(), mcr_webhook::Error> {
/// let options = mcr_webhook::ConfigOptions::new("widgets.example.com");
/// let config = mcr_webhook::mutating_configuration(&webhooks, "https://webhooks.example.com:9443", &ca_pem, &options)?;
/// # Ok(())
/// # }
/// ```
pub fn mutating_configuration(
    webhooks: &Webhooks,
    base_url: &str,
    ca_bundle: &[u8],
    options: &ConfigOptions,
) -> Result<Option<MutatingWebhookConfiguration>, Error> {
    options.check()?;
    let hooks: Vec<_> = of_kind(webhooks, HookKind::Mutating)
        .iter()
        .map(|r| MutatingWebhook {
            admission_review_versions: vec!["v1".into()],
            client_config: client_config(base_url, &r.path, ca_bundle),
            failure_policy: Some(options.failure_policy.clone()),
            match_policy: Some("Equivalent".into()),
            name: hook_name(&r.path, &options.name),
            namespace_selector: Some(options.namespace_selector.clone().unwrap_or_default()),
            object_selector: Some(options.object_selector.clone().unwrap_or_default()),
            reinvocation_policy: Some("Never".into()),
            rules: rules(r),
            side_effects: "None".into(),
            timeout_seconds: Some(options.timeout_seconds),
            ..Default::default()
        })
        .collect();
    Ok((!hooks.is_empty()).then(|| MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(options.name.clone()),
            ..Default::default()
        },
        webhooks: Some(hooks),
    }))
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

    #[test]
    fn every_name_of_options_that_pass_the_check_is_valid() {
        use super::{ConfigOptions, subdomain_error};
        let longest = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(53),
            "example"
        );
        assert_eq!(longest.len(), ConfigOptions::MAX_NAME);
        let path = format!("/validate-{}-v1-widget", "long.group".repeat(20));
        for name in ["widgets.example.com", "x.y", longest.as_str()] {
            ConfigOptions::new(name).check().unwrap();
            for path in ["/validate--v1-configmap", "/", path.as_str()] {
                let hook = hook_name(path, name);
                assert!(hook.len() <= 253, "{hook} has {} characters", hook.len());
                assert_eq!(subdomain_error(&hook), None, "{hook}");
                assert!(hook.split('.').count() >= 3, "{hook}");
            }
        }
        let too_long = format!("{longest}a");
        for (name, why) in [
            (too_long.as_str(), "may have at most 189"),
            ("widgets", "has one label"),
            ("Widgets.example.com", "not a DNS subdomain"),
            ("a..b", "empty label"),
            ("-a.b", "starts or ends with `-`"),
            ("", "empty"),
        ] {
            let err = ConfigOptions::new(name).check().unwrap_err().to_string();
            assert!(err.contains(why), "{name:?}: {err}");
        }
        let mut options = ConfigOptions::new("a.b");
        options.failure_policy = "Deny".into();
        assert!(
            options
                .check()
                .unwrap_err()
                .to_string()
                .contains("neither Fail nor Ignore")
        );
        let mut options = ConfigOptions::new("a.b");
        options.timeout_seconds = 31;
        assert!(
            options
                .check()
                .unwrap_err()
                .to_string()
                .contains("between 1 and 30")
        );
    }
}
