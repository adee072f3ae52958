//! Client settings applied on top of what a kubeconfig says.

use std::time::Duration;

use kube::Config;

/// Connect timeout of clients built from kubeconfigs unless [`ClientOptions::connect_timeout`]
/// says otherwise.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Read timeout of clients built from kubeconfigs unless [`ClientOptions::read_timeout`] says
/// otherwise: above the 290 s watches kube's watcher asks for.
pub(crate) const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a pooled HTTP connection of a member client may stay idle before it is closed,
/// unless [`ClientOptions::pool_idle_timeout`] says otherwise (hyper's default, enforced by a
/// timer rather than only when the pool is next used).
pub(crate) const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Settings applied to every client built from a kubeconfig, on top of the kubeconfig's own.
///
/// Tuning only: what a kubeconfig may make the controller do (run plugins, read files, use a
/// proxy) is the separate [`Policy`](super::Policy), so replacing these options cannot weaken
/// it.
///
/// `None` (or an empty list) keeps the default: a 10 s connect timeout, a 300 s read timeout
/// (so a member whose API server accepts connections but never answers fails its requests instead of
/// holding them forever), kube's 295 s write timeout. A read timeout also bounds each watch
/// response; kube's watcher asks the server for a 290 s watch, so keep read timeouts above that
/// for clients used by informers.
///
/// ```
/// use std::time::Duration;
/// use mcr_core::kubeconfig::ClientOptions;
/// let opts = ClientOptions {
///     connect_timeout: Some(Duration::from_secs(5)),
///     user_agent: Some("my-controller/1.0".into()),
///     ..ClientOptions::default()
/// };
/// # let _ = opts;
/// ```
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Timeout for establishing a connection (default 10 s).
    pub connect_timeout: Option<Duration>,
    /// Timeout for reading a response (default 300 s).
    pub read_timeout: Option<Duration>,
    /// Timeout for sending a request.
    pub write_timeout: Option<Duration>,
    /// How long an idle pooled connection is kept (default 90 s).
    /// Concurrent requests open extra connections; without this bound each member would keep
    /// as many as it ever used at once. Applies to the clients mcr builds itself (static
    /// tokens, client certificates, exec plugins); a client kube builds (an `auth-provider`, a
    /// proxy) keeps kube's pool settings.
    pub pool_idle_timeout: Option<Duration>,
    /// Offer HTTP/2 to the member's API server (ALPN `h2`, then `http/1.1`; default: off,
    /// HTTP/1.1 only). A server that takes it carries every request and watch of the member
    /// on one connection, where HTTP/1.1 opens one per watch and per concurrent request.
    /// Measured with small objects (bench/README.md, "Bytes per member"): an HTTP/2
    /// connection holds more than an HTTP/1.1 one (about 12 KiB more per member watching one
    /// type), and each further watched type then costs about 19 KiB instead of 40, so it pays
    /// from two watched types per member on. A server that does not speak HTTP/2 is used over
    /// HTTP/1.1. Applies to the clients mcr builds itself, like `pool_idle_timeout`. A
    /// renewal in place keeps the running watches on the connection they were opened on;
    /// new requests open one new connection with the new credentials.
    pub http2: bool,
    /// How long an `exec` credential plugin may run before it is killed and the build fails
    /// (default 30 s).
    pub exec_timeout: Option<Duration>,
    /// `User-Agent` header sent with every request.
    pub user_agent: Option<String>,
    /// User to impersonate (`Impersonate-User`); replaces the kubeconfig's `as`.
    pub impersonate: Option<String>,
    /// Groups to impersonate (`Impersonate-Group`); replace the kubeconfig's `as-groups` when
    /// not empty.
    pub impersonate_groups: Vec<String>,
    /// Namespace used by `Api::default_namespaced`; replaces the context's namespace.
    pub default_namespace: Option<String>,
    /// Whether kube retries requests on 429/503/504 (kube's default: yes).
    pub default_retry: Option<bool>,
    /// Whether every completed write restarts the read timeout (see
    /// `kube::Config::reset_reader_on_write`).
    pub reset_reader_on_write: Option<bool>,
    /// Extra headers sent with every request (name, value).
    pub headers: Vec<(String, String)>,
}

impl ClientOptions {
    /// The idle timeout of pooled connections in effect.
    pub(crate) fn pool_idle(&self) -> Duration {
        self.pool_idle_timeout.unwrap_or(DEFAULT_POOL_IDLE_TIMEOUT)
    }

    /// Applies the options to a kube [`Config`]. Errors (naming the option, never its value)
    /// when a header name or value is invalid.
    pub(crate) fn apply(&self, config: &mut Config) -> Result<(), String> {
        use http::{HeaderName, HeaderValue};
        config.connect_timeout = Some(self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT));
        config.read_timeout = Some(self.read_timeout.unwrap_or(DEFAULT_READ_TIMEOUT));
        if let Some(t) = self.write_timeout {
            config.write_timeout = Some(t);
        }
        if let Some(ua) = &self.user_agent {
            let value = HeaderValue::from_str(ua)
                .map_err(|_| "user_agent is not a valid header value".to_string())?;
            config
                .headers
                .retain(|(name, _)| name != http::header::USER_AGENT);
            config.headers.push((http::header::USER_AGENT, value));
        }
        if let Some(user) = &self.impersonate {
            config.auth_info.impersonate = Some(user.clone());
        }
        if !self.impersonate_groups.is_empty() {
            config.auth_info.impersonate_groups = Some(self.impersonate_groups.clone());
        }
        if let Some(ns) = &self.default_namespace {
            config.default_namespace = ns.clone();
        }
        if let Some(retry) = self.default_retry {
            config.default_retry = retry;
        }
        if let Some(reset) = self.reset_reader_on_write {
            config.reset_reader_on_write = reset;
        }
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("header name {name:?} is not valid"))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| format!("the value of header {name} is not valid"))?;
            config.headers.push((name, value));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_clients_get_default_connect_and_read_timeouts() {
        let mut config = Config::new("https://127.0.0.1:6443".parse().unwrap());
        config.read_timeout = None;
        ClientOptions::default().apply(&mut config).unwrap();
        assert_eq!(config.connect_timeout, Some(DEFAULT_CONNECT_TIMEOUT));
        assert_eq!(config.read_timeout, Some(DEFAULT_READ_TIMEOUT));
        ClientOptions {
            read_timeout: Some(Duration::from_secs(1)),
            ..ClientOptions::default()
        }
        .apply(&mut config)
        .unwrap();
        assert_eq!(config.read_timeout, Some(Duration::from_secs(1)));
    }
}
