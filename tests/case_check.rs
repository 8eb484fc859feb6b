//! Case-format validation: the sample cases check clean, each broken
//! fixture yields exactly its one problem, and hostile input never panics.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cbrun::case::{check, load, Problem, Severity};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn fixture(name: &str) -> PathBuf {
    repo("tests/fixtures/cases").join(name)
}

fn errors(p: &[Problem]) -> Vec<&Problem> {
    p.iter().filter(|p| p.severity == Severity::Error).collect()
}

fn lines(p: &[Problem]) -> String {
    p.iter().map(|p| format!("  {p}\n")).collect()
}

// ------------------------------------------------------------ sample cases

#[test]
fn sample_cases_check_clean() {
    for name in ["case001", "case002", "case003"] {
        let problems = check(&repo("cases").join(name));
        assert!(problems.is_empty(), "{name}:\n{}", lines(&problems));
    }
}

#[test]
fn sample_cases_load_for_the_judge() {
    for (name, timeout) in [("case001", 600), ("case002", 600), ("case003", 900)] {
        let case = load(&repo("cases").join(name)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(case.id.as_str(), name);
        assert_eq!(case.judge_timeout(), Duration::from_secs(timeout), "{name}");
        // The frozen test_command is the template expanded at /tests/final.
        assert_eq!(
            case.judge_command("/tests/final"),
            case.test_manifest.test_command
        );
        assert!(case.controls.iter().any(|c| c.name == "reference"));
        assert_eq!(case.acceptance_script.is_some(), name == "case003");
    }
}

#[test]
fn ok_fixture_checks_clean() {
    let problems = check(&fixture("ok-minimal"));
    assert!(problems.is_empty(), "{}", lines(&problems));
    let case = load(&fixture("ok-minimal")).unwrap();
    assert_eq!(case.resources.unwrap().resources[0].id, "tiny-model");
}

// ------------------------------------------------------------ one defect each

/// The fixture yields exactly one problem, an error, at `file`/`field`.
fn exactly(name: &str, file: &str, field: &str, reason: &str) {
    let problems = check(&fixture(name));
    assert_eq!(problems.len(), 1, "{name}:\n{}", lines(&problems));
    let p = &problems[0];
    assert_eq!(p.severity, Severity::Error);
    assert_eq!(p.file, Path::new(file), "{p}");
    assert_eq!(p.field, field, "{p}");
    assert!(p.reason.contains(reason), "{p}");
    let msg = p.to_string();
    assert!(
        msg.starts_with(&format!("{name}/{file}: {field}: ")),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
    // load refuses it with the same one-line message.
    let err = load(&fixture(name)).unwrap_err().to_string();
    assert_eq!(err, msg);
}

#[test]
fn manifest_wrong_schema_version() {
    exactly(
        "bad-manifest",
        "source/manifest.json",
        "schema_version",
        "unsupported schema_version 2 (expected 3)",
    );
}

#[test]
fn recipe_install_command_mismatch() {
    exactly(
        "bad-recipe",
        "source/recipe.lock.json",
        "runner.install_command",
        "differs from source/manifest.json",
    );
}

#[test]
fn denylist_bad_ecosystem() {
    exactly(
        "bad-denylist",
        "source/denylist.json",
        "ecosystem",
        "unknown variant `pipx`",
    );
}

#[test]
fn test_manifest_missing_test_file() {
    exactly(
        "bad-test-manifest",
        "milestones/final/test_manifest.json",
        "test_files[0]",
        "milestones/final/tests/test_tiny.py: missing required file",
    );
}

#[test]
fn expect_reward_two() {
    exactly(
        "bad-expect",
        "controls/reference/expect.json",
        "reward",
        "reward must be 0 or 1, found 2",
    );
}

#[test]
fn resources_bad_sha256() {
    exactly(
        "bad-resources",
        "source/env/resources.json",
        "resources[0].sha256",
        "not a sha256 digest",
    );
}

#[test]
fn malformed_json() {
    exactly(
        "bad-json",
        "source/manifest.json",
        "-",
        "invalid JSON at line 56, column 1: trailing characters",
    );
}

// ------------------------------------------------------------ hostile input

/// A scratch copy of `ok-minimal`, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir()
            .join(format!("cbrun-case-check-{}-{tag}", std::process::id()))
            .join("case");
        let _ = fs::remove_dir_all(dir.parent().unwrap());
        copy_dir(&fixture("ok-minimal"), &dir);
        Scratch(dir)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    fn write(&self, rel: &str, bytes: &[u8]) {
        fs::write(self.path(rel), bytes).unwrap();
    }

    /// Problems, asserting they include an error at `file`/`field`.
    fn expect_error(&self, file: &str, field: &str, reason: &str) -> Vec<Problem> {
        let problems = check(&self.0);
        let hit = errors(&problems)
            .into_iter()
            .any(|p| p.file == Path::new(file) && p.field == field && p.reason.contains(reason));
        assert!(
            hit,
            "want {file}: {field}: ...{reason}... in\n{}",
            lines(&problems)
        );
        assert!(load(&self.0).is_err());
        problems
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(self.0.parent().unwrap());
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            fs::copy(e.path(), dst).unwrap();
        }
    }
}

