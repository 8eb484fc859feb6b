//! `cbrun run --backend slurm` on a real single-node Slurm cluster
//! (`scripts/slurm-up.sh`, started here when it is not up): the sample
//! controls as one job array, as root and as nobody, every reward, the
//! summary and results checked and no trial run twice; `scancel` mid-run
//! then `--resume`; `scontrol requeue` of a running task, and of one
//! whose worker was SIGKILLed, reruns each trial once; `scancel -s KILL`, `scancel -b` and the time limit leave no
//! process of the run; `--emit-sbatch` submitted by hand.
//!
//! Without `sbatch` the tests skip, except in CI (`CI=true`), where that is
//! a failure.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const DEADLINE: Duration = Duration::from_secs(240);

/// Whether Slurm is here (and up): starts the test cluster as root.
fn slurm_ready() -> bool {
    let have = Command::new("sh")
        .args(["-c", "command -v sbatch && command -v slurmctld"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true but sbatch/slurmctld are missing (apt-get install slurm-wlm munge)"
        );
        eprintln!("skipped: Slurm is not installed");
        return false;
    }
    let up = Command::new(Path::new(REPO).join("scripts/slurm-up.sh"))
        .output()
        .expect("scripts/slurm-up.sh");
    assert!(
        up.status.success(),
        "scripts/slurm-up.sh: {}{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    true
}

fn cases(ctx: &Ctx, names: &[&str]) -> Vec<PathBuf> {
    let root = ctx.dir.join("cases");
    fs::create_dir_all(&root).unwrap();
    for n in names {
        let st = Command::new("cp")
            .arg("-r")
            .arg(Path::new(REPO).join("cases").join(n))
            .arg(root.join(n))
            .status()
            .unwrap();
        assert!(st.success());
    }
    assert!(Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&root)
        .status()
        .unwrap()
        .success());
    names.iter().map(|n| root.join(n)).collect()
}

