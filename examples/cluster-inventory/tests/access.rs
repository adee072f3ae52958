//! The access-provider strategy with a real credential plugin against HTTPS members with token
//! auth: cluster info reaches the plugin, profile args/env follow the file's policies without
//! piling up, only material changes re-run the plugin, and no profile can choose a command.

#[path = "../../../crates/mcr-provider-cluster-inventory/tests/common/mod.rs"]
mod common;
mod plugin_common;

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use mcr_envtest::TestCluster;
use mcr_envtest::wait::eventually;
use mcr_provider_cluster_inventory::{Options, ProfileState, Strategy};
use serde_json::json;

use common::*;
use plugin_common::*;

fn access_opts(file: mcr_provider_cluster_inventory::AccessProviders) -> Options {
    fast(Options::new(Strategy::AccessProviders(Arc::new(file))))
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(v.clone()).unwrap()
}

#[tokio::test]
async fn plugin_credentials_policies_and_re_engagement() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let m2 = TestCluster::start_https("m2").await.unwrap();
    let plugin = Plugin::new(&[&m1, &m2]);
    let run = Running::start(&hub, access_opts(plugin.file("Append", "Replace")));
    let envs = json!({"MCR_PLUGIN_FROM_FILE": "profile", "MCR_PLUGIN_EXTRA": "x"});
    let at = |member: &TestCluster, name: &str, tag: &str, extra: serde_json::Value| {
        let mut s = access(
            member,
            json!({"clusterName": name}),
            Some(json!(["--tag", tag])),
            Some(envs.clone()),
        );
        if let (Some(s), serde_json::Value::Object(extra)) = (s.as_object_mut(), extra) {
            s.extend(extra);
        }
        status(true, s)
    };
    put_profile(&hub, "default", "p1", at(&m1, "m1", "a", json!({}))).await;
    eventually("engaged through the plugin", DEADLINE, || {
        run.names() == ["default/p1"]
    })
    .await;
    let id = run.id("default/p1").unwrap();

    let calls = plugin.invocations();
    let last = calls.last().unwrap();
    let mut expected = plugin.base_args();
    expected.extend(["--tag".to_string(), "a".to_string()]);
    assert_eq!(strings(&last["args"]), expected);
    assert_eq!(
        last["env"]["MCR_PLUGIN_FROM_FILE"], "profile",
        "Replace: the profile wins"
    );
    assert_eq!(last["env"]["MCR_PLUGIN_EXTRA"], "x");
    assert_eq!(
        last["config"],
        json!({"clusterName": "m1"}),
        "exec extension as cluster config"
    );
    assert_eq!(last["server"], json!(m1.url()));
    assert_eq!(last["argv0"], json!(PLUGIN));

    // Not material (properties, condition message): same instance, the plugin is not re-run.
    let runs = plugin.invocations().len();
    for i in 0..3 {
        let extra = json!({"properties": [{"name": "seen", "value": i.to_string()}]});
        let rv = put_profile(&hub, "default", "p1", at(&m1, "m1", "a", extra)).await;
        eventually("update seen", DEADLINE, || {
            run.settled_at("default", "p1", &rv)
        })
        .await;
        assert_eq!(
            run.id("default/p1"),
            Some(id),
            "update {i} kept the instance"
        );
    }
    assert_eq!(
        plugin.invocations().len(),
        runs,
        "no plugin run for an immaterial change"
    );

    // New profile args: re-engaged, and the args are the file's plus the new ones only.
    put_profile(&hub, "default", "p1", at(&m1, "m1", "b", json!({}))).await;
    eventually("re-engaged for new args", DEADLINE, || {
        run.id("default/p1").is_some_and(|new| new != id)
    })
    .await;
    let id = run.id("default/p1").unwrap();
    let mut expected = plugin.base_args();
    expected.extend(["--tag".to_string(), "b".to_string()]);
    assert_eq!(
        strings(&plugin.invocations().last().unwrap()["args"]),
        expected,
        "no pile-up"
    );

    // A new server: re-engaged against m2, with m2's token.
    put_profile(&hub, "default", "p1", at(&m2, "m2", "b", json!({}))).await;
    eventually("re-engaged on m2", DEADLINE, || {
        run.id("default/p1").is_some_and(|new| new != id)
    })
    .await;
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "on-m2"}})).unwrap();
    Api::<ConfigMap>::namespaced(m2.client(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let engaged = run.registry.get(&"default/p1".into()).unwrap().client();
    Api::<ConfigMap>::namespaced(engaged, "default")
        .get("on-m2")
        .await
        .unwrap();
    run.stop().await;
}

#[tokio::test]
async fn ignore_and_append_if_not_exists_policies() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let plugin = Plugin::new(&[&m1]);
    let run = Running::start(
        &hub,
        access_opts(plugin.file("Ignore", "AppendIfNotExists")),
    );
    let envs = json!({"MCR_PLUGIN_FROM_FILE": "profile", "MCR_PLUGIN_EXTRA": "x"});
    let s = access(
        &m1,
        json!({"clusterName": "m1"}),
        Some(json!(["--tag", "a"])),
        Some(envs),
    );
    put_profile(&hub, "default", "p1", status(true, s)).await;
    eventually("engaged", DEADLINE, || run.names() == ["default/p1"]).await;
    let last = plugin.invocations().pop().unwrap();
    assert_eq!(
        strings(&last["args"]),
        plugin.base_args(),
        "Ignore: no profile args"
    );
    assert_eq!(
        last["env"]["MCR_PLUGIN_FROM_FILE"], "file",
        "the file's value wins"
    );
    assert_eq!(
        last["env"]["MCR_PLUGIN_EXTRA"], "x",
        "missing variables are added"
    );
    run.stop().await;
}

