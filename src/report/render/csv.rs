//! CSV: one table's rows (RFC 4180), a column per field, nested fields as
//! `a.b` and intervals as `x_ci.0`/`x_ci.1`. Numbers are written as
//! numbers, unknowns as `n/a` (which spreadsheets and pandas read as
//! missing). A text cell that a spreadsheet would take for a formula
//! (`=`, `+`, `-`, `@`, tab, CR first) gets a leading `'`.

use serde_json::{Map, Value};

use super::cells::NA;
use super::{RenderError, Section};
use crate::report::Report;

/// One section's rows as JSON.
pub fn section_value(r: &Report, s: Section) -> Result<Value, RenderError> {
    Ok(match s {
        Section::Summary => serde_json::to_value(&r.table2)?,
        Section::Cases => serde_json::to_value(&r.table6)?,
        Section::Languages => serde_json::to_value(&r.table7)?,
        Section::Partial => serde_json::to_value(&r.table8)?,
        Section::Repeats => serde_json::to_value(&r.repeats)?,
        Section::Compare => serde_json::to_value(&r.comparison)?,
        Section::Trials => serde_json::to_value(&r.trials)?,
    })
}

/// The flat rows CSV writes for a section.
fn rows(r: &Report, s: Section) -> Result<Vec<Value>, RenderError> {
    Ok(match s {
        Section::Partial => as_rows(serde_json::to_value(&r.table8.by_config)?),
        Section::Repeats => r
            .repeats
            .iter()
            .map(|x| serde_json::to_value(&x.rows).map(as_rows))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect(),
        Section::Compare => {
            let mut out = Vec::new();
            for p in r.comparison.iter().flat_map(|c| &c.pairs) {
                for k in &p.cases {
                    let mut v = serde_json::to_value(k)?;
                    v["config"] = Value::from(p.config.as_str());
                    v["baseline_config"] = Value::from(p.baseline_config.as_str());
                    out.push(v);
                }
            }
            out
        }
        _ => as_rows(section_value(r, s)?),
    })
}

fn as_rows(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

pub fn render(r: &Report, s: Section) -> Result<String, RenderError> {
    let rows = rows(r, s)?;
    let flat: Vec<Vec<(String, Value)>> = rows
        .iter()
        .map(|row| {
            let mut cols = Vec::new();
            flatten("", row, &mut cols);
            cols
        })
        .collect();
    // Columns in first-seen order across rows.
    let mut headers: Vec<String> = Vec::new();
    for row in &flat {
        for (k, _) in row {
            if !headers.contains(k) {
                headers.push(k.clone());
            }
        }
    }
    let mut out = String::new();
    out.push_str(&line(
        headers.iter().map(|h| field(&Value::from(h.as_str()))),
    ));
    for row in &flat {
        let map: Map<String, Value> = row.iter().cloned().collect();
        out.push_str(&line(
            headers
                .iter()
                .map(|h| field(map.get(h).unwrap_or(&Value::Null))),
        ));
    }
    Ok(out)
}

/// Nested objects become `a.b` columns and arrays of scalars `a.0`,
/// `a.1`; arrays of objects are other tables (the trials) and left out.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                flatten(&key(k), x, out);
            }
        }
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {}
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                out.push((key(&i.to_string()), x.clone()));
            }
        }
        other => out.push((prefix.to_owned(), other.clone())),
    }
}

fn line(cells: impl Iterator<Item = String>) -> String {
    let mut s = cells.collect::<Vec<_>>().join(",");
    s.push_str("\r\n");
    s
}

fn field(v: &Value) -> String {
    match v {
        Value::Null => NA.into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        other => quote(&other.to_string()),
    }
}

fn quote(s: &str) -> String {
    let guarded = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_owned()
    };
    if guarded.contains([',', '"', '\n', '\r']) || guarded != s {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quote("=HYPERLINK(1)"), "\"'=HYPERLINK(1)\"");
        assert_eq!(quote("two\nlines"), "\"two\nlines\"");
        assert_eq!(field(&Value::Null), "n/a");
        assert_eq!(field(&serde_json::json!(-0.25)), "-0.25");
    }
}
