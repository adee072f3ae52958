//! Turn arbitrary strings (cluster names, provider keys, file names) into valid
//! Kubernetes object names and label values.
//!
//! Cluster names come from outside: Secret names, file names, ClusterProfile names, prefixes
//! chosen by users. Whenever mcr derives an object name (a Lease, an Event) or a label value
//! from one, it passes it through this module.
//!
//! # Rules
//!
//! * [`dns1123`] produces an RFC 1123 *label*: only `a-z`, `0-9` and `-`, starting and ending
//!   with an alphanumeric character, at most 63 characters. Such a string is also a valid label
//!   value and a valid object name for every resource.
//! * [`dns1123_subdomain`] produces an RFC 1123 *subdomain*: one or more labels joined by `.`,
//!   at most 253 characters in total (the rule for most object names).
//! * ASCII uppercase letters are lowercased; every other character that is not allowed becomes
//!   `-`; leading and trailing `-` (and `.`) are trimmed.
//! * An input that is already valid is returned unchanged.
//! * Whenever the input had to be changed in any way (case, characters, length, emptiness), a
//!   `-` and the first 10 hex digits of the SHA-256 of the *original* input are appended (the
//!   readable part is shortened to make room). Two different inputs therefore map to different
//!   outputs, barring a 40-bit hash collision, even when they differ only in case or in a
//!   replaced character (`"a_b"` and `"a.b"`).
//! * The output is never empty: the empty string maps to its hash alone.

use sha2::{Digest, Sha256};

/// Maximum length of an RFC 1123 label.
pub const DNS1123_LABEL_MAX_LEN: usize = 63;
/// Maximum length of an RFC 1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;

/// Number of hex digits of the SHA-256 appended to a changed input.
const HASH_LEN: usize = 10;

/// Turns any string into a valid DNS-1123 label (see the [module rules](self)).
///
/// ```
/// use mcr_core::sanitize::dns1123;
/// assert_eq!(dns1123("cluster-a"), "cluster-a"); // valid: unchanged
/// let s = dns1123("Team_A/Cluster 1");
/// assert!(s.starts_with("team-a-cluster-1-"));
/// assert!(mcr_core::sanitize::is_dns1123_label(&s));
/// assert_ne!(dns1123("a_b"), dns1123("a.b"));
/// ```
pub fn dns1123(s: &str) -> String {
    if is_dns1123_label(s) {
        return s.to_string();
    }
    let mapped: String = s.chars().map(|c| map_char(c, false)).collect();
    let base = trim_separators(&mapped);
    with_hash(base, s, DNS1123_LABEL_MAX_LEN)
}

/// Turns any string into a valid DNS-1123 subdomain (see the [module rules](self)): like
/// [`dns1123`] but `.` is kept as a label separator and the limit is 253 characters.
///
/// ```
/// use mcr_core::sanitize::{dns1123_subdomain, is_dns1123_subdomain};
/// assert_eq!(dns1123_subdomain("fleet.example.com"), "fleet.example.com");
/// let s = dns1123_subdomain("Fleet..Example_Com.");
/// assert!(s.starts_with("fleet.example-com-"));
/// assert!(is_dns1123_subdomain(&s));
/// ```
pub fn dns1123_subdomain(s: &str) -> String {
    if is_dns1123_subdomain(s) {
        return s.to_string();
    }
    let mapped: String = s.chars().map(|c| map_char(c, true)).collect();
    let labels: Vec<&str> = mapped
        .split('.')
        .map(trim_separators)
        .filter(|l| !l.is_empty())
        .collect();
    let base = labels.join(".");
    with_hash(&base, s, DNS1123_SUBDOMAIN_MAX_LEN)
}

/// True when `s` is a valid RFC 1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 chars.
///
/// ```
/// use mcr_core::sanitize::is_dns1123_label;
/// assert!(is_dns1123_label("a-1"));
/// assert!(!is_dns1123_label("A"));
/// assert!(!is_dns1123_label("-a"));
/// assert!(!is_dns1123_label(""));
/// ```
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= DNS1123_LABEL_MAX_LEN
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// True when `s` is a valid RFC 1123 subdomain: labels as in [`is_dns1123_label`] (without the
/// per-label length limit, as Kubernetes checks it) joined by `.`, at most 253 chars.
///
/// ```
/// use mcr_core::sanitize::is_dns1123_subdomain;
/// assert!(is_dns1123_subdomain("a.b-c.d"));
/// assert!(!is_dns1123_subdomain("a..b"));
/// assert!(!is_dns1123_subdomain("a.b."));
/// ```
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= DNS1123_SUBDOMAIN_MAX_LEN
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && label.starts_with(|c: char| c.is_ascii_alphanumeric())
                && label.ends_with(|c: char| c.is_ascii_alphanumeric())
        })
}

