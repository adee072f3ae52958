//! Label values escaped for the Prometheus / OpenMetrics text format.
//!
//! Cluster names come from outside (a Secret's name, a kubeconfig context name in the file
//! provider, a ClusterProfile), and `prometheus-client` writes label values verbatim. A `"`,
//! `\` or newline in a name would end the label early, break the scrape or add series of the
//! writer's choosing. [`LabelValue`] keeps the original string (for lookups and removal) and
//! escapes it as the format requires (`\\`, `\"`, `\n`) when encoded.

use std::fmt::Write;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

/// A label value, escaped when encoded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LabelValue(String);

impl From<&str> for LabelValue {
    fn from(s: &str) -> Self {
        LabelValue(s.to_owned())
    }
}

impl EncodeLabelValue for LabelValue {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        Escaped(&self.0).encode(encoder)
    }
}

/// A borrowed label value, escaped when encoded (for series that keep their labels as shared
/// strings, see `series`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Escaped<'a>(pub(crate) &'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0;
        let mut start = 0;
        for (i, c) in s.char_indices() {
            let escaped = match c {
                '\\' => "\\\\",
                '"' => "\\\"",
                '\n' => "\\n",
                _ => continue,
            };
            encoder.write_str(&s[start..i])?;
            encoder.write_str(escaped)?;
            start = i + c.len_utf8();
        }
        encoder.write_str(&s[start..])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::metrics::Metrics;

    /// One sample line of the text format: metric name, labels (unescaped), value.
    type Sample = (String, BTreeMap<String, String>, String);

    /// A strict parser of the text format's sample lines (comments skipped); `Err` on anything
    /// a scraper would reject.
    fn parse(text: &str) -> Result<Vec<Sample>, String> {
        let mut out = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| format!("{why}: {line:?}");
            let (name, rest) = match line.find('{') {
                Some(i) => (&line[..i], &line[i..]),
                None => line.split_once(' ').ok_or_else(|| bad("no value"))?,
            };
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            {
                return Err(bad("bad metric name"));
            }
            let mut labels = BTreeMap::new();
            let mut chars = rest.chars().peekable();
            if chars.peek() == Some(&'{') {
                chars.next();
                loop {
                    let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return Err(bad("bad label name"));
                    }
                    if chars.next() != Some('"') {
                        return Err(bad("label value not quoted"));
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next().ok_or_else(|| bad("unterminated value"))? {
                            '"' => break,
                            '\\' => match chars.next() {
                                Some('\\') => value.push('\\'),
                                Some('"') => value.push('"'),
                                Some('n') => value.push('\n'),
                                _ => return Err(bad("bad escape")),
                            },
                            c => value.push(c),
                        }
                    }
                    labels.insert(key, value);
                    match chars.next() {
                        Some(',') => continue,
                        Some('}') => break,
                        _ => return Err(bad("bad label separator")),
                    }
                }
                if chars.next() != Some(' ') {
                    return Err(bad("no value"));
                }
            }
            let value: String = chars.collect();
            if value.parse::<f64>().is_err() {
                return Err(bad("value is not a number"));
            }
            out.push((name.to_owned(), labels, value));
        }
        Ok(out)
    }

    #[test]
    fn hostile_cluster_names_cannot_break_the_scrape_or_add_series() {
        let hostile = [
            "quote\"} 1\nmcr_injected_total{cluster=\"x\"} 99\n#",
            "back\\slash\\",
            "new\nline",
            "\\\"",
        ];
        let metrics = Metrics::new();
        for name in hostile {
            let m = metrics.cluster("ctl\"\n", &mcr_core::ClusterName::new(name));
            m.success.inc();
            m.depth.set(2);
        }
        metrics.engaged("ctl\"\n").set(4);
        let synced: Vec<(String, bool)> = hostile.iter().map(|n| (n.to_string(), true)).collect();
        metrics.set_cluster_sync(&synced);
        let text = metrics.encode();
        let samples = parse(&text).unwrap_or_else(|e| panic!("unparsable scrape ({e}):\n{text}"));
        assert!(
            samples
                .iter()
                .all(|(n, _, _)| n.starts_with("mcr_") && n != "mcr_injected_total"),
            "{text}"
        );
        for name in hostile {
            let success = samples.iter().filter(|(n, l, _)| {
                n == "mcr_reconcile_total"
                    && l.get("cluster").map(String::as_str) == Some(name)
                    && l.get("controller").map(String::as_str) == Some("ctl\"\n")
                    && l.get("result").map(String::as_str) == Some("success")
            });
            assert_eq!(
                success.map(|(_, _, v)| v.as_str()).collect::<Vec<_>>(),
                ["1"],
                "{name:?}\n{text}"
            );
            let depth = samples.iter().filter(|(n, l, _)| {
                n == "mcr_queue_depth" && l.get("cluster").map(String::as_str) == Some(name)
            });
            assert_eq!(depth.count(), 1, "{name:?}\n{text}");
            let synced = samples.iter().filter(|(n, l, _)| {
                n == "mcr_cluster_synced" && l.get("cluster").map(String::as_str) == Some(name)
            });
            assert_eq!(synced.count(), 1, "{name:?}\n{text}");
        }
        let engaged: Vec<_> = samples
            .iter()
            .filter(|(n, _, _)| n == "mcr_engaged_clusters")
            .collect();
        assert_eq!(engaged.len(), 1);
        assert_eq!(
            engaged[0].1.get("controller").map(String::as_str),
            Some("ctl\"\n")
        );
        assert_eq!(engaged[0].2, "4");
        // The sample store and removal key on the original, unescaped name.
        let m = metrics.cluster("ctl\"\n", &mcr_core::ClusterName::new(hostile[0]));
        metrics.forget_cluster(&m);
        metrics.set_cluster_sync(&[]); // what a scrape does once the cluster left
        let after = parse(&metrics.encode()).expect("parsable");
        assert!(
            after
                .iter()
                .all(|(_, l, _)| l.get("cluster").map(String::as_str) != Some(hostile[0]))
        );
    }
}
