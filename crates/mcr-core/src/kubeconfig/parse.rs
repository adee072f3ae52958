//! Parsing kubeconfigs and resolving a context to its cluster and user entries.

use std::path::Path;

use kube::config::{AuthInfo, Cluster as ClusterEntry, Context, Kubeconfig};

use super::Error;
use crate::redact;

/// Parses a kubeconfig from bytes (for instance the data key of a Secret).
///
/// Multi-document YAML is merged as kube does. Relative file references stay relative
/// (there is no directory to resolve them against): kubeconfigs stored in Secrets should carry
/// `*-data` fields. A leading UTF-8 byte order mark is ignored.
///
/// Errors: [`Error::Empty`] for empty or whitespace-only input (or a document without any
/// cluster, user, context or current-context); [`Error::Parse`] otherwise, with the reason and
/// position but none of the content.
///
/// ```
/// let kc = mcr_core::kubeconfig::parse(br#"
/// apiVersion: v1
/// kind: Config
/// clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
/// users: [{name: u, user: {token: secret}}]
/// contexts: [{name: ctx, context: {cluster: c, user: u}}]
/// current-context: ctx
/// "#).unwrap();
/// assert_eq!(mcr_core::kubeconfig::contexts(&kc), vec!["ctx"]);
/// assert!(mcr_core::kubeconfig::parse(b"not: [valid").is_err());
/// ```
pub fn parse(bytes: &[u8]) -> Result<Kubeconfig, Error> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| Error::Parse {
        reason: format!("not valid UTF-8 (at byte {})", e.valid_up_to()),
    })?;
    if text.trim().is_empty() {
        return Err(Error::Empty);
    }
    let kc = Kubeconfig::from_yaml(text).map_err(|e| Error::Parse {
        reason: redact::kubeconfig_error(&e),
    })?;
    non_empty(kc)
}

/// Reads a kubeconfig file; relative paths in it (certificate, key, token file, exec command
/// containing a `/`) are resolved against the file's directory.
///
/// ```no_run
/// let kc = mcr_core::kubeconfig::read(std::path::Path::new("/etc/fleet/member-1.kubeconfig"))?;
/// println!("{:?}", mcr_core::kubeconfig::current_context(&kc));
/// # Ok::<(), mcr_core::kubeconfig::Error>(())
/// ```
pub fn read(path: &Path) -> Result<Kubeconfig, Error> {
    let kc = Kubeconfig::read_from(path).map_err(|e| match e {
        kube::config::KubeconfigError::ReadConfig(io, _) => Error::Read {
            path: path.to_path_buf(),
            reason: io.to_string(),
        },
        other => Error::Read {
            path: path.to_path_buf(),
            reason: redact::kubeconfig_error(&other),
        },
    })?;
    non_empty(kc)
}

fn non_empty(mut kc: Kubeconfig) -> Result<Kubeconfig, Error> {
    if kc.clusters.is_empty()
        && kc.auth_infos.is_empty()
        && kc.contexts.is_empty()
        && kc.current_context.is_none()
    {
        return Err(Error::Empty);
    }
    // Deserializing a list reserves room for four entries, ~1 KiB each for users: a provider
    // holds one parsed kubeconfig per member while its fleet is built, so drop the spare room.
    kc.clusters.shrink_to_fit();
    kc.auth_infos.shrink_to_fit();
    kc.contexts.shrink_to_fit();
    Ok(kc)
}

/// The names of the kubeconfig's contexts, in file order.
///
/// ```
/// let kc = mcr_core::kubeconfig::parse(b"contexts: [{name: b, context: {cluster: x}}, {name: a, context: {cluster: x}}]").unwrap();
/// assert_eq!(mcr_core::kubeconfig::contexts(&kc), vec!["b", "a"]);
/// ```
pub fn contexts(kc: &Kubeconfig) -> Vec<String> {
    kc.contexts.iter().map(|c| c.name.clone()).collect()
}

/// The kubeconfig's `current-context`, if set and not empty.
///
/// ```
/// let kc = mcr_core::kubeconfig::parse(b"current-context: prod").unwrap();
/// assert_eq!(mcr_core::kubeconfig::current_context(&kc), Some("prod"));
/// ```
pub fn current_context(kc: &Kubeconfig) -> Option<&str> {
    kc.current_context.as_deref().filter(|s| !s.is_empty())
}

/// A context resolved to the entries that define its connection.
#[derive(Debug)]
pub(crate) struct Resolved<'a> {
    /// The context name.
    pub name: &'a str,
    pub context: &'a Context,
    pub cluster: &'a ClusterEntry,
    /// `None` when the context names no user or a user that does not exist (kube, like
    /// client-go, then connects without credentials).
    pub user: Option<&'a AuthInfo>,
}

/// Resolves `context` (or the current context) the way kube's loader does.
pub(crate) fn resolve<'a>(
    kc: &'a Kubeconfig,
    context: Option<&'a str>,
) -> Result<Resolved<'a>, Error> {
    let name = match context {
        Some(name) => name,
        None => current_context(kc).ok_or(Error::NoContext)?,
    };
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| Error::ContextNotFound {
            context: name.to_string(),
        })?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| Error::ClusterNotFound {
            context: name.to_string(),
            cluster: ctx.cluster.clone(),
        })?;
    let user = ctx.user.as_deref().and_then(|user| {
        kc.auth_infos
            .iter()
            .find(|u| u.name == user)
            .and_then(|u| u.auth_info.as_ref())
    });
    Ok(Resolved {
        name,
        context: ctx,
        cluster,
        user,
    })
}
