//! Python unittest (`TextTestRunner(verbosity=2)`, `python -m unittest -v`,
//! and runners built on it such as Django's).
//!
//! ```text
//! test_doc (test_m.TestA.test_doc)
//! Checks the docstring form. ... ok
//! test_err (test_m.TestA.test_err) ... ERROR
//! test_skip (test_m.TestA) ... skipped 'later'          (Python < 3.11)
//! test_sub (test_m.TestA.test_sub) ...
//!   test_sub (test_m.TestA.test_sub) (i=1) ... FAIL     (a subtest)
//! test_xf (test_m.TestA.test_xf) ... expected failure
//! ----------------------------------------------------------------------
//! Ran 9 tests in 0.001s
//!
//! FAILED (failures=3, errors=1, skipped=1, expected failures=1, unexpected successes=1)
//! ```
//!
//! Counts come from the last `Ran N tests` line and the status line after
//! it: failures and unexpected successes are failed, expected failures and
//! skips are skipped, and the rest of N passed. Each failing subtest counts
//! as a failure there, so a test with several failing subtests can make
//! `failures` exceed the tests behind them; `total` then grows to keep the
//! counts adding up. When the status line is missing (the run was cut
//! short), the per-test lines give the outcomes and the tests of N they do
//! not account for count as errors. Test ids are `module.Class.test_name`;
//! subtests merge into their test.

use super::{leading_number, merge_by_id, Counts, Found, Framework, Parsed};
use super::{TestOutcome, TestResult};

pub(crate) fn parse(lines: &[&str]) -> Option<Found> {
    let ran = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, l)| ran_count(l).map(|n| (i, n)));
    let (start, end) = match ran {
        Some((at, _)) => {
            let start = lines[..at]
                .iter()
                .rposition(|l| ran_count(l).is_some())
                .map_or(0, |i| i + 1);
            (start, at)
        }
        None => (0, lines.len()),
    };
    let tests = merge_by_id(per_test(&lines[start..end]));

    let counts = match ran {
        Some((at, n)) => {
            let status = lines[at + 1..]
                .iter()
                .take(20)
                .take_while(|l| ran_count(l).is_none())
                .find_map(|l| status_line(l));
            match status {
                Some(s) => {
                    let bad = s.failed.saturating_add(s.errors).saturating_add(s.skipped);
                    let total = n.max(bad);
                    Counts::new(total - bad, s.failed, s.errors, s.skipped)
                }
                // Cut between `Ran` and the status: what the lines say, and
                // the tests they do not account for as errors.
                None => {
                    let c = Counts::from_tests(&tests);
                    let missing = n.saturating_sub(c.total);
                    Counts::new(
                        c.passed,
                        c.failed,
                        c.errors.saturating_add(missing),
                        c.skipped,
                    )
                }
            }
        }
        None => Counts::from_tests(&tests),
    };
    Some(Found {
        parsed: Parsed {
            framework: Framework::Unittest,
            counts,
            tests,
        },
        summary_at: ran.map(|(i, _)| i),
    })
}

/// N of `Ran N tests in 0.001s` (or `Ran 1 test in ...`).
fn ran_count(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("Ran ")?;
    let (n, rest) = leading_number(rest)?;
    (rest.starts_with(" tests in ") || rest.starts_with(" test in ")).then_some(n)
}

/// Failed (failures + unexpected successes), errors, skipped (skips +
/// expected failures) of a status line.
#[derive(Debug, PartialEq)]
struct Status {
    failed: u64,
    errors: u64,
    skipped: u64,
}

