//! The shared cache against emulated API servers: watch sharing, sync, faults, relists,
//! subscriptions and field indexes.

mod support;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::ConfigMap;
use mcr_core::{CacheEvent, Cluster, Error, FieldIndex, InformerOptions};
use mcr_envtest::{ErrorRule, Partition, TestCluster};
use support::*;
use tokio_util::sync::CancellationToken;

type Seen = Arc<Mutex<Vec<(bool, String)>>>;

/// Drains a subscription into a shared list of `(applied, name)`.
fn record(mut events: BoxStream<'static, CacheEvent<ConfigMap>>) -> Seen {
    let seen: Seen = Arc::default();
    let out = seen.clone();
    tokio::spawn(async move {
        while let Some(ev) = events.next().await {
            let applied = matches!(ev, CacheEvent::Listed(_) | CacheEvent::Applied(_));
            let name = ev.object().metadata.name.clone().unwrap_or_default();
            out.lock().unwrap().push((applied, name));
        }
    });
    seen
}

fn saw(seen: &Seen, applied: bool, name: &str) -> bool {
    seen.lock()
        .unwrap()
        .iter()
        .any(|(a, n)| *a == applied && n == name)
}

#[tokio::test]
async fn many_users_share_one_watch_per_cluster() {
    if !mcr_envtest::require_emulator("counts watch and list requests") {
        return;
    }
    let tc = TestCluster::start("shared").await.unwrap();
    let other = TestCluster::start("other").await.unwrap();
    let token = CancellationToken::new();
    let cluster = Cluster::new("shared", tc.client());
    let cluster2 = Cluster::new("other", other.client());

    // Five "controllers" ask for the same informer, before and after start.
    let mut subscriptions = Vec::new();
    for _ in 0..3 {
        subscriptions.push(record(cluster.cache().informer::<ConfigMap>().subscribe()));
    }
    cluster.cache().start(token.child_token());
    cluster2.cache().start(token.child_token());
    for _ in 0..2 {
        subscriptions.push(record(cluster.cache().informer::<ConfigMap>().subscribe()));
    }
    let informer2 = cluster2.cache().informer::<ConfigMap>();
    cluster.cache().wait_for_sync(DEADLINE).await.unwrap();
    informer2.wait_for_sync(DEADLINE).await.unwrap();
    assert!(cluster.cache().is_synced());
    assert_eq!(cluster.cache().informer_count(), 1);

    create(&tc.client(), "hello", "web").await;
    create(&other.client(), "hello-other", "web").await;
    for seen in &subscriptions {
        eventually("every subscriber sees the object", DEADLINE, || {
            saw(seen, true, "hello")
        })
        .await;
    }
    let informer = cluster.cache().informer::<ConfigMap>();
    eventually("store has it", DEADLINE, || {
        informer.get(Some("default"), "hello").is_some()
    })
    .await;
    eventually("other store has it", DEADLINE, || {
        informer2.list().len() == 1
    })
    .await;

    assert_eq!(
        tc.request_count("watch", "configmaps"),
        1,
        "exactly one watch"
    );
    assert_eq!(
        tc.request_count("list", "configmaps"),
        1,
        "exactly one list"
    );
    assert_eq!(other.request_count("watch", "configmaps"), 1);
    assert!(
        informer.get(Some("default"), "hello-other").is_none(),
        "caches are per cluster"
    );

    // A label selector is a different watch.
    let selected = InformerOptions {
        label_selector: Some("app=web".into()),
        ..Default::default()
    };
    let web = cluster.cache().informer_with::<ConfigMap>((), selected);
    web.wait_for_sync(DEADLINE).await.unwrap();
    assert_eq!(names(&web.list()), ["hello"]);
    assert_eq!(cluster.cache().informer_count(), 2);
    eventually("second watch", DEADLINE, || {
        tc.request_count("watch", "configmaps") == 2
    })
    .await;
    token.cancel();
}

#[tokio::test]
async fn late_subscribers_get_existing_objects_and_deletes_arrive() {
    let tc = TestCluster::start("subs").await.unwrap();
    create(&tc.client(), "a", "x").await;
    create(&tc.client(), "b", "x").await;
    let token = CancellationToken::new();
    let cluster = Cluster::new("subs", tc.client());
    cluster.cache().start(token.clone());
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert_eq!(names(&informer.list()), ["a", "b"]);

    let late = record(informer.subscribe());
    eventually("late subscriber gets a", DEADLINE, || saw(&late, true, "a")).await;
    eventually("late subscriber gets b", DEADLINE, || saw(&late, true, "b")).await;

    delete(&tc.client(), "a").await;
    eventually("delete arrives", DEADLINE, || saw(&late, false, "a")).await;
    relabel(&tc.client(), "b", "y").await;
    eventually("update arrives", DEADLINE, || {
        informer
            .get(Some("default"), "b")
            .is_some_and(|b| app_of(&b) == ["y"])
    })
    .await;
    assert!(informer.get(Some("default"), "a").is_none());

    // The subscription ends when the cluster's token fires.
    let mut events = informer.subscribe();
    token.cancel();
    let ended = tokio::time::timeout(DEADLINE, async { while events.next().await.is_some() {} });
    ended.await.expect("subscription ended after cancel");
}

