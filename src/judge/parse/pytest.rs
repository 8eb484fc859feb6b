//! pytest: the closing summary line, verbose per-test lines and the `-rA`
//! short test summary.
//!
//! ```text
//! ============================= test session starts ==============================
//! tests/test_x.py::test_a PASSED                                           [  9%]
//! tests/test_x.py::test_d SKIPPED (not today)                              [ 36%]
//! [gw0] [ 50%] FAILED tests/test_x.py::test_b            (pytest-xdist)
//! =========================== short test summary info ============================
//! PASSED tests/test_x.py::test_a
//! SKIPPED [1] tests/test_x.py:16: not today
//! FAILED tests/test_x.py::test_b - assert 1 == 2
//! ==== 2 failed, 4 passed, 2 skipped, 1 xfailed, 1 xpassed, 1 error in 0.05s =====
//! ```
//!
//! The last summary line (with or without its `=` frame, as `-q` prints it)
//! gives the counts: `xfailed` counts as skipped and `xpassed` as failed;
//! `deselected`, `warnings`, `rerun` and plugin extras are not tests.
//! Per-test lines are read only from the session that summary closes (from
//! its `test session starts` header), and the short summary only after its
//! own header, so output captured from the tests cannot add results.

use super::{is_duration, leading_number, merge_by_id, Counts, Found, Framework, Parsed};
use super::{TestOutcome, TestResult};

pub(crate) fn parse(lines: &[&str]) -> Option<Found> {
    let summary = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, l)| summary_counts(l).map(|c| (i, c)));
    let summary_at = summary.as_ref().map(|(i, _)| *i);
    let end = summary_at.unwrap_or(lines.len());
    let start = lines[..end]
        .iter()
        .rposition(|l| is_header(l, "test session starts"))
        .unwrap_or(0);

    let mut verbose: Vec<TestResult> = Vec::new();
    let mut short: Vec<TestResult> = Vec::new();
    let mut in_short = false;
    let mut pending: Option<String> = None;
    for line in &lines[start..end] {
        if is_header(line, "short test summary info") {
            in_short = true;
            pending = None;
            continue;
        }
        if in_short {
            if let Some(t) = short_summary_line(line) {
                short.push(t);
            }
            continue;
        }
        match verbose_line(line) {
            Some((id, Some(outcome))) => {
                pending = None;
                verbose.push(TestResult::new(id, outcome));
            }
            Some((id, None)) => pending = Some(id),
            None => {
                // `-s` output between a node id and its outcome.
                if let Some(outcome) = lone_outcome(line) {
                    if let Some(id) = pending.take() {
                        verbose.push(TestResult::new(id, outcome));
                    }
                }
            }
        }
    }

    // The short summary names skips by location (`path:line`), not node id:
    // keep those only when no verbose line named the tests.
    let have_verbose = !verbose.is_empty();
    let mut tests = verbose;
    tests.extend(
        short.into_iter().filter(|t| {
            !(have_verbose && t.outcome == TestOutcome::Skipped && !t.id.contains("::"))
        }),
    );
    let tests = merge_by_id(tests);

    let counts = match summary {
        Some((_, c)) => c,
        None => Counts::from_tests(&tests),
    };
    Some(Found {
        parsed: Parsed {
            framework: Framework::Pytest,
            counts,
            tests,
        },
        summary_at,
    })
}

/// `==== title ====` with the given title.
fn is_header(line: &str, title: &str) -> bool {
    let t = line.trim();
    t.starts_with('=') && t.trim_matches('=').trim() == title
}

