//! `Context::store`: a reconcile reads its controller's own watches of its cluster (`get`,
//! `state`, `find`), with their selectors and namespaces, and reading costs no request and no
//! second watch (the emulator's request counters: one list and one watch per watched type and
//! namespace, with the controller's selectors).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{DEADLINE, Env, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::{
    Api, ResourceExt,
    api::{ObjectMeta, PostParams},
    runtime::{controller::Action, reflector::ObjectRef},
};
use mcr_manager::{Context, Controller, WatchOptions};
use mcr_test_support::{create_namespace, request_counts};

/// What one reconcile read from its stores.
#[derive(Clone, Debug, Default, PartialEq)]
struct Read {
    configmaps: Vec<String>,
    secrets: Vec<String>,
    found: Option<String>,
    got_in_team_a: bool,
    got_outside: bool,
    pods: bool,
}

type Reads = Mutex<BTreeMap<String, Read>>;

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Context<Reads>) -> Result<Action, kube::Error> {
    let configmaps = ctx.store::<ConfigMap>().expect("the reconciled type");
    let secrets = ctx.store::<Secret>().expect("a watched type");
    let read = Read {
        configmaps: sorted(configmaps.state().iter().map(|o| o.name_any()).collect()),
        secrets: sorted(secrets.state().iter().map(|o| o.name_any()).collect()),
        found: secrets
            .find(|s| s.labels().get("pick").is_some_and(|v| v == "me"))
            .map(|s| s.name_any()),
        got_in_team_a: secrets
            .get(&ObjectRef::new("s1").within("team-a"))
            .is_some(),
        got_outside: secrets
            .get(&ObjectRef::new("s3").within("default"))
            .is_some(),
        pods: ctx.store::<Pod>().is_some(),
    };
    assert!(configmaps.is_ready() && secrets.is_ready());
    assert_eq!(secrets.namespaces(), ["team-a"]);
    let key = format!("{}/{}", ctx.cluster_name(), cm.name_any());
    ctx.data().lock().unwrap().insert(key, read);
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &kube::Error, _: Context<Reads>) -> Action {
    Action::await_change()
}

async fn create<K>(client: &kube::Client, ns: &str, obj: K)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

#[tokio::test]
async fn a_reconcile_reads_its_controllers_watches_without_a_request() {
    let env = Env::start(2).await;
    for name in env.fleet.names() {
        let client = env.member(&name).client();
        create_namespace(&client, "team-a", &[]).await;
        let summary = ConfigMap {
            metadata: meta("summary", &[("role", "summary")]),
            ..ConfigMap::default()
        };
        create(&client, "team-a", summary.clone()).await;
        create(&client, "default", summary).await; // another namespace: not watched
        let other = ConfigMap {
            metadata: meta("other", &[]),
            ..ConfigMap::default()
        };
        create(&client, "team-a", other).await; // not selected
        for (ns, s, labels) in [
            ("team-a", "s1", &[][..]),
            ("team-a", "s2", &[("pick", "me")][..]),
            ("default", "s3", &[("pick", "me")][..]),
        ] {
            let secret = Secret {
                metadata: meta(s, labels),
                ..Secret::default()
            };
            create(&client, ns, secret).await;
        }
        if request_counts(env.member(&name)).is_some() {
            env.member(&name).reset_request_counts();
        }
    }
    let reads: Arc<Reads> = Arc::default();
    Controller::new(&env.mgr)
        .for_with::<ConfigMap>(
            WatchOptions::new()
                .namespace("team-a")
                .labels("role=summary"),
        )
        .watches_with::<Secret, _>(WatchOptions::new().namespace("team-a"), |_, _| {
            Some(ObjectRef::<ConfigMap>::new("summary").within("team-a"))
        })
        .register(reconcile, error_policy, reads.clone())
        .unwrap();
    let run = env.run_engaged().await;
    let members = env.fleet.names();
    eventually("every member's summary reconciled", DEADLINE, || {
        reads.lock().unwrap().len() == members.len()
    })
    .await;
    let expected = Read {
        configmaps: vec!["summary".into()],
        secrets: vec!["s1".into(), "s2".into()],
        found: Some("s2".into()),
        got_in_team_a: true,
        got_outside: false,
        pods: false,
    };
    for name in &members {
        let read = reads.lock().unwrap()[&format!("{name}/summary")].clone();
        assert_eq!(read, expected, "{name}");
        // The controller's watches, and nothing else: one list and one watch per type, in
        // team-a, with the controller's selector.
        if let Some(counts) = request_counts(env.member(name)) {
            for resource in ["configmaps", "secrets"] {
                assert_eq!(counts.get("list", resource), 1, "{name}: {counts:?}");
                assert_eq!(counts.get("watch", resource), 1, "{name}: {counts:?}");
            }
            assert_eq!(counts.get("get", "secrets"), 0, "{name}: {counts:?}");
        }
    }
    env.token.cancel();
    run.await.unwrap().unwrap();
}
