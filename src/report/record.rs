//! One trial record (`trial.json`) as the report reads it: only the fields
//! the tables use, each checked for its type and range. Records come from
//! folders that other processes (and, next to them, sandboxes) write, so
//! nothing is trusted: a field of the wrong type, a reward that is not 0
//! or 1, a negative or non-finite time or cost, more passed tests than
//! tests, or a pass without a submission makes the whole record
//! unreadable, with the field named, rather than a number in a table.
//!
//! A missing optional field (an older record) is "unknown"; `null` is
//! whatever the contract says it means (for `time_to_submit_seconds`:
//! never submitted).

use serde_json::{Map, Value};

/// The longest case id, configuration name or model the report accepts
/// (they end up in table cells and file names of charts).
pub const MAX_NAME: usize = 200;
/// Times and costs above this are taken for garbage, not data.
const MAX_QUANTITY: f64 = 1e9;

/// Why a record was not used: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    pub field: String,
    pub reason: String,
}

fn bad(field: &str, reason: impl Into<String>) -> FieldError {
    FieldError {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalStatus {
    Completed,
    Timeout,
    Error,
    NotSubmitted,
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    Implementation,
    Infrastructure,
}

/// The contract's `pipeline_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineStatus {
    Evaluated,
    NotSubmitted,
    Rejected,
    Error,
}

/// Hidden-test counts of a judged trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TestCounts {
    pub total: u64,
    pub passed: u64,
}

/// `token_usage`; each count may be unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tokens {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    pub cache_write: Option<u64>,
    pub reasoning: Option<u64>,
}

/// What the record says about the time to submission.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SubmitTime {
    /// The record has no such field (written before it existed).
    Unknown,
    /// `null`: the agent never submitted.
    Never,
    /// Seconds from the agent's start to a valid marker.
    At(f64),
}

/// The fields of `trial.json` the report uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub case_id: String,
    pub agent: String,
    pub model: Option<String>,
    pub run_id: Option<String>,
    pub config: Option<String>,
    pub repeat: Option<u32>,
    pub attempt: Option<u32>,
    pub language: Option<String>,
    pub reward: u8,
    pub terminal_status: TerminalStatus,
    pub failure_class: Option<FailureClass>,
    pub pipeline_status: Option<PipelineStatus>,
    pub failed_phase: Option<String>,
    /// From `submission.state`; `None` when the record has no submission.
    pub submitted: Option<bool>,
    pub tests: Option<TestCounts>,
    pub judge_error: Option<String>,
    pub judge_exit_code: Option<i64>,
    pub denylist_violation: Option<String>,
    pub solve_seconds: Option<f64>,
    pub setup_seconds: Option<f64>,
    pub judge_seconds: Option<f64>,
    pub time_to_submit: SubmitTime,
    pub cost_usd: Option<f64>,
    pub cost_source: Option<String>,
    pub tokens: Option<Tokens>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

