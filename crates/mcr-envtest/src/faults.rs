//! Fault injection: stop, partitions, latency and injected errors.
//!
//! The state of the "network link" to a cluster lives in a `tokio::sync::watch` channel so
//! that requests waiting in a [`Partition::Hang`] and open watch bodies can react to changes.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

/// How a partitioned cluster behaves towards its clients.
///
/// ```no_run
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// use mcr_envtest::{Partition, TestCluster};
/// let cluster = TestCluster::start("a").await?;
/// cluster.partition(Partition::Hang);
/// // ... requests now wait forever ...
/// cluster.heal();
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partition {
    /// Connections are refused: in-process requests fail with an I/O `ConnectionRefused`
    /// error, the HTTPS listener is closed and open connections (and watches) are cut.
    Refuse,
    /// Requests are accepted but never answered until [`heal`](crate::TestCluster::heal);
    /// open watches deliver nothing in the meantime.
    Hang,
}

/// A rule that answers matching requests with an error `Status` instead of serving them.
///
/// `verb` and `resource` use the names of [`RequestCounts`](crate::RequestCounts); `None`
/// matches anything. `times: None` keeps the rule until
/// [`clear_faults`](crate::TestCluster::clear_faults).
///
/// ```
/// use mcr_envtest::ErrorRule;
/// let rule = ErrorRule { verb: Some("list".into()), resource: Some("configmaps".into()), code: 500, times: Some(2) };
/// assert_eq!(rule.code, 500);
/// let any = ErrorRule::new(503);
/// assert!(any.verb.is_none() && any.times.is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorRule {
    /// Verb to match (`get`, `list`, `watch`, ...), `None` for any.
    pub verb: Option<String>,
    /// Resource to match (`configmaps`, `configmaps/status`, `discovery`), `None` for any.
    pub resource: Option<String>,
    /// HTTP status code of the answer, e.g. 500.
    pub code: u16,
    /// How many requests to fail; `None` for every matching request.
    pub times: Option<u32>,
}

impl ErrorRule {
    /// A rule failing every request with `code`, until cleared.
    ///
    /// ```
    /// let rule = mcr_envtest::ErrorRule::new(500).verb("get").resource("secrets").times(1);
    /// assert_eq!(rule.times, Some(1));
    /// ```
    pub fn new(code: u16) -> Self {
        Self {
            verb: None,
            resource: None,
            code,
            times: None,
        }
    }

    /// Only requests with this verb.
    ///
    /// ```
    /// let rule = mcr_envtest::ErrorRule::new(500).verb("watch");
    /// assert_eq!(rule.verb.as_deref(), Some("watch"));
    /// ```
    pub fn verb(mut self, verb: impl Into<String>) -> Self {
        self.verb = Some(verb.into());
        self
    }

    /// Only requests for this resource.
    ///
    /// ```
    /// let rule = mcr_envtest::ErrorRule::new(500).resource("configmaps");
    /// assert_eq!(rule.resource.as_deref(), Some("configmaps"));
    /// ```
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Only the next `times` matching requests.
    ///
    /// ```
    /// let rule = mcr_envtest::ErrorRule::new(500).times(3);
    /// assert_eq!(rule.times, Some(3));
    /// ```
    pub fn times(mut self, times: u32) -> Self {
        self.times = Some(times);
        self
    }

    fn matches(&self, verb: &str, resource: &str) -> bool {
        self.verb.as_deref().is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
    }
}

/// What a client currently sees of the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Serving.
    Up,
    /// Stopped or partitioned with `Refuse`: connections fail.
    Down,
    /// Partitioned with `Hang`: requests wait.
    Hang,
}

/// The link state; `epoch` grows every time the link goes down, which cuts open watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) mode: Mode,
    pub(crate) epoch: u64,
}

#[derive(Debug, Default)]
struct Settings {
    stopped: bool,
    partition: Option<Partition>,
    latency: Option<Duration>,
    rules: Vec<ErrorRule>,
}

/// The connection was refused (stopped cluster or `Partition::Refuse`).
#[derive(Debug)]
pub(crate) struct Refused;

/// The live fault state of one cluster.
#[derive(Debug)]
pub(crate) struct Faults {
    settings: Mutex<Settings>,
    link: watch::Sender<Link>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            settings: Mutex::default(),
            link: watch::Sender::new(Link {
                mode: Mode::Up,
                epoch: 0,
            }),
        }
    }
}

impl Faults {
    fn update(&self, f: impl FnOnce(&mut Settings)) -> Mode {
        let mut settings = self.settings.lock();
        f(&mut settings);
        let mode = if settings.stopped || settings.partition == Some(Partition::Refuse) {
            Mode::Down
        } else if settings.partition == Some(Partition::Hang) {
            Mode::Hang
        } else {
            Mode::Up
        };
        self.link.send_if_modified(|link| {
            if link.mode == mode {
                return false;
            }
            if mode == Mode::Down {
                link.epoch += 1;
            }
            link.mode = mode;
            true
        });
        mode
    }

