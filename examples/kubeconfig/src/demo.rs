//! The scripted demo: a host and two members, emulated; one Secret per member in the host.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use mcr_envtest::{Fleet, TestCluster};
use mcr_provider_kubeconfig::{DEFAULT_DATA_KEY, DEFAULT_LABEL};
use tokio_util::sync::CancellationToken;

use crate::{ANNOTATION, LABEL};

async fn until(what: &str, mut check: impl AsyncFnMut() -> Result<bool>) -> Result<()> {
    let start = tokio::time::Instant::now();
    while !check().await? {
        if start.elapsed() > Duration::from_secs(30) {
            bail!("{what} did not happen within 30s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn kubeconfig_secret(member: &TestCluster) -> Result<Secret> {
    let kubeconfig = member.kubeconfig_yaml().context("members serve HTTPS")?;
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(member.name().to_owned()),
            labels: Some(BTreeMap::from([(
                DEFAULT_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            DEFAULT_DATA_KEY.to_owned(),
            ByteString(kubeconfig.into_bytes()),
        )])),
        ..Secret::default()
    })
}

/// Stores a kubeconfig Secret per member in the host, checks each member's labelled
/// ConfigMap gets stamped, then deletes one Secret and checks its cluster is let go.
pub async fn run() -> Result<()> {
    let host = TestCluster::start("host").await?;
    let fleet = Fleet::builder()
        .clusters(2)
        .name_prefix("member")
        .https(true)
        .start()
        .await?;
    let mgr = crate::manager(host.client(), "default")?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });

    let result = async {
        let secrets: Api<Secret> = Api::namespaced(host.client(), "default");
        for member in fleet.clusters() {
            secrets
                .create(&PostParams::default(), &kubeconfig_secret(member)?)
                .await?;
            println!(
                "host: Secret default/{} holds {}'s kubeconfig",
                member.name(),
                member.name()
            );
        }
        for member in fleet.clusters() {
            let api: Api<ConfigMap> = Api::namespaced(member.https_client().await?, "default");
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some("demo".into());
            cm.metadata.labels = Some(BTreeMap::from([(LABEL.to_owned(), "true".to_owned())]));
            api.create(&PostParams::default(), &cm).await?;
            let expected = member.name().to_owned();
            until(
                &format!("stamping default/demo in {expected}"),
                async || {
                    let cm = api.get("demo").await?;
                    Ok(cm.annotations().get(ANNOTATION) == Some(&expected))
                },
            )
            .await?;
            println!("{expected}: default/demo stamped {ANNOTATION}={expected}");
        }
        secrets.delete("member-2", &DeleteParams::default()).await?;
        until("letting member-2 go", async || {
            Ok(!mgr
                .engaged_clusters()
                .iter()
                .any(|c| c.as_str() == "member-2"))
        })
        .await?;
        println!("host: Secret default/member-2 deleted; the provider let member-2 go");
        anyhow::Ok(())
    }
    .await;
    token.cancel();
    running.await??;
    result?;
    println!("done");
    Ok(())
}
