//! Jest and Vitest.
//!
//! ```text
//!  PASS  src/sum.test.js
//!   sum
//!     ✓ adds 1 + 2 (2 ms)
//!     ○ skipped later
//!  FAIL  src/mul.test.js
//!   mul
//!     ✕ multiplies (3 ms)
//!   ● mul › multiplies
//! Test Suites: 1 failed, 1 passed, 2 total
//! Tests:       1 failed, 1 skipped, 1 todo, 1 passed, 4 total
//!
//!  ❯ src/mul.test.ts (2 tests | 1 failed) 5ms
//!    × mul > multiplies 3ms
//!  Test Files  1 failed | 1 passed (2)
//!       Tests  1 failed | 3 passed (4)
//! ```
//!
//! The last `Tests:` (jest) or `Tests  ... (N)` (vitest) line gives the
//! counts; `skipped`, `todo` and any word not known count as skipped. A test
//! file that failed to run (a syntax error, a failed import) has no tests,
//! so when the suites line shows failed files and the tests line no failed
//! test, each failed file counts as an error; so does each of vitest's
//! unhandled `Errors`. Per-test ids join the `describe` names with ` › `
//! (jest's own failure headers) or keep vitest's ` > ` paths.

use super::{leading_number, merge_by_id, Counts, Found, Framework, Parsed};
use super::{TestOutcome, TestResult};

/// How far from the tests line the suites and errors lines may be.
const SUMMARY_BLOCK: usize = 4;

pub(crate) fn parse(lines: &[&str]) -> Option<Found> {
    let summary = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, l)| tests_line(l).map(|c| (i, c)));
    let counts = summary.as_ref().map(|&(at, ref c)| {
        let before = &lines[at.saturating_sub(SUMMARY_BLOCK)..at];
        let after = &lines[(at + 1).min(lines.len())..(at + 1 + SUMMARY_BLOCK).min(lines.len())];
        let mut errors = c.errors;
        if c.failed == 0 {
            if let Some(files) = before.iter().rev().find_map(|l| failed_files(l)) {
                errors = errors.saturating_add(files);
            }
        }
        if let Some(n) = after.iter().find_map(|l| unhandled_errors(l)) {
            errors = errors.saturating_add(n);
        }
        Counts::new(c.passed, c.failed, errors, c.skipped)
    });
    let summary_at = summary.as_ref().map(|(i, _)| *i);
    let end = summary_at.unwrap_or(lines.len());
    let tests = merge_by_id(per_test(&lines[..end]));
    let counts = counts.unwrap_or_else(|| Counts::from_tests(&tests));
    Some(Found {
        parsed: Parsed {
            framework: Framework::Jest,
            counts,
            tests,
        },
        summary_at,
    })
}

/// Sum `N word` parts into counts; the jest/vitest `total` is checked
/// against the parts, and whatever it has beyond them counts as skipped.
fn tally<'a>(parts: impl Iterator<Item = &'a str>, total: Option<u64>) -> Option<Counts> {
    let (mut passed, mut failed, mut skipped) = (0u64, 0u64, 0u64);
    for part in parts {
        let (n, word) = leading_number(part.trim())?;
        let word = word.trim();
        if word.is_empty() || !word.chars().all(|c| c.is_alphabetic() || c == ' ') {
            return None;
        }
        let slot = match word {
            "passed" => &mut passed,
            "failed" => &mut failed,
            _ => &mut skipped,
        };
        *slot = slot.saturating_add(n);
    }
    let c = Counts::new(passed, failed, 0, skipped);
    Some(match total {
        Some(t) if t > c.total => {
            Counts::new(passed, failed, 0, skipped.saturating_add(t - c.total))
        }
        _ => c,
    })
}

/// jest `Tests:       1 failed, 2 skipped, 10 passed, 13 total`, or vitest
/// `Tests  2 failed | 10 passed (12)`.
fn tests_line(line: &str) -> Option<Counts> {
    let t = line.trim();
    if let Some(rest) = t.strip_prefix("Tests:") {
        let mut parts: Vec<&str> = rest.split(", ").collect();
        let (total, word) = leading_number(parts.pop()?.trim())?;
        if word != " total" {
            return None;
        }
        return tally(parts.into_iter(), Some(total));
    }
    let rest = t.strip_prefix("Tests")?;
    if !rest.starts_with("  ") {
        return None;
    }
    let rest = rest.trim_start().strip_suffix(')')?;
    let (parts, total) = rest.rsplit_once(" (")?;
    let (total, tail) = leading_number(total)?;
    if !tail.is_empty() {
        return None;
    }
    tally(parts.split(" | "), Some(total))
}

