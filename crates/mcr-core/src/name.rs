//! [`ClusterName`]: the name a provider gives to a cluster.

use std::{borrow::Borrow, fmt, sync::Arc};

/// The name of a cluster in the fleet.
///
/// Cheap to clone (an `Arc<str>` inside). The empty name is the *host* cluster, the one the
/// manager itself runs against; [`ClusterName::default`] is the host.
///
/// ```
/// use mcr_core::ClusterName;
///
/// let name = ClusterName::from("member-1");
/// assert_eq!(name, "member-1");
/// assert_eq!(name.to_string(), "member-1");
/// assert!(!name.is_host());
/// assert!(ClusterName::default().is_host());
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterName(Arc<str>);

impl ClusterName {
    /// A cluster name from any string.
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert_eq!(ClusterName::new("a").as_str(), "a");
    /// ```
    pub fn new(s: impl Into<Arc<str>>) -> Self {
        Self(s.into())
    }

    /// The host cluster (the empty name).
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert!(ClusterName::host().is_host());
    /// ```
    pub fn host() -> Self {
        Self(Arc::from(""))
    }

    /// Whether this is the host cluster (the empty name).
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert!(ClusterName::new("").is_host());
    /// assert!(!ClusterName::new("x").is_host());
    /// ```
    pub fn is_host(&self) -> bool {
        self.0.is_empty()
    }

    /// The name as a string slice.
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert_eq!(ClusterName::from("b").as_str(), "b");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for ClusterName {
    fn default() -> Self {
        Self::host()
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClusterName({:?})", &*self.0)
    }
}

impl From<&str> for ClusterName {
    fn from(s: &str) -> Self {
        Self(Arc::from(s))
    }
}

impl From<String> for ClusterName {
    fn from(s: String) -> Self {
        Self(Arc::from(s))
    }
}

impl From<&String> for ClusterName {
    fn from(s: &String) -> Self {
        Self(Arc::from(s.as_str()))
    }
}

impl From<Arc<str>> for ClusterName {
    fn from(s: Arc<str>) -> Self {
        Self(s)
    }
}

impl From<&ClusterName> for ClusterName {
    fn from(s: &ClusterName) -> Self {
        s.clone()
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for ClusterName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for ClusterName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for ClusterName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for ClusterName {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    #[test]
    fn host_is_empty_and_default() {
        assert!(ClusterName::host().is_host());
        assert_eq!(ClusterName::default(), ClusterName::host());
        assert_eq!(ClusterName::host().as_str(), "");
        assert!(!ClusterName::from("a").is_host());
    }

    #[test]
    fn conversions_and_comparisons() {
        let a = ClusterName::from(String::from("a"));
        assert_eq!(a, "a");
        assert_eq!(a, *"a");
        assert_eq!(a, String::from("a"));
        assert_eq!(a.as_ref(), "a");
        assert_eq!(format!("{a}"), "a");
        assert_eq!(format!("{a:?}"), "ClusterName(\"a\")");
    }

    #[test]
    fn borrow_allows_str_lookup_and_ordering() {
        let mut m = HashMap::new();
        m.insert(ClusterName::from("x"), 1);
        assert_eq!(m.get("x"), Some(&1));
        let set: BTreeSet<_> = ["c", "a", "b"].into_iter().map(ClusterName::from).collect();
        let v: Vec<_> = set.iter().map(|n| n.as_str()).collect();
        assert_eq!(v, ["a", "b", "c"]);
    }
}
