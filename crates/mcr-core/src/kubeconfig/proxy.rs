//! Which proxy, if any, a member's connections go through.
//!
//! kube's kubeconfig loader takes a cluster's `proxy-url` or, failing that, the process's
//! `HTTPS_PROXY`/`https_proxy`; with the workspace's kube features it does not consult
//! `NO_PROXY`, and kube's client then refuses every `http`/`socks5` proxy (the `http-proxy` and
//! `socks5` features are off). Left alone, one `HTTPS_PROXY` in the controller's environment
//! would break every member. mcr decides instead ([`Policy`](super::Policy)):
//!
//! * the process environment is ignored unless the policy carries an [`EnvProxy`] (for
//!   example [`EnvProxy::from_env`]); then its proxy is used for servers that its `NO_PROXY`
//!   list does not match;
//! * a kubeconfig's `proxy-url` is refused unless the policy allows kubeconfig proxies.
//!
//! A proxy that is chosen still needs kube's `http-proxy` (or `socks5`) feature, which the
//! application enables for its kube dependency; without it the member fails with a clear error.

use std::net::IpAddr;

/// A proxy for members whose kubeconfig names none, with the hosts that bypass it.
///
/// `no_proxy` is a comma-separated list, as in `NO_PROXY`: `*` (every host), a host name
/// (`example.com` matches it and its subdomains; a leading `.` or `*.` is the same), an IP
/// address, or an IP network in CIDR notation (`10.0.0.0/8`). An entry with a port
/// (`host:8443`) applies to that port only.
///
/// ```
/// use mcr_core::kubeconfig::EnvProxy;
/// let proxy = EnvProxy::new("http://proxy.corp:3128").no_proxy("10.0.0.0/8, .svc, localhost");
/// assert_eq!(proxy.proxy_for("https://api.example.com:6443"), Some("http://proxy.corp:3128"));
/// assert_eq!(proxy.proxy_for("https://10.1.2.3:6443"), None);
/// assert_eq!(proxy.proxy_for("https://api.fleet.svc"), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvProxy {
    url: String,
    no_proxy: String,
}

impl EnvProxy {
    /// A proxy URL (`http://host:port`) used for every member server.
    pub fn new(url: impl Into<String>) -> Self {
        EnvProxy {
            url: url.into(),
            no_proxy: String::new(),
        }
    }

    /// Sets the hosts that bypass the proxy (the `NO_PROXY` syntax above).
    #[must_use]
    pub fn no_proxy(mut self, no_proxy: impl Into<String>) -> Self {
        self.no_proxy = no_proxy.into();
        self
    }

    /// The controller's `HTTPS_PROXY` (or `https_proxy`) and `NO_PROXY` (or `no_proxy`), read
    /// now; `None` when no proxy is set.
    ///
    /// ```
    /// use mcr_core::kubeconfig::{EnvProxy, Policy};
    /// let policy = Policy::default().env_proxy(EnvProxy::from_env());
    /// # let _ = policy;
    /// ```
    pub fn from_env() -> Option<Self> {
        let var = |a: &str, b: &str| {
            std::env::var(a)
                .ok()
                .filter(|v| !v.is_empty())
                .or_else(|| std::env::var(b).ok().filter(|v| !v.is_empty()))
        };
        let url = var("HTTPS_PROXY", "https_proxy")?;
        Some(EnvProxy::new(url).no_proxy(var("NO_PROXY", "no_proxy").unwrap_or_default()))
    }

    /// The proxy URL for a member whose server is `server`, or `None` when `no_proxy` matches
    /// its host (or the server URL has no host).
    pub fn proxy_for(&self, server: &str) -> Option<&str> {
        let uri = server.parse::<http::Uri>().ok()?;
        let host = uri.host()?.trim_matches(['[', ']']);
        let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
            Some("http") => 80,
            _ => 443,
        });
        let bypass = self
            .no_proxy
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .any(|entry| no_proxy_matches(entry, host, port));
        (!bypass).then_some(self.url.as_str())
    }
}

/// Whether one `NO_PROXY` entry matches `host:port`.
fn no_proxy_matches(entry: &str, host: &str, port: u16) -> bool {
    if entry == "*" {
        return true;
    }
    // An entry with a port: `host:port`, `[v6]:port`, `1.2.3.4:port` (a bare IPv6 address or
    // a CIDR has colons or a slash but no port).
    let (entry, entry_port) = split_port(entry);
    if entry_port.is_some_and(|p| p != port) {
        return false;
    }
    let host_ip = host.parse::<IpAddr>().ok();
    if let Some((net, len)) = entry.split_once('/') {
        return match (net.parse::<IpAddr>(), len.parse::<u8>(), host_ip) {
            (Ok(net), Ok(len), Some(ip)) => in_network(ip, net, len),
            _ => false,
        };
    }
    if let (Ok(ip), Some(host_ip)) = (entry.parse::<IpAddr>(), host_ip) {
        return ip == host_ip;
    }
    let domain = entry
        .trim_start_matches('*')
        .trim_start_matches('.')
        .to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    !domain.is_empty()
        && (host == domain
            || host
                .strip_suffix(domain.as_str())
                .is_some_and(|rest| rest.ends_with('.')))
}

fn split_port(entry: &str) -> (&str, Option<u16>) {
    let entry = entry.trim();
    if let Some(rest) = entry.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        return match rest.split_once(']') {
            Some((ip, tail)) => (ip, tail.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (entry, None),
        };
    }
    match entry.rsplit_once(':') {
        // exactly one colon: a host or IPv4 address with a port
        Some((host, port)) if !host.contains(':') && !port.contains('/') => {
            (host, port.parse().ok().or(Some(0)))
        }
        _ => (entry, None),
    }
}

fn in_network(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(ip), IpAddr::V4(net)) if len <= 32 => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) if len <= 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::EnvProxy;

    #[test]
    fn no_proxy_entries_match_domains_addresses_networks_and_ports() {
        let p = EnvProxy::new("http://proxy:3128")
            .no_proxy("example.com,.corp,*.internal, 10.0.0.0/8,192.168.1.5,::1,api.x:8443");
        let direct = |s: &str| p.proxy_for(s).is_none();
        assert!(direct("https://example.com"));
        assert!(direct("https://a.example.com:6443"));
        assert!(!direct("https://badexample.com"));
        assert!(direct("https://k.corp"));
        assert!(direct("https://a.b.internal"));
        assert!(direct("https://10.200.0.1:6443"));
        assert!(!direct("https://11.0.0.1:6443"));
        assert!(direct("https://192.168.1.5"));
        assert!(!direct("https://192.168.1.6"));
        assert!(direct("https://[::1]:6443"));
        assert!(direct("https://api.x:8443"));
        assert!(!direct("https://api.x:6443"));
        assert!(!direct("https://kubernetes.example.org"));
        assert!(
            EnvProxy::new("http://p")
                .no_proxy("*")
                .proxy_for("https://x")
                .is_none()
        );
        assert!(EnvProxy::new("http://p").proxy_for("https://x").is_some());
        assert!(
            EnvProxy::new("http://p")
                .no_proxy("0.0.0.0/0")
                .proxy_for("https://1.2.3.4")
                .is_none()
        );
    }
}
