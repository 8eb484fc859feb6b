//! Per-file structural checks: walk each document field by field (precise
//! reports), then deserialise it into its typed form from [`schema`].

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::fields::{Doc, Presence::*};
use super::schema::*;

type Obj = Map<String, Value>;

pub(crate) fn manifest(d: &mut Doc, v: &Value) -> Option<Manifest> {
    let before = d.errors();
    let m = d.object(v, "")?;
    d.schema_version(m, MANIFEST_SCHEMA);
    d.field::<CaseId>(m, "", "case_id", Required);
    for key in ["repo_slug", "repository_url", "commit"] {
        d.field::<String>(m, "", key, Documented);
    }
    d.list::<String>(m, "", "sensitive_terms", Documented);
    d.field::<InitMetadata>(m, "", "init_metadata", Documented);
    d.field::<HardwareRequirements>(m, "", "hardware_requirements", Documented);
    if d.field::<Status>(m, "", "status", Required) == Some(Status::Draft) {
        d.warn("status", "case is a draft");
    }
    if let Some(r) = d.object_field(m, "", "runner", Required) {
        runner(d, r);
    }
    d.finish(v, before)
}

fn runner(d: &mut Doc, r: &Obj) {
    let p = "runner";
    d.field::<Option<u64>>(r, p, "schema_version", Documented);
    for key in ["language_label", "repo_warm_command", "env_probe_command"] {
        d.field::<String>(r, p, key, Documented);
    }
    for key in ["install_command", "build_command", "test_command_template"] {
        d.field::<String>(r, p, key, Required);
    }
    d.field::<RelPath>(r, p, "workdir", Documented);
    d.list::<String>(r, p, "test_file_patterns", Documented);
    d.list::<String>(r, p, "source_file_patterns", Documented);
    d.list::<JudgeBan>(r, p, "judge_bans", Optional);
    d.field::<Option<JudgeProfile>>(r, p, "judge_profile", Optional);
    for (at, c) in d.objects(r, p, "environment_checks", Optional) {
        d.field::<String>(c, &at, "name", Required);
        if d.field::<String>(c, &at, "command", Required)
            .is_some_and(|s| s.trim().is_empty())
        {
            d.error(&format!("{at}.command"), "must not be empty");
        }
        d.field::<Phase>(c, &at, "phase", Required);
        if let Some(t) = d.field::<u64>(c, &at, "timeout_sec", Required) {
            if t > MAX_ENV_CHECK_TIMEOUT_SEC {
                d.error(
                    &format!("{at}.timeout_sec"),
                    &format!("must be at most {MAX_ENV_CHECK_TIMEOUT_SEC}, found {t}"),
                );
            } else if t == 0 {
                d.warn(
                    &format!("{at}.timeout_sec"),
                    "0 seconds: the check cannot pass",
                );
            }
        }
    }
}

pub(crate) fn recipe(d: &mut Doc, v: &Value) -> Option<Recipe> {
    let before = d.errors();
    let m = d.object(v, "")?;
    d.schema_version(m, RECIPE_SCHEMA);
    d.field::<CaseId>(m, "", "case_id", Required);
    d.field::<String>(m, "", "frozen_at", Documented);
    d.field::<String>(m, "", "base_image", Documented);
    if let Some(r) = d.object_field(m, "", "runner", Required) {
        d.field::<String>(r, "runner", "docker_image", Documented);
        d.field::<String>(r, "runner", "install_command", Required);
        d.field::<String>(r, "runner", "build_command", Required);
    }
    d.field::<SourceImage>(m, "", "source_image", Documented);
    d.field::<RepoPin>(m, "", "repo", Documented);
    d.finish(v, before)
}

pub(crate) fn denylist(d: &mut Doc, v: &Value) -> Option<Denylist> {
    let before = d.errors();
    let m = d.object(v, "")?;
    d.schema_version(m, DENYLIST_SCHEMA);
    d.field::<CaseId>(m, "", "case_id", Required);
    d.field::<Ecosystem>(m, "", "ecosystem", Required);
    for key in ["install_ban", "import_ban"] {
        if let Some(names) = d.list::<String>(m, "", key, Documented) {
            for (i, n) in names.iter().enumerate() {
                if n.trim().is_empty() {
                    d.error(&format!("{key}[{i}]"), "empty name");
                }
            }
        }
    }
    d.field::<String>(m, "", "notes", Optional);
    d.finish(v, before)
}