/// The counts of a closing summary line such as `=== 1 failed, 2 passed,
/// 1 warning in 0.12s ===`, `3 passed in 0.01s` (`-q`) or `=== no tests ran
/// in 0.01s ===`.
pub(crate) fn summary_counts(line: &str) -> Option<Counts> {
    let inner = line.trim().trim_matches('=').trim();
    let (body, duration) = inner.rsplit_once(" in ")?;
    let duration = duration.split_once(" (").map_or(duration, |(d, _)| d);
    if !is_duration(duration) {
        return None;
    }
    let (mut passed, mut failed, mut errors, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    let mut known = false;
    for part in body.split(", ") {
        let part = part.trim();
        if part == "no tests ran" {
            known = true;
            continue;
        }
        let (n, word) = leading_number(part)?;
        let word = word.trim();
        if word.is_empty() || !word.chars().all(|c| c.is_ascii_alphabetic() || c == ' ') {
            return None;
        }
        let slot = match word {
            "passed" => &mut passed,
            "failed" | "xpassed" => &mut failed,
            "error" | "errors" => &mut errors,
            "skipped" | "xfailed" => &mut skipped,
            "deselected" | "warning" | "warnings" | "rerun" | "reruns" => {
                known = true;
                continue;
            }
            // Plugin extras such as pytest-subtests' `3 subtests passed`.
            _ => continue,
        };
        *slot = slot.saturating_add(n);
        known = true;
    }
    known.then(|| Counts::new(passed, failed, errors, skipped))
}

fn outcome_word(w: &str) -> Option<TestOutcome> {
    Some(match w {
        "PASSED" => TestOutcome::Passed,
        "FAILED" | "XPASS" => TestOutcome::Failed,
        "ERROR" => TestOutcome::Error,
        "SKIPPED" | "XFAIL" => TestOutcome::Skipped,
        _ => return None,
    })
}

/// A line that is only an outcome (and maybe its progress or reason).
fn lone_outcome(line: &str) -> Option<TestOutcome> {
    let mut words = line.split_whitespace();
    let outcome = outcome_word(words.next()?)?;
    match words.next() {
        None => Some(outcome),
        Some(w) if w.starts_with('[') || w.starts_with('(') => Some(outcome),
        Some(_) => None,
    }
}

/// The first space-separated token of `s`, extended over spaces inside
/// `[...]` (parametrised ids such as `test_p[a b]`), and the rest.
fn node_id(s: &str) -> (&str, &str) {
    let mut depth: i64 = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ' ' | '\t' if depth <= 0 => return (&s[..i], &s[i..]),
            _ => {}
        }
    }
    (s, "")
}

/// Strip a trailing progress marker such as `[ 10%]`.
fn strip_progress(line: &str) -> &str {
    let t = line.trim_end();
    if t.ends_with("%]") {
        if let Some(open) = t.rfind('[') {
            return t[..open].trim_end();
        }
    }
    t
}

/// A verbose per-test line: `nodeid OUTCOME [(reason)] [ NN%]`, or xdist's
/// `[gw0] [ NN%] OUTCOME nodeid`. `Some((id, None))` for a node id whose
/// outcome is still to come (the test printed output first).
fn verbose_line(line: &str) -> Option<(String, Option<TestOutcome>)> {
    let t = line.trim();
    if let Some(rest) = t.strip_prefix("[gw") {
        let (_, rest) = rest.split_once(']')?;
        let mut rest = rest.trim_start();
        if rest.starts_with('[') {
            let (_, r) = rest.split_once(']')?;
            rest = r.trim_start();
        }
        let (word, rest) = rest.split_once(' ')?;
        let outcome = outcome_word(word)?;
        let (id, _) = node_id(rest.trim_start());
        return id.contains("::").then(|| (id.to_string(), Some(outcome)));
    }
    let t = strip_progress(t);
    let (id, rest) = node_id(t);
    if !id.contains("::") || id.starts_with("::") || outcome_word(id).is_some() {
        return None;
    }
    let outcome = rest.split_whitespace().find_map(outcome_word);
    Some((id.to_string(), outcome))
}

