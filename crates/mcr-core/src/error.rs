//! The [`Error`] type of `mcr-core` and [`cluster_not_found`].

use std::time::Duration;

use crate::{ClusterName, redact};

/// Errors of `mcr-core`: cluster lookup, lifecycle, cache and index failures.
///
/// Messages name the cluster and never contain credentials.
///
/// ```
/// use mcr_core::{ClusterName, Error};
///
/// let err = Error::ClusterNotFound(ClusterName::from("x"));
/// assert_eq!(err.to_string(), "cluster \"x\" not found");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No engaged cluster has that name (it never joined or it left).
    #[error("cluster \"{0}\" not found")]
    ClusterNotFound(ClusterName),

    /// Another replica owns the cluster (the fleet is sharded across replicas, see
    /// [`coordinator`](crate::coordinator)): this replica does not engage or reconcile it.
    #[error("cluster \"{cluster}\" is {}", match owner {
        Some(o) => format!("owned by replica {o}"),
        None => "not owned by this replica".to_owned(),
    })]
    NotOwned {
        /// The cluster.
        cluster: ClusterName,
        /// The replica that owns it, when known.
        owner: Option<String>,
    },

    /// A cluster of that name is already engaged (or being engaged).
    #[error("cluster \"{0}\" is already engaged")]
    AlreadyEngaged(ClusterName),

    /// No member may be engaged under this name: the empty name, the host's
    /// ([`ClusterName::host`], written `<host>`), or one with a control character
    /// ([`ClusterName::member_name_error`]). The message escapes the name.
    #[error("cluster \"{}\": not a valid member name ({reason})", .cluster.as_str().escape_debug())]
    InvalidName {
        /// The refused name.
        cluster: ClusterName,
        /// Why it is refused.
        reason: &'static str,
    },

    /// A cache did not finish its initial list in time (and the API server did not refuse
    /// it: that is [`Error::Refused`], said at once).
    #[error("cluster \"{cluster}\": cache for {resource} did not sync within {timeout:?}{}",
        match last_error {
            Some(e) => format!(" (last error: {e})"),
            None => String::new(),
        })]
    SyncTimeout {
        /// The cluster.
        cluster: ClusterName,
        /// The resource that was not synced, e.g. `configmaps`.
        resource: String,
        /// How long we waited.
        timeout: Duration,
        /// The last error of its list or watch, if it had one (redacted, see
        /// [`ErrorChain`]).
        last_error: Option<String>,
    },

    /// The API server refused an informer's list or watch with 401, 403, or 404 of the
    /// resource: the credentials are not accepted, RBAC does not allow the verb, or the
    /// resource is not served (a CRD not installed). Said at once, without waiting for the sync
    /// timeout; the informer keeps retrying with backoff meanwhile.
    #[error(
        "cluster \"{cluster}\": {verb} {resource} {} refused: {} {}: {}",
        match namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "in all namespaces".to_owned(),
        },
        status.code, status.reason, status.message
    )]
    Refused {
        /// The cluster.
        cluster: ClusterName,
        /// `list` or `watch`.
        verb: &'static str,
        /// The resource, e.g. `configmaps` or `widgets.example.com`.
        resource: String,
        /// The namespace of the refused request; `None`: a request over every namespace (or
        /// of a cluster-scoped resource).
        namespace: Option<String>,
        /// The API server's answer (`code` 401, 403 or 404, its `reason` and `message`).
        status: Box<kube::core::Status>,
    },

    /// A Kubernetes API call failed.
    #[error("cluster \"{cluster}\": kubernetes API error")]
    Kube {
        /// The cluster.
        cluster: ClusterName,
        /// The underlying kube error.
        #[source]
        source: kube::Error,
    },

    /// A kubeconfig could not be used: the [`kubeconfig::Error`](crate::kubeconfig::Error),
    /// boxed (it converts with `?`).
    #[error(transparent)]
    Kubeconfig(BoxError),

    /// A field index could not be registered or queried.
    #[error("index \"{index}\": {reason}")]
    Index {
        /// The index name.
        index: String,
        /// What went wrong.
        reason: String,
    },

    /// A cluster could not be engaged.
    #[error("cluster \"{cluster}\": engage failed")]
    Engage {
        /// The cluster.
        cluster: ClusterName,
        /// What went wrong (an `Aware`'s error, kept as the source).
        #[source]
        source: BoxError,
    },

    /// A provider's `run` was called while it was already running.
    #[error("provider {provider} is already running")]
    AlreadyRunning {
        /// The provider (e.g. `file`, `kubeconfig`).
        provider: String,
    },

    /// An operation failed in one provider of several (e.g. a child of the multi provider).
    #[error("provider \"{provider}\"")]
    Provider {
        /// The provider's name.
        provider: String,
        /// What went wrong there (usually an [`Error`]).
        #[source]
        source: BoxError,
    },

    /// The member's source did not yield a working client (see
    /// [`members::Error`](crate::members::Error)).
    #[error(transparent)]
    Member(#[from] crate::members::Error),

    /// The cluster's cancellation token fired: its cache and tasks are stopped.
    #[error("cluster \"{0}\" is stopped")]
    Stopped(ClusterName),
}

