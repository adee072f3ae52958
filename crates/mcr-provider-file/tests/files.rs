//! The file provider against emulated HTTPS clusters whose kubeconfigs are written to disk.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use mcr_core::kubeconfig::{ExecPolicy, Policy};
use mcr_core::{ClusterName, Provider, ProviderRunnable};
use mcr_envtest::wait::eventually;
use mcr_envtest::{Fleet, TestCluster};
use mcr_provider_file::{Error, FileProvider, MemberOptions, Options, PassReport};
use mcr_test_support::{DEADLINE, animal_configmap, animal_index, init_tracing};

fn opts(files: Vec<PathBuf>, dirs: Vec<PathBuf>) -> Options {
    Options {
        files,
        dirs,
        debounce: Duration::from_millis(20),
        members: MemberOptions {
            sync_timeout: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_millis(500),
            ..Options::default().members
        },
        ..Options::default()
    }
}

type Running = mcr_test_support::Running<FileProvider>;

/// What these tests add to [`Running`].
trait Settle {
    /// A pass of its own, after any pass in flight: a deterministic "the provider has seen the disk".
    async fn settle(&self) -> PassReport;
}

impl Settle for Running {
    async fn settle(&self) -> PassReport {
        self.provider.run_once(&self.token).await
    }
}

fn name(path: &Path, context: &str) -> String {
    format!("{}+{}", path.display(), context)
}

/// Writes atomically, the way editors and tools do: a temporary file, then a rename.
fn write_atomic(path: &Path, contents: &str) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn yaml(kc: &Kubeconfig) -> String {
    // JSON is YAML.
    serde_json::to_string(kc).unwrap()
}

/// `tc`'s kubeconfig with its cluster, user and context renamed to `as_name`.
fn renamed(tc: &TestCluster, as_name: &str) -> Kubeconfig {
    let mut kc = tc.kubeconfig().unwrap();
    kc.clusters[0].name = as_name.into();
    kc.auth_infos[0].name = as_name.into();
    kc.contexts[0].name = as_name.into();
    let ctx = kc.contexts[0].context.as_mut().unwrap();
    ctx.cluster = as_name.into();
    ctx.user = Some(as_name.into());
    kc.current_context = Some(as_name.into());
    kc
}

fn merged(a: Kubeconfig, b: Kubeconfig) -> Kubeconfig {
    a.merge(b).unwrap()
}

fn count(cluster: &mcr_core::Cluster, index: &str, value: &str) -> Option<usize> {
    cluster
        .cache()
        .list_by_index::<ConfigMap>(index, value)
        .ok()
        .map(|v| v.len())
}