#[tokio::test]
async fn sync_times_out_while_hung_and_recovers_after_heal() {
    let tc = TestCluster::start("hung").await.unwrap();
    create(&tc.client(), "a", "x").await;
    tc.partition(Partition::Hang);
    let token = CancellationToken::new();
    let cluster = Cluster::new("hung", tc.client());
    cluster.cache().start(token.clone());
    let informer = cluster.cache().informer::<ConfigMap>();
    let err = cluster
        .cache()
        .wait_for_sync(Duration::from_millis(300))
        .await
        .unwrap_err();
    match &err {
        Error::SyncTimeout {
            cluster, resource, ..
        } => {
            assert_eq!(cluster, "hung");
            assert_eq!(resource, "configmaps");
        }
        other => panic!("expected a sync timeout, got {other}"),
    }
    assert!(!cluster.cache().is_synced());
    tc.heal();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    assert_eq!(names(&informer.list()), ["a"]);
    token.cancel();
}

#[tokio::test]
async fn watch_recovers_after_a_restart() {
    let tc = TestCluster::start("bouncy").await.unwrap();
    let token = CancellationToken::new();
    let cluster = Cluster::new("bouncy", tc.client());
    cluster.cache().start(token.clone());
    let informer = cluster.cache().informer::<ConfigMap>();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    let seen = record(informer.subscribe());

    tc.stop().await;
    eventually("watch error seen", DEADLINE, || {
        informer.watch_restarts() > 0
    })
    .await;
    tc.restart().await.unwrap();
    create(&tc.client(), "after", "x").await;
    eventually("event after restart", DEADLINE, || {
        saw(&seen, true, "after")
    })
    .await;
    assert!(informer.get(Some("default"), "after").is_some());
    token.cancel();
}

#[tokio::test]
async fn indexes_stay_correct_across_a_relist() {
    if !mcr_envtest::require_emulator("injects errors to force a relist") {
        return;
    }
    let tc = TestCluster::start("relist").await.unwrap();
    create(&tc.client(), "a", "x").await;
    create(&tc.client(), "b", "x").await;
    let token = CancellationToken::new();
    let cluster = Cluster::new("relist", tc.client());
    let by_app = FieldIndex::new::<ConfigMap>("app", app_of);
    cluster.cache().index_field(&by_app).unwrap();
    cluster.cache().start(token.clone());
    cluster.cache().wait_for_sync(DEADLINE).await.unwrap();
    let informer = cluster.cache().informer::<ConfigMap>();
    let seen = record(informer.subscribe());
    let by = |v: &str| {
        names(
            &cluster
                .cache()
                .list_by_index::<ConfigMap>("app", v)
                .unwrap(),
        )
    };
    assert_eq!(by("x"), ["a", "b"]);

    // Live updates.
    create(&tc.client(), "c", "y").await;
    eventually("c indexed", DEADLINE, || by("y") == ["c"]).await;

    // Cut the watch and keep it from coming back while we change things behind its back.
    tc.inject_error(ErrorRule {
        verb: Some("watch".into()),
        resource: Some("configmaps".into()),
        code: 500,
        times: None,
    });
    let restarts = informer.watch_restarts();
    tc.stop().await;
    tc.restart().await.unwrap();
    eventually("watch failing", DEADLINE, || {
        informer.watch_restarts() > restarts
    })
    .await;
    delete(&tc.client(), "a").await;
    relabel(&tc.client(), "b", "y").await;
    create(&tc.client(), "d", "x").await;
    // Forget history: resuming the watch gets 410 and forces a relist.
    tc.compact();
    let lists = tc.request_count("list", "configmaps");
    tc.clear_faults();
    eventually("relisted", DEADLINE, || {
        tc.request_count("list", "configmaps") > lists
    })
    .await;
    eventually("index follows the relist", DEADLINE, || {
        by("x") == ["d"] && by("y") == ["b", "c"]
    })
    .await;
    assert_eq!(names(&informer.list()), ["b", "c", "d"]);
    // The subscriber got the diff: a vanished while we were away.
    eventually("vanished object reported deleted", DEADLINE, || {
        saw(&seen, false, "a")
    })
    .await;
    eventually("new object reported", DEADLINE, || saw(&seen, true, "d")).await;
    token.cancel();
}

