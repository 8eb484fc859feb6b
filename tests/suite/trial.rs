//! Trials end to end, driven through the real binary: every terminal
//! status, the denylist fix attempt, the allowlist proxy, the hidden-test
//! canary, concurrent trials, a judge timeout, malformed cases, and
//! `cbrun validate`. Agents here are small shell/Python programs in spec
//! files written by the tests; the oracle is `replay:`.


use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

const TRIAL_DEADLINE: Duration = Duration::from_secs(180);
const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// A world-readable copy of a sample case inside the test's folder (the
/// repository may sit where an unprivileged user cannot read it).
fn case(ctx: &Ctx, name: &str) -> PathBuf {
    let dst = ctx.dir.join("cases").join(name);
    if !dst.exists() {
        fs::create_dir_all(dst.parent().unwrap()).unwrap();
        let st = Command::new("cp")
            .arg("-r")
            .arg(Path::new(REPO).join("cases").join(name))
            .arg(&dst)
            .status()
            .unwrap();
        assert!(st.success());
        let st = Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(ctx.dir.join("cases"))
            .status()
            .unwrap();
        assert!(st.success());
    }
    dst
}

fn control(case_dir: &Path, name: &str) -> String {
    format!(
        "replay:{}",
        case_dir.join("controls").join(name).join("app").display()
    )
}

