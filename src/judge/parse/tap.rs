//! TAP, versions 12, 13 and 14 (also `node --test`, `prove -v`, and
//! hand-written harnesses).
//!
//! ```text
//! TAP version 13
//! 1..4
//! ok 1 - encodes empty input
//! not ok 2 - decodes padding # killed by signal 11
//! ok 3 - large input # SKIP no memory
//! not ok 4 - future work # TODO
//! Bail out! build failed
//! ```
//!
//! Only lines at column 0 count: indented lines are YAML diagnostics or
//! TAP 14 subtests, whose parent reports its own line. `# SKIP` (any case,
//! also `# skipped: why`) makes a test skipped whether `ok` or `not ok`;
//! `not ok # TODO` is an expected failure (skipped) and `ok # TODO` an
//! unexpected success (failed). Any other `# text` after the description is
//! a comment. Ids are descriptions (the test number when there is none).
//!
//! The plan is TAP's authoritative statement: a stream with one is complete.
//! Planned tests that never reported count as errors (their id is their
//! number), results numbered beyond the plan are errors, and `Bail out!`
//! with nothing left to blame is one error. Several streams in one log
//! (a new `TAP version` line, a second plan, or numbering that restarts at 1
//! after a plan) add up.

use std::collections::HashSet;

use super::{leading_number, Counts, Found, Framework, Parsed, TestOutcome, TestResult};

/// At most this many planned-but-missing tests are listed one by one; past
/// it they are only counted (a plan such as `1..99999999999` is legal).
const MAX_LISTED_MISSING: u64 = 100_000;

#[derive(Default)]
struct Stream {
    plan: Option<u64>,
    results: Vec<Line>,
    bailed: bool,
    last_line: usize,
}

struct Line {
    number: Option<u64>,
    name: String,
    ok: bool,
    directive: Directive,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Directive {
    None,
    Skip,
    Todo,
}

impl Stream {
    fn is_empty(&self) -> bool {
        self.plan.is_none() && self.results.is_empty() && !self.bailed
    }

    /// The stream's tests (the missing and the out-of-plan as errors) and
    /// their counts.
    fn finish(self) -> (Vec<TestResult>, Counts) {
        let mut tests = Vec::with_capacity(self.results.len());
        let mut seen: HashSet<u64> = HashSet::new();
        let mut next = 1u64;
        for r in &self.results {
            let number = r.number.unwrap_or(next);
            next = number.saturating_add(1);
            seen.insert(number);
            let mut outcome = match (r.ok, r.directive) {
                (_, Directive::Skip) | (false, Directive::Todo) => TestOutcome::Skipped,
                (true, Directive::Todo) | (false, Directive::None) => TestOutcome::Failed,
                (true, Directive::None) => TestOutcome::Passed,
            };
            if self.plan.is_some_and(|p| number > p || number == 0) {
                outcome = TestOutcome::Error;
            }
            let id = if r.name.is_empty() {
                number.to_string()
            } else {
                r.name.clone()
            };
            tests.push(TestResult::new(id, outcome));
        }
        let mut counts = Counts::from_tests(&tests);
        let mut blamed = false;
        if let Some(plan) = self.plan {
            let reported = seen.iter().filter(|&&n| n >= 1 && n <= plan).count() as u64;
            let missing = plan.saturating_sub(reported);
            if missing > 0 {
                blamed = true;
                counts = Counts::new(
                    counts.passed,
                    counts.failed,
                    counts.errors.saturating_add(missing),
                    counts.skipped,
                );
                if missing <= MAX_LISTED_MISSING {
                    let mut n = 1u64;
                    let mut listed = 0u64;
                    while listed < missing && n <= plan {
                        if !seen.contains(&n) {
                            tests.push(TestResult::new(n.to_string(), TestOutcome::Error));
                            listed += 1;
                        }
                        n += 1;
                    }
                } else {
                    // Too many to list: one entry stands for all of them.
                    tests.push(TestResult::new(
                        format!("{missing} planned tests not run"),
                        TestOutcome::Error,
                    ));
                }
            }
        }
        if self.bailed && !blamed {
            tests.push(TestResult::new("Bail out!", TestOutcome::Error));
            counts.add_outcome(TestOutcome::Error);
        }
        (tests, counts)
    }

