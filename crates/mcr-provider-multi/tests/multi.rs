//! The multi provider over real children (ClustersProvider, NamespaceProvider) and envtest
//! clusters.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use mcr_core::{
    BoxFuture, Cluster, ClusterName, Engagements, Error as CoreError, FieldIndex, Provider,
    ProviderRunnable, providers::clusters::ClustersProvider,
};
use mcr_envtest::wait::eventually;
use mcr_envtest::{Fleet, TestCluster};
use mcr_provider_multi::{Error, MultiProvider, Options};
use mcr_provider_namespace::NamespaceProvider;
use mcr_test_support::{DEADLINE, init_tracing};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

fn by_app() -> FieldIndex {
    mcr_test_support::label_index("app")
}

/// A real child provider that counts the index registrations it receives.
struct Counting {
    inner: ClustersProvider,
    indexes: AtomicUsize,
}

impl Counting {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: ClustersProvider::new(),
            indexes: AtomicUsize::new(0),
        })
    }
}

impl Provider for Counting {
    fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, CoreError>> {
        self.inner.get(name)
    }
    fn index_field<'a>(&'a self, index: &'a FieldIndex) -> BoxFuture<'a, Result<(), CoreError>> {
        self.indexes.fetch_add(1, Ordering::SeqCst);
        self.inner.index_field(index)
    }
    fn runnable(&self) -> Option<&dyn ProviderRunnable> {
        self.inner.runnable()
    }
}

