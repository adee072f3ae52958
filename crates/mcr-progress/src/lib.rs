//! Progress of long-running mcr tooling (`cargo xtask assets`, `cargo xtask bench`,
//! `cargo xtask chaos`): on a terminal, an [`indicatif`] bar (or spinner) with the current step
//! and the elapsed time; anywhere else (CI logs, a pipe, `CI` set, `NO_PROGRESS` set), one plain
//! line when a step starts and one when it ends, and nothing redrawn.
//!
//! ```
//! let p = mcr_progress::Progress::steps("assets", 2);
//! p.start("kube-apiserver");
//! p.done();
//! p.start("etcd");
//! p.done();
//! p.finish();
//! ```

use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether progress is drawn live: stderr is a terminal and neither `CI` nor `NO_PROGRESS` is
/// set.
pub fn interactive() -> bool {
    std::io::stderr().is_terminal()
        && std::env::var_os("CI").is_none()
        && std::env::var_os("NO_PROGRESS").is_none()
}

/// Progress over a known number of steps (or an open-ended series, see [`Progress::spinner`]).
pub struct Progress {
    prefix: String,
    total: Option<u64>,
    bar: Option<ProgressBar>,
    state: Mutex<State>,
}

struct State {
    done: u64,
    step: Option<(String, Instant)>,
}

impl Progress {
    /// `total` steps under `prefix` (for example `assets`, `bench`).
    pub fn steps(prefix: &str, total: u64) -> Progress {
        Progress::new(prefix, Some(total))
    }

    /// Steps whose number is not known in advance: a spinner on a terminal.
    pub fn spinner(prefix: &str) -> Progress {
        Progress::new(prefix, None)
    }

    fn new(prefix: &str, total: Option<u64>) -> Progress {
        Progress::with_terminal(prefix, total, interactive())
    }

    fn with_terminal(prefix: &str, total: Option<u64>, live: bool) -> Progress {
        let bar = live.then(|| {
            let bar = match total {
                Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
                None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            };
            let template = match total {
                Some(_) => "{prefix:.bold} {spinner} [{pos}/{len}] {wide_msg} {elapsed}",
                None => "{prefix:.bold} {spinner} {wide_msg} {elapsed}",
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.set_prefix(prefix.to_owned());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress {
            prefix: prefix.to_owned(),
            total,
            bar,
            state: Mutex::new(State {
                done: 0,
                step: None,
            }),
        }
    }

    fn counter(&self, n: u64) -> String {
        match self.total {
            Some(total) => format!("[{n}/{total}] "),
            None => String::new(),
        }
    }

    /// A step begins: shown on the bar, or one line `prefix: [i/n] what ...`.
    pub fn start(&self, what: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let n = state.done + 1;
        state.step = Some((what.to_owned(), Instant::now()));
        match &self.bar {
            Some(bar) => bar.set_message(what.to_owned()),
            None => eprintln!("{}: {}{what} ...", self.prefix, self.counter(n)),
        }
    }

    /// The current step ended: the bar advances, or one line `prefix: [i/n] what done (12.3 s)`.
    pub fn done(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.done += 1;
        let n = state.done;
        let Some((what, since)) = state.step.take() else {
            return;
        };
        let secs = since.elapsed().as_secs_f64();
        match &self.bar {
            Some(bar) => {
                bar.inc(1);
                bar.println(format!(
                    "{}: {}{what} done ({secs:.1} s)",
                    self.prefix,
                    self.counter(n)
                ));
            }
            None => eprintln!(
                "{}: {}{what} done ({secs:.1} s)",
                self.prefix,
                self.counter(n)
            ),
        }
    }

    /// A line of output that must not be torn by the bar.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Removes the bar (nothing to do for plain lines).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_a_terminal_means_plain_lines() {
        let p = Progress::with_terminal("t", Some(1), false);
        assert!(p.bar.is_none());
        p.start("one");
        p.done();
        assert_eq!(p.state.lock().map(|s| s.done).unwrap_or_default(), 1);
    }
}
