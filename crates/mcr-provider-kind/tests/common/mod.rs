//! The kind provider's own test helpers, used by both its test binaries: a fake `kind`
//! executable over emulated HTTPS clusters, and what these tests add to a running provider.
#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcr_core::{MemberState, Provider};
use mcr_envtest::TestCluster;
use mcr_provider_kind::{KindProvider, Options};
pub use mcr_test_support::{WAIT, init_tracing};

/// The fake: `get clusters` lists `state/<name>.kubeconfig` and `state/<name>.hang`
/// (fails while `fail-list` exists); `get kubeconfig --name <name>` prints
/// `state/<name>.kubeconfig` (hangs while `state/<name>.hang` exists, fails when neither
/// exists). Every call is appended to `calls.log`.
const SCRIPT: &str = r#"#!/bin/sh
dir='@DIR@'
echo "$*" >> "$dir/calls.log"
if [ "$1" = get ] && [ "$2" = clusters ]; then
  if [ -e "$dir/fail-list" ]; then
    echo 'ERROR: failed to list clusters: command "docker ps -a" failed with error: exit status 1' >&2
    exit 1
  fi
  for f in "$dir"/state/*; do
    n="${f##*/}"
    case "$n" in
      *.kubeconfig) echo "${n%.kubeconfig}" ;;
      *.hang) echo "${n%.hang}" ;;
    esac
  done
  exit 0
fi
if [ "$1" = get ] && [ "$2" = kubeconfig ] && [ "$3" = --name ]; then
  if [ -e "$dir/state/$4.hang" ]; then exec sleep 120; fi
  if [ -e "$dir/state/$4.kubeconfig" ]; then exec cat "$dir/state/$4.kubeconfig"; fi
  echo "ERROR: could not locate any control plane nodes for cluster named '$4'" >&2
  exit 1
fi
echo "ERROR: unknown command: $*" >&2
exit 2
"#;

pub struct FakeKind {
    dir: tempfile::TempDir,
}

impl FakeKind {
    pub fn new() -> FakeKind {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("state")).unwrap();
        let bin = dir.path().join("kind");
        let script = SCRIPT.replace("@DIR@", &dir.path().to_string_lossy());
        std::fs::write(&bin, script).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        FakeKind { dir }
    }

    pub fn bin(&self) -> PathBuf {
        self.dir.path().join("kind")
    }

    fn state(&self, file: &str) -> PathBuf {
        self.dir.path().join("state").join(file)
    }

    /// Lists `name` with `contents` as its kubeconfig (written atomically).
    pub fn set_raw(&self, name: &str, contents: &str) {
        let tmp = self.dir.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, contents).unwrap();
        std::fs::rename(&tmp, self.state(&format!("{name}.kubeconfig"))).unwrap();
    }

    /// Lists `name`, served by `cluster`.
    pub fn set(&self, name: &str, cluster: &TestCluster) {
        self.set_raw(name, &cluster.kubeconfig_yaml().expect("an HTTPS cluster"));
    }

    /// `name` leaves the list.
    pub fn remove(&self, name: &str) {
        for file in [format!("{name}.kubeconfig"), format!("{name}.hang")] {
            let _ = std::fs::remove_file(self.state(&file));
        }
    }

    /// `kind get kubeconfig --name <name>` hangs (on) or not (off).
    pub fn hang(&self, name: &str, on: bool) {
        let path = self.state(&format!("{name}.hang"));
        if on {
            std::fs::write(path, "").unwrap();
        } else {
            let _ = std::fs::remove_file(path);
        }
    }

    /// `kind get clusters` fails (on) or not (off).
    pub fn fail_list(&self, on: bool) {
        let path = self.dir.path().join("fail-list");
        if on {
            std::fs::write(path, "").unwrap();
        } else {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Every invocation so far, as its argument string.
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// How many times the arguments were exactly `args`.
    pub fn count(&self, args: &str) -> usize {
        self.calls().iter().filter(|c| *c == args).count()
    }

    /// Options pointing at this fake, with short intervals.
    pub fn options(&self) -> Options {
        Options {
            kind_bin: Some(self.bin()),
            poll_interval: Duration::from_millis(50),
            refresh_interval: Duration::from_millis(200),
            command_timeout: Duration::from_secs(10),
            members: mcr_test_support::fast_members(),
            ..Options::default()
        }
    }
}

/// The provider under test, running.
pub type Running = mcr_test_support::Running<KindProvider>;

/// What these tests add to [`Running`].
pub trait KindRun {
    /// A provider with `opts`, started.
    fn start(opts: Options) -> Running;
    /// The last error of the listed cluster `name`, if its last attempt failed.
    fn failure(&self, name: &str) -> Option<String>;
    /// The clusters whose last attempt failed, sorted.
    fn failed(&self) -> Vec<String>;
}

impl KindRun for Running {
    fn start(opts: Options) -> Running {
        init_tracing();
        Running::spawn(KindProvider::new(opts))
    }

    fn failure(&self, name: &str) -> Option<String> {
        self.provider
            .member_statuses()
            .into_iter()
            .find(|s| s.name == name)
            .and_then(|s| match s.state {
                MemberState::Failed { reason, .. } => Some(reason),
                _ => None,
            })
    }

    fn failed(&self) -> Vec<String> {
        self.provider
            .member_statuses()
            .into_iter()
            .filter(|s| matches!(s.state, MemberState::Failed { .. }))
            .map(|s| s.name.to_string())
            .collect()
    }
}

/// The path of a file that does not exist.
pub fn nowhere(dir: &Path) -> PathBuf {
    dir.join("no-such-kind")
}