    /// Marks the cluster stopped (or running again); returns the resulting mode.
    pub(crate) fn set_stopped(&self, stopped: bool) -> Mode {
        self.update(|s| s.stopped = stopped)
    }

    /// Sets or clears the partition; returns the resulting mode.
    pub(crate) fn set_partition(&self, partition: Option<Partition>) -> Mode {
        self.update(|s| s.partition = partition)
    }

    /// Sets the latency added to each request.
    pub(crate) fn set_latency(&self, latency: Option<Duration>) {
        self.update(|s| s.latency = latency);
    }

    /// Adds an error rule.
    pub(crate) fn add_rule(&self, rule: ErrorRule) {
        self.update(|s| s.rules.push(rule));
    }

    /// Clears latency, rules and partition (not `stopped`); returns the resulting mode.
    pub(crate) fn clear(&self) -> Mode {
        self.update(|s| {
            s.latency = None;
            s.rules.clear();
            s.partition = None;
        })
    }

    /// Whether the cluster is stopped.
    pub(crate) fn is_stopped(&self) -> bool {
        self.settings.lock().stopped
    }

    /// The latency to add to a request.
    pub(crate) fn latency(&self) -> Option<Duration> {
        self.settings.lock().latency
    }

    /// The code of the first rule matching the request (consuming one of its `times`).
    pub(crate) fn injected_error(&self, verb: &str, resource: &str) -> Option<u16> {
        let mut settings = self.settings.lock();
        let index = settings
            .rules
            .iter()
            .position(|r| r.matches(verb, resource))?;
        let rule = &mut settings.rules[index];
        let code = rule.code;
        match &mut rule.times {
            Some(n) if *n <= 1 => {
                settings.rules.remove(index);
            }
            Some(n) => *n -= 1,
            None => {}
        }
        Some(code)
    }

    /// The current link state.
    #[cfg(test)]
    pub(crate) fn link(&self) -> Link {
        *self.link.borrow()
    }

    /// A receiver of link changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Link> {
        self.link.subscribe()
    }

    /// Waits until the link lets a request through: `Ok` when up, `Err` when down; waits while
    /// hung.
    pub(crate) async fn admit(&self) -> Result<(), Refused> {
        let mut rx = self.link.subscribe();
        loop {
            let mode = rx.borrow_and_update().mode;
            match mode {
                Mode::Up => return Ok(()),
                Mode::Down => return Err(Refused),
                Mode::Hang => {
                    if rx.changed().await.is_err() {
                        return Err(Refused);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_epochs() {
        let f = Faults::default();
        assert_eq!(
            f.link(),
            Link {
                mode: Mode::Up,
                epoch: 0
            }
        );
        assert_eq!(f.set_partition(Some(Partition::Hang)), Mode::Hang);
        assert_eq!(f.link().epoch, 0);
        assert_eq!(f.set_stopped(true), Mode::Down);
        assert_eq!(f.link().epoch, 1);
        assert_eq!(f.set_partition(Some(Partition::Refuse)), Mode::Down);
        assert_eq!(f.link().epoch, 1, "still down: no new cut");
        assert_eq!(f.set_stopped(false), Mode::Down, "still refused");
        assert_eq!(f.clear(), Mode::Up);
        assert!(!f.is_stopped());
    }

    #[test]
    fn rules_count_down() {
        let f = Faults::default();
        f.add_rule(ErrorRule::new(500).verb("list").times(2));
        f.add_rule(ErrorRule::new(503).resource("secrets"));
        assert_eq!(f.injected_error("get", "configmaps"), None);
        assert_eq!(f.injected_error("list", "configmaps"), Some(500));
        assert_eq!(f.injected_error("list", "secrets"), Some(500));
        assert_eq!(f.injected_error("list", "secrets"), Some(503));
        assert_eq!(f.injected_error("get", "secrets"), Some(503));
        f.clear();
        assert_eq!(f.injected_error("get", "secrets"), None);
    }

    #[tokio::test]
    async fn admit_waits_while_hung() {
        let f = std::sync::Arc::new(Faults::default());
        assert!(f.admit().await.is_ok());
        f.set_partition(Some(Partition::Hang));
        let waiting = tokio::spawn({
            let f = f.clone();
            async move { f.admit().await.is_ok() }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        f.set_partition(None);
        assert!(waiting.await.unwrap());
        f.set_partition(Some(Partition::Refuse));
        assert!(f.admit().await.is_err());
    }
}