/// Writes an agent spec (TOML) readable by every test user.
fn spec(ctx: &Ctx, name: &str, body: &str) -> PathBuf {
    let p = ctx.dir.join(format!("{name}.toml"));
    fs::write(&p, format!("name = \"{name}\"\n{body}")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p
}

struct Trial {
    run: Run,
    dir: PathBuf,
    record: Value,
}

fn trial(ctx: &Ctx, label: &str, case_dir: &Path, agent: &str, extra: &[&str]) -> Trial {
    let dir = ctx.out.join(label);
    let mut args: Vec<String> = vec![
        "trial".into(),
        case_dir.display().to_string(),
        "--agent".into(),
        agent.into(),
        "--out".into(),
        dir.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let run = ctx.spawn_args(&args, &[], None).wait(TRIAL_DEADLINE);
    let record = read_record(&dir, &run);
    Trial { run, dir, record }
}

fn read_record(dir: &Path, run: &Run) -> Value {
    let text = fs::read_to_string(dir.join("trial.json"))
        .unwrap_or_else(|e| panic!("no trial.json in {} ({e})\n{}", dir.display(), run.show()));
    serde_json::from_str(&text).unwrap()
}

impl Trial {
    fn show(&self) -> String {
        format!(
            "{}\nrecord: {}",
            self.run.show(),
            serde_json::to_string_pretty(&self.record).unwrap()
        )
    }
    fn status(&self) -> &str {
        self.record["terminal_status"].as_str().unwrap_or("?")
    }
    fn reward(&self) -> i64 {
        self.record["reward"].as_i64().unwrap_or(-1)
    }
    /// Every file the record points to exists.
    fn assert_files_exist(&self) {
        let files = self.record["files"].as_object().expect("files map");
        for (k, v) in files {
            let p = self.dir.join(v.as_str().unwrap());
            assert!(
                p.exists(),
                "record file {k} = {} is missing\n{}",
                p.display(),
                self.show()
            );
        }
    }
}

#[test]
fn replay_of_the_reference_gets_reward_1_and_a_complete_record() {
    for who in [Who::Root, Who::Delegated, Who::Undelegated] {
        let ctx = Ctx::new(who, "trial-ref");
        let c = case(&ctx, "case001");
        let t = trial(&ctx, "ref", &c, &control(&c, "reference"), &[]);
        t.run.assert_code(0, "trial of the reference");
        assert!(t.run.stdout.contains("reward 1"), "{}", t.show());
        assert!(
            t.run
                .stdout
                .contains(&t.dir.join("trial.json").display().to_string()),
            "the record's path is printed\n{}",
            t.show()
        );
        let r = &t.record;
        assert_eq!(t.status(), "completed", "{}", t.show());
        assert_eq!(t.reward(), 1, "{}", t.show());
        assert_eq!(r["case_id"], "case001");
        assert_eq!(r["test_count"], 39, "{}", t.show());
        assert_eq!(r["passed"], 39);
        assert_eq!(r["failed"], 0);
        assert_eq!(r["errors"], 0);
        assert!(r["failure_class"].is_null());
        assert!(r["judge_error"].is_null());
        assert_eq!(r["judge_exit_code"], 0);
        assert!(r["agent_spec_name"]
            .as_str()
            .unwrap()
            .starts_with("replay:"));
        for k in ["started_at", "finished_at", "host", "cbrun_version"] {
            assert!(r[k].is_string(), "{k} missing\n{}", t.show());
        }
        assert!(r["judge_seconds"].as_f64().unwrap() > 0.0);
        assert_eq!(r["images"]["judge"]["rootfs"], "host");
        // The judge's limits are what the kernel reports, or say why not.
        let mem = &r["limits"]["judge"]["memory"];
        if who.has_cgroup() {
            assert_eq!(mem["enforced"], 8u64 << 30, "{}", t.show());
        } else {
            assert!(mem["enforced"].is_null(), "{}", t.show());
            assert!(mem["note"].is_string(), "{}", t.show());
        }
        t.assert_files_exist();
        for f in [
            "reward.txt",
            "reward.json",
            "final_report.json",
            "final_tests.log",
        ] {
            assert!(
                t.dir.join("logs/verifier").join(f).is_file(),
                "{f}\n{}",
                t.show()
            );
        }
        assert_eq!(
            fs::read_to_string(t.dir.join("logs/verifier/reward.txt"))
                .unwrap()
                .trim(),
            "1"
        );
        // The judge saw a copy: the workspace holds no test byproducts.
        assert!(!t.dir.join("workspace/src/versionkit/__pycache__").exists());
        assert!(!t.dir.join(".scratch").exists(), "scratch left behind");
        ctx.assert_clean("a trial");
    }
}

#[test]
fn negative_controls_get_reward_0_as_implementation_failures() {
    let ctx = Ctx::new(Who::Root, "trial-neg");
    let c = case(&ctx, "case001");
    let t = trial(&ctx, "stub", &c, &control(&c, "stub"), &[]);
    t.run.assert_code(0, "a trial with reward 0 (evaluated)");
    assert_eq!(t.status(), "completed", "{}", t.show());
    assert_eq!(t.reward(), 0);
    assert_eq!(t.record["failure_class"], "implementation");
    assert!(t.record["failed"].as_u64().unwrap() + t.record["errors"].as_u64().unwrap() > 0);
    let t = trial(&ctx, "longtail", &c, &control(&c, "longtail"), &[]);
    assert_eq!(t.reward(), 0, "{}", t.show());
    let failed: Vec<String> = serde_json::from_value(t.record["failed_tests"].clone()).unwrap();
    assert_eq!(failed.len(), 1, "{}", t.show());
    assert!(
        failed[0].ends_with("test_caret_zero_major_zero_minor"),
        "{failed:?}"
    );
    ctx.assert_clean("negative controls");
}

#[test]
fn agent_none_is_not_submitted_and_no_judge_runs() {
    let ctx = Ctx::new(Who::Delegated, "trial-none");
    let c = case(&ctx, "case001");
    let t = trial(&ctx, "none", &c, "none", &[]);
    t.run.assert_code(0, "trial with agent none");
    assert_eq!(t.status(), "not_submitted", "{}", t.show());
    assert_eq!(t.reward(), 0);
    assert_eq!(t.record["failure_class"], "implementation");
    assert!(t.record["judge_exit_code"].is_null());
    assert!(!t.dir.join("logs/verifier/final_tests.log").exists());
    assert_eq!(
        fs::read_to_string(t.dir.join("logs/verifier/reward.txt"))
            .unwrap()
            .trim(),
        "0"
    );
    t.assert_files_exist();
}

#[test]
fn a_clean_exit_or_a_wrong_marker_is_not_a_submission() {
    let ctx = Ctx::new(Who::Root, "trial-marker");
    let c = case(&ctx, "case001");
    let a = spec(
        &ctx,
        "wrong-marker",
        "command = \"echo 'CODINGBENCH_SUBMIT please' > /logs/agent/submit; exit 0\"\n",
    );
    let t = trial(&ctx, "wrong", &c, a.to_str().unwrap(), &[]);
    assert_eq!(t.status(), "not_submitted", "{}", t.show());
    assert_eq!(t.record["agent_exit_code"], 0);
    assert_eq!(t.reward(), 0);
}

#[test]
fn a_spec_agent_that_writes_the_reference_and_submits_gets_reward_1() {
    // The agent's program carries the reference solution (base64) in its
    // command; it runs as a non-root user inside the solve sandbox.
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "trial-spec");
        let c = case(&ctx, "case001");
        let src = fs::read(c.join("controls/reference/app/src/versionkit/__init__.py")).unwrap();
        let b64 = base64(&src);
        let a = spec(
            &ctx,
            "writer",
            &format!(
                "command = \"mkdir -p /app/src/versionkit && echo {b64} | base64 -d > /app/src/versionkit/__init__.py && id -u > /logs/agent/uid && printf 'CODINGBENCH_SUBMIT\\\\n' > /logs/agent/submit\"\nrun_as = \"nonroot\"\n"
            ),
        );
        let t = trial(&ctx, "writer", &c, a.to_str().unwrap(), &[]);
        assert_eq!(t.status(), "completed", "{}", t.show());
        assert_eq!(t.reward(), 1, "{}", t.show());
        assert_eq!(t.record["agent_exit_code"], 0);
        assert_eq!(t.record["agent_spec_name"], "writer");
        assert!(t.record["agent_spec_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"));
        assert_eq!(
            fs::read_to_string(t.dir.join("logs/agent/uid"))
                .unwrap()
                .trim(),
            "1000",
            "run_as nonroot"
        );
        t.assert_files_exist();
        ctx.assert_clean("a spec agent trial");
    }
}

