//! Directory watches (files are replaced atomically by editors and tools, so the provider
//! watches parent directories) and which filesystem events matter.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tracing::{debug, warn};

use crate::Options;
use crate::refs::is_referenced;

/// The watched directories of one provider run.
pub(crate) struct Watches {
    watcher: RecommendedWatcher,
    watched: BTreeSet<PathBuf>,
}

impl Watches {
    pub(crate) fn new(watcher: RecommendedWatcher) -> Self {
        Watches {
            watcher,
            watched: BTreeSet::new(),
        }
    }

    /// Watches what [`targets`] says now, and the directories of the `referenced` files; a missing directory is replaced by its nearest
    /// existing ancestor, so its creation is noticed (and the next update watches it).
    pub(crate) fn update(&mut self, opts: &Options, referenced: &BTreeSet<PathBuf>) {
        let mut targets = targets(opts);
        targets.extend(
            referenced
                .iter()
                .filter_map(|f| existing_ancestor(&parent(f))),
        );
        let stale: Vec<PathBuf> = self.watched.difference(&targets).cloned().collect();
        for path in stale {
            // The directory may be gone already (the kernel dropped the watch): ignore errors.
            let _ = self.watcher.unwatch(&path);
            self.watched.remove(&path);
        }
        for path in targets {
            if self.watched.contains(&path) {
                continue;
            }
            match self.watcher.watch(&path, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    debug!(dir = %path.display(), "watching directory");
                    self.watched.insert(path);
                }
                Err(err) => warn!(dir = %path.display(), error = %err, "cannot watch directory"),
            }
        }
    }
}

/// Parent directories of the files and the directories themselves (or their nearest existing
/// ancestors).
fn targets(opts: &Options) -> BTreeSet<PathBuf> {
    let parents = opts.files.iter().map(|f| parent(f));
    parents
        .chain(opts.dirs.iter().cloned())
        .filter_map(|d| existing_ancestor(&d))
        .collect()
}

fn parent(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn existing_ancestor(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|a| {
            if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            }
        })
        .find(|a| a.is_dir())
        .map(Path::to_path_buf)
}

/// Drops a leading `./` so `./x` and `x` compare equal.
fn norm(p: &Path) -> PathBuf {
    let mut c = p.components().peekable();
    if matches!(c.peek(), Some(Component::CurDir)) {
        c.next();
    }
    c.collect()
}

/// Whether a filesystem event may change the fleet. Reads (our own included) never do; an
/// event without paths (the watcher asks for a rescan) always may.
pub(crate) fn is_relevant(
    event: &notify::Event,
    opts: &Options,
    patterns: &[glob::Pattern],
    referenced: &BTreeSet<PathBuf>,
) -> bool {
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        EventKind::Access(_) => return false,
        _ => {}
    }
    if event.paths.is_empty() || event.need_rescan() {
        return true;
    }
    event
        .paths
        .iter()
        .any(|p| path_is_relevant(&norm(p), opts, patterns) || is_referenced(&norm(p), referenced))
}

fn path_is_relevant(path: &Path, opts: &Options, patterns: &[glob::Pattern]) -> bool {
    let files = opts.files.iter().map(|f| norm(f));
    let dirs = opts.dirs.iter().map(|d| norm(d));
    let mut all = files.clone().chain(dirs.clone());
    // The file itself, or an ancestor of a configured path (created, removed, renamed).
    if all.any(|t| t.starts_with(path)) {
        return true;
    }
    let (Some(parent), Some(file_name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let file_name = file_name.to_string_lossy();
    opts.dirs.iter().any(|d| norm(d) == parent)
        && patterns
            .iter()
            .any(|p| p.matches(&file_name) || p.as_str().contains(['/', std::path::MAIN_SEPARATOR]))
}

/// The glob patterns compiled for event filtering (invalid ones are skipped; the scan logs them).
pub(crate) fn compile(globs: &[String]) -> Vec<glob::Pattern> {
    globs
        .iter()
        .filter_map(|g| glob::Pattern::new(g).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, ModifyKind};

    fn event(kind: EventKind, path: &str) -> notify::Event {
        notify::Event::new(kind).add_path(PathBuf::from(path))
    }

    fn opts() -> Options {
        Options {
            files: vec!["/etc/kube/config".into(), "local.yaml".into()],
            dirs: vec!["/fleet/kc".into()],
            ..Options::default()
        }
    }

    #[test]
    fn relevance() {
        let o = opts();
        let p = compile(&o.globs);
        let none = BTreeSet::new();
        let create = EventKind::Create(CreateKind::File);
        assert!(is_relevant(
            &event(create, "/fleet/kc/a.kubeconfig"),
            &o,
            &p,
            &none
        ));
        assert!(!is_relevant(
            &event(create, "/fleet/kc/notes.txt"),
            &o,
            &p,
            &none
        ));
        assert!(is_relevant(
            &event(create, "/etc/kube/config"),
            &o,
            &p,
            &none
        ));
        assert!(!is_relevant(
            &event(create, "/etc/kube/other"),
            &o,
            &p,
            &none
        ));
        assert!(is_relevant(&event(create, "./local.yaml"), &o, &p, &none));
        assert!(
            is_relevant(&event(create, "/fleet"), &o, &p, &none),
            "ancestor of a configured dir"
        );
        let modify = EventKind::Modify(ModifyKind::Any);
        assert!(is_relevant(
            &event(modify, "/fleet/kc/kubeconfig.yaml"),
            &o,
            &p,
            &none
        ));
        let open = EventKind::Access(AccessKind::Open(AccessMode::Any));
        assert!(!is_relevant(
            &event(open, "/fleet/kc/a.kubeconfig"),
            &o,
            &p,
            &none
        ));
        let written = EventKind::Access(AccessKind::Close(AccessMode::Write));
        assert!(is_relevant(
            &event(written, "/fleet/kc/a.kubeconfig"),
            &o,
            &p,
            &none
        ));
        assert!(is_relevant(
            &notify::Event::new(EventKind::Other),
            &o,
            &p,
            &none
        ));
    }

    #[test]
    fn targets_fall_back_to_existing_ancestors() {
        let dir = tempfile::tempdir().unwrap();
        let o = Options {
            files: vec![dir.path().join("a/b/config")],
            dirs: vec![dir.path().join("kc"), dir.path().to_path_buf()],
            ..Options::default()
        };
        assert_eq!(targets(&o), BTreeSet::from([dir.path().to_path_buf()]));
        std::fs::create_dir(dir.path().join("kc")).unwrap();
        assert_eq!(
            targets(&o),
            BTreeSet::from([dir.path().to_path_buf(), dir.path().join("kc")])
        );
    }
}
