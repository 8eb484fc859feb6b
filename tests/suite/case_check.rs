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
        Scratch::of("ok-minimal", tag)
    }

    /// A scratch copy of fixture `name`.
    fn of(name: &str, tag: &str) -> Scratch {
        let dir = std::env::temp_dir()
            .join(format!("cbrun-case-check-{}-{tag}", std::process::id()))
            .join(name);
        let _ = fs::remove_dir_all(dir.parent().unwrap());
        copy_dir(&fixture(name), &dir);
        Scratch(dir)
    }

    fn json(&self, rel: &str) -> serde_json::Value {
        serde_json::from_slice(&fs::read(self.path(rel)).unwrap()).unwrap()
    }

    fn set_json(&self, rel: &str, v: &serde_json::Value) {
        self.write(rel, &serde_json::to_vec_pretty(v).unwrap());
    }

    /// Problems, asserting there is no error.
    fn expect_no_error(&self) -> Vec<Problem> {
        let problems = check(&self.0);
        assert!(errors(&problems).is_empty(), "{}", lines(&problems));
        assert!(load(&self.0).is_ok());
        problems
    }

    /// Asserts a warning at `file`/`field` whose reason contains `reason`.
    fn expect_warning(&self, file: &str, field: &str, reason: &str) -> Vec<Problem> {
        let problems = self.expect_no_error();
        let hit = problems.iter().any(|p| {
            p.severity == Severity::Warning
                && p.file == Path::new(file)
                && p.field == field
                && p.reason.contains(reason)
        });
        assert!(
            hit,
            "want warning {file}: {field}: ...{reason}... in\n{}",
            lines(&problems)
        );
        problems
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

// ------------------------------------------------------------ published variants

const TM: &str = "milestones/final/test_manifest.json";
const RECIPE: &str = "source/recipe.lock.json";

/// `sensitive_terms` must not reach the PRD, the contract or the build
/// command; matching ignores case and counts only whole identifiers.
#[test]
fn sensitive_terms_in_what_the_agent_reads() {
    let s = Scratch::new("terms");
    let mut m = s.json(MANIFEST);
    m["sensitive_terms"] = serde_json::json!(["ada", "Acme Tools", "acme.example/x"]);
    s.set_json(MANIFEST, &m);
    // Inside longer identifiers: no match.
    s.write(
        "public/Full_PRD.md",
        b"# PRD\nmetadata, adapter, ada_url, ada2, acme.example/xy\n",
    );
    s.expect_no_error();
    s.write("public/Full_PRD.md", b"# PRD\nLike ADA, and (ada).\n");
    s.write(
        "public/Interface_Contract.md",
        b"see acme.example/x and ACME   tools, acme tools\n",
    );
    s.write(
        "public/Hardware_Requirements.md",
        b"Runs where Acme Tools run.\n",
    );
    let p = s.expect_error(
        "public/Full_PRD.md",
        "-",
        "mentions the sensitive term \"ada\" (2 times)",
    );
    s.expect_error(
        "public/Interface_Contract.md",
        "-",
        "mentions the sensitive term \"acme.example/x\"",
    );
    s.expect_error(
        "public/Interface_Contract.md",
        "-",
        "mentions the sensitive term \"Acme Tools\"",
    );
    // The published check does not scan the hardware document: a warning.
    assert!(p
        .iter()
        .any(|p| p.file == Path::new("public/Hardware_Requirements.md")
            && p.severity == Severity::Warning
            && p.reason.contains("\"Acme Tools\"")));
    // The build command (the agent runs it), with the recipe agreeing.
    let s = Scratch::new("terms-build");
    let mut m = s.json(MANIFEST);
    m["sensitive_terms"] = serde_json::json!(["adalib"]);
    m["runner"]["build_command"] = "make ADALIB=1 && cp adalib.so /tmp".into();
    s.set_json(MANIFEST, &m);
    let mut r = s.json(RECIPE);
    r["runner"]["build_command"] = m["runner"]["build_command"].clone();
    s.set_json(RECIPE, &r);
    s.expect_error(
        MANIFEST,
        "runner.build_command",
        "mentions the sensitive term \"adalib\" (2 times)",
    );
}

#[test]
fn frozen_test_command_forms() {
    let s = Scratch::new("test-command");
    let mut tm = s.json(TM);
    // Published: the template expanded with relative paths.
    tm["test_command"] = "cd /app && python3 -m unittest tests/test_tiny.py".into();
    s.set_json(TM, &tm);
    let p = s.expect_no_error();
    assert!(p.is_empty(), "{}", lines(&p));
    tm["test_command"] = "cd /app && python3 -m unittest  /tests/final/tests/test_tiny.py".into();
    s.set_json(TM, &tm);
    assert!(s.expect_no_error().is_empty());
    // Something else: the published judge would run another command.
    tm["test_command"] = "python3 -m pytest tests/test_tiny.py".into();
    s.set_json(TM, &tm);
    s.expect_warning(TM, "test_command", "is not the template the judge runs");
    // With no template in the test manifest, the runner's is the one.
    tm.as_object_mut().unwrap().remove("test_command_template");
    tm["test_command"] = "cd /app && python3 -m unittest tests/test_tiny.py".into();
    s.set_json(TM, &tm);
    let p = s.expect_warning(TM, "test_command_template", "missing (defaulted)");
    assert_eq!(p.len(), 1, "{}", lines(&p));
}

/// Published cases 003, 008, 027 and 030 have a runner template that is
/// not their test manifest's; the published judge, like cbrun's, runs the
/// test manifest's, so this is a warning.
#[test]
fn runner_and_test_manifest_templates_may_differ() {
    let s = Scratch::new("templates");
    let mut m = s.json(MANIFEST);
    m["runner"]["test_command_template"] = "ctest --output-on-failure --test-dir {test_dir}".into();
    s.set_json(MANIFEST, &m);
    s.expect_warning(
        TM,
        "test_command_template",
        "differs from source/manifest.json runner.test_command_template; the judge runs this one",
    );
    let case = load(&s.0).unwrap();
    assert_eq!(
        case.judge_command("/tests/final"),
        "cd /app && python3 -m unittest /tests/final/tests/test_tiny.py"
    );
    // Whitespace alone is no difference.
    m["runner"]["test_command_template"] = "cd /app &&  python3 -m unittest {test_files}".into();
    s.set_json(MANIFEST, &m);
    assert!(s.expect_no_error().is_empty());
}

#[test]
fn support_files_may_be_directories_test_files_may_not() {
    let s = Scratch::new("support-dir");
    fs::create_dir_all(s.path("milestones/final/data/sub")).unwrap();
    s.write("milestones/final/data/sub/sample.bin", b"\x00\x01");
    let mut tm = s.json(TM);
    tm["support_files"] = serde_json::json!(["data"]);
    s.set_json(TM, &tm);
    assert!(s.expect_no_error().is_empty());
    // The directory's name is no leak, its files' names are.
    s.write("public/Full_PRD.md", b"# PRD\nthe data folder\n");
    assert!(s.expect_no_error().is_empty());
    s.write("public/Full_PRD.md", b"# PRD\nsee sample.bin\n");
    s.expect_error(
        "public/Full_PRD.md",
        "-",
        "mentions hidden test file sample.bin",
    );
    s.write("public/Full_PRD.md", b"# PRD\n");
    tm["test_files"] = serde_json::json!(["data"]);
    tm["support_files"] = serde_json::json!([]);
    tm["execution_groups"] = serde_json::json!([]);
    s.set_json(TM, &tm);
    s.expect_error(TM, "test_files[0]", "expected a file, found a directory");
}

#[test]
fn object_execution_groups_name_listed_files() {
    let s = Scratch::new("groups");
    let mut tm = s.json(TM);
    tm["execution_groups"] = serde_json::json!({"F00": [], "F01": ["tests/test_tiny.py"]});
    s.set_json(TM, &tm);
    assert!(s.expect_no_error().is_empty());
    tm["execution_groups"] = serde_json::json!({"F01": ["tests/test_tiny.py", "tests/gone.py"]});
    s.set_json(TM, &tm);
    s.expect_error(
        TM,
        "execution_groups.F01[1]",
        "tests/gone.py is not listed in test_files",
    );
}

#[test]
fn optional_fields_are_tolerated_and_unknown_ones_kept() {
    let s = Scratch::new("optional");
    let mut m = s.json(MANIFEST);
    let o = m.as_object_mut().unwrap();
    for k in [
        "repo_slug",
        "repository_url",
        "commit",
        "sensitive_terms",
        "init_metadata",
        "hardware_requirements",
    ] {
        o.remove(k);
    }
    let r = m["runner"].as_object_mut().unwrap();
    for k in [
        "env_probe_command",
        "repo_warm_command",
        "test_file_patterns",
        "source_file_patterns",
        "judge_profile",
        "environment_checks",
    ] {
        r.remove(k);
    }
    r.insert("workspace_install_command".into(), "npm ci".into());
    r.insert("future_knob".into(), serde_json::json!({"a": [1, 2]}));
    m["also_new"] = true.into();
    s.set_json(MANIFEST, &m);
    let mut rc = s.json(RECIPE);
    let o = rc.as_object_mut().unwrap();
    for k in ["frozen_at", "source_image", "repo"] {
        o.remove(k);
    }
    o.insert("public".into(), true.into());
    rc["runner"].as_object_mut().unwrap().remove("docker_image");
    s.set_json(RECIPE, &rc);
    let mut tm = s.json(TM);
    let o = tm.as_object_mut().unwrap();
    for k in [
        "support_files",
        "execution_groups",
        "execution_policy",
        "suite_wall_seconds",
        "suite_wall_measured_on",
        "framework_label",
    ] {
        o.remove(k);
    }
    s.set_json(TM, &tm);
    let p = s.expect_no_error();
    assert!(p.is_empty(), "{}", lines(&p));
    let case = load(&s.0).unwrap();
    assert_eq!(case.manifest.extra["also_new"], true);
    assert_eq!(
        case.manifest.runner.extra["future_knob"],
        serde_json::json!({"a": [1, 2]})
    );
    let back = serde_json::to_value(&case.manifest).unwrap();
    assert_eq!(back["runner"]["workspace_install_command"], "npm ci");
    // status is in every published manifest: its absence is a warning.
    m.as_object_mut().unwrap().remove("status");
    s.set_json(MANIFEST, &m);
    s.expect_warning(MANIFEST, "status", "missing (defaulted)");
}

#[test]
fn judge_profiles_and_substrates_cbrun_cannot_provide_are_warnings() {
    let s = Scratch::new("cow");
    let mut m = s.json(MANIFEST);
    m["runner"]["judge_profile"] = "cow".into();
    s.set_json(MANIFEST, &m);
    s.expect_warning(MANIFEST, "runner.judge_profile", "cbrun cannot provide");
    let why = load(&s.0).unwrap().judge_unsupported().unwrap();
    assert!(
        why.starts_with("source/manifest.json: runner.judge_profile"),
        "{why}"
    );
    m["runner"]["judge_profile"] = "zfs".into();
    s.set_json(MANIFEST, &m);
    s.expect_error(MANIFEST, "runner.judge_profile", "unknown variant `zfs`");
    m["runner"]["judge_profile"] = "standard".into();
    s.set_json(MANIFEST, &m);
    let mut tm = s.json(TM);
    tm["judge_substrates"] = serde_json::json!(["cow_fs"]);
    s.set_json(TM, &tm);
    s.expect_warning(TM, "judge_substrates", "provides no substrates (cow_fs)");
    assert!(load(&s.0)
        .unwrap()
        .judge_unsupported()
        .unwrap()
        .contains("cow_fs"));
}

#[test]
fn release_rules_beyond_the_schemas() {
    let s = Scratch::new("release");
    // Commands that agree but for surrounding blanks are equal.
    let mut r = s.json(RECIPE);
    r["runner"]["install_command"] = " python3 --version\n".into();
    s.set_json(RECIPE, &r);
    assert!(s.expect_no_error().is_empty());
    // The operator cache without resources.json.
    let mut m = s.json(MANIFEST);
    m["runner"]["install_command"] = "cp -a /opt/cb-cache/data/models/. /opt/models".into();
    s.set_json(MANIFEST, &m);
    r["runner"]["install_command"] = m["runner"]["install_command"].clone();
    s.set_json(RECIPE, &r);
    // ok-minimal has a resources.json: fine.
    assert!(s.expect_no_error().is_empty());
    fs::remove_file(s.path("source/env/resources.json")).unwrap();
    s.expect_warning(MANIFEST, "runner.install_command", "reads /opt/cb-cache");
    // Banning infrastructure rejects every submission.
    let mut d = s.json("source/denylist.json");
    d["import_ban"] = serde_json::json!(["semver", "numpy", "tomli/", "ada::", "ada.h"]);
    s.set_json("source/denylist.json", &d);
    s.expect_error(
        "source/denylist.json",
        "import_ban[1]",
        "\"numpy\" is infrastructure",
    );
    d["import_ban"] = serde_json::json!(["semver", "tomli/", "ada::", "ada.h"]);
    d["runtime_equivalents"] =
        serde_json::json!([{"import_root": "ada", "runtime": "wasm", "evidence": "e"}]);
    s.set_json("source/denylist.json", &d);
    let p = s.expect_warning(
        "source/denylist.json",
        "runtime_equivalents[0].import_root",
        "\"ada\" is not in import_ban",
    );
    assert!(p
        .iter()
        .any(|p| p.field == "runtime_equivalents[0].runtime"));
}

/// Every published-shape fixture reads into its types and writes back
/// with every value it held (only empty values may be dropped, and
/// defaulted fields may appear).
#[test]
fn published_shape_files_round_trip() {
    use cbrun::case::{Denylist, Manifest, Recipe, TestManifest};
    fn covers(orig: &serde_json::Value, back: &serde_json::Value, at: &str) {
        use serde_json::Value::*;
        match (orig, back) {
            (Object(o), Object(b)) => {
                for (k, v) in o {
                    let empty = matches!(v, String(s) if s.is_empty())
                        || matches!(v, Array(a) if a.is_empty())
                        || matches!(v, Object(m) if m.is_empty())
                        || matches!(v, Bool(false));
                    match b.get(k) {
                        Some(bv) => covers(v, bv, &format!("{at}.{k}")),
                        None => assert!(empty, "{at}.{k} was dropped"),
                    }
                }
            }
            (Array(o), Array(b)) => {
                assert_eq!(o.len(), b.len(), "{at}");
                for (i, (x, y)) in o.iter().zip(b).enumerate() {
                    covers(x, y, &format!("{at}[{i}]"));
                }
            }
            (Number(x), Number(y)) => assert_eq!(x.as_f64(), y.as_f64(), "{at}"),
            (x, y) => assert_eq!(x, y, "{at}"),
        }
    }
    fn trip<T: serde::de::DeserializeOwned + serde::Serialize>(p: &Path) {
        let orig: serde_json::Value = serde_json::from_slice(&fs::read(p).unwrap()).unwrap();
        let t: T = serde_json::from_value(orig.clone()).unwrap();
        covers(
            &orig,
            &serde_json::to_value(&t).unwrap(),
            &p.display().to_string(),
        );
    }
    for e in fs::read_dir(fixture("")).unwrap() {
        let dir = e.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("pub-") {
            continue;
        }
        trip::<Manifest>(&dir.join(MANIFEST));
        trip::<Recipe>(&dir.join(RECIPE));
        trip::<TestManifest>(&dir.join(TM));
        if dir.join("source/denylist.json").exists() {
            trip::<Denylist>(&dir.join("source/denylist.json"));
        }
    }
}