#[tokio::test]
async fn dynamic_and_metadata_informers() {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    let tc = TestCluster::start("dyn").await.unwrap();
    create(&tc.client(), "a", "x").await;
    let token = CancellationToken::new();
    let cluster = Cluster::new("dyn", tc.client());
    cluster.cache().start(token.clone());
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let index = FieldIndex::new_dynamic(ar.clone(), "app", |o: &DynamicObject| {
        o.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned())
            .into_iter()
            .collect()
    });
    cluster.cache().index_field(&index).unwrap();
    let meta = cluster
        .cache()
        .metadata_informer::<ConfigMap>((), InformerOptions::default());
    cluster.cache().wait_for_sync(DEADLINE).await.unwrap();
    let hits = cluster
        .cache()
        .list_by_index_with::<DynamicObject>(&ar, "app", "x")
        .unwrap();
    assert_eq!(names(&hits), ["a"]);
    assert_eq!(names(&meta.list()), ["a"]);
    assert_eq!(cluster.cache().informer_count(), 2);
    token.cancel();
}

#[tokio::test]
async fn wait_for_sync_until_the_store_is_listed() {
    let tc = TestCluster::start("slow").await.unwrap();
    create(&tc.client(), "a", "x").await;
    tc.partition(Partition::Hang);
    let token = CancellationToken::new();
    let cluster = Cluster::new("slow", tc.client());
    cluster.cache().start(token.clone());
    // While the list hangs, waiting for the sync times out, naming the cluster.
    let informer = cluster.cache().informer::<ConfigMap>();
    let err = informer
        .wait_for_sync(Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::SyncTimeout { cluster, resource, .. } if cluster == "slow" && resource == "configmaps"),
        "{err}"
    );
    tc.heal();
    informer.wait_for_sync(DEADLINE).await.unwrap();
    // Listed: the object is there on the first read, no polling.
    assert_eq!(names(&informer.list()), ["a"]);
    assert!(informer.get(Some("default"), "missing").is_none());
    token.cancel();
}

/// Which events say "changed" and which only "exists": the first list and a new subscriber's
/// replay are `Listed`, watch events `Applied`; a relist re-sends an object at its old resource
/// version as `Listed` and one changed (or created) behind the watch's back as `Applied`.
#[tokio::test]
async fn initial_lists_and_unchanged_relists_are_listed_changes_are_applied() {
    if !mcr_envtest::require_emulator("injects errors to force a relist") {
        return;
    }
    type Kinds = Arc<Mutex<Vec<String>>>;
    fn kinds(mut events: BoxStream<'static, CacheEvent<ConfigMap>>) -> Kinds {
        let seen: Kinds = Arc::default();
        let out = seen.clone();
        tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                let kind = match ev {
                    CacheEvent::Listed(_) => "listed",
                    CacheEvent::Applied(_) => "applied",
                    CacheEvent::Deleted(_) => "deleted",
                };
                let name = ev.object().metadata.name.clone().unwrap_or_default();
                out.lock().unwrap().push(format!("{kind} {name}"));
            }
        });
        seen
    }
    let has = |k: &Kinds, e: &str| k.lock().unwrap().iter().any(|x| x == e);

    let tc = TestCluster::start("kinds").await.unwrap();
    create(&tc.client(), "old", "x").await;
    create(&tc.client(), "edited", "x").await;
    let token = CancellationToken::new();
    let cluster = Cluster::new("kinds", tc.client());
    let informer = cluster.cache().informer::<ConfigMap>();
    // Subscribed before the first list, as a controller does when a cluster is engaged.
    let early = kinds(informer.subscribe());
    cluster.cache().start(token.clone());
    informer.wait_for_sync(DEADLINE).await.unwrap();
    eventually("first list", DEADLINE, || {
        has(&early, "listed old") && has(&early, "listed edited")
    })
    .await;
    create(&tc.client(), "live", "x").await;
    eventually("watch event", DEADLINE, || has(&early, "applied live")).await;
    let late = kinds(informer.subscribe());
    eventually("replay", DEADLINE, || {
        has(&late, "listed old") && has(&late, "listed live")
    })
    .await;

    // A relist: `edited` changes and `fresh` appears while the watch is away.
    tc.inject_error(ErrorRule {
        verb: Some("watch".into()),
        resource: Some("configmaps".into()),
        code: 500,
        times: None,
    });
    let restarts = informer.watch_restarts();
    tc.stop().await;
    tc.restart().await.unwrap();
    eventually("watch failing", DEADLINE, || {
        informer.watch_restarts() > restarts
    })
    .await;
    relabel(&tc.client(), "edited", "y").await;
    create(&tc.client(), "fresh", "x").await;
    tc.compact();
    tc.clear_faults();
    eventually("relist diff", DEADLINE, || {
        has(&early, "applied edited") && has(&early, "applied fresh")
    })
    .await;
    let seen = early.lock().unwrap().clone();
    assert!(!seen.contains(&"applied old".to_owned()), "{seen:?}");
    assert_eq!(
        seen.iter().filter(|e| *e == "listed old").count(),
        2,
        "{seen:?}"
    );
    token.cancel();
}

