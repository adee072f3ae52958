//! The kubeconfig provider against emulated clusters: a host (management) cluster holding the
//! Secrets, and HTTPS member clusters whose kubeconfigs go into them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use mcr_core::{
    ClusterId, ClusterName, FieldIndex, Provider, ProviderRunnable, Registry, is_cluster_not_found,
};
use mcr_envtest::wait::eventually;
use mcr_envtest::{Fleet, TestCluster};
use mcr_provider_kubeconfig::{
    DEFAULT_LABEL, KubeconfigProvider, Namespaces, Options, SecretRef, SecretState,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn opts(namespaces: Namespaces) -> Options {
    Options {
        namespaces,
        sync_timeout: Duration::from_secs(10),
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        ..Options::default()
    }
}

struct Running {
    provider: KubeconfigProvider,
    registry: Registry,
    token: CancellationToken,
    task: JoinHandle<Result<(), mcr_core::Error>>,
}

impl Running {
    fn start(host: &TestCluster, opts: Options) -> Running {
        let provider = KubeconfigProvider::new(host.client(), opts);
        Running::start_provider(provider)
    }

    fn start_provider(provider: KubeconfigProvider) -> Running {
        let registry = Registry::new();
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (provider, token, aware) =
                (provider.clone(), token.clone(), Arc::new(registry.clone()));
            async move { provider.start(token, aware).await }
        });
        Running {
            provider,
            registry,
            token,
            task,
        }
    }

    fn names(&self) -> Vec<String> {
        self.registry
            .names()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }

    fn id(&self, name: &str) -> Option<ClusterId> {
        self.registry
            .get(&ClusterName::new(name))
            .ok()
            .map(|c| c.id())
    }

    fn state(&self, ns: &str, name: &str) -> Option<SecretState> {
        self.provider
            .status(&SecretRef::new(ns, name))
            .map(|s| s.state)
    }

    async fn stop(self) {
        self.token.cancel();
        self.task.await.unwrap().unwrap();
        assert!(self.provider.names().is_empty(), "clusters removed on stop");
    }
}

async fn https_fleet(n: usize) -> Fleet {
    Fleet::builder()
        .clusters(n)
        .name_prefix("member")
        .https(true)
        .start()
        .await
        .unwrap()
}

fn kubeconfig_of(tc: &TestCluster) -> String {
    tc.kubeconfig_yaml()
        .expect("https cluster has a kubeconfig")
}

async fn create_namespace(host: &TestCluster, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(host.client())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Creates or replaces a Secret; `data` None leaves the key out. Returns its resourceVersion.
async fn put_secret(
    host: &TestCluster,
    ns: &str,
    name: &str,
    label: &str,
    data: Option<&[u8]>,
    annotations: &[(&str, &str)],
) -> String {
    let api = Api::<Secret>::namespaced(host.client(), ns);
    let mut secret = api.get_opt(name).await.unwrap().unwrap_or_default();
    secret.metadata.name = Some(name.into());
    secret.metadata.labels = Some(BTreeMap::from([(
        DEFAULT_LABEL.to_string(),
        label.to_string(),
    )]));
    secret.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let mut map = BTreeMap::new();
    map.insert("unrelated".to_string(), ByteString(b"x".to_vec()));
    if let Some(d) = data {
        map.insert("kubeconfig".to_string(), ByteString(d.to_vec()));
    }
    secret.data = Some(map);
    let stored = if secret.metadata.resource_version.is_some() {
        api.replace(name, &PostParams::default(), &secret)
            .await
            .unwrap()
    } else {
        api.create(&PostParams::default(), &secret).await.unwrap()
    };
    stored.metadata.resource_version.unwrap()
}

async fn delete_secret(host: &TestCluster, ns: &str, name: &str) {
    Api::<Secret>::namespaced(host.client(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

fn configmap(name: &str, animal: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("animal".to_string(), animal.to_string())])),
        ..Default::default()
    }
}

fn animal_index(name: &str) -> FieldIndex {
    FieldIndex::new::<ConfigMap>(name, |cm: &ConfigMap| {
        cm.data
            .as_ref()
            .and_then(|d| d.get("animal"))
            .cloned()
            .into_iter()
            .collect()
    })
}