/// `OK`, `OK (skipped=1)`, `FAILED (failures=1, errors=2)`, `NO TESTS RAN`
/// (and Twisted trial's `PASSED (successes=3)`). Keys not known are
/// ignored; a `FAILED` that names no failure or error counts one error.
fn status_line(line: &str) -> Option<Status> {
    let t = line.trim();
    let mut s = Status {
        failed: 0,
        errors: 0,
        skipped: 0,
    };
    let (failed_run, details) = match t {
        "OK" | "PASSED" | "NO TESTS RAN" => (false, None),
        "FAILED" => (true, None),
        _ => {
            let (verdict, d) = t.split_once(" (")?;
            let failed_run = match verdict {
                "OK" | "PASSED" => false,
                "FAILED" => true,
                _ => return None,
            };
            (failed_run, Some(d.strip_suffix(')')?))
        }
    };
    for part in details.into_iter().flat_map(|d| d.split(", ")) {
        let (key, value) = part.split_once('=')?;
        let (n, rest) = leading_number(value)?;
        if !rest.is_empty() {
            return None;
        }
        let slot = match key.trim() {
            "failures" | "unexpected successes" => &mut s.failed,
            "errors" => &mut s.errors,
            "skipped" | "skips" | "expected failures" | "expectedFailures" => &mut s.skipped,
            _ => continue,
        };
        *slot = slot.saturating_add(n);
    }
    if failed_run && s.failed == 0 && s.errors == 0 {
        s.errors = 1;
    }
    Some(s)
}

/// The outcome a verbose line reports after ` ... `.
fn result_word(r: &str) -> Option<TestOutcome> {
    let r = r.trim();
    Some(match r {
        "ok" => TestOutcome::Passed,
        "FAIL" | "unexpected success" => TestOutcome::Failed,
        "ERROR" => TestOutcome::Error,
        "expected failure" => TestOutcome::Skipped,
        _ if r == "skipped" || r.starts_with("skipped ") => TestOutcome::Skipped,
        _ => return None,
    })
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The start of a verbose test line: `name (dotted.path)` then, on the same
/// line, optional subtest parameters and ` ... result`. Returns the test id
/// and the text after ` ... ` (`None` when the description or result
/// follows on later lines).
fn start_line(line: &str) -> Option<(String, Option<&str>)> {
    let t = line.trim_start();
    let (name, rest) = t.split_once(" (")?;
    if !is_identifier(name) {
        return None;
    }
    let (dotted, rest) = rest.split_once(')')?;
    if !dotted.contains('.')
        || dotted.starts_with('.')
        || !dotted
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return None;
    }
    let id = if dotted.rsplit('.').next() == Some(name) {
        dotted.to_string()
    } else {
        format!("{dotted}.{name}")
    };
    let after = if let Some((_, r)) = rest.split_once(" ... ") {
        Some(r)
    } else if rest.trim_end().ends_with(" ...") || rest.trim_end() == "..." {
        Some("")
    } else if rest.trim().is_empty() {
        None
    } else {
        return None;
    };
    Some((id, after))
}