#[tokio::test]
async fn a_profile_cannot_choose_the_command() {
    init_tracing();
    let hub = hub().await;
    let m1 = TestCluster::start_https("m1").await.unwrap();
    let plugin = Plugin::new(&[&m1]);
    let marker = plugin.dir.path().join("pwned");
    let marker_s = marker.display().to_string();
    let run = Running::start(&hub, access_opts(plugin.file("Append", "Replace")));
    let hostile_exec = json!({"command": "/usr/bin/touch", "args": [marker_s]});

    // An access provider the file does not know, with an exec stanza of its own.
    let foreign = json!({"credentialProviders": [{"name": "attacker", "cluster": {
        "server": m1.url(),
        "exec": hostile_exec,
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": hostile_exec}],
    }}]});
    put_profile(&hub, "default", "foreign", status(true, foreign)).await;

    // A known provider whose entry tries to smuggle a command through every field it has.
    let mut sneaky = access(
        &m1,
        json!({"clusterName": "m1", "command": "/usr/bin/touch", "args": [marker_s]}),
        Some(json!(["/usr/bin/touch", marker_s])),
        Some(json!({"MCR_PLUGIN_X": "y"})),
    );
    sneaky["accessProviders"][0]["cluster"]["exec"] = hostile_exec.clone();
    put_profile(&hub, "default", "sneaky", status(true, sneaky)).await;

    // Variables that change which code runs are refused even under the Replace policy.
    let preload = access(
        &m1,
        json!({"clusterName": "m1"}),
        None,
        Some(json!({"LD_PRELOAD": marker_s})),
    );
    put_profile(&hub, "default", "preload", status(true, preload)).await;

    eventually(
        "sneaky engaged through the configured plugin, the others refused",
        DEADLINE,
        || {
            run.names() == ["default/sneaky"]
                && matches!(run.state("default", "preload"), Some(ProfileState::Invalid { reason })
                    if reason.contains("may not set LD_PRELOAD"))
                && matches!(run.state("default", "foreign"), Some(ProfileState::Invalid { reason })
                if reason.contains("no configured access provider") && reason.contains("attacker"))
        },
    )
    .await;
    let calls = plugin.invocations();
    assert!(!calls.is_empty());
    for call in &calls {
        assert_eq!(
            call["argv0"],
            json!(PLUGIN),
            "only the file's command ever runs"
        );
    }
    assert!(!marker.exists(), "no command chosen by a profile ran");
    run.stop().await;
}