/// A `-rA` short-summary line: `PASSED id`, `FAILED id - message`,
/// `ERROR id - message`, `XFAIL id - reason`, `XPASS id`, or
/// `SKIPPED [N] path:line: reason` (named by its location).
fn short_summary_line(line: &str) -> Option<TestResult> {
    let t = line.trim();
    let (word, rest) = t.split_once(' ')?;
    let outcome = outcome_word(word)?;
    let rest = rest.trim_start();
    if word == "SKIPPED" {
        if let Some(r) = rest.strip_prefix('[') {
            let (_, loc) = r.split_once("] ")?;
            let loc = loc.split_once(": ").map_or(loc, |(l, _)| l);
            return Some(TestResult::new(loc.trim(), outcome));
        }
    }
    let (id, _) = node_id(rest);
    (!id.is_empty()).then(|| TestResult::new(id, outcome))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{parse_log, Framework, TestOutcome};
    use super::*;

    /// Real pytest 9 output (`-rA -v`), with a test that prints a fake
    /// short-summary line.
    const VERBOSE: &str = "\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.7.0 -- /tmp/pyvenv/bin/python
cachedir: .pytest_cache
rootdir: /tmp/samp
collecting ... collected 11 items

tests/test_x.py::test_a PASSED                                           [  9%]
tests/test_x.py::test_b FAILED                                           [ 18%]
tests/test_x.py::test_c ERROR                                            [ 27%]
tests/test_x.py::test_d SKIPPED (not today)                              [ 36%]
tests/test_x.py::test_e XFAIL (known)                                    [ 45%]
tests/test_x.py::test_f XPASS (known)                                    [ 54%]
tests/test_x.py::test_p[1] PASSED                                        [ 63%]
tests/test_x.py::test_p[a b] PASSED                                      [ 72%]
tests/test_x.py::test_p[3] FAILED                                        [ 81%]
tests/test_x.py::TestK::test_m PASSED                                    [ 90%]
tests/test_x.py::TestU::test_u SKIPPED (meh)                             [100%]

==================================== ERRORS ====================================
___________________________ ERROR at setup of test_c ___________________________

    @pytest.fixture
    def broken():
>       raise RuntimeError(\"boom\")
E       RuntimeError: boom

tests/test_x.py:11: RuntimeError
=================================== FAILURES ===================================
____________________________________ test_b ____________________________________

    def test_b():
>       assert 1 == 2
E       assert 1 == 2

tests/test_x.py:7: AssertionError
__________________________________ test_p[3] ___________________________________

v = 3

    @pytest.mark.parametrize(\"v\", [1, \"a b\", 3])
    def test_p(v):
        print(\"PASSED fake/line.py::test_z\")
>       assert v != 3
E       assert 3 != 3

tests/test_x.py:31: AssertionError
----------------------------- Captured stdout call -----------------------------
PASSED fake/line.py::test_z
==================================== PASSES ====================================
__________________________________ test_p[1] ___________________________________
----------------------------- Captured stdout call -----------------------------
PASSED fake/line.py::test_z
=================================== XPASSES ====================================
=========================== short test summary info ============================
PASSED tests/test_x.py::test_a
PASSED tests/test_x.py::test_p[1]
PASSED tests/test_x.py::test_p[a b]
PASSED tests/test_x.py::TestK::test_m
SKIPPED [1] tests/test_x.py:16: not today
SKIPPED [1] tests/test_x.py:39: meh
XFAIL tests/test_x.py::test_e - known
XPASS tests/test_x.py::test_f - known
ERROR tests/test_x.py::test_c - RuntimeError: boom
FAILED tests/test_x.py::test_b - assert 1 == 2
FAILED tests/test_x.py::test_p[3] - assert 3 != 3
==== 2 failed, 4 passed, 2 skipped, 1 xfailed, 1 xpassed, 1 error in 0.05s =====
";

    #[test]
    fn verbose_run_with_every_outcome() {
        let p = only(Framework::Pytest, VERBOSE).unwrap().parsed;
        // xfailed -> skipped, xpassed -> failed.
        assert_eq!(p.counts, counts(11, 4, 3, 1, 3));
        assert_eq!(p.tests.len(), 11);
        assert_eq!(
            outcome_of(&p, "tests/test_x.py::test_a"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(
            outcome_of(&p, "tests/test_x.py::test_c"),
            Some(TestOutcome::Error)
        );
        assert_eq!(
            outcome_of(&p, "tests/test_x.py::test_d"),
            Some(TestOutcome::Skipped)
        );
        assert_eq!(
            outcome_of(&p, "tests/test_x.py::test_e"),
            Some(TestOutcome::Skipped)
        );
        assert_eq!(
            outcome_of(&p, "tests/test_x.py::test_f"),
            Some(TestOutcome::Failed)
        );
        assert_eq!(
            outcome_of(&p, "tests/test_x.py::test_p[a b]"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(outcome_of(&p, "fake/line.py::test_z"), None);
        assert_eq!(
            p.failed_ids(),
            vec![
                "tests/test_x.py::test_b",
                "tests/test_x.py::test_c",
                "tests/test_x.py::test_f",
                "tests/test_x.py::test_p[3]"
            ]
        );
        let via_log = parse_log(VERBOSE, Some("pytest")).unwrap();
        assert_eq!(via_log, p);
        assert_eq!(parse_log(VERBOSE, None).unwrap(), p);
    }

    #[test]
    fn quiet_run_with_short_summary_only() {
        let log = "\
..F.E.sxX.s                                                              [100%]
=================================== FAILURES ===================================
____________________________________ test_b ____________________________________
E       assert 1 == 2
----------------------------- Captured stdout call -----------------------------
FAILED fake/noise.py::test_q - printed by the product
=========================== short test summary info ============================
FAILED tests/test_x.py::test_b - assert 1 == 2
FAILED tests/test_x.py::test_p[3] - assert 3 != 3
ERROR tests/test_x.py::test_c - RuntimeError: boom
2 failed, 4 passed, 2 skipped, 1 xfailed, 1 xpassed, 1 error in 0.04s
";
        let p = only(Framework::Pytest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(11, 4, 3, 1, 3));
        assert_eq!(
            p.failed_ids(),
            vec![
                "tests/test_x.py::test_b",
                "tests/test_x.py::test_p[3]",
                "tests/test_x.py::test_c"
            ]
        );
    }

    #[test]
    fn coloured_summary() {
        let log = "\x1b[31mFAILED\x1b[0m tests/test_x.py::\x1b[1mtest_b\x1b[0m - assert 1 == 2\n\
\x1b[31m==== \x1b[31m\x1b[1m2 failed\x1b[0m, \x1b[32m4 passed\x1b[0m, \x1b[33m2 skipped\x1b[0m, \x1b[33m1 xfailed\x1b[0m, \x1b[33m1 xpassed\x1b[0m, \x1b[31m\x1b[1m1 error\x1b[0m\x1b[31m in 0.08s\x1b[0m\x1b[31m =====\x1b[0m\n";
        let p = parse_log(log, None).unwrap();
        assert_eq!(p.framework, Framework::Pytest);
        assert_eq!(p.counts, counts(11, 4, 3, 1, 3));
    }

    #[test]
    fn all_passed_with_warnings_and_long_duration() {
        let log = "\
collected 39 items

tests/test_a.py .......................................                  [100%]

=============================== warnings summary ===============================
tests/test_a.py::test_x
  DeprecationWarning: old
======================= 39 passed, 2 warnings in 65.23s (0:01:05) =======================
";
        let f = only(Framework::Pytest, log).unwrap();
        assert_eq!(f.parsed.counts, counts(39, 39, 0, 0, 0));
        assert_eq!(f.summary_at, Some(7));
        // The warnings summary names a test but carries no outcome.
        assert!(f.parsed.tests.is_empty());
    }

    #[test]
    fn collection_error_and_no_tests_ran() {
        let log = "\
collecting ... collected 1 item / 1 error

==================================== ERRORS ====================================
_______________________ ERROR collecting t2/test_bad.py ________________________
E   ModuleNotFoundError: No module named 'nosuchmod'
=========================== short test summary info ============================
ERROR t2/test_bad.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.12s ===============================
";
        let p = only(Framework::Pytest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(1, 0, 0, 1, 0));
        assert_eq!(p.failed_ids(), vec!["t2/test_bad.py"]);

        let p = only(Framework::Pytest, "collected 0 items\n\n============================ no tests ran in 0.00s =============================\n")
            .unwrap()
            .parsed;
        assert_eq!(p.counts, counts(0, 0, 0, 0, 0));
        let p = only(Framework::Pytest, "===== 5 deselected in 0.01s =====")
            .unwrap()
            .parsed;
        assert_eq!(p.counts, counts(0, 0, 0, 0, 0));
    }

    #[test]
    fn last_summary_wins_and_earlier_sessions_are_ignored() {
        let log = "\
============================= test session starts ==============================
tests/old.py::test_z FAILED                                              [100%]
============================== 1 failed in 0.01s ===============================
some product output: ===== 99 passed in 0.01s =====
============================= test session starts ==============================
tests/test_a.py::test_a PASSED                                           [ 50%]
tests/test_a.py::test_b PASSED                                           [100%]
============================== 2 passed in 0.02s ===============================
";
        let f = only(Framework::Pytest, log).unwrap();
        assert_eq!(f.parsed.counts, counts(2, 2, 0, 0, 0));
        assert_eq!(f.parsed.tests.len(), 2);
        assert!(f.parsed.failed_ids().is_empty());
    }

    #[test]
    fn xdist_lines_teardown_errors_and_printed_output() {
        let log = "\
============================= test session starts ==============================
[gw0] [ 25%] PASSED tests/t.py::test_a
[gw1] [ 50%] FAILED tests/t.py::test_b[x y]
tests/t.py::test_c hello from the test
PASSED
tests/t.py::test_d PASSED
tests/t.py::test_d ERROR
=================== 1 failed, 3 passed, 1 error in 0.30s ===================
";
        let p = only(Framework::Pytest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(5, 3, 1, 1, 0));
        assert_eq!(
            outcome_of(&p, "tests/t.py::test_a"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(
            outcome_of(&p, "tests/t.py::test_b[x y]"),
            Some(TestOutcome::Failed)
        );
        assert_eq!(
            outcome_of(&p, "tests/t.py::test_c"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(
            outcome_of(&p, "tests/t.py::test_d"),
            Some(TestOutcome::Error)
        );
        assert_eq!(p.tests.len(), 4);
    }

    #[test]
    fn killed_run_counts_verbose_lines() {
        let log = "\
============================= test session starts ==============================
tests/t.py::test_a PASSED                                           [ 33%]
tests/t.py::test_b SKIPPED (slow)                                   [ 66%]
tests/t.py::test_c ";
        let f = only(Framework::Pytest, log).unwrap();
        assert_eq!(f.summary_at, None);
        assert_eq!(f.parsed.counts, counts(2, 1, 0, 0, 1));
    }

    #[test]
    fn summary_line_shapes() {
        assert_eq!(
            summary_counts("3 passed in 0.01s"),
            Some(counts(3, 3, 0, 0, 0))
        );
        assert_eq!(
            summary_counts("== 1 failed, 2 subtests passed, 1 passed, 1 rerun in 1.00s =="),
            Some(counts(2, 1, 1, 0, 0))
        );
        assert_eq!(summary_counts("# 25 passed, 0 failed"), None);
        assert_eq!(summary_counts("3 passed in the morning"), None);
        assert_eq!(summary_counts("lots passed in 0.1s"), None);
        assert_eq!(summary_counts("2 subtests passed in 0.1s"), None);
        assert_eq!(summary_counts("= in 0.1s ="), None);
    }
}
