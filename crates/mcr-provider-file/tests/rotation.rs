//! Files a kubeconfig reads by path are watched: rotating a `tokenFile` (the way kubelet and
//! cert-manager do, a new file renamed into place) rebuilds the member with the new credential.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use mcr_core::{ClusterName, ProviderRunnable, Registry};
use mcr_envtest::Fleet;
use mcr_envtest::wait::{eventually, eventually_async};
use mcr_provider_file::{FileProvider, Options};
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(30);

fn write_atomic(path: &Path, contents: &str) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Whether the engaged `name` can read from its server (`GET /api/v1/namespaces/default`).
async fn authorized(registry: &Registry, name: &str) -> bool {
    let Ok(cluster) = registry.get(&ClusterName::new(name)) else {
        return false;
    };
    Api::<Namespace>::all(cluster.client())
        .get("default")
        .await
        .is_ok()
}

#[tokio::test]
async fn rotated_token_file_rebuilds_the_member() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let fleet = Fleet::builder()
        .clusters(1)
        .https(true)
        .start()
        .await
        .unwrap();
    let tc = &fleet.clusters()[0];
    let dir = tempfile::tempdir().unwrap();
    let (secrets, kc_dir) = (dir.path().join("secrets"), dir.path().join("kc"));
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::create_dir_all(&kc_dir).unwrap();
    let token_file = secrets.join("token");
    // The credential on disk is stale (about to be rotated).
    write_atomic(&token_file, "expired-token");
    let mut kc = tc.kubeconfig().unwrap();
    let user = kc.auth_infos[0].auth_info.as_mut().unwrap();
    user.token = None;
    user.token_file = Some(token_file.display().to_string());
    let kc_file = kc_dir.join("member.kubeconfig");
    write_atomic(&kc_file, &serde_json::to_string(&kc).unwrap());

    let provider = FileProvider::new(Options {
        files: vec![kc_file.clone()],
        debounce: Duration::from_millis(20),
        sync_timeout: Duration::from_secs(10),
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        ..Options::default()
    });
    let registry = Registry::new();
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (provider, token, aware) =
            (provider.clone(), token.clone(), Arc::new(registry.clone()));
        async move { provider.start(token, aware).await }
    });
    let name = format!("{}+{}", kc_file.display(), kc.contexts[0].name);
    eventually("engaged", DEADLINE, || {
        registry.get(&ClusterName::new(name.as_str())).is_ok()
    })
    .await;
    let before = registry.get(&ClusterName::new(name.as_str())).unwrap().id();
    assert!(
        !authorized(&registry, &name).await,
        "the stale token is refused"
    );

    // Rotation: the kubeconfig is untouched, the token file gets the valid token.
    write_atomic(&token_file, tc.token());
    eventually_async("rebuilt with the rotated token", DEADLINE, || async {
        registry
            .get(&ClusterName::new(name.as_str()))
            .is_ok_and(|c| c.id() != before)
            && authorized(&registry, &name).await
    })
    .await;

    token.cancel();
    task.await.unwrap().unwrap();
}