#[test]
fn solve_timeout_kills_the_agent_and_records_timeout() {
    let ctx = Ctx::new(Who::Root, "trial-timeout");
    let c = case(&ctx, "case001");
    let marker = ctx.sleep_marker();
    let a = spec(
        &ctx,
        "sleeper",
        &format!("command = \"(setsid sleep {marker} &) ; echo CODINGBENCH_SUBMIT > /logs/agent/submit; sleep {marker}\"\n"),
    );
    let t = trial(
        &ctx,
        "timeout",
        &c,
        a.to_str().unwrap(),
        &["--solve-timeout", "2"],
    );
    assert_eq!(t.status(), "timeout", "{}", t.show());
    t.run
        .assert_code(0, "a trial whose agent ran out of time (evaluated)");
    assert_eq!(t.reward(), 0);
    assert_eq!(t.record["stalled"], false);
    assert!(t.run.elapsed < Duration::from_secs(30), "{}", t.show());
    assert!(
        live_procs_with_arg(&marker).is_empty(),
        "agent processes survived"
    );
    ctx.assert_clean("a solve timeout");
}

#[test]
fn the_stall_watchdog_stops_a_silent_agent() {
    let ctx = Ctx::new(Who::Delegated, "trial-stall");
    let c = case(&ctx, "case001");
    let marker = ctx.sleep_marker();
    let a = spec(
        &ctx,
        "staller",
        &format!("command = \"echo starting; sleep {marker}\"\n"),
    );
    let t = trial(
        &ctx,
        "stall",
        &c,
        a.to_str().unwrap(),
        &["--stall-timeout", "2", "--solve-timeout", "120"],
    );
    assert_eq!(t.status(), "timeout", "{}", t.show());
    assert_eq!(t.record["stalled"], true, "{}", t.show());
    assert!(t.run.elapsed < Duration::from_secs(40), "{}", t.show());
    assert!(live_procs_with_arg(&marker).is_empty());
    ctx.assert_clean("a stalled agent");
}

#[test]
fn a_failing_install_script_is_an_infrastructure_error() {
    let ctx = Ctx::new(Who::Root, "trial-error");
    let c = case(&ctx, "case001");
    let a = spec(
        &ctx,
        "broken-install",
        "command = \"echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\ninstall_script = \"echo installing; exit 3\"\n",
    );
    let t = trial(&ctx, "err", &c, a.to_str().unwrap(), &[]);
    t.run
        .assert_code(1, "a trial that failed for infrastructure");
    assert_eq!(t.status(), "error", "{}", t.show());
    assert_eq!(t.record["failure_class"], "infrastructure");
    assert!(
        t.record["error"].as_str().unwrap().contains("install"),
        "{}",
        t.show()
    );
    assert!(t.dir.join("logs/cbrun/install.log").is_file());
    t.assert_files_exist();
}

