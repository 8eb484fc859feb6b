//! `cbrun run`, driven through the real binary: a matrix of the sample
//! controls at two jobs (as root and as nobody with delegated cgroups),
//! SIGKILL of the whole run mid-way and `--resume` (nothing run twice),
//! interrupts (one: trials recorded `interrupted`, exit 130; two: workers
//! killed, leftovers removed), another plan refused, claims honoured and
//! stale ones broken, infrastructure retries keeping earlier attempts,
//! and the progress display under a pseudo-terminal and off one.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

pub(super) const RUN_DEADLINE: Duration = Duration::from_secs(240);
const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// World-readable copies of the sample cases in the test's folder.
pub(super) fn cases(ctx: &Ctx, names: &[&str]) -> Vec<PathBuf> {
    let root = ctx.dir.join("cases");
    for n in names {
        let dst = root.join(n);
        if dst.exists() {
            continue;
        }
        fs::create_dir_all(&root).unwrap();
        let st = Command::new("cp")
            .arg("-r")
            .arg(Path::new(REPO).join("cases").join(n))
            .arg(&dst)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let st = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&root)
        .status()
        .unwrap();
    assert!(st.success());
    names.iter().map(|n| root.join(n)).collect()
}

/// An agent spec file readable by every test user.
pub(super) fn spec(ctx: &Ctx, name: &str, body: &str) -> String {
    let p = ctx.dir.join(format!("{name}.toml"));
    fs::write(&p, format!("name = \"{name}\"\n{body}")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p.display().to_string()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

pub(super) fn run_args(cases: &[PathBuf], agents: &[&str], rest: &[&str]) -> Vec<String> {
    let mut a = vec!["run".to_string()];
    a.extend(cases.iter().map(|c| c.display().to_string()));
    for g in agents {
        a.push("--agent".into());
        a.push(g.to_string());
    }
    a.extend(rest.iter().map(|s| s.to_string()));
    a
}

pub(super) fn json(p: &Path) -> Value {
    let text = fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", p.display()))
}

pub(super) fn plan(dir: &Path) -> toml::Value {
    toml::from_str(&fs::read_to_string(dir.join("plan.toml")).unwrap()).unwrap()
}

/// (case, config, repeat) -> the latest attempt's record.
pub(super) fn records(dir: &Path) -> BTreeMap<(String, String, u64), Value> {
    let mut out = BTreeMap::new();
    let Ok(cases) = fs::read_dir(dir.join("trials")) else {
        return out;
    };
    for c in cases.flatten() {
        for k in fs::read_dir(c.path()).unwrap().flatten() {
            for r in fs::read_dir(k.path()).unwrap().flatten() {
                let name = r.file_name().to_string_lossy().into_owned();
                let Ok(repeat) = name.parse::<u64>() else {
                    continue;
                };
                let f = r.path().join("trial.json");
                if f.exists() {
                    out.insert(
                        (
                            c.file_name().to_string_lossy().into_owned(),
                            k.file_name().to_string_lossy().into_owned(),
                            repeat,
                        ),
                        json(&f),
                    );
                }
            }
        }
    }
    out
}

pub(super) fn results(dir: &Path) -> Vec<Value> {
    fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("results.jsonl: {e}: {l}")))
        .collect()
}

/// Files under `trials/` whose name ends with `suffix`.
fn leftovers(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(cases) = fs::read_dir(dir.join("trials")) else {
        return out;
    };
    for c in cases.flatten() {
        for k in fs::read_dir(c.path()).unwrap().flatten() {
            for r in fs::read_dir(k.path()).unwrap().flatten() {
                if r.file_name().to_string_lossy().ends_with(suffix) {
                    out.push(r.path());
                }
            }
        }
    }
    out
}