#[tokio::test]
async fn engages_secrets_and_serves_their_clusters() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let cms = Api::<ConfigMap>::namespaced(m1.client(), "default");
    cms.create(&PostParams::default(), &configmap("existing", "elephant"))
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(m2.client(), "default")
        .create(&PostParams::default(), &configmap("other", "lion"))
        .await
        .unwrap();
    put_secret(
        &host,
        "default",
        "one",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "default",
        "two",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[],
    )
    .await;

    let provider = KubeconfigProvider::new(host.client(), opts(Namespaces::default()));
    provider
        .index_field(&animal_index("animal-before"))
        .await
        .unwrap();
    let run = Running::start_provider(provider);
    eventually("both clusters engaged", DEADLINE, || {
        run.names() == ["one", "two"]
    })
    .await;
    assert_eq!(run.provider.names(), run.registry.names());

    // Existing objects, through the member's own client and its cache.
    let one = run.provider.get(&ClusterName::new("one")).await.unwrap();
    let listed = Api::<ConfigMap>::namespaced(one.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("existing"))
    );
    let informer = one.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert!(informer.get(Some("default"), "existing").is_some());
    assert!(
        informer.get(Some("default"), "other").is_none(),
        "cluster one is member-1 only"
    );

    // New and updated objects.
    cms.create(&PostParams::default(), &configmap("new", "zebra"))
        .await
        .unwrap();
    eventually("new configmap cached", DEADLINE, || {
        informer.get(Some("default"), "new").is_some()
    })
    .await;
    let mut existing = cms.get("existing").await.unwrap();
    existing.data = Some(BTreeMap::from([(
        "animal".to_string(),
        "hungry-elephant".to_string(),
    )]));
    cms.replace("existing", &PostParams::default(), &existing)
        .await
        .unwrap();
    eventually("update cached", DEADLINE, || {
        informer
            .get(Some("default"), "existing")
            .and_then(|c| c.data.clone())
            .and_then(|d| d.get("animal").cloned())
            == Some("hungry-elephant".to_string())
    })
    .await;

    // An index registered before the clusters appeared, and one registered after.
    let two = run.registry.get(&ClusterName::new("two")).unwrap();
    eventually("index before: per cluster", DEADLINE, || {
        one.cache()
            .list_by_index::<ConfigMap>("animal-before", "zebra")
            .map(|v| v.len())
            .ok()
            == Some(1)
            && two
                .cache()
                .list_by_index::<ConfigMap>("animal-before", "zebra")
                .map(|v| v.len())
                .ok()
                == Some(0)
            && two
                .cache()
                .list_by_index::<ConfigMap>("animal-before", "lion")
                .map(|v| v.len())
                .ok()
                == Some(1)
    })
    .await;
    run.provider
        .index_field(&animal_index("animal-after"))
        .await
        .unwrap();
    eventually("index after: per cluster", DEADLINE, || {
        one.cache()
            .list_by_index::<ConfigMap>("animal-after", "lion")
            .map(|v| v.len())
            .ok()
            == Some(0)
            && two
                .cache()
                .list_by_index::<ConfigMap>("animal-after", "lion")
                .map(|v| v.len())
                .ok()
                == Some(1)
    })
    .await;

    let err = run
        .provider
        .get(&ClusterName::new("nope"))
        .await
        .unwrap_err();
    assert!(is_cluster_not_found(&err));
    run.stop().await;
}

#[tokio::test]
async fn repointed_secret_reengages_annotation_change_does_not() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    Api::<ConfigMap>::namespaced(m2.client(), "default")
        .create(&PostParams::default(), &configmap("only-on-2", "owl"))
        .await
        .unwrap();
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "a",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("engaged", DEADLINE, || run.id("a").is_some()).await;
    let first = run.id("a").unwrap();

    let rv = put_secret(
        &host,
        "default",
        "a",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[("note", "hi")],
    )
    .await;
    eventually("annotation change observed", DEADLINE, || {
        run.provider
            .status(&SecretRef::new("default", "a"))
            .is_some_and(|s| {
                s.resource_version.as_deref() == Some(rv.as_str())
                    && matches!(s.state, SecretState::Engaged { .. })
            })
    })
    .await;
    assert_eq!(
        run.id("a"),
        Some(first),
        "annotation-only change keeps the instance"
    );

    put_secret(
        &host,
        "default",
        "a",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[("note", "hi")],
    )
    .await;
    eventually("re-engaged", DEADLINE, || {
        run.id("a").is_some_and(|id| id != first)
    })
    .await;
    let a = run.registry.get(&ClusterName::new("a")).unwrap();
    let informer = a.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert!(
        informer.get(Some("default"), "only-on-2").is_some(),
        "now talks to member-2"
    );
    run.stop().await;
}

