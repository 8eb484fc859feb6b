//! `cargo test` (libtest) and `cargo nextest run`.
//!
//! ```text
//! running 3 tests
//! test tests::a ... ok
//! test tests::b ... FAILED
//! test tests::c ... ignored, needs a network
//! test src/lib.rs - add (line 3) ... ok
//!
//! failures:
//! ...
//! test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
//! ```
//!
//! Every test binary (unit tests, each integration test, doc tests) prints
//! its own `running N tests` block and `test result:` line; the counts are
//! their sum, `ignored` counting as skipped. A `test result:` line counts
//! only after a `running N tests` line that it closes, and per-test lines
//! only before that block's `failures:` section; captured output replayed
//! between the section's two headers is skipped. A block that never closes (the binary crashed or was killed)
//! counts the results it printed, and the announced tests it never reported
//! as errors.
//!
//! nextest: `PASS [   0.003s] crate tests::a` lines (ids are `binary test`)
//! and the closing `Summary [   0.005s] 3 tests run: 2 passed, 1 failed,
//! 1 skipped`, which then gives the counts (timeouts and crashes count as
//! errors).

use super::{leading_number, merge_by_id, Counts, Found, Framework, Parsed};
use super::{TestOutcome, TestResult};

struct Block {
    announced: u64,
    /// Index in the test list of this block's first result.
    first: usize,
    /// Past the first `failures:`/`successes:` header: no more results.
    past_results: bool,
    /// Between a section's two headers (details, then the list of names):
    /// captured output replayed from the tests.
    replay: bool,
}

pub(crate) fn parse(lines: &[&str]) -> Option<Found> {
    let any_running = lines.iter().any(|l| running_count(l).is_some());

    let mut tests: Vec<TestResult> = Vec::new();
    let mut counts = Counts::default();
    let mut summary_at: Option<usize> = None;
    let mut block: Option<Block> = None;

    let mut nextest: Vec<TestResult> = Vec::new();
    let mut nextest_summary: Option<(usize, Counts)> = None;

    let close_crashed = |block: Block, tests: &[TestResult], counts: &mut Counts| {
        let mut c = Counts::from_tests(&tests[block.first..]);
        let missing = block.announced.saturating_sub(c.total);
        c = Counts::new(
            c.passed,
            c.failed,
            c.errors.saturating_add(missing),
            c.skipped,
        );
        counts.add(&c);
    };

    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if let Some(n) = running_count(t) {
            if let Some(b) = block.take() {
                close_crashed(b, &tests, &mut counts);
            }
            block = Some(Block {
                announced: n,
                first: tests.len(),
                past_results: false,
                replay: false,
            });
        } else if let Some(c) = result_counts(t) {
            match &block {
                // Output a test printed, replayed in the failures section.
                Some(b) if b.replay => continue,
                Some(_) => block = None,
                // No block to close: output replayed from a test, unless the
                // log has no `running` lines at all (cut at the top).
                None if any_running => continue,
                None => {}
            }
            counts.add(&c);
            summary_at = Some(i);
        } else if let Some(b) = block.as_mut() {
            if t == "failures:" || t == "successes:" {
                b.past_results = true;
                b.replay = !b.replay;
            } else if !b.past_results {
                if let Some(r) = test_line(t) {
                    tests.push(r);
                }
            }
        } else if let Some(r) = nextest_line(t) {
            nextest.push(r);
        } else if let Some(c) = nextest_summary_counts(t) {
            nextest_summary = Some((i, c));
        } else if !any_running {
            if let Some(r) = test_line(t) {
                tests.push(r);
            }
        }
    }
    if let Some(b) = block.take() {
        close_crashed(b, &tests, &mut counts);
    }

    if nextest_summary.is_some()
        || (summary_at.is_none() && !nextest.is_empty() && tests.is_empty())
    {
        let tests = merge_by_id(nextest);
        let (counts, at) = match nextest_summary {
            Some((at, c)) => (c, Some(at)),
            None => (Counts::from_tests(&tests), None),
        };
        return Some(Found {
            parsed: Parsed {
                framework: Framework::Cargo,
                counts,
                tests,
            },
            summary_at: at,
        });
    }

    if summary_at.is_none() && !any_running {
        counts = Counts::from_tests(&tests);
    }
    Some(Found {
        parsed: Parsed {
            framework: Framework::Cargo,
            counts,
            tests,
        },
        summary_at,
    })
}

/// N of `running N tests` / `running 1 test`.
fn running_count(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("running ")?;
    let (n, rest) = leading_number(rest)?;
    matches!(rest, " tests" | " test").then_some(n)
}

