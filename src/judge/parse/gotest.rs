//! `go test -v` and `go test -json`.
//!
//! ```text
//! === RUN   TestTable
//! === RUN   TestTable/two
//! --- FAIL: TestTable (0.00s)
//!     --- FAIL: TestTable/two (0.00s)
//! --- SKIP: TestLater (0.00s)
//! FAIL
//! FAIL    example.com/calc    0.003s
//! ok      example.com/util    0.002s
//! FAIL    example.com/broken [build failed]
//! ```
//!
//! Go prints no counts, so they are counted from the `--- PASS/FAIL/SKIP`
//! lines (or the `-json` events): every test and every subtest is one test,
//! so a failing subtest fails its parent too. The package lines (`ok pkg`,
//! `FAIL pkg`, or a test binary's closing `PASS`/`FAIL`) close the run and
//! make the result authoritative. What the lines cannot show is counted as
//! an error: a test that started but never finished (a panic, a timeout, a
//! killed run), and a package that failed with no failing test (a build
//! failure, a panic in `TestMain`, `os.Exit` from a test), named by its
//! package. Without `-v` go prints only failures, so passes go uncounted.

use std::collections::HashMap;

use serde::Deserialize;

use super::{is_duration, Counts, Found, Framework, Parsed, TestOutcome, TestResult};

pub(crate) fn parse(lines: &[&str]) -> Option<Found> {
    let events: Vec<(usize, Event)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with('{'))
        .filter_map(|(i, l)| serde_json::from_str::<Event>(l.trim()).ok().map(|e| (i, e)))
        .collect();
    let (tests, summary_at) = if events.is_empty() {
        from_text(lines)
    } else {
        from_json(lines, &events)
    };
    Some(Found {
        parsed: Parsed {
            framework: Framework::GoTest,
            counts: Counts::from_tests(&tests),
            tests,
        },
        summary_at,
    })
}

fn result_line(t: &str) -> Option<(String, TestOutcome)> {
    let rest = t.strip_prefix("--- ")?;
    let (word, rest) = rest.split_once(": ")?;
    let outcome = match word {
        "PASS" => TestOutcome::Passed,
        "FAIL" => TestOutcome::Failed,
        "SKIP" => TestOutcome::Skipped,
        _ => return None,
    };
    let name = rest.split_whitespace().next()?;
    Some((name.to_string(), outcome))
}

/// `ok  pkg 0.1s`, `ok pkg (cached)`, `FAIL pkg 0.1s`, `FAIL pkg [build
/// failed]`: whether it passed, and the package.
fn package_line(t: &str) -> Option<(bool, &str)> {
    let mut words = t.split_whitespace();
    let ok = match words.next()? {
        "ok" => true,
        "FAIL" => false,
        _ => return None,
    };
    let pkg = words.next()?;
    let third = words.next()?;
    let closes = is_duration(third) || third == "(cached)" || third.starts_with('[');
    (closes && !pkg.starts_with(['(', '[', '-'])).then_some((ok, pkg))
}

/// Tests started and not yet finished, in start order. Finishing one costs
/// the same however many are open (a log can start any number).
#[derive(Default)]
struct Running {
    order: Vec<String>,
    open: HashMap<String, usize>,
    len: usize,
}

impl Running {
    fn start(&mut self, name: &str) {
        self.order.push(name.to_string());
        *self.open.entry(name.to_string()).or_default() += 1;
        self.len += 1;
    }