/// The summary's counts recomputed from the records, as the schema
/// defines them.
fn expected_summary(
    recs: &BTreeMap<(String, String, u64), Value>,
    total: u64,
    config: Option<&str>,
) -> BTreeMap<&'static str, u64> {
    let mut m: BTreeMap<&'static str, u64> = BTreeMap::new();
    for k in [
        "done",
        "evaluated",
        "passed",
        "not_submitted",
        "rejected",
        "errors",
        "infrastructure",
        "interrupted",
    ] {
        m.insert(k, 0);
    }
    for ((_, cfg, _), r) in recs {
        if config.is_some_and(|c| c != cfg) || r["finished_at"].is_null() {
            continue;
        }
        *m.get_mut("done").unwrap() += 1;
        let p = match r["pipeline_status"].as_str().unwrap() {
            "evaluated" => "evaluated",
            "not_submitted" => "not_submitted",
            "rejected" => "rejected",
            _ => "errors",
        };
        *m.get_mut(p).unwrap() += 1;
        if r["reward"] == 1 {
            *m.get_mut("passed").unwrap() += 1;
        }
        if r["failure_class"] == "infrastructure" {
            *m.get_mut("infrastructure").unwrap() += 1;
        }
        if r["terminal_status"] == "interrupted" {
            *m.get_mut("interrupted").unwrap() += 1;
        }
    }
    m.insert("total", total);
    let done = m["done"];
    m.insert("pending", total - done);
    m
}

fn assert_summary_matches(dir: &Path, total: u64, configs: &[&str]) {
    let s = json(&dir.join("summary.json"));
    let recs = records(dir);
    for (k, v) in expected_summary(&recs, total, None) {
        assert_eq!(s[k], v, "summary.json {k}: {s:#}");
    }
    for c in configs {
        let n = total / configs.len() as u64;
        for (k, v) in expected_summary(&recs, n, Some(c)) {
            assert_eq!(
                s["by_config"][c][k], v,
                "summary.json by_config {c} {k}: {s:#}"
            );
        }
    }
    assert_eq!(s["run_id"], plan(dir)["run_id"].as_str().unwrap());
}