    /// Whether every planned test has reported (a bare `ok` after that is
    /// `prove -v`'s verdict on the file, not a result).
    fn complete(&self) -> bool {
        self.plan.is_some_and(|p| self.results.len() as u64 >= p)
    }
}

pub(crate) fn parse(lines: &[&str]) -> Option<Found> {
    let mut streams: Vec<Stream> = Vec::new();
    let mut cur = Stream::default();

    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_end();
        if t.starts_with("TAP version ") {
            if !cur.is_empty() {
                streams.push(std::mem::take(&mut cur));
            }
            cur.last_line = i;
        } else if let Some(n) = plan(t) {
            if cur.plan.is_some() {
                streams.push(std::mem::take(&mut cur));
            }
            cur.plan = Some(n);
            cur.last_line = i;
        } else if let Some(r) = result(t) {
            if t == "ok" && cur.complete() {
                continue;
            }
            if r.number == Some(1) && cur.plan.is_some() && !cur.results.is_empty() {
                streams.push(std::mem::take(&mut cur));
            }
            cur.results.push(r);
            cur.last_line = i;
        } else if t.starts_with("Bail out!") {
            cur.bailed = true;
            cur.last_line = i;
        }
    }
    if !cur.is_empty() {
        streams.push(cur);
    }
    if streams.is_empty() {
        return None;
    }

    let mut counts = Counts::default();
    let mut tests = Vec::new();
    let mut summary_at = None;
    for s in streams {
        if s.plan.is_some() {
            summary_at = summary_at.max(Some(s.last_line));
        }
        let (t, c) = s.finish();
        counts.add(&c);
        tests.extend(t);
    }
    Some(Found {
        parsed: Parsed {
            framework: Framework::Tap,
            counts,
            tests,
        },
        summary_at,
    })
}

/// `1..N`, optionally with a `# reason`.
fn plan(t: &str) -> Option<u64> {
    let rest = t.strip_prefix("1..")?;
    let (n, rest) = leading_number(rest)?;
    let rest = rest.trim_start();
    (rest.is_empty() || rest.starts_with('#')).then_some(n)
}