#[test]
fn a_banned_import_gets_one_fix_attempt() {
    let ctx = Ctx::new(Who::Root, "trial-fix");
    let c = case(&ctx, "case001");
    // The oracle cannot change its workspace: the fix attempt finds the
    // same import, so the trial ends with the violation recorded.
    let t = trial(&ctx, "shortcut", &c, &control(&c, "shortcut"), &[]);
    assert_eq!(t.status(), "completed", "{}", t.show());
    assert_eq!(t.reward(), 0);
    assert_eq!(t.record["denylist_fix_attempts"], 1);
    let v = t.record["denylist_violation"].as_str().unwrap_or_default();
    assert!(v.contains("semver"), "{}", t.show());
    assert!(
        t.record["judge_exit_code"].is_null(),
        "no judge after a violation"
    );

    // An agent that imports the banned module first and removes it when
    // told: the fix is accepted and the judge decides.
    let src = fs::read(c.join("controls/reference/app/src/versionkit/__init__.py")).unwrap();
    let b64 = base64(&src);
    let script = format!(
        "set -e; mkdir -p /app/src/versionkit; echo {b64} | base64 -d > /app/src/versionkit/__init__.py; \
         if grep -q 'rejected' /logs/agent/instruction.md; then rm -f /app/src/versionkit/fast.py; echo fixed >> /logs/agent/attempts; \
         else printf 'import semver  # speed\\\\n' > /app/src/versionkit/fast.py; echo first >> /logs/agent/attempts; fi; \
         echo CODINGBENCH_SUBMIT > /logs/agent/submit"
    );
    let a = spec(&ctx, "fixer", &format!("command = \"{script}\"\n"));
    let t = trial(&ctx, "fixer", &c, a.to_str().unwrap(), &[]);
    assert_eq!(t.status(), "completed", "{}", t.show());
    assert_eq!(t.record["denylist_fix_attempts"], 1, "{}", t.show());
    assert!(t.record["denylist_violation"].is_null(), "{}", t.show());
    assert_eq!(t.reward(), 1, "{}", t.show());
    assert_eq!(
        fs::read_to_string(t.dir.join("logs/agent/attempts")).unwrap(),
        "first\nfixed\n"
    );
    let first_instruction = fs::read_to_string(t.dir.join("logs/agent/instruction.md")).unwrap();
    assert!(
        first_instruction.contains("fast.py"),
        "the fix message names the violation"
    );
}

#[test]
fn the_solve_sandbox_never_holds_the_hidden_tests() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "trial-canary");
        let c = case(&ctx, "case001");
        // The canary sits in the hidden tests; a phrase from the PRD is the
        // positive control that the search does reach files.
        let canary = "CBRUN-CANARY-case001-7f3a9c";
        let prd = fs::read_to_string(c.join("public/Full_PRD.md")).unwrap();
        let phrase: String = prd
            .lines()
            .find(|l| l.len() > 30)
            .unwrap()
            .chars()
            .take(25)
            .collect();
        let script = format!(
            "grep -rIl -F --exclude-dir=proc --exclude-dir=dev --exclude-dir=sys -e '{canary}' / > /logs/agent/canary 2>/dev/null; \
             grep -rIl -F --exclude-dir=proc --exclude-dir=dev --exclude-dir=sys -e '{}' / > /logs/agent/phrase 2>/dev/null; \
             ls -la / /environment > /logs/agent/ls; true",
            phrase.replace('\'', "")
        );
        let a = spec(&ctx, "searcher", &format!("command = \"{script}\"\n"));
        let t = trial(
            &ctx,
            "canary",
            &c,
            a.to_str().unwrap(),
            &["--solve-timeout", "170"],
        );
        assert_eq!(t.status(), "not_submitted", "{}", t.show());
        let found = fs::read_to_string(t.dir.join("logs/agent/canary")).unwrap();
        assert!(
            found.trim().is_empty(),
            "hidden tests visible in the solve sandbox: {found}"
        );
        let seen = fs::read_to_string(t.dir.join("logs/agent/phrase")).unwrap();
        assert!(
            seen.contains("/environment/prd/Full_PRD.md"),
            "the search must reach the PRD ({seen})"
        );
    }
}

/// A tiny HTTP server on the host's loopback counting its connections.
fn http_server(body: &'static str) -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            h.fetch_add(1, Ordering::SeqCst);
            let mut s = s;
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, hits)
}