fn web_cm() -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("web".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

struct Running {
    registry: Engagements,
    token: CancellationToken,
    task: JoinHandle<Result<(), CoreError>>,
}

impl Running {
    fn start(multi: MultiProvider) -> Running {
        Self::start_on(multi, Engagements::new())
    }

    /// Starts `multi` on `registry`.
    fn start_on(multi: MultiProvider, registry: Engagements) -> Running {
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (multi, token, table) = (multi.clone(), token.clone(), registry.clone());
            async move { multi.start(token, table).await }
        });
        Running {
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

    async fn stop(self) {
        self.token.cancel();
        self.task.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn providers_added_before_and_after_start() {
    init_tracing();
    let fleet = Fleet::start(3).await.unwrap();
    let [c0, c1, c2] = [0, 1, 2].map(|i| fleet.clusters()[i].client());
    let early = Counting::new();
    early.inner.add(Cluster::new("one", c0)).await.unwrap();
    early.inner.add(Cluster::new("two", c1)).await.unwrap();
    let multi = MultiProvider::new();
    multi.add("early", early.clone()).await.unwrap();
    multi.index_field(&by_app()).await.unwrap();
    assert_eq!(early.indexes.load(Ordering::SeqCst), 1);

    let run = Running::start(multi.clone());
    eventually("early clusters", DEADLINE, || {
        run.names() == ["early#one", "early#two"]
    })
    .await;

    // Added after start, with the index registered before it existed: it gets it exactly once.
    let late = Counting::new();
    late.inner
        .add(Cluster::new("three", c2.clone()))
        .await
        .unwrap();
    multi.add("late", late.clone()).await.unwrap();
    eventually("late cluster", DEADLINE, || {
        run.names().contains(&"late#three".to_string())
    })
    .await;
    assert_eq!(late.indexes.load(Ordering::SeqCst), 1);
    // Registering the same index again reaches nobody twice.
    multi.index_field(&by_app()).await.unwrap();
    assert_eq!(early.indexes.load(Ordering::SeqCst), 1);
    assert_eq!(late.indexes.load(Ordering::SeqCst), 1);

    // get delegates, and the index answers per cluster.
    let three = multi.get(&"late#three".into()).await.unwrap();
    assert_eq!(three.name(), "three");
    assert!(three.same_instance(&run.registry.get(&"late#three".into()).unwrap()));
    let cm = web_cm();
    Api::<ConfigMap>::namespaced(c2, "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    eventually("indexed in late#three", DEADLINE, || {
        three
            .cache()
            .list_by_index::<ConfigMap>("app", "web")
            .unwrap()
            .len()
            == 1
    })
    .await;
    let one = multi.get(&"early#one".into()).await.unwrap();
    assert!(
        one.cache()
            .list_by_index::<ConfigMap>("app", "web")
            .unwrap()
            .is_empty()
    );

    // A cluster added to a running child shows up prefixed.
    early
        .inner
        .add(Cluster::new("four", fleet.clusters()[0].client()))
        .await
        .unwrap();
    eventually("early#four", DEADLINE, || {
        run.names().contains(&"early#four".to_string())
    })
    .await;
    assert_eq!(multi.provider_names(), ["early", "late"]);
    run.stop().await;
}

#[tokio::test]
async fn unknown_names_are_not_found() {
    init_tracing();
    let env = TestCluster::start("a").await.unwrap();
    let child = Arc::new(ClustersProvider::new());
    child.add(Cluster::new("x", env.client())).await.unwrap();
    let multi = MultiProvider::new();
    multi.add("p", child).await.unwrap();
    let run = Running::start(multi.clone());
    eventually("p#x", DEADLINE, || run.names() == ["p#x"]).await;
    for name in ["q#x", "p#y", "x", "", "#x", "p"] {
        let err = multi.get(&name.into()).await.unwrap_err();
        assert!(
            matches!(err, CoreError::ClusterNotFound(ref n) if n == name),
            "{name}: {err}"
        );
    }
    run.stop().await;
}

#[tokio::test]
async fn removal_disengages_the_providers_clusters() {
    init_tracing();
    let fleet = Fleet::start(2).await.unwrap();
    let a = Arc::new(ClustersProvider::new());
    a.add(Cluster::new("c", fleet.clusters()[0].client()))
        .await
        .unwrap();
    let b = Arc::new(ClustersProvider::new());
    b.add(Cluster::new("c", fleet.clusters()[1].client()))
        .await
        .unwrap();
    let multi = MultiProvider::new();
    multi.add("a", a.clone()).await.unwrap();
    multi.add("b", b).await.unwrap();
    let run = Running::start(multi.clone());
    eventually("both", DEADLINE, || run.names() == ["a#c", "b#c"]).await;
    let a_c = multi.get(&"a#c".into()).await.unwrap();
    let informer = a_c.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();

    assert!(multi.remove("a"));
    assert!(!multi.remove("a"));
    eventually("a#c gone", DEADLINE, || run.names() == ["b#c"]).await;
    assert!(matches!(
        multi.get(&"a#c".into()).await.unwrap_err(),
        CoreError::ClusterNotFound(_)
    ));
    eventually("a#c cache stopped", DEADLINE, || informer.is_stopped()).await;
    eventually("child forgot it", DEADLINE, || {
        a.engagements().names().is_empty()
    })
    .await;
    assert!(multi.get(&"b#c".into()).await.is_ok());

    // The name can be reused by a new provider.
    let again = Arc::new(ClustersProvider::new());
    again
        .add(Cluster::new("d", fleet.clusters()[0].client()))
        .await
        .unwrap();
    multi.add("a", again).await.unwrap();
    eventually("a#d", DEADLINE, || run.names() == ["a#d", "b#c"]).await;
    run.stop().await;
}

#[tokio::test]
async fn separators_inside_cluster_names_and_custom_separators() {
    init_tracing();
    let env = TestCluster::start("a").await.unwrap();
    let child = Arc::new(ClustersProvider::new());
    child.add(Cluster::new("x#y", env.client())).await.unwrap();
    child.add(Cluster::new("x/y", env.client())).await.unwrap();
    let multi = MultiProvider::new();
    assert!(matches!(
        multi.add("bad#name", child.clone()).await,
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        multi.add("", child.clone()).await,
        Err(Error::InvalidName { .. })
    ));
    multi.add("p", child.clone()).await.unwrap();
    assert!(matches!(
        multi.add("p", child.clone()).await,
        Err(Error::AlreadyExists(_))
    ));
    let run = Running::start(multi.clone());
    eventually("names", DEADLINE, || run.names() == ["p#x#y", "p#x/y"]).await;
    assert_eq!(multi.get(&"p#x#y".into()).await.unwrap().name(), "x#y");
    run.stop().await;

    // With "/" as separator the same child's clusters split differently.
    let slash = MultiProvider::with_options(Options {
        separator: "/".into(),
    });
    let child = Arc::new(ClustersProvider::new());
    child.add(Cluster::new("x/y", env.client())).await.unwrap();
    slash.add("p#1", child).await.unwrap();
    let run = Running::start(slash.clone());
    eventually("slash names", DEADLINE, || run.names() == ["p#1/x/y"]).await;
    assert_eq!(slash.get(&"p#1/x/y".into()).await.unwrap().name(), "x/y");
    assert!(slash.get(&"p#1#x/y".into()).await.is_err());
    run.stop().await;
}

/// Adds a namespace provider over `host` as the child `ns`.
async fn add_namespaces(multi: &MultiProvider, host: &TestCluster) {
    let host = Cluster::new(mcr_core::ClusterName::host(), host.client());
    let provider = Arc::new(NamespaceProvider::new(host, Default::default()));
    multi.add("ns", provider).await.unwrap();
}

#[tokio::test]
async fn a_host_watching_provider_lives_inside_multi() {
    init_tracing();
    let host_env = TestCluster::start("host").await.unwrap();
    let member = TestCluster::start("member").await.unwrap();
    let namespaces = Api::<Namespace>::all(host_env.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("team-a".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();

    let multi = MultiProvider::new();
    multi.index_field(&by_app()).await.unwrap();
    let run = Running::start(multi.clone());
    // Both children are added after start.
    let fixed = Arc::new(ClustersProvider::new());
    fixed
        .add(Cluster::new("member", member.client()))
        .await
        .unwrap();
    multi.add("fixed", fixed).await.unwrap();
    add_namespaces(&multi, &host_env).await;
    eventually("fleet", DEADLINE, || {
        run.names() == ["fixed#member", "ns#default", "ns#team-a"]
    })
    .await;

    // The namespace cluster works through multi, index included.
    let team_a = multi.get(&"ns#team-a".into()).await.unwrap();
    let cm = web_cm();
    Api::<ConfigMap>::default_namespaced(team_a.client())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(host_env.client(), "team-a")
        .get("web")
        .await
        .unwrap();
    eventually("indexed", DEADLINE, || {
        team_a
            .cache()
            .list_by_index::<ConfigMap>("app", "web")
            .unwrap()
            .len()
            == 1
    })
    .await;

    // A namespace deleted on the host leaves the composed fleet.
    namespaces
        .delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("ns#team-a gone", DEADLINE, || {
        run.names() == ["fixed#member", "ns#default"]
    })
    .await;
    // Removing the namespace provider removes the rest of its clusters.
    assert!(multi.remove("ns"));
    eventually("ns gone", DEADLINE, || run.names() == ["fixed#member"]).await;
    run.stop().await;
}

#[tokio::test]
async fn a_childs_index_error_keeps_the_child_and_its_source() {
    init_tracing();
    let child = Arc::new(ClustersProvider::new());
    // The child already has an index "app" on another type: registering ours there fails.
    let on_secrets = FieldIndex::new::<k8s_openapi::api::core::v1::Secret>("app", |_| Vec::new());
    child.index_field(&on_secrets).await.unwrap();
    let multi = MultiProvider::new();
    multi.add("strict", child).await.unwrap();
    let err = multi.index_field(&by_app()).await.unwrap_err();
    assert!(
        matches!(&err, CoreError::Provider { provider, .. } if provider == "strict"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "provider \"strict\"");
    let source = std::error::Error::source(&err).expect("the child's error is the source");
    assert!(
        matches!(source.downcast_ref::<CoreError>(), Some(CoreError::Index { index, .. }) if index == "app"),
        "{source:?}"
    );
    let chain = mcr_core::ErrorChain(&err).to_string();
    assert!(
        chain.starts_with("provider \"strict\": index \"app\""),
        "{chain}"
    );
}

/// A child whose discovery loop fails (or panics, with `panics`) on its first run, then works.
struct Flaky {
    inner: ClustersProvider,
    runs: AtomicUsize,
    panics: bool,
}

impl Provider for Flaky {
    fn get<'a>(&'a self, name: &'a ClusterName) -> BoxFuture<'a, Result<Cluster, CoreError>> {
        self.inner.get(name)
    }
    fn index_field<'a>(&'a self, index: &'a FieldIndex) -> BoxFuture<'a, Result<(), CoreError>> {
        self.inner.index_field(index)
    }
    fn runnable(&self) -> Option<&dyn ProviderRunnable> {
        Some(self)
    }
}

impl ProviderRunnable for Flaky {
    fn start<'a>(
        &'a self,
        token: CancellationToken,
        table: mcr_core::Engagements,
    ) -> BoxFuture<'a, Result<(), CoreError>> {
        Box::pin(async move {
            if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
                if self.panics {
                    panic!("first run panics");
                }
                return Err(CoreError::Engage {
                    cluster: ClusterName::new("c1"),
                    source: "first run fails".into(),
                });
            }
            match self.inner.runnable() {
                Some(r) => r.start(token, table).await,
                None => Ok(()),
            }
        })
    }
}

#[tokio::test]
async fn a_failing_child_is_restarted_with_backoff_and_reported() {
    init_tracing();
    let member = TestCluster::start("c1").await.unwrap();
    let flaky = Arc::new(Flaky {
        inner: ClustersProvider::new(),
        runs: AtomicUsize::new(0),
        panics: false,
    });
    flaky
        .inner
        .add(Cluster::new("c1", member.client()))
        .await
        .unwrap();
    let multi = MultiProvider::new();
    multi.set_restart_backoff(Duration::from_millis(50), Duration::from_millis(500));
    multi.add("flaky", flaky.clone()).await.unwrap();
    let run = Running::start(multi.clone());
    eventually("the restarted child's cluster engaged", DEADLINE, || {
        run.names() == ["flaky#c1"]
    })
    .await;
    let status = multi.child_status("flaky").unwrap();
    assert_eq!(status.restarts, 1, "{status:?}");
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("first run fails")),
        "{status:?}"
    );
    run.stop().await;
}

