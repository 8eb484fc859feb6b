//! Per-file structural checks: walk each document field by field (precise
//! reports), then deserialise it into its typed form from [`schema`].

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::fields::{join, kind, Doc, Presence::*};
use super::schema::*;

type Obj = Map<String, Value>;

pub(crate) fn manifest(d: &mut Doc, v: &Value) -> Option<Manifest> {
    let before = d.errors();
    let m = d.object(v, "")?;
    d.schema_version(m, MANIFEST_SCHEMA);
    d.field::<CaseId>(m, "", "case_id", Required);
    // Only the "full" published manifests name the upstream repository.
    for key in ["repo_slug", "repository_url", "commit"] {
        d.field::<String>(m, "", key, Optional);
    }
    d.list::<String>(m, "", "sensitive_terms", Optional);
    d.lenient::<InitMetadata>(m, "", "init_metadata");
    d.lenient::<HardwareRequirements>(m, "", "hardware_requirements");
    if d.field::<Status>(m, "", "status", Documented) == Some(Status::Draft) {
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
    d.field::<String>(r, p, "language_label", Documented);
    for key in ["repo_warm_command", "env_probe_command"] {
        d.field::<String>(r, p, key, Optional);
    }
    for key in ["install_command", "build_command", "test_command_template"] {
        d.field::<String>(r, p, key, Required);
    }
    d.field::<RelPath>(r, p, "workdir", Documented);
    d.list::<String>(r, p, "test_file_patterns", Optional);
    d.list::<String>(r, p, "source_file_patterns", Optional);
    judge_bans(d, r, p);
    if d.field::<Option<JudgeProfile>>(r, p, "judge_profile", Optional)
        .flatten()
        == Some(JudgeProfile::Cow)
    {
        d.warn(
            "runner.judge_profile",
            "`cow` needs a btrfs scratch filesystem at /cbrun-cow (CAP_SYS_ADMIN and loop \
             devices in the judge) that cbrun cannot provide: judging this case will fail",
        );
    }
    environment_checks(d, r, p);
}

/// A list of ban names, or one comma-separated string of them.
fn judge_bans(d: &mut Doc, r: &Obj, p: &str) {
    match r.get("judge_bans") {
        None | Some(Value::Array(_)) => {
            d.list::<JudgeBan>(r, p, "judge_bans", Optional);
        }
        Some(Value::String(s)) => {
            for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let v = Value::String(name.to_owned());
                d.value::<JudgeBan>(&v, "runner.judge_bans");
            }
        }
        Some(other) => d.error(
            "runner.judge_bans",
            &format!(
                "expected an array or a comma-separated string, found {}",
                kind(other)
            ),
        ),
    }
}

/// The published runner's rules: a list; each entry a non-empty `name`
/// (unique) and `command`; `phase` solve|judge|both (default both);
/// `timeout_sec` a number in (0, 300] (default 30).
fn environment_checks(d: &mut Doc, r: &Obj, p: &str) {
    let mut names = BTreeSet::new();
    for (at, c) in d.objects(r, p, "environment_checks", Optional) {
        if let Some(name) = d.field::<String>(c, &at, "name", Required) {
            if name.trim().is_empty() {
                d.error(&format!("{at}.name"), "must not be empty");
            } else if !names.insert(name.clone()) {
                d.error(
                    &format!("{at}.name"),
                    &format!("duplicate check name {name:?}"),
                );
            }
        }
        if d.field::<String>(c, &at, "command", Required)
            .is_some_and(|s| s.trim().is_empty())
        {
            d.error(&format!("{at}.command"), "must not be empty");
        }
        d.field::<Phase>(c, &at, "phase", Optional);
        if let Some(t) = d.field::<f64>(c, &at, "timeout_sec", Optional) {
            if !(t > 0.0 && t <= MAX_ENV_CHECK_TIMEOUT_SEC) {
                d.error(
                    &format!("{at}.timeout_sec"),
                    &format!("must be in (0, {MAX_ENV_CHECK_TIMEOUT_SEC}] seconds, found {t}"),
                );
            }
        }
    }
}