    fn finish(&mut self, name: &str) {
        if let Some(n) = self.open.get_mut(name) {
            if *n > 0 {
                *n -= 1;
                self.len -= 1;
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The unfinished tests, first started first; none are left open.
    fn drain(&mut self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.len);
        for name in self.order.drain(..) {
            if let Some(n) = self.open.get_mut(&name) {
                if *n > 0 {
                    *n -= 1;
                    out.push(name);
                }
            }
        }
        self.open.clear();
        self.len = 0;
        out
    }
}

fn from_text(lines: &[&str]) -> (Vec<TestResult>, Option<usize>) {
    let mut tests: Vec<TestResult> = Vec::new();
    let mut summary_at = None;
    // The current package's tests start at `seg`.
    let mut seg = 0usize;
    let mut running = Running::default();
    let mut binary_failed = false;

    let seg_has_failure = |tests: &[TestResult], seg: usize| {
        tests[seg..]
            .iter()
            .any(|t| matches!(t.outcome, TestOutcome::Failed | TestOutcome::Error))
    };

    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("=== RUN ") {
            let name = name.trim();
            if !name.is_empty() && !name.contains(char::is_whitespace) {
                running.start(name);
            }
        } else if let Some((name, outcome)) = result_line(t) {
            running.finish(&name);
            tests.push(TestResult::new(name, outcome));
        } else if t == "PASS" || t == "FAIL" {
            // A test binary's own verdict, before its package line.
            if seg < tests.len() || !running.is_empty() {
                summary_at = Some(i);
                if t == "FAIL" {
                    binary_failed = true;
                    for name in running.drain() {
                        tests.push(TestResult::new(name, TestOutcome::Error));
                    }
                }
            }
        } else if let Some((ok, pkg)) = package_line(t) {
            summary_at = Some(i);
            if !ok {
                for name in running.drain() {
                    tests.push(TestResult::new(name, TestOutcome::Error));
                }
                if !seg_has_failure(&tests, seg) {
                    tests.push(TestResult::new(pkg, TestOutcome::Error));
                }
            }
            running.drain();
            binary_failed = false;
            seg = tests.len();
        }
    }
    // The log ends inside a package: unfinished tests did not pass, and a
    // binary that said FAIL with nothing failing failed as a whole.
    for name in running.drain() {
        tests.push(TestResult::new(name, TestOutcome::Error));
    }
    if binary_failed && !seg_has_failure(&tests, seg) {
        tests.push(TestResult::new("FAIL", TestOutcome::Error));
    }
    (tests, summary_at)
}

/// One `go test -json` event (test2json); other fields are ignored.
#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Package", default)]
    package: Option<String>,
    #[serde(rename = "Test", default)]
    test: Option<String>,
}

fn from_json(lines: &[&str], events: &[(usize, Event)]) -> (Vec<TestResult>, Option<usize>) {
    let mut tests: Vec<TestResult> = Vec::new();
    let mut summary_at = None;
    let mut running: HashMap<String, Running> = HashMap::new();
    let mut failing: HashMap<String, bool> = HashMap::new();

    fn package_failed(
        tests: &mut Vec<TestResult>,
        running: &mut HashMap<String, Running>,
        failing: &mut HashMap<String, bool>,
        pkg: &str,
    ) {
        let mut any = failing.get(pkg).copied().unwrap_or(false);
        for name in running.get_mut(pkg).map(Running::drain).unwrap_or_default() {
            tests.push(TestResult::new(name, TestOutcome::Error));
            any = true;
        }
        if !any {
            tests.push(TestResult::new(pkg, TestOutcome::Error));
        }
        failing.insert(pkg.to_string(), true);
    }

    for (i, e) in events {
        let pkg = e.package.clone().unwrap_or_default();
        match (&e.test, e.action.as_str()) {
            (Some(test), "run") => running.entry(pkg).or_default().start(test),
            (Some(test), action @ ("pass" | "fail" | "skip")) => {
                let outcome = match action {
                    "pass" => TestOutcome::Passed,
                    "fail" => TestOutcome::Failed,
                    _ => TestOutcome::Skipped,
                };
                if let Some(r) = running.get_mut(&pkg) {
                    r.finish(test);
                }
                if outcome == TestOutcome::Failed {
                    failing.insert(pkg, true);
                }
                tests.push(TestResult::new(test.clone(), outcome));
            }
            (None, "pass" | "skip") => summary_at = Some(*i),
            (None, "fail") => {
                summary_at = Some(*i);
                package_failed(&mut tests, &mut running, &mut failing, &pkg);
            }
            _ => {}
        }
    }
    // Older go versions print build failures as text, outside the events.
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.starts_with('{') {
            continue;
        }
        if let Some((false, pkg)) = package_line(t) {
            if t.contains('[') && !failing.get(pkg).copied().unwrap_or(false) {
                summary_at = summary_at.max(Some(i));
                package_failed(&mut tests, &mut running, &mut failing, pkg);
            }
        }
    }
    // Package by package (sorted), each one's tests in start order.
    let mut left: Vec<(String, Running)> = running.into_iter().collect();
    left.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, mut r) in left {
        for name in r.drain() {
            tests.push(TestResult::new(name, TestOutcome::Error));
        }
    }
    (tests, summary_at)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{parse_log, Framework, TestOutcome};
    use super::*;

    const VERBOSE: &str = "\
=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestSkip
    calc_test.go:10: not now