/// `test NAME ... ok|FAILED|ignored[, reason]`.
fn test_line(t: &str) -> Option<TestResult> {
    let rest = t.strip_prefix("test ")?;
    let (name, result) = rest.rsplit_once(" ... ")?;
    let result = result.trim();
    let outcome = match result {
        "ok" => TestOutcome::Passed,
        "FAILED" => TestOutcome::Failed,
        _ if result == "ignored" || result.starts_with("ignored,") => TestOutcome::Skipped,
        _ => return None,
    };
    let name = name.trim();
    (!name.is_empty()).then(|| TestResult::new(name, outcome))
}

/// `test result: ok. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered
/// out; finished in 0.00s`.
fn result_counts(t: &str) -> Option<Counts> {
    let rest = t.strip_prefix("test result: ")?;
    let (verdict, rest) = rest.split_once(". ")?;
    if verdict != "ok" && verdict != "FAILED" {
        return None;
    }
    let (mut passed, mut failed, mut ignored) = (None, None, None);
    for part in rest.split("; ") {
        if part.starts_with("finished in") {
            continue;
        }
        let (n, word) = leading_number(part.trim())?;
        match word.trim() {
            "passed" => passed = Some(n),
            "failed" => failed = Some(n),
            "ignored" => ignored = Some(n),
            "measured" | "filtered out" => {}
            _ => return None,
        }
    }
    Some(Counts::new(passed?, failed?, 0, ignored.unwrap_or(0)))
}

/// A nextest status line: `PASS [   0.003s] crate tests::a`, optionally with
/// a `(1/3)` counter before the id.
fn nextest_line(t: &str) -> Option<TestResult> {
    let (word, rest) = t.split_once(" [")?;
    let outcome = match word {
        "PASS" | "LEAK" => TestOutcome::Passed,
        "FAIL" | "LEAK-FAIL" => TestOutcome::Failed,
        "SKIP" => TestOutcome::Skipped,
        "TIMEOUT" | "ABORT" => TestOutcome::Error,
        w if w.starts_with("SIG") && w.len() > 3 && w.chars().all(|c| c.is_ascii_uppercase()) => {
            TestOutcome::Error
        }
        _ => return None,
    };
    let (_, id) = rest.split_once("] ")?;
    let mut id = id.trim();
    if id.starts_with('(') {
        if let Some((counter, after)) = id.split_once(") ") {
            if counter[1..].chars().all(|c| c.is_ascii_digit() || c == '/') {
                id = after.trim();
            }
        }
    }
    (!id.is_empty()).then(|| TestResult::new(id, outcome))
}