pub(crate) fn recipe(d: &mut Doc, v: &Value) -> Option<Recipe> {
    let before = d.errors();
    let m = d.object(v, "")?;
    d.schema_version_in(m, RECIPE_SCHEMAS);
    d.field::<CaseId>(m, "", "case_id", Required);
    // v2 recipes and some v1 ones carry no frozen_at.
    d.field::<String>(m, "", "frozen_at", Optional);
    d.field::<String>(m, "", "base_image", Documented);
    d.field::<bool>(m, "", "public", Optional);
    if let Some(res) = d.object_field(m, "", "resolved", Optional) {
        for (eco, pins) in res {
            let at = join("resolved", eco);
            if let Some(pins) = d.object(pins, &at) {
                for (name, version) in pins {
                    d.value::<String>(version, &join(&at, name));
                }
            }
        }
    }
    if let Some(r) = d.object_field(m, "", "runner", Required) {
        d.field::<String>(r, "runner", "docker_image", Optional);
        d.field::<String>(r, "runner", "install_command", Required);
        d.field::<String>(r, "runner", "build_command", Required);
    }
    d.lenient::<SourceImage>(m, "", "source_image");
    d.lenient::<RepoPin>(m, "", "repo");
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
    for (at, e) in d.objects(m, "", "runtime_equivalents", Optional) {
        for key in ["import_root", "runtime", "evidence"] {
            d.field::<String>(e, &at, key, Optional);
        }
    }
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
    execution_groups(d, m);
    d.lenient::<ExecutionPolicy>(m, "", "execution_policy");
    if let Some(net) = m
        .get("execution_policy")
        .and_then(|p| p.get("network"))
        .and_then(Value::as_str)
    {
        if net != "none" {
            d.error(
                "execution_policy.network",
                &format!("must be \"none\" (the judge has no network), found {net:?}"),
            );
        }
    }
    d.seconds(m, "", "suite_wall_seconds");
    d.seconds(m, "", "judge_timeout_sec");
    d.lenient::<MeasuredOn>(m, "", "suite_wall_measured_on");
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
    d.field::<String>(m, "", "framework_label", Optional);
    if let Some(subs) = d.list::<String>(m, "", "judge_substrates", Optional) {
        if !subs.is_empty() {
            d.warn(
                "judge_substrates",
                &format!(
                    "cbrun's judge provides no substrates ({}): tests that need them will fail",
                    subs.join(", ")
                ),
            );
        }
    }
    d.finish(v, before)
}