/// Failed test files: jest `Test Suites: 1 failed, 1 passed, 2 total`,
/// vitest `Test Files  1 failed | 1 passed (2)`.
fn failed_files(line: &str) -> Option<u64> {
    let t = line.trim();
    let rest = t
        .strip_prefix("Test Suites:")
        .or_else(|| t.strip_prefix("Test Files "))?;
    rest.split([',', '|', '(']).find_map(|part| {
        let (n, word) = leading_number(part.trim())?;
        (word.trim() == "failed").then_some(n)
    })
}

/// vitest `Errors  2 errors` (unhandled errors during the run).
fn unhandled_errors(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("Errors")?;
    if !rest.starts_with("  ") {
        return None;
    }
    let (n, word) = leading_number(rest.trim_start())?;
    matches!(word.trim(), "error" | "errors").then_some(n)
}

fn symbol_outcome(c: char) -> Option<TestOutcome> {
    Some(match c {
        '✓' | '✔' | '√' => TestOutcome::Passed,
        '✕' | '✗' | '×' | '✖' => TestOutcome::Failed,
        '○' | '↓' | '✎' => TestOutcome::Skipped,
        _ => return None,
    })
}

/// Strip a trailing duration: jest ` (12 ms)`, ` (1.2 s)`; vitest ` 12ms`.
fn strip_timing(name: &str) -> &str {
    if let Some((head, tail)) = name.rsplit_once(" (") {
        if let Some(inner) = tail.strip_suffix(')') {
            if super::is_duration(inner) {
                return head.trim_end();
            }
        }
    }
    if let Some((head, tail)) = name.rsplit_once(' ') {
        if super::is_duration(tail) && !tail.contains(' ') {
            return head.trim_end();
        }
    }
    name
}

/// vitest's per-file line: `✓ src/a.test.ts (3 tests) 5ms`.
fn is_file_line(rest: &str) -> bool {
    rest.split(" (")
        .skip(1)
        .any(|p| leading_number(p).is_some_and(|(_, w)| w.starts_with(" test")))
}