/// A child whose discovery loop panics is restarted like one that failed: the panic is caught,
/// reported in its status, and the child runs again after the backoff.
#[tokio::test]
async fn a_panicking_child_is_restarted_with_backoff_and_reported() {
    init_tracing();
    let member = TestCluster::start("c1").await.unwrap();
    let flaky = Arc::new(Flaky {
        inner: ClustersProvider::new(),
        runs: AtomicUsize::new(0),
        panics: true,
    });
    flaky
        .inner
        .add(Cluster::new("c1", member.client()))
        .await
        .unwrap();
    let multi = MultiProvider::new();
    multi.set_restart_backoff(Duration::from_millis(50), Duration::from_millis(500));
    multi.add("flaky", flaky.clone()).await.unwrap();
    let run = Running::start(multi.clone());
    eventually(
        "the panicked child restarted and its cluster engaged",
        DEADLINE,
        || run.names() == ["flaky#c1"],
    )
    .await;
    let status = multi.child_status("flaky").unwrap();
    assert_eq!(status.restarts, 1, "{status:?}");
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("panicked") && e.contains("first run panics")),
        "{status:?}"
    );
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 2);
    run.stop().await;
}

/// A child built on `mcr_core::members` whose one member cannot be reached.
struct Reporting {
    members: mcr_core::members::Members,
}

