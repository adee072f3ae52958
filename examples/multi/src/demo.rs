//! The scripted demo: member-1 comes from a kubeconfig file, member-2 from a Secret.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use mcr_envtest::TestCluster;
use mcr_provider_kubeconfig::{DEFAULT_DATA_KEY, DEFAULT_LABEL};
use tokio_util::sync::CancellationToken;

use crate::{ANNOTATION, LABEL};

async fn stamped(member: &TestCluster) -> Result<String> {
    let api: Api<ConfigMap> = Api::namespaced(member.https_client().await?, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("demo".into());
    cm.metadata.labels = Some(BTreeMap::from([(LABEL.to_owned(), "true".to_owned())]));
    api.create(&PostParams::default(), &cm).await?;
    let start = tokio::time::Instant::now();
    loop {
        if let Some(stamp) = api.get("demo").await?.annotations().get(ANNOTATION) {
            return Ok(stamp.clone());
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!(
                "default/demo in {} was not reconciled within 30s",
                member.name()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Serves member-1 through a kubeconfig file and member-2 through a Secret; both are stamped
/// with their prefixed names.
pub async fn run() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let host = TestCluster::start("host").await?;
    let member_1 = TestCluster::start_https("member-1").await?;
    let member_2 = TestCluster::start_https("member-2").await?;
    member_1.write_kubeconfig(&dir.path().join("member-1.kubeconfig"))?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("member-2".into()),
            labels: Some(BTreeMap::from([(
                DEFAULT_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            DEFAULT_DATA_KEY.to_owned(),
            ByteString(
                member_2
                    .kubeconfig_yaml()
                    .context("HTTPS member")?
                    .into_bytes(),
            ),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(host.client(), "default")
        .create(&PostParams::default(), &secret)
        .await?;
    println!("member-1: kubeconfig file in {}", dir.path().display());
    println!("member-2: kubeconfig Secret default/member-2 in the host");

    let mgr = crate::manager(host.client(), dir.path().to_path_buf()).await?;
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, token) = (mgr.clone(), token.clone());
        async move { mgr.run_until(token).await }
    });
    let result = async {
        for member in [&member_1, &member_2] {
            let stamp = stamped(member).await?;
            println!(
                "{}: default/demo stamped {ANNOTATION}={stamp}",
                member.name()
            );
        }
        anyhow::Ok(())
    }
    .await;
    token.cancel();
    running.await??;
    result?;
    println!("done");
    Ok(())
}
