//! Errors: the provider file and the provider's options (startup errors). Why a profile's
//! cluster did not come up is the engagement table's, reported per profile by
//! [`ProfileState`](crate::ProfileState).

use std::path::PathBuf;

/// The operator's access-provider file cannot be used. Raised at startup, naming the file.
///
/// ```
/// use mcr_provider_cluster_inventory::AccessProviders;
/// let err = AccessProviders::from_json(b"{not json", "/etc/p.json").unwrap_err();
/// assert!(err.to_string().starts_with("access-provider file /etc/p.json: malformed JSON"), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderFileError {
    /// The file cannot be read.
    #[error("access-provider file {}: cannot be read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON of the expected shape.
    #[error("access-provider file {}: malformed JSON: {source}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where and what.
        #[source]
        source: serde_json::Error,
    },
    /// The file parses but a provider is unusable (no command, duplicate name, ...).
    #[error("access-provider file {}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The provider cannot be built from its options.
///
/// ```
/// use mcr_provider_cluster_inventory::Error;
/// let err = Error::Config { reason: "the Secret strategy needs a consumer name".into() };
/// assert_eq!(
///     err.to_string(),
///     "cluster inventory provider: the Secret strategy needs a consumer name"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The provider's options are unusable (raised by the constructor).
    #[error("cluster inventory provider: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
    },
}
