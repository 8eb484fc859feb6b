//! JUnit XML reports (pytest `--junitxml`, Maven Surefire, gotestsum,
//! jest-junit, nextest, ctest `--output-junit`, ...).
//!
//! ```xml
//! <testsuites>
//!   <testsuite name="calc" tests="3">
//!     <testcase classname="tests.test_calc.TestAdd" name="test_ints"/>
//!     <testcase classname="tests.test_calc.TestAdd" name="test_floats">
//!       <failure message="assert 0.3 == 0.30000000000000004"/>
//!     </testcase>
//!     <testcase classname="calc::tests" name="slow"><skipped/></testcase>
//!   </testsuite>
//! </testsuites>
//! ```
//!
//! Every `<testcase>` at any depth is one test; the suites' own `tests=`,
//! `failures=` attributes are not trusted, since writers disagree on them.
//! A case with an `<error>` child is an error, with a `<failure>` failed,
//! with `<skipped>` skipped, else passed (the worst child wins). Ids are
//! `classname.name`, or `classname::name` when either part already uses
//! `::` (Rust, C++); just `name` without a classname.

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use thiserror::Error;

use super::{Counts, Framework, Parsed, TestOutcome, TestResult};

/// Why a JUnit report could not be read.
#[derive(Debug, Error, PartialEq)]
pub enum JunitError {
    #[error("malformed XML at byte {position}: {message}")]
    Xml { position: u64, message: String },
    #[error("not a JUnit report: root element is <{0}>, not <testsuites> or <testsuite>")]
    NotJunit(String),
    #[error("not a JUnit report: no root element")]
    Empty,
    #[error("truncated JUnit report: {0} element(s) left open")]
    Truncated(usize),
}

struct Case {
    id: String,
    outcome: TestOutcome,
}

fn attr(e: &BytesStart<'_>, key: &[u8]) -> Option<String> {
    e.attributes().flatten().find_map(|a| {
        (a.key.local_name().as_ref() == key).then(|| match a.unescape_value() {
            Ok(v) => v.into_owned(),
            Err(_) => String::from_utf8_lossy(&a.value).into_owned(),
        })
    })
}

fn case_id(e: &BytesStart<'_>) -> String {
    let name = attr(e, b"name").unwrap_or_default();
    let class = attr(e, b"classname").unwrap_or_default();
    let (name, class) = (name.trim(), class.trim());
    match (class.is_empty(), name.is_empty()) {
        (true, _) => name.to_string(),
        (false, true) => class.to_string(),
        (false, false) if class.contains("::") || name.contains("::") => {
            format!("{class}::{name}")
        }
        (false, false) => format!("{class}.{name}"),
    }
}

fn worse(a: TestOutcome, b: TestOutcome) -> TestOutcome {
    if b.severity() > a.severity() {
        b
    } else {
        a
    }
}

