//! The example's plumbing: a certificate on disk, and the two ways a cluster's webhook is
//! exercised (through a real kube-apiserver, or by sending the review it would send).

use std::{net::SocketAddr, path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, api::PostParams};
use mcr_webhook::testing::{ReviewClient, admission_review};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use serde_json::Value;

/// Writes `tls.crt` / `tls.key` for 127.0.0.1 signed by a fresh CA (cert-manager's job in a
/// real deployment); returns the CA's PEM, the `caBundle` of the webhook configurations.
pub fn write_certificate(dir: &Path) -> Result<String> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "example-webhook CA");
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate()?;
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "example-webhook");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer)?;
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).context("writing tls.key")?;
    std::fs::write(dir.join("tls.crt"), cert.pem()).context("writing tls.crt")?;
    Ok(ca.pem())
}

/// Creates an invalid and a valid ConfigMap through the cluster's own kube-apiserver, which
/// calls the webhook. Returns the refusal of the invalid one and whether the valid one was
/// accepted. The apiserver learns about a new webhook configuration through an informer, so
/// the invalid one is tried as a dry run until it is refused (or `step` passes).
///
/// In a sharded fleet a member can move to another replica meanwhile: until the new owner's
/// URL reaches the member's apiserver, its calls go to the old owner, which fails them (503),
/// and under `failurePolicy: Fail` the apiserver refuses the write with 500 "failed calling
/// webhook". Such writes are retried (until `step` passes), as a client retries a write
/// refused under `Fail`; a denial is never retried.
pub async fn through_apiserver(
    client: &Client,
    step: Duration,
    config_map: fn(&str, &str) -> ConfigMap,
) -> Result<(Option<String>, bool)> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + step;
    // Until the webhook is called and answers: a dry run that is admitted (not called yet) or
    // whose call failed is tried again.
    loop {
        match api.create(&dry, &config_map("invalid", "eleven")).await {
            Err(err) if !call_failed(&err) => break,
            _ if tokio::time::Instant::now() > deadline => {
                bail!("the webhook did not answer within {step:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let create = async |name: &str, replicas: &str| loop {
        match api
            .create(&PostParams::default(), &config_map(name, replicas))
            .await
        {
            Err(err) if call_failed(&err) && tokio::time::Instant::now() < deadline => {
                tracing::info!(error = %err, "the webhook call failed; retrying the write");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    };
    let refused = match create("invalid", "eleven").await {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some(status.message),
        Err(other) => return Err(other).context("creating the invalid ConfigMap"),
    };
    let allowed = match create("valid", "3").await {
        Ok(_) => true,
        Err(err) if call_failed(&err) => {
            return Err(err).context("creating the valid ConfigMap: the webhook call kept failing");
        }
        Err(_) => false,
    };
    Ok((refused, allowed))
}

/// Whether kube-apiserver refused a write because calling the webhook failed (its
/// `failurePolicy: Fail` applied), not because the webhook denied it.
fn call_failed(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status)
        if status.code == 500 && status.message.contains("failed calling webhook"))
}

/// Sends the cluster's route the AdmissionReview kube-apiserver would send for creating an
/// invalid and a valid ConfigMap (the emulator does not call webhooks).
pub async fn by_hand(
    base: &str,
    ca_pem: &str,
    path: &str,
    config_map: fn(&str, &str) -> ConfigMap,
) -> Result<(Option<String>, bool)> {
    let addr: SocketAddr = base
        .trim_start_matches("https://")
        .parse()
        .with_context(|| format!("{base} is not https://<ip>:<port>"))?;
    let mut client = ReviewClient::connect(addr, ca_pem.as_bytes()).await?;
    let mut send = async |uid: &str, cm: ConfigMap| -> Result<Value> {
        let (status, answer) = client
            .post(path, &admission_review(uid, "CREATE", &cm))
            .await?;
        if status != 200 {
            // A failed call (kube-apiserver applies the webhook's failurePolicy), e.g. 503
            // from a replica that does not serve the member (any more).
            bail!(
                "the webhook call failed with HTTP {status}: {}",
                answer["response"]["status"]["message"]
                    .as_str()
                    .unwrap_or_default()
            );
        }
        Ok(answer)
    };
    let invalid = send(
        "3f0c7a6e-0001-4b8e-9d2c-5a1e2b3c4d5e",
        config_map("invalid", "eleven"),
    )
    .await?;
    let valid = send(
        "3f0c7a6e-0002-4b8e-9d2c-5a1e2b3c4d5e",
        config_map("valid", "3"),
    )
    .await?;
    let refused = (invalid["response"]["allowed"] == false).then(|| {
        invalid["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    Ok((refused, valid["response"]["allowed"] == true))
}

/// The URL of the first webhook of the `ValidatingWebhookConfiguration` `name` in `client`'s
/// cluster, once its owner has written it (within `timeout`).
pub async fn configured_url(client: &Client, name: &str, timeout: Duration) -> Result<String> {
    let api: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(client.clone());
    let find = async {
        let mut every = tokio::time::interval(Duration::from_millis(100));
        loop {
            every.tick().await;
            let url = api
                .get_opt(name)
                .await?
                .and_then(|c| c.webhooks)
                .and_then(|w| w.into_iter().next())
                .and_then(|w| w.client_config.url);
            if let Some(url) = url {
                return Ok::<_, anyhow::Error>(url);
            }
        }
    };
    tokio::time::timeout(timeout, find)
        .await
        .with_context(|| format!("no webhook configuration {name} within {timeout:?}"))?
}

/// `https://host:port/path` as (`https://host:port`, `/path`).
pub fn split_url(url: &str) -> Result<(String, String)> {
    let Some(rest) = url.strip_prefix("https://") else {
        bail!("{url} is not an https URL");
    };
    let slash = rest.find('/').unwrap_or(rest.len());
    Ok((
        format!("https://{}", &rest[..slash]),
        rest[slash..].to_string(),
    ))
}
