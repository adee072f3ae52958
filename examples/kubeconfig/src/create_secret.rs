//! `create-secret`: give a member cluster a least-privilege ServiceAccount, build a kubeconfig
//! for it, and store that kubeconfig in the host cluster as a Secret the provider picks up.
//!
//! Steps (each printed; credentials never are):
//! 1. ServiceAccount `<namespace>/<service-account>` in the member (kept if it exists).
//! 2. A Role or ClusterRole allowing `get`, `list`, `watch`, `patch` on ConfigMaps (what this
//!    example's controller does), bound to the ServiceAccount. A member that does not serve
//!    `rbac.authorization.k8s.io/v1` (e.g. the `mcr-envtest` emulator) is reported and skipped.
//! 3. A token: a TokenRequest (`kubectl create token`); where that subresource is not served,
//!    a `kubernetes.io/service-account-token` Secret, waiting for the token controller to fill it.
//! 4. A kubeconfig with the member's server and CA and that token, checked with `GET /version`.
//! 5. The Secret `<namespace>/<name>` in the host, labelled for the provider (server-side apply,
//!    so running again updates it).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use mcr_provider_kubeconfig::{DEFAULT_DATA_KEY, DEFAULT_LABEL};

const MANAGER: &str = "mcr-example-create-secret";

/// Arguments of `create-secret`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Kubeconfig reaching the member with enough rights to create the ServiceAccount and RBAC.
    #[arg(long, value_name = "FILE")]
    member_kubeconfig: PathBuf,
    /// Context of the member in that file. Default: its current context.
    #[arg(long)]
    member_context: Option<String>,
    /// Kubeconfig of the host cluster. Default: the usual kube-rs lookup.
    #[arg(long, value_name = "FILE")]
    host_kubeconfig: Option<PathBuf>,
    /// Context of the host in that file. Default: its current context.
    #[arg(long)]
    host_context: Option<String>,
    /// Name of the Secret, which is the cluster's name for the provider. Default: the member context.
    #[arg(long)]
    name: Option<String>,
    /// Namespace of the ServiceAccount (member) and of the Secret (host).
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// ServiceAccount in the member.
    #[arg(long, default_value = "mcr-kubeconfig-provider")]
    service_account: String,
    /// `role` (the namespace only) or `clusterrole` (every namespace).
    #[arg(long, value_parser = ["role", "clusterrole"], default_value = "clusterrole")]
    role_type: String,
    /// Do not create the Role/ClusterRole and binding.
    #[arg(long)]
    skip_rbac: bool,
    /// Requested token lifetime (TokenRequest only).
    #[arg(long, value_name = "SECONDS", default_value_t = 8760 * 3600)]
    token_seconds: i64,
    /// How long to wait for a token Secret to be filled.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    token_timeout: u64,
}

fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Runs the subcommand.
pub async fn run(args: Args) -> Result<()> {
    let kc = Kubeconfig::read_from(&args.member_kubeconfig)
        .with_context(|| format!("reading {}", args.member_kubeconfig.display()))?;
    let context = args
        .member_context
        .clone()
        .or_else(|| kc.current_context.clone())
        .context("the member kubeconfig has no current context: pass --member-context")?;
    let (server, ca) = server_and_ca(&kc, &context)?;
    let name = args.name.clone().unwrap_or_else(|| context.clone());
    let member = crate::client(Some(&args.member_kubeconfig), Some(&context)).await?;
    let ns = args.namespace.as_str();
    let sa = args.service_account.as_str();

    ensure_service_account(&member, ns, sa).await?;
    if args.skip_rbac {
        println!("RBAC: skipped (--skip-rbac)");
    } else {
        grant(&member, &args, &name).await?;
    }
    let token = token(&member, &args).await?;
    let kubeconfig = render(&name, &server, &ca, sa, &token);
    verify(&kubeconfig).await?;
    println!("kubeconfig for {ns}/{sa} verified (GET /version answered)");

    let host = crate::client(
        args.host_kubeconfig.as_deref(),
        args.host_context.as_deref(),
    )
    .await?;
    store(&host, ns, &name, &kubeconfig).await?;
    println!("Secret {ns}/{name} stored in the host, labelled {DEFAULT_LABEL}=true");
    Ok(())
}