const MANIFEST: &str = "source/manifest.json";

#[test]
fn empty_file() {
    let s = Scratch::new("empty");
    s.write(MANIFEST, b"");
    s.expect_error(MANIFEST, "-", "empty file");
}

#[test]
fn array_instead_of_object() {
    let s = Scratch::new("array");
    s.write(MANIFEST, b"[1, 2, 3]");
    s.expect_error(MANIFEST, "-", "expected an object, found an array");
}

#[test]
fn binary_garbage() {
    let s = Scratch::new("garbage");
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for f in [
        MANIFEST,
        "source/recipe.lock.json",
        "milestones/final/test_manifest.json",
        "public/Full_PRD.md",
    ] {
        s.write(f, &garbage);
    }
    s.expect_error(MANIFEST, "-", "invalid JSON at line");
}

#[test]
fn deeply_nested_json() {
    let s = Scratch::new("deep");
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    s.write(MANIFEST, deep.as_bytes());
    s.expect_error(MANIFEST, "-", "recursion limit exceeded");
}

#[test]
fn wrong_types_and_missing_fields() {
    let s = Scratch::new("types");
    s.write(
        MANIFEST,
        br#"{"schema_version": "3", "case_id": 7, "status": "gone", "runner": {"install_command": 1, "future_field": {}}}"#,
    );
    let p = s.expect_error(MANIFEST, "schema_version", "invalid type: string");
    for field in [
        "case_id",
        "status",
        "runner.install_command",
        "runner.build_command",
        "runner.test_command_template",
    ] {
        assert!(
            errors(&p).iter().any(|p| p.field == field),
            "{field} in\n{}",
            lines(&p)
        );
    }
}

#[test]
fn symlinked_test_file_outside_the_case_is_not_followed() {
    let s = Scratch::new("symlink");
    let t = s.path("milestones/final/tests/test_tiny.py");
    fs::remove_file(&t).unwrap();
    symlink("/etc/passwd", &t).unwrap();
    s.expect_error(
        "milestones/final/test_manifest.json",
        "test_files[0]",
        "resolves outside the case folder",
    );
}

#[test]
fn symlinked_public_doc_outside_the_case_is_not_read() {
    let s = Scratch::new("public-symlink");
    let prd = s.path("public/Full_PRD.md");
    fs::remove_file(&prd).unwrap();
    symlink("/etc/hostname", &prd).unwrap();
    s.expect_error(
        "public/Full_PRD.md",
        "-",
        "resolves outside the case folder",
    );
}

#[test]
fn fifo_is_not_read() {
    let s = Scratch::new("fifo");
    let p = s.path(MANIFEST);
    fs::remove_file(&p).unwrap();
    let ok = std::process::Command::new("mkfifo")
        .arg(&p)
        .status()
        .unwrap();
    assert!(ok.success());
    s.expect_error(MANIFEST, "-", "not a regular file");
}