/// API servers record field owners in every object (`metadata.managedFields`); informers drop
/// them unless asked to keep them: in B4 they made the cache 2.4 times larger.
#[tokio::test]
async fn cached_objects_drop_managed_fields_unless_kept() {
    let tc = TestCluster::start("owners").await.unwrap();
    create(&tc.client(), "a", "x").await;
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(tc.client(), "default");
    let written = api.get("a").await.unwrap();
    assert!(
        written
            .metadata
            .managed_fields
            .is_some_and(|m| !m.is_empty()),
        "the server records the writer as a field owner"
    );
    let token = CancellationToken::new();
    let cluster = Cluster::new("owners", tc.client());
    cluster.cache().start(token.clone());
    let dropped = cluster.cache().informer::<ConfigMap>();
    let kept = cluster.cache().informer_with::<ConfigMap>(
        (),
        InformerOptions {
            keep_managed_fields: true,
            ..Default::default()
        },
    );
    dropped.wait_for_sync(DEADLINE).await.unwrap();
    kept.wait_for_sync(DEADLINE).await.unwrap();
    assert_eq!(cluster.cache().informer_count(), 2, "two watches");
    let owners = |i: &mcr_core::Informer<ConfigMap>| {
        i.get(Some("default"), "a")
            .map(|o| o.metadata.managed_fields.clone())
    };
    assert_eq!(owners(&dropped), Some(None), "listed: dropped");
    assert!(owners(&kept).is_some_and(|m| m.is_some()), "listed: kept");

    let mut events = dropped.subscribe();
    relabel(&tc.client(), "a", "y").await;
    eventually("the update arrives", DEADLINE, || {
        dropped
            .get(Some("default"), "a")
            .is_some_and(|a| app_of(&a) == ["y"])
    })
    .await;
    assert_eq!(owners(&dropped), Some(None), "watched: dropped");
    eventually("the kept informer sees the update", DEADLINE, || {
        kept.get(Some("default"), "a")
            .is_some_and(|a| app_of(&a) == ["y"] && a.metadata.managed_fields.is_some())
    })
    .await;
    while let Some(event) = events.next().await {
        assert_eq!(
            event.object().metadata.managed_fields,
            None,
            "subscribers too"
        );
        if app_of(event.object()) == ["y"] {
            break;
        }
    }
    token.cancel();
}

/// A list the API server refuses (403, 401, or 404 of the resource) ends the wait for sync at
/// once with `Error::Refused`, naming the verb, the resource and the namespace, however long
/// the sync timeout; the informer keeps retrying, and lists once allowed.
#[tokio::test]
async fn a_refused_list_is_said_at_once_not_after_the_sync_timeout() {
    if !mcr_envtest::require_emulator(
        "injects 403s (role_only_credentials_refuse_... is its real twin)",
    ) {
        return;
    }
    let tc = TestCluster::start("refusing").await.unwrap();
    create(&tc.client(), "a", "x").await;
    tc.inject_error(ErrorRule::new(403).verb("list").resource("configmaps"));
    let token = CancellationToken::new();
    let cluster = Cluster::new("refusing", tc.client());
    cluster.cache().start(token.clone());
    let teams = InformerOptions {
        namespaces: vec!["default".into()],
        ..InformerOptions::default()
    };
    let informer = cluster
        .cache()
        .informer_with::<ConfigMap>((), teams.clone());
    // An hour: only a refusal can end this wait within the test's deadline.
    let hour = Duration::from_secs(3600);
    let err = tokio::time::timeout(DEADLINE, cluster.cache().wait_for_sync(hour))
        .await
        .expect("said before the sync timeout")
        .unwrap_err();
    match &err {
        Error::Refused {
            cluster,
            verb,
            resource,
            namespace,
            status,
        } => {
            assert_eq!(cluster, "refusing");
            assert_eq!(*verb, "list");
            assert_eq!(resource, "configmaps");
            assert_eq!(namespace.as_deref(), Some("default"));
            assert_eq!(status.code, 403);
            assert_eq!(status.reason, "Forbidden");
        }
        other => panic!("expected a refusal, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.starts_with(
            "cluster \"refusing\": list configmaps in namespace default refused: 403 Forbidden"
        ),
        "{text}"
    );
    // The informer's own wait says the same.
    let err = tokio::time::timeout(DEADLINE, informer.wait_for_sync(hour))
        .await
        .expect("said before the sync timeout")
        .unwrap_err();
    assert!(
        matches!(&err, Error::Refused { status, .. } if status.code == 403),
        "{err}"
    );

    // Allowed again: its next attempt lists (until then the refusal stands).
    tc.clear_faults();
    eventually("listed once allowed", DEADLINE, || {
        cluster.cache().is_synced()
    })
    .await;
    cluster.cache().wait_for_sync(DEADLINE).await.unwrap();
    assert!(informer.get(Some("default"), "a").is_some());
    token.cancel();
}