/// The largest number of trials whose [started_at, finished_at] overlap.
fn max_overlap(recs: &BTreeMap<(String, String, u64), Value>) -> usize {
    // A trial's slot is freed as soon as its sandboxes are done (before its
    // record is written), so a trial counts from its start to the end of its
    // judge: start + setup + solve + judge seconds.
    let mut ev: Vec<(f64, i32)> = Vec::new();
    for r in recs.values() {
        let start = rfc3339_secs(r["started_at"].as_str().unwrap());
        let busy: f64 = ["setup_seconds", "solve_seconds", "judge_seconds"]
            .iter()
            .filter_map(|k| r[*k].as_f64())
            .sum();
        ev.push((start, 1));
        ev.push((start + busy, -1));
    }
    // Ends before starts at the same instant.
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut max) = (0, 0);
    for (_, d) in ev {
        cur += d;
        max = max.max(cur);
    }
    max as usize
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
fn rfc3339_secs(t: &str) -> f64 {
    let num = |a: usize, b: usize| t[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (num(0, 4), num(5, 7), num(8, 10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = t[17..t.len() - 1].parse::<f64>().unwrap();
    (days * 86_400 + num(11, 13) * 3600 + num(14, 16) * 60) as f64 + secs
}

#[test]
fn a_matrix_of_controls_runs_at_two_jobs_into_a_complete_folder() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "run-matrix");
        let cs = cases(&ctx, &["case001", "case002", "case003"]);
        let out = ctx.out.join("run");
        let o = out.display().to_string();
        let a = run_args(
            &cs,
            &["ref=replay:@reference", "stub=replay:@stub"],
            &["--repeats", "2", "--jobs", "2", "--out", &o],
        );
        let run = ctx.spawn_args(&a, &[], None).wait(RUN_DEADLINE);
        run.assert_code(0, "a run of the sample controls");
        assert!(
            run.stdout.contains("12 of 12 trials done"),
            "{}",
            run.show()
        );

        // plan.toml: cases with their hashes, the configurations.
        let p = plan(&out);
        let plan_cases = p["case"].as_array().unwrap();
        assert_eq!(plan_cases.len(), 3);
        for c in plan_cases {
            assert_eq!(c["sha256"].as_str().unwrap().len(), 64, "{p:#?}");
            assert!(!c["language"].as_str().unwrap().is_empty(), "{p:#?}");
        }
        let names: Vec<&str> = p["config"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ref", "stub"]);
        assert_eq!(p["config"][0]["agent"].as_str(), Some("replay:@reference"));

        let recs = records(&out);
        assert_eq!(recs.len(), 12, "{}", run.show());
        let run_id = p["run_id"].as_str().unwrap();
        for ((case, cfg, repeat), r) in &recs {
            let want = if cfg == "ref" { 1 } else { 0 };
            assert_eq!(
                r["reward"],
                want,
                "{case}/{cfg}/{repeat} ({}): {r:#}",
                who.label()
            );
            assert_eq!(r["pipeline_status"], "evaluated", "{r:#}");
            assert!(r["failed_phase"].is_null(), "{r:#}");
            assert_eq!(r["run_id"], run_id);
            assert_eq!(r["config"], cfg.as_str());
            assert_eq!(r["repeat"], *repeat);
            assert_eq!(r["attempt"], 1);
            assert_eq!(r["setup_seconds"], 0.0);
            assert!(
                r["time_to_submit_seconds"].as_f64().unwrap() >= 0.0,
                "{r:#}"
            );
            for k in ["token_usage", "cost_usd", "cost_source"] {
                assert!(r[k].is_null(), "{k}: {r:#}");
            }
            let pc = plan_cases
                .iter()
                .find(|c| c["id"].as_str() == Some(case))
                .unwrap();
            let sha = pc["sha256"].as_str().unwrap();
            assert_eq!(r["language"].as_str(), pc["language"].as_str());
            assert_eq!(r["provenance"]["case_sha256"], sha, "{r:#}");
            let files = r["provenance"]["files"].as_object().unwrap();
            assert!(files.contains_key("public/Full_PRD.md"), "{files:?}");
            assert!(files.contains_key("source/manifest.json"), "{files:?}");
            assert!(
                files
                    .keys()
                    .any(|k| k.starts_with("milestones/final/tests/")),
                "{files:?}"
            );
            assert!(
                !files.keys().any(|k| k.starts_with("controls/")),
                "{files:?}"
            );
        }
        // One line per trial, holding its record.
        let lines = results(&out);
        assert_eq!(lines.len(), 12);
        for l in &lines {
            let key = (
                l["case"].as_str().unwrap().to_owned(),
                l["config"].as_str().unwrap().to_owned(),
                l["repeat"].as_u64().unwrap(),
            );
            assert_eq!(l["run_id"], run_id);
            assert_eq!(l["attempt"], 1);
            assert_eq!(
                l["trial_dir"],
                format!("trials/{}/{}/{}", key.0, key.1, key.2)
            );
            assert_eq!(&l["record"], &recs[&key], "results.jsonl holds the record");
        }
        assert_summary_matches(&out, 12, &["ref", "stub"]);
        let s = json(&out.join("summary.json"));
        assert_eq!(s["passed"], 6);
        assert_eq!(s["evaluated"], 12);
        assert_eq!(s["running"], 0);
        // Two at a time, never more.
        let overlap = max_overlap(&recs);
        assert!(overlap <= 2, "{overlap} trials ran at once with --jobs 2");
        assert_eq!(overlap, 2, "--jobs 2 ran the trials one at a time");
        assert!(leftovers(&out, ".claim").is_empty());
        assert!(leftovers(&out, ".status").is_empty());
        ctx.assert_clean("a run");
    }
}

#[test]
fn a_run_killed_with_sigkill_is_completed_by_resume_with_nothing_run_twice() {
    let ctx = Ctx::new(Who::Root, "run-kill");
    let cs = cases(&ctx, &["case001", "case002", "case003"]);
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    let a = run_args(
        &cs,
        &["ref=replay:@reference", "stub=replay:@stub"],
        &["--repeats", "2", "--jobs", "2", "--out", &o],
    );
    let r = ctx.spawn_args(&a, &[], None);
    // Some trials finished, one at least mid-way.
    let mid = wait_until(Duration::from_secs(120), || {
        results(&out).len() >= 3 && records(&out).values().any(|r| r["finished_at"].is_null())
    });
    assert!(mid, "the run never got half-way");
    r.signal("KILL");
    let killed = r.wait(Duration::from_secs(10));
    assert_eq!(killed.killed_by, Some(9), "{}", killed.show());
    // The workers die with the supervisor, and their sandboxes with them.
    assert!(
        wait_until(Duration::from_secs(10), || ctx.new_procs().is_empty()),
        "processes outlived the killed run: {:?}",
        ctx.new_procs()
            .iter()
            .map(|p| (p.pid, p.argv.clone()))
            .collect::<Vec<_>>()
    );
    let before = records(&out);
    // Trial folders at the kill (one may have no record yet).
    let folders: BTreeSet<(String, String, u64)> = leftovers(&out, "")
        .iter()
        .filter_map(|p| {
            let repeat = p.file_name()?.to_str()?.parse().ok()?;
            let cfg = p.parent()?.file_name()?.to_str()?.to_owned();
            let case = p.parent()?.parent()?.file_name()?.to_str()?.to_owned();
            Some((case, cfg, repeat))
        })
        .collect();
    let finished: BTreeSet<_> = before
        .iter()
        .filter(|(_, r)| !r["finished_at"].is_null())
        .map(|(k, _)| k.clone())
        .collect();
    let unfinished: BTreeSet<_> = before
        .iter()
        .filter(|(_, r)| r["finished_at"].is_null())
        .map(|(k, _)| k.clone())
        .collect();
    assert!(
        !finished.is_empty() && !unfinished.is_empty(),
        "{before:#?}"
    );
    for k in &unfinished {
        assert_eq!(
            before[k]["terminal_status"], "interrupted",
            "a killed trial's record is honest"
        );
    }
    let gc = ctx.cbrun(&["gc"]);
    gc.assert_code(0, "gc after a killed run");
    ctx.assert_clean("SIGKILL of a run and gc");

    let resumed = ctx
        .spawn_args(&args(&["run", "--resume", &o, "--jobs", "2"]), &[], None)
        .wait(RUN_DEADLINE);
    resumed.assert_code(0, "resume of a killed run");
    let after = records(&out);
    assert_eq!(after.len(), 12);
    for (k, r) in &after {
        assert!(!r["finished_at"].is_null(), "{k:?} unfinished after resume");
        assert_eq!(r["pipeline_status"], "evaluated", "{k:?}: {r:#}");
        let want = if finished.contains(k) {
            // Never run again: the very same record.
            assert_eq!(r, &before[k], "{k:?} was run twice");
            1
        } else if folders.contains(k) {
            let aside = out.join(format!("trials/{}/{}/{}.attempt1", k.0, k.1, k.2));
            assert!(aside.is_dir(), "the killed attempt of {k:?} is kept");
            if unfinished.contains(k) {
                let old = json(&aside.join("trial.json"));
                assert!(
                    old["finished_at"].is_null(),
                    "the killed attempt is kept as it was"
                );
            }
            2
        } else {
            1
        };
        assert_eq!(r["attempt"], want, "{k:?}: {r:#}");
    }
    // results.jsonl: each trial once per finished attempt, evaluated once.
    let mut seen: BTreeMap<(String, String, u64), Vec<u64>> = BTreeMap::new();
    for l in results(&out) {
        seen.entry((
            l["case"].as_str().unwrap().into(),
            l["config"].as_str().unwrap().into(),
            l["repeat"].as_u64().unwrap(),
        ))
        .or_default()
        .push(l["attempt"].as_u64().unwrap());
    }
    assert_eq!(seen.len(), 12, "{seen:?}");
    for (k, attempts) in &seen {
        assert_eq!(
            attempts.len(),
            1,
            "{k:?} finished more than once: {attempts:?}"
        );
    }
    assert!(
        leftovers(&out, ".claim").is_empty(),
        "stale claims were broken and released"
    );
    assert_summary_matches(&out, 12, &["ref", "stub"]);
    ctx.assert_clean("a resumed run");
}

#[test]
fn an_interrupt_records_interrupted_trials_exits_130_and_resume_completes_them() {
    let ctx = Ctx::new(Who::Root, "run-int");
    let cs = cases(&ctx, &["case001"]);
    let slow = spec(
        &ctx,
        "slow",
        "command = \"sleep 3; echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n",
    );
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    let a = run_args(
        &cs,
        &[&slow],
        &["--repeats", "4", "--jobs", "2", "--out", &o],
    );
    let r = ctx.spawn_args(&a, &[], None);
    let solving = wait_until(Duration::from_secs(60), || {
        leftovers(&out, ".status")
            .iter()
            .filter(|p| {
                fs::read_to_string(p)
                    .unwrap_or_default()
                    .contains("\"solve\"")
            })
            .count()
            == 2
    });
    assert!(solving, "two trials never reached their solve phase");
    r.signal("INT");
    let run = r.wait(Duration::from_secs(30));
    run.assert_code(130, "an interrupted run");
    assert!(run.stderr.contains("--resume"), "{}", run.show());
    let recs = records(&out);
    assert_eq!(
        recs.len(),
        2,
        "trials started after the interrupt: {recs:#?}"
    );
    for r in recs.values() {
        assert_eq!(r["terminal_status"], "interrupted", "{r:#}");
        assert_eq!(r["pipeline_status"], "error");
        assert_eq!(r["failed_phase"], "solve");
        assert!(!r["finished_at"].is_null());
    }
    let s = json(&out.join("summary.json"));
    assert_eq!(s["interrupted"], 2, "{s:#}");
    assert_eq!(s["pending"], 2, "{s:#}");
    ctx.assert_clean("an interrupted run");

    let resumed = ctx
        .spawn_args(&args(&["run", "--resume", &o]), &[], None)
        .wait(RUN_DEADLINE);
    resumed.assert_code(0, "resume of an interrupted run");
    let recs = records(&out);
    assert_eq!(recs.len(), 4);
    for ((_, cfg, repeat), r) in &recs {
        assert_eq!(r["pipeline_status"], "evaluated", "{r:#}");
        let interrupted_before = *repeat <= 2;
        assert_eq!(
            r["attempt"],
            if interrupted_before { 2 } else { 1 },
            "{r:#}"
        );
        if interrupted_before {
            let old = json(&out.join(format!("trials/case001/{cfg}/{repeat}.attempt1/trial.json")));
            assert_eq!(old["terminal_status"], "interrupted");
        }
        assert!(
            r["time_to_submit_seconds"].as_f64().unwrap() >= 2.5,
            "{r:#}"
        );
    }
    assert_summary_matches(&out, 4, &["slow"]);
    ctx.assert_clean("a resumed run");
}

#[test]
fn a_second_interrupt_kills_the_workers_and_leaves_nothing() {
    let ctx = Ctx::new(Who::Root, "run-int2");
    let cs = cases(&ctx, &["case001"]);
    let marker = ctx.sleep_marker();
    // Deaf to SIGTERM: the first interrupt would wait out the grace period.
    let stubborn = spec(
        &ctx,
        "stubborn",
        &format!("command = \"trap '' TERM INT; sleep {marker}\"\n"),
    );
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    let a = run_args(
        &cs,
        &[&stubborn],
        &["--repeats", "2", "--jobs", "2", "--out", &o],
    );
    let r = ctx.spawn_args(&a, &[], None);
    assert!(
        wait_until(Duration::from_secs(60), || live_procs_with_arg(&marker)
            .len()
            >= 2),
        "the agents did not start"
    );
    r.signal("INT");
    std::thread::sleep(Duration::from_millis(300));
    let t = std::time::Instant::now();
    r.signal("INT");
    let run = r.wait(Duration::from_secs(30));
    run.assert_code(130, "a run interrupted twice");
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "the second interrupt did not kill at once: {:?}",
        t.elapsed()
    );
    assert!(run.stderr.contains("killing the workers"), "{}", run.show());
    assert!(
        wait_until(Duration::from_secs(5), || live_procs_with_arg(&marker)
            .is_empty()),
        "the agents survived"
    );
    // The supervisor removed what the killed sandboxes left.
    ctx.assert_clean("a run killed by a second interrupt");
    for r in records(&out).values() {
        assert!(r["finished_at"].is_null(), "killed before recording: {r:#}");
    }
}

