//! Configuration of the [`FileProvider`](crate::FileProvider) and its defaults.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use mcr_core::kubeconfig::Policy;
use mcr_core::members::MemberOptions;

/// Glob patterns matched inside [`Options::dirs`] when [`Options::globs`] is empty.
pub const DEFAULT_GLOBS: &[&str] = &[
    "kubeconfig.yaml",
    "kubeconfig.yml",
    "*.kubeconfig",
    "*.kubeconfig.yaml",
    "*.kubeconfig.yml",
];

/// Separator between file path and context name when [`Options::separator`] is empty.
pub const DEFAULT_SEPARATOR: &str = "+";

/// Options of the [`FileProvider`](crate::FileProvider).
///
/// Defaults (applied by [`FileProvider::new`](crate::FileProvider::new)):
/// * `files` and `dirs` both empty: every path in `$KUBECONFIG`; else `~/.kube/config` if it
///   exists; else the working directory as a directory to search.
/// * `globs` empty: [`DEFAULT_GLOBS`].
/// * `separator` empty: [`DEFAULT_SEPARATOR`] (`+`).
/// * `members.policy`: [`Policy::trusted`]: kubeconfig files are the operator's own (like `kubectl`,
///   and like the Go provider, whose client-go runs exec plugins and reads referenced files),
///   and cloud kubeconfigs (GKE, EKS, AKS) need their exec plugins. Set [`Policy::default`]
///   (or exec rules) when the files come from a less trusted source.
///
/// ```
/// use std::time::Duration;
/// use mcr_provider_file::Options;
/// let opts = Options {
///     dirs: vec!["/etc/fleet".into()],
///     globs: vec!["*.yaml".into()],
///     debounce: Duration::from_millis(50),
///     ..Options::default()
/// };
/// assert_eq!(opts.separator, "+");
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Kubeconfig files. Every context of each becomes a cluster. Missing files are skipped.
    pub files: Vec<PathBuf>,
    /// Directories searched (not recursively) for files matching [`Options::globs`]. Missing
    /// directories are skipped (and picked up when created).
    pub dirs: Vec<PathBuf>,
    /// Glob patterns, relative to each directory. Default: [`DEFAULT_GLOBS`].
    pub globs: Vec<String>,
    /// Between file path and context name in the cluster name. Default: `+`.
    pub separator: String,
    /// Quiet period after a filesystem event before the fleet is reconciled (bursts of events
    /// from one editor save or tool run become one pass). Default: 100 ms.
    pub debounce: Duration,
    /// How members are built and retried (the settings every provider offers): client options,
    /// the kubeconfig policy (default here [`Policy::trusted`], see above), how long a new
    /// member may take to sync (default 30 s; the file provider engages without a separate
    /// probe) and the retry delays of a pass after a cluster failed to engage (1 s doubling up
    /// to 5 min).
    pub members: MemberOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            files: Vec::new(),
            dirs: Vec::new(),
            globs: DEFAULT_GLOBS.iter().map(|g| g.to_string()).collect(),
            separator: DEFAULT_SEPARATOR.to_string(),
            debounce: Duration::from_millis(100),
            members: MemberOptions {
                policy: Policy::trusted(),
                ..MemberOptions::default()
            },
        }
    }
}

impl Options {
    /// Fills in the defaults for empty `files`/`dirs`, `globs` and `separator` from the
    /// process environment (`$KUBECONFIG`, `$HOME`, the working directory).
    ///
    /// ```
    /// let opts = mcr_provider_file::Options { dirs: vec!["/fleet".into()], globs: vec![], ..Default::default() }
    ///     .with_defaults();
    /// assert_eq!(opts.globs.len(), mcr_provider_file::DEFAULT_GLOBS.len());
    /// assert!(opts.files.is_empty());
    /// ```
    pub fn with_defaults(self) -> Self {
        let env = std::env::var_os("KUBECONFIG");
        let home = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .map(PathBuf::from);
        let cwd = std::env::current_dir().ok();
        self.with_defaults_from(env, home, cwd)
    }

    /// [`Options::with_defaults`] with the environment passed in.
    ///
    /// ```
    /// use std::path::PathBuf;
    /// let opts = mcr_provider_file::Options::default()
    ///     .with_defaults_from(None, None, Some(PathBuf::from("/work")));
    /// assert_eq!(opts.dirs, vec![PathBuf::from("/work")]);
    /// ```
    pub fn with_defaults_from(
        mut self,
        kubeconfig_env: Option<OsString>,
        home: Option<PathBuf>,
        cwd: Option<PathBuf>,
    ) -> Self {
        if self.files.is_empty() && self.dirs.is_empty() {
            let from_env: Vec<PathBuf> = kubeconfig_env
                .as_deref()
                .map(|v| {
                    std::env::split_paths(v)
                        .filter(|p| !p.as_os_str().is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let home_config = home.map(|h| h.join(".kube").join("config"));
            if !from_env.is_empty() {
                self.files = from_env;
            } else if let Some(config) = home_config.filter(|c| c.is_file()) {
                self.files = vec![config];
            } else {
                self.dirs = vec![cwd.unwrap_or_else(|| PathBuf::from("."))];
            }
        }
        if self.globs.is_empty() {
            self.globs = DEFAULT_GLOBS.iter().map(|g| g.to_string()).collect();
        }
        if self.separator.is_empty() {
            self.separator = DEFAULT_SEPARATOR.to_string();
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_env_wins_with_every_path() {
        let env = std::env::join_paths(["/a/one", "/b/two"]).unwrap();
        let opts = Options::default().with_defaults_from(Some(env), None, None);
        assert_eq!(
            opts.files,
            vec![PathBuf::from("/a/one"), PathBuf::from("/b/two")]
        );
        assert!(opts.dirs.is_empty());
    }

    #[test]
    fn home_config_then_working_directory() {
        let home = tempfile::tempdir().unwrap();
        let cwd = PathBuf::from("/somewhere");
        let opts = Options::default().with_defaults_from(
            Some(OsString::new()),
            Some(home.path().to_path_buf()),
            Some(cwd.clone()),
        );
        assert_eq!(opts.dirs, vec![cwd.clone()], "no ~/.kube/config yet");
        std::fs::create_dir_all(home.path().join(".kube")).unwrap();
        std::fs::write(home.path().join(".kube/config"), "{}").unwrap();
        let opts =
            Options::default().with_defaults_from(None, Some(home.path().to_path_buf()), Some(cwd));
        assert_eq!(opts.files, vec![home.path().join(".kube/config")]);
    }

    #[test]
    fn explicit_sources_are_kept_and_empty_fields_defaulted() {
        let opts = Options {
            files: vec!["/x".into()],
            globs: vec![],
            separator: String::new(),
            ..Options::default()
        }
        .with_defaults_from(Some("/env".into()), None, None);
        assert_eq!(opts.files, vec![PathBuf::from("/x")]);
        assert_eq!(opts.separator, "+");
        assert_eq!(opts.globs, DEFAULT_GLOBS);
    }
}