impl Record {
    /// Parses and checks the bytes of a `trial.json`.
    pub fn parse(bytes: &[u8]) -> Result<Record, FieldError> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| bad("(json)", e.to_string()))?;
        Record::from_value(&v)
    }

    pub fn from_value(v: &Value) -> Result<Record, FieldError> {
        let o = v
            .as_object()
            .ok_or_else(|| bad("(record)", "not a JSON object"))?;
        let rec = Record {
            case_id: name(o, "case_id")?.ok_or_else(|| bad("case_id", "missing"))?,
            agent: name(o, "agent_spec_name")?.unwrap_or_default(),
            model: name(o, "model")?,
            run_id: name(o, "run_id")?,
            config: name(o, "config")?,
            repeat: index(o, "repeat")?,
            attempt: index(o, "attempt")?,
            language: name(o, "language")?,
            reward: reward(o)?,
            terminal_status: terminal_status(o)?,
            failure_class: failure_class(o)?,
            pipeline_status: pipeline_status(o)?,
            failed_phase: text(o, "failed_phase")?,
            submitted: submitted(o)?,
            tests: tests(o)?,
            judge_error: text(o, "judge_error")?,
            judge_exit_code: int(o, "judge_exit_code")?,
            denylist_violation: text(o, "denylist_violation")?,
            solve_seconds: quantity(o, "solve_seconds")?,
            setup_seconds: quantity(o, "setup_seconds")?,
            judge_seconds: quantity(o, "judge_seconds")?,
            time_to_submit: match o.get("time_to_submit_seconds") {
                None => SubmitTime::Unknown,
                Some(Value::Null) => SubmitTime::Never,
                Some(_) => SubmitTime::At(
                    quantity(o, "time_to_submit_seconds")?.expect("present and not null"),
                ),
            },
            cost_usd: quantity(o, "cost_usd")?,
            cost_source: text(o, "cost_source")?,
            tokens: tokens(o)?,
            started_at: text(o, "started_at")?,
            finished_at: text(o, "finished_at")?,
        };
        rec.consistent()?;
        Ok(rec)
    }

    /// A pass is only believable from a trial that was submitted and judged.
    fn consistent(&self) -> Result<(), FieldError> {
        if self.reward != 1 {
            return Ok(());
        }
        let status = match self.terminal_status {
            TerminalStatus::Completed | TerminalStatus::Timeout => None,
            TerminalStatus::Error => Some("error"),
            TerminalStatus::NotSubmitted => Some("not_submitted"),
            TerminalStatus::Interrupted => Some("interrupted"),
        };
        if let Some(s) = status {
            return Err(bad("reward", format!("1, but terminal_status is {s}")));
        }
        if let Some(p) = self
            .pipeline_status
            .filter(|p| *p != PipelineStatus::Evaluated)
        {
            return Err(bad(
                "reward",
                format!("1, but pipeline_status is {}", pipeline_name(p)),
            ));
        }
        if self.submitted == Some(false) || self.time_to_submit == SubmitTime::Never {
            return Err(bad(
                "reward",
                "1, but the record says nothing was submitted",
            ));
        }
        if let Some(t) = self.tests.filter(|t| t.passed < t.total) {
            return Err(bad(
                "reward",
                format!("1, but only {} of {} tests passed", t.passed, t.total),
            ));
        }
        Ok(())
    }

    /// Whether the agent made a valid submission: by `pipeline_status`,
    /// else the submission state, else a time to submission.
    pub fn was_submitted(&self) -> bool {
        match self.pipeline_status {
            Some(PipelineStatus::Evaluated | PipelineStatus::Rejected) => return true,
            Some(PipelineStatus::NotSubmitted) => return false,
            _ => {}
        }
        if let Some(s) = self.submitted {
            return s;
        }
        matches!(self.time_to_submit, SubmitTime::At(_))
    }

    /// Whether the judge ran on the submission.
    pub fn was_judged(&self) -> bool {
        match self.pipeline_status {
            Some(PipelineStatus::Evaluated) => true,
            Some(_) => false,
            None => {
                self.tests.is_some() || self.judge_exit_code.is_some() || self.judge_error.is_some()
            }
        }
    }
}

pub fn pipeline_name(p: PipelineStatus) -> &'static str {
    match p {
        PipelineStatus::Evaluated => "evaluated",
        PipelineStatus::NotSubmitted => "not_submitted",
        PipelineStatus::Rejected => "rejected",
        PipelineStatus::Error => "error",
    }
}

/// A present, non-null field.
fn field<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

fn text(o: &Map<String, Value>, key: &str) -> Result<Option<String>, FieldError> {
    match field(o, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(key, "not a string")),
    }
}

/// A string that becomes a table cell: not empty, not huge.
fn name(o: &Map<String, Value>, key: &str) -> Result<Option<String>, FieldError> {
    let Some(s) = text(o, key)? else {
        return Ok(None);
    };
    if s.is_empty() {
        return Err(bad(key, "empty"));
    }
    if s.len() > MAX_NAME {
        return Err(bad(key, format!("longer than {MAX_NAME} bytes")));
    }
    Ok(Some(s))
}