#[test]
fn allowlist_egress_reaches_the_model_api_and_never_the_code_host() {
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "trial-net");
        let c = case(&ctx, "case001");
        let (api, api_hits) = http_server("model-says-hello");
        let (code, code_hits) = http_server("source-code");
        let probe = ctx.dir.join("probe.py");
        fs::write(
            &probe,
            format!(
                r#"
import os, socket, urllib.request
out = open('/logs/agent/net', 'w')
def attempt(name, f):
    try:
        out.write(f"{{name}} ok {{f()}}\n")
    except Exception as e:
        out.write(f"{{name}} fail {{type(e).__name__}}\n")
attempt('api-via-proxy', lambda: urllib.request.urlopen('http://api.model.test:{api}/v1', timeout=10).read().decode())
attempt('codehost-via-proxy', lambda: urllib.request.urlopen('http://github.com:{code}/x', timeout=10).read().decode())
def raw(port):
    s = socket.create_connection(('127.0.0.1', port), timeout=3); s.close(); return 'connected'
attempt('api-raw', lambda: raw({api}))
attempt('codehost-raw', lambda: raw({code}))
attempt('outside-raw', lambda: socket.create_connection(('10.0.0.1', 80), timeout=3))
out.close()
"#
            ),
        )
        .unwrap();
        fs::set_permissions(&probe, fs::Permissions::from_mode(0o644)).unwrap();
        fs::create_dir_all(c.join("public")).unwrap();
        // The probe travels in the agent's command (base64), like any agent program.
        let b64 = base64(&fs::read(&probe).unwrap());
        let a = spec(
            &ctx,
            "netprobe",
            &format!("command = \"echo {b64} | base64 -d | python3 -\"\n"),
        );
        let t = trial(
            &ctx,
            "net",
            &c,
            a.to_str().unwrap(),
            &[
                "--net",
                "allowlist",
                "--allow",
                "*",
                "--resolve",
                "api.model.test=127.0.0.1",
                "--resolve",
                "github.com=127.0.0.1",
            ],
        );
        let net = fs::read_to_string(t.dir.join("logs/agent/net"))
            .unwrap_or_else(|_| panic!("probe wrote nothing\n{}", t.show()));
        assert!(
            net.contains("api-via-proxy ok model-says-hello"),
            "{net}\n{}",
            t.show()
        );
        assert!(net.contains("codehost-via-proxy fail"), "{net}");
        assert!(net.contains("api-raw fail"), "raw connect must fail: {net}");
        assert!(net.contains("codehost-raw fail"), "{net}");
        assert!(net.contains("outside-raw fail"), "{net}");
        assert_eq!(
            api_hits.load(Ordering::SeqCst),
            1,
            "the API saw exactly the proxied request"
        );
        assert_eq!(
            code_hits.load(Ordering::SeqCst),
            0,
            "the code host saw nothing"
        );
        let conns = &t.record["network"]["connections"];
        assert_eq!(t.record["network"]["policy"], "allowlist");
        assert_eq!(conns["allowed"], 1, "{}", t.show());
        assert_eq!(conns["denied"], 1, "{}", t.show());
        let log = fs::read_to_string(t.dir.join("logs/cbrun/network.jsonl")).unwrap();
        assert!(
            log.contains("github.com") && log.contains("denied"),
            "{log}"
        );
        assert!(
            log.contains("api.model.test") && log.contains("allowed"),
            "{log}"
        );
        ctx.assert_clean("an allowlist trial");
    }
}

