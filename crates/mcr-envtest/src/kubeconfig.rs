//! Kubeconfigs for HTTPS clusters: one cluster, user and context, all named after the cluster.

use std::path::Path;

use base64::Engine as _;
use kube::config::Kubeconfig;

use crate::Error;

/// Renders the kubeconfig YAML (strings are JSON-quoted, which YAML reads as-is).
pub(crate) fn render(name: &str, server: &str, ca_pem: &str, token: &str) -> String {
    render_user(name, server, ca_pem, &[("token", token)])
}

/// Renders a kubeconfig whose user authenticates with a client certificate.
pub(crate) fn render_client_cert(
    name: &str,
    server: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    render_user(
        name,
        server,
        ca_pem,
        &[
            ("client-certificate-data", &b64(cert_pem)),
            ("client-key-data", &b64(key_pem)),
        ],
    )
}

fn render_user(name: &str, server: &str, ca_pem: &str, user: &[(&str, &str)]) -> String {
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let user: String = user
        .iter()
        .map(|(key, value)| format!("    {key}: {}\n", q(value)))
        .collect();
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         preferences: {{}}\n\
         clusters:\n\
         - name: {name}\n  \
           cluster:\n    \
             server: {server}\n    \
             certificate-authority-data: {ca}\n\
         users:\n\
         - name: {name}\n  \
           user:\n\
         {user}\
         contexts:\n\
         - name: {name}\n  \
           context:\n    \
             cluster: {name}\n    \
             user: {name}\n    \
             namespace: default\n\
         current-context: {name}\n",
        name = q(name),
        server = q(server),
        ca = q(&ca),
    )
}

/// Parses rendered YAML into kube's type.
pub(crate) fn parse(yaml: &str) -> Result<Kubeconfig, Error> {
    // kube's error may quote the input; keep it out of the message.
    Kubeconfig::from_yaml(yaml)
        .map_err(|_| Error::Kubeconfig("generated kubeconfig does not parse".into()))
}

/// Writes a kubeconfig readable by the owner only (it holds a token).
pub(crate) fn write(path: &Path, yaml: &str) -> Result<(), Error> {
    use std::io::Write;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(yaml.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_kubeconfig_kube_reads() {
        let yaml = render(
            "member-1",
            "https://127.0.0.1:4443",
            "PEM\n",
            "s3cr:et \"x\"",
        );
        let kc = parse(&yaml).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("member-1"));
        assert_eq!(kc.clusters[0].name, "member-1");
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:4443"));
        let ca = base64::engine::general_purpose::STANDARD
            .decode(cluster.certificate_authority_data.as_ref().unwrap())
            .unwrap();
        assert_eq!(ca, b"PEM\n");
        assert_eq!(kc.auth_infos[0].name, "member-1");
        let ctx = kc.contexts[0].context.as_ref().unwrap();
        assert_eq!(
            (ctx.cluster.as_str(), ctx.user.as_deref()),
            ("member-1", Some("member-1"))
        );
        assert_eq!(ctx.namespace.as_deref(), Some("default"));
    }
}
