//! The examples' log output: `RUST_LOG` (or a default filter), in colour only on a terminal.

use std::io::IsTerminal;

/// Where an example writes its log lines.
#[derive(Clone, Copy, Debug)]
pub enum Output {
    /// Standard output, beside what the example prints for its user.
    Stdout,
    /// Standard error, when standard output carries the example's own results.
    Stderr,
}

/// Installs the global subscriber: the filter from `RUST_LOG`, else `default_filter`; lines
/// to `output`, coloured only when `output` is a terminal and `NO_COLOR` is not set, so that
/// a file, a pipe, `kubectl logs` or `podman logs` gets plain text.
///
/// ```no_run
/// example_support::logs::init("warn", example_support::logs::Output::Stdout);
/// ```
pub fn init(default_filter: &str, output: Output) {
    let terminal = match output {
        Output::Stdout => std::io::stdout().is_terminal(),
        Output::Stderr => std::io::stderr().is_terminal(),
    };
    let ansi = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    match output {
        Output::Stdout => builder.init(),
        Output::Stderr => builder.with_writer(std::io::stderr).init(),
    }
}
