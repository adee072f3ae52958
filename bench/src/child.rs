//! Runs one measurement in a child process (`mcr-bench run-one ...`), so every side's peak
//! RSS is its own, and reads back the JSON it prints.

use std::{
    io::{BufRead, BufReader, Write as _},
    path::Path,
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc::{self, Receiver, RecvTimeoutError},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

/// The line prefix a child prints its result with.
pub const RESULT: &str = "RESULT ";

/// Prints a child's result (with its own `VmHWM`/`VmRSS` added unless it holds them) for the
/// parent to read.
pub fn report(mut result: Value) {
    let (rss, hwm) = crate::machine::own_memory();
    if let Value::Object(map) = &mut result {
        // A child may have read them itself before building a large result (B8's `rises`).
        map.entry("vm_rss_kib").or_insert(rss.into());
        map.entry("vm_hwm_kib").or_insert(hwm.into());
    }
    println!("{RESULT}{result}");
}

/// Runs `mcr-bench run-one <args>` and returns the JSON it reported.
pub fn run_one(args: &[String]) -> Result<Value> {
    let exe = std::env::current_exe().context("locating mcr-bench")?;
    eprintln!("  run-one {}", args.join(" "));
    // Under the command in `MCR_BENCH_WRAP` if set, like the sessions (for profiling).
    let wrap = std::env::var("MCR_BENCH_WRAP").unwrap_or_default();
    let mut wrapper = wrap.split_whitespace();
    let mut command = match wrapper.next() {
        Some(program) => {
            let mut c = Command::new(program);
            c.args(wrapper).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    let mut child = command
        .arg("run-one")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting mcr-bench run-one")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let mut result = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading child output")?;
        match line.strip_prefix(RESULT) {
            Some(json) => result = Some(serde_json::from_str(json).context("child JSON")?),
            None => eprintln!("  | {line}"),
        }
    }
    let status = child.wait().context("waiting for child")?;
    match result {
        Some(value) if status.success() => Ok(value),
        _ => bail!("`mcr-bench run-one {}` failed ({status})", args.join(" ")),
    }
}

/// A number from a child's result.
pub fn num(v: &Value, key: &str) -> Result<f64> {
    v.get(key)
        .and_then(Value::as_f64)
        .with_context(|| format!("child result has no number {key:?}: {v}"))
}

/// A child that talks with its parent while it runs: it prints marker lines (`READY`,
/// `DONE`, ...) the parent waits for, and reads commands from its stdin. Each line is
/// stamped when the parent's reader thread receives it, so the parent can time the child's
/// milestones against its own actions (the loader runs in the parent).
pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<(Instant, String)>,
    result: Option<Value>,
    args: String,
}

/// Where a child's log goes: the runner's standard error, or with `MCR_BENCH_CHILD_LOGS=<dir>`
/// a file of its own there, named after its arguments (to follow one replica of many).
fn child_log(args: &[String]) -> Result<Stdio> {
    let Some(dir) = std::env::var_os("MCR_BENCH_CHILD_LOGS") else {
        return Ok(Stdio::inherit());
    };
    let name: String = args
        .iter()
        .filter(|a| !a.starts_with('-') && !a.contains('/'))
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    std::fs::create_dir_all(&dir)?;
    let path = Path::new(&dir).join(format!("{name}.log"));
    let file =
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok(file.into())
}

impl Session {
    /// Starts `mcr-bench run-one <args>`, under the command in `MCR_BENCH_WRAP` if set (for
    /// profiling, e.g. `MCR_BENCH_WRAP="valgrind --tool=massif"`).
    pub fn start(args: &[String]) -> Result<Session> {
        let exe = std::env::current_exe().context("locating mcr-bench")?;
        let mut all = vec!["run-one".to_string()];
        all.extend_from_slice(args);
        Session::start_program(&exe, &all)
    }

    /// Starts `program args` (another program speaking the same protocol, e.g. the Go peer),
    /// under the command in `MCR_BENCH_WRAP` if set.
    pub fn start_program(program: &Path, args: &[String]) -> Result<Session> {
        let wrap = std::env::var("MCR_BENCH_WRAP").unwrap_or_default();
        let wrap: Vec<String> = wrap.split_whitespace().map(String::from).collect();
        Session::start_wrapped(&wrap, program, args)
    }