pub(crate) fn test_manifest(d: &mut Doc, v: &Value) -> Option<TestManifest> {
    let before = d.errors();
    let m = d.object(v, "")?;
    d.schema_version(m, TEST_MANIFEST_SCHEMA);
    if let Some(step) = d.field::<String>(m, "", "step", Documented) {
        if step != "final" {
            d.warn("step", &format!("expected \"final\", found {step:?}"));
        }
    }
    let tests = d.list::<RelPath>(m, "", "test_files", Required);
    if tests.as_ref().is_some_and(Vec::is_empty) {
        d.error("test_files", "must name at least one test file");
    }
    let support = d.list::<RelPath>(m, "", "support_files", Optional);
    unique(
        d,
        "test_files",
        tests.iter().chain(support.iter()).flatten(),
    );
    d.field::<String>(m, "", "test_command", Documented);
    d.field::<String>(m, "", "test_command_template", Documented);
    d.field::<RelPath>(m, "", "workdir", Optional);
    for (at, g) in d.objects(m, "", "execution_groups", Optional) {
        d.list::<String>(g, &at, "feature_ids", Optional);
        d.list::<RelPath>(g, &at, "test_files", Required);
        d.field::<String>(g, &at, "test_command", Optional);
    }
    if let Some(p) = d.field::<Option<ExecutionPolicy>>(m, "", "execution_policy", Optional) {
        let net = p.and_then(|p| p.network);
        if net.as_deref().is_some_and(|n| n != "none") {
            d.error("execution_policy.network", "must be \"none\"");
        }
    }
    d.seconds(m, "", "suite_wall_seconds");
    d.seconds(m, "", "judge_timeout_sec");
    d.field::<Option<MeasuredOn>>(m, "", "suite_wall_measured_on", Optional);
    let expected = d.count(m, "", "expected_test_count");
    let count = d.count(m, "", "test_count");
    if let (Some(a), Some(b)) = (expected, count) {
        if a != b {
            d.error(
                "test_count",
                &format!("disagrees with expected_test_count ({b} != {a})"),
            );
        }
    }
    d.field::<String>(m, "", "framework_label", Documented);
    d.finish(v, before)
}

/// Reports paths named twice across test_files/support_files.
fn unique<'a>(d: &mut Doc, field: &str, paths: impl Iterator<Item = &'a RelPath>) {
    let mut seen = BTreeSet::new();
    for p in paths {
        if !seen.insert(p.as_str()) {
            d.error(field, &format!("{p} is listed more than once"));
        }
    }
}

pub(crate) fn resources(d: &mut Doc, v: &Value) -> Option<Resources> {
    let before = d.errors();
    let m = d.object(v, "")?;
    d.field::<String>(m, "", "source_revision", Documented);
    d.field::<AbsPath>(m, "", "destination", Required);
    let mut ids = BTreeSet::new();
    for (at, r) in d.objects(m, "", "resources", Required) {
        if let Some(id) = d.field::<String>(r, &at, "id", Required) {
            if id.trim().is_empty() {
                d.error(&format!("{at}.id"), "must not be empty");
            } else if !ids.insert(id.clone()) {
                d.error(&format!("{at}.id"), &format!("duplicate id {id:?}"));
            }
        }
        if let Some(url) = d.field::<String>(r, &at, "url", Required) {
            if url.trim().is_empty() {
                d.error(&format!("{at}.url"), "must not be empty");
            } else if !["https://", "http://", "file://", "s3://", "gs://"]
                .iter()
                .any(|s| url.starts_with(s))
            {
                d.warn(
                    &format!("{at}.url"),
                    &format!("unusual URL scheme: {url:?}"),
                );
            }
        }
        d.field::<Sha256>(r, &at, "sha256", Required);
        d.field::<Option<u64>>(r, &at, "size", Documented);
        d.field::<Option<u64>>(r, &at, "unpacked_size", Optional);
        d.field::<Option<RelPath>>(r, &at, "directory", Documented);
        d.field::<Option<AbsPath>>(r, &at, "destination", Optional);
    }
    d.finish(v, before)
}

