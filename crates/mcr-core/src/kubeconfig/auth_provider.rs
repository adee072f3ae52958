//! Legacy `auth-provider` entries, replaced by the token they hold before kube sees them.
//!
//! kube runs a `gcp` provider's `cmd-path` command on a blocking thread no timeout can stop,
//! and again at request time while holding its token lock; with its `oauth`/`oidc` features it
//! also refreshes tokens over the network at request time. mcr hands kube none of that: the
//! policy refuses a provider that needs a command
//! ([`Error::AuthProviderCommand`](super::Error::AuthProviderCommand)), and here the stored
//! token becomes the user's plain bearer token. It is never refreshed: when it expires the
//! member's requests fail with 401 until the kubeconfig brings a new one.

use std::time::SystemTime;

use kube::config::AuthInfo;

/// Replaces the `auth-provider` of `auth` (if any) by its stored token, and tells when that
/// expires if the entry says so (`gcp`'s `expiry`). Errors name the provider and the field,
/// never a token.
pub(crate) fn resolve_auth_provider(auth: &mut AuthInfo) -> Result<Option<SystemTime>, String> {
    let Some(provider) = auth.auth_provider.take() else {
        return Ok(None);
    };
    let name = provider.name.as_str();
    let field = |key: &str| {
        provider
            .config
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    };
    let (token, expires_at) = match name {
        "oidc" => (
            field("id-token")
                .ok_or_else(|| "auth-provider \"oidc\" holds no id-token".to_string())?,
            None,
        ),
        "gcp" => match (field("id-token"), field("access-token")) {
            (Some(token), _) => (token, None),
            (None, Some(token)) => {
                let expires_at = match field("expiry") {
                    None => None,
                    Some(at) => Some(
                        at.parse::<jiff::Timestamp>()
                            .map(SystemTime::from)
                            .map_err(|_| {
                                "auth-provider \"gcp\" has a malformed expiry".to_string()
                            })?,
                    ),
                };
                if expires_at.is_some_and(|at| at <= SystemTime::now()) {
                    return Err(
                        "the access-token of auth-provider \"gcp\" expired, and mcr \
                                does not run a command to renew it: put a fresh token in the \
                                kubeconfig or use an exec credential plugin"
                            .to_string(),
                    );
                }
                (token, expires_at)
            }
            (None, None) => {
                return Err(
                    "auth-provider \"gcp\" holds no id-token or access-token (mcr does \
                            not fetch Google application credentials: use an exec credential \
                            plugin such as gke-gcloud-auth-plugin)"
                        .to_string(),
                );
            }
        },
        other => return Err(format!("auth-provider {other:?} is not supported")),
    };
    auth.token = Some(token.to_string().into());
    auth.token_file = None;
    Ok(expires_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::config::AuthProviderConfig;
    use secrecy::ExposeSecret;

    fn user(name: &str, config: &[(&str, &str)]) -> AuthInfo {
        AuthInfo {
            auth_provider: Some(AuthProviderConfig {
                name: name.into(),
                config: config
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                other: Default::default(),
            }),
            ..AuthInfo::default()
        }
    }

    #[test]
    fn stored_tokens_become_bearer_tokens() {
        let mut auth = user("oidc", &[("id-token", "t1"), ("refresh-token", "r")]);
        assert_eq!(resolve_auth_provider(&mut auth), Ok(None));
        assert!(auth.auth_provider.is_none());
        assert_eq!(auth.token.as_ref().unwrap().expose_secret(), "t1");

        let mut auth = user(
            "gcp",
            &[("access-token", "t2"), ("expiry", "2999-01-01T00:00:00Z")],
        );
        let at = resolve_auth_provider(&mut auth).unwrap().unwrap();
        assert!(at > SystemTime::now());
        assert_eq!(auth.token.as_ref().unwrap().expose_secret(), "t2");
    }

    #[test]
    fn entries_without_a_usable_token_are_refused_without_echoing_it() {
        for (name, config) in [
            ("oidc", vec![("refresh-token", "secret-r")]),
            ("gcp", vec![]),
            (
                "gcp",
                vec![
                    ("access-token", "secret-t"),
                    ("expiry", "2001-01-01T00:00:00Z"),
                ],
            ),
            (
                "gcp",
                vec![("access-token", "secret-t"), ("expiry", "soon")],
            ),
            ("azure", vec![("access-token", "secret-t")]),
        ] {
            let err = resolve_auth_provider(&mut user(name, &config)).unwrap_err();
            assert!(err.contains(&format!("{name:?}")), "{err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }
}
