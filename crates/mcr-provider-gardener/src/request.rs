//! Short-lived kubeconfigs from `shoots/{name}/adminkubeconfig` (or `viewerkubeconfig`).

use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine as _;
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::Kubeconfig;
use mcr_core::credentials::{self, Credentials, Renew};
use mcr_core::{BoxError, BoxFuture};
use serde_json::{Value, json};

use crate::{Error, Options, shoot};

/// Asks the garden for a kubeconfig of one Shoot; also the Shoot's renewal source.
pub(crate) struct ShootKubeconfig {
    pub(crate) garden: kube::Client,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The advertised address to connect to instead of the kubeconfig's server.
    pub(crate) server: Option<String>,
    pub(crate) opts: Arc<Options>,
}

impl ShootKubeconfig {
    fn shoot(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub(crate) fn unusable(&self, reason: impl Into<String>) -> Error {
        Error::Kubeconfig {
            shoot: self.shoot(),
            reason: reason.into(),
        }
    }

    /// Requests a kubeconfig: the connection settings and the credentials (with the
    /// answer's `status.expirationTimestamp` as their expiry).
    pub(crate) async fn fetch(&self) -> Result<(kube::Config, Credentials), Error> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.garden.clone(), &self.namespace, &shoot::resource());
        let kind = self.opts.kubeconfig;
        let body = json!({
            "apiVersion": "authentication.gardener.cloud/v1alpha1",
            "kind": kind.request_kind(),
            "spec": {"expirationSeconds": self.opts.expiration.as_secs().max(1)},
        });
        let pp = PostParams::default();
        let request =
            api.create_subresource::<Value, Value>(kind.subresource(), &self.name, &pp, &body);
        let answer = tokio::time::timeout(self.opts.request_timeout, request)
            .await
            .map_err(|_| Error::Timeout {
                shoot: self.shoot(),
            })?
            .map_err(|source| Error::Request {
                shoot: self.shoot(),
                source,
            })?;
        let encoded = answer
            .pointer("/status/kubeconfig")
            .and_then(Value::as_str)
            .ok_or_else(|| self.unusable("the answer has no status.kubeconfig"))?;
        let yaml = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| self.unusable("status.kubeconfig is not base64"))?;
        let yaml =
            String::from_utf8(yaml).map_err(|_| self.unusable("the kubeconfig is not UTF-8"))?;
        // kube's parse errors may quote the input: keep them out.
        let kc = Kubeconfig::from_yaml(&yaml)
            .map_err(|_| self.unusable("the kubeconfig does not parse"))?;
        // Gardener's kubeconfig is data only: no plugins, files or proxies (the default policy).
        let policy = mcr_core::kubeconfig::Policy::default();
        let (mut config, creds) =
            credentials::from_kubeconfig(&kc, None, &self.opts.client, &policy)
                .await
                .map_err(|e| self.unusable(e.to_string()))?;
        if let Some(server) = &self.server {
            config.cluster_url = server
                .parse()
                .map_err(|_| self.unusable("the advertised address is not a URL"))?;
        }
        let creds = match answer
            .pointer("/status/expirationTimestamp")
            .and_then(Value::as_str)
            .and_then(|ts| ts.parse::<jiff::Timestamp>().ok())
        {
            Some(at) => creds.with_expiry(SystemTime::from(at)),
            None => creds,
        };
        Ok((config, creds))
    }
}

impl Renew for ShootKubeconfig {
    fn renew(&self) -> BoxFuture<'_, Result<Credentials, BoxError>> {
        Box::pin(async move {
            let (_, creds) = self.fetch().await?;
            Ok(creds)
        })
    }
}
