//! Lifecycle: timeouts, interrupts, SIGKILL of cbrun + gc, and many runs in
//! a row, each checked for leftovers (run dirs, cgroups, processes, mounts).

mod common;

use std::time::Duration;

use common::{live_procs_with_arg, wait_until, Ctx, Proc, Who};
use serde_json::Value;

/// Wait until the sandbox's `sleep MARKER` shows up on the host.
fn sleeper(marker: &str) -> Proc {
    let mut found = None;
    wait_until(Duration::from_secs(15), || {
        found = live_procs_with_arg(marker).into_iter().find(|p| {
            p.argv
                .first()
                .map(|a| a.ends_with("sleep"))
                .unwrap_or(false)
        });
        found.is_some()
    });
    found.unwrap_or_else(|| panic!("the sandbox's `sleep {marker}` never appeared on the host"))
}

fn no_process_with(marker: &str, attack: &str) {
    assert!(
        wait_until(Duration::from_secs(2), || live_procs_with_arg(marker)
            .is_empty()),
        "{attack}: processes with argument {marker} survived: {:?}",
        live_procs_with_arg(marker)
            .iter()
            .map(|p| (p.pid, p.argv.clone()))
            .collect::<Vec<_>>()
    );
}

// ---------------------------------------------------------------- timeout

fn timeout(who: Who) {
    let ctx = Ctx::new(who, "timeout");
    let m = ctx.sleep_marker();
    // A sleeper in its own session, double-forked away from the command.
    let script = format!("setsid sh -c 'sleep {m} & exit 0'; sleep 600");
    let running = ctx.spawn(
        &["--timeout", "2", "--kill-grace", "1"],
        &["sh", "-c", &script],
    );
    sleeper(&m);
    let r = running.wait(Duration::from_secs(30));
    let show = r.show();
    r.assert_code(124, "--timeout 2");
    let o = r.outcome();
    assert_eq!(o["timed_out"], true, "{show}");
    assert_eq!(o["interrupted"], false);
    assert_eq!(o["cbrun_exit"], 124);
    assert!(
        r.elapsed >= Duration::from_secs(2) && r.elapsed < Duration::from_secs(10),
        "timeout took {:?}",
        r.elapsed
    );
    assert!(
        r.stderr.contains("timed out"),
        "cbrun should say it timed out\n{show}"
    );
    no_process_with(
        &m,
        "attack: a setsid double-forked sleeper outlives --timeout",
    );
    ctx.assert_clean("timeout");
}

#[test]
fn timeout_kills_everything_root() {
    timeout(Who::Root);
}

#[test]
fn timeout_kills_everything_delegated_user() {
    timeout(Who::Delegated);
}

#[test]
fn timeout_kills_everything_undelegated_user() {
    timeout(Who::Undelegated);
}

// -------------------------------------------------------------- interrupt

fn interrupt(who: Who, signals: &[(&str, i32)]) {
    let ctx = Ctx::new(who, "interrupt");
    for (sig, code) in signals {
        let m = ctx.sleep_marker();
        let running = ctx.spawn(&["--kill-grace", "1"], &["sleep", &m]);
        sleeper(&m);
        running.signal(sig);
        let r = running.wait(Duration::from_secs(20));
        let show = r.show();
        r.assert_code(*code, &format!("SIG{sig} to cbrun mid-run"));
        let o = r.outcome();
        assert_eq!(
            o["interrupted"], true,
            "SIG{sig}: outcome must say interrupted\n{show}"
        );
        assert_eq!(o["timed_out"], false);
        assert_eq!(o["cbrun_exit"], *code);
        no_process_with(&m, &format!("SIG{sig} to cbrun"));
        ctx.assert_clean(&format!("SIG{sig} to cbrun"));
    }
}

#[test]
fn interrupt_kills_sandbox_root() {
    interrupt(Who::Root, &[("INT", 130), ("TERM", 143), ("HUP", 129)]);
}

#[test]
fn interrupt_kills_sandbox_delegated_user() {
    interrupt(Who::Delegated, &[("INT", 130), ("TERM", 143)]);
}

#[test]
fn interrupt_kills_sandbox_undelegated_user() {
    interrupt(Who::Undelegated, &[("INT", 130), ("TERM", 143)]);
}

// ------------------------------------------------------------- many runs

fn many_runs(who: Who, n: usize, opts: &[&str]) {
    let ctx = Ctx::new(who, "many-runs");
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let r = ctx.run(opts, &["true"]);
        assert_eq!(r.code, Some(0), "run {i} of {n} failed\n{}", r.show());
        ids.push(r.id());
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), n, "run ids must be unique");
    for id in &ids {
        ctx.assert_run_gone(id, &format!("{n} runs in a row"));
    }
    assert!(
        ctx.new_runs().is_empty(),
        "runs dir {} is not empty: {:?}",
        who.runs_dir().display(),
        ctx.new_runs()
    );
    ctx.assert_clean(&format!("{n} runs in a row"));
}

#[test]
fn two_hundred_runs_leave_nothing_root() {
    many_runs(Who::Root, 200, &["--memory", "64M", "--pids", "64"]);
}

#[test]
fn many_runs_leave_nothing_delegated_user() {
    many_runs(Who::Delegated, 30, &["--memory", "64M", "--pids", "64"]);
}

#[test]
fn many_runs_leave_nothing_undelegated_user() {
    many_runs(Who::Undelegated, 30, &[]);
}

// ------------------------------------------------------ SIGKILL, then gc

fn gc(ctx: &Ctx) -> Value {
    let r = ctx.cbrun(&["gc", "--json"]);
    r.assert_code(0, "cbrun gc --json");
    r.stdout_json()
}

