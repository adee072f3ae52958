//! A multicluster-runtime provider that engages one member cluster per context of kubeconfig
//! files on disk, and follows the files live.
//!
//! # Sources
//!
//! [`Options::files`] (explicit kubeconfig files) and [`Options::dirs`] (directories searched,
//! not recursively, for files matching [`Options::globs`]: by default `kubeconfig.yaml`,
//! `kubeconfig.yml`, `*.kubeconfig`, `*.kubeconfig.yaml`, `*.kubeconfig.yml`). With neither
//! files nor directories: every path in `$KUBECONFIG`; else `~/.kube/config` if it exists; else
//! the working directory as a directory. Missing paths are skipped.
//!
//! # Naming
//!
//! One cluster per context, named `<path><separator><context>` with the path as configured (or
//! as found in a directory) and the separator `+` by default, e.g.
//! `/home/me/.kube/config+kind-dev`. Treat names as opaque. Non-UTF-8 path bytes are replaced
//! (lossy). When two (file, context) pairs read alike (`/d/a.kubeconfig` with context
//! `b.kubeconfig+c`, and `/d/a.kubeconfig+b.kubeconfig` with context `c`), the pair whose path,
//! then context, sorts first owns the name on every pass and after every restart, also while
//! its file cannot be read; the other is [`Error::NameConflict`], logged naming both.
//!
//! # Reloading
//!
//! The provider watches the parent directory of every file and every directory (editors and
//! tools replace files atomically; a missing directory is watched through its nearest existing
//! ancestor), debounces bursts of events ([`Options::debounce`]), then reads every file and
//! tells the engagement table which members it wants, each with its connection
//! ([`mcr_core::Engagements::want`]): a pass builds nothing itself, and the table connects,
//! probes and retries each member on its own, so a context whose credential plugin or server
//! hangs delays only its own cluster, never another file's add, removal or rotation. Per
//! cluster:
//!
//! * new files and contexts are engaged;
//! * edited files replace only the contexts whose connection changed (the context, cluster and
//!   user entries, compared with [`mcr_core::kubeconfig::connection_hash`]); the others keep
//!   running untouched. When only the credentials changed (a new token or client
//!   certificate, same server, CA and settings), they are renewed in place: same
//!   [`mcr_core::ClusterId`], caches and watches kept, no relist ([`PassReport::renewed`]);
//!   a CA read from a file is rebuilt instead;
//! * deleted files and contexts are removed;
//! * a file that cannot be read or parsed (including an empty file, e.g. while a tool rewrites
//!   it) is logged and **keeps its last good clusters** until it is valid again or deleted;
//! * a pass keeps each context's file, name and connection hash, not the parsed kubeconfig: a
//!   worker reads the file again when it builds its member. So a sharded replica holds the
//!   credentials of the clusters it owns only, and a cluster another replica owns costs it a
//!   few hundred bytes. The price: a member that must be built while its file is invalid (a
//!   cluster coming home to this replica, or a retry) fails with [`Error::File`] and waits
//!   for the file to be fixed; a member already running keeps running;
//! * a context that fails to build (refused by the [`Policy`](mcr_core::kubeconfig::Policy):
//!   an exec plugin, a local file or a proxy it does not allow; bad entries) keeps the
//!   instance engaged before, if any, and is retried when a file changes; a context that
//!   fails to engage (e.g. its cache does not sync in time; a running instance keeps serving
//!   meanwhile) is retried by its worker with a capped exponential backoff
//!   ([`MemberOptions`]'s `backoff_initial` to `backoff_max`).
//!
//! Every cluster is built through [`mcr_core::kubeconfig`] with the client options and policy of
//! [`Options::members`] (policy default [`Policy::trusted`](mcr_core::kubeconfig::Policy::trusted):
//! the files are the operator's own) and run through [`mcr_core::members`], the helper every
//! provider shares.
//!
//! Known limit: certificate, key or token *files* referenced by a kubeconfig are not watched;
//! a change to one of them takes effect when the kubeconfig itself changes.
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcr_core::{ProviderRunnable, Engagements};
//! use mcr_provider_file::{FileProvider, Options};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = FileProvider::new(Options {
//!     dirs: vec!["/etc/fleet".into()],
//!     files: vec!["/home/me/.kube/config".into()],
//!     ..Options::default()
//! });
//! // Usually handed to the Manager, which starts it; here driven by hand:
//! let registry = Engagements::new();
//! let token = CancellationToken::new();
//! let running = tokio::spawn({
//!     let (provider, token) = (provider.clone(), token.clone());
//!     async move { provider.start(token, registry).await }
//! });
//! // ... provider.names() == ["/etc/fleet/eu.kubeconfig+eu-1", "/home/me/.kube/config+kind-dev", ...]
//! token.cancel();
//! running.await??;
//! # Ok(()) }
//! ```

mod error;
mod options;
mod provider;
mod reconcile;
mod refs;
mod scan;
mod target;
mod watch;

pub use error::Error;
pub use mcr_core::members::MemberOptions;
pub use options::{DEFAULT_GLOBS, DEFAULT_SEPARATOR, Options};
pub use provider::FileProvider;
pub use reconcile::PassReport;
