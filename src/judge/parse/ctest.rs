//! CTest (CMake's test driver).
//!
//! ```text
//! Test project /build
//!     Start 1: encode
//! 1/5 Test #1: encode ...........................   Passed    0.01 sec
//! 2/5 Test #2: decode ...........................***Failed    0.01 sec
//! 3/5 Test #3: crash ............................***Exception: SegFault  0.01 sec
//! 4/5 Test #4: hang .............................***Timeout   1.50 sec
//! 5/5 Test #5: later ............................***Skipped   0.00 sec
//!
//! 40% tests passed, 3 tests failed out of 5
//! ```
//!
//! The last `N% tests passed, F tests failed out of T` line gives the total
//! and the failures. CTest counts a skipped test (`SKIP_RETURN_CODE`,
//! `SKIP_REGULAR_EXPRESSION`) among the passed; here the `***Skipped` lines
//! move them to skipped. Of the F failures, those shown as `***Exception`,
//! `***Timeout` or `***Not Run` (the test could not start) are errors.
//! `Not Run (Disabled)` tests are outside CTest's total and are left out.
//! `No tests were found!!!` is a summary of zero tests.

use super::{leading_number, Counts, Found, Framework, Parsed, TestOutcome, TestResult};

pub(crate) fn parse(lines: &[&str]) -> Option<Found> {
    let summary = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, l)| summary_line(l).map(|s| (i, s)));
    let end = summary.map_or(lines.len(), |(i, _)| i);
    let start = lines[..end]
        .iter()
        .rposition(|l| {
            let t = l.trim_start();
            t.starts_with("Test project ") || summary_line(l).is_some()
        })
        .unwrap_or(0);
    let tests: Vec<TestResult> = lines[start..end]
        .iter()
        .filter_map(|l| test_line(l))
        .filter_map(|(name, outcome)| outcome.map(|o| TestResult::new(name, o)))
        .collect();

    let counts = match summary {
        Some((_, (total, failed))) => {
            let failed = failed.min(total);
            let from_lines = Counts::from_tests(&tests);
            let errors = from_lines.errors.min(failed);
            let skipped = from_lines.skipped.min(total - failed);
            Counts::new(total - failed - skipped, failed - errors, errors, skipped)
        }
        None => Counts::from_tests(&tests),
    };
    Some(Found {
        parsed: Parsed {
            framework: Framework::Ctest,
            counts,
            tests,
        },
        summary_at: summary.map(|(i, _)| i),
    })
}

/// `(total, failed)` of `67% tests passed, 1 tests failed out of 3`, or
/// zeros for `No tests were found!!!`.
fn summary_line(line: &str) -> Option<(u64, u64)> {
    let t = line.trim();
    if t == "No tests were found!!!" {
        return Some((0, 0));
    }
    let (_, rest) = leading_number(t)?;
    let rest = rest.strip_prefix("% tests passed, ")?;
    let (failed, rest) = leading_number(rest)?;
    let rest = rest
        .strip_prefix(" tests failed out of ")
        .or_else(|| rest.strip_prefix(" test failed out of "))?;
    let (total, rest) = leading_number(rest)?;
    rest.trim().is_empty().then_some((total, failed))
}