/// The server and base64 CA of a context's cluster (a CA file is read and inlined).
fn server_and_ca(kc: &Kubeconfig, context: &str) -> Result<(String, String)> {
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .with_context(|| format!("no context {context} in the member kubeconfig"))?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.as_ref())
        .with_context(|| format!("no cluster {} in the member kubeconfig", ctx.cluster))?;
    let server = cluster
        .server
        .clone()
        .context("the member cluster has no server")?;
    let ca = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => data.clone(),
        (None, Some(path)) => base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(path).with_context(|| format!("reading CA file {path}"))?),
        (None, None) => String::new(),
    };
    Ok((server, ca))
}

async fn ensure_service_account(member: &kube::Client, ns: &str, sa: &str) -> Result<()> {
    let api: Api<ServiceAccount> = Api::namespaced(member.clone(), ns);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(sa.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match api.create(&PostParams::default(), &account).await {
        Ok(_) => println!("ServiceAccount {ns}/{sa} created in the member"),
        Err(err) if status_code(&err) == Some(409) => {
            println!("ServiceAccount {ns}/{sa} already exists in the member")
        }
        Err(err) => return Err(err).context("creating the ServiceAccount"),
    }
    Ok(())
}

/// Role or ClusterRole + binding; a 404 means the member does not serve RBAC.
async fn grant(member: &kube::Client, args: &Args, name: &str) -> Result<()> {
    let ns = args.namespace.as_str();
    let role_name = format!("mcr-{name}");
    let meta = |namespaced: bool| ObjectMeta {
        name: Some(role_name.clone()),
        namespace: namespaced.then(|| ns.to_owned()),
        ..ObjectMeta::default()
    };
    let rules = Some(vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: ["get", "list", "watch", "patch"].map(String::from).to_vec(),
        ..PolicyRule::default()
    }]);
    let subjects = Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: args.service_account.clone(),
        namespace: Some(ns.to_owned()),
        ..Subject::default()
    }]);
    let role_ref = |kind: &str| RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: role_name.clone(),
    };
    let pp = PatchParams::apply(MANAGER).force();
    let result = if args.role_type == "role" {
        let role = Role {
            metadata: meta(true),
            rules,
        };
        let binding = RoleBinding {
            metadata: meta(true),
            role_ref: role_ref("Role"),
            subjects,
        };
        let roles: Api<Role> = Api::namespaced(member.clone(), ns);
        let bindings: Api<RoleBinding> = Api::namespaced(member.clone(), ns);
        match roles.patch(&role_name, &pp, &Patch::Apply(&role)).await {
            Ok(_) => bindings
                .patch(&role_name, &pp, &Patch::Apply(&binding))
                .await
                .map(drop),
            Err(err) => Err(err),
        }
    } else {
        let role = ClusterRole {
            metadata: meta(false),
            rules,
            ..ClusterRole::default()
        };
        let binding = ClusterRoleBinding {
            metadata: meta(false),
            role_ref: role_ref("ClusterRole"),
            subjects,
        };
        let roles: Api<ClusterRole> = Api::all(member.clone());
        let bindings: Api<ClusterRoleBinding> = Api::all(member.clone());
        match roles.patch(&role_name, &pp, &Patch::Apply(&role)).await {
            Ok(_) => bindings
                .patch(&role_name, &pp, &Patch::Apply(&binding))
                .await
                .map(drop),
            Err(err) => Err(err),
        }
    };
    match result {
        Ok(()) => {
            println!(
                "{} {role_name} (configmaps: get, list, watch, patch) bound to {ns}/{}",
                if args.role_type == "role" {
                    "Role"
                } else {
                    "ClusterRole"
                },
                args.service_account
            );
            Ok(())
        }
        Err(err) if status_code(&err) == Some(404) => {
            println!(
                "RBAC: skipped, the member does not serve rbac.authorization.k8s.io/v1 (404); \
                 grant the ServiceAccount access to ConfigMaps yourself"
            );
            Ok(())
        }
        Err(err) => Err(err).context("creating the Role/ClusterRole and binding"),
    }
}

