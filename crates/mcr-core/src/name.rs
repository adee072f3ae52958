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
/// Kubernetes' rules, use [`ClusterName::key`] for a ConfigMap key, a label value or a line
/// of a table, and [`ClusterName::object_name`] for the name of an object.
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
    /// The key is not a DNS-1123 name (it keeps upper case and `_`), so not an object name:
    /// [`object_name`](Self::object_name) gives that.
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
        Cow::Owned(hashed(name, is_key_char, false))
    }

    /// The name in a form that is a valid **object name** of every kind: a DNS-1123 label
    /// (at most 63 lower-case letters, digits and `-`, starting and ending with a letter or
    /// digit), which is also a DNS-1123 subdomain. Use it to name one object per member: alone
    /// where a kind wants a label (a Namespace, a Service), or after a prefix where it wants a
    /// subdomain (most kinds: `format!("summary-{}", name.object_name())` for a ConfigMap; a
    /// prefix like `summary-` of at most 190 characters keeps it within a subdomain's 253).
    ///
    /// A name that already is a DNS-1123 label is returned as is (`member-1`, a namespace, a
    /// kind cluster), unless it ends like the names made below (`-` and 12 hex digits).
    /// Any other name, the host's `<host>` and names with upper case included, becomes its
    /// last 50 characters in lower case with every run of other characters replaced by one
    /// `-`, then `-` and the first 12 hex digits of the SHA-256 of the whole name (as
    /// [`key`](Self::key) does).
    ///
    /// So two different names give two different object names (barring a 48-bit hash
    /// collision; a name that reads like a made one is made again, so it cannot take the place
    /// of another), and a name always gives the same object name, in every process and
    /// release: an object named after a member can be found again later, by another replica
    /// or another version. Unlike [`key`](Self::key), case is not kept: `Member-1` and
    /// `member-1` are different names, and get different object names.
    ///
    /// ```
    /// use mcr_core::ClusterName;
    ///
    /// // Already an object name: unchanged.
    /// assert_eq!(ClusterName::new("member-1").object_name(), "member-1");
    ///
    /// // A file provider name: readable end in lower case, hash of the whole name.
    /// let name = ClusterName::new("/etc/fleet/Prod.kubeconfig+eu_west");
    /// let object = name.object_name();
    /// assert!(object.starts_with("etc-fleet-prod-kubeconfig-eu-west-"), "{object}");
    /// assert_eq!(object.len(), "etc-fleet-prod-kubeconfig-eu-west-".len() + 12);
    ///
    /// // Different names, different object names, even when they read alike.
    /// assert_ne!(ClusterName::new("Member-1").object_name(), ClusterName::new("member-1").object_name());
    /// let made = ClusterName::new("a/b").object_name().into_owned();
    /// assert_ne!(ClusterName::new(made.as_str()).object_name(), made);
    /// ```
    pub fn object_name(&self) -> Cow<'_, str> {
        let name = self.as_str();
        if is_dns_label(name) && !looks_made(name) {
            return Cow::Borrowed(name);
        }
        Cow::Owned(hashed(name, is_dns_label_char, true))
    }
}

/// `name` fitted to [`KEY_MAX_LEN`] characters that `allowed` accepts (lower-cased first if
/// `lower`): its last characters, every run of other characters replaced by one `-`, trimmed to
/// start and end with a letter or digit, then `-` and [`KEY_HASH_LEN`] hex digits of the
/// SHA-256 of the whole name (the hash alone if nothing readable is left).
fn hashed(name: &str, allowed: fn(char) -> bool, lower: bool) -> String {
    let mut mapped = String::with_capacity(name.len());
    for c in name.chars() {
        let c = if lower { c.to_ascii_lowercase() } else { c };
        if allowed(c) {
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
    if tail.is_empty() {
        hash.to_owned()
    } else {
        format!("{tail}-{hash}")
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

/// A character a DNS-1123 label may hold.
fn is_dns_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

/// Whether `s` is a DNS-1123 label (at most 63 characters).
fn is_dns_label(s: &str) -> bool {
    is_key(s) && s.chars().all(is_dns_label_char)
}

/// Whether `s` ends like a name [`hashed`] makes: [`KEY_HASH_LEN`] lower-case hex digits,
/// alone or after a `-`.
fn looks_made(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(start) = b.len().checked_sub(KEY_HASH_LEN) else {
        return false;
    };
    b[start..]
        .iter()
        .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        && (start == 0 || b[start - 1] == b'-')
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

    /// A DNS-1123 label as the API server checks it (`IsDNS1123Label`): written out here from
    /// its rules, not from `is_dns_label`.
    fn valid_dns_label(s: &str) -> bool {
        let b = s.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    }

    #[test]
    fn object_names_are_valid_stable_and_distinct() {
        let long = format!("/tmp/{}/Member-7.kubeconfig+member-7", "d".repeat(80));
        let (x63, x64) = ("x".repeat(63), "x".repeat(64));
        let made = ClusterName::new("a/b").object_name().into_owned();
        let names = [
            "member-1",
            "Member-1",
            "Team_A.prod",
            "a.b",
            "a-b",
            "/etc/fleet/a.kubeconfig+dev",
            "kind#dev",
            "-leading",
            "trailing-",
            "///",
            "",
            "caf\u{e9}",
            "0123456789ab",
            x63.as_str(),
            x64.as_str(),
            long.as_str(),
            made.as_str(),
            HOST,
        ];
        let mut seen = BTreeSet::new();
        for n in names {
            let object = ClusterName::new(n).object_name().into_owned();
            assert!(valid_dns_label(&object), "{n:?} -> {object:?}");
            assert_eq!(ClusterName::new(n).object_name(), object, "stable: {n:?}");
            assert!(
                seen.insert(object.clone()),
                "{n:?} -> {object:?} given twice"
            );
        }
        assert!(matches!(
            ClusterName::new("member-1").object_name(),
            Cow::Borrowed("member-1")
        ));
        assert_eq!(ClusterName::new(x63.as_str()).object_name(), x63);
        // Names that read like made ones are made again: they cannot stand for another.
        assert_ne!(ClusterName::new(made.as_str()).object_name(), made);
        assert_ne!(
            ClusterName::new("0123456789ab").object_name(),
            "0123456789ab"
        );
        assert_eq!(ClusterName::new("///").object_name().len(), KEY_HASH_LEN);
        assert_eq!(
            ClusterName::new(long.as_str()).object_name().len(),
            KEY_MAX_LEN
        );
        // Fixed values: object names must not change between releases. The hash is the one
        // `key` uses.
        assert_eq!(made, "a-b-c14cddc033f6");
        assert_eq!(
            ClusterName::new("Member-1").object_name(),
            format!(
                "member-1-{}",
                &hex::encode(Sha256::digest(b"Member-1"))[..12]
            )
        );
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
