//! [`Options`] of the [`MultiProvider`](crate::MultiProvider).

/// The default separator between provider name and cluster name.
pub const DEFAULT_SEPARATOR: &str = "#";

/// Options of [`MultiProvider`](crate::MultiProvider).
///
/// ```
/// use mcr_provider_multi::Options;
/// assert_eq!(Options::default().separator, "#");
/// let opts = Options { separator: "/".into() };
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Between provider name and cluster name (default [`DEFAULT_SEPARATOR`]). Must not be
    /// empty; provider names may not contain it, cluster names may.
    pub separator: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            separator: DEFAULT_SEPARATOR.to_owned(),
        }
    }
}
