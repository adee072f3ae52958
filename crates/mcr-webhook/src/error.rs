//! [`Error`]: what can go wrong while setting up or running the webhook server.

use std::path::PathBuf;

/// An error of the webhook server, its certificate, or its registrations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A certificate or key file could not be read.
    #[error("reading {what} {path}")]
    Read {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate or key file holds no usable PEM item, or they do not belong together.
    #[error("{path}: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why it is unusable.
        reason: String,
    },
    /// rustls refused the key or the configuration.
    #[error("TLS setup")]
    Tls(#[source] rustls::Error),
    /// Watching the certificate's directory failed.
    #[error("watching {path} for certificate rotation")]
    Watch {
        /// The watched directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: notify::Error,
    },
    /// The listening socket could not be bound.
    #[error("binding the webhook server to {addr}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Two webhooks asked for one path.
    #[error("the path {path} is already served by another webhook")]
    DuplicatePath {
        /// The path.
        path: String,
    },
    /// A path does not start with `/`, or starts with the reserved `/clusters/`.
    #[error("the path {path:?} is not usable: {reason}")]
    InvalidPath {
        /// The path.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// A CA bundle offered to [`MemberConfigurations`](crate::MemberConfigurations) is not a
    /// bundle of PEM certificates.
    #[error("the CA bundle {reason}")]
    CaBundle {
        /// Why.
        reason: String,
    },
    /// The [`ConfigOptions`](crate::ConfigOptions) would make webhook configurations
    /// kube-apiserver refuses (see [`ConfigOptions::check`](crate::ConfigOptions::check)).
    #[error("the webhook configuration options are not usable: {reason}")]
    ConfigOptions {
        /// Why.
        reason: String,
    },
    /// The client CA of [`ClientAuth`](crate::ClientAuth) is not usable.
    #[error("the client CA {reason}")]
    ClientCa {
        /// Why.
        reason: String,
    },
    /// [`Server::serve`](crate::Server::serve) was called twice.
    #[error("the webhook server is already serving")]
    AlreadyServing,
}
