//! The reward gate.
//!
//! From the benchmark format: reward 1 only when counts were parsed, at
//! least one test ran, the count equals a frozen `expected_test_count` /
//! `test_count` when one is given, the command exited 0, and `passed ==
//! total` with no failures or errors. Everything else is 0.
//!
//! Skipped tests count in the total, so a single skip means `passed !=
//! total` and reward 0. A run that timed out gets 0 whatever it printed.
//!
//! The verdict's reason names every condition that failed, in a fixed order
//! (time-out, parsing, nothing ran, count, failures/errors/skips, exit),
//! joined by `; `, for example `count 2 != expected 39; 2 errors; exit
//! code 1`. A reward of 1 reads `all 39 tests passed`.

use serde::Serialize;

use super::parse::Parsed;

/// What the gate looks at.
#[derive(Debug, Clone, Copy)]
pub struct GateInput<'a> {
    /// The parsed test output; `None` when nothing could be parsed.
    pub parsed: Option<&'a Parsed>,
    /// The test command's exit code; `None` when it has none (killed by a
    /// signal, never started).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The case's frozen test count, if it has one.
    pub expected_count: Option<u64>,
}

/// The reward and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub reward: u8,
    pub reason: String,
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Apply the reward gate.
pub fn gate(input: &GateInput) -> Verdict {
    let mut problems: Vec<String> = Vec::new();
    if input.timed_out {
        problems.push("timed out".to_string());
    }
    let mut total = 0;
    match input.parsed {
        None => problems.push("no test results could be parsed".to_string()),
        Some(p) => {
            let c = &p.counts;
            total = c.total;
            if c.total == 0 {
                problems.push("no tests ran".to_string());
            } else {
                if let Some(expected) = input.expected_count {
                    if c.total != expected {
                        problems.push(format!("count {} != expected {expected}", c.total));
                    }
                }
                if c.failed > 0 {
                    problems.push(format!("{} failed", c.failed));
                }
                if c.errors > 0 {
                    problems.push(plural(c.errors, "error", "errors"));
                }
                if c.skipped > 0 {
                    problems.push(format!("{} skipped", c.skipped));
                }
                if c.failed == 0 && c.errors == 0 && c.skipped == 0 && c.passed != c.total {
                    problems.push(format!("{} of {} passed", c.passed, c.total));
                }
            }
        }
    }
    // A time-out's exit status is the killer's, not the suite's.
    if !input.timed_out {
        match input.exit_code {
            Some(0) => {}
            Some(code) => problems.push(format!("exit code {code}")),
            None => problems.push("no exit code".to_string()),
        }
    }

    if problems.is_empty() {
        Verdict {
            reward: 1,
            reason: format!("all {} passed", plural(total, "test", "tests")),
        }
    } else {
        Verdict {
            reward: 0,
            reason: problems.join("; "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::{parse_log, Counts, Framework, Parsed};
    use super::*;

    fn parsed(passed: u64, failed: u64, errors: u64, skipped: u64) -> Parsed {
        Parsed {
            framework: Framework::Unittest,
            counts: Counts::new(passed, failed, errors, skipped),
            tests: Vec::new(),
        }
    }

    fn run(
        p: Option<&Parsed>,
        exit: Option<i32>,
        timed_out: bool,
        expected: Option<u64>,
    ) -> Verdict {
        gate(&GateInput {
            parsed: p,
            exit_code: exit,
            timed_out,
            expected_count: expected,
        })
    }

    #[test]
    fn all_passed() {
        let p = parsed(39, 0, 0, 0);
        assert_eq!(
            run(Some(&p), Some(0), false, Some(39)),
            Verdict {
                reward: 1,
                reason: "all 39 tests passed".to_string()
            }
        );
        // No frozen count: any count will do.
        assert_eq!(run(Some(&p), Some(0), false, None).reward, 1);
        let one = parsed(1, 0, 0, 0);
        assert_eq!(
            run(Some(&one), Some(0), false, None).reason,
            "all 1 test passed"
        );
    }

    #[test]
    fn each_single_reason() {
        let ok = parsed(39, 0, 0, 0);
        let cases: Vec<(Verdict, &str)> = vec![
            (run(Some(&ok), Some(1), false, Some(39)), "exit code 1"),
            (run(Some(&ok), None, false, Some(39)), "no exit code"),
            (
                run(Some(&parsed(37, 0, 0, 0)), Some(0), false, Some(39)),
                "count 37 != expected 39",
            ),
            (
                run(None, Some(0), false, Some(39)),
                "no test results could be parsed",
            ),
            (run(Some(&ok), Some(0), true, Some(39)), "timed out"),
            (run(Some(&ok), Some(137), true, Some(39)), "timed out"),
            (
                run(Some(&parsed(38, 0, 0, 1)), Some(0), false, Some(39)),
                "1 skipped",
            ),
            (
                run(Some(&parsed(38, 1, 0, 0)), Some(0), false, Some(39)),
                "1 failed",
            ),
            (
                run(Some(&parsed(37, 0, 2, 0)), Some(0), false, Some(39)),
                "2 errors",
            ),
            (
                run(Some(&parsed(38, 0, 1, 0)), Some(0), false, None),
                "1 error",
            ),
            (
                run(Some(&parsed(0, 0, 0, 0)), Some(0), false, Some(39)),
                "no tests ran",
            ),
            (
                run(Some(&parsed(0, 0, 0, 0)), Some(0), false, None),
                "no tests ran",
            ),
        ];
        for (verdict, reason) in cases {
            assert_eq!(
                verdict,
                Verdict {
                    reward: 0,
                    reason: reason.to_string()
                }
            );
        }
    }

    #[test]
    fn every_failing_condition_is_named() {
        // case001's shortcut control: both files fail to import.
        let p = parsed(0, 0, 2, 0);
        assert_eq!(
            run(Some(&p), Some(1), false, Some(39)),
            Verdict {
                reward: 0,
                reason: "count 2 != expected 39; 2 errors; exit code 1".to_string()
            }
        );
        let v = run(None, None, true, None);
        assert_eq!(v.reason, "timed out; no test results could be parsed");
        let v = run(Some(&parsed(30, 3, 1, 2)), Some(1), false, None);
        assert_eq!(v.reason, "3 failed; 1 error; 2 skipped; exit code 1");
    }

    #[test]
    fn zero_exit_cannot_hide_failures_and_inconsistent_counts_fail() {
        // A harness that swallowed its failures still gets 0.
        assert_eq!(
            run(Some(&parsed(38, 1, 0, 0)), Some(0), false, None).reward,
            0
        );
        let odd = Parsed {
            framework: Framework::Tap,
            counts: Counts {
                total: 5,
                passed: 4,
                failed: 0,
                errors: 0,
                skipped: 0,
            },
            tests: Vec::new(),
        };
        assert_eq!(
            run(Some(&odd), Some(0), false, None),
            Verdict {
                reward: 0,
                reason: "4 of 5 passed".to_string()
            }
        );
    }

    #[test]
    fn end_to_end_from_logs() {
        let ok = "\
test_a (test_range.T.test_a) ... ok
test_b (test_range.T.test_b) ... ok

----------------------------------------------------------------------
Ran 2 tests in 0.000s

OK
";
        let p = parse_log(ok, Some("unittest"));
        let v = gate(&GateInput {
            parsed: p.as_ref(),
            exit_code: Some(0),
            timed_out: false,
            expected_count: Some(2),
        });
        assert_eq!(
            v,
            Verdict {
                reward: 1,
                reason: "all 2 tests passed".to_string()
            }
        );

        let skipped = "TAP version 13\n1..2\nok 1 - a\nok 2 - b # SKIP no gcc\n";
        let p = parse_log(skipped, Some("tap"));
        let v = gate(&GateInput {
            parsed: p.as_ref(),
            exit_code: Some(0),
            timed_out: false,
            expected_count: Some(2),
        });
        assert_eq!(
            v,
            Verdict {
                reward: 0,
                reason: "1 skipped".to_string()
            }
        );

        let bailed = "Bail out! build failed\n";
        let p = parse_log(bailed, Some("tap"));
        let v = gate(&GateInput {
            parsed: p.as_ref(),
            exit_code: Some(2),
            timed_out: false,
            expected_count: Some(25),
        });
        assert_eq!(v.reason, "count 1 != expected 25; 1 error; exit code 2");

        let v = gate(&GateInput {
            parsed: parse_log("Segmentation fault\n", None).as_ref(),
            exit_code: Some(139),
            timed_out: false,
            expected_count: None,
        });
        assert_eq!(v.reason, "no test results could be parsed; exit code 139");
    }
}
