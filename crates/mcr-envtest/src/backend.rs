//! Which kind of control plane [`TestCluster`](crate::TestCluster) and
//! [`Fleet`](crate::Fleet) start: the built-in emulator or real `kube-apiserver` + `etcd`.

use crate::Error;

/// The environment variable that picks the backend: `emulator` (the default) or `real`.
pub const BACKEND_ENV: &str = "MCR_ENVTEST";

/// The kind of control plane behind a [`TestCluster`](crate::TestCluster).
///
/// ```
/// use mcr_envtest::Backend;
/// assert_eq!(Backend::parse("real").unwrap(), Backend::Real);
/// assert_eq!(Backend::parse("").unwrap(), Backend::Emulator);
/// assert!(Backend::parse("kind").is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The in-process emulator of this crate: nothing to install, microseconds per cluster.
    Emulator,
    /// Real `kube-apiserver` processes over one shared `etcd`, found as described in
    /// [`real`](crate::real). Seconds per cluster.
    Real,
}

impl Backend {
    /// Parses a value of [`BACKEND_ENV`]: `emulator` or empty, or `real`.
    ///
    /// ```
    /// assert!(mcr_envtest::Backend::parse("emulator").is_ok());
    /// ```
    pub fn parse(value: &str) -> Result<Backend, Error> {
        match value.trim() {
            "" | "emulator" => Ok(Backend::Emulator),
            "real" => Ok(Backend::Real),
            other => Err(Error::Backend(format!(
                "{BACKEND_ENV}={other:?} is not a backend: use `emulator` (the default) or `real`"
            ))),
        }
    }

    /// The backend [`BACKEND_ENV`] asks for (the emulator when unset).
    ///
    /// ```
    /// let backend = mcr_envtest::Backend::from_env()?;
    /// # Ok::<(), mcr_envtest::Error>(())
    /// ```
    pub fn from_env() -> Result<Backend, Error> {
        match std::env::var(BACKEND_ENV) {
            Ok(value) => Backend::parse(&value),
            Err(std::env::VarError::NotPresent) => Ok(Backend::Emulator),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::Backend(format!(
                "{BACKEND_ENV} is not valid UTF-8: use `emulator` or `real`"
            ))),
        }
    }

    /// Whether this is [`Backend::Real`].
    ///
    /// ```
    /// assert!(mcr_envtest::Backend::Real.is_real());
    /// ```
    pub fn is_real(self) -> bool {
        self == Backend::Real
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Emulator => "emulator",
            Backend::Real => "real",
        })
    }
}

/// The backend of this process, from [`BACKEND_ENV`].
///
/// # Panics
///
/// When [`BACKEND_ENV`] holds something other than `emulator` or `real` (a test run with a
/// misspelt switch must not quietly fall back to the emulator).
///
/// ```
/// if mcr_envtest::backend().is_real() {
///     println!("running against real control planes");
/// }
/// ```
pub fn backend() -> Backend {
    match Backend::from_env() {
        Ok(backend) => backend,
        Err(err) => panic!("{err}"),
    }
}

/// For tests that need something only the emulator offers (request counters, error injection,
/// compaction, fleets of hundreds): `true` on the emulator; on the real backend it prints
/// `SKIPPED on the real backend: <test>: <why>` to stderr and returns `false`.
///
/// ```
/// # fn a_test() {
/// if !mcr_envtest::require_emulator("needs request counters") {
///     return;
/// }
/// # }
/// ```
pub fn require_emulator(why: &str) -> bool {
    if !backend().is_real() {
        return true;
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed test>");
    // Straight to the stderr handle: libtest captures `eprintln!` of passing tests.
    let line = format!("SKIPPED on the real backend: {test}: {why}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    false
}

/// Panics naming an emulator-only hook called on a real cluster.
pub(crate) fn emulator_only(hook: &str, cluster: &str) -> ! {
    panic!(
        "TestCluster::{hook} is emulator-only, but cluster {cluster:?} is a real control plane \
         ({BACKEND_ENV}=real): guard the test with mcr_envtest::require_emulator(..)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays() {
        assert_eq!(Backend::parse(" real ").unwrap(), Backend::Real);
        assert_eq!(Backend::parse("emulator").unwrap().to_string(), "emulator");
        let err = Backend::parse("Real").unwrap_err().to_string();
        assert!(
            err.contains("MCR_ENVTEST") && err.contains("\"Real\""),
            "{err}"
        );
    }
}