/// A boxed error, kept as a `source`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Shows an error with its whole [`source`](std::error::Error::source) chain, `": "`-separated:
/// for logs and status messages, where only one line is printed.
///
/// ```
/// use mcr_core::{Error, ErrorChain};
///
/// let err = Error::Engage { cluster: "east".into(), source: "refused".into() };
/// assert_eq!(err.to_string(), "cluster \"east\": engage failed");
/// assert_eq!(ErrorChain(&err).to_string(), "cluster \"east\": engage failed: refused");
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    /// Kube, watcher and authentication errors in the chain are shown redacted (see
    /// [`redact_kube_error`](crate::kubeconfig::redact_kube_error)): their messages can carry
    /// a credential command's arguments and output; an error whose own message shows such an
    /// error of its sources (`#[error("...: {0}")]`) shows it redacted and summarised there
    /// (an API server's answer as its code, reason and message). A source whose message the
    /// text so far already ends with (an error that shows its source in its own message) is
    /// not repeated.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        let mut next = Some(self.0);
        while let Some(e) = next {
            if let Some(safe) = redact::redact_dyn(e) {
                redact::push_message(&mut out, &safe);
                break;
            }
            redact::push_message(&mut out, &redact::message(e));
            next = e.source();
        }
        f.write_str(&out)
    }
}

impl std::fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// The message of a caught panic (`std::panic::catch_unwind`, a task's `JoinError`): its
/// `&str` or `String` payload, else `"<non-string panic>"`.
///
/// ```
/// let panic = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
/// assert_eq!(mcr_core::panic_message(panic.as_ref()), "boom 1");
/// ```
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string panic>".to_owned())
}

/// No cluster of that name is part of the fleet (it never joined, or it left): what a
/// synchronous fleet lookup such as `Context::cluster` returns. Converts into
/// [`Error::ClusterNotFound`] with `?`, and [`cluster_not_found`] recognises both.
///
/// ```
/// use mcr_core::{ClusterNotFound, Error, cluster_not_found};
///
/// let err = ClusterNotFound("east".into());
/// assert_eq!(err.to_string(), "cluster \"east\" not found");
/// assert!(cluster_not_found(&err).is_some());
/// assert!(matches!(Error::from(err), Error::ClusterNotFound(n) if n == "east"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cluster \"{0}\" not found")]
pub struct ClusterNotFound(pub ClusterName);

impl From<ClusterNotFound> for Error {
    fn from(err: ClusterNotFound) -> Self {
        Error::ClusterNotFound(err.0)
    }
}