    /// Starts `wrapper... program args` (no wrapper when `wrapper` is empty).
    pub fn start_wrapped(wrapper: &[String], program: &Path, args: &[String]) -> Result<Session> {
        eprintln!(
            "  {} {} {}",
            wrapper.join(" "),
            program.display(),
            args.join(" ")
        );
        let mut wrap = wrapper.iter();
        let mut command = match wrap.next() {
            Some(wrapper) => {
                let mut c = Command::new(wrapper);
                c.args(wrap).arg(program);
                c
            }
            None => Command::new(program),
        };
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(child_log(args)?)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Ok(Session {
            child,
            stdin,
            lines,
            result: None,
            args: format!("{} {}", program.display(), args.join(" ")),
        })
    }

    /// Handles one line; returns it unless it was the result or a log line.
    fn take(&mut self, line: String) -> Result<Option<String>> {
        if let Some(json) = line.strip_prefix(RESULT) {
            self.result = Some(serde_json::from_str(json).context("child JSON")?);
            return Ok(None);
        }
        Ok(Some(line))
    }

    /// Waits (up to `timeout`) for a line equal to `marker`; returns when the parent got it.
    pub fn wait_for(&mut self, marker: &str, timeout: Duration) -> Result<Instant> {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let (at, line) = match self.lines.recv_timeout(left) {
                Ok(got) => got,
                Err(RecvTimeoutError::Timeout) => {
                    bail!("`{}`: no {marker} within {timeout:?}", self.args)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().context("waiting for child")?;
                    bail!("`{}` exited ({status}) before {marker}", self.args)
                }
            };
            match self.take(line)? {
                Some(line) if line == marker => return Ok(at),
                Some(line) => eprintln!("  | {line}"),
                None => {}
            }
        }
    }

    /// The lines the child printed so far, each stamped when the parent received it: waits up
    /// to `wait` for the first, then takes whatever else is there without waiting.
    pub fn lines(&mut self, wait: Duration) -> Result<Vec<(Instant, String)>> {
        let mut out = Vec::new();
        let first = match self.lines.recv_timeout(wait) {
            Ok(got) => Some(got),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => bail!("`{}` exited", self.args),
        };
        let mut got: Vec<(Instant, String)> = first.into_iter().collect();
        while let Ok(next) = self.lines.try_recv() {
            got.push(next);
        }
        for (at, line) in got {
            if let Some(line) = self.take(line)? {
                out.push((at, line));
            }
        }
        Ok(out)
    }

    /// Kills the child at once (SIGKILL: no goodbye) and reaps it.
    pub fn kill(&mut self) -> Result<()> {
        self.child.kill().context("killing child")?;
        self.child.wait().context("waiting for child")?;
        Ok(())
    }

    /// Stops the child cleanly: closes its stdin (the children end their run on that) and
    /// waits for it to exit.
    pub fn stop(&mut self) -> Result<()> {
        drop(self.stdin.take());
        self.child.wait().context("waiting for child")?;
        Ok(())
    }

    /// Sends one line to the child's stdin.
    pub fn send(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().context("child stdin closed")?;
        writeln!(stdin, "{line}").context("writing to child")?;
        stdin.flush().context("writing to child")
    }

    /// Reads the rest of the output and returns the child's result.
    pub fn finish(mut self) -> Result<Value> {
        drop(self.stdin.take());
        while let Ok((_, line)) = self.lines.recv() {
            if let Some(line) = self.take(line)? {
                eprintln!("  | {line}");
            }
        }
        let status = self.child.wait().context("waiting for child")?;
        match self.result.take() {
            Some(value) if status.success() => Ok(value),
            _ => bail!("`{}` failed ({status})", self.args),
        }
    }

    /// The child's process id (to read its `/proc` entries from the parent).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Only still running when the parent gave up on it.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Child side of a [`Session`]: prints a marker line for the parent.
pub fn mark(marker: &str) {
    println!("{marker}");
}

/// Child side of a [`Session`]: reads the next line the parent sent (without its newline).
pub async fn read_command() -> Result<String> {
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await
    .context("stdin reader")?
    .context("reading stdin")?;
    Ok(line.trim_end().to_string())
}