/// `ok`/`not ok`, optional number, optional `- description`, optional
/// `# directive`.
fn result(t: &str) -> Option<Line> {
    let (ok, rest) = if let Some(r) = t.strip_prefix("not ok") {
        (false, r)
    } else if let Some(r) = t.strip_prefix("ok") {
        (true, r)
    } else {
        return None;
    };
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim_start();
    let (number, rest) = match leading_number(rest) {
        Some((n, r)) if r.is_empty() || r.starts_with([' ', '\t']) => (Some(n), r.trim_start()),
        _ => (None, rest),
    };
    let rest = rest.strip_prefix('-').map_or(rest, str::trim_start);

    // Split at the first unescaped '#'.
    let mut name = String::new();
    let mut directive_text: Option<&str> = None;
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, e)) if e == '#' || e == '\\' => name.push(e),
                Some((_, e)) => {
                    name.push('\\');
                    name.push(e);
                }
                None => name.push('\\'),
            },
            '#' => {
                directive_text = Some(&rest[i + 1..]);
                break;
            }
            c => name.push(c),
        }
    }
    let directive = match directive_text.map(|d| d.trim_start().to_ascii_uppercase()) {
        Some(d) if d.starts_with("SKIP") => Directive::Skip,
        Some(d) if d.starts_with("TODO") => Directive::Todo,
        _ => Directive::None,
    };
    Some(Line {
        number,
        name: name.trim().to_string(),
        ok,
        directive,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{parse_log, Framework, TestOutcome};
    use super::*;

    /// The shape of case003's harness output: TAP 13, comments, a comment
    /// after a failing test's name, and a closing `# P passed, F failed`.
    const HARNESS: &str = "\
# cc: warning: unused variable 'x'
TAP version 13
1..5
ok 1 - test_encode_empty
ok 2 - test_encode_foobar
not ok 3 - test_decode_rejects_noncanonical_trailing_bits
#   check failed at tests/test_b64.c:88: rc == B64_ERR_NONCANONICAL (got 0, want 4)
not ok 4 - test_decode_crash # killed by signal 11
ok 5 - test_strerror
# 3 passed, 2 failed
";

    #[test]
    fn harness_stream_with_comments() {
        let f = only(Framework::Tap, HARNESS).unwrap();
        let p = &f.parsed;
        assert_eq!(p.counts, counts(5, 3, 2, 0, 0));
        assert_eq!(f.summary_at, Some(8));
        assert_eq!(
            p.failed_ids(),
            vec![
                "test_decode_rejects_noncanonical_trailing_bits",
                "test_decode_crash"
            ]
        );
        assert_eq!(parse_log(HARNESS, Some("tap")).unwrap(), f.parsed);
        assert_eq!(parse_log(HARNESS, None).unwrap().framework, Framework::Tap);
    }

    #[test]
    fn directives_and_escapes() {
        let log = "\
1..6
ok 1 - large input # SKIP no memory
not ok 2 - flaky # skipped: by request
not ok 3 - future work # TODO not written
ok 4 - done early # todo
ok 5 - hash \\# in name
ok 6 # Skip
";
        let p = only(Framework::Tap, log).unwrap().parsed;
        assert_eq!(p.counts, counts(6, 1, 1, 0, 4));
        assert_eq!(outcome_of(&p, "done early"), Some(TestOutcome::Failed));
        assert_eq!(outcome_of(&p, "hash # in name"), Some(TestOutcome::Passed));
        assert_eq!(outcome_of(&p, "6"), Some(TestOutcome::Skipped));
        assert_eq!(outcome_of(&p, "future work"), Some(TestOutcome::Skipped));
    }

    #[test]
    fn missing_tests_and_bail_out() {
        let log = "TAP version 14\n1..4\nok 1 - a\nnot ok 2 - b\nBail out! out of memory\n";
        let p = only(Framework::Tap, log).unwrap().parsed;
        assert_eq!(p.counts, counts(4, 1, 1, 2, 0));
        assert_eq!(p.failed_ids(), vec!["b", "3", "4"]);

        // Bail out before any plan: one error.
        let p = only(Framework::Tap, "Bail out! build failed\n# cc: error\n")
            .unwrap()
            .parsed;
        assert_eq!(p.counts, counts(1, 0, 0, 1, 0));
        assert_eq!(p.failed_ids(), vec!["Bail out!"]);
    }

    #[test]
    fn trailing_plan_unnumbered_results_and_out_of_plan() {
        let log = "ok - first\nok\nok 3 third\nok 4 - extra\n1..3\n";
        let f = only(Framework::Tap, log).unwrap();
        assert_eq!(f.summary_at, Some(4));
        assert_eq!(f.parsed.counts, counts(4, 3, 0, 1, 0));
        assert_eq!(outcome_of(&f.parsed, "first"), Some(TestOutcome::Passed));
        assert_eq!(outcome_of(&f.parsed, "2"), Some(TestOutcome::Passed));
        assert_eq!(outcome_of(&f.parsed, "third"), Some(TestOutcome::Passed));
        assert_eq!(f.parsed.failed_ids(), vec!["extra"]);
    }

    #[test]
    fn node_test_runner_subtests_are_indented() {
        let log = "\
TAP version 13
# Subtest: adds
ok 1 - adds
  ---
  duration_ms: 0.6
  ...
# Subtest: math
    # Subtest: sub
    not ok 1 - sub
      ---
      ...
    1..1
not ok 2 - math
  ---
  ...
1..2
# tests 2
# pass 1
# fail 1
";
        let p = only(Framework::Tap, log).unwrap().parsed;
        assert_eq!(p.counts, counts(2, 1, 1, 0, 0));
        assert_eq!(p.failed_ids(), vec!["math"]);
    }

    #[test]
    fn several_streams_add_up() {
        let log = "\
t/a.t ..
1..2
ok 1 - a1
ok 2 - a2
ok
t/b.t ..
1..1
not ok 1 - b1
Failed 1/1 subtests
";
        let p = only(Framework::Tap, log).unwrap().parsed;
        // `ok` alone after a complete plan is prove's verdict, not a test;
        // the second plan starts a new stream.
        assert_eq!(p.counts, counts(3, 2, 1, 0, 0));
        assert_eq!(p.failed_ids(), vec!["b1"]);
        // Before the plan is complete it is an unnumbered result.
        let p = only(Framework::Tap, "1..2\nok 1 - a\nok\n").unwrap().parsed;
        assert_eq!(p.counts, counts(2, 2, 0, 0, 0));

        let log = "1..1\nok 1 - x\nTAP version 13\n1..1\nok 1 - y\nok 1 - z\n1..1\n";
        let p = only(Framework::Tap, log).unwrap().parsed;
        assert_eq!(p.counts, counts(3, 3, 0, 0, 0));
    }

    #[test]
    fn empty_plan_and_huge_plan() {
        let f = only(Framework::Tap, "1..0 # SKIP no tests here\n").unwrap();
        assert_eq!(f.parsed.counts, counts(0, 0, 0, 0, 0));
        assert_eq!(f.summary_at, Some(0));

        let p = only(Framework::Tap, "1..99999999999\nok 1 - a\n")
            .unwrap()
            .parsed;
        assert_eq!(p.counts, counts(99_999_999_999, 1, 0, 99_999_999_998, 0));
        assert_eq!(p.tests.len(), 2);
    }

    #[test]
    fn lookalikes_are_not_results() {
        assert!(result("okay then").is_none());
        assert!(result("not okay").is_none());
        assert!(plan("1..2..3").is_none());
        assert!(plan("1..").is_none());
        // Without a plan there is no summary.
        let f = only(Framework::Tap, "ok  \tpkg\t0.1s\n").unwrap();
        assert_eq!(f.summary_at, None);
    }
}
