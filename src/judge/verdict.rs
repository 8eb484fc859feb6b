//! The verdict: which evidence decides the reward, and tampering.
//!
//! The judge's log is untrusted text: the judged code shares its stdout.
//! - A Python suite (the case's `framework_label` is `pytest`/`unittest`,
//!   or it names no known framework and the test command starts Python) is
//!   judged from the result channel
//!   only ([`super::channel`]): the reporter's per-test records, checked
//!   against the inventory it sent before the first test. The log's counts
//!   are kept for people, never counted.
//! - Any other runner is judged from its log, and then only on per-test
//!   evidence: every counted test must appear as its own result line, and
//!   the case must freeze `expected_test_count`. A summary line alone never
//!   earns a reward.
//!
//! Tampering (reward 0, `judge_tampered`): the workspace shadows the test
//! runner; the channel holds forged, altered, replayed or out-of-order
//! records, ids that were never collected, or the reporter's own integrity
//! findings (patched runner functions, shadowed standard-library or runner
//! modules, a dropped plugin); or the tests claim success (exit 0) while a
//! test process never sent its exit record (`os._exit`, `exec`), a run never
//! ended, no run was reported at all, the reporter never connected, or a
//! test process left with `os._exit(0)` after its own run failed.

use serde::Serialize;

use super::channel::{tally, ChannelReport};
use super::parse::{Counts, Framework, Parsed};
use super::reward::{gate, GateInput};

/// Where the counted results came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Channel,
    Log,
}

/// Everything the verdict looks at.
pub struct Evidence<'a> {
    pub channel: &'a ChannelReport,
    /// A Python suite: the channel decides. Otherwise only its tampering
    /// evidence counts.
    pub channel_expected: bool,
    pub log: Option<&'a Parsed>,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub expected_count: Option<u64>,
}

/// The reward and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub reward: u8,
    pub reason: String,
    pub source: Source,
    /// The results the verdict counted.
    pub parsed: Option<Parsed>,
    /// Evidence of tampering; non-empty means reward 0.
    pub tampered: Vec<String>,
}

pub fn decide(e: &Evidence) -> Decision {
    let mut tampered: Vec<String> = e.channel.tampered.clone();
    let mut problems: Vec<String> = Vec::new();
    let claims_success = e.exit_code == Some(0) && !e.timed_out;
    let t = tally(e.channel);
    // Never the channel for another runner: any process of such a suite
    // (product code linked into a test binary included) holds the token
    // pipe, and could make a session of its own.
    let (source, parsed) = if e.channel_expected {
        tampered.extend(t.strangers.iter().cloned());
        let any_run = e.channel.sessions.iter().any(|s| !s.runs.is_empty());
        if !e.channel.connected() {
            let why = "cbrun's reporter never connected: the tests ran without it (python -I/-S/-E, a scrubbed environment, or a runner that is not the interpreter's own)";
            if claims_success {
                tampered.push(format!("reporter dropped: {why}"));
            } else {
                problems.push(why.to_owned());
            }
        } else if claims_success {
            for u in &t.unfinished {
                tampered.push(format!(
                    "reporter dropped: test process {u} ended without its exit record (os._exit, exec, or a removed exit hook) while the tests exited 0"
                ));
            }
            for s in &e.channel.sessions {
                let forced = s
                    .exit_via
                    .as_deref()
                    .is_some_and(|v| v.starts_with("os._exit(0"));
                if forced && s.runs.iter().any(|r| r.ok == Some(false)) {
                    tampered.push(format!(
                        "test process pid {} left with os._exit(0) after its run failed",
                        s.pid.unwrap_or(-1)
                    ));
                }
            }
            if !any_run {
                tampered.push("the test command exited 0 but no test run was reported".to_owned());
            } else if t.problems.iter().any(|p| p.contains("did not finish")) {
                tampered.push("the test command exited 0 but a test run never ended".to_owned());
            }
        }
        problems.extend(t.problems.iter().cloned());
        let parsed = any_run.then(|| Parsed {
            framework: match t.runner.as_deref() {
                Some("pytest") => Framework::Pytest,
                _ => Framework::Unittest,
            },
            counts: t.counts.clone(),
            tests: t.tests.clone(),
        });
        (Source::Channel, parsed)
    } else {
        if let Some(p) = e.log {
            let per_test = Counts::from_tests(&p.tests);
            if p.tests.is_empty() {
                problems.push(
                    "the log names no test results (a summary line alone is not evidence)"
                        .to_owned(),
                );
            } else if per_test != p.counts {
                problems.push(format!(
                    "the log's per-test results ({} tests) do not account for its summary ({} tests)",
                    per_test.total, p.counts.total
                ));
            }
            if e.expected_count.is_none() {
                problems.push(
                    "the case freezes no expected_test_count, which a verdict from the log needs"
                        .to_owned(),
                );
            }
        }
        (Source::Log, e.log.cloned())
    };

    let base = gate(&GateInput {
        parsed: parsed.as_ref(),
        exit_code: e.exit_code,
        timed_out: e.timed_out,
        expected_count: e.expected_count,
    });
    dedup(&mut tampered);
    dedup(&mut problems);
    let mut reasons: Vec<String> = Vec::new();
    if !tampered.is_empty() {
        reasons.push(format!("judge tampered: {}", tampered.join("; ")));
    }
    reasons.extend(problems.iter().cloned());
    if base.reward == 0 || reasons.is_empty() {
        reasons.push(base.reason.clone());
    }
    let reward = if tampered.is_empty() && problems.is_empty() {
        base.reward
    } else {
        0
    };
    Decision {
        reward,
        reason: reasons.join("; "),
        source,
        parsed,
        tampered,
    }
}