#[test]
fn four_concurrent_trials_do_not_cross_talk() {
    let ctx = Ctx::new(Who::Root, "trial-conc");
    let c1 = case(&ctx, "case001");
    let c2 = case(&ctx, "case002");
    let c3 = case(&ctx, "case003");
    let plan = [
        ("a", c1.clone(), control(&c1, "reference"), 1),
        ("b", c1.clone(), control(&c1, "longtail"), 0),
        ("c", c2.clone(), control(&c2, "reference"), 1),
        ("d", c3.clone(), control(&c3, "reference"), 1),
    ];
    let running: Vec<_> = plan
        .iter()
        .map(|(label, c, agent, _)| {
            let dir = ctx.out.join(label);
            let args: Vec<String> = vec![
                "trial".into(),
                c.display().to_string(),
                "--agent".into(),
                agent.clone(),
                "--out".into(),
                dir.display().to_string(),
            ];
            (dir, ctx.spawn_args(&args, &[], None))
        })
        .collect();
    for ((dir, r), (label, c, _, want)) in running.into_iter().zip(plan.iter()) {
        let run = r.wait(TRIAL_DEADLINE);
        let rec = read_record(&dir, &run);
        assert_eq!(rec["reward"], *want, "trial {label}\n{}", run.show());
        let case_id = c.file_name().unwrap().to_str().unwrap();
        assert_eq!(rec["case_id"], case_id, "trial {label}");
        let report: Value = serde_json::from_str(
            &fs::read_to_string(dir.join("logs/verifier/final_report.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            report["case_id"], case_id,
            "trial {label} judged its own case"
        );
    }
    ctx.assert_clean("four concurrent trials");
}

#[test]
fn a_judge_that_runs_too_long_is_stopped_and_recorded() {
    let ctx = Ctx::new(Who::Root, "judge-timeout");
    let c = case(&ctx, "case001");
    let ws = ctx.dir.join("slow-ws");
    fs::create_dir_all(ws.join("src/versionkit")).unwrap();
    let marker = ctx.sleep_marker();
    fs::write(
        ws.join("src/versionkit/__init__.py"),
        format!("import subprocess\nsubprocess.run(['sleep', '{marker}'])\n"),
    )
    .unwrap();
    Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&ws)
        .status()
        .unwrap();
    let out = ctx.out.join("j");
    let run = ctx.cbrun(&[
        "judge",
        c.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--judge-timeout",
        "2",
        "--json",
    ]);
    run.assert_code(0, "judge with a timeout");
    let report = run.stdout_json();
    assert_eq!(report["reward"], 0);
    assert_eq!(report["timed_out"], true, "{}", run.show());
    assert!(
        report["judge_error"]
            .as_str()
            .unwrap()
            .contains("did not finish"),
        "{}",
        run.show()
    );
    assert!(run.elapsed < Duration::from_secs(30));
    assert!(live_procs_with_arg(&marker).is_empty());
    ctx.assert_clean("a judge timeout");
}

#[test]
fn malformed_cases_are_refused_with_one_line_and_nothing_written() {
    let ctx = Ctx::new(Who::Root, "trial-bad");
    let fixtures = Path::new(FIXTURES).join("cases");
    for (name, file) in [
        ("bad-manifest", "source/manifest.json"),
        ("bad-recipe", "source/recipe.lock.json"),
        ("bad-denylist", "source/denylist.json"),
        ("bad-test-manifest", "milestones/final/test_manifest.json"),
        ("bad-resources", "source/env/resources.json"),
        ("bad-expect", "expect.json"),
        ("bad-json", ".json"),
    ] {
        let out = ctx.out.join(name);
        let run = ctx.cbrun(&[
            "trial",
            fixtures.join(name).to_str().unwrap(),
            "--agent",
            "none",
            "--out",
            out.to_str().unwrap(),
        ]);
        run.assert_code(2, name);
        let err = run.stderr.trim();
        assert_eq!(err.lines().count(), 1, "{name}: one line\n{}", run.show());
        assert!(err.starts_with("cbrun: error:"), "{}", run.show());
        assert!(
            err.contains(file),
            "{name}: the error names {file}\n{}",
            run.show()
        );
        assert!(!out.exists(), "{name}: nothing may be written");
    }
    // Bad flags, too.
    let c = case(&ctx, "case001");
    for (args, needle) in [
        (
            vec!["--agent", "replay:/nonexistent/dir"],
            "/nonexistent/dir",
        ),
        (vec!["--agent", "no-such-agent"], "no-such-agent"),
        (
            vec!["--agent", "none", "--net", "allowlist", "--allow", "a b"],
            "a b",
        ),
        (
            vec!["--agent", "none", "--solve-timeout", "0"],
            "--solve-timeout",
        ),
        (vec!["--agent", "none", "--memory", "12XB"], "12XB"),
    ] {
        let out = ctx.out.join("flags");
        let mut all = vec!["trial", c.to_str().unwrap(), "--out", out.to_str().unwrap()];
        all.extend(args.iter());
        let run = ctx.cbrun(&all);
        run.assert_code(2, needle);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.show());
        assert!(run.stderr.contains(needle), "{}", run.show());
        assert!(!out.exists());
    }
    // An image that is not in the store is a usage error too.
    let out = ctx.out.join("image");
    let store = ctx.dir.join("store");
    let args: Vec<String> = [
        "trial",
        c.to_str().unwrap(),
        "--agent",
        "none",
        "--image",
        "nosuch:1",
        "--out",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let run = ctx
        .spawn_args(&args, &[("CBRUN_HOME", store.to_str().unwrap())], None)
        .wait(Duration::from_secs(60));
    run.assert_code(2, "--image nosuch:1");
    assert!(run.stderr.contains("nosuch:1"), "{}", run.show());
    assert!(!out.exists());
}

#[test]
fn an_existing_out_folder_is_never_overwritten() {
    let ctx = Ctx::new(Who::Root, "trial-exists");
    let c = case(&ctx, "case001");
    let out = ctx.out.join("taken");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("keep"), "precious").unwrap();
    let run = ctx.cbrun(&[
        "trial",
        c.to_str().unwrap(),
        "--agent",
        "none",
        "--out",
        out.to_str().unwrap(),
    ]);
    run.assert_code(2, "existing --out");
    assert!(run.stderr.contains("--out"), "{}", run.show());
    assert_eq!(fs::read_to_string(out.join("keep")).unwrap(), "precious");
}