/// The cluster named by the first [`Error::ClusterNotFound`] or [`ClusterNotFound`] in
/// `err` or its [`source`](std::error::Error::source) chain, if any: Go's
/// `errors.Is(err, multicluster.ErrClusterNotFound)` is `cluster_not_found(&err).is_some()`.
/// The name tells "my own cluster left" (the request can end quietly) from "another cluster
/// I used is missing" (an error like any other).
///
/// Works through any wrapping that keeps the source chain: `anyhow::Error` (pass `&*err`),
/// `Box<dyn Error>` (pass `&*err`), `kube::Error` or your own error types.
///
/// ```
/// use mcr_core::{cluster_not_found, ClusterName, ClusterNotFound, Error};
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("reconcile failed")]
/// struct Wrapper(#[source] Error);
///
/// let err = Wrapper(Error::ClusterNotFound(ClusterName::from("gone")));
/// assert_eq!(cluster_not_found(&err).map(ClusterName::as_str), Some("gone"));
/// let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
/// assert!(cluster_not_found(&*boxed).is_some());
/// assert!(cluster_not_found(&ClusterNotFound("east".into())).is_some());
/// assert!(cluster_not_found(&Error::Stopped(ClusterName::from("x"))).is_none());
/// ```
pub fn cluster_not_found<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a ClusterName> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(Error::ClusterNotFound(name)) = e.downcast_ref::<Error>() {
            return Some(name);
        }
        if let Some(ClusterNotFound(name)) = e.downcast_ref::<ClusterNotFound>() {
            return Some(name);
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Box<dyn std::error::Error + Send + Sync>);

    #[test]
    fn not_found_is_found_through_wrapping() {
        let inner = Error::ClusterNotFound(ClusterName::from("a"));
        assert!(cluster_not_found(&inner).is_some());
        let outer = Outer(Box::new(Outer(Box::new(inner))));
        assert!(cluster_not_found(&outer).is_some());
    }

    #[test]
    fn not_found_through_kube_error() {
        let kube_err = kube::Error::Service(Box::new(Error::ClusterNotFound("b".into())));
        assert!(cluster_not_found(&kube_err).is_some());
    }

    #[test]
    fn other_errors_are_not_not_found() {
        assert!(cluster_not_found(&Error::AlreadyEngaged("a".into())).is_none());
        assert!(cluster_not_found(&Outer(Box::new(Error::Stopped("a".into())))).is_none());
        let io = std::io::Error::other("boom");
        assert!(cluster_not_found(&io).is_none());
    }

    #[test]
    fn messages_name_the_cluster() {
        let e = Error::SyncTimeout {
            cluster: "c1".into(),
            resource: "configmaps".into(),
            timeout: Duration::from_secs(1),
            last_error: None,
        };
        assert_eq!(
            e.to_string(),
            "cluster \"c1\": cache for configmaps did not sync within 1s"
        );
        let e = Error::SyncTimeout {
            cluster: "c1".into(),
            resource: "configmaps".into(),
            timeout: Duration::from_secs(1),
            last_error: Some("the API server answered 500".into()),
        };
        assert_eq!(
            e.to_string(),
            "cluster \"c1\": cache for configmaps did not sync within 1s (last error: the API server answered 500)"
        );
        let e = Error::Refused {
            cluster: "c1".into(),
            verb: "list",
            resource: "configmaps".into(),
            namespace: Some("team-a".into()),
            status: Box::new(kube::core::Status::failure("no", "Forbidden").with_code(403)),
        };
        assert_eq!(
            e.to_string(),
            "cluster \"c1\": list configmaps in namespace team-a refused: 403 Forbidden: no"
        );
        assert!(Error::Stopped("c2".into()).to_string().contains("c2"));
        let e = Error::Engage {
            cluster: "c3".into(),
            source: "nope".into(),
        };
        assert_eq!(e.to_string(), "cluster \"c3\": engage failed");
        assert_eq!(
            ErrorChain(&e).to_string(),
            "cluster \"c3\": engage failed: nope"
        );
        assert_eq!(
            std::error::Error::source(&e)
                .map(ToString::to_string)
                .as_deref(),
            Some("nope")
        );
    }

    /// An error whose message already shows its source (`"{prefix}: {source}"`, as kube's
    /// and many `thiserror` errors do) is not followed by the same text again.
    #[test]
    fn chain_says_each_message_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("secret default/garbage: {0}")]
        struct ShowsSource(#[source] crate::kubeconfig::Error);
        let err = ShowsSource(crate::kubeconfig::Error::Parse {
            reason: "malformed YAML at line 1 column 9".into(),
        });
        assert_eq!(
            ErrorChain(&err).to_string(),
            "secret default/garbage: invalid kubeconfig: malformed YAML at line 1 column 9"
        );
        let service =
            kube::Error::Service(Box::new(std::io::Error::other("client error (Connect)")));
        assert_eq!(
            ErrorChain(&Outer(Box::new(service))).to_string(),
            "outer: ServiceError: client error (Connect)"
        );
    }

    /// An API server's answer is shown as its code, reason and message, never as a `Debug`
    /// dump of the Status.
    #[test]
    fn api_errors_show_no_debug_dump() {
        let status = kube::core::Status::failure("Unauthorized", "Unauthorized").with_code(401);
        let err = kube::Error::Api(Box::new(status));
        assert_eq!(
            ErrorChain(&Outer(Box::new(err))).to_string(),
            "outer: the API server answered 401 Unauthorized"
        );
    }

    /// An error whose own message shows a kube error of its sources shows it summarised there,
    /// once: not kube's text (with its `Debug` dump of the Status) and the summary after it.
    #[test]
    fn a_kube_error_shown_in_a_message_is_summarised_there() {
        #[derive(Debug, thiserror::Error)]
        #[error("summary not written: {0}")]
        struct Shows(#[from] kube::Error);
        let status =
            kube::core::Status::failure("configmaps \"x\" not found", "NotFound").with_code(404);
        let err = Shows(kube::Error::Api(Box::new(status)));
        assert_eq!(
            ErrorChain(&err).to_string(),
            "summary not written: the API server answered 404 NotFound: configmaps \"x\" not found"
        );
    }
}