#[test]
fn missing_required_files() {
    let s = Scratch::new("missing");
    fs::remove_file(s.path("public/Interface_Contract.md")).unwrap();
    fs::remove_dir_all(s.path("milestones/final/tests")).unwrap();
    s.expect_error("public/Interface_Contract.md", "-", "missing required file");
    s.expect_error("milestones/final/tests", "-", "missing required directory");
    fs::remove_file(s.path("source/recipe.lock.json")).unwrap();
    s.expect_error("source/recipe.lock.json", "-", "missing required file");
}

/// The published runner treats the denylist as private and many published
/// cases ship without one: a warning, and the case bans nothing.
#[test]
fn a_missing_denylist_is_a_warning_and_bans_nothing() {
    let s = Scratch::new("no-denylist");
    fs::remove_file(s.path("source/denylist.json")).unwrap();
    let problems = check(&s.0);
    assert!(errors(&problems).is_empty(), "{}", lines(&problems));
    assert!(
        problems
            .iter()
            .any(|p| p.file == Path::new("source/denylist.json")
                && p.severity == Severity::Warning
                && p.reason.contains("no install or import is banned")),
        "{}",
        lines(&problems)
    );
    let case = load(&s.0).unwrap();
    assert!(!case.has_denylist);
    assert!(case.denylist.install_ban.is_empty() && case.denylist.import_ban.is_empty());
    assert_eq!(case.denylist.ecosystem, None);
    // A denylist that is there but broken is still an error.
    s.write("source/denylist.json", b"{");
    s.expect_error("source/denylist.json", "-", "invalid JSON");
}

#[test]
fn leaks_into_public_are_errors() {
    let s = Scratch::new("leak");
    s.write("public/Full_PRD.md", b"# PRD\nsee tests/test_tiny.py\n");
    s.write("public/notes.md", b"# CBRUN-CANARY-fixture\n");
    s.expect_error(
        "public/Full_PRD.md",
        "-",
        "mentions hidden test file test_tiny.py",
    );
    s.expect_error("public/notes.md", "-", "canary CBRUN-CANARY-fixture");
    symlink(
        "../milestones/final/tests/test_tiny.py",
        s.path("public/x.md"),
    )
    .unwrap();
    s.expect_error("public/x.md", "-", "symlink into milestones/");
}

#[test]
fn cross_file_rules() {
    let s = Scratch::new("cross");
    let tm_path = "milestones/final/test_manifest.json";
    let mut tm: serde_json::Value =
        serde_json::from_slice(&fs::read(s.path(tm_path)).unwrap()).unwrap();
    tm["test_command_template"] = "python3 -m unittest discover".into();
    tm["execution_groups"][0]["test_files"] = serde_json::json!(["tests/other.py"]);
    tm["support_files"] = serde_json::json!(["../escape.py"]);
    s.write(tm_path, &serde_json::to_vec(&tm).unwrap());
    s.write(
        "source/denylist.json",
        br#"{"schema_version": 1, "case_id": "other", "ecosystem": "npm"}"#,
    );
    s.write(
        "controls/reference/expect.json",
        br#"{"reward": 1, "must_fail_tests": "x"}"#,
    );
    fs::remove_dir_all(s.path("controls/reference/app")).unwrap();
    s.expect_error(tm_path, "support_files[0]", "must not contain `..`");
    s.write(
        tm_path,
        &serde_json::to_vec(&{
            tm["support_files"] = serde_json::json!([]);
            tm
        })
        .unwrap(),
    );
    s.expect_error(
        tm_path,
        "test_command_template",
        "neither {test_files} nor {test_dir}",
    );
    s.expect_error(
        tm_path,
        "execution_groups[0].test_files[0]",
        "not listed in test_files",
    );
    s.expect_error(
        "source/denylist.json",
        "case_id",
        "differs from source/manifest.json",
    );
    s.expect_error(
        "controls/reference/expect.json",
        "must_fail_tests",
        "expected an array, found a string",
    );
    s.expect_error("controls/reference/app", "-", "missing required directory");
}