/// A plan file over `cases` with `configs` (`(name, agent)`), 1G each.
fn plan_file(
    ctx: &Ctx,
    name: &str,
    cases: &[PathBuf],
    configs: &[(&str, &str)],
    repeats: u32,
    extra: &str,
) -> String {
    let mut t = format!(
        "cases = [{}]\nrepeats = {repeats}\n",
        cases
            .iter()
            .map(|c| format!("{:?}", c.display().to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (n, a) in configs {
        t.push_str(&format!(
            "[[config]]\nname = \"{n}\"\nagent = {a:?}\nmemory = \"1G\"\n"
        ));
    }
    t.push_str(extra);
    let p = ctx.dir.join(format!("{name}.toml"));
    fs::write(&p, t).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p.display().to_string()
}

fn spec(ctx: &Ctx, name: &str, body: &str) -> String {
    let p = ctx.dir.join(format!("{name}.toml"));
    fs::write(&p, format!("name = \"{name}\"\n{body}")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p.display().to_string()
}

fn s(list: &[&str]) -> Vec<String> {
    list.iter().map(|x| x.to_string()).collect()
}

fn json(p: &Path) -> Value {
    let text = fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// (case, config, repeat) -> the latest attempt's record.
fn records(dir: &Path) -> BTreeMap<(String, String, u64), Value> {
    let mut out = BTreeMap::new();
    let Ok(cs) = fs::read_dir(dir.join("trials")) else {
        return out;
    };
    for c in cs.flatten() {
        for k in fs::read_dir(c.path()).unwrap().flatten() {
            for r in fs::read_dir(k.path()).unwrap().flatten() {
                let name = r.file_name().to_string_lossy().into_owned();
                let (Ok(repeat), true) =
                    (name.parse::<u64>(), r.path().join("trial.json").exists())
                else {
                    continue;
                };
                out.insert(
                    (
                        c.file_name().to_string_lossy().into_owned(),
                        k.file_name().to_string_lossy().into_owned(),
                        repeat,
                    ),
                    json(&r.path().join("trial.json")),
                );
            }
        }
    }
    out
}

fn results(dir: &Path) -> Vec<Value> {
    fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn job_id(dir: &Path) -> String {
    json(&dir.join("slurm/job.json"))["job_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Array tasks of `job` Slurm still has.
fn in_queue(job: &str) -> usize {
    let o = Command::new("squeue")
        .args(["-h", "-r", "-j", job, "-o", "%i"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).lines().count()
}

fn wait_gone(job: &str, limit: Duration) {
    assert!(
        wait_until(limit, || in_queue(job) == 0),
        "job {job} is still in the queue after {limit:?}"
    );
}

/// Live processes whose command line mentions `needle` (the run folder:
/// workers; a sleep marker: agents).
fn procs_with(needle: &str) -> Vec<(u32, Vec<String>)> {
    all_procs()
        .into_iter()
        .filter(|p| p.alive() && p.argv.iter().any(|a| a.contains(needle)))
        .filter(|p| p.pid != std::process::id())
        .map(|p| (p.pid, p.argv.clone()))
        .collect()
}

/// `cbrun gc` removes what SIGKILLed workers left; a second finds nothing.
fn gc_twice(ctx: &Ctx, after: &str) {
    ctx.cbrun(&["gc"]).assert_code(0, after);
    let g = ctx.cbrun(&["gc", "--json"]);
    g.assert_code(0, after);
    let v: Value = g.stdout_json();
    assert_eq!(
        v["removed_runs"].as_array().map(Vec::len),
        Some(0),
        "{after}: {v:#}"
    );
    assert_eq!(v["killed_processes"], 0, "{after}: {v:#}");
    assert_eq!(v["removed_cgroups"], 0, "{after}: {v:#}");
}

/// Every trial evaluated, ref passes, stub fails, one results line each.
fn assert_controls(out: &Path, total: usize) {
    let recs = records(out);
    assert_eq!(recs.len(), total, "{recs:#?}");
    for ((case, cfg, rep), r) in &recs {
        let want = if cfg == "ref" { 1 } else { 0 };
        assert_eq!(r["reward"], want, "{case}/{cfg}/{rep}: {r:#}");
        assert_eq!(r["pipeline_status"], "evaluated", "{r:#}");
        assert_eq!(r["attempt"], 1, "{r:#}");
    }
    let lines = results(out);
    assert_eq!(
        lines.len(),
        total,
        "a trial ran twice, or not at all: {lines:#?}"
    );
    let mut seen = std::collections::BTreeSet::new();
    for l in &lines {
        assert!(
            seen.insert(l["trial_dir"].as_str().unwrap().to_owned()),
            "{l}"
        );
    }
    let sm = json(&out.join("summary.json"));
    assert_eq!(sm["total"], total);
    assert_eq!(sm["done"], total);
    assert_eq!(sm["evaluated"], total);
    assert_eq!(sm["passed"], total / 2);
    assert_eq!(sm["pending"], 0);
    assert_eq!(sm["by_config"]["ref"]["passed"], total / 2, "{sm:#}");
    assert_eq!(sm["by_config"]["stub"]["passed"], 0, "{sm:#}");
}

#[test]
fn the_sample_controls_run_as_one_job_array_as_root_and_as_nobody() {
    if !slurm_ready() {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "slurm-matrix");
        let cs = cases(&ctx, &["case001", "case002", "case003"]);
        let plan = plan_file(
            &ctx,
            "plan",
            &cs,
            &[("ref", "replay:@reference"), ("stub", "replay:@stub")],
            1,
            "[slurm]\nparallel = 2\n",
        );
        let out = ctx.out.join("run");
        let o = out.display().to_string();
        let t = Instant::now();
        let run = ctx
            .spawn_args(
                &s(&[
                    "run",
                    "--plan",
                    &plan,
                    "--backend",
                    "slurm",
                    "--wait",
                    "--out",
                    &o,
                ]),
                &[],
                None,
            )
            .wait(DEADLINE);
        run.assert_code(0, "a Slurm run of the sample controls");
        eprintln!(
            "{}: 6 trials as a Slurm array (%2): {:.1} s",
            who.label(),
            t.elapsed().as_secs_f64()
        );
        assert!(run.stdout.contains("6 of 6 trials done"), "{}", run.show());
        assert!(run.stdout.contains("(0-5%2)"), "{}", run.show());
        assert_controls(&out, 6);
        // The array's index is the trial's number; tasks.json says which.
        let tasks = json(&out.join("slurm/tasks.json"));
        let list = tasks["tasks"].as_array().unwrap();
        assert_eq!(list.len(), 6);
        assert_eq!(list[0]["trial"], "case001/ref/1");
        assert_eq!(list[5]["trial"], "case003/stub/1");
        // Each worker ran as the Slurm task it claimed as, as this user.
        let job = job_id(&out);
        for n in 0..6 {
            let log = fs::read_to_string(out.join(format!("slurm/logs/{job}_{n}.log"))).unwrap();
            assert!(log.contains(&format!("task {n}: ")), "{log}");
        }
        let meta = fs::metadata(out.join("trials/case001/ref/1/trial.json")).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), who.uid());
        // --status: the same summary line, and the job gone from the queue.
        let st = ctx.cbrun(&["run", "--status", &o]);
        st.assert_code(0, "--status");
        assert!(
            st.stdout
                .contains("6 of 6 trials done: 6 evaluated (3 passed)"),
            "{}",
            st.show()
        );
        assert!(
            st.stdout.contains(&format!("slurm job {job}")),
            "{}",
            st.show()
        );
        assert!(
            st.stdout.contains("nothing queued or running"),
            "{}",
            st.show()
        );
        // Resuming a complete run submits nothing.
        let again = ctx.cbrun(&["run", "--resume", &o, "--backend", "slurm"]);
        again.assert_code(0, "resume of a complete run");
        assert!(
            again.stderr.contains("nothing to submit"),
            "{}",
            again.show()
        );
        assert_eq!(job_id(&out), job);
        assert!(procs_with(&o).is_empty(), "{:?}", procs_with(&o));
        ctx.assert_clean("a Slurm run");
    }
}

#[test]
fn emit_sbatch_submitted_by_hand_gives_the_same_results() {
    if !slurm_ready() {
        return;
    }
    let ctx = Ctx::new(Who::Delegated, "slurm-emit");
    let cs = cases(&ctx, &["case001", "case002"]);
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    let mut a = s(&["run"]);
    a.extend(cs.iter().map(|c| c.display().to_string()));
    a.extend(s(&[
        "--agent",
        "ref=replay:@reference",
        "--agent",
        "stub=replay:@stub",
        "--memory",
        "1G",
        "--emit-sbatch",
        "--out",
        &o,
        "--sbatch-arg=--comment=by-hand",
    ]));
    let e = ctx.spawn_args(&a, &[], None).wait(DEADLINE);
    e.assert_code(0, "--emit-sbatch");
    let script = out.join("slurm/array.sbatch");
    assert!(
        e.stdout.contains(&script.display().to_string()),
        "{}",
        e.show()
    );
    assert!(e.stdout.contains("array 0-3 (4 tasks;"), "{}", e.show());
    assert!(
        !out.join("slurm/job.json").exists(),
        "--emit-sbatch submitted"
    );
    assert!(records(&out).is_empty());
    let text = fs::read_to_string(&script).unwrap();
    assert!(text.contains("#SBATCH --comment=by-hand\n"), "{text}");
    assert!(
        text.trim_end().lines().last().unwrap().starts_with("exec "),
        "{text}"
    );
    // By hand, as the user, with a clean environment.
    let sb = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            "sbatch",
            "--wait",
            "--parsable",
        ])
        .arg(&script)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        sb.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&sb.stderr)
    );
    assert_controls(&out, 4);
    ctx.assert_clean("an array submitted by hand");
}

#[test]
fn scancel_mid_run_leaves_interrupted_trials_that_resume_completes() {
    if !slurm_ready() {
        return;
    }
    let ctx = Ctx::new(Who::Root, "slurm-cancel");
    let cs = cases(&ctx, &["case001"]);
    let slow = spec(
        &ctx,
        "slow",
        "command = \"sleep 4; echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n",
    );
    let plan = plan_file(
        &ctx,
        "plan",
        &cs,
        &[("slow", &slow)],
        4,
        "[slurm]\nparallel = 2\n",
    );
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    ctx.cbrun(&["run", "--plan", &plan, "--backend", "slurm", "--out", &o])
        .assert_code(0, "submission");
    let job = job_id(&out);
    let solving = wait_until(Duration::from_secs(60), || {
        (1..=4)
            .filter(|r| {
                fs::read_to_string(out.join(format!("trials/case001/slow/{r}.status")))
                    .unwrap_or_default()
                    .contains("\"solve\"")
            })
            .count()
            == 2
    });
    assert!(solving, "two tasks never reached their solve phase");
    let st = ctx.cbrun(&["run", "--status", &o]);
    assert!(st.stdout.contains(": solve for "), "{}", st.show());
    assert!(st.stdout.contains("RUNNING"), "{}", st.show());
    // A resume while the job is queued is refused.
    let early = ctx.cbrun(&["run", "--resume", &o, "--backend", "slurm"]);
    early.assert_code(2, "resume while the job runs");
    assert!(
        early.stderr.contains("still has tasks in Slurm"),
        "{}",
        early.show()
    );
    assert!(Command::new("scancel")
        .arg(&job)
        .status()
        .unwrap()
        .success());
    wait_gone(&job, Duration::from_secs(30));
    let recs = records(&out);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    for r in recs.values() {
        assert_eq!(r["terminal_status"], "interrupted", "{r:#}");
        assert!(
            !r["finished_at"].is_null(),
            "the record was finished: {r:#}"
        );
    }
    assert!(
        wait_until(Duration::from_secs(5), || procs_with(&o).is_empty()),
        "{:?}",
        procs_with(&o)
    );
    ctx.assert_clean("scancel of a running array");

    let resumed = ctx
        .spawn_args(
            &s(&["run", "--resume", &o, "--backend", "slurm", "--wait"]),
            &[],
            None,
        )
        .wait(DEADLINE);
    resumed.assert_code(0, "--resume after scancel");
    assert_ne!(job_id(&out), job, "a new array");
    let recs = records(&out);
    assert_eq!(recs.len(), 4);
    for ((_, _, rep), r) in &recs {
        assert_eq!(r["pipeline_status"], "evaluated", "{r:#}");
        let was_cut = *rep <= 2;
        assert_eq!(r["attempt"], if was_cut { 2 } else { 1 }, "{r:#}");
    }
    // The second array held only what was not evaluated.
    let tasks = json(&out.join("slurm/tasks.json"));
    assert_eq!(tasks["tasks"].as_array().unwrap().len(), 4);
    assert_eq!(
        results(&out)
            .iter()
            .filter(|l| l["record"]["pipeline_status"] == "evaluated")
            .count(),
        4
    );
    ctx.assert_clean("a resumed Slurm run");
}

#[test]
fn kill_signals_and_the_time_limit_leave_nothing_running() {
    if !slurm_ready() {
        return;
    }
    let ctx = Ctx::new(Who::Root, "slurm-kill");
    let cs = cases(&ctx, &["case001"]);
    let marker = ctx.sleep_marker();
    // Deaf to SIGTERM: only the parent-death signal and SIGKILL end it.
    let deaf = spec(
        &ctx,
        "deaf",
        &format!("command = \"trap '' TERM INT; sleep {marker}\"\n"),
    );
    let plan = plan_file(&ctx, "plan", &cs, &[("deaf", &deaf)], 2, "");
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    ctx.cbrun(&["run", "--plan", &plan, "--backend", "slurm", "--out", &o])
        .assert_code(0, "submission");
    let job = job_id(&out);
    assert!(
        wait_until(Duration::from_secs(60), || live_procs_with_arg(&marker)
            .len()
            >= 2),
        "the agents did not start"
    );
    assert!(Command::new("scancel")
        .args(["-s", "KILL", &format!("{job}_0")])
        .status()
        .unwrap()
        .success());
    assert!(Command::new("scancel")
        .args(["-b", &format!("{job}_1")])
        .status()
        .unwrap()
        .success());
    wait_gone(&job, Duration::from_secs(30));
    assert!(
        wait_until(Duration::from_secs(5), || procs_with(&o).is_empty()
            && live_procs_with_arg(&marker).is_empty()),
        "left running after Slurm reported the job gone: {:?} {:?}",
        procs_with(&o),
        live_procs_with_arg(&marker)
    );
    for r in records(&out).values() {
        assert_eq!(
            r["terminal_status"], "interrupted",
            "an honest record: {r:#}"
        );
    }
    gc_twice(&ctx, "scancel -s KILL / -b");

    // The time limit: SIGTERM at the limit, SIGKILL KillWait later.
    let out2 = ctx.out.join("run-time");
    let o2 = out2.display().to_string();
    let plan2 = plan_file(
        &ctx,
        "plan2",
        &cs,
        &[("deaf", &deaf)],
        1,
        "[slurm]\nsbatch_args = [\"--time=1\"]\n",
    );
    let t = Instant::now();
    ctx.cbrun(&["run", "--plan", &plan2, "--backend", "slurm", "--out", &o2])
        .assert_code(0, "submission");
    let job2 = job_id(&out2);
    assert!(fs::read_to_string(out2.join("slurm/array.sbatch"))
        .unwrap()
        .contains("#SBATCH --time=1\n"));
    wait_gone(&job2, Duration::from_secs(180));
    eprintln!("time limit: gone after {:.0} s", t.elapsed().as_secs_f64());
    assert!(
        t.elapsed() >= Duration::from_secs(55),
        "the job ended before its limit"
    );
    assert!(
        wait_until(Duration::from_secs(5), || procs_with(&o2).is_empty()
            && live_procs_with_arg(&marker).is_empty()),
        "left running after the time limit: {:?} {:?}",
        procs_with(&o2),
        live_procs_with_arg(&marker)
    );
    let recs = records(&out2);
    assert_eq!(recs.len(), 1);
    for r in recs.values() {
        assert_eq!(r["terminal_status"], "interrupted", "{r:#}");
        assert!(
            !r["finished_at"].is_null(),
            "SIGTERM at the limit ends the trial cleanly: {r:#}"
        );
    }
    gc_twice(&ctx, "the time limit");
}

/// What `scontrol show job JOB_TASK` says in field `key` (`Restarts`).
fn job_field(job_task: &str, key: &str) -> Option<String> {
    let o = Command::new("scontrol")
        .args(["show", "job", "-o", job_task])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_owned))
}

