//! Field sets as server-side apply tracks them: the paths a manager owns, their `FieldsV1`
//! encoding (`f:data`, `k:{"name":"main"}`, `v:"x"`, `.`), and the set algebra ownership needs.
//!
//! A set holds *members* (paths owned themselves) and *children* (sets below a path element);
//! a path can be both, which `FieldsV1` writes as a `"."` key. [`typed`] walks objects with their
//! [`crate::engine::schema`], which says what a value's parts are (named field, map key, list
//! item and its key).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

pub(crate) mod typed;

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Pe {
    /// A field of a struct or a key of a map: `f:name`.
    Field(String),
    /// An item of an associative list by its key fields, as canonical JSON: `k:{"name":"a"}`.
    Key(String),
    /// An item of a set list by its value, as JSON: `v:"x"`.
    Value(String),
    /// An item of a list by position (lists of unknown shape only): `i:0`.
    Index(usize),
}

impl Pe {
    /// The `FieldsV1` key of this element.
    fn encode(&self) -> String {
        match self {
            Pe::Field(name) => format!("f:{name}"),
            Pe::Key(key) => format!("k:{key}"),
            Pe::Value(value) => format!("v:{value}"),
            Pe::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(key: &str) -> Result<Pe, String> {
        let (kind, rest) = key
            .split_once(':')
            .ok_or_else(|| format!("invalid path element {key:?}"))?;
        let json_ok = |text: &str| serde_json::from_str::<Value>(text).is_ok();
        match kind {
            "f" => Ok(Pe::Field(rest.to_string())),
            "k" if json_ok(rest) => Ok(Pe::Key(canonical(
                &serde_json::from_str(rest).unwrap_or_default(),
            ))),
            "v" if json_ok(rest) => Ok(Pe::Value(canonical(
                &serde_json::from_str(rest).unwrap_or_default(),
            ))),
            "i" => rest
                .parse()
                .map(Pe::Index)
                .map_err(|_| format!("invalid index in {key:?}")),
            _ => Err(format!("invalid path element {key:?}")),
        }
    }

    /// How kube-apiserver prints the element in conflict messages: `.name`,
    /// `[name="a",port=80]`, `[="x"]`, `[0]`.
    fn display(&self) -> String {
        match self {
            Pe::Field(name) => format!(".{name}"),
            Pe::Key(key) => {
                let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let mut parts: Vec<(&String, &Value)> = fields.iter().collect();
                parts.sort_by(|a, b| a.0.cmp(b.0));
                let parts: Vec<String> = parts
                    .into_iter()
                    .map(|(k, v)| format!("{k}={}", display_value(v)))
                    .collect();
                format!("[{}]", parts.join(","))
            }
            Pe::Value(value) => format!(
                "[={}]",
                display_value(&serde_json::from_str(value).unwrap_or_default())
            ),
            Pe::Index(i) => format!("[{i}]"),
        }
    }
}

/// JSON with object keys sorted, as path elements carry values.
pub(crate) fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(value)).unwrap_or_default()
}

fn display_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// A path as kube-apiserver prints it: `.spec.containers[name="main"].image`.
pub(crate) fn display_path(path: &[Pe]) -> String {
    path.iter().map(Pe::display).collect()
}

/// A set of field paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    members: BTreeSet<Pe>,
    children: BTreeMap<Pe, FieldSet>,
}

impl FieldSet {
    /// Adds a path (the empty path, the whole object, is never tracked).
    pub(crate) fn insert(&mut self, path: &[Pe]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `pe` is a member at this level.
    pub(crate) fn has_member(&self, pe: &Pe) -> bool {
        self.members.contains(pe)
    }

    /// The set below `pe` (empty when there is none).
    pub(crate) fn child(&self, pe: &Pe) -> Option<&FieldSet> {
        self.children.get(pe).filter(|c| !c.is_empty())
    }

    /// Whether the set holds no path.
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    /// Paths in either set.
    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Paths in both sets.
    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            members: self.members.intersection(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(pe.clone(), both);
                }
            }
        }
        out
    }

    /// Paths in this set and not in `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            members: self.members.difference(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(pe.clone(), rest);
            }
        }
        out
    }

    /// This set without `path` and everything below it.
    pub(crate) fn without_prefix(&self, path: &[Pe]) -> FieldSet {
        let mut out = self.clone();
        match path {
            [] => return FieldSet::default(),
            [last] => {
                out.members.remove(last);
                out.children.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(child) = out.children.get(first) {
                    let trimmed = child.without_prefix(rest);
                    if trimmed.is_empty() {
                        out.children.remove(first);
                    } else {
                        out.children.insert(first.clone(), trimmed);
                    }
                }
            }
        }
        out
    }

    /// Every member path: members of a level first, then its children, in order.
    pub(crate) fn paths(&self) -> Vec<Vec<Pe>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<Pe>, out: &mut Vec<Vec<Pe>>) {
        for pe in &self.members {
            prefix.push(pe.clone());
            out.push(prefix.clone());
            prefix.pop();
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` form.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        let keys: BTreeSet<&Pe> = self
            .members
            .iter()
            .chain(
                self.children
                    .iter()
                    .filter(|(_, c)| !c.is_empty())
                    .map(|(pe, _)| pe),
            )
            .collect();
        for pe in keys {
            let mut node = match self.children.get(pe).filter(|c| !c.is_empty()) {
                Some(child) => child.to_fields_v1(),
                None => Value::Object(Map::new()),
            };
            if self.members.contains(pe)
                && self.child(pe).is_some()
                && let Some(map) = node.as_object_mut()
            {
                map.insert(".".into(), Value::Object(Map::new()));
            }
            out.insert(pe.encode(), node);
        }
        Value::Object(out)
    }

    /// Reads the `FieldsV1` form.
    pub(crate) fn from_fields_v1(value: &Value) -> Result<FieldSet, String> {
        let Value::Object(map) = value else {
            return Err("FieldsV1 must be an object".into());
        };
        let mut out = FieldSet::default();
        for (key, node) in map {
            if key == "." {
                continue;
            }
            let pe = Pe::decode(key)?;
            let Value::Object(inner) = node else {
                return Err(format!("the value of {key:?} must be an object"));
            };
            if inner.is_empty() || inner.contains_key(".") {
                out.members.insert(pe.clone());
            }
            let child = FieldSet::from_fields_v1(node)?;
            if !child.is_empty() {
                out.children.insert(pe, child);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> Pe {
        Pe::Field(name.into())
    }

    #[test]
    fn fields_v1_round_trip_with_dot() {
        let v = json!({"f:data": {".": {}, "f:a": {}}, "f:spec": {"f:items": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}, "f:tags": {"v:\"x\"": {}}}});
        let set = FieldSet::from_fields_v1(&v).unwrap();
        assert!(set.has_member(&f("data")));
        assert_eq!(set.to_fields_v1(), v);
        assert_eq!(
            display_path(&set.paths()[2]),
            ".spec.items[name=\"a\"]",
            "{:?}",
            set.paths()
        );
    }

    #[test]
    fn algebra() {
        let mut a = FieldSet::default();
        a.insert(&[f("data"), f("a")]);
        a.insert(&[f("data"), f("b")]);
        let mut b = FieldSet::default();
        b.insert(&[f("data"), f("b")]);
        b.insert(&[f("data")]);
        assert_eq!(a.intersection(&b).paths(), vec![vec![f("data"), f("b")]]);
        assert_eq!(a.difference(&b).paths(), vec![vec![f("data"), f("a")]]);
        assert_eq!(a.union(&b).paths().len(), 3);
        assert!(a.without_prefix(&[f("data")]).is_empty());
    }
}