--- SKIP: TestSkip (0.00s)
=== RUN   TestTable
=== RUN   TestTable/one
=== RUN   TestTable/two
    calc_test.go:20: want 2, got 3
--- FAIL: TestTable (0.00s)
    --- PASS: TestTable/one (0.00s)
    --- FAIL: TestTable/two (0.00s)
=== RUN   TestParallel
=== PAUSE TestParallel
=== CONT  TestParallel
--- PASS: TestParallel (0.01s)
FAIL
FAIL\texample.com/calc\t0.013s
=== RUN   TestUtil
--- PASS: TestUtil (0.00s)
PASS
ok  \texample.com/util\t0.002s
?   \texample.com/cmd\t[no test files]
FAIL
";

    #[test]
    fn verbose_with_subtests_and_packages() {
        let f = only(Framework::GoTest, VERBOSE).unwrap();
        let p = &f.parsed;
        assert_eq!(p.counts, counts(7, 4, 2, 0, 1));
        assert_eq!(f.summary_at, Some(21));
        assert_eq!(outcome_of(p, "TestTable/one"), Some(TestOutcome::Passed));
        assert_eq!(outcome_of(p, "TestSkip"), Some(TestOutcome::Skipped));
        assert_eq!(p.failed_ids(), vec!["TestTable", "TestTable/two"]);
        assert_eq!(parse_log(VERBOSE, Some("go")).unwrap(), f.parsed);
        assert_eq!(
            parse_log(VERBOSE, None).unwrap().framework,
            Framework::GoTest
        );
    }

    #[test]
    fn all_passing_package() {
        let log = "\
=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestB
--- PASS: TestB (0.00s)
PASS
ok  \texample.com/m\t(cached)
";
        let f = only(Framework::GoTest, log).unwrap();
        assert_eq!(f.parsed.counts, counts(2, 2, 0, 0, 0));
        assert_eq!(f.summary_at, Some(5));
    }

    #[test]
    fn panic_and_timeout_count_running_tests_as_errors() {
        let log = "\
=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestHang
panic: test timed out after 1s
\trunning tests:
\t\tTestHang (1s)

goroutine 6 [running]:
FAIL\texample.com/m\t1.010s
";
        let p = only(Framework::GoTest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(2, 1, 0, 1, 0));
        assert_eq!(p.failed_ids(), vec!["TestHang"]);
    }

    #[test]
    fn build_failure_is_an_error_for_the_package() {
        let log = "\
# example.com/m [example.com/m.test]
./m_test.go:5:2: undefined: Foo
FAIL\texample.com/m [build failed]
ok  \texample.com/n\t0.001s
FAIL
";
        let f = only(Framework::GoTest, log).unwrap();
        assert_eq!(f.parsed.counts, counts(1, 0, 0, 1, 0));
        assert_eq!(f.parsed.failed_ids(), vec!["example.com/m"]);
    }

    #[test]
    fn os_exit_in_a_test_fails_the_package() {
        let log = "\
=== RUN   TestA
--- PASS: TestA (0.00s)
=== RUN   TestExit
FAIL\texample.com/m\t0.004s
";
        let p = only(Framework::GoTest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(2, 1, 0, 1, 0));
        assert_eq!(p.failed_ids(), vec!["TestExit"]);

        // A test binary run on its own: no package line.
        let p = only(
            Framework::GoTest,
            "=== RUN   TestA\n--- PASS: TestA (0.00s)\nFAIL\n",
        )
        .unwrap()
        .parsed;
        assert_eq!(p.counts, counts(2, 1, 0, 1, 0));
    }

    #[test]
    fn killed_mid_run() {
        let f = only(
            Framework::GoTest,
            "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n",
        )
        .unwrap();
        assert_eq!(f.summary_at, None);
        assert_eq!(f.parsed.counts, counts(2, 1, 0, 1, 0));
    }

    const JSON: &str = r#"{"Time":"2026-01-01T00:00:00Z","Action":"start","Package":"example.com/m"}
{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"example.com/m","Test":"TestA"}
{"Time":"2026-01-01T00:00:00Z","Action":"output","Package":"example.com/m","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Time":"2026-01-01T00:00:00Z","Action":"pass","Package":"example.com/m","Test":"TestA","Elapsed":0}
{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"example.com/m","Test":"TestB"}
{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"example.com/m","Test":"TestB/x"}
{"Time":"2026-01-01T00:00:00Z","Action":"fail","Package":"example.com/m","Test":"TestB/x","Elapsed":0}
{"Time":"2026-01-01T00:00:00Z","Action":"fail","Package":"example.com/m","Test":"TestB","Elapsed":0}
{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"example.com/m","Test":"TestC"}
{"Time":"2026-01-01T00:00:00Z","Action":"skip","Package":"example.com/m","Test":"TestC","Elapsed":0}
{"Time":"2026-01-01T00:00:00Z","Action":"output","Package":"example.com/m","Output":"FAIL\n"}
{"Time":"2026-01-01T00:00:00Z","Action":"fail","Package":"example.com/m","Elapsed":0.01}
{"Time":"2026-01-01T00:00:00Z","Action":"start","Package":"example.com/n"}
{"Time":"2026-01-01T00:00:00Z","Action":"run","Package":"example.com/n","Test":"TestA"}
{"Time":"2026-01-01T00:00:00Z","Action":"pass","Package":"example.com/n","Test":"TestA","Elapsed":0}
{"Time":"2026-01-01T00:00:00Z","Action":"pass","Package":"example.com/n","Elapsed":0.01}
"#;

    #[test]
    fn json_events() {
        let f = only(Framework::GoTest, JSON).unwrap();
        // The `output` events' text is not counted a second time.
        assert_eq!(f.parsed.counts, counts(5, 2, 2, 0, 1));
        assert_eq!(f.summary_at, Some(15));
        assert_eq!(f.parsed.failed_ids(), vec!["TestB/x", "TestB"]);
    }

    #[test]
    fn json_package_failures() {
        let log = r#"{"Action":"run","Package":"m","Test":"TestA"}
{"Action":"output","Package":"m","Test":"TestA","Output":"panic: boom\n"}
{"Action":"fail","Package":"m","Elapsed":0.01}
{"Action":"fail","Package":"b","Elapsed":0,"FailedBuild":"b [b.test]"}
"#;
        let p = only(Framework::GoTest, log).unwrap().parsed;
        assert_eq!(p.counts, counts(2, 0, 0, 2, 0));
        assert_eq!(p.failed_ids(), vec!["TestA", "b"]);

        // Older go: the build failure is text beside the events.
        let log = "{\"Action\":\"pass\",\"Package\":\"n\",\"Test\":\"TestA\"}\n{\"Action\":\"pass\",\"Package\":\"n\"}\nFAIL\tm [build failed]\n";
        let f = only(Framework::GoTest, log).unwrap();
        assert_eq!(f.parsed.counts, counts(2, 1, 0, 1, 0));
        assert_eq!(f.summary_at, Some(2));
    }

    #[test]
    fn lookalike_lines_are_not_package_lines() {
        assert_eq!(package_line("ok then we go"), None);
        assert_eq!(package_line("FAIL: something broke"), None);
        assert_eq!(package_line("ok  \tpkg\t0.1s"), Some((true, "pkg")));
        assert_eq!(
            package_line("FAIL\tpkg [setup failed]"),
            Some((false, "pkg"))
        );
        assert_eq!(result_line("--- PASS: "), None);
        assert_eq!(result_line("--- DONE: TestA"), None);
    }
}