/// A token for the ServiceAccount: TokenRequest, else a token Secret filled by the cluster.
async fn token(member: &kube::Client, args: &Args) -> Result<String> {
    let (ns, sa) = (args.namespace.as_str(), args.service_account.as_str());
    let accounts: Api<ServiceAccount> = Api::namespaced(member.clone(), ns);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(args.token_seconds),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    match accounts
        .create_token_request(sa, &PostParams::default(), &request)
        .await
    {
        Ok(response) => {
            let token = response.status.and_then(|s| s.token);
            if let Some(token) = token.filter(|t| !t.is_empty()) {
                println!("token issued for {ns}/{sa} (TokenRequest)");
                return Ok(token);
            }
            bail!("the TokenRequest for {ns}/{sa} returned no token");
        }
        Err(err) if matches!(status_code(&err), Some(404 | 405)) => {
            println!("TokenRequest is not served by the member; using a token Secret instead");
        }
        Err(err) => return Err(err).context("requesting a token"),
    }

    let secrets: Api<Secret> = Api::namespaced(member.clone(), ns);
    let secret_name = format!("{sa}-token");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.clone()),
            annotations: Some(BTreeMap::from([(
                "kubernetes.io/service-account.name".to_owned(),
                sa.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/service-account-token".into()),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(err) if status_code(&err) == Some(409) => {}
        Err(err) => return Err(err).context("creating the token Secret"),
    }
    let start = tokio::time::Instant::now();
    loop {
        let current = secrets.get(&secret_name).await?;
        let token = current.data.as_ref().and_then(|d| d.get("token"));
        if let Some(ByteString(bytes)) = token.filter(|t| !t.0.is_empty()) {
            println!("token issued for {ns}/{sa} (Secret {ns}/{secret_name})");
            return String::from_utf8(bytes.clone()).context("the token is not UTF-8");
        }
        if start.elapsed() > Duration::from_secs(args.token_timeout) {
            bail!(
                "Secret {ns}/{secret_name} got no token within {}s: is the member's token \
                 controller running?",
                args.token_timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A kubeconfig with one cluster, user and context (strings JSON-quoted, which YAML reads).
fn render(name: &str, server: &str, ca: &str, user: &str, token: &str) -> String {
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let ca_line = if ca.is_empty() {
        String::new()
    } else {
        format!("\n    certificate-authority-data: {}", q(ca))
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}{ca_line}\n\
         users:\n- name: {user}\n  user:\n    token: {token}\n\
         contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {user}\n\
         current-context: {name}\n",
        name = q(name),
        server = q(server),
        user = q(user),
        token = q(token),
    )
}

async fn verify(kubeconfig: &str) -> Result<()> {
    // kube's errors may quote the input: keep the kubeconfig out of the message.
    let kc = Kubeconfig::from_yaml(kubeconfig)
        .map_err(|_| anyhow::anyhow!("the generated kubeconfig does not parse"))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    let client = kube::Client::try_from(config)?;
    client
        .apiserver_version()
        .await
        .context("the generated kubeconfig does not reach the member")?;
    Ok(())
}

async fn store(host: &kube::Client, ns: &str, name: &str, kubeconfig: &str) -> Result<()> {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            labels: Some(BTreeMap::from([(
                DEFAULT_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            DEFAULT_DATA_KEY.to_owned(),
            ByteString(kubeconfig.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    };
    let api: Api<Secret> = Api::namespaced(host.clone(), ns);
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&secret),
    )
    .await
    .context("storing the kubeconfig Secret in the host")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_kubeconfig_parses() {
        let yaml = render("m-1", "https://127.0.0.1:6443", "Q0E=", "sa", "t0k\"en");
        let kc = Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("m-1"));
        let (server, ca) = server_and_ca(&kc, "m-1").unwrap();
        assert_eq!(
            (server.as_str(), ca.as_str()),
            ("https://127.0.0.1:6443", "Q0E=")
        );
        assert_eq!(kc.auth_infos[0].name, "sa");
    }
}