/// A resource the API server does not serve (a CRD not installed) is refused with 404, said at
/// once; an error that retrying may cure (500) is named by the sync timeout.
#[tokio::test]
async fn a_resource_not_served_is_refused_and_a_server_error_is_named_by_the_timeout() {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    let tc = TestCluster::start("partial").await.unwrap();
    let token = CancellationToken::new();
    let cluster = Cluster::new("partial", tc.client());
    cluster.cache().start(token.clone());
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let widgets = cluster
        .cache()
        .informer_with::<DynamicObject>(ar, InformerOptions::default());
    let err = tokio::time::timeout(DEADLINE, widgets.wait_for_sync(Duration::from_secs(3600)))
        .await
        .expect("said before the sync timeout")
        .unwrap_err();
    assert!(
        matches!(&err, Error::Refused { status, verb: "list", resource, namespace: None, .. }
            if resource == "widgets.example.com" && status.code == 404),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("list widgets.example.com in all namespaces refused: 404"),
        "{err}"
    );
    token.cancel();

    if !mcr_envtest::require_emulator("injects 500s") {
        return;
    }
    let token = CancellationToken::new();
    tc.inject_error(ErrorRule::new(500).verb("list").resource("configmaps"));
    let cluster = Cluster::new("partial", tc.client());
    cluster.cache().start(token.clone());
    let informer = cluster.cache().informer::<ConfigMap>();
    // The timeout is what ends this wait; the error it names is seen first.
    eventually("a list failed", DEADLINE, || informer.watch_restarts() > 0).await;
    let err = informer
        .wait_for_sync(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::SyncTimeout { last_error: Some(e), .. } if e.contains("500")),
        "{err}"
    );
    token.cancel();
}

/// On kube-apiserver with Role-only credentials (a Role in `team-a`, no ClusterRole): the
/// cluster-wide list is refused at once, naming the verb, the resource and the scope with the
/// API server's own words; the namespaced watch the Role allows syncs.
#[tokio::test]
async fn role_only_credentials_refuse_the_cluster_wide_list_at_once() {
    if !mcr_test_support::require_real("RBAC needs kube-apiserver") {
        return;
    }
    let tc = TestCluster::start("narrow").await.unwrap();
    let kubeconfig =
        mcr_test_support::role_only_kubeconfig(&tc, "team-a", &["configmaps"], &["list", "watch"])
            .await;
    let client = mcr_test_support::client_of(&kubeconfig).await;
    let token = CancellationToken::new();
    let cluster = Cluster::new("narrow", client.clone());
    cluster.cache().start(token.clone());
    let everywhere = cluster.cache().informer::<ConfigMap>();
    let err = tokio::time::timeout(
        DEADLINE,
        everywhere.wait_for_sync(Duration::from_secs(3600)),
    )
    .await
    .expect("said before the sync timeout")
    .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            &err,
            Error::Refused {
                status,
                verb: "list",
                namespace: None,
                ..
            } if status.code == 403
        ),
        "{text}"
    );
    assert!(
        text.contains("list configmaps in all namespaces refused: 403 Forbidden")
            && text.contains("cannot list resource \"configmaps\""),
        "{text}"
    );
    token.cancel();

    let token = CancellationToken::new();
    let cluster = Cluster::new("narrow", client);
    cluster.cache().start(token.clone());
    let team_a = InformerOptions {
        namespaces: vec!["team-a".into()],
        ..InformerOptions::default()
    };
    let informer = cluster.cache().informer_with::<ConfigMap>((), team_a);
    informer.wait_for_sync(DEADLINE).await.unwrap();
    token.cancel();
}