/// `Summary [   0.005s] 3 tests run: 2 passed (1 leaky), 1 failed, 1
/// skipped`.
fn nextest_summary_counts(t: &str) -> Option<Counts> {
    let rest = t.strip_prefix("Summary [")?;
    let (_, rest) = rest.split_once("] ")?;
    let (run, parts) = rest.split_once(": ")?;
    let (_, run) = leading_number(run.trim())?;
    if !matches!(run.trim(), "tests run" | "test run") {
        return None;
    }
    let (mut passed, mut failed, mut errors, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    for part in parts.split(", ") {
        let (n, word) = leading_number(part.trim())?;
        let word = word.split_once(" (").map_or(word, |(w, _)| w).trim();
        let slot = match word {
            "passed" => &mut passed,
            "skipped" => &mut skipped,
            "timed out" => &mut errors,
            // `failed`, and anything newer we do not know: not a pass.
            _ => &mut failed,
        };
        *slot = slot.saturating_add(n);
    }
    Some(Counts::new(passed, failed, errors, skipped))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{parse_log, Framework, TestOutcome};
    use super::*;

    const WORKSPACE: &str = "\
   Compiling calc v0.1.0 (/app)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.50s
     Running unittests src/lib.rs (target/debug/deps/calc-1a2b3c)

running 3 tests
test tests::adds ... ok
test tests::divides ... FAILED
test tests::slow ... ignored, needs a network

failures:

---- tests::divides stdout ----
test tests::fake ... ok
test result: ok. 99 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
thread 'tests::divides' panicked at src/lib.rs:20:9:
assertion `left == right` failed

failures:
    tests::divides

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/api.rs (target/debug/deps/api-4d5e6f)

running 2 tests
test api_roundtrip ... ok
test api_errors ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

   Doc-tests calc

running 1 test
test src/lib.rs - add (line 3) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.12s

error: test failed, to rerun pass `--lib`
";

    #[test]
    fn binaries_sum_up_and_replayed_output_is_ignored() {
        let f = only(Framework::Cargo, WORKSPACE).unwrap();
        let p = &f.parsed;
        assert_eq!(p.counts, counts(6, 4, 1, 0, 1));
        assert_eq!(p.tests.len(), 6);
        assert_eq!(outcome_of(p, "tests::slow"), Some(TestOutcome::Skipped));
        assert_eq!(
            outcome_of(p, "src/lib.rs - add (line 3)"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(outcome_of(p, "tests::fake"), None);
        assert_eq!(p.failed_ids(), vec!["tests::divides"]);
        assert_eq!(f.summary_at, Some(35));
        assert_eq!(parse_log(WORKSPACE, Some("cargo")).unwrap(), f.parsed);
        assert_eq!(
            parse_log(WORKSPACE, None).unwrap().framework,
            Framework::Cargo
        );
    }

    #[test]
    fn crashed_binary_counts_missing_tests_as_errors() {
        let log = "\
running 2 tests
test a ... ok
test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
running 4 tests
test b::one ... ok
test b::two ... ok

thread 'b::three' has overflowed its stack
fatal runtime error: stack overflow
error: test failed, to rerun pass `--test b`

Caused by:
  process didn't exit successfully: `/app/target/debug/deps/b-123` (signal: 6, SIGABRT: process abort signal)
";
        let f = only(Framework::Cargo, log).unwrap();
        assert_eq!(f.parsed.counts, counts(6, 4, 0, 2, 0));
        assert_eq!(f.summary_at, Some(2));
    }

    #[test]
    fn all_passing_single_binary() {
        let log = "running 1 test\ntest it_works ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        let p = only(Framework::Cargo, log).unwrap().parsed;
        assert_eq!(p.counts, counts(1, 1, 0, 0, 0));
        assert_eq!(
            p.tests,
            vec![TestResult::new("it_works", TestOutcome::Passed)]
        );
    }

    #[test]
    fn nextest_run() {
        let log = "\
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.02s
────────────
 Nextest run ID 1d6a2b with nextest profile: default
    Starting 4 tests across 2 binaries (1 test skipped)
        PASS [   0.003s] calc tests::adds
        FAIL [   0.004s] calc tests::divides
──── STDOUT:             calc tests::divides
test tests::divides ... FAILED
     TIMEOUT [  60.001s] calc tests::hangs
        PASS [   0.002s] (4/4) calc::api api_roundtrip
        SKIP [         ] calc tests::slow
────────────
     Summary [  60.010s] 4 tests run: 2 passed, 1 failed, 1 timed out, 1 skipped
        FAIL [   0.004s] calc tests::divides
     TIMEOUT [  60.001s] calc tests::hangs
error: test run failed
";
        let f = only(Framework::Cargo, log).unwrap();
        assert_eq!(f.parsed.counts, counts(5, 2, 1, 1, 1));
        assert_eq!(f.summary_at, Some(12));
        assert_eq!(f.parsed.tests.len(), 5);
        assert_eq!(
            outcome_of(&f.parsed, "calc::api api_roundtrip"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(
            f.parsed.failed_ids(),
            vec!["calc tests::divides", "calc tests::hangs"]
        );
    }

    #[test]
    fn summary_without_a_running_line_is_noise() {
        let log = "running 1 test\ntest a ... FAILED\n\nfailures:\n\n---- a stdout ----\ntest result: ok. 7 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\nfailures:\n    a\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\ntest result: ok. 50 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        let p = only(Framework::Cargo, log).unwrap().parsed;
        assert_eq!(p.counts, counts(1, 0, 1, 0, 0));
    }

    #[test]
    fn line_shapes() {
        assert_eq!(running_count("running 0 tests"), Some(0));
        assert_eq!(running_count("running late"), None);
        assert_eq!(result_counts("test result: ok. 1 passed"), None);
        assert_eq!(
            result_counts("test result: ok. 1 passed; 0 failed; 2 ignored; 0 measured; 3 filtered out; finished in 0.00s"),
            Some(counts(3, 1, 0, 0, 2))
        );
        assert_eq!(test_line("test x ... bench:  1 ns/iter"), None);
        assert_eq!(
            test_line("test foo has been running for over 60 seconds"),
            None
        );
        assert_eq!(nextest_line("PASS [x"), None);
        assert_eq!(
            nextest_summary_counts("Summary [ 1s] 3 tests run: many passed"),
            None
        );
    }
}
