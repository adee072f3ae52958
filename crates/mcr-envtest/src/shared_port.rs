//! One HTTPS port for many emulated clusters, told apart by a path prefix.
//!
//! A cluster on a shared port has the kubeconfig server URL
//! `https://127.0.0.1:<port>/clusters/<name>`. kube-rs (like client-go) keeps the path of the
//! server URL in front of every request path, so the port's handler strips
//! `/clusters/<name>` and hands the rest to that cluster. All clusters of one port share its
//! CA and serving certificate (one TLS configuration, one listening socket); each keeps its
//! own bearer token, state, faults and counters.
//!
//! Why: a process may hold only so many open files, and a machine has fewer than 65,536 ports.
//! With one port per cluster, a fleet of tens of thousands of HTTPS clusters does not fit in
//! one process; on a shared port each cluster costs no socket of its own until a client
//! connects.
//!
//! Faults act per request: a stopped or `Partition::Refuse`d cluster drops the connection a
//! request for it arrives on (the port stays open for the other clusters), and its open
//! watches end as on an own port.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use http::uri::PathAndQuery;
use http::{Request, Uri};
use hyper::body::Incoming;
use parking_lot::RwLock;

use crate::Error;
use crate::gate::Gate;
use crate::https::{Auth, Target};
use crate::server::Shared;
use crate::x509::ClientCa;

/// The path segment in front of every cluster's name.
const PREFIX: &str = "/clusters/";

/// A port shared by many clusters (see the module docs).
pub(crate) struct SharedPort {
    gate: Gate,
    routes: Arc<Routes>,
    ca_pem: String,
    client_ca: Arc<ClientCa>,
}

impl std::fmt::Debug for SharedPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPort")
            .field("addr", &self.gate.addr())
            .field("clusters", &self.routes.map.read().len())
            .finish()
    }
}

/// The clusters of one shared port, by name.
#[derive(Default)]
pub(crate) struct Routes {
    map: RwLock<HashMap<String, (Arc<Shared>, Auth)>>,
}

impl SharedPort {
    /// Binds 127.0.0.1 on a random port, with a new CA and serving certificate, and serves.
    pub(crate) fn start() -> Result<Arc<Self>, Error> {
        let material = crate::tls::generate("shared port")?;
        let gate = Gate::reserve_loopback("shared port")?;
        let routes = Arc::new(Routes::default());
        crate::https::open(
            &gate,
            tokio_rustls::TlsAcceptor::from(material.server_config),
            Target::Routed(routes.clone()),
        )?;
        tracing::info!(addr = %gate.addr(), "serving clusters on a shared port");
        Ok(Arc::new(Self {
            gate,
            routes,
            ca_pem: material.ca_pem,
            client_ca: material.client_ca,
        }))
    }

    /// The port's address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.gate.addr()
    }

    /// The server URL of the cluster `name` on this port.
    pub(crate) fn url(&self, name: &str) -> String {
        format!("https://{}{PREFIX}{name}", self.addr())
    }

    /// The CA (PEM) every cluster of this port is served under.
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA of client certificates on this port.
    pub(crate) fn client_ca(&self) -> &Arc<ClientCa> {
        &self.client_ca
    }

    /// Serves `shared` under its name, authenticated by `token`.
    pub(crate) fn insert(&self, shared: Arc<Shared>, token: Arc<str>) -> Result<(), Error> {
        let name = shared.name.clone();
        let valid = !name.is_empty()
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid {
            return Err(Error::InvalidName(name));
        }
        let auth = Auth {
            token,
            client_ca: self.client_ca.clone(),
        };
        let mut map = self.routes.map.write();
        if map.contains_key(&name) {
            return Err(Error::DuplicateName(name));
        }
        map.insert(name, (shared, auth));
        Ok(())
    }

    /// Stops serving the cluster `name` (its requests then get 404).
    pub(crate) fn remove(&self, name: &str) {
        self.routes.map.write().remove(name);
    }
}

/// A cluster's place on a shared port; leaves the port when dropped.
pub(crate) struct Route {
    port: Arc<SharedPort>,
    name: String,
}

impl Route {
    /// Serves `shared` on `port`.
    pub(crate) fn new(
        port: Arc<SharedPort>,
        shared: Arc<Shared>,
        token: Arc<str>,
    ) -> Result<Self, Error> {
        let name = shared.name.clone();
        port.insert(shared, token)?;
        Ok(Self { port, name })
    }

    /// The port.
    pub(crate) fn port(&self) -> &SharedPort {
        &self.port
    }

    /// This cluster's server URL.
    pub(crate) fn url(&self) -> String {
        self.port.url(&self.name)
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        self.port.remove(&self.name);
    }
}

impl Routes {
    /// The cluster a request is for, with the request's URI rewritten to what that cluster
    /// serves (`/clusters/a/api/v1/pods?watch=1` becomes `/api/v1/pods?watch=1`); `None` for
    /// a path outside every cluster.
    pub(crate) fn resolve(
        &self,
        req: Request<Incoming>,
    ) -> Option<(Arc<Shared>, Auth, Request<Incoming>)> {
        let (name, rest) = split(req.uri().path())?;
        let (shared, auth) = self.map.read().get(name).cloned()?;
        let path_and_query = match req.uri().query() {
            Some(query) => format!("{rest}?{query}"),
            None => rest.to_string(),
        };
        let path_and_query = PathAndQuery::try_from(path_and_query).ok()?;
        let (mut parts, body) = req.into_parts();
        let mut uri = parts.uri.into_parts();
        uri.path_and_query = Some(path_and_query);
        parts.uri = Uri::from_parts(uri).ok()?;
        Some((shared, auth, Request::from_parts(parts, body)))
    }
}

/// `/clusters/<name><rest>` as `(name, rest)`, `rest` starting with `/` (`/` when empty).
fn split(path: &str) -> Option<(&str, &str)> {
    let after = path.strip_prefix(PREFIX)?;
    let (name, rest) = match after.find('/') {
        Some(i) => after.split_at(i),
        None => (after, "/"),
    };
    (!name.is_empty()).then_some((name, rest))
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn splits_the_cluster_prefix() {
        assert_eq!(split("/clusters/a/api/v1"), Some(("a", "/api/v1")));
        assert_eq!(split("/clusters/a"), Some(("a", "/")));
        assert_eq!(split("/clusters/a/"), Some(("a", "/")));
        assert_eq!(split("/clusters//api"), None);
        assert_eq!(split("/api/v1"), None);
        assert_eq!(split("/clustersa/api"), None);
    }
}
