//! [`ClusterName`]: the name a cluster is engaged under.

use std::{
    borrow::{Borrow, Cow},
    cmp::Ordering,
    fmt,
    hash::Hash,
    sync::Arc,
};

use sha2::{Digest, Sha256};

/// The text of the host cluster's name: in `Display`, logs, errors and the `cluster` label of
/// metrics. No member can be engaged under it (nor under the empty name), so a line that names
/// `<host>` is always about the host.
pub(crate) const HOST: &str = "<host>";

/// The longest [`ClusterName::key`]: the limit of a label value.
pub(crate) const KEY_MAX_LEN: usize = 63;

/// Hex digits of the name's SHA-256 at the end of a key that is not the name itself.
const KEY_HASH_LEN: usize = 12;

/// The name of a cluster in the fleet: the host (the cluster the manager runs against) or a
/// member, known by the name its provider engaged it under.
///
/// A name is opaque: each provider makes its own (the file provider `<path>+<context>`, the
/// multi provider `<prefix><separator><name>`, ...), so do not parse it. Where it must fit
/// Kubernetes' rules, as a ConfigMap key, a label value or a line of a table, use
/// [`ClusterName::key`].
///
/// Cheap to clone (an `Arc<str>` inside). The host is its own variant, [`ClusterName::host`],
/// written `<host>`; [`ClusterName::default`] is the host. Every other string is a
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
    /// The name of a member; `<host>` gives the host (the one text that names it).
    ///
    /// ```
    /// # use mcr_core::ClusterName;
    /// assert_eq!(ClusterName::new("a").as_str(), "a");
    /// assert!(ClusterName::new("<host>").is_host());
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

    /// The name as a string slice: the member's name, or `<host>` for the host.
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

impl ClusterName {
    /// The name in a form that is a valid ConfigMap or Secret data key, label value and
    /// annotation value, and reads well in a table: at most 63 letters,
    /// digits, `-`, `_` and `.`, starting and ending with a letter or digit.
    ///
    /// A name that already is one is returned as is (`member-1`, a namespace, a kind cluster).
    /// Any other name, the host's `<host>` included, becomes its last 50 characters with every
    /// run of other characters replaced by one `-`, then `-` and the first 12 hex digits of
    /// the SHA-256 of the whole name. The end is kept because providers put the most specific
    /// part of a name last (the file provider's context, the multi provider's inner name).
    ///
    /// Two different names give two different keys (barring a 48-bit hash collision), and a
    /// name always gives the same key, in every process and release: a key can be written to
    /// a cluster and looked up again later, e.g. one entry per member in a summary ConfigMap.
    /// The key is not a DNS-1123 name (it keeps upper case and `_`), so not an object name.
    ///
    /// ```
    /// use mcr_core::ClusterName;
    ///
    /// // Already a key: unchanged.
    /// assert_eq!(ClusterName::new("member-1").key(), "member-1");
    ///
    /// // A file provider name: readable end, hash of the whole name.
    /// let name = ClusterName::new("/etc/fleet/prod.kubeconfig+eu-west");
    /// let key = name.key();
    /// assert!(key.starts_with("etc-fleet-prod.kubeconfig-eu-west-"), "{key}");
    /// assert_eq!(key.len(), "etc-fleet-prod.kubeconfig-eu-west-".len() + 12);
    ///
    /// // Different names, different keys, even when they read alike.
    /// assert_ne!(ClusterName::new("a/b").key(), ClusterName::new("a+b").key());
    /// assert!(ClusterName::host().key().starts_with("host-"));
    /// ```
    pub fn key(&self) -> Cow<'_, str> {
        let name = self.as_str();
        if is_key(name) {
            return Cow::Borrowed(name);
        }
        // One `-` for every run of characters a key may not hold.
        let mut mapped = String::with_capacity(name.len());
        for c in name.chars() {
            if is_key_char(c) {
                mapped.push(c);
            } else if !mapped.ends_with('-') {
                mapped.push('-');
            }
        }
        let room = KEY_MAX_LEN - KEY_HASH_LEN - 1;
        // All ASCII now, so any byte index is a character boundary.
        let tail = &mapped[mapped.len().saturating_sub(room)..];
        let tail = tail.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let digest = hex::encode(Sha256::digest(name.as_bytes()));
        let hash = &digest[..KEY_HASH_LEN];
        Cow::Owned(if tail.is_empty() {
            hash.to_owned()
        } else {
            format!("{tail}-{hash}")
        })
    }
}

/// A character a ConfigMap key and a label value may hold.
fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Whether `s` is its own key (see [`ClusterName::key`]).
fn is_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= KEY_MAX_LEN
        && s.chars().all(is_key_char)
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
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

    /// What Kubernetes accepts as a label value (and, within 253 characters, as a ConfigMap
    /// key): written out here from the API server's rules, not from `is_key`.
    fn valid_label_value(s: &str) -> bool {
        let b = s.as_bytes();
        s.len() <= 63
            && (s.is_empty()
                || (b[0].is_ascii_alphanumeric()
                    && b[b.len() - 1].is_ascii_alphanumeric()
                    && b.iter()
                        .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))))
    }

    #[test]
    fn keys_are_valid_stable_and_distinct() {
        let long = format!("/tmp/{}/member-7.kubeconfig+member-7", "d".repeat(80));
        let (x63, x64) = ("x".repeat(63), "x".repeat(64));
        let names = [
            "member-1",
            "Team_A.prod",
            "/etc/fleet/a.kubeconfig+dev",
            "/etc/fleet/a.kubeconfig+b.kubeconfig+c",
            "/etc/fleet/a.kubeconfig+b.kubeconfig/c",
            "kind#dev",
            "kind/dev",
            "-leading",
            "trailing.",
            "///",
            "",
            "caf\u{e9}",
            x63.as_str(),
            x64.as_str(),
            long.as_str(),
            HOST,
        ];
        let mut seen = BTreeSet::new();
        for n in names {
            let key = ClusterName::new(n).key().into_owned();
            assert!(!key.is_empty(), "{n:?}");
            assert!(valid_label_value(&key), "{n:?} -> {key:?}");
            assert_eq!(ClusterName::new(n).key(), key, "stable: {n:?}");
            assert!(seen.insert(key.clone()), "{n:?} -> {key:?} given twice");
        }
        // Valid names are their own keys, borrowed; others end with the hash.
        assert!(matches!(
            ClusterName::new("member-1").key(),
            Cow::Borrowed("member-1")
        ));
        assert_eq!(ClusterName::new(x63.as_str()).key(), x63);
        let long_name = ClusterName::new(long.as_str());
        let long_key = long_name.key();
        assert_eq!(long_key.len(), KEY_MAX_LEN, "{long_key}");
        assert!(
            long_key.contains("member-7.kubeconfig-member-7-"),
            "{long_key}"
        );
        assert_eq!(ClusterName::new("///").key().len(), KEY_HASH_LEN);
        assert!(ClusterName::new("-leading").key().starts_with("leading-"));
        // A fixed value: the key must not change between releases (keys written to a cluster
        // are looked up again by later versions).
        assert_eq!(ClusterName::new("a/b").key(), "a-b-c14cddc033f6");
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
