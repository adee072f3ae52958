//! A child process that can never outlive this one.
//!
//! Every binary runs under a tiny `sh` guard that reads the guard's stdin, a pipe only this
//! process holds: when the pipe closes (this process exits, is killed, or drops the
//! [`Guarded`]) the guard SIGKILLs the binary. SIGTERM to the guard is forwarded, so a stop is
//! graceful first. No `unsafe`, no `prctl`: the kernel closing the pipe is the death signal.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

/// The guard: `$1..` is the command; `MCR_GUARD_CLEANUP` (optional) is removed at the end.
/// A SIGTERM is only remembered (`t`) for the first 100 ms, then forwarded: untrapped, one
/// that came while the guard was starting the binary would end the guard and leave the binary
/// running; and one forwarded at once could reach the forked child before it drops the
/// guard's trap, which loses it. Whatever still runs is killed when the pipe closes.
const GUARD: &str = r#"trap 't=1' TERM
exec 3<&0
"$@" </dev/null 3<&- &
c=$!
{ read _ <&3; kill -KILL "$c" 2>/dev/null; i=0; while kill -0 "$c" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; [ -n "$MCR_GUARD_CLEANUP" ] && rm -rf "$MCR_GUARD_CLEANUP"; } &
r=$!
exec 3<&- 0</dev/null
sleep 0.1
trap 'kill -TERM "$c" 2>/dev/null' TERM
[ -n "$t" ] && kill -TERM "$c" 2>/dev/null
while :; do wait "$c"; s=$?; kill -0 "$c" 2>/dev/null || break; done
kill "$r" 2>/dev/null
[ -n "$MCR_GUARD_CLEANUP" ] && rm -rf "$MCR_GUARD_CLEANUP"
exit $s
"#;

/// How long a stopped process gets between SIGTERM and SIGKILL.
pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// A running binary under the guard, with its output in a log file.
#[derive(Debug)]
pub(crate) struct Guarded {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
}

impl Guarded {
    /// Starts `binary args` with stdout and stderr appended to `log`.
    pub(crate) fn spawn(
        what: &str,
        binary: &Path,
        args: &[String],
        log: &Path,
        cleanup: Option<&Path>,
    ) -> Result<Guarded, Error> {
        let out = File::options().create(true).append(true).open(log)?;
        let err = out.try_clone()?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARD)
            .arg("mcr-envtest-guard")
            .arg(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        if let Some(dir) = cleanup {
            command.env("MCR_GUARD_CLEANUP", dir);
        }
        let mut child = command.spawn().map_err(|e| {
            Error::ControlPlane(format!("{what}: could not start {}: {e}", binary.display()))
        })?;
        let stdin = child.stdin.take();
        Ok(Guarded {
            what: what.to_string(),
            child,
            stdin,
            log: log.to_path_buf(),
        })
    }

    /// `Some(description)` once the process has exited.
    pub(crate) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown state: {e}")),
        }
    }

    /// The last lines of the process's output.
    pub(crate) fn log_tail(&self) -> String {
        log_tail(&self.log)
    }

    /// SIGTERM, then SIGKILL after `grace`; waits until the process is gone.
    pub(crate) async fn stop(mut self, grace: Duration) {
        if self.exited().is_none() {
            let pid = self.child.id().to_string();
            let sent = tokio::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .await;
            if let Err(err) = sent {
                tracing::warn!(what = %self.what, %err, "could not send SIGTERM");
            }
            let deadline = Instant::now() + grace;
            while self.exited().is_none() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // Closing the pipe makes the guard SIGKILL whatever is left.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.exited().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                tracing::warn!(what = %self.what, "the guard did not exit; killed it");
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The last ~40 lines of a log file (empty if unreadable).
pub(crate) fn log_tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon after).
pub(crate) fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: &str) -> bool {
        std::path::Path::new("/proc").join(pid).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    }

    fn spawn_sleeper(dir: &Path, trap_term: bool) -> (Guarded, String) {
        let script = if trap_term {
            "trap '' TERM; echo $$ > \"$0\"; while :; do sleep 0.1; done"
        } else {
            "echo $$ > \"$0\"; exec sleep 600"
        };
        let pidfile = dir.join(format!("pid-{trap_term}"));
        let args = vec![
            "-c".to_string(),
            script.to_string(),
            pidfile.display().to_string(),
        ];
        let log = dir.join("log");
        let guarded = Guarded::spawn("sleeper", Path::new("sh"), &args, &log, None).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let pid = loop {
            let pid = std::fs::read_to_string(&pidfile).unwrap_or_default();
            if !pid.trim().is_empty() {
                break pid.trim().to_string();
            }
            assert!(Instant::now() < deadline, "the sleeper never started");
            std::thread::sleep(Duration::from_millis(20));
        };
        (guarded, pid)
    }

    #[tokio::test]
    async fn drop_kills_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let (guarded, pid) = spawn_sleeper(dir.path(), false);
        assert!(alive(&pid));
        drop(guarded);
        crate::wait::eventually("the sleeper to die", Duration::from_secs(20), || {
            !alive(&pid)
        })
        .await;
    }

    #[tokio::test]
    async fn stop_terminates_then_kills() {
        let dir = tempfile::tempdir().unwrap();
        let (polite, polite_pid) = spawn_sleeper(dir.path(), false);
        polite.stop(Duration::from_secs(30)).await;
        // `stop` returns once the guard has exited; the binary it watched may take a moment
        // longer to be gone from /proc (seen once in CI right after `stop`).
        crate::wait::eventually(
            "SIGTERM to end a process that does not trap it",
            Duration::from_secs(20),
            || !alive(&polite_pid),
        )
        .await;
        let (stubborn, stubborn_pid) = spawn_sleeper(dir.path(), true);
        stubborn.stop(Duration::from_millis(200)).await;
        crate::wait::eventually("the stubborn one to die", Duration::from_secs(20), || {
            !alive(&stubborn_pid)
        })
        .await;
    }

    /// A stop that comes at once, while the guard may still be starting the binary: the
    /// binary never outlives it (SIGTERM before the guard set its trap once left it running).
    #[tokio::test]
    async fn an_immediate_stop_leaves_nothing_running() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..40 {
            let pidfile = dir.path().join(format!("pid-{i}"));
            let args = vec![
                "-c".to_string(),
                "echo $$ > \"$0\"; exec sleep 600".to_string(),
                pidfile.display().to_string(),
            ];
            let log = dir.path().join("log");
            let guarded = Guarded::spawn("sleeper", Path::new("sh"), &args, &log, None).unwrap();
            guarded.stop(Duration::from_secs(30)).await;
            // The binary may not have started at all; if it did, it is ended.
            let pid = std::fs::read_to_string(&pidfile).unwrap_or_default();
            let pid = pid.trim();
            if !pid.is_empty() {
                crate::wait::eventually(
                    &format!("round {i}: the binary started under a guard stopped at once to end"),
                    Duration::from_secs(20),
                    || !alive(pid),
                )
                .await;
            }
        }
    }

    #[test]
    fn log_tail_keeps_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let tail = log_tail(&path);
        assert!(
            tail.starts_with("line 60") && tail.ends_with("line 99"),
            "{tail}"
        );
    }
}
