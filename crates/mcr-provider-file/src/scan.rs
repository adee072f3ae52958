//! Finding kubeconfig files on disk and reading them (blocking; run off the async runtime).

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::config::Kubeconfig;
use mcr_core::kubeconfig;
use tracing::{debug, warn};

use crate::Options;
use crate::refs::referenced_files;
use crate::target::Target;

/// One kubeconfig file found on disk and the result of reading it: its contexts, in file
/// order.
pub(crate) struct ScannedFile {
    pub(crate) path: PathBuf,
    pub(crate) result: Result<Vec<Found>, kubeconfig::Error>,
}

/// One context of a file: what its member connects with, and the files it reads by path.
pub(crate) struct Found {
    pub(crate) context: String,
    pub(crate) target: Result<Target, kubeconfig::Error>,
    pub(crate) referenced: BTreeSet<PathBuf>,
}

/// Reads every configured file and every glob match in every configured directory, in order
/// (files first, then each directory's matches sorted), each path once. Each parsed kubeconfig
/// is dropped once its contexts are hashed, so a pass over many files holds one at a time.
pub(crate) fn scan(opts: &Options) -> Vec<ScannedFile> {
    collect_paths(opts)
        .into_iter()
        .map(|path| {
            let result = kubeconfig::read(&path).map(|kc| found(&path, &Arc::new(kc)));
            ScannedFile { path, result }
        })
        .collect()
}

/// The contexts of `kc`, read from `path`.
fn found(path: &Path, kc: &Arc<Kubeconfig>) -> Vec<Found> {
    let file: Arc<Path> = Arc::from(path);
    kubeconfig::contexts(kc)
        .into_iter()
        .map(|context| Found {
            target: Target::of(&file, kc, &context),
            referenced: referenced_files(kc, &context),
            context,
        })
        .collect()
}

/// The kubeconfig files that exist now.
pub(crate) fn collect_paths(opts: &Options) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut paths = Vec::new();
    let mut push = |p: PathBuf| {
        if seen.insert(p.clone()) {
            paths.push(p);
        }
    };
    for file in &opts.files {
        match std::fs::metadata(file) {
            Ok(meta) if meta.is_dir() => {
                warn!(file = %file.display(), "configured kubeconfig file is a directory, skipping")
            }
            Ok(_) => push(file.clone()),
            Err(err) if err.kind() == ErrorKind::NotFound => {
                debug!(file = %file.display(), "kubeconfig file does not exist, skipping")
            }
            // Unreadable metadata: still try to read it, so the failure keeps its clusters.
            Err(_) => push(file.clone()),
        }
    }
    for dir in &opts.dirs {
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {
                for p in glob_dir(dir, &opts.globs) {
                    push(p);
                }
            }
            Ok(_) => {
                warn!(dir = %dir.display(), "configured kubeconfig directory is not a directory, skipping")
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {
                debug!(dir = %dir.display(), "kubeconfig directory does not exist, skipping")
            }
            Err(err) => {
                warn!(dir = %dir.display(), error = %err, "cannot read kubeconfig directory, skipping")
            }
        }
    }
    paths
}

/// Regular files in `dir` matching any of `globs`, sorted.
fn glob_dir(dir: &Path, globs: &[String]) -> Vec<PathBuf> {
    let Some(dir_str) = dir.to_str() else {
        warn!(dir = %dir.display(), "kubeconfig directory path is not valid UTF-8, skipping");
        return Vec::new();
    };
    let base = glob::Pattern::escape(dir_str);
    let mut out = BTreeSet::new();
    for pattern in globs {
        let full = format!("{}{}{}", base, std::path::MAIN_SEPARATOR, pattern);
        match glob::glob(&full) {
            Ok(paths) => {
                for entry in paths {
                    match entry {
                        Ok(p) if p.is_file() => {
                            out.insert(p);
                        }
                        Ok(_) => {}
                        Err(err) => debug!(error = %err, "unreadable glob match, skipping"),
                    }
                }
            }
            Err(err) => {
                warn!(glob = %pattern, error = %err, "invalid kubeconfig glob pattern, skipping")
            }
        }
    }
    out.into_iter().collect()
}

/// The cluster name of `context` in the file at `path`: `<path><separator><context>`.
/// Non-UTF-8 bytes in the path are replaced (lossy), never a panic.
pub(crate) fn cluster_name(path: &Path, separator: &str, context: &str) -> String {
    format!("{}{}{}", path.to_string_lossy(), separator, context)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &Path) -> Options {
        Options {
            dirs: vec![dir.to_path_buf()],
            ..Options::default()
        }
    }

    #[test]
    fn default_globs_match_only_kubeconfig_names() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "kubeconfig.yaml",
            "kubeconfig.yml",
            "a.kubeconfig",
            "b.kubeconfig.yaml",
            "c.kubeconfig.yml",
            "notes.txt",
            "config",
            "kubeconfig.yaml.bak",
        ] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        std::fs::create_dir(dir.path().join("d.kubeconfig")).unwrap();
        let got: Vec<String> = collect_paths(&opts(dir.path()))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            got,
            vec![
                "a.kubeconfig",
                "b.kubeconfig.yaml",
                "c.kubeconfig.yml",
                "kubeconfig.yaml",
                "kubeconfig.yml"
            ]
        );
    }

    #[test]
    fn missing_paths_skipped_and_duplicates_listed_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.kubeconfig");
        std::fs::write(&file, "x").unwrap();
        let o = Options {
            files: vec![file.clone(), dir.path().join("missing"), file.clone()],
            dirs: vec![dir.path().to_path_buf(), dir.path().join("nope")],
            ..Options::default()
        };
        assert_eq!(collect_paths(&o), vec![file]);
    }

    #[test]
    fn odd_directory_names_are_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("we[ir]d *dir?");
        std::fs::create_dir(&odd).unwrap();
        std::fs::write(odd.join("m.kubeconfig"), "x").unwrap();
        assert_eq!(collect_paths(&opts(&odd)), vec![odd.join("m.kubeconfig")]);
    }

    #[test]
    fn invalid_glob_is_skipped_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.kubeconfig"), "x").unwrap();
        let o = Options {
            globs: vec!["[".into(), "*.kubeconfig".into()],
            ..opts(dir.path())
        };
        assert_eq!(collect_paths(&o).len(), 1);
    }

    #[test]
    fn names_join_path_separator_context() {
        assert_eq!(
            cluster_name(Path::new("/a/k.kubeconfig"), "+", "dev"),
            "/a/k.kubeconfig+dev"
        );
    }

    #[test]
    fn unreadable_and_garbage_files_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.kubeconfig"), [0xff, 0xfe, 0x00, b':']).unwrap();
        std::fs::write(dir.path().join("empty.kubeconfig"), "").unwrap();
        let files = scan(&opts(dir.path()));
        assert_eq!(files.len(), 2);
        assert!(files.iter().all(|f| f.result.is_err()));
    }
}
