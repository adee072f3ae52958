//! Finding the `kube-apiserver`, `etcd` and `kubectl` binaries, the way controller-runtime's
//! envtest does, plus the cache that `cargo xtask assets` fills (which holds `helm` too).

use std::path::{Path, PathBuf};

use crate::Error;

/// The Kubernetes release `cargo xtask assets` builds and this crate is tested against.
pub const KUBERNETES_VERSION: &str = "1.36.3";

/// A directory holding all three binaries (as `setup-envtest` and kubebuilder use it).
pub const KUBEBUILDER_ASSETS: &str = "KUBEBUILDER_ASSETS";
/// The path of the `kube-apiserver` binary (wins over [`KUBEBUILDER_ASSETS`]).
pub const TEST_ASSET_KUBE_APISERVER: &str = "TEST_ASSET_KUBE_APISERVER";
/// The path of the `etcd` binary (wins over [`KUBEBUILDER_ASSETS`]).
pub const TEST_ASSET_ETCD: &str = "TEST_ASSET_ETCD";
/// The path of the `kubectl` binary (wins over [`KUBEBUILDER_ASSETS`]).
pub const TEST_ASSET_KUBECTL: &str = "TEST_ASSET_KUBECTL";
/// The path of the `helm` binary (wins over [`KUBEBUILDER_ASSETS`]).
pub const TEST_ASSET_HELM: &str = "TEST_ASSET_HELM";

/// The cache directory of `cargo xtask assets` for [`KUBERNETES_VERSION`]:
/// `$XDG_CACHE_HOME/mcr/assets/v<version>`, else `$HOME/.cache/mcr/assets/v<version>`.
/// `None` when neither variable is set. The directory may not exist.
///
/// ```
/// if let Some(dir) = mcr_envtest::real::assets_dir() {
///     assert!(dir.ends_with(format!("v{}", mcr_envtest::real::KUBERNETES_VERSION)));
/// }
/// ```
pub fn assets_dir() -> Option<PathBuf> {
    let non_empty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let cache = non_empty("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(
        cache
            .join("mcr")
            .join("assets")
            .join(format!("v{KUBERNETES_VERSION}")),
    )
}

/// The binaries of a real control plane.
///
/// ```no_run
/// let assets = mcr_envtest::real::Assets::find()?;
/// println!("{}", assets.kube_apiserver.display());
/// # Ok::<(), mcr_envtest::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assets {
    /// The `kube-apiserver` binary.
    pub kube_apiserver: PathBuf,
    /// The `etcd` binary.
    pub etcd: PathBuf,
    /// The `kubectl` binary, if one was found (control planes do not need it).
    pub kubectl: Option<PathBuf>,
    /// The `helm` binary, if one was found (`cargo xtask assets` builds one; setup-envtest
    /// does not).
    pub helm: Option<PathBuf>,
}

impl Assets {
    /// Looks for each binary in this order: its `TEST_ASSET_*` variable, the
    /// [`KUBEBUILDER_ASSETS`] directory, then [`assets_dir`]. A missing `kube-apiserver` or
    /// `etcd` is an error that says how to get them.
    ///
    /// ```no_run
    /// let assets = mcr_envtest::real::Assets::find()?;
    /// # Ok::<(), mcr_envtest::Error>(())
    /// ```
    pub fn find() -> Result<Assets, Error> {
        let kubebuilder = std::env::var_os(KUBEBUILDER_ASSETS)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        let dirs: Vec<PathBuf> = kubebuilder.into_iter().chain(assets_dir()).collect();
        let kube_apiserver = find_one("kube-apiserver", TEST_ASSET_KUBE_APISERVER, &dirs);
        let etcd = find_one("etcd", TEST_ASSET_ETCD, &dirs);
        let kubectl = find_one("kubectl", TEST_ASSET_KUBECTL, &dirs);
        let helm = find_one("helm", TEST_ASSET_HELM, &dirs);
        match (kube_apiserver, etcd) {
            (Some(kube_apiserver), Some(etcd)) => Ok(Assets {
                kube_apiserver,
                etcd,
                kubectl,
                helm,
            }),
            (apiserver, etcd) => {
                let missing: Vec<&str> = [("kube-apiserver", &apiserver), ("etcd", &etcd)]
                    .iter()
                    .filter(|(_, found)| found.is_none())
                    .map(|(name, _)| *name)
                    .collect();
                Err(Error::Assets(missing_message(&missing, &dirs)))
            }
        }
    }
}

/// The binary `name`: from the variable `var` if set, else the first directory holding it.
fn find_one(name: &str, var: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    dirs.iter().map(|dir| dir.join(name)).find(|p| p.is_file())
}

fn missing_message(missing: &[&str], dirs: &[PathBuf]) -> String {
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    format!(
        "{} not found (looked in {TEST_ASSET_KUBE_APISERVER} / {TEST_ASSET_ETCD}, then {}). \
         The real backend ({}=real) needs kube-apiserver and etcd: run `cargo xtask assets` \
         (builds Kubernetes v{KUBERNETES_VERSION} with Go into the cache above), or point \
         {KUBEBUILDER_ASSETS} at a directory of envtest binaries (e.g. from setup-envtest)",
        missing.join(" and "),
        if looked.is_empty() {
            "no directory: set KUBEBUILDER_ASSETS or HOME".to_string()
        } else {
            looked.join(", ")
        },
        crate::BACKEND_ENV,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_directory_holding_a_binary() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(b.path().join("etcd"), "").unwrap();
        std::fs::write(a.path().join("etcd"), "").unwrap();
        let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
        let var = "MCR_ENVTEST_UNIT_TEST_UNSET_VARIABLE";
        assert_eq!(find_one("etcd", var, &dirs), Some(a.path().join("etcd")));
        assert_eq!(find_one("kubectl", var, &dirs), None);
    }

    #[test]
    fn the_missing_message_says_how_to_get_binaries() {
        let msg = missing_message(&["etcd"], &[PathBuf::from("/x")]);
        assert!(msg.contains("cargo xtask assets") && msg.contains("KUBEBUILDER_ASSETS"));
        assert!(
            msg.starts_with("etcd not found") && msg.contains("/x"),
            "{msg}"
        );
    }
}