/// A list of `{feature_ids, test_files, test_command}`, or a map from
/// feature id to a list of files.
fn execution_groups(d: &mut Doc, m: &Obj) {
    match m.get("execution_groups") {
        None | Some(Value::Array(_)) => {
            for (at, g) in d.objects(m, "", "execution_groups", Optional) {
                d.list::<String>(g, &at, "feature_ids", Optional);
                d.list::<RelPath>(g, &at, "test_files", Required);
                d.field::<String>(g, &at, "test_command", Optional);
            }
        }
        Some(Value::Object(groups)) => {
            for id in groups.keys() {
                d.list::<RelPath>(groups, "execution_groups", id, Required);
            }
        }
        Some(other) => d.error(
            "execution_groups",
            &format!("expected an array or an object, found {}", kind(other)),
        ),
    }
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
                                     {"name": "n", "command": "true", "phase": "never", "timeout_sec": 5},
                                     {"name": "z", "command": "true", "timeout_sec": 0},
                                     {"name": "", "command": " "},
                                     {"name": "s", "command": "true", "timeout_sec": "30"}]}});
        let (m, msgs) = run(manifest, v);
        assert!(m.is_none());
        let errs: Vec<&String> = msgs
            .iter()
            .filter(|m| !m.contains("missing (defaulted)"))
            .collect();
        assert_eq!(errs.len(), 8, "{errs:#?}");
        assert!(errs[0].contains("runner.judge_bans[1]: unknown variant `telepathy`"));
        assert!(errs[1].contains("runner.environment_checks[0].timeout_sec: must be in (0, 300]"));
        assert!(errs[2].contains("runner.environment_checks[1].name: duplicate check name \"n\""));
        assert!(errs[3].contains("runner.environment_checks[1].phase: unknown variant `never`"));
        assert!(errs[4].contains(
            "runner.environment_checks[2].timeout_sec: must be in (0, 300] seconds, found 0"
        ));
        assert!(errs[5].contains("runner.environment_checks[3].name: must not be empty"));
        assert!(errs[6].contains("runner.environment_checks[3].command: must not be empty"));
        assert!(errs[7].contains("runner.environment_checks[4].timeout_sec: invalid type: string"));
    }

    #[test]
    fn env_check_defaults_and_floats() {
        let v = json!({"schema_version": 3, "case_id": "c", "status": "released",
            "runner": {"schema_version": 1, "language_label": "x", "workdir": ".",
              "install_command": "", "build_command": "", "test_command_template": "t",
              "judge_bans": "socket, subprocess,",
              "environment_checks": [{"name": "a", "command": "true"},
                                     {"name": "b", "command": "true", "phase": "judge", "timeout_sec": 2.5, "note": 1},
                                     {"name": "c", "command": "true", "timeout_sec": 300}]}});
        let (m, msgs) = run(manifest, v);
        assert!(msgs.is_empty(), "{msgs:?}");
        let r = m.unwrap().runner;
        assert_eq!(r.judge_bans.0, [JudgeBan::Socket, JudgeBan::Subprocess]);
        let c = &r.environment_checks;
        assert_eq!((c[0].phase, c[0].timeout_sec), (Phase::Both, 30.0));
        assert_eq!((c[1].phase, c[1].timeout_sec), (Phase::Judge, 2.5));
        assert_eq!(c[1].extra["note"], json!(1));
        assert_eq!(c[1].timeout(), std::time::Duration::from_millis(2500));
        assert_eq!(c[2].timeout_sec, 300.0);
        let bad = json!({"schema_version": 3, "case_id": "c", "status": "released",
            "runner": {"install_command": "", "build_command": "", "test_command_template": "t",
              "judge_bans": "socket,telepathy"}});
        let (_, msgs) = run(manifest, bad);
        assert!(
            msgs.iter()
                .any(|m| m.contains("runner.judge_bans: unknown variant `telepathy`")),
            "{msgs:?}"
        );
        let bad = json!({"schema_version": 3, "case_id": "c", "status": "released",
            "runner": {"install_command": "", "build_command": "", "test_command_template": "t",
              "judge_bans": 7}});
        let (_, msgs) = run(manifest, bad);
        assert!(
            msgs.iter()
                .any(|m| m
                    .contains("runner.judge_bans: expected an array or a comma-separated string")),
            "{msgs:?}"
        );
    }

    #[test]
    fn published_manifest_shapes() {
        // Minimal: no sensitive_terms, init_metadata or repository identity.
        let minimal = json!({"schema_version": 3, "case_id": "c", "status": "released",
            "runner": {"schema_version": 1, "language_label": "Python", "install_command": "i",
              "build_command": "", "test_command_template": "t {test_files}", "workdir": "."}});
        let (m, msgs) = run(manifest, minimal);
        assert!(msgs.is_empty(), "{msgs:?}");
        assert!(m.unwrap().init_metadata.is_none());
        // tech_stack as a string, extra runner keys, a draft status.
        let v = json!({"schema_version": 3, "case_id": "c", "status": "draft",
            "sensitive_terms": ["x"],
            "init_metadata": {"suggested_neutral_name": "n", "tech_stack": "Pure Python (pytest)"},
            "hardware_requirements": {"schema_version": 1, "summary": "s", "profiles": [{"id": "cpu", "mandatory": "yes"}]},
            "runner": {"schema_version": 1, "language_label": "Python", "install_command": "i",
              "build_command": "true", "test_command_template": "t {test_files}", "workdir": ".",
              "workspace_install_command": "npm ci", "prepare_command": "make prep", "docker_image": ""}});
        let (m, msgs) = run(manifest, v.clone());
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs[0].contains("hardware_requirements: not in the documented shape"));
        assert!(msgs[1].contains("status: case is a draft"));
        let m = m.unwrap();
        let meta = m.init_metadata.as_ref().unwrap().typed().unwrap();
        assert_eq!(
            meta.tech_stack,
            TechStack::Text("Pure Python (pytest)".into())
        );
        assert!(matches!(m.hardware_requirements, Some(Lenient::Raw(_))));
        assert_eq!(m.runner.extra["workspace_install_command"], json!("npm ci"));
        // Round trip: what was read is written back.
        let back = serde_json::to_value(&m).unwrap();
        assert_eq!(back, v);
        let list = json!({"schema_version": 3, "case_id": "c", "status": "released",
            "init_metadata": {"tech_stack": ["a", "b"]},
            "runner": {"schema_version": 1, "language_label": "x", "workdir": ".",
              "install_command": "", "build_command": "", "test_command_template": "t"}});
        let (m, _) = run(manifest, list);
        let m = m.unwrap();
        let meta = m.init_metadata.as_ref().unwrap().typed().unwrap();
        assert_eq!(meta.tech_stack.items(), ["a", "b"]);
    }

    #[test]
    fn recipe_versions() {
        let v2 = json!({"schema_version": 2, "case_id": "c", "base_image": "codingbench-base/ubuntu:24.04",
            "resolved": {"python": {"pytest": "8.4.1", "pyyaml": "6.0.3"}, "apt": {}},
            "public": true, "runner": {"install_command": "i", "build_command": "true"}});
        let (r, msgs) = run(recipe, v2.clone());
        assert!(msgs.is_empty(), "{msgs:?}");
        let r = r.unwrap();
        assert!(r.public);
        let pins: Vec<_> = r.resolved.as_ref().unwrap().python().collect();
        assert_eq!(pins, [("pytest", "8.4.1"), ("pyyaml", "6.0.3")]);
        assert_eq!(r.resolved.as_ref().unwrap().apt().count(), 0);
        assert_eq!(serde_json::to_value(&r).unwrap(), v2);
        let v1_public = json!({"schema_version": 1, "case_id": "c", "base_image": "b", "public": true,
            "runner": {"install_command": "i", "build_command": ""}});
        let (r, msgs) = run(recipe, v1_public);
        assert!(msgs.is_empty() && r.is_some(), "{msgs:?}");
        let v1_full = json!({"schema_version": 1, "case_id": "c", "frozen_at": "2026-09-05T00:00:00Z", "base_image": "b",
            "runner": {"docker_image": "", "install_command": "i", "build_command": ""},
            "source_image": {"tag": "t", "kind": "checkpoint", "digest": "sha256:00"},
            "repo": {"path": "repos/x", "commit": "c", "tree_sha256": "t", "container_path": "/opt/codingbench/repo"}});
        let (r, msgs) = run(recipe, v1_full);
        assert!(msgs.is_empty(), "{msgs:?}");
        assert_eq!(
            r.unwrap().source_image.unwrap().typed().unwrap().kind,
            "checkpoint"
        );
        let bad = json!({"schema_version": 3, "case_id": "c", "base_image": "b",
            "resolved": {"python": {"pytest": 8}, "apt": []},
            "runner": {"install_command": "i", "build_command": ""}});
        let (r, msgs) = run(recipe, bad);
        assert!(r.is_none());
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(msgs[0].contains("schema_version: unsupported schema_version 3 (expected 1 or 2)"));
        assert!(msgs[1].contains("resolved.apt: expected an object, found an array"));
        assert!(msgs[2].contains("resolved.python.pytest: invalid type: integer"));
    }

    #[test]
    fn test_manifest_group_shapes() {
        let obj = json!({"schema_version": 3, "step": "final", "workdir": ".",
            "test_files": ["tests/F01_acceptance.py", "tests/_harness.py", "tests/conftest.py"],
            "test_command": "python3 -m pytest tests/F01_acceptance.py tests/_harness.py tests/conftest.py",
            "test_command_template": "python3 -m pytest {test_files}",
            "execution_groups": {"F00": [], "F01": ["tests/F01_acceptance.py"]}});
        let (t, msgs) = run(test_manifest, obj.clone());
        assert!(msgs.is_empty(), "{msgs:?}");
        let t = t.unwrap();
        let groups = t.execution_groups.groups();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1].0, "execution_groups.F01");
        assert_eq!(serde_json::to_value(&t).unwrap(), obj);
        let bad = json!({"schema_version": 3, "step": "final", "test_files": ["tests/a.py"],
            "test_command": "", "test_command_template": "",
            "execution_groups": {"F01": "tests/a.py"}, "execution_policy": {"network": "host"}});
        let (_, msgs) = run(test_manifest, bad);
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs[0].contains("execution_groups.F01: expected an array, found a string"));
        assert!(msgs[1].contains("execution_policy.network: must be \"none\""));
        let bad = json!({"schema_version": 3, "step": "final", "test_files": ["tests/a.py"],
            "test_command": "", "test_command_template": "", "execution_groups": 3,
            "suite_wall_measured_on": "x86_64", "judge_substrates": ["cow_fs"]});
        let (t, msgs) = run(test_manifest, bad);
        assert!(t.is_none());
        assert!(
            msgs[0].contains("execution_groups: expected an array or an object, found a number"),
            "{msgs:?}"
        );
        assert!(
            msgs[1].contains("suite_wall_measured_on: not in the documented shape"),
            "{msgs:?}"
        );
        assert!(
            msgs[2].contains("judge_substrates: cbrun's judge provides no substrates (cow_fs)"),
            "{msgs:?}"
        );
    }

    #[test]
    fn denylist_runtime_equivalents() {
        let v = json!({"schema_version": 1, "case_id": "c", "ecosystem": "source",
            "install_ban": ["libada-dev"], "import_ban": ["ada", "ada/", "ada::", "ada.h"], "notes": "",
            "runtime_equivalents": [{"import_root": "ada", "runtime": "node", "evidence": "e", "extra": true}]});
        let (d, msgs) = run(denylist, v);
        assert!(msgs.is_empty(), "{msgs:?}");
        let d = d.unwrap();
        assert_eq!(d.runtime_equivalents[0].runtime, "node");
        assert_eq!(d.runtime_equivalents[0].extra["extra"], json!(true));
        let bad = json!({"schema_version": 1, "case_id": "c", "ecosystem": "pip",
            "install_ban": [], "import_ban": [], "runtime_equivalents": {"ada": 1}});
        let (_, msgs) = run(denylist, bad);
        assert!(
            msgs[0].contains("runtime_equivalents: expected an array, found an object"),
            "{msgs:?}"
        );
    }

    #[test]
    fn expect_float_rewards() {
        let (e, msgs) = run(expect, json!({"reward": 1.0}));
        assert!(msgs.is_empty());
        assert_eq!(e.unwrap().reward, Reward::One);
        let (e, _) = run(expect, json!({"reward": 0.0, "note": "n"}));
        assert_eq!(e.unwrap().reward, Reward::Zero);
        let (e, msgs) = run(expect, json!({"reward": 0.5}));
        assert!(e.is_none());
        assert!(
            msgs[0].contains("reward must be 0 or 1, found 0.5"),
            "{msgs:?}"
        );
        let (_, msgs) = run(expect, json!({"reward": "1"}));
        assert!(
            msgs[0].contains("reward must be 0 or 1, found \"1\""),
            "{msgs:?}"
        );
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
