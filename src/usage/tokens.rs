//! Token counts, and what one run's logs add up to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::UsageFormat;

/// Token counts of one model, or of a whole run. A field is `None` when
/// the CLI does not report it (not when it reported 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Uncached input.
    pub input: Option<u64>,
    /// Billed output, reasoning included.
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    /// Every cache write, the 1-hour ones included.
    pub cache_write: Option<u64>,
    /// The part of `cache_write` written with a 1-hour lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<u64>,
    /// The part of `output` that was reasoning.
    pub reasoning: Option<u64>,
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

impl Tokens {
    /// Adds `other` in: a field either side reported stays reported.
    pub fn add(&mut self, other: &Tokens) {
        self.input = add_opt(self.input, other.input);
        self.output = add_opt(self.output, other.output);
        self.cache_read = add_opt(self.cache_read, other.cache_read);
        self.cache_write = add_opt(self.cache_write, other.cache_write);
        self.cache_write_1h = add_opt(self.cache_write_1h, other.cache_write_1h);
        self.reasoning = add_opt(self.reasoning, other.reasoning);
    }

    /// Every billed token: input, cache reads and writes, output.
    pub fn total(&self) -> u64 {
        [self.input, self.cache_read, self.cache_write, self.output]
            .iter()
            .map(|v| v.unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }

    /// Whether no field was reported at all.
    pub fn is_unreported(&self) -> bool {
        *self == Tokens::default()
    }

    /// `cache_write_1h` never exceeds `cache_write` (a forged log could
    /// say otherwise).
    pub(crate) fn clamp(mut self) -> Tokens {
        if let (Some(w), Some(h)) = (self.cache_write, self.cache_write_1h) {
            self.cache_write_1h = Some(h.min(w));
        }
        if let (Some(o), Some(r)) = (self.output, self.reasoning) {
            self.reasoning = Some(r.min(o));
        }
        self
    }
}

/// What a run's logs say it used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Usage {
    pub format: UsageFormat,
    pub total: Tokens,
    /// Per model, when the format names models (Claude Code's
    /// `modelUsage`); empty otherwise, and the run is priced as the
    /// trial's model.
    pub by_model: BTreeMap<String, Tokens>,
    /// The CLI's own cost estimate, when it prints one.
    pub cli_cost_usd: Option<f64>,
    /// Every log ended with the CLI's final summary (a killed CLI leaves
    /// only per-call lines, which may undercount).
    pub complete: bool,
    /// The logs read (relative to the trial folder).
    pub sources: Vec<String>,
}

impl Usage {
    /// An empty tally for `format`.
    pub fn new(format: UsageFormat) -> Usage {
        Usage {
            format,
            total: Tokens::default(),
            by_model: BTreeMap::new(),
            cli_cost_usd: None,
            complete: true,
            sources: Vec::new(),
        }
    }

    /// Adds one log's tally (a fix attempt has a log of its own).
    pub fn merge(&mut self, other: Usage) {
        self.total.add(&other.total);
        for (m, t) in other.by_model {
            self.by_model.entry(m).or_default().add(&t);
        }
        self.cli_cost_usd = match (self.cli_cost_usd, other.cli_cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        self.complete &= other.complete;
        self.sources.extend(other.sources);
    }
}

/// A non-negative integer field of a JSON object (a float, a negative or a
/// string is not a count).
pub(crate) fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// A finite, non-negative number (a cost).
pub(crate) fn amount(v: &Value, key: &str) -> Option<f64> {
    v.get(key)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite() && *x >= 0.0)
}

/// The JSON objects among `text`'s lines, skipping anything else (the
/// CLI's plain-text messages, a torn last line). Lines longer than
/// [`MAX_LINE`] are skipped unparsed.
pub(crate) fn json_lines(text: &str) -> impl Iterator<Item = Value> + '_ {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('{') && l.len() <= MAX_LINE)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
}

/// Longest line a parser looks at: a CLI's event line with a long tool
/// output stays well below it.
pub const MAX_LINE: usize = 8 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_keeps_what_either_side_reported() {
        let mut a = Tokens {
            input: Some(1),
            output: None,
            ..Tokens::default()
        };
        a.add(&Tokens {
            input: Some(2),
            output: Some(5),
            ..Tokens::default()
        });
        assert_eq!(a.input, Some(3));
        assert_eq!(a.output, Some(5));
        assert_eq!(a.cache_read, None);
        assert_eq!(a.total(), 8);
        let mut big = Tokens {
            input: Some(u64::MAX),
            ..Tokens::default()
        };
        big.add(&Tokens {
            input: Some(5),
            ..Tokens::default()
        });
        assert_eq!(big.input, Some(u64::MAX), "saturates");
    }

    #[test]
    fn clamp_keeps_parts_within_wholes() {
        let t = Tokens {
            cache_write: Some(10),
            cache_write_1h: Some(50),
            output: Some(3),
            reasoning: Some(9),
            ..Tokens::default()
        }
        .clamp();
        assert_eq!(t.cache_write_1h, Some(10));
        assert_eq!(t.reasoning, Some(3));
    }

    #[test]
    fn json_lines_skip_what_is_not_an_object() {
        let text = "plain text\n{\"a\":1}\n[1,2]\n  {\"b\":2}  \n{torn";
        let got: Vec<Value> = json_lines(text).collect();
        assert_eq!(got.len(), 2);
        let v: Value = serde_json::json!({"n": 3, "neg": -1, "f": 1.5, "s": "4"});
        assert_eq!(count(&v, "n"), Some(3));
        assert_eq!(count(&v, "neg"), None);
        assert_eq!(count(&v, "f"), None);
        assert_eq!(count(&v, "s"), None);
        assert_eq!(amount(&v, "f"), Some(1.5));
        assert_eq!(amount(&v, "neg"), None);
    }
}
