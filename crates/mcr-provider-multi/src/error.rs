//! The [`Error`] type of the multi provider.

/// Errors of [`MultiProvider`](crate::MultiProvider) management calls.
///
/// ```
/// use mcr_provider_multi::Error;
/// let err = Error::AlreadyExists("kind".into());
/// assert_eq!(err.to_string(), "a provider named \"kind\" is already registered");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The provider name is empty or contains the separator.
    #[error("invalid provider name \"{name}\": {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: String,
    },

    /// A provider of that name is already registered.
    #[error("a provider named \"{0}\" is already registered")]
    AlreadyExists(String),

    /// A field index registered earlier could not be applied to the new provider (it was not
    /// added).
    #[error("provider \"{provider}\": could not apply field index")]
    Index {
        /// The provider name.
        provider: String,
        /// The provider's error.
        #[source]
        source: mcr_core::Error,
    },
}