#[test]
fn an_interrupted_trial_is_recorded_as_interrupted_and_leaves_nothing() {
    let ctx = Ctx::new(Who::Root, "trial-int");
    let c = case(&ctx, "case001");
    let marker = ctx.sleep_marker();
    let a = spec(&ctx, "longrun", &format!("command = \"sleep {marker}\"\n"));
    for (sig, label) in [("INT", "int"), ("KILL", "kill")] {
        let dir = ctx.out.join(label);
        let args: Vec<String> = vec![
            "trial".into(),
            c.display().to_string(),
            "--agent".into(),
            a.display().to_string(),
            "--out".into(),
            dir.display().to_string(),
        ];
        let r = ctx.spawn_args(&args, &[], None);
        assert!(
            wait_until(Duration::from_secs(20), || !live_procs_with_arg(&marker)
                .is_empty()),
            "the agent did not start"
        );
        r.signal(sig);
        let run = r.wait(Duration::from_secs(30));
        if sig == "INT" {
            run.assert_code(130, "an interrupted trial");
        }
        if sig == "KILL" {
            let gc = ctx.cbrun(&["gc"]);
            gc.assert_code(0, "gc after a killed trial");
        }
        let rec = read_record(&dir, &run);
        assert_eq!(
            rec["terminal_status"],
            "interrupted",
            "{sig}\n{}",
            run.show()
        );
        assert_eq!(rec["reward"], 0);
        assert!(
            wait_until(Duration::from_secs(5), || live_procs_with_arg(&marker)
                .is_empty()),
            "{sig}: the agent survived"
        );
    }
    ctx.assert_clean("interrupted trials");
}

#[test]
fn validate_passes_on_the_sample_cases_and_catches_a_wrong_expectation() {
    let ctx = Ctx::new(Who::Root, "validate");
    let cases: Vec<PathBuf> = ["case001", "case002", "case003"]
        .iter()
        .map(|n| case(&ctx, n))
        .collect();
    let mut args = vec!["validate".to_string()];
    args.extend(cases.iter().map(|c| c.display().to_string()));
    let run = ctx.spawn_args(&args, &[], None).wait(TRIAL_DEADLINE);
    run.assert_code(0, "validate of the sample cases");
    let rows = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("case0"))
        .count();
    assert_eq!(rows, 11, "one row per control\n{}", run.show());
    assert!(!run.stdout.contains("MISMATCH"), "{}", run.show());

    // A stub that claims reward 1 must be caught.
    let expect = cases[0].join("controls/stub/expect.json");
    fs::write(&expect, r#"{"reward": 1, "note": "wrong on purpose"}"#).unwrap();
    let run = ctx.cbrun(&["validate", cases[0].to_str().unwrap()]);
    run.assert_code(1, "validate with a wrong expectation");
    assert!(run.stdout.contains("MISMATCH"), "{}", run.show());
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn package_manager_shims_refuse_banned_installs_by_any_path() {
    if !Path::new("/usr/bin/pip3").exists() {
        eprintln!("note: /usr/bin/pip3 missing (apt-get install python3-pip); shim test skipped");
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "trial-shims");
        let c = case(&ctx, "case001");
        let script = "for c in 'pip3 install semver' '/usr/bin/pip3 install Semver==2.0' \
             'python3 -m pip install semantic_version' 'pip3 install -q node_semver'; do \
             sh -c \\\"$c\\\" >> /logs/agent/out 2>&1; echo \\\"rc=$?\\\" >> /logs/agent/out; done; \
             pip3 --version >> /logs/agent/version 2>&1; echo \\\"rc=$?\\\" >> /logs/agent/version";
        let a = spec(&ctx, "installer", &format!("command = \"{script}\"\n"));
        let t = trial(&ctx, "shims", &c, a.to_str().unwrap(), &[]);
        let out = fs::read_to_string(t.dir.join("logs/agent/out"))
            .unwrap_or_else(|_| panic!("no output\n{}", t.show()));
        assert_eq!(
            out.matches("[cbrun denylist] blocked install of").count(),
            4,
            "{out}\n{}",
            t.show()
        );
        assert_eq!(out.matches("rc=1").count(), 4, "{out}");
        let version = fs::read_to_string(t.dir.join("logs/agent/version")).unwrap();
        assert!(
            version.contains("rc=0") && version.contains("pip "),
            "{version}"
        );
        // The shim holds no ban in clear text.
        assert!(!t.record.to_string().contains("node-semver"));
    }
}