fn sigkill_then_gc(who: Who) {
    let ctx = Ctx::new(who, "sigkill-gc");
    let m = ctx.sleep_marker();
    // --cpus too: every hierarchy cbrun uses then holds a cgroup for gc.
    let opts: &[&str] = if who.has_cgroup() {
        &["--memory", "100M", "--pids", "100", "--cpus", "1"]
    } else {
        &[]
    };
    let running = ctx.spawn(opts, &["sleep", &m]);
    let sleeper = sleeper(&m);
    let runs = ctx.new_runs();
    assert_eq!(
        runs.len(),
        1,
        "exactly one run dir while the sandbox runs: {runs:?}"
    );
    let id = runs[0].clone();
    if who.has_cgroup() {
        for base in who.cgroup_bases() {
            assert!(
                base.join(&id).is_dir(),
                "the running sandbox's cgroup {} is missing",
                base.join(&id).display()
            );
        }
    }

    running.signal("KILL");
    let r = running.wait(Duration::from_secs(10));
    assert_eq!(
        r.killed_by,
        Some(9),
        "cbrun should have died of SIGKILL\n{}",
        r.show()
    );
    assert!(
        wait_until(Duration::from_secs(5), || Proc::read(sleeper.pid)
            .map(|p| !p.alive())
            .unwrap_or(true)),
        "attack: the sandbox (pid {}) outlived a SIGKILLed cbrun",
        sleeper.pid
    );
    no_process_with(&m, "SIGKILL of cbrun");
    assert!(
        who.runs_dir().join(&id).exists(),
        "the dead run's dir should be left for gc (it is what gc works from)"
    );

    let rep = gc(&ctx);
    assert!(
        rep["removed_runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == id.as_str()),
        "gc must remove the dead run {id}: {rep}"
    );
    assert_eq!(rep["errors"], serde_json::json!([]), "gc errors: {rep}");
    if who.has_cgroup() {
        assert!(
            rep["removed_cgroups"].as_u64().unwrap_or(0) >= who.cgroup_bases().len() as u64,
            "gc must remove the dead run's cgroups: {rep}"
        );
    }
    ctx.assert_run_gone(&id, "gc");
    let again = gc(&ctx);
    assert_eq!(
        again["removed_runs"],
        serde_json::json!([]),
        "a second gc must find nothing: {again}"
    );
    assert_eq!(
        again["removed_cgroups"], 0,
        "a second gc must find nothing: {again}"
    );
    assert_eq!(
        again["killed_processes"], 0,
        "a second gc must find nothing: {again}"
    );
    ctx.assert_clean("SIGKILL of cbrun + gc");
}

#[test]
fn sigkill_of_cbrun_then_gc_root() {
    sigkill_then_gc(Who::Root);
}

#[test]
fn sigkill_of_cbrun_then_gc_delegated_user() {
    sigkill_then_gc(Who::Delegated);
}

#[test]
fn sigkill_of_cbrun_then_gc_undelegated_user() {
    sigkill_then_gc(Who::Undelegated);
}

/// A root run with its own CBRUN_STATE_DIR is live, not garbage, for a
/// root run using the default state root.
#[test]
fn state_roots_do_not_collect_each_others_live_runs() {
    let ctx = Ctx::new(Who::Root, "state-roots");
    let state = ctx.dir.join("state");
    let state_s = state.display().to_string();
    let m = ctx.sleep_marker();
    let running = ctx.spawn_env(
        &["--memory", "64M", "--kill-grace", "1"],
        &["sleep", &m],
        &[("CBRUN_STATE_DIR", &state_s)],
    );
    let s = sleeper(&m);
    let r = ctx.run(&["--memory", "64M"], &["true"]);
    r.assert_code(0, "a second root run with the default state root");
    let g = gc(&ctx);
    assert_eq!(g["errors"], serde_json::json!([]), "{g}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        Proc::read(s.pid).map(|p| p.alive()).unwrap_or(false),
        "a live sandbox of another state root was killed by a run / gc of the default state root"
    );
    running.signal("TERM");
    let r = running.wait(Duration::from_secs(20));
    r.assert_code(143, "SIGTERM to the CBRUN_STATE_DIR run");
    assert!(
        std::fs::read_dir(state.join("runs"))
            .map(|d| d.count())
            .unwrap_or(0)
            == 0,
        "CBRUN_STATE_DIR runs dir must be empty afterwards"
    );
    ctx.assert_clean("two state roots");
}

// ------------------------------------------------- failed builds kill nothing

/// libcontainer kills every pid of the cgroup it was given when a build
/// fails. Whatever cbrun gives it, a failed sandbox setup must not reach a
/// process outside the sandbox: a host process started by the test must
/// survive builds that fail inside libcontainer.
fn failed_build_spares_host(who: Who) {
    let ctx = Ctx::new(who, "failbuild");
    let mut canary = std::process::Command::new("sleep")
        .arg("120")
        .spawn()
        .expect("starting the canary");
    for cmd in [&["no-such-command-xyz"][..], &["/etc/hostname"][..]] {
        let r = ctx.run(&[], cmd);
        assert!(
            matches!(r.code, Some(126) | Some(127)),
            "a failing command lookup must fail the run\n{}",
            r.show()
        );
    }
    let alive = canary.try_wait().map(|s| s.is_none()).unwrap_or(false);
    let _ = canary.kill();
    let _ = canary.wait();
    assert!(
        alive,
        "attack: a failed sandbox build killed a process outside the sandbox"
    );
    ctx.assert_clean("failed builds");
}

#[test]
fn failed_build_spares_host_root() {
    failed_build_spares_host(Who::Root);
}

#[test]
fn failed_build_spares_host_undelegated_user() {
    failed_build_spares_host(Who::Undelegated);
}
