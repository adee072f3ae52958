//! Rotations: files a kubeconfig reads by path are watched, and rotating a `tokenFile` (the way
//! kubelet and cert-manager do, a new file renamed into place) renews the member's credential
//! in place; a kubeconfig rewritten with new credentials only (same server and CA) renews in
//! place too: same instance, no relist. A new server is a new instance.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use mcr_core::{ClusterName, Engagements};
use mcr_envtest::Fleet;
use mcr_envtest::wait::{eventually, eventually_async};
use mcr_provider_file::{FileProvider, MemberOptions, Options};
use mcr_test_support::DEADLINE;

type Running = mcr_test_support::Running<FileProvider>;

fn write_atomic(path: &Path, contents: &str) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Whether the engaged `name` can read from its server (`GET /api/v1/namespaces/default`).
async fn authorized(registry: &Engagements, name: &str) -> bool {
    let Ok(cluster) = registry.get(&ClusterName::new(name)) else {
        return false;
    };
    Api::<Namespace>::all(cluster.client())
        .get("default")
        .await
        .is_ok()
}

#[tokio::test]
async fn rotated_token_file_renews_the_member_in_place() {
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
        members: MemberOptions {
            sync_timeout: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_millis(500),
            ..Options::default().members
        },
        ..Options::default()
    });
    let run = Running::spawn(provider);
    let registry = &run.registry;
    let name = format!("{}+{}", kc_file.display(), kc.contexts[0].name);
    eventually("engaged", DEADLINE, || {
        registry.get(&ClusterName::new(name.as_str())).is_ok()
    })
    .await;
    let before = registry.get(&ClusterName::new(name.as_str())).unwrap().id();
    assert!(
        !authorized(registry, &name).await,
        "the stale token is refused"
    );

    // Rotation: the kubeconfig is untouched, the token file gets the valid token.
    write_atomic(&token_file, tc.token());
    eventually_async("renewed with the rotated token", DEADLINE, || async {
        authorized(registry, &name).await
    })
    .await;
    let after = registry.get(&ClusterName::new(name.as_str())).unwrap();
    assert_eq!(after.id(), before, "renewed in place: same instance");
    assert_eq!(after.credentials().unwrap().status().renewals, 1);

    run.stop().await;
}

#[tokio::test]
async fn credential_only_rotation_renews_in_place_without_relist() {
    if !mcr_envtest::require_emulator("client certificates are minted by the emulator") {
        return;
    }
    let member = mcr_envtest::TestCluster::start_https("member")
        .await
        .unwrap();
    let minted = |user: &str| mcr_test_support::minted_kubeconfig(&member, user);
    let dir = tempfile::tempdir().unwrap();
    let kc_file = dir.path().join("member.kubeconfig");
    write_atomic(&kc_file, &minted("a"));
    let provider = FileProvider::new(Options {
        files: vec![kc_file.clone()],
        debounce: Duration::from_millis(20),
        members: MemberOptions {
            sync_timeout: Duration::from_secs(10),
            ..Options::default().members
        },
        ..Options::default()
    });
    let run = Running::spawn(provider);
    let registry = &run.registry;
    let context = mcr_core::kubeconfig::parse(minted("x").as_bytes())
        .unwrap()
        .current_context
        .unwrap();
    let name = ClusterName::new(format!("{}+{context}", kc_file.display()));
    eventually("engaged", DEADLINE, || registry.get(&name).is_ok()).await;
    let cluster = registry.get(&name).unwrap();
    let informer = cluster
        .cache()
        .informer::<k8s_openapi::api::core::v1::ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    let lists = member.request_count("list", "configmaps");

    // A new client certificate, then a bearer token: same server and CA.
    write_atomic(&kc_file, &minted("b"));
    mcr_test_support::wait_renewals(&cluster, 1, "the certificate renewed in place").await;
    let mut with_token = mcr_core::kubeconfig::parse(minted("c").as_bytes()).unwrap();
    let user = with_token.auth_infos[0].auth_info.as_mut().unwrap();
    user.client_certificate_data = None;
    user.client_key_data = None;
    user.token = Some(member.token().to_string().into());
    write_atomic(&kc_file, &serde_json::to_string(&with_token).unwrap());
    mcr_test_support::wait_renewals(&cluster, 2, "the token renewed in place").await;
    assert!(
        registry.get(&name).unwrap().same_instance(&cluster),
        "same instance"
    );
    let report = run.provider.run_once(&run.token).await;
    assert_eq!(
        report.unchanged,
        std::slice::from_ref(&name),
        "nothing left to do"
    );
    assert_eq!(
        member.request_count("list", "configmaps"),
        lists,
        "no relist"
    );

    // A different server is a new instance.
    let other = mcr_envtest::TestCluster::start_https("other")
        .await
        .unwrap();
    let mut moved = with_token.clone();
    let cluster_entry = moved.clusters[0].cluster.as_mut().unwrap();
    cluster_entry.server = other.url();
    let other_kc = other.kubeconfig().unwrap();
    cluster_entry.certificate_authority_data = other_kc.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .certificate_authority_data
        .clone();
    moved.auth_infos[0].auth_info.as_mut().unwrap().token = Some(other.token().to_string().into());
    write_atomic(&kc_file, &serde_json::to_string(&moved).unwrap());
    let id = cluster.id();
    eventually("replaced for a new server", DEADLINE, || {
        registry.get(&name).is_ok_and(|c| c.id() != id)
    })
    .await;
    run.stop().await;
}
