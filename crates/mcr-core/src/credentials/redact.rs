//! Renewal errors as they may be shown: [`renewal_error`].
//!
//! A [`Renew`](super::Renew) source must not put credential material in its errors. As a
//! second line of defence, the message kept in [`CredentialStatus::last_error`](super::CredentialStatus)
//! and logged is bounded in length and has token-like words masked.

/// Longest message kept, in characters.
const MAX_CHARS: usize = 256;

/// Words at least this long made only of base64 / token characters are masked.
const TOKEN_LEN: usize = 24;

fn token_like(word: &str) -> bool {
    word.chars().count() >= TOKEN_LEN
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_' | '.'))
}

/// `err` rendered with its sources (`a: b: c`), token-like words and the word after `Bearer`
/// replaced by `<redacted>`, cut to 256 characters.
pub(crate) fn renewal_error(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    let mut out = String::with_capacity(text.len().min(MAX_CHARS));
    let mut after_bearer = false;
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let core = word.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | ')' | '('));
        if after_bearer || token_like(core) {
            out.push_str("<redacted>");
        } else {
            out.push_str(word);
        }
        after_bearer = core.eq_ignore_ascii_case("bearer");
    }
    if out.chars().count() > MAX_CHARS {
        out = out.chars().take(MAX_CHARS).collect::<String>() + "…";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::renewal_error;

    #[derive(Debug)]
    struct E(String);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl std::error::Error for E {}

    #[test]
    fn masks_tokens_and_bounds_length() {
        let e = E("request failed: 503 Service Unavailable".into());
        assert_eq!(renewal_error(&e), "request failed: 503 Service Unavailable");
        let e = E(
            "header Authorization: Bearer abc, token \"eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.x\""
                .into(),
        );
        let shown = renewal_error(&e);
        assert!(!shown.contains("abc"), "{shown}");
        assert!(
            !shown.contains("eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9"),
            "{shown}"
        );
        assert!(shown.contains("<redacted>"));
        let long = E("x ".repeat(400));
        assert!(renewal_error(&long).chars().count() <= 257);
    }
}
