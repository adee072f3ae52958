//! [`SecretSource`]: how the engagement table reaches the workload cluster of a `Cluster`:
//! by reading its kubeconfig Secret, only when this replica owns the cluster and wants a new
//! instance.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use mcr_core::members::Connection;
use mcr_core::{BoxError, BoxFuture, Connect, Source};

use crate::{Error, ObjectRef};

/// The kubeconfig Secret of one `Cluster`, as the Secret watch last saw it: a
/// [`Source::Connect`] the table asks when it brings the member up. A Secret event changes its
/// [key](Connect::key) (the Secret's `resourceVersion`), so the table reads the Secret again;
/// a `Cluster` event that changes nothing of it reads nothing.
pub(crate) struct SecretSource {
    /// The management cluster's client.
    pub(crate) host: kube::Client,
    pub(crate) secret: ObjectRef,
    /// The data key holding the kubeconfig.
    pub(crate) data_key: Arc<str>,
    /// The Secret's `resourceVersion` as the Secret watch last saw it (`None`: not seen, or
    /// deleted).
    pub(crate) version: Option<String>,
}

impl SecretSource {
    /// Reads the Secret and parses its kubeconfig (the current context).
    async fn read(&self) -> Result<Connection, Error> {
        let api: Api<Secret> = Api::namespaced(self.host.clone(), &self.secret.namespace);
        let secret = api
            .get_opt(&self.secret.name)
            .await
            .map_err(|source| Error::Secret {
                secret: self.secret.clone(),
                source,
            })?
            .ok_or_else(|| Error::MissingSecret {
                secret: self.secret.clone(),
            })?;
        let data = secret
            .data
            .and_then(|mut d| d.remove(&*self.data_key))
            .filter(|b| !b.0.is_empty())
            .ok_or_else(|| Error::MissingKey {
                secret: self.secret.clone(),
                key: self.data_key.to_string(),
            })?;
        Connection::parse(&data.0).map_err(|source| Error::Kubeconfig {
            secret: self.secret.clone(),
            source,
        })
    }
}

impl Connect for SecretSource {
    fn key(&self) -> String {
        format!("{}@{}", self.secret, self.version.as_deref().unwrap_or(""))
    }

    /// A Secret that is missing, lacks its key or holds a kubeconfig that does not parse fails
    /// the attempt, retried with the member's backoff (and at once when the Secret watch sees
    /// the Secret change).
    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        Box::pin(async move { Ok(Source::Kubeconfig(self.read().await?)) })
    }
}