fn int(o: &Map<String, Value>, key: &str) -> Result<Option<i64>, FieldError> {
    match field(o, key) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad(key, "not an integer")),
    }
}

fn count(o: &Map<String, Value>, key: &str) -> Result<Option<u64>, FieldError> {
    match field(o, key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(key, "not a non-negative integer")),
    }
}

/// `repeat`, `attempt`: 1-based.
fn index(o: &Map<String, Value>, key: &str) -> Result<Option<u32>, FieldError> {
    match count(o, key)? {
        None => Ok(None),
        Some(n) if (1..=u32::MAX as u64).contains(&n) => Ok(Some(n as u32)),
        Some(_) => Err(bad(key, "must be 1 or more")),
    }
}

/// Seconds or dollars: finite, not negative, not absurd.
fn quantity(o: &Map<String, Value>, key: &str) -> Result<Option<f64>, FieldError> {
    let Some(v) = field(o, key) else {
        return Ok(None);
    };
    let x = v.as_f64().ok_or_else(|| bad(key, "not a number"))?;
    if !x.is_finite() || x < 0.0 {
        return Err(bad(key, format!("{x}: must be a finite number, 0 or more")));
    }
    if x > MAX_QUANTITY {
        return Err(bad(key, format!("{x}: implausibly large")));
    }
    Ok(Some(x))
}

fn reward(o: &Map<String, Value>) -> Result<u8, FieldError> {
    let v = field(o, "reward").ok_or_else(|| bad("reward", "missing"))?;
    match v.as_f64() {
        Some(0.0) => Ok(0),
        Some(1.0) => Ok(1),
        _ => Err(bad("reward", format!("{v}: must be 0 or 1"))),
    }
}

fn terminal_status(o: &Map<String, Value>) -> Result<TerminalStatus, FieldError> {
    let s = text(o, "terminal_status")?.ok_or_else(|| bad("terminal_status", "missing"))?;
    Ok(match s.as_str() {
        "completed" => TerminalStatus::Completed,
        "timeout" => TerminalStatus::Timeout,
        "error" => TerminalStatus::Error,
        "not_submitted" => TerminalStatus::NotSubmitted,
        "interrupted" => TerminalStatus::Interrupted,
        _ => return Err(bad("terminal_status", "not a known status")),
    })
}

fn failure_class(o: &Map<String, Value>) -> Result<Option<FailureClass>, FieldError> {
    Ok(match text(o, "failure_class")?.as_deref() {
        None => None,
        Some("implementation") => Some(FailureClass::Implementation),
        Some("infrastructure") => Some(FailureClass::Infrastructure),
        Some(_) => return Err(bad("failure_class", "not a known class")),
    })
}

fn pipeline_status(o: &Map<String, Value>) -> Result<Option<PipelineStatus>, FieldError> {
    Ok(match text(o, "pipeline_status")?.as_deref() {
        None => None,
        Some("evaluated") => Some(PipelineStatus::Evaluated),
        Some("not_submitted") => Some(PipelineStatus::NotSubmitted),
        Some("rejected") => Some(PipelineStatus::Rejected),
        Some("error") => Some(PipelineStatus::Error),
        Some(_) => return Err(bad("pipeline_status", "not a known status")),
    })
}

fn submitted(o: &Map<String, Value>) -> Result<Option<bool>, FieldError> {
    let Some(v) = field(o, "submission") else {
        return Ok(None);
    };
    let state = v
        .as_object()
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .ok_or_else(|| bad("submission", "not an object with a state"))?;
    match state {
        "submitted" => Ok(Some(true)),
        "not_submitted" => Ok(Some(false)),
        _ => Err(bad("submission.state", "not a known state")),
    }
}

