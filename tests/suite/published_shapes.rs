//! Cases in every shape the published benchmark ships (see
//! docs/case-format.md), as fixtures of our own under
//! tests/fixtures/cases/pub-*: each checks without errors, loads into the
//! expected typed form, passes `cbrun validate` (its controls against
//! their expect.json) and a replay trial of its reference, as root and as
//! nobody. `case check --run` runs environment checks in the phase each
//! names, and a check cannot see hidden tests from the solve sandbox,
//! write them from the judge sandbox, or reach the network.


use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cbrun::case::{
    check, load, Ecosystem, ExecutionGroups, JudgeBan, Lenient, Phase, Severity, TechStack,
};
use crate::common::*;

const SHAPES: [&str; 6] = [
    "pub-minimal",
    "pub-released",
    "pub-full",
    "pub-groups",
    "pub-support-dir",
    "pub-envchecks",
];
const DEADLINE: Duration = Duration::from_secs(180);

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURES).join("cases").join(name)
}

/// A world-readable copy of fixture cases inside the test's folder (the
/// source tree may not be readable by the unprivileged users).
fn copies(ctx: &Ctx, names: &[&str]) -> Vec<PathBuf> {
    let root = ctx.dir.join("cases");
    fs::create_dir_all(&root).unwrap();
    let out: Vec<PathBuf> = names
        .iter()
        .map(|n| {
            let dst = root.join(n);
            if !dst.exists() {
                let st = Command::new("cp")
                    .arg("-r")
                    .arg(fixture(n))
                    .arg(&dst)
                    .status()
                    .unwrap();
                assert!(st.success());
            }
            dst
        })
        .collect();
    let st = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&root)
        .status()
        .unwrap();
    assert!(st.success());
    out
}

/// Warnings each fixture is expected to have, as (file, field) pairs.
fn expected_warnings(name: &str) -> Vec<(&'static str, &'static str)> {
    const TM: &str = "milestones/final/test_manifest.json";
    match name {
        "pub-minimal" => vec![("source/denylist.json", "-"), (TM, "expected_test_count")],
        "pub-released" | "pub-support-dir" => vec![(TM, "expected_test_count")],
        "pub-full" => vec![
            ("source/manifest.json", "status"),
            (TM, "test_command_template"),
        ],
        "pub-groups" => vec![(TM, "test_command_template"), (TM, "expected_test_count")],
        "pub-envchecks" => vec![],
        other => panic!("no expectations for {other}"),
    }
}