#[tokio::test]
async fn discovers_files_and_directories_and_follows_changes() {
    init_tracing();
    let fleet = Fleet::builder()
        .clusters(3)
        .name_prefix("member")
        .https(true)
        .start()
        .await
        .unwrap();
    let (m1, m2, m3) = (
        &fleet.clusters()[0],
        &fleet.clusters()[1],
        &fleet.clusters()[2],
    );
    Api::<ConfigMap>::namespaced(m2.client(), "default")
        .create(
            &PostParams::default(),
            &animal_configmap("existing", "elephant"),
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let file = other.path().join("fleet.yaml");
    let provider = FileProvider::new(opts(vec![file.clone()], vec![dir.path().to_path_buf()]));
    provider.index_field(&animal_index("before")).await.unwrap();
    let run = Running::spawn(provider);
    let report = run.settle().await;
    assert!(
        run.names().is_empty() && report.added.is_empty(),
        "nothing on disk yet"
    );

    // A kubeconfig appears in the directory; a file not matching the globs is ignored.
    let in_dir = dir.path().join("m1.kubeconfig");
    m1.write_kubeconfig(&dir.path().join("notes.txt")).unwrap();
    m1.write_kubeconfig(&in_dir).unwrap();
    eventually("directory file engaged", DEADLINE, || {
        run.names() == [name(&in_dir, "member-1")]
    })
    .await;

    // The explicit file appears, with two contexts.
    write_atomic(
        &file,
        &yaml(&merged(m2.kubeconfig().unwrap(), m3.kubeconfig().unwrap())),
    );
    let (c2, c3) = (name(&file, "member-2"), name(&file, "member-3"));
    eventually("both contexts engaged", DEADLINE, || run.names().len() == 3).await;
    assert_eq!(run.names(), {
        let mut v = vec![name(&in_dir, "member-1"), c2.clone(), c3.clone()];
        v.sort();
        v
    });

    // Objects through the engaged cluster's cache, and the indexes (before and after).
    let cluster2 = run.registry.get(&ClusterName::new(c2.as_str())).unwrap();
    let informer = cluster2.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert!(informer.get(Some("default"), "existing").is_some());
    Api::<ConfigMap>::namespaced(m2.client(), "default")
        .create(&PostParams::default(), &animal_configmap("new", "zebra"))
        .await
        .unwrap();
    eventually("new object cached", DEADLINE, || {
        informer.get(Some("default"), "new").is_some()
    })
    .await;
    let cluster3 = run.registry.get(&ClusterName::new(c3.as_str())).unwrap();
    eventually("index before", DEADLINE, || {
        count(&cluster2, "before", "zebra") == Some(1)
            && count(&cluster3, "before", "zebra") == Some(0)
    })
    .await;
    run.provider
        .index_field(&animal_index("after"))
        .await
        .unwrap();
    eventually("index after", DEADLINE, || {
        count(&cluster2, "after", "elephant") == Some(1)
            && count(&cluster3, "after", "elephant") == Some(0)
    })
    .await;

    // Repoint one context: only that one is replaced.
    let (id2, id3) = (run.id(&c2).unwrap(), run.id(&c3).unwrap());
    write_atomic(
        &file,
        &yaml(&merged(m2.kubeconfig().unwrap(), renamed(m1, "member-3"))),
    );
    eventually("repointed context replaced", DEADLINE, || {
        run.id(&c3).is_some_and(|id| id != id3)
    })
    .await;
    let report = run.settle().await;
    assert!(report.replaced.is_empty(), "settled: {report:?}");
    assert_eq!(
        run.id(&c2),
        Some(id2),
        "the unchanged context keeps its instance"
    );

    // A temporarily invalid file keeps its clusters; fixing it changes nothing.
    let id3 = run.id(&c3).unwrap();
    write_atomic(&file, "clusters: [this is: not valid");
    let report = run.settle().await;
    assert!(
        matches!(report.invalid_files.as_slice(), [Error::File { .. }]),
        "{report:?}"
    );
    assert_eq!((run.id(&c2), run.id(&c3)), (Some(id2), Some(id3)));
    write_atomic(
        &file,
        &yaml(&merged(m2.kubeconfig().unwrap(), renamed(m1, "member-3"))),
    );
    let report = run.settle().await;
    assert!(
        report.invalid_files.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    assert_eq!((run.id(&c2), run.id(&c3)), (Some(id2), Some(id3)));

    // Deletions shrink the fleet.
    std::fs::remove_file(&in_dir).unwrap();
    eventually("directory file removed", DEADLINE, || {
        run.names() == [c2.clone(), c3.clone()]
    })
    .await;
    std::fs::remove_file(&file).unwrap();
    eventually("explicit file removed", DEADLINE, || run.names().is_empty()).await;
    run.stop().await;
}

#[tokio::test]
async fn a_missing_directory_is_picked_up_when_created() {
    init_tracing();
    let fleet = Fleet::builder()
        .clusters(1)
        .https(true)
        .start()
        .await
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("not/yet");
    let run = Running::spawn(FileProvider::new(opts(vec![], vec![dir.clone()])));
    assert!(run.settle().await.added.is_empty());
    std::fs::create_dir_all(&dir).unwrap();
    // The odd name is on purpose: spaces, unicode, glob metacharacters.
    let path = dir.join("we ird [ü].kubeconfig");
    fleet.clusters()[0].write_kubeconfig(&path).unwrap();
    eventually("engaged once the directory exists", DEADLINE, || {
        run.names() == [name(&path, "cluster-1")]
    })
    .await;
    // A second start while running is refused with a real error, not an engage failure.
    let err = run
        .provider
        .start(run.token.child_token(), run.registry.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, mcr_core::Error::AlreadyRunning { provider } if provider == "file"),
        "{err:?}"
    );
    run.stop().await;
}

fn exec_kubeconfig(tc: &TestCluster, context: &str) -> Kubeconfig {
    let mut kc = renamed(tc, context);
    let credential = format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{}"}}}}"#,
        tc.token()
    );
    let user = kc.auth_infos[0].auth_info.as_mut().unwrap();
    user.token = None;
    user.exec = Some(kube::config::ExecConfig {
        api_version: Some("client.authentication.k8s.io/v1".into()),
        command: Some("/bin/sh".into()),
        args: Some(vec!["-c".into(), format!("printf '%s' '{credential}'")]),
        interactive_mode: Some(kube::config::ExecInteractiveMode::Never),
        ..Default::default()
    });
    kc
}

#[tokio::test]
async fn exec_policy_is_enforced_per_context() {
    init_tracing();
    let fleet = Fleet::builder()
        .clusters(2)
        .https(true)
        .start()
        .await
        .unwrap();
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig.yaml");
    write_atomic(
        &path,
        &yaml(&merged(
            exec_kubeconfig(m1, "with-exec"),
            m2.kubeconfig().unwrap(),
        )),
    );

    // Deny: the exec context is refused, the other one in the same file is engaged.
    let mut options = opts(vec![], vec![dir.path().to_path_buf()]);
    options.members.policy = Policy::trusted().exec(ExecPolicy::Deny);
    let denied = FileProvider::new(options);
    let run = Running::spawn(denied);
    let report = run.settle().await;
    assert!(
        matches!(report.failed.as_slice(),
            [Error::Failed { reason, retry_in: None, .. }] if reason.contains("refused by policy")),
        "{report:?}"
    );
    assert_eq!(run.names(), [name(&path, "cluster-2")]);
    run.stop().await;

    // The default (AllowAll): the exec plugin runs and the context is engaged.
    let run = Running::spawn(FileProvider::new(opts(
        vec![],
        vec![dir.path().to_path_buf()],
    )));
    eventually("both engaged", DEADLINE, || run.names().len() == 2).await;
    let exec = run
        .registry
        .get(&ClusterName::new(name(&path, "with-exec")))
        .unwrap();
    let listed = Api::<ConfigMap>::namespaced(exec.client(), "default")
        .list(&Default::default())
        .await;
    assert!(listed.is_ok(), "exec-provided token works: {listed:?}");
    run.stop().await;
}

