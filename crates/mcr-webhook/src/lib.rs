//! Admission and conversion webhooks for mcr, for the host cluster and for every member of the
//! fleet.
//!
//! - [`Webhooks`] holds the routes; [`Webhooks::for_`] is controller-runtime's
//!   `WebhookManagedBy(mgr).For(obj)`: a defaulter (answered with a JSON patch), a validator,
//!   a converter, on the conventional paths `/mutate-<group>-<version>-<kind>`,
//!   `/validate-<group>-<version>-<kind>` and `/convert`.
//! - Every route is also served under `/clusters/{name}/...` for the engaged member `name`:
//!   the handler's [`Request::cluster`] is that member (its client and cache). A review for a
//!   member this replica cannot serve (owned by another replica, not engaged, unknown) fails
//!   with HTTP 503, so kube-apiserver applies the webhook's `failurePolicy`; it is never denied.
//! - A handler that decides from the review alone ([`WebhookBuilder::with_review_validator`],
//!   [`WebhookBuilder::with_review_defaulter`], given a [`Review`];
//!   [`WebhookBuilder::with_review_converter`], given the object) is answered by any replica
//!   for any member: in a sharded fleet behind one address its reviews never fail.
//! - [`Server`] serves them over HTTPS (rustls) with a [`CertificateReloader`]: the
//!   certificate files are followed and swapped in on change, without a restart or a dropped
//!   connection. Bodies are capped, every phase of a connection has a deadline (handshake,
//!   protocol detection, request heads, handler, idle keep-alive), connections are capped, a
//!   panicking handler answers 500 for its request only, and a request that cannot be handled
//!   gets the review shape kube-apiserver reads (`allowed: false`, a status message, the
//!   request's uid when it could be read).
//! - [`MemberConfigurations`] (opt-in) makes each member's webhook configurations a reconciled
//!   resource: the replica that owns a member converges them to our entries, pointing at a
//!   base URL the operator gives (in a sharded fleet, each replica's own), on engagement, on
//!   a new CA bundle, on every change of the objects and on a resync; writes are fenced by
//!   ownership; a member handed to another replica keeps them for the new owner to converge,
//!   and a member that leaves the fleet loses exactly our entries.
//! - [`ClientAuth`] (opt-in) authenticates callers: a member's admission routes answer only
//!   that member's client certificate; conversion routes, which kube-apiserver calls without
//!   one, run only converters of the object alone for such callers.
//! - `testing` (feature `testing`): sends a server, by hand, the reviews kube-apiserver would
//!   send, for tests against API servers that do not call webhooks (`mcr-envtest`'s emulator).
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use mcr_webhook::{CertificateReloader, Denied, Server, ServerOptions, Webhooks};
//!
//! # async fn demo(mgr: mcr_manager::Manager) -> Result<(), Box<dyn std::error::Error>> {
//! let webhooks = Webhooks::new(&mgr);
//! webhooks
//!     .for_::<ConfigMap>()
//!     .with_defaulter(|mut cm: ConfigMap, _req| async move {
//!         cm.data.get_or_insert_default().entry("owner".into()).or_insert_with(|| "team-a".into());
//!         Ok(cm)
//!     })
//!     .with_validator(|req| async move {
//!         if req.name.contains("forbidden") { Err(Denied::new("forbidden name")) } else { Ok(()) }
//!     })
//!     .register()?;
//! let certs = CertificateReloader::from_files("/tls/tls.crt", "/tls/tls.key")?;
//! let server = Server::bind("0.0.0.0:9443".parse()?, webhooks, certs, ServerOptions::default()).await?;
//! mgr.add(Arc::new(server))?;
//! mgr.run().await?;
//! # Ok(()) }
//! ```

mod admission;
mod auth;
mod body;
mod ca_bundle;
mod config;
mod connection;
mod conversion;
mod error;
mod members;
mod pool;
mod review;
mod route;
mod server;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;
mod webhooks;

pub use admission::{Denied, Request, Review};
pub use auth::ClientAuth;
pub use config::{ConfigOptions, mutating_configuration, validating_configuration};
pub use error::Error;
pub use members::MemberConfigurations;
pub use route::{MEMBER_PREFIX, default_path, member_path};
pub use server::{Server, ServerOptions};
pub use tls::CertificateReloader;
pub use webhooks::{CONVERT_PATH, HookKind, Registration, WebhookBuilder, Webhooks};