#[test]
fn every_published_shape_checks_with_only_its_expected_warnings() {
    for name in SHAPES {
        let problems = check(&fixture(name));
        let got: Vec<(String, String)> = problems
            .iter()
            .map(|p| {
                assert_eq!(p.severity, Severity::Warning, "{name}: {p}");
                (p.file.display().to_string(), p.field.clone())
            })
            .collect();
        let want: Vec<(String, String)> = expected_warnings(name)
            .into_iter()
            .map(|(f, k)| (f.to_string(), k.to_string()))
            .collect();
        let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(got, want, "{name}:\n{}", lines.join("\n"));
        load(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn each_shape_loads_into_its_typed_form() {
    // Minimal manifest, v1 public recipe, no denylist.
    let c = load(&fixture("pub-minimal")).unwrap();
    assert!(c.manifest.init_metadata.is_none() && c.manifest.sensitive_terms.is_empty());
    assert_eq!(c.recipe.schema_version, 1);
    assert!(c.recipe.public && !c.recipe.frozen_at.is_empty());
    assert!(!c.has_denylist && c.denylist.import_ban.is_empty());
    assert!(matches!(&c.test_manifest.execution_groups, ExecutionGroups::List(l) if l.len() == 2));

    // Released manifest (tech_stack a string), recipe v2 with pins,
    // helpers inside test_files.
    let c = load(&fixture("pub-released")).unwrap();
    let meta = c.manifest.init_metadata.as_ref().unwrap().typed().unwrap();
    assert!(matches!(&meta.tech_stack, TechStack::Text(t) if t.starts_with("Pure Python")));
    assert_eq!(c.recipe.schema_version, 2);
    let pins: Vec<_> = c.recipe.resolved.as_ref().unwrap().python().collect();
    assert!(pins.contains(&("pytest", "7.2.1")), "{pins:?}");
    assert_eq!(c.recipe.resolved.as_ref().unwrap().apt().count(), 1);
    assert!(c.recipe.source_image.is_none() && c.recipe.frozen_at.is_empty());
    assert!(c
        .test_manifest
        .test_files
        .iter()
        .any(|f| f.as_str() == "tests/F01_helpers.py"));
    assert_eq!(c.test_manifest.judge_timeout_sec, Some(5.0));
    assert_eq!(c.judge_timeout(), Duration::from_secs(600));

    // Full manifest: identity, hardware, extra runner keys, judge_bans as a
    // string; recipe v1 full; runtime_equivalents.
    let c = load(&fixture("pub-full")).unwrap();
    assert_eq!(c.manifest.repo_slug, "acme-text/slugmaker");
    assert!(matches!(
        c.manifest.hardware_requirements,
        Some(Lenient::Typed(_))
    ));
    assert_eq!(
        c.manifest.runner.judge_bans.0,
        [JudgeBan::Socket, JudgeBan::Subprocess]
    );
    for k in ["workspace_install_command", "docker_image"] {
        assert!(c.manifest.runner.extra.contains_key(k), "{k}");
    }
    let src = c.recipe.source_image.as_ref().unwrap().typed().unwrap();
    assert_eq!(src.kind, "checkpoint");
    assert_eq!(
        c.recipe
            .repo
            .as_ref()
            .unwrap()
            .typed()
            .unwrap()
            .container_path,
        "/opt/codingbench/repo"
    );
    assert_eq!(c.denylist.runtime_equivalents[0].import_root, "unidecode");
    assert_eq!(c.denylist.ecosystem, Some(Ecosystem::Pip));
    assert_eq!(c.test_manifest.expected_count(), Some(9));
    // The judge runs the test manifest's template, not the runner's.
    assert_eq!(
        c.judge_command("/tests/final"),
        "PYTHONPATH=src python3 -m pytest /tests/final/tests/F01_acceptance.py /tests/final/tests/F02_acceptance.py"
    );

    // Object execution_groups with F00, harness and conftest in test_files.
    let c = load(&fixture("pub-groups")).unwrap();
    match &c.test_manifest.execution_groups {
        ExecutionGroups::ByFeature(m) => {
            assert_eq!(m.keys().collect::<Vec<_>>(), ["F00", "F01", "F02"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(c.test_manifest.support_files.is_empty());
    assert!(c.test_manifest.execution_policy.is_none());
    assert!(c
        .judge_command("/tests/final")
        .ends_with("/tests/final/tests/_harness.py /tests/final/tests/conftest.py"));

    // A directory in support_files; v1 recipe without frozen_at.
    let c = load(&fixture("pub-support-dir")).unwrap();
    assert_eq!(c.test_manifest.support_files[0].as_str(), "tests/fixtures");
    assert!(c.recipe.frozen_at.is_empty() && c.recipe.public);

    // environment_checks with defaulted phase and timeout, a float timeout;
    // {test_dir} is the folder the tests are in.
    let c = load(&fixture("pub-envchecks")).unwrap();
    let checks = &c.manifest.runner.environment_checks;
    assert_eq!(checks.len(), 4);
    assert_eq!(
        (checks[1].phase, checks[1].timeout_sec),
        (Phase::Both, 30.0)
    );
    assert_eq!(
        (checks[2].phase, checks[2].timeout_sec),
        (Phase::Judge, 2.5)
    );
    assert_eq!(checks[3].phase, Phase::Solve);
    assert_eq!(
        c.judge_command("/tests/final"),
        "PYTHONPATH=src python3 -m unittest discover -v -s /tests/final/tests -p 'test_*.py'"
    );
    assert!(c.judge_unsupported().is_none());
}

#[test]
fn case_check_and_validate_pass_as_root_and_nobody() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "shapes-validate");
        let cases = copies(&ctx, &SHAPES);
        let mut args = vec!["case".to_string(), "check".to_string()];
        args.extend(cases.iter().map(|c| c.display().to_string()));
        let run = ctx.spawn_args(&args, &[], None).wait(DEADLINE);
        run.assert_code(0, "case check of the published shapes");
        assert_eq!(
            run.stdout.lines().filter(|l| l.starts_with("ok: ")).count(),
            6,
            "{}",
            run.show()
        );
        assert!(!run.stderr.contains("error:"), "{}", run.show());

        let mut args = vec!["validate".to_string()];
        args.extend(cases.iter().map(|c| c.display().to_string()));
        let run = ctx.spawn_args(&args, &[], None).wait(DEADLINE);
        run.assert_code(0, "validate of the published shapes");
        let rows: Vec<&str> = run
            .stdout
            .lines()
            .filter(|l| l.starts_with("pub-"))
            .collect();
        assert_eq!(rows.len(), 13, "one row per control\n{}", run.show());
        assert!(rows.iter().all(|r| r.ends_with(" ok")), "{}", run.show());
        // The configparser wrapper is caught by the scan of `configparser`.
        assert!(
            rows.iter()
                .any(|r| r.contains("stdlib_wrapper") && r.contains("HIT")),
            "{}",
            run.show()
        );
        ctx.assert_clean("validate of the published shapes");
    }
}

#[test]
fn a_replay_of_each_reference_gets_reward_1_as_root_and_nobody() {
    let counts = [
        ("pub-minimal", 7),
        ("pub-released", 14),
        ("pub-full", 9),
        ("pub-groups", 5),
        ("pub-support-dir", 5),
        ("pub-envchecks", 5),
    ];
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "shapes-trial");
        for (case_dir, (name, count)) in copies(&ctx, &SHAPES).iter().zip(counts) {
            let out = ctx.out.join(name);
            let agent = format!(
                "replay:{}",
                case_dir.join("controls/reference/app").display()
            );
            let args: Vec<String> = [
                "trial",
                case_dir.to_str().unwrap(),
                "--agent",
                &agent,
                "--out",
                out.to_str().unwrap(),
            ]
            .map(str::to_owned)
            .to_vec();
            let run = ctx.spawn_args(&args, &[], None).wait(DEADLINE);
            run.assert_code(0, name);
            let rec: serde_json::Value =
                serde_json::from_str(&fs::read_to_string(out.join("trial.json")).unwrap()).unwrap();
            let show = || format!("{name}\n{}\n{rec:#}", run.show());
            assert_eq!(rec["terminal_status"], "completed", "{}", show());
            assert_eq!(rec["reward"], 1, "{}", show());
            assert_eq!(rec["case_id"], name, "{}", show());
            assert_eq!(rec["test_count"], count, "{}", show());
            assert_eq!(rec["passed"], count, "{}", show());
        }
        ctx.assert_clean("replay trials of the published shapes");
    }
}

/// Lines of `case check --run` output for `case_dir`, without the prefix.
fn results(run: &Run, case_dir: &Path) -> Vec<String> {
    let prefix = format!("{}: ", case_dir.display());
    run.stdout
        .lines()
        .filter_map(|l| {
            let (verdict, rest) = l.split_once(": ")?;
            let rest = rest.strip_prefix(&prefix)?;
            Some(format!("{verdict}: {rest}"))
        })
        .collect()
}

#[test]
fn environment_checks_run_in_their_phase_as_root_and_nobody() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "shapes-envcheck");
        let c = &copies(&ctx, &["pub-envchecks"])[0];
        let run = ctx.cbrun(&["case", "check", "--run", c.to_str().unwrap()]);
        run.assert_code(0, "case check --run");
        let got: Vec<String> = results(&run, c)
            .into_iter()
            .map(|l| l.split(" (").next().unwrap().to_owned())
            .collect();
        assert_eq!(
            got,
            [
                "pass: solve: baseline",
                "pass: solve: python3",
                "pass: solve: stdlib-unittest",
                "pass: solve: workspace-starts-empty",
                "pass: judge: baseline",
                "pass: judge: python3",
                "pass: judge: stdlib-unittest",
                "pass: judge: hidden-tests-mounted",
            ],
            "{}",
            run.show()
        );
        ctx.assert_clean("environment checks");
    }
}

