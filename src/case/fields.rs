//! Walks a parsed JSON document field by field, so each defect is reported
//! at its own path (`runner.environment_checks[0].phase`) with serde's
//! reason, instead of one error for the whole file.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::problem::Sink;

/// Whether a field must be present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Absent: error.
    Required,
    /// Present in every published variant but not needed by cbrun.
    /// Absent: warning.
    Documented,
    /// Absent: fine.
    Optional,
}

/// One file being checked.
pub(crate) struct Doc<'s> {
    sink: &'s mut Sink,
    file: String,
    errors: usize,
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'s> Doc<'s> {
    pub fn new(sink: &'s mut Sink, file: &str) -> Self {
        Doc {
            sink,
            file: file.to_string(),
            errors: 0,
        }
    }

    /// Errors reported through this `Doc` so far.
    pub fn errors(&self) -> usize {
        self.errors
    }

    pub fn error(&mut self, field: &str, reason: &str) {
        self.errors += 1;
        self.sink.error(&self.file, field, reason);
    }

    pub fn warn(&mut self, field: &str, reason: &str) {
        self.sink.warn(&self.file, field, reason);
    }

    /// `v` as an object, or an error at `path`.
    pub fn object<'v>(&mut self, v: &'v Value, path: &str) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.error(path, &format!("expected an object, found {}", kind(other)));
                None
            }
        }
    }

    /// Reports a missing field according to `presence`; returns the value if present.
    fn get<'v>(
        &mut self,
        m: &'v Map<String, Value>,
        path: &str,
        key: &str,
        presence: Presence,
    ) -> Option<&'v Value> {
        let v = m.get(key);
        if v.is_none() {
            let at = join(path, key);
            match presence {
                Presence::Required => self.error(&at, "missing required field"),
                Presence::Documented => self.warn(&at, "missing (defaulted)"),
                Presence::Optional => {}
            }
        }
        v
    }

    /// Field `key` of `m` as a `T`.
    pub fn field<T: DeserializeOwned>(
        &mut self,
        m: &Map<String, Value>,
        path: &str,
        key: &str,
        presence: Presence,
    ) -> Option<T> {
        let v = self.get(m, path, key, presence)?;
        self.value(v, &join(path, key))
    }

    /// `v` as a `T`, or an error at `path`.
    pub fn value<T: DeserializeOwned>(&mut self, v: &Value, path: &str) -> Option<T> {
        match T::deserialize(v) {
            Ok(t) => Some(t),
            Err(e) => {
                self.error(path, &e.to_string());
                None
            }
        }
    }

    /// A sub-object.
    pub fn object_field<'v>(
        &mut self,
        m: &'v Map<String, Value>,
        path: &str,
        key: &str,
        presence: Presence,
    ) -> Option<&'v Map<String, Value>> {
        let v = self.get(m, path, key, presence)?;
        self.object(v, &join(path, key))
    }

    /// An array whose items are each checked as a `T` at `key[i]`.
    pub fn list<T: DeserializeOwned>(
        &mut self,
        m: &Map<String, Value>,
        path: &str,
        key: &str,
        presence: Presence,
    ) -> Option<Vec<T>> {
        let items = self.array(m, path, key, presence)?;
        let at = join(path, key);
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.value(item, &format!("{at}[{i}]")) {
                Some(t) => out.push(t),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// An array of objects, each with its path `key[i]`.
    pub fn objects<'v>(
        &mut self,
        m: &'v Map<String, Value>,
        path: &str,
        key: &str,
        presence: Presence,
    ) -> Vec<(String, &'v Map<String, Value>)> {
        let Some(items) = self.array(m, path, key, presence) else {
            return Vec::new();
        };
        let at = join(path, key);
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{at}[{i}]");
            if let Some(o) = self.object(item, &p) {
                out.push((p, o));
            }
        }
        out
    }

    fn array<'v>(
        &mut self,
        m: &'v Map<String, Value>,
        path: &str,
        key: &str,
        presence: Presence,
    ) -> Option<&'v Vec<Value>> {
        match self.get(m, path, key, presence)? {
            Value::Array(a) => Some(a),
            other => {
                self.error(
                    &join(path, key),
                    &format!("expected an array, found {}", kind(other)),
                );
                None
            }
        }
    }

    /// `schema_version` must be present and equal `expected`.
    pub fn schema_version(&mut self, m: &Map<String, Value>, expected: u64) -> Option<u64> {
        self.schema_version_in(m, &[expected])
    }

    /// `schema_version` must be present and one of `known`.
    pub fn schema_version_in(&mut self, m: &Map<String, Value>, known: &[u64]) -> Option<u64> {
        let v = self.field::<u64>(m, "", "schema_version", Presence::Required)?;
        if !known.contains(&v) {
            let want = known
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" or ");
            self.error(
                "schema_version",
                &format!("unsupported schema_version {v} (expected {want})"),
            );
            return None;
        }
        Some(v)
    }

    /// An informational field: absent is fine; a shape other than `T`'s is
    /// a warning (the value is kept as it is).
    pub fn lenient<T: DeserializeOwned>(&mut self, m: &Map<String, Value>, path: &str, key: &str) {
        let Some(v) = m.get(key) else { return };
        if v.is_null() {
            return;
        }
        if let Err(e) = T::deserialize(v) {
            self.warn(
                &join(path, key),
                &format!("not in the documented shape ({e}); kept as it is"),
            );
        }
    }

    /// An optional non-negative count (`expected_test_count`, ...).
    pub fn count(&mut self, m: &Map<String, Value>, path: &str, key: &str) -> Option<u64> {
        let v = m.get(key)?;
        if v.as_i64().is_some_and(|n| n < 0) || v.as_f64().is_some_and(|n| n < 0.0) {
            self.error(
                &join(path, key),
                &format!("must be a non-negative integer, found {v}"),
            );
            return None;
        }
        self.value::<Option<u64>>(v, &join(path, key)).flatten()
    }

    /// An optional non-negative number of seconds.
    pub fn seconds(&mut self, m: &Map<String, Value>, path: &str, key: &str) -> Option<f64> {
        let v = m.get(key)?;
        let s = self.value::<Option<f64>>(v, &join(path, key)).flatten()?;
        if !s.is_finite() || s < 0.0 {
            self.error(
                &join(path, key),
                &format!("must be a non-negative number of seconds, found {v}"),
            );
            return None;
        }
        Some(s)
    }

    /// Deserialises the whole document once its fields were walked cleanly.
    pub fn finish<T: DeserializeOwned>(&mut self, v: &Value, errors_before: usize) -> Option<T> {
        if self.errors > errors_before {
            return None;
        }
        self.value(v, "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_and_presence() {
        let mut sink = Sink::new("c".into());
        let v = json!({"a": {"b": [1, "x"]}, "n": -3, "s": "str"});
        let mut d = Doc::new(&mut sink, "f.json");
        let m = d.object(&v, "").unwrap();
        let a = d.object_field(m, "", "a", Presence::Required).unwrap();
        assert!(d.list::<u64>(a, "a", "b", Presence::Required).is_none());
        assert!(d
            .field::<u64>(m, "", "missing", Presence::Required)
            .is_none());
        assert!(d.field::<u64>(m, "", "doc", Presence::Documented).is_none());
        assert!(d.count(m, "", "n").is_none());
        assert_eq!(
            d.field::<String>(m, "", "s", Presence::Optional).as_deref(),
            Some("str")
        );
        assert_eq!(d.errors(), 3);
        let got: Vec<String> = sink.problems.iter().map(|p| p.field.clone()).collect();
        assert_eq!(got, ["a.b[1]", "missing", "doc", "n"]);
        assert!(!sink.problems[2].is_error());
    }

    #[test]
    fn array_instead_of_object() {
        let mut sink = Sink::new("c".into());
        let mut d = Doc::new(&mut sink, "f.json");
        assert!(d.object(&json!([1, 2]), "").is_none());
        assert_eq!(
            sink.problems[0].to_string(),
            "c/f.json: -: expected an object, found an array"
        );
    }
}