/// `tc`'s kubeconfig renamed to `context`, authenticating with a plugin that never exits.
#[cfg(unix)]
fn hanging_exec_kubeconfig(tc: &TestCluster, context: &str, marker: &Path) -> Kubeconfig {
    let mut kc = renamed(tc, context);
    let user = kc.auth_infos[0].auth_info.as_mut().unwrap();
    user.token = None;
    user.exec = Some(kube::config::ExecConfig {
        api_version: Some("client.authentication.k8s.io/v1".into()),
        command: Some("/bin/sh".into()),
        args: Some(vec![
            "-c".into(),
            format!("touch '{}'; exec sleep 100000", marker.display()),
        ]),
        interactive_mode: Some(kube::config::ExecInteractiveMode::Never),
        ..Default::default()
    });
    kc
}

#[cfg(unix)]
#[tokio::test]
async fn a_hanging_exec_plugin_holds_up_neither_other_files_nor_shutdown() {
    init_tracing();
    let fleet = Fleet::builder()
        .clusters(2)
        .https(true)
        .start()
        .await
        .unwrap();
    let (m1, m2) = (&fleet.clusters()[0], &fleet.clusters()[1]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfigs = dir.path().join("kubeconfigs");
    std::fs::create_dir(&kubeconfigs).unwrap();
    let marker = dir.path().join("plugin-started");
    let hung = kubeconfigs.join("hung.kubeconfig");
    write_atomic(&hung, &yaml(&hanging_exec_kubeconfig(m1, "hung", &marker)));
    // The default exec timeout (30 s) and sync timeout: a hung member must not hold up the
    // others with the settings users run, not only with short ones.
    let run = Running::spawn(FileProvider::new(opts(vec![], vec![kubeconfigs.clone()])));
    eventually("the plugin runs", DEADLINE, || marker.exists()).await;

    // A good file written while the plugin hangs is engaged, well before the hung plugin's
    // 30 s timeout (the bound is that timeout's half: on a pass that waited for every member,
    // the good file came only after it).
    let good = kubeconfigs.join("good.kubeconfig");
    write_atomic(&good, &yaml(&renamed(m2, "good")));
    eventually("the good file engaged", Duration::from_secs(15), || {
        run.names().contains(&name(&good, "good"))
    })
    .await;
    assert!(!run.names().contains(&name(&hung, "hung")));

    run.stop().await;

    // Shutdown does not wait for a hanging plugin, even with the default 30 s exec timeout.
    std::fs::remove_file(&good).unwrap();
    std::fs::remove_file(&marker).unwrap();
    let run = Running::spawn(FileProvider::new(opts(vec![], vec![kubeconfigs])));
    eventually("the plugin runs", DEADLINE, || marker.exists()).await;
    tokio::time::timeout(Duration::from_secs(10), run.stop())
        .await
        .expect("the provider stopped while a plugin was hanging");
}

/// Members served on one port of the emulator, told apart by the path prefix of their server
/// URL (`https://127.0.0.1:<port>/clusters/<name>`): mcr's member clients keep the prefix, so
/// each member's cache holds its own cluster's objects.
#[tokio::test]
async fn members_on_a_shared_port_are_told_apart_by_their_server_path() {
    if !mcr_envtest::require_emulator("a shared port is the emulator's") {
        return;
    }
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::builder()
        .clusters(3)
        .shared_port(true)
        .kubeconfig_dir(dir.path())
        .start()
        .await
        .unwrap();
    for (i, cluster) in fleet.clusters().iter().enumerate() {
        Api::<ConfigMap>::namespaced(cluster.client(), "default")
            .create(
                &PostParams::default(),
                &animal_configmap(&format!("cm-{i}"), "owl"),
            )
            .await
            .unwrap();
    }
    let provider = FileProvider::new(opts(vec![], vec![dir.path().to_path_buf()]));
    provider.index_field(&animal_index("animal")).await.unwrap();
    let run = Running::spawn(provider);
    eventually("every member engaged", DEADLINE, || run.names().len() == 3).await;
    for (i, cluster) in fleet.clusters().iter().enumerate() {
        let path = dir.path().join(format!("{}.kubeconfig", cluster.name()));
        let member = run
            .registry
            .get(&ClusterName::new(name(&path, cluster.name())))
            .unwrap();
        let own = format!("cm-{i}");
        eventually(
            "the member's cache holds its own object only",
            DEADLINE,
            || {
                let names: Vec<String> = member
                    .cache()
                    .list_by_index::<ConfigMap>("animal", "owl")
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|cm| cm.metadata.name.clone())
                    .collect();
                names == [own.clone()]
            },
        )
        .await;
    }
    run.stop().await;
}
