//! C1's baseline: replace-on-rotation, what Go's Gardener provider does. Every new kubeconfig
//! tears the cluster down and engages a new one (new client, new cache, a relist of every
//! watched type), on the same renewal schedule the in-place side uses.

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result, anyhow};
use base64::Engine as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use mcr_core::{Cluster, providers::clusters::ClustersProvider};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Bound on a new cluster's ConfigMap cache sync.
const SYNC: Duration = Duration::from_secs(60);

/// What the rotating side measured.
#[derive(Default)]
pub struct Rotations {
    /// Per rotation: from the old cluster's removal to the new one engaged with its ConfigMap
    /// cache synced (relisted), i.e. consistent again.
    pub gaps: Vec<Duration>,
    /// Rotations whose new cluster could not be engaged (retried at once).
    pub failed: u64,
}

/// Shared between the per-shoot rotation tasks.
pub type Shared = Arc<Mutex<Rotations>>;

/// One `shoots/{name}/adminkubeconfig` request: a client for the shoot and when its
/// certificate expires.
pub async fn fetch(
    garden: &kube::Client,
    namespace: &str,
    shoot: &str,
    lifetime: Duration,
) -> Result<(kube::Client, SystemTime)> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("core.gardener.cloud", "v1beta1", "Shoot"),
        "shoots",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(garden.clone(), namespace, &resource);
    let body = json!({
        "apiVersion": "authentication.gardener.cloud/v1alpha1",
        "kind": "AdminKubeconfigRequest",
        "spec": {"expirationSeconds": lifetime.as_secs()},
    });
    let answer: Value = api
        .create_subresource(
            "adminkubeconfig",
            shoot,
            &PostParams::default(),
            &serde_json::to_vec(&body)?,
        )
        .await
        .with_context(|| format!("adminkubeconfig of {namespace}/{shoot}"))?;
    let encoded = answer
        .pointer("/status/kubeconfig")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("{namespace}/{shoot}: no status.kubeconfig"))?;
    let expires: jiff::Timestamp = answer
        .pointer("/status/expirationTimestamp")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("{namespace}/{shoot}: no status.expirationTimestamp"))?
        .parse()?;
    let yaml = base64::engine::general_purpose::STANDARD.decode(encoded)?;
    let kubeconfig = Kubeconfig::from_yaml(std::str::from_utf8(&yaml)?)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok((kube::Client::try_from(config)?, SystemTime::from(expires)))
}

/// When to rotate credentials installed at `installed`, expiring at `expires`: as the
/// in-place side's `RenewalOptions::default()` (80 % of the lifetime minus up to 10 % jitter).
fn rotate_at(installed: SystemTime, expires: SystemTime) -> SystemTime {
    let lifetime = expires.duration_since(installed).unwrap_or_default();
    let random = RandomState::new().hash_one(SystemTime::now()) as f64 / u64::MAX as f64;
    installed + lifetime.mul_f64(0.8) - lifetime.mul_f64(0.1 * random)
}

/// Engages shoot `namespace/shoot` as cluster `name` in `provider`, then replaces it with a
/// new cluster on every renewal until `token` fires.
pub async fn run_shoot(
    garden: kube::Client,
    provider: Arc<ClustersProvider>,
    namespace: String,
    shoot: String,
    lifetime: Duration,
    out: Shared,
    token: CancellationToken,
) -> Result<()> {
    let name = format!("{namespace}/{shoot}");
    let (client, mut expires) = fetch(&garden, &namespace, &shoot, lifetime).await?;
    provider.add(Cluster::new(name.clone(), client)).await?;
    let mut installed = SystemTime::now();
    loop {
        let wait = rotate_at(installed, expires)
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        tokio::select! {
            _ = token.cancelled() => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
        let (client, new_expiry) = fetch(&garden, &namespace, &shoot, lifetime).await?;
        let start = Instant::now();
        provider.remove(&name.as_str().into());
        let cluster = Cluster::new(name.clone(), client);
        let added = match provider.add(cluster.clone()).await {
            // Engaged: the controller's ConfigMap informer relists in the new cache.
            Ok(()) => cluster
                .cache()
                .informer::<ConfigMap>()
                .wait_for_sync(SYNC)
                .await
                .map_err(anyhow::Error::from),
            Err(err) => Err(err.into()),
        };
        match added {
            Ok(()) => {
                out.lock().gaps.push(start.elapsed());
                expires = new_expiry;
                installed = SystemTime::now();
            }
            Err(err) => {
                tracing::warn!(cluster = %name, %err, "re-engaging failed; retrying");
                out.lock().failed += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
                installed = SystemTime::now() - lifetime;
            }
        }
    }
}