#[tokio::test]
async fn deletion_and_deletion_timestamp_shrink_the_fleet() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "a",
        "true",
        Some(kubeconfig_of(&fleet.clusters()[0]).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "default",
        "b",
        "true",
        Some(kubeconfig_of(&fleet.clusters()[1]).as_bytes()),
        &[],
    )
    .await;
    eventually("both engaged", DEADLINE, || run.names() == ["a", "b"]).await;

    delete_secret(&host, "default", "a").await;
    eventually("a removed", DEADLINE, || run.names() == ["b"]).await;
    assert!(run.state("default", "a").is_none());

    // A finalizer keeps the Secret around with a deletionTimestamp: the cluster goes already.
    let api = Api::<Secret>::namespaced(host.client(), "default");
    let mut b = api.get("b").await.unwrap();
    b.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.replace("b", &PostParams::default(), &b).await.unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    assert!(
        api.get("b")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    eventually("b removed while terminating", DEADLINE, || {
        run.names().is_empty()
    })
    .await;
    run.stop().await;
}

#[tokio::test]
async fn missing_or_empty_key_is_ignored_until_added() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(3).await;
    let kc = |i: usize| kubeconfig_of(&fleet.clusters()[i]);
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "unlabelled",
        "false",
        Some(kc(2).as_bytes()),
        &[],
    )
    .await;
    put_secret(&host, "default", "missing", "true", None, &[]).await;
    put_secret(&host, "default", "empty", "true", Some(b""), &[]).await;
    put_secret(
        &host,
        "default",
        "good",
        "true",
        Some(kc(2).as_bytes()),
        &[],
    )
    .await;
    eventually("good engaged", DEADLINE, || run.names() == ["good"]).await;
    eventually("missing and empty reported", DEADLINE, || {
        run.state("default", "missing") == Some(SecretState::MissingKey)
            && run.state("default", "empty") == Some(SecretState::MissingKey)
    })
    .await;
    assert!(
        run.state("default", "unlabelled").is_none(),
        "label value must be \"true\""
    );

    put_secret(
        &host,
        "default",
        "missing",
        "true",
        Some(kc(0).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "default",
        "empty",
        "true",
        Some(kc(1).as_bytes()),
        &[],
    )
    .await;
    eventually("keys added: engaged", DEADLINE, || {
        run.names() == ["empty", "good", "missing"]
    })
    .await;
    run.stop().await;
}

#[tokio::test]
async fn invalid_or_unreachable_is_retried_and_isolated() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "bad",
        "true",
        Some(b"clusters: [not: valid"),
        &[],
    )
    .await;
    m2.stop().await;
    put_secret(
        &host,
        "default",
        "down",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[],
    )
    .await;
    put_secret(
        &host,
        "default",
        "good",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("good engaged", DEADLINE, || run.names() == ["good"]).await;
    eventually("bad and down failing", DEADLINE, || {
        matches!(
            run.state("default", "bad"),
            Some(SecretState::Failed { .. })
        ) && matches!(
            run.state("default", "down"),
            Some(SecretState::Failed { .. })
        )
    })
    .await;
    let Some(SecretState::Failed { reason, .. }) = run.state("default", "down") else {
        unreachable!()
    };
    assert!(
        reason.contains("default/down"),
        "names the Secret: {reason}"
    );
    assert!(!reason.contains(m2.token()), "no credentials in errors");

    // The unreachable server comes back: picked up by the retry, no Secret change needed.
    m2.restart().await.unwrap();
    eventually("down engaged after restart", DEADLINE, || {
        run.names() == ["down", "good"]
    })
    .await;
    // Fixing the invalid kubeconfig engages it too.
    put_secret(
        &host,
        "default",
        "bad",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[],
    )
    .await;
    eventually("bad engaged after fix", DEADLINE, || {
        run.names() == ["bad", "down", "good"]
    })
    .await;
    run.stop().await;
}

fn exec_kubeconfig(tc: &TestCluster) -> String {
    let kc = tc.kubeconfig().unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    let ca = cluster.certificate_authority_data.unwrap();
    let server = cluster.server.unwrap();
    format!(
        r#"apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", certificate-authority-data: "{ca}"}}}}]
users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "echo {{}}"], interactiveMode: Never}}}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"#
    )
}

