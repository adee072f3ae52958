//! [`ClusterName`]: the name a cluster is engaged under.

use std::{borrow::Borrow, cmp::Ordering, fmt, hash::Hash, sync::Arc};

/// The text of the host cluster's name: in `Display`, logs, errors and the `cluster` label of
/// metrics. No member can be engaged under it (nor under the empty name), so a line that names
/// `<host>` is always about the host.
pub const HOST: &str = "<host>";

/// The name of a cluster in the fleet: the host (the cluster the manager runs against) or a
/// member, known by the name its provider engaged it under.
///
/// Cheap to clone (an `Arc<str>` inside). The host is its own variant, [`ClusterName::host`],
/// written [`HOST`] (`<host>`); [`ClusterName::default`] is the host. Every other string is a
/// member name. The empty string is a member name too, but an invalid one: engaging a cluster
/// under it (or under the host's name) is refused with
/// [`Error::InvalidName`](crate::Error::InvalidName), so a provider can never pose as the host.
///
/// ```
/// use mcr_core::ClusterName;
///
/// let name = ClusterName::from("member-1");
/// assert_eq!(name, "member-1");
/// assert_eq!(name.to_string(), "member-1");
/// assert!(!name.is_host());
/// assert!(ClusterName::default().is_host());
/// assert_eq!(ClusterName::host().to_string(), "<host>");
/// assert!(!ClusterName::new("").is_host()); // not the host: an invalid member name
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterName(Repr);

#[derive(Clone, PartialEq, Eq)]
enum Repr {
    Host,
    Member(Arc<str>),
}

impl ClusterName {
    /// The name of a member; [`HOST`] gives the host (the one text that names it).
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert_eq!(ClusterName::new("a").as_str(), "a");
    /// assert!(ClusterName::new(mcr_core::name::HOST).is_host());
    /// ```
    pub fn new(s: impl Into<Arc<str>>) -> Self {
        let s = s.into();
        if &*s == HOST {
            Self(Repr::Host)
        } else {
            Self(Repr::Member(s))
        }
    }

    /// The host cluster.
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert!(ClusterName::host().is_host());
    /// ```
    pub fn host() -> Self {
        Self(Repr::Host)
    }

    /// Whether this is the host cluster.
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert!(ClusterName::host().is_host());
    /// assert!(!ClusterName::new("x").is_host());
    /// assert!(!ClusterName::new("").is_host());
    /// ```
    pub fn is_host(&self) -> bool {
        matches!(self.0, Repr::Host)
    }

    /// Why no member may be engaged under this name, if so: the host's name, the empty name
    /// and names with a control character (a newline, a tab, an escape, ...) are refused
    /// ([`Error::InvalidName`](crate::Error::InvalidName)). A name is written as is into
    /// logs, `/clusters` lines and metric labels, so a control character there could forge
    /// lines; no Kubernetes object name, label value or context name a user means to give
    /// carries one.
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert!(ClusterName::new("a").member_name_error().is_none());
    /// assert!(ClusterName::new("fleet/a b+ctx").member_name_error().is_none());
    /// assert!(ClusterName::new("").member_name_error().is_some());
    /// assert!(ClusterName::host().member_name_error().is_some());
    /// assert!(ClusterName::new("a\nb synced").member_name_error().is_some());
    /// assert!(ClusterName::new("a\u{1b}[2J").member_name_error().is_some());
    /// ```
    pub fn member_name_error(&self) -> Option<&'static str> {
        match &self.0 {
            Repr::Host => Some("the host cluster's name; a provider cannot engage the host"),
            Repr::Member(s) if s.is_empty() => Some("the empty name"),
            Repr::Member(s) if s.chars().any(char::is_control) => {
                Some("it contains a control character")
            }
            Repr::Member(_) => None,
        }
    }

    /// The name as a string slice: the member's name, or [`HOST`] for the host.
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert_eq!(ClusterName::from("b").as_str(), "b");
    /// assert_eq!(ClusterName::host().as_str(), "<host>");
    /// ```
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Host => HOST,
            Repr::Member(s) => s,
        }
    }
}

impl Default for ClusterName {
    fn default() -> Self {
        Self::host()
    }
}

// Hash and order follow `as_str`, as `Borrow<str>` requires (the host's text names only the
// host, so equality agrees too).
impl Hash for ClusterName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for ClusterName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ClusterName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Host => f.write_str("ClusterName::Host"),
            Repr::Member(s) => write!(f, "ClusterName({:?})", &**s),
        }
    }
}

impl From<&str> for ClusterName {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for ClusterName {
    fn from(s: String) -> Self {
        Self::new(s)
    }
}

impl From<&String> for ClusterName {
    fn from(s: &String) -> Self {
        Self::new(s.as_str())
    }
}

impl From<Arc<str>> for ClusterName {
    fn from(s: Arc<str>) -> Self {
        Self::new(s)
    }
}

impl From<&ClusterName> for ClusterName {
    fn from(s: &ClusterName) -> Self {
        s.clone()
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for ClusterName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for ClusterName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ClusterName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for ClusterName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    #[test]
    fn host_is_its_own_variant_not_the_empty_name() {
        assert!(ClusterName::host().is_host());
        assert_eq!(ClusterName::default(), ClusterName::host());
        assert_eq!(ClusterName::host().as_str(), HOST);
        assert_eq!(ClusterName::host().to_string(), "<host>");
        assert_eq!(format!("{:?}", ClusterName::host()), "ClusterName::Host");
        assert!(!ClusterName::from("a").is_host());
        let empty = ClusterName::new("");
        assert!(!empty.is_host());
        assert_ne!(empty, ClusterName::host());
        assert_eq!(empty.member_name_error(), Some("the empty name"));
        // The host's text is the host: a provider naming a member `<host>` gets the host
        // variant, which engaging refuses.
        assert!(ClusterName::from(HOST).is_host());
        assert!(ClusterName::from(HOST).member_name_error().is_some());
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
        m.insert(ClusterName::host(), 2);
        assert_eq!(m.get("x"), Some(&1));
        assert_eq!(m.get(HOST), Some(&2));
        assert_eq!(m.get(""), None);
        let set: BTreeSet<_> = ["c", "a", "b"].into_iter().map(ClusterName::from).collect();
        let v: Vec<_> = set.iter().map(|n| n.as_str()).collect();
        assert_eq!(v, ["a", "b", "c"]);
    }
}
