//! Running the `kind` command line: bounded, killed when dropped, never blocking the runtime.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use mcr_core::members::Connection;

use crate::{Error, Options};

/// At most this many characters of `kind`'s stderr go into an error message.
const STDERR_LIMIT: usize = 300;
/// Printed by some kind versions instead of an empty list.
const NO_CLUSTERS: &str = "No kind clusters found.";

/// The `kind` executable and how to run it.
pub(crate) struct KindCli {
    bin: PathBuf,
    timeout: Duration,
    internal: bool,
}

impl KindCli {
    pub(crate) fn new(opts: &Options) -> Self {
        KindCli {
            bin: opts.kind_bin().to_path_buf(),
            timeout: opts.command_timeout,
            internal: opts.internal,
        }
    }

    /// `kind get clusters`: the names, in kind's order.
    pub(crate) async fn clusters(&self) -> Result<Vec<String>, Error> {
        let args = ["get", "clusters"];
        let stdout = self.run(&args).await?;
        let text = String::from_utf8(stdout).map_err(|_| Error::Output {
            command: args.join(" "),
            reason: "the output is not UTF-8".to_string(),
        })?;
        Ok(parse_clusters(&text))
    }

    /// The connection `kind get kubeconfig --name <name> [--internal]` prints. What kind
    /// printed is a credential: it is never logged or put in an error.
    pub(crate) async fn connection(&self, name: &str) -> Result<Connection, Error> {
        let mut args = vec!["get", "kubeconfig", "--name", name];
        if self.internal {
            args.push("--internal");
        }
        let stdout = self.run(&args).await?;
        // kind sets current-context to `kind-<name>`.
        Connection::parse(&stdout).map_err(|source| Error::Kubeconfig {
            command: args.join(" "),
            source,
        })
    }

    /// Runs `kind <args>` and returns its stdout. Bounded by the command timeout; the process
    /// is killed when it passes, or when the future is dropped.
    async fn run(&self, args: &[&str]) -> Result<Vec<u8>, Error> {
        let command = args.join(" ");
        let child = tokio::process::Command::new(&self.bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| spawn_error(&self.bin, source))?;
        // Dropping the `wait_with_output` future drops the child, which kills it.
        let output = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Err(_) => {
                return Err(Error::Timeout {
                    command,
                    timeout: self.timeout,
                });
            }
            Ok(Err(source)) => {
                return Err(Error::Spawn {
                    bin: self.bin.clone(),
                    source,
                });
            }
            Ok(Ok(output)) => output,
        };
        if !output.status.success() {
            return Err(Error::Failed {
                command,
                status: output.status.to_string(),
                stderr: stderr_summary(&output.stderr),
            });
        }
        Ok(output.stdout)
    }
}

/// A spawn failure, with the install hint when the program does not exist.
fn spawn_error(bin: &Path, source: std::io::Error) -> Error {
    if source.kind() == std::io::ErrorKind::NotFound {
        Error::NotInstalled {
            bin: bin.to_path_buf(),
            path_var: std::env::var("PATH").unwrap_or_default(),
        }
    } else {
        Error::Spawn {
            bin: bin.to_path_buf(),
            source,
        }
    }
}

/// The cluster names in the output of `kind get clusters`: one per line.
pub(crate) fn parse_clusters(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && *line != NO_CLUSTERS)
        .filter(|line| {
            let ok = !line.contains(char::is_whitespace);
            if !ok {
                tracing::debug!(
                    line,
                    "ignoring a line of `kind get clusters` that is not a name"
                );
            }
            ok
        })
        .map(str::to_owned)
        .collect()
}

/// The last non-empty line of stderr, shortened: kind's error ("ERROR: ...") is the last line.
fn stderr_summary(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("(no output on stderr)");
    match line.char_indices().nth(STDERR_LIMIT) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_list_parsing() {
        assert_eq!(parse_clusters("a\n\n b \nfleet-1\n"), ["a", "b", "fleet-1"]);
        assert!(parse_clusters("No kind clusters found.\n").is_empty());
        assert!(parse_clusters("").is_empty());
        assert_eq!(parse_clusters("not a name\nok"), ["ok"]);
    }

    #[test]
    fn stderr_is_summarized_to_its_last_line() {
        let err = b"Creating...\nERROR: could not locate any control plane nodes\n\n";
        assert_eq!(
            stderr_summary(err),
            "ERROR: could not locate any control plane nodes"
        );
        assert_eq!(stderr_summary(b""), "(no output on stderr)");
        let long = "x".repeat(1000);
        assert_eq!(
            stderr_summary(long.as_bytes()).len(),
            STDERR_LIMIT + "...".len()
        );
    }
}
