//! The test binary's `tracing` subscriber: written through the test harness, or captured so a
//! test can read what was logged.

use std::sync::{Arc, Mutex};

use tracing_subscriber::EnvFilter;

/// Installs a `tracing` subscriber honouring `RUST_LOG` (`warn` when unset) and writing through
/// the test harness, so the output shows with a failing test only. Once per test binary; later
/// calls, and calls after [`Logs::install`], do nothing.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
}

/// Everything the test binary logged, for tests that check what reaches the logs (that a
/// credential never does, that a failure is reported). A process has one subscriber: install
/// it once, before anything else logs.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Makes the process's subscriber write into a new `Logs`, at `filter` (an `EnvFilter`
    /// directive such as `warn,mcr_manager=info`), without colours and with thread names.
    ///
    /// # Panics
    ///
    /// When the process already has a subscriber.
    pub fn install(filter: &str) -> Logs {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_thread_names(true)
            .with_writer(move || writer.clone())
            .init();
        logs
    }

    /// Captures what this thread logs at `filter` (an `EnvFilter` directive) until the guard is
    /// dropped, whatever the process's subscriber. A `#[tokio::test]` runs every task on its
    /// own thread, so this sees what the code under test logs there, and nothing other tests
    /// log.
    pub fn scoped(filter: &str) -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