fn map_char(c: char, keep_dots: bool) -> char {
    match c {
        'a'..='z' | '0'..='9' | '-' => c,
        'A'..='Z' => c.to_ascii_lowercase(),
        '.' if keep_dots => '.',
        _ => '-',
    }
}

fn trim_separators(s: &str) -> &str {
    s.trim_matches(|c| c == '-' || c == '.')
}

/// `base` (all ASCII) shortened so that `base-<hash>` fits in `max`, then the hash appended.
fn with_hash(base: &str, original: &str, max: usize) -> String {
    let digest = hex::encode(Sha256::digest(original.as_bytes()));
    let hash = &digest[..HASH_LEN];
    let room = max - HASH_LEN - 1;
    let shortened = trim_separators(&base[..base.len().min(room)]);
    if shortened.is_empty() {
        hash.to_string()
    } else {
        format!("{shortened}-{hash}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_labels_are_unchanged() {
        for s in ["a", "cluster-1", "0abc", "x".repeat(63).as_str()] {
            assert_eq!(dns1123(s), s);
        }
    }

    #[test]
    fn lowercases_and_replaces_invalid_chars() {
        let s = dns1123("Prod_EU/West.1");
        assert!(s.starts_with("prod-eu-west-1-"), "{s}");
        assert!(is_dns1123_label(&s), "{s}");
        let s = dns1123("--héllo--");
        assert!(s.starts_with("h-llo-"), "{s}");
        assert!(is_dns1123_label(&s), "{s}");
    }

    #[test]
    fn changed_inputs_get_a_hash_and_stay_distinct() {
        let inputs = ["a_b", "a.b", "A-b", "a b", "a-b-", "-a-b"];
        let outputs: Vec<String> = inputs.iter().map(|s| dns1123(s)).collect();
        for (i, a) in outputs.iter().enumerate() {
            assert!(is_dns1123_label(a), "{a}");
            assert_ne!(
                a, "a-b",
                "changed input {:?} must not collide with the valid one",
                inputs[i]
            );
            for b in &outputs[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // deterministic
        assert_eq!(dns1123("a_b"), dns1123("a_b"));
    }

    #[test]
    fn long_inputs_are_shortened_with_hash() {
        let long_a = format!("{}a", "x".repeat(100));
        let long_b = format!("{}b", "x".repeat(100));
        let a = dns1123(&long_a);
        let b = dns1123(&long_b);
        assert_eq!(a.len(), 63);
        assert!(is_dns1123_label(&a) && is_dns1123_label(&b));
        assert_ne!(a, b);
        // 64 chars, otherwise valid: shortened
        let s = dns1123(&"y".repeat(64));
        assert!(s.len() <= 63 && is_dns1123_label(&s));
        // a cut that would end in '-' is trimmed
        let s = dns1123(&format!("{}-{}", "z".repeat(51), "z".repeat(40)));
        assert!(is_dns1123_label(&s), "{s}");
    }

    #[test]
    fn empty_and_symbol_only_inputs() {
        let e = dns1123("");
        assert!(is_dns1123_label(&e));
        assert_eq!(e.len(), HASH_LEN);
        let s = dns1123("___");
        assert!(is_dns1123_label(&s));
        assert_ne!(e, s);
        assert!(is_dns1123_subdomain(&dns1123_subdomain("")));
        assert!(is_dns1123_subdomain(&dns1123_subdomain("...")));
    }

    #[test]
    fn subdomains() {
        assert_eq!(dns1123_subdomain("a.b.c"), "a.b.c");
        let s = dns1123_subdomain("A..B_c.");
        assert!(s.starts_with("a.b-c-"), "{s}");
        assert!(is_dns1123_subdomain(&s));
        let long = format!("{}.{}", "p".repeat(200), "q".repeat(200));
        let s = dns1123_subdomain(&long);
        assert!(s.len() <= 253 && is_dns1123_subdomain(&s), "{s}");
        // dots are not allowed in labels
        assert!(dns1123("a.b").starts_with("a-b-"));
    }
}