#[test]
fn another_plan_into_the_same_folder_is_refused_and_the_same_plan_continues() {
    let ctx = Ctx::new(Who::Root, "run-plan");
    let cs = cases(&ctx, &["case001", "case003"]);
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    let a = run_args(&cs[..1], &["replay:@reference"], &["--out", &o]);
    ctx.spawn_args(&a, &[], None)
        .wait(RUN_DEADLINE)
        .assert_code(0, "a one-trial run");
    let plan_bytes = fs::read(out.join("plan.toml")).unwrap();
    let lines = results(&out).len();
    assert_eq!(lines, 1);
    // The same plan again: nothing left to do, nothing rerun.
    let again = ctx.spawn_args(&a, &[], None).wait(RUN_DEADLINE);
    again.assert_code(0, "the same plan into its folder");
    assert_eq!(results(&out).len(), 1, "{}", again.show());
    // Another plan: refused in one line, the folder untouched.
    for (what, extra) in [
        ("more repeats", vec!["--repeats", "2"]),
        ("another memory limit", vec!["--memory", "4G"]),
    ] {
        let mut b = a.clone();
        b.extend(extra.iter().map(|s| s.to_string()));
        let run = ctx.spawn_args(&b, &[], None).wait(RUN_DEADLINE);
        run.assert_code(2, what);
        let err = run.stderr.trim();
        assert_eq!(err.lines().count(), 1, "{what}: {}", run.show());
        assert!(
            err.contains("holds another plan") && err.contains("--resume"),
            "{what}: {err}"
        );
        assert_eq!(fs::read(out.join("plan.toml")).unwrap(), plan_bytes);
    }
    let b = run_args(&cs, &["replay:@reference"], &["--out", &o]);
    let run = ctx.spawn_args(&b, &[], None).wait(RUN_DEADLINE);
    run.assert_code(2, "another case list");
    assert!(
        run.stderr
            .contains("cases case001 here, case001,case003 now"),
        "{}",
        run.show()
    );

    // A case changed since the plan was made: resume refuses.
    fs::write(cs[0].join("public/Full_PRD.md"), "changed").unwrap();
    let run = ctx.cbrun(&["run", "--resume", &o]);
    run.assert_code(2, "resume after the case changed");
    assert!(
        run.stderr.contains("case case001")
            && run.stderr.contains("changed since the plan was made"),
        "{}",
        run.show()
    );

    // Bad input: one line naming the file and the field, exit 2.
    let pf = ctx.dir.join("plan.toml");
    fs::write(&pf, "cases = [\"cases/case001\"]\n[[config]]\nname = \"a\"\nagent = \"replay:@reference\"\nmemroy = \"1G\"\n").unwrap();
    let run = ctx.cbrun(&[
        "run",
        "--plan",
        pf.to_str().unwrap(),
        "--out",
        &format!("{o}-2"),
    ]);
    run.assert_code(2, "a plan file with a typo");
    assert!(
        run.stderr.contains(&format!(
            "{} (line 5): unknown field `memroy`",
            pf.display()
        )),
        "{}",
        run.show()
    );
    assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.show());
    let run = ctx.cbrun(&[
        "run",
        cs[1].to_str().unwrap(),
        "--agent",
        "replay:@nope",
        "--out",
        &format!("{o}-3"),
    ]);
    run.assert_code(2, "a control no case has");
    assert!(
        run.stderr.contains("case case003 has no control nope"),
        "{}",
        run.show()
    );
    let run = ctx.cbrun(&["run", "--resume", &o, "--agent", "none"]);
    run.assert_code(2, "configurations with --resume");
    assert!(!out.join("../run-2").exists() && !Path::new(&format!("{o}-3")).exists());
}