/// The checks of pub-envchecks replaced by `checks`.
fn with_checks(case_dir: &Path, checks: serde_json::Value) {
    let p = case_dir.join("source/manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    m["runner"]["environment_checks"] = checks;
    fs::write(&p, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

#[test]
fn environment_checks_cannot_see_hidden_tests_write_them_or_reach_the_network() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "shapes-envcheck-attacks");
        let c = &copies(&ctx, &["pub-envchecks"])[0];
        let hidden = c.join("milestones/final/tests/test_clamp.py");
        with_checks(
            c,
            serde_json::json!([
                // Solve phase: the hidden tests by their sandbox path and by
                // their host path.
                {"name": "read-hidden", "command": "cat /tests/final/tests/test_clamp.py", "phase": "solve"},
                {"name": "read-hidden-host", "command": format!("cat {}", hidden.display()), "phase": "solve"},
                // Judge phase: tamper with the hidden tests.
                {"name": "write-hidden", "command": "echo x >> /tests/final/tests/test_clamp.py", "phase": "judge"},
                // Either phase: no network but loopback.
                {"name": "network", "command": "exec 3<>/dev/tcp/1.1.1.1/53"},
                {"name": "slow", "command": "sleep 30", "phase": "judge", "timeout_sec": 1.5},
                {"name": "exit-3", "command": "echo failing on purpose >&2; exit 3", "phase": "solve"},
            ]),
        );
        // World-writable on the host: only the read-only bind stands in the way.
        fs::set_permissions(&hidden, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
        let before = fs::read(&hidden).unwrap();
        let run = ctx.spawn_args(
            &["case", "check", "--run", c.to_str().unwrap()].map(str::to_owned),
            &[],
            None,
        );
        let run = run.wait(DEADLINE);
        run.assert_code(1, "case check --run with failing checks");
        let got = results(&run, c);
        let find = |phase: &str, name: &str| -> String {
            got.iter()
                .find(|l| l.contains(&format!(": {phase}: {name}")))
                .unwrap_or_else(|| panic!("{phase} {name} not reported\n{}", run.show()))
                .clone()
        };
        for (phase, name) in [
            ("solve", "read-hidden"),
            ("solve", "read-hidden-host"),
            ("judge", "write-hidden"),
            ("solve", "network"),
            ("judge", "network"),
            ("judge", "slow"),
            ("solve", "exit-3"),
        ] {
            let l = find(phase, name);
            assert!(l.starts_with("FAIL: "), "{l}\n{}", run.show());
        }
        assert!(
            find("solve", "read-hidden").contains("No such file"),
            "{}",
            run.show()
        );
        assert!(
            find("judge", "write-hidden").contains("Read-only file system"),
            "{}",
            run.show()
        );
        assert!(
            find("judge", "slow").contains("timed out after 1.5 s"),
            "{}",
            run.show()
        );
        assert!(
            find("solve", "exit-3").ends_with("exit 3: failing on purpose"),
            "{}",
            run.show()
        );
        // A `judge` check never runs in the solve sandbox and vice versa.
        assert!(!got.iter().any(|l| l.contains(": judge: read-hidden")));
        assert!(!got.iter().any(|l| l.contains(": solve: write-hidden")));
        // The baselines still pass.
        assert!(got.iter().any(|l| l.starts_with("pass: solve: baseline")));
        assert!(got.iter().any(|l| l.starts_with("pass: judge: baseline")));
        assert_eq!(fs::read(&hidden).unwrap(), before, "hidden test modified");
        // The slow check was stopped at its own timeout.
        assert!(run.elapsed < Duration::from_secs(20), "{}", run.show());
        ctx.assert_clean("failing environment checks");
    }
}

#[test]
fn a_cow_profile_is_reported_by_check_and_fails_the_judge_readiness_run() {
    let ctx = Ctx::new(Who::Root, "shapes-cow");
    let c = &copies(&ctx, &["pub-envchecks"])[0];
    let p = c.join("source/manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    m["runner"]["judge_profile"] = "cow".into();
    fs::write(&p, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    // Well-formed: a warning at check time.
    let run = ctx.cbrun(&["case", "check", c.to_str().unwrap()]);
    run.assert_code(0, "case check of a cow case");
    assert!(
        run.stderr
            .contains("runner.judge_profile: `cow` needs a btrfs scratch filesystem"),
        "{}",
        run.show()
    );
    let case = load(c).unwrap();
    assert!(case
        .judge_unsupported()
        .unwrap()
        .contains("judge_profile \"cow\""));
    // --run: the judge phase cannot be made ready.
    let run = ctx.cbrun(&["case", "check", "--run", c.to_str().unwrap()]);
    run.assert_code(1, "case check --run of a cow case");
    assert!(
        results(&run, c)
            .iter()
            .any(|l| l.starts_with("FAIL: judge: judge_profile (cbrun): ")),
        "{}",
        run.show()
    );
    ctx.assert_clean("cow");
}

#[test]
fn run_flags_are_checked() {
    let ctx = Ctx::new(Who::Root, "shapes-flags");
    let c = &copies(&ctx, &["pub-envchecks"])[0];
    let run = ctx.cbrun(&["case", "check", "--image", "x", c.to_str().unwrap()]);
    run.assert_code(125, "--image without --run");
    assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.show());
    let run = ctx.cbrun(&[
        "case",
        "check",
        "--run",
        "--image",
        "no-such-image:never",
        c.to_str().unwrap(),
    ]);
    run.assert_code(125, "--run --image missing");
    assert!(run.stderr.contains("no-such-image"), "{}", run.show());
    let run = ctx.cbrun(&[
        "case",
        "check",
        "--run",
        "--rootfs",
        "/nonexistent/root",
        c.to_str().unwrap(),
    ]);
    assert_ne!(run.code, Some(0), "{}", run.show());
    assert!(run.stdout.contains("FAIL: "), "{}", run.show());
}