/// Read a JUnit XML report.
pub fn parse_junit(xml: &str) -> Result<Parsed, JunitError> {
    let mut reader = Reader::from_str(xml);
    let mut tests: Vec<TestResult> = Vec::new();
    let mut current: Option<Case> = None;
    // Depth of open elements, and the depth the open testcase sits at.
    let mut depth = 0usize;
    let mut case_depth = 0usize;
    let mut root_seen = false;

    loop {
        let event = reader.read_event().map_err(|e| JunitError::Xml {
            position: reader.error_position(),
            message: e.to_string(),
        })?;
        let (e, empty) = match &event {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(e) => {
                depth = depth.saturating_sub(1);
                if e.local_name().as_ref() == b"testcase" && depth + 1 == case_depth {
                    if let Some(c) = current.take() {
                        tests.push(TestResult::new(c.id, c.outcome));
                    }
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let local = e.local_name();
        let name = local.as_ref();
        if !root_seen {
            root_seen = true;
            if name != b"testsuites" && name != b"testsuite" {
                return Err(JunitError::NotJunit(
                    String::from_utf8_lossy(name).into_owned(),
                ));
            }
        }
        if !empty {
            depth += 1;
        }
        match name {
            b"testcase" => {
                // A testcase never closed before the next: keep it.
                if let Some(c) = current.take() {
                    tests.push(TestResult::new(c.id, c.outcome));
                }
                let case = Case {
                    id: case_id(e),
                    outcome: TestOutcome::Passed,
                };
                if empty {
                    tests.push(TestResult::new(case.id, case.outcome));
                } else {
                    case_depth = depth;
                    current = Some(case);
                }
            }
            b"failure" | b"error" | b"skipped" => {
                if let Some(c) = current.as_mut() {
                    let o = match name {
                        b"failure" => TestOutcome::Failed,
                        b"error" => TestOutcome::Error,
                        _ => TestOutcome::Skipped,
                    };
                    c.outcome = worse(c.outcome, o);
                }
            }
            _ => {}
        }
    }
    if !root_seen {
        return Err(JunitError::Empty);
    }
    if depth > 0 {
        return Err(JunitError::Truncated(depth));
    }
    Ok(Parsed {
        framework: Framework::Junit,
        counts: Counts::from_tests(&tests),
        tests,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    const PYTEST: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests">
  <testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5" time="0.05">
    <testcase classname="tests.test_x" name="test_a" time="0.001"/>
    <testcase classname="tests.test_x" name="test_b" time="0.001">
      <failure message="assert 1 == 2">def test_b():
&gt;       assert 1 == 2</failure>
    </testcase>
    <testcase classname="tests.test_x" name="test_c" time="0.001">
      <error message="failed on setup with &quot;RuntimeError: boom&quot;">boom</error>
    </testcase>
    <testcase classname="tests.test_x" name="test_d" time="0.000">
      <skipped type="pytest.skip" message="not today">tests/test_x.py:16: not today</skipped>
    </testcase>
    <testcase classname="tests.test_x.TestK" name="test_m[a &amp; b]" time="0.001">
      <system-out>PASSED</system-out>
    </testcase>
  </testsuite>
</testsuites>
"#;

    #[test]
    fn pytest_report() {
        let p = parse_junit(PYTEST).unwrap();
        assert_eq!(p.framework, Framework::Junit);
        assert_eq!(p.counts, counts(5, 2, 1, 1, 1));
        assert_eq!(
            p.tests,
            vec![
                TestResult::new("tests.test_x.test_a", TestOutcome::Passed),
                TestResult::new("tests.test_x.test_b", TestOutcome::Failed),
                TestResult::new("tests.test_x.test_c", TestOutcome::Error),
                TestResult::new("tests.test_x.test_d", TestOutcome::Skipped),
                TestResult::new("tests.test_x.TestK.test_m[a & b]", TestOutcome::Passed),
            ]
        );
        assert_eq!(
            p.failed_ids(),
            vec!["tests.test_x.test_b", "tests.test_x.test_c"]
        );
    }

    #[test]
    fn nested_suites_rust_ids_and_single_suite_root() {
        let xml = r#"<testsuites>
  <testsuite name="calc">
    <testsuite name="calc::unit">
      <testcase classname="calc" name="tests::adds"/>
      <testcase classname="calc" name="tests::divides"><failure type="panic"/><system-err>x</system-err></testcase>
    </testsuite>
    <testcase name="bare"><skipped/></testcase>
    <testcase classname="only.class"/>
  </testsuite>
</testsuites>"#;
        let p = parse_junit(xml).unwrap();
        assert_eq!(p.counts, counts(4, 2, 1, 0, 1));
        assert_eq!(p.tests[0].id, "calc::tests::adds");
        assert_eq!(p.failed_ids(), vec!["calc::tests::divides"]);
        assert_eq!(p.tests[2].id, "bare");
        assert_eq!(p.tests[3].id, "only.class");

        let single = r#"<testsuite name="go" tests="1"><testcase classname="example.com/m" name="TestA"><error message="panic"/><failure/></testcase></testsuite>"#;
        let p = parse_junit(single).unwrap();
        assert_eq!(p.counts, counts(1, 0, 0, 1, 0));
        assert_eq!(p.tests[0].id, "example.com/m.TestA");
    }

    #[test]
    fn empty_suite_is_zero_tests() {
        let p = parse_junit("<testsuites/>").unwrap();
        assert_eq!(p.counts, counts(0, 0, 0, 0, 0));
        assert!(p.tests.is_empty());
    }

    #[test]
    fn bad_reports() {
        assert!(matches!(
            parse_junit("<testsuite><testcase></testsuite>"),
            Err(JunitError::Xml { .. })
        ));
        assert_eq!(
            parse_junit("<html><body/></html>"),
            Err(JunitError::NotJunit("html".to_string()))
        );
        assert_eq!(parse_junit(""), Err(JunitError::Empty));
        assert_eq!(parse_junit("not xml at all"), Err(JunitError::Empty));
        assert_eq!(
            parse_junit("<testsuite><testcase name=\"a\"/>"),
            Err(JunitError::Truncated(1))
        );
        let e = parse_junit("<testsuite><testcase></testsuite>").unwrap_err();
        assert!(e.to_string().starts_with("malformed XML at byte"), "{e}");
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = Rng(42);
        let pieces = [
            "<testsuites>",
            "</testsuites>",
            "<testsuite>",
            "</testsuite>",
            "<testcase name=\"a\">",
            "</testcase>",
            "<testcase/>",
            "<failure/>",
            "<error>",
            "</error>",
            "<skipped/>",
            "&amp;",
            "&bogus;",
            "<![CDATA[x]]>",
            "<!--c-->",
            "<?xml version=\"1.0\"?>",
            "name='x",
            "\"",
            "<",
            ">",
            "é",
        ];
        for _ in 0..500 {
            let mut s = String::new();
            for _ in 0..rng.below(20) {
                s.push_str(pieces[rng.below(pieces.len())]);
            }
            if let Ok(p) = parse_junit(&s) {
                assert!(p.counts.is_consistent());
                assert_eq!(p.counts.total, p.tests.len() as u64);
            }
        }
    }
}