fn per_test(lines: &[&str]) -> Vec<TestResult> {
    let mut tests = Vec::new();
    let mut pending: Option<String> = None;
    for line in lines {
        if let Some((id, after)) = start_line(line) {
            pending = None;
            match after.and_then(result_word) {
                Some(outcome) => tests.push(TestResult::new(id, outcome)),
                None => pending = Some(id),
            }
            continue;
        }
        let Some(id) = pending.as_ref() else {
            continue;
        };
        let t = line.trim();
        if t.starts_with("=====") || t.starts_with("-----") {
            pending = None;
            continue;
        }
        // `Docstring ... ok`, or a bare `ok` after the test's own output.
        let outcome = match line.rsplit_once(" ... ") {
            Some((_, r)) => result_word(r),
            None => result_word(t),
        };
        if let Some(outcome) = outcome {
            tests.push(TestResult::new(id.clone(), outcome));
            pending = None;
        }
    }
    tests
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{parse_log, Framework, TestOutcome};
    use super::*;

    /// Real Python 3.11 output of `python3 -m unittest -v`.
    const PY311: &str = "\
test_doc (test_m.TestA.test_doc)
Checks the docstring form. ... ok
test_err (test_m.TestA.test_err) ... ERROR
test_fail (test_m.TestA.test_fail) ... FAIL
test_ok (test_m.TestA.test_ok) ... ok
test_print (test_m.TestA.test_print) ... hello from test
to stderr
ok
test_skip (test_m.TestA.test_skip) ... skipped 'later'
test_sub (test_m.TestA.test_sub) ... 
  test_sub (test_m.TestA.test_sub) (i=1) ... FAIL
  test_sub (test_m.TestA.test_sub) (i=2) ... FAIL
test_us (test_m.TestA.test_us) ... unexpected success
test_xf (test_m.TestA.test_xf) ... expected failure

======================================================================
ERROR: test_err (test_m.TestA.test_err)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"/tmp/samp/u/test_m.py\", line 12, in test_err
    raise KeyError(\"x\")
KeyError: 'x'

======================================================================
FAIL: test_fail (test_m.TestA.test_fail)
----------------------------------------------------------------------
AssertionError: 1 != 2

======================================================================
FAIL: test_sub (test_m.TestA.test_sub) (i=1)
----------------------------------------------------------------------
AssertionError: 1 not less than 1

======================================================================
FAIL: test_sub (test_m.TestA.test_sub) (i=2)
----------------------------------------------------------------------
AssertionError: 2 not less than 1

======================================================================
UNEXPECTED SUCCESS: test_us (test_m.TestA.test_us)
----------------------------------------------------------------------
Ran 9 tests in 0.001s

FAILED (failures=3, errors=1, skipped=1, expected failures=1, unexpected successes=1)
";

    #[test]
    fn python_311_every_outcome() {
        let f = only(Framework::Unittest, PY311).unwrap();
        let p = f.parsed;
        // failed = 3 failures + 1 unexpected success; skipped = 1 + 1 xfail.
        assert_eq!(p.counts, counts(9, 2, 4, 1, 2));
        assert_eq!(p.tests.len(), 9);
        assert_eq!(
            outcome_of(&p, "test_m.TestA.test_doc"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(
            outcome_of(&p, "test_m.TestA.test_print"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(
            outcome_of(&p, "test_m.TestA.test_sub"),
            Some(TestOutcome::Failed)
        );
        assert_eq!(
            outcome_of(&p, "test_m.TestA.test_skip"),
            Some(TestOutcome::Skipped)
        );
        assert_eq!(
            outcome_of(&p, "test_m.TestA.test_xf"),
            Some(TestOutcome::Skipped)
        );
        assert_eq!(
            outcome_of(&p, "test_m.TestA.test_us"),
            Some(TestOutcome::Failed)
        );
        assert_eq!(
            p.failed_ids(),
            vec![
                "test_m.TestA.test_err",
                "test_m.TestA.test_fail",
                "test_m.TestA.test_sub",
                "test_m.TestA.test_us"
            ]
        );
        assert_eq!(parse_log(PY311, Some("unittest")).unwrap(), p);
        assert_eq!(parse_log(PY311, None).unwrap(), p);
    }

    #[test]
    fn older_python_form_and_ok_with_skips() {
        let log = "\
test_parse (test_version.TestParse) ... ok
test_bump (test_version.TestBump)
Bumping the minor resets the patch. ... ok
test_later (test_version.TestBump) ... skipped 'not yet'

----------------------------------------------------------------------
Ran 3 tests in 0.002s

OK (skipped=1)
";
        let p = only(Framework::Unittest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(3, 2, 0, 0, 1));
        assert_eq!(
            p.tests,
            vec![
                TestResult::new("test_version.TestParse.test_parse", TestOutcome::Passed),
                TestResult::new("test_version.TestBump.test_bump", TestOutcome::Passed),
                TestResult::new("test_version.TestBump.test_later", TestOutcome::Skipped),
            ]
        );
    }

    #[test]
    fn all_passed_and_import_failure() {
        let ok = "\
test_a (test_range.TestTildeCaret.test_a) ... ok
test_b (test_range.TestTildeCaret.test_b) ... ok

----------------------------------------------------------------------
Ran 2 tests in 0.000s

OK
";
        let p = only(Framework::Unittest, ok).unwrap().parsed;
        assert_eq!(p.counts, counts(2, 2, 0, 0, 0));

        let import = "\
test_import (test_version.ImportFailure.test_import) ... ERROR
test_import (test_range.ImportFailure.test_import) ... ERROR

======================================================================
ERROR: test_import (test_version.ImportFailure.test_import)
----------------------------------------------------------------------
ModuleNotFoundError: No module named 'semver'

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (errors=2)
";
        let p = only(Framework::Unittest, import).unwrap().parsed;
        assert_eq!(p.counts, counts(2, 0, 0, 2, 0));
        assert_eq!(
            p.failed_ids(),
            vec![
                "test_version.ImportFailure.test_import",
                "test_range.ImportFailure.test_import"
            ]
        );
    }

    #[test]
    fn last_run_wins_over_printed_noise() {
        let log = "\
test_a (m.T.test_a) ... 
Ran 40 tests in 0.1s
OK
ok
test_b (m.T.test_b) ... FAIL

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
";
        let p = only(Framework::Unittest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(2, 1, 1, 0, 0));
        // test_a's result came before the product's fake `Ran` line.
        assert_eq!(
            p.tests,
            vec![TestResult::new("m.T.test_b", TestOutcome::Failed)]
        );
    }

    #[test]
    fn no_tests_ran_and_missing_status() {
        let p = only(
            Framework::Unittest,
            "\n----\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n",
        )
        .unwrap()
        .parsed;
        assert_eq!(p.counts, counts(0, 0, 0, 0, 0));

        let cut =
            "test_a (m.T.test_a) ... ok\ntest_b (m.T.test_b) ... ERROR\nRan 3 tests in 0.1s\n";
        let f = only(Framework::Unittest, cut).unwrap();
        assert_eq!(f.summary_at, Some(2));
        // The third test never reported: an error, not a pass.
        assert_eq!(f.parsed.counts, counts(3, 1, 0, 2, 0));
    }

    #[test]
    fn subtest_failures_beyond_ran_keep_counts_consistent() {
        let log = "Ran 1 test in 0.001s\n\nFAILED (failures=3)\n";
        let p = only(Framework::Unittest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(3, 0, 3, 0, 0));
    }

    #[test]
    fn status_line_shapes() {
        assert_eq!(
            status_line("OK (skipped=2, expected failures=1)"),
            Some(Status {
                failed: 0,
                errors: 0,
                skipped: 3
            })
        );
        assert_eq!(status_line("FAILED (failures=x)"), None);
        assert_eq!(
            status_line("FAILED (failures=1, successes=2)"),
            Some(Status {
                failed: 1,
                errors: 0,
                skipped: 0
            })
        );
        assert_eq!(
            status_line("FAILED (bogus=1)"),
            Some(Status {
                failed: 0,
                errors: 1,
                skipped: 0
            })
        );
        assert_eq!(
            status_line("PASSED (successes=3)"),
            Some(Status {
                failed: 0,
                errors: 0,
                skipped: 0
            })
        );
        assert_eq!(status_line("FAILED (failures=1"), None);
        assert_eq!(status_line("OK then"), None);
        assert_eq!(ran_count("Ran 1 test in 0.000s"), Some(1));
        assert_eq!(ran_count("Ran away"), None);
    }

    #[test]
    fn rejects_lookalikes() {
        assert_eq!(start_line("FAIL: test_x (m.T.test_x)"), None);
        assert_eq!(start_line("see (docs.python.org) for more"), None);
        assert_eq!(start_line("test_x (m.T.test_x) extra words"), None);
        assert_eq!(
            start_line("test_x (m.T) ... ok"),
            Some(("m.T.test_x".to_string(), Some("ok")))
        );
    }
}