pub(crate) fn expect(d: &mut Doc, v: &Value) -> Option<Expect> {
    let before = d.errors();
    let m = d.object(v, "")?;
    let reward = d.field::<Reward>(m, "", "reward", Optional);
    d.field::<String>(m, "", "note", Optional);
    let must_fail = d.list::<String>(m, "", "must_fail_tests", Optional);
    if reward == Some(Reward::One) && must_fail.is_some_and(|f| !f.is_empty()) {
        d.warn(
            "must_fail_tests",
            "reward 1 contradicts tests that must fail",
        );
    }
    d.finish(v, before)
}

#[cfg(test)]
mod tests {
    use super::super::problem::Sink;
    use super::*;
    use serde_json::json;

    fn run<T>(f: fn(&mut Doc, &Value) -> Option<T>, v: Value) -> (Option<T>, Vec<String>) {
        let mut sink = Sink::new("c".into());
        let t = f(&mut Doc::new(&mut sink, "x.json"), &v);
        let msgs = sink.problems.iter().map(|p| p.to_string()).collect();
        (t, msgs)
    }

    #[test]
    fn expect_reward_two() {
        let (e, msgs) = run(expect, json!({"reward": 2}));
        assert!(e.is_none());
        assert_eq!(msgs, ["c/x.json: reward: reward must be 0 or 1, found 2"]);
        let (e, msgs) = run(expect, json!({"note": "n", "future": true}));
        assert_eq!(e.unwrap().reward, Reward::Zero);
        assert!(msgs.is_empty());
        let (_, msgs) = run(expect, json!({"must_fail_tests": ["a", 3]}));
        assert_eq!(msgs.len(), 1);
        assert!(
            msgs[0].starts_with("c/x.json: must_fail_tests[1]: invalid type"),
            "{msgs:?}"
        );
    }

    #[test]
    fn denylist_enum_and_version() {
        let (d, msgs) = run(
            denylist,
            json!({"schema_version": 2, "case_id": "c", "ecosystem": "pipx"}),
        );
        assert!(d.is_none());
        assert!(
            msgs[0].contains("schema_version: unsupported schema_version 2"),
            "{msgs:?}"
        );
        assert!(
            msgs[1].contains("ecosystem: unknown variant `pipx`"),
            "{msgs:?}"
        );
    }

    #[test]
    fn env_check_timeout_and_phase() {
        let v = json!({"schema_version": 3, "case_id": "c", "status": "released",
            "runner": {"install_command": "", "build_command": "", "test_command_template": "t",
              "judge_bans": ["socket", "telepathy"],
              "environment_checks": [{"name": "n", "command": "true", "phase": "both", "timeout_sec": 301},
                                     {"name": "n", "command": "true", "phase": "never", "timeout_sec": 5}]}});
        let (m, msgs) = run(manifest, v);
        assert!(m.is_none());
        let errs: Vec<&String> = msgs
            .iter()
            .filter(|m| !m.contains("missing (defaulted)"))
            .collect();
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].contains("runner.judge_bans[1]: unknown variant `telepathy`"));
        assert!(errs[1].contains("runner.environment_checks[0].timeout_sec: must be at most 300"));
        assert!(errs[2].contains("runner.environment_checks[1].phase: unknown variant `never`"));
    }

    #[test]
    fn test_manifest_counts() {
        let v =
            json!({"schema_version": 3, "test_files": ["tests/a.py"], "expected_test_count": -1});
        let (_, msgs) = run(test_manifest, v);
        assert!(msgs
            .iter()
            .any(|m| m.contains("expected_test_count: must be a non-negative integer")));
        let v = json!({"schema_version": 3, "test_files": ["../a.py", "/b"]});
        let (_, msgs) = run(test_manifest, v);
        assert!(msgs
            .iter()
            .any(|m| m.contains("test_files[0]: path \"../a.py\" must not contain `..`")));
        assert!(msgs
            .iter()
            .any(|m| m.contains("test_files[1]: path \"/b\" must be relative")));
    }
}
