//! Label selectors: the full Kubernetes grammar (`=`, `==`, `!=`, `in`, `notin`, existence,
//! `!key`, `>`/`<`), parsed into requirements and matched against an object's labels.

use serde_json::Value;

use crate::engine::{ApiError, meta};

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    Greater(String, i64),
    Less(String, i64),
}

/// A parsed label selector: every requirement must hold (comma = AND).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
}

fn bad(selector: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: {why} (selector {selector:?})"
    ))
}

fn lex(input: &str) -> Result<Vec<Token>, ApiError> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | ',' | '>' | '<' => {
                chars.next();
                tokens.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    ',' => Token::Comma,
                    '>' => Token::Gt,
                    _ => Token::Lt,
                });
            }
            '=' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    tokens.push(Token::DoubleEq);
                } else {
                    tokens.push(Token::Eq);
                }
            }
            '!' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    tokens.push(Token::NotEq);
                } else {
                    tokens.push(Token::Not);
                }
            }
            _ => {
                let mut ident = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || "()=!,<>".contains(c) {
                        break;
                    }
                    ident.push(c);
                    chars.next();
                }
                tokens.push(Token::Ident(ident));
            }
        }
    }
    Ok(tokens)
}

fn valid_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    name_ok && prefix.is_none_or(meta::is_dns_subdomain)
}

fn valid_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

impl LabelSelector {
    /// Parses a selector such as `app=web, tier in (a,b), !legacy`. Empty means everything.
    pub(crate) fn parse(input: &str) -> Result<Self, ApiError> {
        let tokens = lex(input)?;
        let mut requirements = Vec::new();
        let mut pos = 0;
        if tokens.is_empty() {
            return Ok(Self { requirements });
        }
        loop {
            let (req, next) = Self::requirement(input, &tokens, pos)?;
            requirements.push(req);
            pos = next;
            match tokens.get(pos) {
                None => break,
                Some(Token::Comma) => pos += 1,
                Some(other) => return Err(bad(input, &format!("unexpected {other:?}"))),
            }
        }
        Ok(Self { requirements })
    }

    fn key(input: &str, tokens: &[Token], pos: usize) -> Result<String, ApiError> {
        match tokens.get(pos) {
            Some(Token::Ident(k)) if valid_key(k) => Ok(k.clone()),
            Some(Token::Ident(k)) => Err(bad(input, &format!("invalid label key {k:?}"))),
            _ => Err(bad(input, "expected a label key")),
        }
    }

    fn value(input: &str, tokens: &[Token], pos: usize) -> (Result<String, ApiError>, usize) {
        match tokens.get(pos) {
            Some(Token::Ident(v)) if valid_value(v) => (Ok(v.clone()), pos + 1),
            Some(Token::Ident(v)) => (Err(bad(input, &format!("invalid label value {v:?}"))), pos),
            // `a=` (end, or followed by a comma) selects the empty value.
            None | Some(Token::Comma) => (Ok(String::new()), pos),
            Some(other) => (Err(bad(input, &format!("unexpected {other:?}"))), pos),
        }
    }

    fn requirement(
        input: &str,
        tokens: &[Token],
        pos: usize,
    ) -> Result<(Requirement, usize), ApiError> {
        if tokens.get(pos) == Some(&Token::Not) {
            let key = Self::key(input, tokens, pos + 1)?;
            return Ok((Requirement::DoesNotExist(key), pos + 2));
        }
        let key = Self::key(input, tokens, pos)?;
        let pos = pos + 1;
        match tokens.get(pos) {
            None | Some(Token::Comma) => Ok((Requirement::Exists(key), pos)),
            Some(Token::Eq | Token::DoubleEq) => {
                let (v, next) = Self::value(input, tokens, pos + 1);
                Ok((Requirement::Equals(key, v?), next))
            }
            Some(Token::NotEq) => {
                let (v, next) = Self::value(input, tokens, pos + 1);
                Ok((Requirement::NotEquals(key, v?), next))
            }
            Some(op @ (Token::Gt | Token::Lt)) => {
                let n = match tokens.get(pos + 1) {
                    Some(Token::Ident(v)) => v.parse::<i64>().map_err(|_| {
                        bad(
                            input,
                            &format!(
                                "for 'Gt', 'Lt' operators, the value must be an integer, got {v:?}"
                            ),
                        )
                    })?,
                    _ => return Err(bad(input, "expected an integer")),
                };
                let req = if *op == Token::Gt {
                    Requirement::Greater(key, n)
                } else {
                    Requirement::Less(key, n)
                };
                Ok((req, pos + 2))
            }
            Some(Token::Ident(word)) if word == "in" || word == "notin" => {
                if tokens.get(pos + 1) != Some(&Token::Open) {
                    return Err(bad(input, "expected '(' after set operator"));
                }
                let mut values = Vec::new();
                let mut p = pos + 2;
                loop {
                    match tokens.get(p) {
                        Some(Token::Close) => {
                            p += 1;
                            break;
                        }
                        Some(Token::Ident(v)) if valid_value(v) => {
                            values.push(v.clone());
                            p += 1;
                            match tokens.get(p) {
                                Some(Token::Comma) => p += 1,
                                Some(Token::Close) => {}
                                _ => return Err(bad(input, "expected ',' or ')'")),
                            }
                        }
                        Some(Token::Comma) => {
                            // An empty value inside the set: `a in (,x)`.
                            values.push(String::new());
                            p += 1;
                        }
                        _ => return Err(bad(input, "unterminated value set")),
                    }
                }
                let req = if word == "in" {
                    Requirement::In(key, values)
                } else {
                    Requirement::NotIn(key, values)
                };
                Ok((req, p))
            }
            Some(other) => Err(bad(input, &format!("unexpected {other:?} after key"))),
        }
    }

    /// Whether the selector has no requirement (it matches everything).
    pub(super) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|req| match req {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
            Requirement::Greater(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Requirement::Less(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n1", "namespace": "ns1", "labels": labels}})
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn equality_forms() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        assert!(sel("app=web").matches(&o));
        assert!(sel("app==web").matches(&o));
        assert!(!sel("app!=web").matches(&o));
        assert!(sel("app!=db").matches(&o));
        assert!(sel("missing!=x").matches(&o), "!= matches absent keys");
        assert!(sel(" app = web , tier==front ").matches(&o));
        assert!(!sel("app=web,tier=back").matches(&o));
        assert!(sel("").matches(&o));
    }

    #[test]
    fn set_and_existence_forms() {
        let o = obj(json!({"app": "web", "example.com/x": "1"}));
        assert!(sel("app in (db, web)").matches(&o));
        assert!(!sel("app in (db)").matches(&o));
        assert!(sel("app notin (db)").matches(&o));
        assert!(!sel("app notin (web,db)").matches(&o));
        assert!(sel("other notin (web)").matches(&o));
        assert!(sel("app").matches(&o));
        assert!(sel("example.com/x").matches(&o));
        assert!(!sel("!app").matches(&o));
        assert!(sel("!other").matches(&o));
        assert!(sel("example.com/x>0,example.com/x<2").matches(&o));
        assert!(sel("app,!other,app in (web)").matches(&o));
    }

    #[test]
    fn invalid_selectors_are_bad_requests() {
        for s in [
            "app in web",
            "app in (web",
            "=x",
            "app=(x)",
            "!",
            "app notin",
            "a b",
            "Bad Key=x",
            "app=a b",
            "app>x",
            "-bad=x",
        ] {
            let err = LabelSelector::parse(s).expect_err(s);
            assert_eq!(err.code, 400, "{s}");
        }
    }
}
