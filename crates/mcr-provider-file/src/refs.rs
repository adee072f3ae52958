//! Files a kubeconfig context reads by path (CA, client certificate and key, `tokenFile`): what
//! to watch, and a hash of their contents so a rotation reaches the member.
//!
//! A cert-manager-style rotation rewrites those files and leaves the kubeconfig unchanged, so
//! the kubeconfig's connection hash alone would keep the old client (and its old certificate)
//! until restart. The provider mixes the contents of every referenced file into the cluster's
//! connection hash and watches their directories.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;
use mcr_core::kubeconfig;

/// The files `context` of `kc` reads by path (absolute when the kubeconfig was read from a
/// file), in a stable order. Empty when the context does not resolve (the build reports that).
pub(crate) fn referenced_files(kc: &Kubeconfig, context: &str) -> BTreeSet<PathBuf> {
    let mut files = BTreeSet::new();
    let Some(ctx) = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
    else {
        return files;
    };
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.as_ref());
    if let Some(ca) = cluster.and_then(|c| c.certificate_authority.as_ref()) {
        files.insert(PathBuf::from(ca));
    }
    let user = ctx.user.as_ref().and_then(|u| {
        kc.auth_infos
            .iter()
            .find(|a| &a.name == u)
            .and_then(|a| a.auth_info.as_ref())
    });
    if let Some(user) = user {
        let paths = [&user.client_certificate, &user.client_key, &user.token_file];
        files.extend(paths.into_iter().flatten().map(PathBuf::from));
    }
    files
}

/// Whether `context`'s cluster reads its CA from a file: the kubeconfig does not show when its
/// contents change, so such a member is rebuilt rather than renewed in place.
pub(crate) fn reads_ca_file(kc: &Kubeconfig, context: &str) -> bool {
    let cluster = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .and_then(|ctx| kc.clusters.iter().find(|c| c.name == ctx.cluster));
    cluster
        .and_then(|c| c.cluster.as_ref())
        .is_some_and(|c| c.certificate_authority.is_some())
}

/// `connection_hash` extended with the contents of `files` (a missing or unreadable file counts
/// as such), so that rotating one of them changes the hash. Unchanged when `files` is empty.
pub(crate) fn with_file_contents(connection_hash: String, files: &BTreeSet<PathBuf>) -> String {
    if files.is_empty() {
        return connection_hash;
    }
    let mut buf = connection_hash.into_bytes();
    for file in files {
        buf.push(b'\n');
        buf.extend_from_slice(file.as_os_str().as_encoded_bytes());
        buf.push(0);
        match std::fs::read(file) {
            Ok(bytes) => buf.extend_from_slice(kubeconfig::bytes_hash(&bytes).as_bytes()),
            Err(err) => buf.extend_from_slice(format!("unreadable:{:?}", err.kind()).as_bytes()),
        }
    }
    kubeconfig::bytes_hash(&buf)
}

/// Whether `path` is one of `files` (after dropping a leading `./`).
pub(crate) fn is_referenced(path: &Path, files: &BTreeSet<PathBuf>) -> bool {
    files
        .iter()
        .any(|f| f == path || f.strip_prefix(".").is_ok_and(|f| f == path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_files_of_one_context_and_hashes_their_contents() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, token) = (dir.path().join("ca.crt"), dir.path().join("token"));
        let kc = kubeconfig::parse(
            format!(
                "clusters: [{{name: c, cluster: {{server: 'https://h', certificate-authority: {}}}}}]
users: [{{name: u, user: {{tokenFile: {}}}}}, {{name: other, user: {{client-key: /k}}}}]
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]",
                ca.display(),
                token.display()
            )
            .as_bytes(),
        )
        .unwrap();
        let files = referenced_files(&kc, "ctx");
        assert_eq!(files, BTreeSet::from([ca.clone(), token.clone()]));
        assert!(referenced_files(&kc, "missing").is_empty());
        let missing = with_file_contents("h".into(), &files);
        std::fs::write(&token, "one").unwrap();
        let one = with_file_contents("h".into(), &files);
        std::fs::write(&token, "two").unwrap();
        let two = with_file_contents("h".into(), &files);
        assert!(missing != one && one != two, "contents change the hash");
        assert_eq!(two, with_file_contents("h".into(), &files));
        assert_eq!(with_file_contents("h".into(), &BTreeSet::new()), "h");
    }
}
