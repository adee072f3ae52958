//! [`RunGuard`]: a provider's discovery loop runs once at a time.

use std::sync::atomic::Ordering;

use super::Members;

/// Proof that a provider's run owns its [`Members`]; see [`Members::start_run`]. Dropping it
/// (the run ended, or its future was dropped) removes every member and allows the next run.
#[must_use = "the run ends when the guard is dropped"]
#[derive(Debug)]
pub struct RunGuard {
    members: Members,
}

impl Members {
    /// Marks the start of a run of `provider` (its name, for the error and for
    /// [`member_statuses`](Members::member_statuses)). A second run while the first one's
    /// guard lives is refused with [`crate::Error::AlreadyRunning`].
    ///
    /// ```
    /// let members = mcr_core::members::Members::new(Default::default());
    /// let guard = members.start_run("example").unwrap();
    /// let err = members.start_run("example").unwrap_err();
    /// assert!(matches!(err, mcr_core::Error::AlreadyRunning { ref provider } if provider == "example"));
    /// drop(guard);
    /// assert!(members.start_run("example").is_ok());
    /// ```
    pub fn start_run(&self, provider: &str) -> Result<RunGuard, crate::Error> {
        if self.inner.running.swap(true, Ordering::SeqCst) {
            return Err(crate::Error::AlreadyRunning {
                provider: provider.to_owned(),
            });
        }
        self.name_provider(provider);
        Ok(RunGuard {
            members: self.clone(),
        })
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.members.remove_all();
        self.members.inner.running.store(false, Ordering::SeqCst);
    }
}