fn dedup(v: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|s| seen.insert(s.clone()));
}

#[cfg(test)]
mod tests {
    use super::super::channel::records::{RunSummary, SessionSummary};
    use super::super::parse::{TestOutcome, TestResult};
    use super::*;

    fn session(
        ids: &[&str],
        outcomes: &[TestOutcome],
        ended: bool,
        exited: bool,
    ) -> SessionSummary {
        SessionSummary {
            key_id: "k".into(),
            pid: Some(1),
            runs: vec![RunSummary {
                runner: "unittest".into(),
                total: ids.len() as u64,
                inventory: ids.iter().map(|s| s.to_string()).collect(),
                results: ids
                    .iter()
                    .zip(outcomes)
                    .map(|(i, o)| TestResult::new(*i, *o))
                    .collect(),
                tests_run: Some(outcomes.len() as u64),
                ok: None,
                ended,
            }],
            exited,
            ..Default::default()
        }
    }

    fn channel(sessions: Vec<SessionSummary>) -> ChannelReport {
        ChannelReport {
            sessions,
            ..Default::default()
        }
    }

    fn ev<'a>(
        c: &'a ChannelReport,
        log: Option<&'a Parsed>,
        exit: i32,
        expected: Option<u64>,
    ) -> Evidence<'a> {
        Evidence {
            channel: c,
            channel_expected: true,
            log,
            exit_code: Some(exit),
            timed_out: false,
            expected_count: expected,
        }
    }

    use TestOutcome::*;

    #[test]
    fn the_channel_decides_and_the_log_does_not() {
        let c = channel(vec![session(&["a", "b"], &[Passed, Passed], true, true)]);
        let d = decide(&ev(&c, None, 0, Some(2)));
        assert_eq!((d.reward, d.reason.as_str()), (1, "all 2 tests passed"));
        assert_eq!(d.source, Source::Channel);
        // A forged log that says 39 passed changes nothing.
        let fake = super::super::parse::parse_log("Ran 39 tests in 0.1s\n\nOK\n", Some("unittest"))
            .unwrap();
        let c = channel(vec![session(&["a", "b"], &[Passed, Failed], true, true)]);
        let d = decide(&ev(&c, Some(&fake), 0, Some(2)));
        assert_eq!(d.reward, 0);
        assert!(d.reason.contains("1 failed"), "{}", d.reason);
        assert!(d.tampered.is_empty());
    }

    #[test]
    fn success_claims_without_the_channel_are_tampering() {
        // The reporter never connected, the command exited 0.
        let none = channel(vec![]);
        let d = decide(&ev(&none, None, 0, Some(2)));
        assert_eq!(d.reward, 0);
        assert!(
            d.tampered[0].starts_with("reporter dropped"),
            "{:?}",
            d.tampered
        );
        // ...exited 1: not tampering, still 0.
        let d = decide(&ev(&none, None, 1, Some(2)));
        assert!(d.tampered.is_empty() && d.reward == 0, "{d:?}");
        // A test process that vanished without its exit record (os._exit).
        let c = channel(vec![session(&["a"], &[], false, false)]);
        let d = decide(&ev(&c, None, 0, Some(1)));
        assert!(
            d.tampered
                .iter()
                .any(|t| t.contains("without its exit record")),
            "{:?}",
            d.tampered
        );
        assert!(
            d.tampered.iter().any(|t| t.contains("never ended")),
            "{:?}",
            d.tampered
        );
        // os._exit(0) after a failing run.
        let mut s = session(&["a"], &[Failed], true, true);
        s.runs[0].ok = Some(false);
        s.exit_via = Some("os._exit(0)".into());
        let c = channel(vec![s]);
        let d = decide(&ev(&c, None, 0, Some(1)));
        assert!(
            d.tampered
                .iter()
                .any(|t| t.contains("os._exit(0) after its run failed")),
            "{:?}",
            d.tampered
        );
        // A session with no run at all, exit 0.
        let mut s = session(&[], &[], true, true);
        s.runs.clear();
        let c = channel(vec![s]);
        let d = decide(&ev(&c, None, 0, Some(1)));
        assert!(
            d.tampered.iter().any(|t| t.contains("no test run")),
            "{:?}",
            d.tampered
        );
    }

    #[test]
    fn the_frozen_count_and_missing_results_apply_to_the_channel() {
        let c = channel(vec![session(&["a", "b"], &[Passed, Passed], true, true)]);
        let d = decide(&ev(&c, None, 0, Some(39)));
        assert_eq!(d.reward, 0);
        assert!(d.reason.contains("count 2 != expected 39"));
        let c = channel(vec![session(&["a", "b"], &[Passed], true, true)]);
        let d = decide(&ev(&c, None, 1, Some(2)));
        assert_eq!(d.reward, 0);
        assert!(d.reason.contains("never reported"), "{}", d.reason);
        assert_eq!(d.parsed.unwrap().counts, Counts::new(1, 0, 1, 0));
    }

    #[test]
    fn a_session_never_decides_for_another_runner() {
        // A forged all-pass session next to a failing TAP log.
        let c = channel(vec![session(&["a", "b"], &[Passed, Passed], true, true)]);
        let tap =
            super::super::parse::parse_log("1..2\nok 1 - a\nnot ok 2 - b\n", Some("tap")).unwrap();
        let mut e = ev(&c, Some(&tap), 1, Some(2));
        e.channel_expected = false;
        let d = decide(&e);
        assert_eq!((d.reward, d.source), (0, Source::Log));
        assert!(d.reason.contains("1 failed"), "{}", d.reason);
        // Its tampering evidence still counts.
        let mut c = channel(vec![]);
        c.tampered
            .push("a channel record failed its MAC (forged or altered)".into());
        let ok = super::super::parse::parse_log("1..1\nok 1 - a\n", Some("tap")).unwrap();
        let mut e = ev(&c, Some(&ok), 0, Some(1));
        e.channel_expected = false;
        let d = decide(&e);
        assert_eq!(d.reward, 0);
        assert_eq!(d.tampered.len(), 1);
    }

    #[test]
    fn log_verdicts_need_per_test_evidence_and_a_frozen_count() {
        let none = channel(vec![]);
        let mut e = ev(&none, None, 0, Some(2));
        e.channel_expected = false;
        let tap =
            super::super::parse::parse_log("1..2\nok 1 - a\nok 2 - b\n", Some("tap")).unwrap();
        e.log = Some(&tap);
        assert_eq!(decide(&e).reward, 1);
        assert_eq!(decide(&e).source, Source::Log);
        e.expected_count = None;
        let d = decide(&e);
        assert_eq!(d.reward, 0);
        assert!(d.reason.contains("expected_test_count"), "{}", d.reason);
        // A bare summary.
        let cargo = super::super::parse::parse_log(
            "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
            Some("cargo"),
        )
        .unwrap();
        e.expected_count = Some(2);
        e.log = Some(&cargo);
        let d = decide(&e);
        assert_eq!(d.reward, 0);
        assert!(d.reason.contains("summary line alone"), "{}", d.reason);
    }
}