/// A source whose every connection is refused.
struct Refused;

impl mcr_core::Connect for Refused {
    fn key(&self) -> String {
        String::new()
    }
    fn connect(&self) -> BoxFuture<'_, Result<mcr_core::Source, mcr_core::BoxError>> {
        Box::pin(async { Err("refused".into()) })
    }
}

impl mcr_core::members::MemberProvider for Reporting {
    fn members(&self) -> &mcr_core::members::Members {
        &self.members
    }
    async fn run(&self, token: CancellationToken) -> Result<(), CoreError> {
        let _guard = self.members.start_run("reporting")?;
        let source = mcr_core::Source::Connect(Arc::new(Refused));
        self.members.want(&token, &"x".into(), source)?;
        token.cancelled().await;
        Ok(())
    }
}

#[tokio::test]
async fn a_childs_failing_members_are_reported_under_their_prefixed_names() {
    init_tracing();
    let child = Arc::new(Reporting {
        members: mcr_core::members::Members::new(Default::default()),
    });
    let multi = MultiProvider::new();
    multi.add("p", child).await.unwrap();
    let run = Running::start(multi.clone());
    eventually("the child's failure reported", DEADLINE, || {
        multi
            .member_statuses()
            .iter()
            .any(|s| matches!(s.state, mcr_core::MemberState::Failed { .. }))
    })
    .await;
    let statuses = multi.member_statuses();
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    assert_eq!(statuses[0].name, "p#x");
    assert_eq!(&*statuses[0].provider, "reporting");
    assert!(
        matches!(&statuses[0].state, mcr_core::MemberState::Failed { reason, .. } if reason.ends_with("refused")),
        "{statuses:?}"
    );
    run.stop().await;
}

/// On a sharded manager, ownership is decided on the full (prefixed) name: a child's member
/// another replica owns is reported owned elsewhere under its prefixed name and is not brought
/// up here.
#[tokio::test]
async fn a_childs_members_are_owned_by_their_prefixed_names() {
    init_tracing();
    let host_env = TestCluster::start("host").await.unwrap();
    mcr_test_support::create_namespace(&host_env.client(), "team-a", &[]).await;
    let multi = MultiProvider::new();
    add_namespaces(&multi, &host_env).await;
    let registry = Engagements::new();
    let owned = mcr_test_support::Owned::new(&["ns#team-a"]);
    assert!(registry.coordinate(owned).is_ok());
    let run = Running::start_on(multi.clone(), registry);
    let states = || -> Vec<(String, &'static str)> {
        multi
            .member_statuses()
            .into_iter()
            .map(|s| (s.name.to_string(), s.state.as_str()))
            .collect()
    };
    eventually(
        "ns#team-a engaged, ns#default owned elsewhere",
        DEADLINE,
        || {
            states()
                == [
                    ("ns#default".to_string(), "elsewhere"),
                    ("ns#team-a".to_string(), "engaged"),
                ]
        },
    )
    .await;
    assert_eq!(run.names(), ["ns#team-a"]);
    let err = multi.get(&"ns#default".into()).await.unwrap_err();
    assert!(
        matches!(&err, CoreError::NotOwned { cluster, .. } if cluster == "ns#default"),
        "{err}"
    );
    run.stop().await;
}
