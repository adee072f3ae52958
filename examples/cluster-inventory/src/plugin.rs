//! A credential plugin for tests and the demo, in the spirit of upstream's `secretreader`:
//! reads `KUBERNETES_EXEC_INFO`, picks a token and prints an `ExecCredential`.
//!
//! * `--token-file FILE`: the token is the content of FILE;
//! * `--token-dir DIR`: the token is the content of `DIR/<clusterName>`, where `clusterName`
//!   comes from `spec.cluster.config` (the profile's `client.authentication.k8s.io/exec`
//!   extension, passed with `provideClusterInfo`);
//! * `--record FILE`: appends one JSON line per run (its arguments, `MCR_PLUGIN_*` variables,
//!   the cluster it was given), so tests can see exactly how it was invoked;
//! * `spec.cluster.config.mode` (or `MCR_PLUGIN_MODE`): `hang` (sleeps `hangSeconds`, default
//!   5, then fails), `fail` (exits 1 with a message on stderr), `garbage` (prints something that
//!   is not an ExecCredential). Both print the marker [`OUTPUT_MARKER`], which must never reach
//!   the provider's errors or logs.
//!
//! Unknown arguments are ignored.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

/// Printed by failing modes; tests check it never leaks.
pub const OUTPUT_MARKER: &str = "PLUGIN-OUTPUT-MUST-NOT-LEAK";

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Runs the plugin with the process's arguments and environment.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let info: Value = match std::env::var("KUBERNETES_EXEC_INFO")
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
    {
        Some(info) => info,
        None => {
            eprintln!("mcr-inventory-test-plugin: KUBERNETES_EXEC_INFO is missing or not JSON");
            return ExitCode::FAILURE;
        }
    };
    let cluster = info["spec"]["cluster"].clone();
    let config = cluster["config"].clone();
    if let Some(path) = flag(&args, "--record") {
        let env: serde_json::Map<String, Value> = std::env::vars()
            .filter(|(k, _)| k.starts_with("MCR_PLUGIN_"))
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        let line = json!({
            "argv0": std::env::args().next(),
            "args": args,
            "env": env,
            "server": cluster["server"],
            "config": config,
        });
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            // One write per line, so concurrent runs append whole lines.
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if written.is_err() {
            eprintln!("mcr-inventory-test-plugin: cannot write {path}");
            return ExitCode::FAILURE;
        }
    }
    let mode = config["mode"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| std::env::var("MCR_PLUGIN_MODE").ok())
        .unwrap_or_default();
    match mode.as_str() {
        "hang" => {
            let secs = config["hangSeconds"].as_u64().unwrap_or(5);
            std::thread::sleep(Duration::from_secs(secs));
            eprintln!("{OUTPUT_MARKER}: gave up after hanging");
            return ExitCode::FAILURE;
        }
        "fail" => {
            eprintln!("{OUTPUT_MARKER}: failing on purpose");
            return ExitCode::FAILURE;
        }
        "garbage" => {
            println!("{OUTPUT_MARKER} this is not an ExecCredential");
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let token_path = match (flag(&args, "--token-file"), flag(&args, "--token-dir")) {
        (Some(file), _) => file,
        (None, Some(dir)) => match config["clusterName"].as_str() {
            Some(name) if !name.contains('/') && !name.is_empty() => format!("{dir}/{name}"),
            _ => {
                eprintln!("mcr-inventory-test-plugin: spec.cluster.config.clusterName is missing");
                return ExitCode::FAILURE;
            }
        },
        (None, None) => {
            eprintln!("mcr-inventory-test-plugin: --token-file or --token-dir is required");
            return ExitCode::FAILURE;
        }
    };
    let token = match std::fs::read_to_string(&token_path) {
        Ok(token) => token.trim().to_owned(),
        Err(err) => {
            eprintln!("mcr-inventory-test-plugin: cannot read {token_path}: {err}");
            return ExitCode::FAILURE;
        }
    };
    let api_version = info["apiVersion"]
        .as_str()
        .unwrap_or("client.authentication.k8s.io/v1");
    let credential = json!({
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "status": {"token": token},
    });
    println!("{credential}");
    ExitCode::SUCCESS
}
