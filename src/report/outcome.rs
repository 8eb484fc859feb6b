//! What one trial counts as in the tables: the rule that decides which
//! trials a pass rate is over.
//!
//! **The rule.** A pass rate is over the *valid* trials: those whose 0 or
//! 1 says something about the agent. A trial is valid when it has a
//! readable record that is neither `interrupted` nor blamed on the
//! infrastructure (`failure_class: infrastructure`, or `terminal_status:
//! error` with no blame recorded). Valid trials are passes (reward 1) or
//! failures of four kinds: judged and failed, not submitted (a timeout
//! without a submission included), rejected (banned import after the fix
//! attempt, a refused workspace), and errors the agent caused. Everything
//! else is *excluded* and shown in its own columns, never as a 0:
//! infrastructure failures, interrupted trials, trials still running
//! (a live claim file), pending ones (planned, no record yet) and
//! unreadable records.
//!
//! Why: `cbrun trial` already draws this line (exit 0 for evaluated
//! trials, 1 for incomplete or infrastructure ones), and counting a host
//! that ran out of disk as the agent's failure would make two runs of the
//! same agent differ by the weather. The cost of the rule is that an agent
//! whose installation keeps failing is not penalised in the rate; the
//! excluded counts beside the rate are there so that no reader misses it.

use serde::Serialize;

use super::record::{FailureClass, PipelineStatus, Record, TerminalStatus};

/// How a valid trial failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The judge ran and at least one hidden test failed (or none ran).
    Judged,
    NotSubmitted,
    Rejected,
    /// The trial ended in an error the agent caused.
    AgentError,
}

/// Why a trial is left out of the pass rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Excluded {
    Infrastructure,
    Interrupted,
    Running,
    Pending,
    Unreadable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "why")]
pub enum Outcome {
    Passed,
    Failed(Failure),
    Excluded(Excluded),
}

impl Outcome {
    /// The outcome of a trial with a readable record; `claimed` says a
    /// live claim file sits beside it (a worker owns the trial now).
    pub fn of(rec: &Record, claimed: bool) -> Outcome {
        use Outcome::*;
        if rec.terminal_status == TerminalStatus::Interrupted {
            // Every trial's record says `interrupted` until it ends.
            return Excluded(if claimed {
                self::Excluded::Running
            } else {
                self::Excluded::Interrupted
            });
        }
        let infra = match rec.failure_class {
            Some(FailureClass::Infrastructure) => true,
            Some(FailureClass::Implementation) => false,
            None => {
                rec.terminal_status == TerminalStatus::Error
                    || rec.pipeline_status == Some(PipelineStatus::Error)
            }
        };
        if infra {
            return Excluded(self::Excluded::Infrastructure);
        }
        if rec.reward == 1 {
            return Passed;
        }
        Failed(failure_kind(rec))
    }

    pub fn is_valid(self) -> bool {
        !matches!(self, Outcome::Excluded(_))
    }

    pub fn passed(self) -> bool {
        self == Outcome::Passed
    }
}

fn failure_kind(rec: &Record) -> Failure {
    match rec.pipeline_status {
        Some(PipelineStatus::Evaluated) => return Failure::Judged,
        Some(PipelineStatus::NotSubmitted) => return Failure::NotSubmitted,
        Some(PipelineStatus::Rejected) => return Failure::Rejected,
        Some(PipelineStatus::Error) => return Failure::AgentError,
        None => {}
    }
    if rec.was_judged() {
        Failure::Judged
    } else if rec.denylist_violation.is_some() {
        Failure::Rejected
    } else if rec.terminal_status == TerminalStatus::Error {
        Failure::AgentError
    } else if !rec.was_submitted() || rec.terminal_status == TerminalStatus::NotSubmitted {
        Failure::NotSubmitted
    } else {
        // Submitted, not judged, no ban: a refusal before the judge.
        Failure::Rejected
    }
}

impl Excluded {
    pub fn label(self) -> &'static str {
        match self {
            Excluded::Infrastructure => "infra",
            Excluded::Interrupted => "interrupted",
            Excluded::Running => "running",
            Excluded::Pending => "pending",
            Excluded::Unreadable => "unreadable",
        }
    }
}

impl Failure {
    pub fn label(self) -> &'static str {
        match self {
            Failure::Judged => "fail",
            Failure::NotSubmitted => "not submitted",
            Failure::Rejected => "rejected",
            Failure::AgentError => "error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(v: serde_json::Value) -> Record {
        let mut b = json!({"case_id": "c", "agent_spec_name": "a", "reward": 0});
        for (k, x) in v.as_object().unwrap() {
            b[k] = x.clone();
        }
        Record::from_value(&b).unwrap()
    }

    #[test]
    fn the_rule() {
        let o = |v| Outcome::of(&rec(v), false);
        assert_eq!(
            o(json!({"terminal_status": "completed", "reward": 1, "test_count": 2, "passed": 2})),
            Outcome::Passed
        );
        assert_eq!(
            o(json!({"terminal_status": "completed", "test_count": 2, "passed": 1})),
            Outcome::Failed(Failure::Judged)
        );
        assert_eq!(
            o(json!({"terminal_status": "not_submitted"})),
            Outcome::Failed(Failure::NotSubmitted)
        );
        assert_eq!(
            o(json!({"terminal_status": "timeout", "submission": {"state": "not_submitted"}})),
            Outcome::Failed(Failure::NotSubmitted)
        );
        assert_eq!(
            o(json!({"terminal_status": "completed", "denylist_violation": "x.py: import y"})),
            Outcome::Failed(Failure::Rejected)
        );
        assert_eq!(
            o(json!({"terminal_status": "error", "failure_class": "implementation"})),
            Outcome::Failed(Failure::AgentError)
        );
        assert_eq!(
            o(json!({"terminal_status": "error"})),
            Outcome::Excluded(Excluded::Infrastructure)
        );
        assert_eq!(
            o(
                json!({"terminal_status": "completed", "failure_class": "infrastructure", "judge_error": "x"})
            ),
            Outcome::Excluded(Excluded::Infrastructure)
        );
        assert_eq!(
            o(json!({"terminal_status": "interrupted"})),
            Outcome::Excluded(Excluded::Interrupted)
        );
        assert_eq!(
            Outcome::of(&rec(json!({"terminal_status": "interrupted"})), true),
            Outcome::Excluded(Excluded::Running)
        );
        assert_eq!(
            o(json!({"terminal_status": "completed", "pipeline_status": "rejected"})),
            Outcome::Failed(Failure::Rejected)
        );
    }
}
