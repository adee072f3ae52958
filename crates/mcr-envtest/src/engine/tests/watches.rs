//! Watches: replay, live events, compaction, selectors, bookmarks, streaming lists, shutdown.

use std::time::Duration;

use futures::StreamExt;

use super::*;

const DEADLINE: Duration = Duration::from_secs(30);

async fn next(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("an event before the deadline")
        .expect("the stream is still open")
}

async fn ended(stream: &mut WatchStream) -> bool {
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("end before the deadline")
        .is_none()
}

fn summary(event: &WatchEvent) -> (WatchEventType, String) {
    let name = event.object()["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    (event.kind(), name)
}

fn from_rv(rv: u64) -> WatchParams {
    WatchParams {
        list: ListParams {
            resource_version: Some(rv.to_string()),
            ..ListParams::default()
        },
        ..WatchParams::default()
    }
}

#[tokio::test]
async fn replays_history_then_goes_live() {
    let e = Engine::new();
    let c = cms(&e);
    let start = e.resource_version();
    let created = e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    let mut changed = created.clone();
    changed["data"]["k"] = json!("w");
    e.update(&c, NS, "a", changed, None, &opts()).unwrap();
    let mut stream = e.watch(&c, NS, &from_rv(start)).unwrap();
    let added = next(&mut stream).await;
    assert_eq!(summary(&added), (WatchEventType::Added, "a".into()));
    assert_eq!(rv(&added.object()), rv(&created));
    let modified = next(&mut stream).await;
    assert_eq!(modified.kind(), WatchEventType::Modified);
    assert_eq!(modified.object()["data"]["k"], "w");

    e.delete(&c, NS, "a", &DeleteOptions::default()).unwrap();
    let deleted = next(&mut stream).await;
    assert_eq!(summary(&deleted), (WatchEventType::Deleted, "a".into()));
    assert_eq!(
        rv(&deleted.object()),
        e.resource_version(),
        "DELETED carries a new resourceVersion"
    );
    assert_eq!(
        deleted.object()["data"]["k"],
        "w",
        "DELETED carries the last state"
    );

    let line = deleted.to_line();
    let parsed: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(parsed["type"], "DELETED");
    assert!(line.ends_with(b"\n"));
}

#[tokio::test]
async fn unset_resource_version_starts_with_synthetic_adds() {
    let e = Engine::new();
    let c = cms(&e);
    e.create(&c, NS, cm("b", json!({})), &opts()).unwrap();
    e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    for rv in [None, Some("0".to_string())] {
        let params = WatchParams {
            list: ListParams {
                resource_version: rv,
                ..ListParams::default()
            },
            ..WatchParams::default()
        };
        let mut stream = e.watch(&c, NS, &params).unwrap();
        assert_eq!(
            summary(&next(&mut stream).await),
            (WatchEventType::Added, "a".into())
        );
        assert_eq!(
            summary(&next(&mut stream).await),
            (WatchEventType::Added, "b".into())
        );
        e.delete(&c, NS, "a", &DeleteOptions::default()).unwrap();
        assert_eq!(
            summary(&next(&mut stream).await),
            (WatchEventType::Deleted, "a".into())
        );
        e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
        assert_eq!(
            summary(&next(&mut stream).await),
            (WatchEventType::Added, "a".into())
        );
    }
}

#[tokio::test]
async fn compacted_resource_version_gives_410_then_ends() {
    let e = Engine::new();
    let c = cms(&e);
    let old = e.resource_version();
    e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    e.compact();
    let mut stream = e.watch(&c, NS, &from_rv(old)).unwrap();
    let error = next(&mut stream).await;
    assert_eq!(error.kind(), WatchEventType::Error);
    assert_eq!(error.object()["kind"], "Status");
    assert_eq!(error.object()["code"], 410);
    assert_eq!(error.object()["reason"], "Expired");
    assert!(ended(&mut stream).await);
    // The current resourceVersion is still fine after compaction.
    let mut live = e.watch(&c, NS, &from_rv(e.resource_version())).unwrap();
    e.create(&c, NS, cm("b", json!({})), &opts()).unwrap();
    assert_eq!(
        summary(&next(&mut live).await),
        (WatchEventType::Added, "b".into())
    );
}

#[tokio::test]
async fn selector_transitions_and_namespaces() {
    let e = Engine::new();
    let c = cms(&e);
    create_ns(&e, "other");
    let params = WatchParams {
        list: ListParams {
            label_selector: Some("app=web".into()),
            resource_version: Some(e.resource_version().to_string()),
            ..ListParams::default()
        },
        ..WatchParams::default()
    };
    let mut stream = e.watch(&c, NS, &params).unwrap();
    e.create(&c, Some("other"), cm("x", json!({"app": "web"})), &opts())
        .unwrap();
    let db = e
        .create(&c, NS, cm("a", json!({"app": "db"})), &opts())
        .unwrap();
    let mut web = db.clone();
    web["metadata"]["labels"]["app"] = json!("web");
    let web = e.update(&c, NS, "a", web, None, &opts()).unwrap();
    let into = next(&mut stream).await;
    assert_eq!(
        summary(&into),
        (WatchEventType::Added, "a".into()),
        "moved into the selector"
    );
    assert_eq!(rv(&into.object()), rv(&web));
    let mut away = web.clone();
    away["metadata"]["labels"]["app"] = json!("db");
    e.update(&c, NS, "a", away, None, &opts()).unwrap();
    let out = next(&mut stream).await;
    assert_eq!(
        summary(&out),
        (WatchEventType::Deleted, "a".into()),
        "moved out of the selector"
    );
    assert_eq!(out.object()["metadata"]["labels"]["app"], "db");
    e.create(&c, NS, cm("b", json!({"app": "web"})), &opts())
        .unwrap();
    assert_eq!(
        summary(&next(&mut stream).await),
        (WatchEventType::Added, "b".into()),
        "other namespace and non-matching objects were skipped"
    );
}

/// The next event on a paused clock, with the virtual time it took.
async fn next_after(stream: &mut WatchStream) -> (Option<WatchEvent>, Duration) {
    let start = tokio::time::Instant::now();
    let event = tokio::time::timeout(Duration::from_secs(600), stream.next())
        .await
        .expect("an event or the end within 10 virtual minutes");
    (event, start.elapsed())
}

/// As kube-apiserver's watch cache sends them (`defaultBookmarkFrequency` and
/// `nextBookmarkTime` in k8s.io/apiserver's cacher): a BOOKMARK about every minute, and one 2 s
/// before the watch's timeout; none at the timeout itself, and none for a timeout under 2 s.
/// A fleet of idle watches costs its clients and server one event per watch per minute, not
/// per second.
#[tokio::test(start_paused = true)]
async fn bookmarks_every_minute_and_two_seconds_before_the_timeout() {
    let e = Engine::new();
    let c = cms(&e);
    let params = WatchParams {
        allow_bookmarks: true,
        ..from_rv(e.resource_version())
    };
    let mut stream = e.watch(&c, NS, &params).unwrap();
    for _ in 0..2 {
        let (bookmark, after) = next_after(&mut stream).await;
        let bookmark = bookmark.expect("a bookmark");
        assert_eq!(bookmark.kind(), WatchEventType::Bookmark);
        assert_eq!(bookmark.object()["kind"], "ConfigMap");
        assert_eq!(bookmark.object()["apiVersion"], "v1");
        assert_eq!(rv(&bookmark.object()), e.resource_version());
        assert_eq!(after.as_secs(), 60, "{after:?} after the last one");
    }

    let timeout = WatchParams {
        timeout: Some(Duration::from_secs(10)),
        ..params.clone()
    };
    let mut stream = e.watch(&c, NS, &timeout).unwrap();
    let (bookmark, after) = next_after(&mut stream).await;
    assert_eq!(bookmark.map(|b| b.kind()), Some(WatchEventType::Bookmark));
    assert_eq!(after.as_secs(), 8, "2 s before the timeout: {after:?}");
    let (end, after) = next_after(&mut stream).await;
    assert!(
        end.is_none(),
        "the stream ends at its timeout, without another bookmark"
    );
    assert_eq!(after.as_secs(), 2);

    let short = WatchParams {
        timeout: Some(Duration::from_millis(1500)),
        ..params
    };
    let mut stream = e.watch(&c, NS, &short).unwrap();
    let (end, _) = next_after(&mut stream).await;
    assert!(end.is_none(), "no bookmark for a timeout under 2 s");
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_annotated_bookmark() {
    let e = Engine::new();
    let c = cms(&e);
    e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    let mut params = WatchParams {
        list: ListParams {
            resource_version: Some("0".into()),
            ..ListParams::default()
        },
        allow_bookmarks: true,
        send_initial_events: true,
        ..WatchParams::default()
    };
    assert_eq!(e.watch(&c, NS, &params).err().map(|e| e.code), Some(422));
    params.list.resource_version_match = Some("NotOlderThan".into());
    let mut stream = e.watch(&c, NS, &params).unwrap();
    assert_eq!(
        summary(&next(&mut stream).await),
        (WatchEventType::Added, "a".into())
    );
    let end = next(&mut stream).await;
    assert_eq!(end.kind(), WatchEventType::Bookmark);
    assert_eq!(
        end.object()["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(rv(&end.object()), e.resource_version());
    e.create(&c, NS, cm("b", json!({})), &opts()).unwrap();
    loop {
        let event = next(&mut stream).await;
        if event.kind() != WatchEventType::Bookmark {
            assert_eq!(summary(&event), (WatchEventType::Added, "b".into()));
            break;
        }
    }
}

#[tokio::test]
async fn shutdown_ends_every_watch_and_engine_stays_usable() {
    let e = Engine::new();
    let c = cms(&e);
    let mut a = e.watch(&c, NS, &from_rv(e.resource_version())).unwrap();
    let mut b = e.watch(&c, None, &from_rv(e.resource_version())).unwrap();
    e.shutdown();
    assert!(ended(&mut a).await);
    assert!(ended(&mut b).await);
    let mut again = e.watch(&c, NS, &from_rv(e.resource_version())).unwrap();
    e.create(&c, NS, cm("a", json!({})), &opts()).unwrap();
    assert_eq!(
        summary(&next(&mut again).await),
        (WatchEventType::Added, "a".into())
    );
}

#[tokio::test]
async fn custom_resource_watch_ends_when_crd_goes() {
    let e = Engine::new();
    let w = install_widgets(&e);
    let beta = rt(&e, "example.com", "v1beta1", "widgets");
    let mut stream = e.watch(&beta, NS, &from_rv(e.resource_version())).unwrap();
    e.create(&w, NS, json!({"metadata": {"name": "w"}}), &opts())
        .unwrap();
    let added = next(&mut stream).await;
    assert_eq!(
        added.object()["apiVersion"],
        "example.com/v1beta1",
        "served at the watched version"
    );
    let crds = rt(
        &e,
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
    );
    e.delete(
        &crds,
        None,
        "widgets.example.com",
        &DeleteOptions::default(),
    )
    .unwrap();
    assert!(ended(&mut stream).await);
}

#[tokio::test]
async fn many_writes_reach_many_watchers_in_order() {
    let e = Engine::new();
    let c = cms(&e);
    let start = e.resource_version();
    let mut watchers: Vec<WatchStream> = (0..20)
        .map(|_| e.watch(&c, NS, &from_rv(start)).unwrap())
        .collect();
    let writer = {
        let e = e.clone();
        tokio::task::spawn_blocking(move || {
            for i in 0..500 {
                e.create(&cms(&e), NS, cm(&format!("cm-{i}"), json!({})), &opts())
                    .unwrap();
            }
        })
    };
    for w in &mut watchers {
        let mut last = start;
        for _ in 0..500 {
            let event = next(w).await;
            let now = rv(&event.object());
            assert!(now > last, "resourceVersions increase");
            last = now;
        }
    }
    writer.await.unwrap();
}