fn per_test(lines: &[&str]) -> Vec<TestResult> {
    let mut tests = Vec::new();
    // The describe blocks open at each indentation, outermost first.
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut file: Option<String> = None;
    for line in lines {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let t = trimmed.trim_end();
        if t.is_empty() {
            continue;
        }
        // ` PASS  src/a.test.js` / ` FAIL  src/b.test.js`: a file starts.
        if let Some(f) = t.strip_prefix("PASS ").or_else(|| t.strip_prefix("FAIL ")) {
            let f = f.trim();
            if !f.is_empty() && !f.contains(" > ") && !f.contains(' ') {
                stack.clear();
                file = Some(f.to_string());
                continue;
            }
        }
        if let Some(header) = t.strip_prefix("● ") {
            let header = header.trim();
            if header == "Test suite failed to run" {
                if let Some(f) = &file {
                    tests.push(TestResult::new(f.clone(), TestOutcome::Error));
                }
            } else if !header.is_empty()
                && header != "Console"
                && !header.ends_with("Warning")
                && !header.starts_with("Multiple configurations")
            {
                tests.push(TestResult::new(header, TestOutcome::Failed));
            }
            continue;
        }
        let mut chars = t.chars();
        let Some(first) = chars.next() else {
            continue;
        };
        if let Some(outcome) = symbol_outcome(first) {
            let rest = chars.as_str().trim();
            if rest.is_empty() || is_file_line(rest) {
                continue;
            }
            let rest = match first {
                '○' => rest.strip_prefix("skipped ").unwrap_or(rest),
                '✎' => rest.strip_prefix("todo ").unwrap_or(rest),
                _ => rest,
            };
            let name = strip_timing(rest);
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            let id = stack
                .iter()
                .map(|(_, n)| n.as_str())
                .chain(std::iter::once(name))
                .collect::<Vec<_>>()
                .join(" › ");
            tests.push(TestResult::new(id, outcome));
        } else if file.is_some() && indent > 0 {
            // A describe block's name, inside a file's verbose tree.
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            stack.push((indent, t.to_string()));
        } else {
            stack.clear();
        }
    }
    tests
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{parse_log, Framework, TestOutcome};
    use super::*;

    const JEST: &str = " PASS  src/sum.test.js
  sum
    ✓ adds 1 + 2 to equal 3 (2 ms)
    ○ skipped later
    nested
      ✓ deep one
  ✓ top level
 FAIL  src/mul.test.js
  ● Console

    console.log
      PASS fake.test.js

      at Object.log (src/mul.test.js:3:11)

  mul
    ✕ multiplies (3 ms)
    ✎ todo write more

  ● mul › multiplies

    expect(received).toBe(expected) // Object.is equality

    Expected: 7
    Received: 6

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 1 skipped, 1 todo, 3 passed, 6 total
Snapshots:   0 total
Time:        0.512 s
Ran all test suites.
";

    #[test]
    fn jest_verbose_tree() {
        let f = only(Framework::Jest, JEST).unwrap();
        let p = &f.parsed;
        assert_eq!(p.counts, counts(6, 3, 1, 0, 2));
        assert_eq!(f.summary_at, Some(27));
        assert_eq!(
            outcome_of(p, "sum › adds 1 + 2 to equal 3"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(outcome_of(p, "sum › later"), Some(TestOutcome::Skipped));
        assert_eq!(
            outcome_of(p, "sum › nested › deep one"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(outcome_of(p, "top level"), Some(TestOutcome::Passed));
        assert_eq!(
            outcome_of(p, "mul › write more"),
            Some(TestOutcome::Skipped)
        );
        // The verbose line and the failure header name the same test.
        assert_eq!(p.failed_ids(), vec!["mul › multiplies"]);
        assert_eq!(p.tests.len(), 6);
        assert_eq!(parse_log(JEST, Some("jest")).unwrap(), f.parsed);
        assert_eq!(parse_log(JEST, None).unwrap().framework, Framework::Jest);
    }

    #[test]
    fn jest_suite_that_failed_to_run() {
        let log = "\
 FAIL  src/broken.test.js
  ● Test suite failed to run

    SyntaxError: Unexpected token (3:4)

 PASS  src/ok.test.js

Test Suites: 1 failed, 1 passed, 2 total
Tests:       4 passed, 4 total
Snapshots:   0 total
";
        let p = only(Framework::Jest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(5, 4, 0, 1, 0));
        assert_eq!(p.failed_ids(), vec!["src/broken.test.js"]);

        let none = "Test Suites: 1 failed, 1 total\nTests:       0 total\n";
        let p = only(Framework::Jest, none).unwrap().parsed;
        assert_eq!(p.counts, counts(1, 0, 0, 1, 0));
    }

    #[test]
    fn vitest_run() {
        let log = "
 RUN  v1.6.0 /app

 ✓ src/sum.test.ts (3 tests) 3ms
 ❯ src/mul.test.ts (2 tests | 1 failed) 5ms
   × mul > multiplies 3ms
     → expected 6 to be 7 // Object.is equality
   ✓ mul > squares 1ms

⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯

 FAIL  src/mul.test.ts > mul > multiplies
AssertionError: expected 6 to be 7 // Object.is equality

 Test Files  1 failed | 1 passed (2)
      Tests  1 failed | 3 passed | 1 skipped (5)
   Start at  10:00:00
   Duration  400ms (transform 20ms, setup 0ms)
";
        let f = only(Framework::Jest, log).unwrap();
        assert_eq!(f.parsed.counts, counts(5, 3, 1, 0, 1));
        assert_eq!(f.summary_at, Some(15));
        assert_eq!(f.parsed.failed_ids(), vec!["mul > multiplies"]);
        assert_eq!(
            outcome_of(&f.parsed, "mul > squares"),
            Some(TestOutcome::Passed)
        );
        assert_eq!(
            parse_log(log, Some("vitest")).unwrap().framework,
            Framework::Jest
        );
    }

    #[test]
    fn vitest_unhandled_errors_and_all_passing() {
        let log = " Test Files  2 passed (2)\n      Tests  4 passed (4)\n     Errors  1 error\n   Start at  10:00:00\n";
        let p = only(Framework::Jest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(5, 4, 0, 1, 0));

        let log = " Test Files  2 passed (2)\n      Tests  4 passed (4)\n";
        let p = only(Framework::Jest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(4, 4, 0, 0, 0));
    }

    #[test]
    fn coloured_jest_summary_and_total_beyond_parts() {
        let log =
            "\x1b[1mTests:       \x1b[22m\x1b[1m\x1b[32m12 passed\x1b[39m\x1b[22m, 13 total\n";
        let p = parse_log(log, None).unwrap();
        assert_eq!(p.framework, Framework::Jest);
        // One test the line does not account for: not a pass.
        assert_eq!(p.counts, counts(13, 12, 0, 0, 1));
    }

    #[test]
    fn lookalikes() {
        assert_eq!(tests_line("Tests: many"), None);
        assert_eq!(tests_line("Tests: 3 passed, 3 totally"), None);
        assert_eq!(tests_line("Tests run in parallel (4)"), None);
        assert_eq!(tests_line("Tests 3 passed (3)"), None);
        assert_eq!(strip_timing("adds (2 ms)"), "adds");
        assert_eq!(strip_timing("adds (a b)"), "adds (a b)");
        assert_eq!(strip_timing("mul > x 12ms"), "mul > x");
        assert!(is_file_line("src/a.test.ts (3 tests) 5ms"));
        assert!(!is_file_line("handles (3) values"));
    }
}
