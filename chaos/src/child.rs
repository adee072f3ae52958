//! The parent's side of the manager child process (see [`crate::manager`]).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::manager::Stats;

/// How long the child may take to answer a command.
const ANSWER_BOUND: Duration = Duration::from_secs(30);

/// The manager child process; killed on drop.
pub struct Manager {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// The manager's HTTP endpoint.
    pub addr: SocketAddr,
}

impl Manager {
    /// Starts `mcr-chaos --serve-manager dir --host-kubeconfig host` (with
    /// `--default-settings` when asked) and waits until it is ready (at most 60 s).
    pub async fn start(dir: &Path, host: &Path, default_settings: bool) -> Result<Manager> {
        Self::start_with(dir, host, default_settings, &[], None).await
    }

    /// [`start`](Self::start) with `extra` arguments (a replica of the sharded suite), its
    /// stderr (its logs) written to `log` when given instead of this process's.
    pub async fn start_with(
        dir: &Path,
        host: &Path,
        default_settings: bool,
        extra: &[String],
        log: Option<&Path>,
    ) -> Result<Manager> {
        let exe = std::env::current_exe().context("this program's path")?;
        let mut command = Command::new(exe);
        command
            .arg("--serve-manager")
            .arg(dir)
            .arg("--host-kubeconfig")
            .arg(host);
        if default_settings {
            command.arg("--default-settings");
        }
        command.args(extra);
        let stderr = match log {
            Some(path) => Stdio::from(
                std::fs::File::create(path)
                    .with_context(|| format!("creating {}", path.display()))?,
            ),
            None => Stdio::inherit(),
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .context("starting the manager process")?;
        let stdin = child.stdin.take().context("child stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("child stdout")?).lines();
        let mut mgr = Manager {
            child,
            stdin,
            stdout,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let line = tokio::time::timeout(Duration::from_secs(60), mgr.stdout.next_line())
            .await
            .context("the manager was not ready within 60 s")??
            .context("the manager exited before it was ready")?;
        let addr = line
            .strip_prefix("ready ")
            .with_context(|| format!("unexpected first line from the manager: {line}"))?;
        mgr.addr = addr.parse().context("the manager's address")?;
        Ok(mgr)
    }

    /// The child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn ask(&mut self, command: &str) -> Result<String> {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await?;
        self.stdin.flush().await?;
        match tokio::time::timeout(ANSWER_BOUND, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => bail!("the manager process exited"),
            Ok(Err(err)) => Err(err.into()),
            Err(_) => bail!("the manager did not answer {command:?} within 30 s"),
        }
    }

    /// The child's view of itself.
    pub async fn stats(&mut self) -> Result<Stats> {
        let line = self.ask("stats").await?;
        serde_json::from_str(&line).with_context(|| format!("stats: {line}"))
    }

    /// Asks the child to hand its allocator's free pages back to the OS (see `trim.rs`).
    pub async fn trim(&mut self) -> Result<()> {
        let line = self.ask("trim").await?;
        anyhow::ensure!(line.starts_with("trimmed"), "trim: {line}");
        Ok(())
    }

    /// Stops the manager; `Ok` if it stopped cleanly within its bound, else why not.
    pub async fn stop(mut self) -> Result<()> {
        let answer = self.ask("stop").await;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        match answer {
            Ok(line) if line == "stopped ok" => Ok(()),
            Ok(line) => bail!("{line}"),
            Err(err) => Err(err),
        }
    }

    /// Kills the process with SIGKILL and reaps it.
    pub async fn kill(&mut self) -> Result<()> {
        self.child.start_kill().context("kill -9")?;
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .context("the killed process was not reaped within 10 s")??;
        Ok(())
    }
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid` with `kill(1)`.
pub fn signal(pid: Option<u32>, signal: &str) -> Result<()> {
    let pid = pid.context("no process id")?;
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .context("running kill")?;
    anyhow::ensure!(status.success(), "kill -{signal} {pid}: {status}");
    Ok(())
}

/// Resident set size of process `pid` (bytes), from `/proc/<pid>/status`.
pub fn rss_of(pid: Option<u32>) -> u64 {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => return 0,
    };
    let status = std::fs::read_to_string(path).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}