fn tests(o: &Map<String, Value>) -> Result<Option<TestCounts>, FieldError> {
    let total = count(o, "test_count")?;
    let passed = count(o, "passed")?;
    for key in ["failed", "errors", "skipped"] {
        count(o, key)?;
    }
    match (total, passed) {
        (None, None) => Ok(None),
        (Some(total), Some(passed)) if passed <= total => Ok(Some(TestCounts { total, passed })),
        (Some(total), Some(passed)) => {
            Err(bad("passed", format!("{passed} passed of {total} tests")))
        }
        (None, Some(_)) => Err(bad("test_count", "missing while passed is set")),
        (Some(_), None) => Err(bad("passed", "missing while test_count is set")),
    }
}

fn tokens(o: &Map<String, Value>) -> Result<Option<Tokens>, FieldError> {
    let Some(v) = field(o, "token_usage") else {
        return Ok(None);
    };
    let t = v
        .as_object()
        .ok_or_else(|| bad("token_usage", "not an object"))?;
    let get = |key: &str| -> Result<Option<u64>, FieldError> {
        match t.get(key).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| bad(&format!("token_usage.{key}"), "not a non-negative integer")),
        }
    };
    Ok(Some(Tokens {
        input: get("input")?,
        output: get("output")?,
        cache_read: get("cache_read")?,
        cache_write: get("cache_write")?,
        reasoning: get("reasoning")?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "case_id": "c1", "agent_spec_name": "a", "reward": 1,
            "terminal_status": "completed", "test_count": 3, "passed": 3,
            "submission": {"state": "submitted"}
        })
    }

    fn with(key: &str, v: Value) -> Result<Record, FieldError> {
        let mut b = base();
        b[key] = v;
        Record::from_value(&b)
    }

    #[test]
    fn a_plain_record_reads() {
        let r = Record::from_value(&base()).unwrap();
        assert_eq!(r.reward, 1);
        assert_eq!(
            r.tests,
            Some(TestCounts {
                total: 3,
                passed: 3
            })
        );
        assert_eq!(r.time_to_submit, SubmitTime::Unknown);
        assert!(r.was_submitted() && r.was_judged());
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            ("reward", json!(2), "reward"),
            ("reward", json!("1"), "reward"),
            ("cost_usd", json!(-1.0), "cost_usd"),
            ("cost_usd", json!("free"), "cost_usd"),
            ("solve_seconds", json!(1e300), "solve_seconds"),
            ("passed", json!(4), "passed"),
            ("terminal_status", json!("won"), "terminal_status"),
            ("case_id", json!(""), "case_id"),
            ("case_id", json!("x".repeat(300)), "case_id"),
            ("repeat", json!(0), "repeat"),
            ("token_usage", json!({"input": -3}), "token_usage.input"),
            ("submission", json!("yes"), "submission"),
        ];
        for (key, v, field) in cases {
            let e = with(key, v.clone()).unwrap_err();
            assert_eq!(e.field, field, "{key}={v}: {e}");
        }
        assert_eq!(Record::parse(b"[1]").unwrap_err().field, "(record)");
        assert_eq!(Record::parse(b"{").unwrap_err().field, "(json)");
    }

    #[test]
    fn a_pass_needs_a_judged_submission() {
        assert!(with("terminal_status", json!("not_submitted")).is_err());
        assert!(with("pipeline_status", json!("rejected")).is_err());
        assert!(with("time_to_submit_seconds", Value::Null).is_err());
        assert!(with("passed", json!(2)).is_err());
        assert!(with("time_to_submit_seconds", json!(12.5)).is_ok());
    }

    #[test]
    fn null_time_means_never_and_missing_means_unknown() {
        let mut b = base();
        b["reward"] = json!(0);
        b["time_to_submit_seconds"] = Value::Null;
        assert_eq!(
            Record::from_value(&b).unwrap().time_to_submit,
            SubmitTime::Never
        );
    }
}
