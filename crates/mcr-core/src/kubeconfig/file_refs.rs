//! Refusing kubeconfigs that point at local files.

use kube::config::Kubeconfig;

use super::{Error, parse::resolve};

/// Refuses a context whose cluster or user entry reads a local file: `certificate-authority`,
/// `client-certificate`, `client-key` or `tokenFile`.
///
/// A kubeconfig from a Secret or a ClusterProfile is untrusted input. Without this check it
/// could name the controller's own service-account token (`tokenFile:
/// /var/run/secrets/kubernetes.io/serviceaccount/token`) together with a server it controls,
/// and the controller would send that token there. Unless the [`Policy`](super::Policy) sets
/// [`allow_file_references`](super::Policy::allow_file_references) (its default does not),
/// [`client_for_context`](super::client_for_context) calls this first; kubeconfigs with
/// inline `*-data` fields and tokens are unaffected. Exec commands are governed by
/// [`ExecPolicy`](super::ExecPolicy) instead. The file part of
/// [`check_policy`](super::check_policy).
pub(crate) fn check_file_references(kc: &Kubeconfig, context: Option<&str>) -> Result<(), Error> {
    let resolved = resolve(kc, context)?;
    let set = |path: &Option<String>| path.as_deref().is_some_and(|p| !p.is_empty());
    let mut fields = vec![(
        "certificate-authority",
        set(&resolved.cluster.certificate_authority),
    )];
    if let Some(user) = resolved.user {
        fields.extend([
            ("client-certificate", set(&user.client_certificate)),
            ("client-key", set(&user.client_key)),
            ("tokenFile", set(&user.token_file)),
        ]);
    }
    match fields.into_iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(Error::FileReferenceNotAllowed {
            context: resolved.name.to_string(),
            field: field.to_string(),
        }),
        None => Ok(()),
    }
}
