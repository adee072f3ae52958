//! Runs one measurement in a child process (`mcr-bench run-one ...`), so every side's peak
//! RSS is its own, and reads back the JSON it prints.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

/// The line prefix a child prints its result with.
pub const RESULT: &str = "RESULT ";

/// Prints a child's result (with its own `VmHWM`/`VmRSS` added) for the parent to read.
pub fn report(mut result: Value) {
    let (rss, hwm) = crate::machine::own_memory();
    if let Value::Object(map) = &mut result {
        map.insert("vm_rss_kib".into(), rss.into());
        map.insert("vm_hwm_kib".into(), hwm.into());
    }
    println!("{RESULT}{result}");
}

/// Runs `mcr-bench run-one <args>` and returns the JSON it reported.
pub fn run_one(args: &[String]) -> Result<Value> {
    let exe = std::env::current_exe().context("locating mcr-bench")?;
    eprintln!("  run-one {}", args.join(" "));
    let mut child = Command::new(exe)
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