/// `1/3 Test #1: name ....   Passed    0.01 sec` and its failing forms. The
/// outcome is `None` for a disabled test.
fn test_line(line: &str) -> Option<(String, Option<TestOutcome>)> {
    let t = line.trim();
    // `Test #1:` or, padded for alignment, `Test  #1:`; `MemCheck #1:` too.
    let (at, after) = ["Test ", "MemCheck "].iter().find_map(|kw| {
        t.match_indices(kw).find_map(|(i, _)| {
            let after = t[i + kw.len()..].trim_start().strip_prefix('#')?;
            Some((i, after))
        })
    })?;
    let progress = t[..at].trim();
    if !progress.is_empty() {
        let (done, total) = progress.split_once('/')?;
        if !leading_number(done)?.1.is_empty() || !leading_number(total.trim())?.1.is_empty() {
            return None;
        }
    }
    let (_, rest) = leading_number(after)?;
    let rest = rest.strip_prefix(": ")?;
    let (name, outcome) = if let Some(star) = rest.find("***") {
        let status = &rest[star + 3..];
        let outcome = if status.starts_with("Failed") {
            Some(TestOutcome::Failed)
        } else if status.starts_with("Skipped") {
            Some(TestOutcome::Skipped)
        } else if status.starts_with("Not Run (Disabled)") {
            None
        } else if status.starts_with("Exception")
            || status.starts_with("Timeout")
            || status.starts_with("Not Run")
        {
            Some(TestOutcome::Error)
        } else {
            return None;
        };
        (&rest[..star], outcome)
    } else {
        let passed = rest.rfind(" Passed")?;
        (&rest[..passed], Some(TestOutcome::Passed))
    };
    let name = name.trim_end().trim_end_matches('.').trim_end();
    (!name.is_empty()).then(|| (name.to_string(), outcome))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{parse_log, Framework, TestOutcome};
    use super::*;

    const RUN: &str = "\
Test project /build
      Start  1: encode
 1/6 Test  #1: encode ...........................   Passed    0.01 sec
      Start  2: decode
 2/6 Test  #2: decode ...........................***Failed    0.01 sec
 3/6 Test  #3: crash ............................***Exception: SegFault  0.01 sec
 4/6 Test  #4: hang .............................***Timeout   1.50 sec
 5/6 Test  #5: later ............................***Skipped   0.00 sec
 6/6 Test  #6: v1.2.api .........................   Passed    0.02 sec
     Test  #7: off ..............................***Not Run (Disabled)   0.00 sec

50% tests passed, 3 tests failed out of 6

Total Test time (real) =   1.55 sec

The following tests did not run:
\t  5 - later (Skipped)
\t  7 - off (Disabled)

The following tests FAILED:
\t  2 - decode (Failed)
\t  3 - crash (SEGFAULT)
\t  4 - hang (Timeout)
Errors while running CTest
";

    #[test]
    fn every_status() {
        let f = only(Framework::Ctest, RUN).unwrap();
        let p = &f.parsed;
        assert_eq!(p.counts, counts(6, 2, 1, 2, 1));
        assert_eq!(f.summary_at, Some(11));
        assert_eq!(p.tests.len(), 6);
        assert_eq!(outcome_of(p, "v1.2.api"), Some(TestOutcome::Passed));
        assert_eq!(outcome_of(p, "later"), Some(TestOutcome::Skipped));
        assert_eq!(outcome_of(p, "off"), None);
        assert_eq!(p.failed_ids(), vec!["decode", "crash", "hang"]);
        assert_eq!(parse_log(RUN, Some("ctest")).unwrap(), f.parsed);
        assert_eq!(parse_log(RUN, None).unwrap().framework, Framework::Ctest);
    }

    #[test]
    fn all_passed_and_none_found() {
        let log = "\
Test project /build
    Start 1: a
1/2 Test #1: a ................   Passed    0.00 sec
    Start 2: b
2/2 Test #2: b ................   Passed    0.00 sec

100% tests passed, 0 tests failed out of 2
";
        let p = only(Framework::Ctest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(2, 2, 0, 0, 0));

        let f = only(
            Framework::Ctest,
            "Test project /build\nNo tests were found!!!\n",
        )
        .unwrap();
        assert_eq!(f.parsed.counts, counts(0, 0, 0, 0, 0));
        assert_eq!(f.summary_at, Some(1));
    }

    #[test]
    fn summary_counts_win_over_lines() {
        // Progress output shows only the failing lines; the summary has all.
        let log =
            "1/3 Test #2: b ....***Failed  0.01 sec\n67% tests passed, 1 tests failed out of 3\n";
        let p = only(Framework::Ctest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(3, 2, 1, 0, 0));
        assert_eq!(p.failed_ids(), vec!["b"]);
    }

    #[test]
    fn interrupted_run_counts_lines() {
        let log = "1/3 Test #1: a ....   Passed 0.01 sec\n2/3 Test #2: b ....***Timeout 9.00 sec\n";
        let f = only(Framework::Ctest, log).unwrap();
        assert_eq!(f.summary_at, None);
        assert_eq!(f.parsed.counts, counts(2, 1, 0, 1, 0));
    }

    #[test]
    fn lookalikes() {
        assert_eq!(
            summary_line("100% tests passed, 0 tests failed out of 2 maybe"),
            None
        );
        assert_eq!(summary_line("50% tests passed"), None);
        assert_eq!(test_line("see Test #1: a in the docs"), None);
        assert_eq!(test_line("1/2 Test #1: ....   Passed 0.1 sec"), None);
    }
}