#[test]
fn forwarded_credentials_reach_the_agent_and_only_their_names_are_recorded() {
    let ctx = Ctx::new(Who::Root, "trial-env");
    let c = case(&ctx, "case001");
    let a = spec(
        &ctx,
        "envy",
        "command = \"printf %s \\\"$CBRUN_IT_SECRET/$CBRUN_IT_CANARY\\\" > /logs/agent/env\"\nenv_passthrough = [\"CBRUN_IT_SECRET\", \"CBRUN_IT_UNSET\"]\n",
    );
    let dir = ctx.out.join("env");
    let args: Vec<String> = vec![
        "trial".into(),
        c.display().to_string(),
        "--agent".into(),
        a.display().to_string(),
        "--out".into(),
        dir.display().to_string(),
    ];
    let run = ctx
        .spawn_args(
            &args,
            &[
                ("CBRUN_IT_SECRET", "topsecret-123"),
                (CANARY_KEY, CANARY_VALUE),
            ],
            None,
        )
        .wait(TRIAL_DEADLINE);
    let rec = read_record(&dir, &run);
    assert_eq!(
        fs::read_to_string(dir.join("logs/agent/env")).unwrap(),
        "topsecret-123/",
        "listed variables pass, others never do"
    );
    assert_eq!(rec["env_keys"], serde_json::json!(["CBRUN_IT_SECRET"]));
    for f in ["trial.json", "logs/cbrun/agent.outcome.json"] {
        let text = fs::read_to_string(dir.join(f)).unwrap();
        assert!(
            !text.contains("topsecret-123"),
            "{f} holds the secret's value"
        );
    }
}

#[test]
fn solve_and_judge_run_separately_and_a_stored_workspace_can_be_rejudged() {
    let ctx = Ctx::new(Who::Delegated, "solve-judge");
    let c = case(&ctx, "case002");
    let solved = ctx.out.join("solved");
    let run = ctx.cbrun(&[
        "solve",
        c.to_str().unwrap(),
        "--agent",
        &control(&c, "reference"),
        "--out",
        solved.to_str().unwrap(),
    ]);
    run.assert_code(0, "cbrun solve");
    assert!(
        solved.join("workspace/jpick").is_dir()
            || solved.join("workspace").read_dir().unwrap().count() > 0
    );
    assert!(
        !solved.join("logs/verifier/final_tests.log").exists(),
        "solve does not judge"
    );
    for round in 0..2 {
        let out = ctx.out.join(format!("judged-{round}"));
        let run = ctx.cbrun(&[
            "judge",
            c.to_str().unwrap(),
            "--workspace",
            solved.join("workspace").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        run.assert_code(0, "cbrun judge");
        let report = run.stdout_json();
        assert_eq!(report["reward"], 1, "round {round}\n{}", run.show());
        assert_eq!(report["counts"]["total"], 30);
        assert_eq!(report["exit_code"], 0);
    }
    ctx.assert_clean("solve then judge");
}

#[test]
fn the_judge_enforces_runtime_bans_and_import_bans_on_workspace_code() {
    let ctx = Ctx::new(Who::Root, "judge-bans");
    let c = case(&ctx, "case001");
    let reference =
        fs::read_to_string(c.join("controls/reference/app/src/versionkit/__init__.py")).unwrap();
    let judge = |label: &str, case_dir: &Path, extra: &str| -> Value {
        let ws = ctx.dir.join(label);
        fs::create_dir_all(ws.join("src/versionkit")).unwrap();
        fs::write(
            ws.join("src/versionkit/__init__.py"),
            format!("{extra}\n{reference}"),
        )
        .unwrap();
        Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&ws)
            .status()
            .unwrap();
        let out = ctx.out.join(label);
        let run = ctx.cbrun(&[
            "judge",
            case_dir.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        run.assert_code(0, label);
        run.stdout_json()
    };
    // case001 bans sockets and network for the product.
    let r = judge(
        "socket",
        &c,
        "import socket as _s\n_s.socket(_s.AF_INET, _s.SOCK_STREAM)",
    );
    assert_eq!(r["reward"], 0, "{r}");
    assert!(!r["judge_ban_hits"].as_array().unwrap().is_empty(), "{r}");
    // A module on the import ban is refused at import time, even when the
    // judge's Python has it (`csv` stands in for an installed upstream).
    let banned = ctx.dir.join("cases-banned");
    Command::new("cp")
        .arg("-r")
        .arg(&c)
        .arg(&banned)
        .status()
        .unwrap();
    let deny = banned.join("source/denylist.json");
    let mut d: Value = serde_json::from_str(&fs::read_to_string(&deny).unwrap()).unwrap();
    d["import_ban"].as_array_mut().unwrap().push("csv".into());
    fs::write(&deny, serde_json::to_string_pretty(&d).unwrap()).unwrap();
    let r = judge("import", &banned, "import csv");
    assert_eq!(r["reward"], 0, "{r}");
    let log = fs::read_to_string(ctx.out.join("import/logs/verifier/final_tests.log")).unwrap();
    assert!(log.contains("csv"), "{log}");
    // The same import is fine where it is not banned.
    let r = judge("allowed", &c, "import csv");
    assert_eq!(r["reward"], 1, "{r}");
}
