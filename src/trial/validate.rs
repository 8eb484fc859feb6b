//! `cbrun validate`: every control of a case through the import scan and
//! the judge, checked against its `expect.json`.

use std::path::Path;

use serde::Serialize;

use crate::case::schema::Reward;
use crate::case::{Case, Control};
use crate::judge::parse::TestOutcome;
use crate::sandbox::run::HostView;
use crate::scan;
use crate::trial::judge::{run_judge, JudgeOptions, JudgeReport};
use crate::trial::layout::TrialDir;

#[derive(Debug, Clone, Serialize)]
pub struct ControlResult {
    pub case_id: String,
    pub control: String,
    pub expected_reward: u8,
    pub reward: u8,
    pub scan_hits: Vec<String>,
    pub passed: Option<u64>,
    pub total: Option<u64>,
    pub judge_reason: String,
    pub judge_error: Option<String>,
    /// `must_fail_tests` entries not seen as FAILED.
    pub missing_failures: Vec<String>,
    pub ok: bool,
    pub problems: Vec<String>,
}

/// Runs one control; `work` is a scratch folder for its judge files.
pub fn validate_control(
    case: &Case,
    control: &Control,
    work: &Path,
    opts: &JudgeOptions,
    host: &HostView,
) -> ControlResult {
    let expected = match control.expect.reward {
        Reward::One => 1,
        Reward::Zero => 0,
    };
    let mut problems = Vec::new();
    let scan_hits = match scan::scan_workspace(&control.app_dir, &case.denylist.import_ban) {
        Ok(r) => r.violations.iter().map(scan::Violation::describe).collect(),
        Err(e) => {
            problems.push(format!("import scan: {e}"));
            Vec::new()
        }
    };
    let judged: Option<JudgeReport> = match TrialDir::open_or_create(work) {
        Ok(dir) => Some(run_judge(case, &control.app_dir, &dir, opts, host)),
        Err(e) => {
            problems.push(format!("{}: {e}", work.display()));
            None
        }
    };
    let judge_reward = judged.as_ref().map(|j| j.reward).unwrap_or(0);
    // The scan vetoes whatever the tests say.
    let reward = if scan_hits.is_empty() {
        judge_reward
    } else {
        0
    };
    if reward != expected {
        problems.push(format!("reward {reward}, expected {expected}"));
    }
    let mut missing_failures = Vec::new();
    if let Some(j) = &judged {
        if j.infrastructure {
            problems.push(format!(
                "judge error: {}",
                j.judge_error.clone().unwrap_or_default()
            ));
        }
        for want in &control.expect.must_fail_tests {
            let seen = j.tests.iter().any(|t| {
                t.outcome == TestOutcome::Failed && (t.id == *want || t.id.ends_with(want.as_str()))
            });
            if !seen {
                missing_failures.push(want.clone());
            }
        }
    }
    if !missing_failures.is_empty() {
        problems.push(format!(
            "must_fail_tests not seen as FAILED: {}",
            missing_failures.join(", ")
        ));
    }
    ControlResult {
        case_id: case.id.as_str().to_owned(),
        control: control.name.clone(),
        expected_reward: expected,
        reward,
        scan_hits,
        passed: judged
            .as_ref()
            .and_then(|j| j.counts.as_ref().map(|c| c.passed)),
        total: judged
            .as_ref()
            .and_then(|j| j.counts.as_ref().map(|c| c.total)),
        judge_reason: judged
            .as_ref()
            .map(|j| j.reason.clone())
            .unwrap_or_default(),
        judge_error: judged.as_ref().and_then(|j| j.judge_error.clone()),
        missing_failures,
        ok: problems.is_empty(),
        problems,
    }
}

/// A fixed-width table of results.
pub fn table(results: &[ControlResult]) -> String {
    let mut out = format!(
        "{:<10} {:<12} {:>6} {:>4} {:>9} {:<5} {}\n",
        "CASE", "CONTROL", "EXPECT", "GOT", "TESTS", "SCAN", "VERDICT"
    );
    for r in results {
        let tests = match (r.passed, r.total) {
            (Some(p), Some(t)) => format!("{p}/{t}"),
            _ => "-".into(),
        };
        let verdict = if r.ok {
            "ok".to_owned()
        } else {
            format!("MISMATCH: {}", r.problems.join("; "))
        };
        out.push_str(&format!(
            "{:<10} {:<12} {:>6} {:>4} {:>9} {:<5} {}\n",
            r.case_id,
            r.control,
            r.expected_reward,
            r.reward,
            tests,
            if r.scan_hits.is_empty() { "-" } else { "HIT" },
            verdict
        ));
    }
    out
}