#[test]
fn scontrol_requeue_reruns_a_cut_trial_once_as_root_and_as_nobody() {
    if !slurm_ready() {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "slurm-requeue");
        let cs = cases(&ctx, &["case001"]);
        // Slow enough to be requeued in its solve phase; then it writes the
        // reference solution (reward 1) or nothing (reward 0) and submits.
        let src =
            fs::read(cs[0].join("controls/reference/app/src/versionkit/__init__.py")).unwrap();
        let b64 = base64(&src);
        let slow_ref = spec(
            &ctx,
            "slowref",
            &format!(
                "command = \"sleep 6; mkdir -p /app/src/versionkit && echo {b64} | base64 -d > /app/src/versionkit/__init__.py && echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n"
            ),
        );
        // The stub's sleep is told apart by its length (found to kill its
        // worker once the agent runs).
        let nap = format!("6.{:06}{}", std::process::id() % 1_000_000, who.uid() % 10);
        let slow_stub = spec(
            &ctx,
            "slowstub",
            &format!("command = \"sleep {nap}; echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n"),
        );
        let plan = plan_file(
            &ctx,
            "plan",
            &cs,
            &[("ref", &slow_ref), ("stub", &slow_stub)],
            1,
            "[slurm]\nparallel = 2\n",
        );
        let out = ctx.out.join("run");
        let o = out.display().to_string();
        ctx.cbrun(&["run", "--plan", &plan, "--backend", "slurm", "--out", &o])
            .assert_code(0, "submission");
        let job = job_id(&out);
        let solving = |cfg: &str| {
            fs::read_to_string(out.join(format!("trials/case001/{cfg}/1.status")))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .filter(|v| v["phase"] == "solve")
        };
        assert!(
            wait_until(Duration::from_secs(60), || solving("ref").is_some()
                && solving("stub").is_some()),
            "the two tasks never reached their solve phase"
        );
        let t = Instant::now();
        // Task 0: requeued while it runs (SIGTERM, then back to pending).
        let requeue = |task: &str| {
            let rq = Command::new("scontrol")
                .args(["requeue", task])
                .output()
                .unwrap();
            assert!(
                rq.status.success(),
                "scontrol requeue {task}: {}",
                String::from_utf8_lossy(&rq.stderr)
            );
        };
        requeue(&format!("{job}_0"));
        // Task 1: once its agent runs, its worker dies at once (a node
        // crash, an OOM kill), so its claim and its record's first write
        // are all that is left; then the failed task is requeued. (Not
        // while the sandbox is being built: a cbrun SIGKILLed then can
        // leave libcontainer's half-made processes behind, a separate bug.)
        assert!(
            wait_until(Duration::from_secs(30), || !live_procs_with_arg(&nap)
                .is_empty()),
            "task 1's agent never started"
        );
        let worker = solving("stub").unwrap()["pid"].as_i64().unwrap() as i32;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(worker),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(
            wait_until(Duration::from_secs(30), || job_field(
                &format!("{job}_1"),
                "JobState"
            )
            .is_some_and(|s| s != "RUNNING" && s != "PENDING" && s != "COMPLETING")),
            "task 1 did not end after its worker was killed: {:?}",
            job_field(&format!("{job}_1"), "JobState")
        );
        assert!(
            out.join("trials/case001/stub/1.claim").exists(),
            "the killed worker's claim is left for the rerun to break"
        );
        requeue(&format!("{job}_1"));
        wait_gone(&job, DEADLINE);
        eprintln!(
            "{}: requeued tasks done after {:.0} s",
            who.label(),
            t.elapsed().as_secs_f64()
        );
        // Slurm did requeue them (same job id, a second start).
        for task in 0..2 {
            assert_eq!(
                job_field(&format!("{job}_{task}"), "Restarts").as_deref(),
                Some("1"),
                "task {task} was not restarted"
            );
        }
        assert_eq!(job_id(&out), job, "no new submission");

        // The cut attempt is set aside, honest and finished.
        let first = json(&out.join("trials/case001/ref/1.attempt1/trial.json"));
        assert_eq!(first["terminal_status"], "interrupted", "{first:#}");
        assert_eq!(first["attempt"], 1, "{first:#}");
        assert!(!first["finished_at"].is_null(), "{first:#}");
        // The killed one's record is the honest one written at its start.
        let killed = json(&out.join("trials/case001/stub/1.attempt1/trial.json"));
        assert_eq!(killed["terminal_status"], "interrupted", "{killed:#}");
        assert_eq!(killed["attempt"], 1, "{killed:#}");
        assert!(killed["finished_at"].is_null(), "{killed:#}");
        for cfg in ["ref", "stub"] {
            assert!(
                !out.join(format!("trials/case001/{cfg}/1.attempt2"))
                    .exists(),
                "one attempt set aside for {cfg}"
            );
        }
        // The reruns evaluated them, with the right rewards.
        let recs = records(&out);
        assert_eq!(recs.len(), 2, "{recs:#?}");
        let re = &recs[&("case001".to_owned(), "ref".to_owned(), 1)];
        assert_eq!(re["pipeline_status"], "evaluated", "{re:#}");
        assert_eq!(re["attempt"], 2, "{re:#}");
        assert_eq!(re["reward"], 1, "{re:#}");
        let st = &recs[&("case001".to_owned(), "stub".to_owned(), 1)];
        assert_eq!(st["pipeline_status"], "evaluated", "{st:#}");
        assert_eq!(st["attempt"], 2, "{st:#}");
        assert_eq!(st["reward"], 0, "{st:#}");
        // results.jsonl: the interrupted attempt once, each evaluation once;
        // the killed worker wrote nothing there.
        let lines = results(&out);
        let of = |cfg: &str| -> Vec<(u64, String)> {
            lines
                .iter()
                .filter(|l| l["config"] == cfg)
                .map(|l| {
                    (
                        l["attempt"].as_u64().unwrap(),
                        l["record"]["terminal_status"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        };
        let r = of("ref");
        assert_eq!(r.len(), 2, "{lines:#?}");
        assert_eq!(r[0], (1, "interrupted".to_owned()), "{lines:#?}");
        assert_eq!(r[1].0, 2, "{lines:#?}");
        assert_ne!(r[1].1, "interrupted", "{lines:#?}");
        assert_eq!(of("stub").len(), 1, "{lines:#?}");
        assert_eq!(of("stub")[0].0, 2, "{lines:#?}");
        assert_eq!(
            lines
                .iter()
                .filter(|l| l["record"]["pipeline_status"] == "evaluated")
                .count(),
            2,
            "{lines:#?}"
        );
        let sm = json(&out.join("summary.json"));
        assert_eq!(sm["total"], 2, "{sm:#}");
        assert_eq!(sm["evaluated"], 2, "{sm:#}");
        assert_eq!(sm["passed"], 1, "{sm:#}");
        assert_eq!(sm["pending"], 0, "{sm:#}");
        // One log for both runs of a task (--open-mode=append), the
        // requeue said in it; the rerun of task 1 broke its own job's
        // claim; no claim or status file left.
        let log = fs::read_to_string(out.join(format!("slurm/logs/{job}_0.log"))).unwrap();
        assert!(log.contains("DUE TO JOB REQUEUE"), "{log}");
        assert_eq!(log.matches("task 0: ").count(), 2, "{log}");
        let log1 = fs::read_to_string(out.join(format!("slurm/logs/{job}_1.log"))).unwrap();
        assert!(
            log1.contains(&format!("same Slurm job slurm-{job}_1")),
            "{log1}"
        );
        assert_eq!(log1.matches("task 1: ").count(), 1, "{log1}");
        for f in [
            "ref/1.claim",
            "ref/1.status",
            "stub/1.claim",
            "stub/1.status",
        ] {
            assert!(!out.join("trials/case001").join(f).exists(), "{f} left");
        }
        assert!(
            wait_until(Duration::from_secs(5), || procs_with(&o).is_empty()),
            "{:?}",
            procs_with(&o)
        );
        // The SIGTERM path stopped its sandbox itself, and the rerun's own
        // `cbrun gc` removed what the killed worker left: nothing for gc.
        let g = ctx.cbrun(&["gc", "--json"]);
        g.assert_code(0, "gc after a requeue");
        let v: Value = g.stdout_json();
        assert_eq!(v["killed_processes"], 0, "{v:#}");
        assert_eq!(v["removed_runs"].as_array().map(Vec::len), Some(0), "{v:#}");
        ctx.assert_clean("a requeued Slurm task");
    }
}