#[test]
fn a_plan_file_with_globs_runs_its_named_configurations() {
    let ctx = Ctx::new(Who::Root, "run-planfile");
    cases(&ctx, &["case001", "case003"]);
    let pf = ctx.dir.join("plan.toml");
    fs::write(
        &pf,
        "cases = [\"cases/case00*\"]\nrepeats = 1\n[[config]]\nname = \"oracle\"\nagent = \"replay:@reference\"\nmemory = \"2G\"\njudge_timeout = 120\n",
    )
    .unwrap();
    let out = ctx.out.join("run");
    let run = ctx.cbrun(&[
        "run",
        "--plan",
        pf.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    run.assert_code(0, "a plan file");
    let p = plan(&out);
    assert_eq!(p["config"][0]["memory"].as_str(), Some("2G"));
    assert_eq!(p["config"][0]["judge_timeout"].as_float(), Some(120.0));
    let recs = records(&out);
    let keys: Vec<_> = recs.keys().cloned().collect();
    assert_eq!(
        keys,
        [
            ("case001".into(), "oracle".into(), 1),
            ("case003".into(), "oracle".into(), 1)
        ]
    );
    for r in recs.values() {
        assert_eq!(
            r["limits"]["judge"]["memory"]["enforced"],
            2u64 << 30,
            "{r:#}"
        );
    }
    // `cbrun trial` takes replay:@NAME too.
    let t = ctx.cbrun(&[
        "trial",
        ctx.dir.join("cases/case001").to_str().unwrap(),
        "--agent",
        "replay:@reference",
        "--out",
        ctx.out.join("one").to_str().unwrap(),
    ]);
    t.assert_code(0, "trial --agent replay:@reference");
    assert!(t.stdout.contains("reward 1"), "{}", t.show());
}

/// This process's identity as a claim holds it.
fn my_claim(task: usize) -> Value {
    let stat = fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let ticks: u64 = rest.split_whitespace().nth(19).unwrap().parse().unwrap();
    serde_json::json!({
        "host": fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim(),
        "pid": std::process::id(),
        "start_ticks": ticks,
        "boot_id": fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap().trim(),
        "job_id": "test",
        "task": task,
        "claimed_at": "2026-12-01T00:00:00.000Z",
        "claimed_unix": 1_796_000_000u64,
        "budget_seconds": 600u64,
    })
}

#[test]
fn a_worker_honours_live_claims_and_breaks_stale_ones() {
    let ctx = Ctx::new(Who::Root, "run-claim");
    let cs = cases(&ctx, &["case001"]);
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    let a = run_args(
        &cs,
        &["ref=replay:@reference"],
        &["--repeats", "2", "--out", &o],
    );
    ctx.spawn_args(&a, &[], None)
        .wait(RUN_DEADLINE)
        .assert_code(0, "a two-trial run");
    let trial2 = out.join("trials/case001/ref/2");
    fs::remove_dir_all(&trial2).unwrap();
    let claim = out.join("trials/case001/ref/2.claim");

    // A live claim (this very process): the worker leaves the trial alone.
    fs::write(&claim, serde_json::to_vec(&my_claim(1)).unwrap()).unwrap();
    let run = ctx.cbrun(&["run", "--worker", &o, "--task", "1"]);
    run.assert_code(0, "a worker on a claimed trial");
    assert!(
        run.stderr.contains("is claimed by host") && run.stderr.contains("left alone"),
        "{}",
        run.show()
    );
    assert!(!trial2.exists(), "a claimed trial was run");
    // The supervisor leaves it alone too, and the run is not complete.
    let run = ctx.cbrun(&["run", "--resume", &o]);
    run.assert_code(1, "a resume with a trial held elsewhere");
    assert!(
        run.stderr.contains("a live worker holds it"),
        "{}",
        run.show()
    );
    assert!(!trial2.exists());

    // A claim by a process that is gone: broken, and the trial runs.
    let mut child = Command::new("/bin/true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let mut stale = my_claim(1);
    stale["pid"] = dead.into();
    fs::write(&claim, serde_json::to_vec(&stale).unwrap()).unwrap();
    let run = ctx.cbrun(&["run", "--worker", &o, "--task", "1"]);
    run.assert_code(0, "a worker on a stale claim");
    assert!(
        run.stderr.contains(&format!("its process {dead} is gone")),
        "{}",
        run.show()
    );
    let rec = json(&trial2.join("trial.json"));
    assert_eq!(rec["reward"], 1, "{rec:#}");
    assert!(!claim.exists(), "the claim was not released");
    // Its outcome stands: a second worker does nothing.
    let run = ctx.cbrun(&["run", "--worker", &o, "--task", "1"]);
    run.assert_code(0, "a worker on a done trial");
    assert!(run.stderr.contains("already stands"), "{}", run.show());
    assert_eq!(json(&trial2.join("trial.json")), rec);
    // A trial the plan does not have.
    let run = ctx.cbrun(&["run", "--worker", &o, "--task", "2"]);
    run.assert_code(2, "--task out of range");
    assert!(run.stderr.contains("--task 2: the plan"), "{}", run.show());
    assert_summary_matches(&out, 2, &["ref"]);
}

#[test]
fn infrastructure_failures_are_retried_and_earlier_attempts_kept() {
    let ctx = Ctx::new(Who::Root, "run-infra");
    let cs = cases(&ctx, &["case001"]);
    let broken = spec(
        &ctx,
        "broken",
        "command = \"true\"\ninstall_script = \"echo no network; exit 3\"\n",
    );
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    let a = run_args(&cs, &[&broken], &["--retry-infra", "1", "--out", &o]);
    let run = ctx.spawn_args(&a, &[], None).wait(RUN_DEADLINE);
    run.assert_code(1, "a run whose agent does not install");
    let latest = json(&out.join("trials/case001/broken/1/trial.json"));
    let first = json(&out.join("trials/case001/broken/1.attempt1/trial.json"));
    for (r, attempt) in [(&first, 1), (&latest, 2)] {
        assert_eq!(r["attempt"], attempt, "{r:#}");
        assert_eq!(r["failure_class"], "infrastructure", "{r:#}");
        assert_eq!(r["pipeline_status"], "error");
        assert_eq!(r["failed_phase"], "install", "{r:#}");
        assert!(r["setup_seconds"].as_f64().unwrap() > 0.0, "{r:#}");
    }
    assert_eq!(results(&out).len(), 2);
    // Retries used up: resume runs nothing and says so by its status.
    let run = ctx.cbrun(&["run", "--resume", &o, "--retry-infra", "1"]);
    run.assert_code(1, "a resume with the retries used up");
    assert_eq!(results(&out).len(), 2, "{}", run.show());
    assert_summary_matches(&out, 1, &["broken"]);
    assert_eq!(json(&out.join("summary.json"))["infrastructure"], 1);
}

#[test]
fn progress_is_live_on_a_terminal_plain_off_it_and_silent_with_quiet() {
    let ctx = Ctx::new(Who::Root, "run-progress");
    let cs = cases(&ctx, &["case001"]);
    let slow = spec(
        &ctx,
        "slow",
        "command = \"sleep 1.5; echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n",
    );
    let have_script = Command::new("script").arg("--version").output().is_ok();
    if !have_script {
        assert!(!in_ci(), "CI: `script` (util-linux) is missing");
        eprintln!("skipping the terminal part: no `script` (util-linux)");
    } else {
        let out = ctx.out.join("tty");
        let cmd = format!(
            "{} run {} --agent {slow} --agent replay:@reference --repeats 2 --jobs 2 --out {}",
            CBRUN,
            cs[0].display(),
            out.display()
        );
        let typescript = ctx.dir.join("typescript");
        let st = Command::new("script")
            .args(["-qfec", &cmd])
            .arg(&typescript)
            .env("TERM", "xterm")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "the run under a terminal failed");
        let text = String::from_utf8_lossy(&fs::read(&typescript).unwrap()).into_owned();
        // indicatif redraws in place with escape sequences.
        assert!(text.contains("\x1b[2K"), "no live redraws: {text}");
        assert!(
            text.contains("case001/slow/1  solve"),
            "no live line with the phase: {text}"
        );
        assert!(
            text.contains("done · 0 passed · 0 infrastructure · ETA"),
            "no overall bar: {text}"
        );
        assert!(
            text.contains("4/4 done, 2 passed, 0 infrastructure"),
            "{text}"
        );
        assert!(
            text.contains("case001/reference/1 evaluated reward 1"),
            "{text}"
        );
    }
    // Off a terminal: timestamped lines only.
    let out = ctx.out.join("plain");
    let a = run_args(
        &cs,
        &[&slow],
        &[
            "--repeats",
            "2",
            "--jobs",
            "2",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let run = ctx.spawn_args(&a, &[], None).wait(RUN_DEADLINE);
    run.assert_code(0, "a run off a terminal");
    assert!(!run.stderr.contains('\x1b'), "{}", run.show());
    for line in run.stderr.lines() {
        let (ts, rest) = line.split_once(' ').unwrap();
        assert!(
            ts.len() == 24
                && ts.ends_with('Z')
                && ts.as_bytes()[10] == b'T'
                && rest.starts_with("cbrun run: "),
            "not a timestamped line: {line:?}"
        );
    }
    for want in [
        "start case001/slow/1 (task 0, slot 1)",
        "case001/slow/2 solve",
        "done case001/slow/2: evaluated reward 0",
        "finished: 2/2 done, 0 passed, 0 infrastructure",
    ] {
        assert!(
            run.stderr.contains(want),
            "{want:?} missing\n{}",
            run.show()
        );
    }
    // --quiet: nothing at all.
    let out = ctx.out.join("quiet");
    let a = run_args(
        &cs,
        &["replay:@reference"],
        &["--quiet", "--out", out.to_str().unwrap()],
    );
    let run = ctx.spawn_args(&a, &[], None).wait(RUN_DEADLINE);
    run.assert_code(0, "a quiet run");
    assert!(
        run.stderr.is_empty() && run.stdout.is_empty(),
        "{}",
        run.show()
    );
    assert_eq!(json(&out.join("summary.json"))["passed"], 1);
}