#[tokio::test]
async fn exec_stanza_is_refused_by_default() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "exec",
        "true",
        Some(exec_kubeconfig(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("refused", DEADLINE, || {
        matches!(
            run.state("default", "exec"),
            Some(SecretState::ExecDenied { .. })
        )
    })
    .await;
    assert!(run.names().is_empty());
    // Replacing it with a plain kubeconfig engages it.
    put_secret(
        &host,
        "default",
        "exec",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("engaged", DEADLINE, || run.names() == ["exec"]).await;
    run.stop().await;
}

/// A kubeconfig that reads a local file (here this process's own "service-account token") and
/// points at a server of its choosing: refused by default, so a hostile Secret cannot make the
/// controller send its own credentials away.
fn token_file_kubeconfig(tc: &TestCluster, token_file: &std::path::Path) -> String {
    let kc = tc.kubeconfig().unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    let ca = cluster.certificate_authority_data.unwrap();
    let server = cluster.server.unwrap();
    let token_file = token_file.display();
    format!(
        r#"apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", certificate-authority-data: "{ca}"}}}}]
users: [{{name: u, user: {{tokenFile: "{token_file}"}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"#
    )
}

#[tokio::test]
async fn local_file_references_are_refused_by_default() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(1).await;
    let m1 = &fleet.clusters()[0];
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, m1.token()).unwrap();
    let run = Running::start(&host, opts(Namespaces::default()));
    put_secret(
        &host,
        "default",
        "files",
        "true",
        Some(token_file_kubeconfig(m1, &token_file).as_bytes()),
        &[],
    )
    .await;
    eventually("refused", DEADLINE, || {
        matches!(
            run.state("default", "files"),
            Some(SecretState::ExecDenied { ref reason }) if reason.contains("tokenFile") || reason.contains("local file")
        )
    })
    .await;
    assert!(run.names().is_empty());
    run.stop().await;
}

#[tokio::test]
async fn namespace_scopes_split_one_management_cluster() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(3).await;
    for ns in ["ns-a", "ns-b", "ns-c"] {
        create_namespace(&host, ns).await;
    }
    let scoped = Running::start(
        &host,
        opts(Namespaces::List(vec!["ns-a".into(), "ns-b".into()])),
    );
    let rest = Running::start(
        &host,
        opts(Namespaces::AllExcept(vec!["ns-a".into(), "ns-b".into()])),
    );
    let single = Running::start(&host, opts(Namespaces::One("ns-c".into())));
    for (i, ns) in ["ns-a", "ns-b", "ns-c"].iter().enumerate() {
        let kc = kubeconfig_of(&fleet.clusters()[i]);
        put_secret(
            &host,
            ns,
            &format!("in-{ns}"),
            "true",
            Some(kc.as_bytes()),
            &[],
        )
        .await;
    }
    put_secret(
        &host,
        "default",
        "in-default",
        "true",
        Some(kubeconfig_of(&fleet.clusters()[0]).as_bytes()),
        &[],
    )
    .await;
    eventually("list scope", DEADLINE, || {
        scoped.names() == ["in-ns-a", "in-ns-b"]
    })
    .await;
    eventually("all-except scope", DEADLINE, || {
        rest.names() == ["in-default", "in-ns-c"]
    })
    .await;
    eventually("single scope", DEADLINE, || single.names() == ["in-ns-c"]).await;
    assert!(scoped.state("ns-c", "in-ns-c").is_none());
    assert!(rest.state("ns-a", "in-ns-a").is_none());
    scoped.stop().await;
    rest.stop().await;
    single.stop().await;
}

#[tokio::test]
async fn same_name_in_two_namespaces_first_wins_then_hands_over() {
    init_tracing();
    let host = TestCluster::start("host").await.unwrap();
    let fleet = https_fleet(2).await;
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    Api::<ConfigMap>::namespaced(m2.client(), "default")
        .create(&PostParams::default(), &configmap("only-on-2", "owl"))
        .await
        .unwrap();
    create_namespace(&host, "ns-a").await;
    create_namespace(&host, "ns-b").await;
    let run = Running::start(
        &host,
        opts(Namespaces::List(vec!["ns-a".into(), "ns-b".into()])),
    );
    put_secret(
        &host,
        "ns-a",
        "x",
        "true",
        Some(kubeconfig_of(m1).as_bytes()),
        &[],
    )
    .await;
    eventually("first engaged", DEADLINE, || run.id("x").is_some()).await;
    let first = run.id("x").unwrap();

    put_secret(
        &host,
        "ns-b",
        "x",
        "true",
        Some(kubeconfig_of(m2).as_bytes()),
        &[],
    )
    .await;
    eventually("second in conflict", DEADLINE, || {
        run.state("ns-b", "x")
            == Some(SecretState::Conflict {
                owner: SecretRef::new("ns-a", "x"),
            })
    })
    .await;
    assert_eq!(run.id("x"), Some(first), "the first one keeps the name");

    delete_secret(&host, "ns-a", "x").await;
    eventually("second takes over", DEADLINE, || {
        run.id("x").is_some_and(|id| id != first)
    })
    .await;
    eventually("second engaged", DEADLINE, || {
        matches!(run.state("ns-b", "x"), Some(SecretState::Engaged { .. }))
    })
    .await;
    let x = run.registry.get(&ClusterName::new("x")).unwrap();
    let informer = x.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert!(informer.get(Some("default"), "only-on-2").is_some());
    run.stop().await;
}
