//! What the judge needs from a case: the test command and its time budget.

use std::time::Duration;

use super::schema::{Manifest, TestManifest};

/// The judge budget before any widening.
pub const DEFAULT_JUDGE_TIMEOUT: Duration = Duration::from_secs(600);
/// Sanity cap on a widened judge budget (7 days).
pub const MAX_JUDGE_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

impl TestManifest {
    /// Expands `{test_files}` (space-joined `<tests_root>/<file>`, each
    /// shell-quoted when needed) and `{test_dir}` (`<tests_root>/tests`,
    /// the published judge's value: the folder the test files are in) in
    /// one pass; other braces are left as they are. An empty `tests_root`
    /// gives the relative form (`tests/a.py`, `tests`), as published test
    /// manifests freeze it in `test_command`.
    pub fn expand_command(&self, template: &str, tests_root: &str) -> String {
        let base = tests_root.trim_end_matches('/');
        let files = self
            .test_files
            .iter()
            .map(|f| {
                if tests_root.is_empty() {
                    shell_quote(f.as_str())
                } else {
                    shell_quote(&format!("{base}/{f}"))
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        let dir = if tests_root.is_empty() {
            "tests".to_string()
        } else {
            shell_quote(&format!("{base}/tests"))
        };
        let mut out = String::with_capacity(template.len() + files.len());
        let mut rest = template;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            if let Some(t) = tail.strip_prefix("{test_files}") {
                out.push_str(&files);
                rest = t;
            } else if let Some(t) = tail.strip_prefix("{test_dir}") {
                out.push_str(&dir);
                rest = t;
            } else {
                out.push('{');
                rest = &tail[1..];
            }
        }
        out.push_str(rest);
        out
    }
}

impl Manifest {
    /// The judge budget: 600 s, widened (never narrowed) by
    /// `judge_timeout_sec`, or by 2 x `suite_wall_seconds` when that is
    /// absent; capped at [`MAX_JUDGE_TIMEOUT`].
    pub fn judge_timeout(&self, tm: &TestManifest) -> Duration {
        let wanted = match tm.judge_timeout_sec {
            Some(s) => Some(s),
            None => tm.suite_wall_seconds.map(|w| 2.0 * w),
        };
        wanted
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.min(MAX_JUDGE_TIMEOUT.as_secs_f64())))
            .map_or(DEFAULT_JUDGE_TIMEOUT, |d| d.max(DEFAULT_JUDGE_TIMEOUT))
    }
}

/// Quotes `s` for a POSIX shell when it holds anything but safe characters.
pub fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tm(extra: serde_json::Value) -> TestManifest {
        let mut v = json!({"schema_version": 3, "test_files": ["tests/test_a.py", "tests/b c.py"]});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    fn manifest() -> Manifest {
        serde_json::from_value(
            json!({"schema_version": 3, "case_id": "c", "status": "released",
            "runner": {"install_command": "", "build_command": "", "test_command_template": ""}}),
        )
        .unwrap()
    }

    #[test]
    fn expands_files_and_dir() {
        let t = tm(json!({}));
        assert_eq!(
            t.expand_command("cd /app && run {test_files} --dir {test_dir} ${HOME} {x}", "/tests/final/"),
            "cd /app && run /tests/final/tests/test_a.py '/tests/final/tests/b c.py' --dir /tests/final/tests ${HOME} {x}"
        );
        assert_eq!(
            t.expand_command("{test_files} {test_dir}", ""),
            "tests/test_a.py 'tests/b c.py' tests"
        );
        assert_eq!(t.expand_command("{test_dir}", "/"), "/tests");
        assert_eq!(
            t.expand_command("no placeholders {", "/t"),
            "no placeholders {"
        );
        // A root containing a placeholder is not expanded again.
        assert_eq!(
            t.expand_command("{test_dir}", "/x{test_files}"),
            "'/x{test_files}/tests'"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a/b.py"), "a/b.py");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(rm)"), "'$(rm)'");
    }

    #[test]
    fn judge_timeout_rule() {
        let m = manifest();
        let s = Duration::from_secs;
        assert_eq!(m.judge_timeout(&tm(json!({}))), s(600));
        assert_eq!(
            m.judge_timeout(&tm(json!({"suite_wall_seconds": 7}))),
            s(600)
        );
        assert_eq!(
            m.judge_timeout(&tm(json!({"suite_wall_seconds": 450}))),
            s(900)
        );
        assert_eq!(
            m.judge_timeout(&tm(json!({"judge_timeout_sec": 900}))),
            s(900)
        );
        // Never narrowed.
        assert_eq!(
            m.judge_timeout(&tm(json!({"judge_timeout_sec": 60}))),
            s(600)
        );
        // judge_timeout_sec wins over suite_wall_seconds, even when smaller.
        assert_eq!(
            m.judge_timeout(&tm(
                json!({"judge_timeout_sec": 700, "suite_wall_seconds": 1000})
            )),
            s(700)
        );
        assert_eq!(
            m.judge_timeout(&tm(json!({"judge_timeout_sec": 1e300}))),
            MAX_JUDGE_TIMEOUT
        );
    }
}
