//! [`Source`]: what a provider wants under a member name, and how the table reaches it.

use std::sync::Arc;

use crate::members::Connection;
use crate::{BoxError, BoxFuture, Cluster};

/// How the [`Engagements`](crate::Engagements) table reaches a member: what a provider
/// [wants](crate::Engagements::want) under a name. The table alone turns it into an engaged
/// cluster (builds, probes, starts, syncs, activates, retries with backoff), and only while
/// this replica owns the name: a member owned elsewhere costs no client and no request.
///
/// ```no_run
/// # fn f(client: kube::Client, conn: mcr_core::members::Connection) {
/// use mcr_core::{Cluster, Source};
/// let ready = Source::Cluster(Cluster::new("a", client)); // engaged as it is
/// let kubeconfig = Source::Kubeconfig(conn); // built, probed, renewed in place
/// # }
/// ```
#[derive(Clone)]
pub enum Source {
    /// A cluster built by the caller (a view of the host, a client made by hand). The table
    /// engages this instance first, and a [fresh](Cluster) instance of it (same client, new
    /// cache) whenever it engages the name again (after another replica owned it).
    Cluster(Cluster),
    /// A kubeconfig: a client is built under the handle's
    /// [`MembersOptions`](crate::members::MembersOptions) (policy, client options, bounded
    /// build), probed with a bounded `GET /version`, and, when a later connection differs
    /// only in its credentials, renewed in place (same instance, caches and watches kept).
    Kubeconfig(Connection),
    /// Something to ask first (a credentials request, a command line tool), only when this
    /// replica owns the name and wants a new instance: it answers with one of the other two.
    Connect(Arc<dyn Connect>),
}

/// A source asked for a connection on demand (see [`Source::Connect`]).
///
/// ```
/// use mcr_core::{BoxError, BoxFuture, Connect, Source};
///
/// /// Asks a credentials service for a kubeconfig (here: fails).
/// struct Issuer { shoot: String }
/// impl Connect for Issuer {
///     fn key(&self) -> String { self.shoot.clone() }
///     fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
///         Box::pin(async { Err("the service is down".into()) })
///     }
/// }
/// ```
pub trait Connect: Send + Sync + 'static {
    /// What identifies the wanted member: a [want](crate::Engagements::want) with the same key
    /// as the engaged one changes nothing, another key brings up a new instance.
    fn key(&self) -> String;

    /// A connection to the member (a [`Source::Cluster`] or [`Source::Kubeconfig`]; a
    /// `Connect` answer is refused). Bounded by the handle's build timeout; a failure is
    /// retried with the member's backoff.
    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>>;

    /// Whether trying again without a new key can help after `connect` failed with `error`
    /// (default: yes, after the member's backoff). A source that knows its failure is
    /// permanent (a context that does not resolve) says no: the member is reported failed and
    /// waits for a new source.
    fn is_retryable(&self, error: &BoxError) -> bool {
        let _ = error;
        true
    }
}

/// What tells two wants of one name apart: the same key changes nothing. A 64-bit digest of
/// the source's identity (an instance id, a connection hash, a [`Connect::key`]): an entry
/// keeps eight bytes for it, not the key itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Key(u64);

impl Source {
    /// A source that cannot be used (a kubeconfig that does not parse, a context that does
    /// not resolve): wanted all the same, so that the table reports the member failed for
    /// `reason` (never retried: it waits for a new source) and keeps an instance that ran
    /// before serving.
    ///
    /// ```
    /// let source = mcr_core::Source::unusable("the kubeconfig does not parse");
    /// # let _ = source;
    /// ```
    pub fn unusable(reason: impl std::fmt::Display) -> Source {
        Source::Connect(Arc::new(Unusable(reason.to_string())))
    }

    /// The key of this source.
    pub(super) fn key(&self) -> Key {
        use std::hash::{Hash, Hasher};
        // Fixed keys: the same source has the same key in every process.
        let mut h = std::hash::DefaultHasher::new();
        match self {
            Source::Cluster(c) => match c.connection_hash() {
                Some(hash) => (1u8, hash).hash(&mut h),
                None => (0u8, c.id()).hash(&mut h),
            },
            Source::Kubeconfig(conn) => (1u8, conn.hash()).hash(&mut h),
            Source::Connect(c) => (2u8, c.key()).hash(&mut h),
        }
        Key(h.finish())
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Cluster(c) => f.debug_tuple("Cluster").field(c).finish(),
            Source::Kubeconfig(conn) => f.debug_tuple("Kubeconfig").field(conn).finish(),
            Source::Connect(c) => f.debug_tuple("Connect").field(&c.key()).finish(),
        }
    }
}

/// See [`Source::unusable`].
struct Unusable(String);

impl Connect for Unusable {
    fn key(&self) -> String {
        format!("unusable: {}", self.0)
    }

    fn connect(&self) -> BoxFuture<'_, Result<Source, BoxError>> {
        Box::pin(async move { Err(self.0.clone().into()) })
    }

    fn is_retryable(&self, _: &BoxError) -> bool {
        false
    }
}
