//! Resource limits: memory and fork bombs are contained where a cgroup is
//! available; without delegation, limits are reported as not enforced and
//! `--require-limits` refuses to run.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{live_procs_with_arg, Ctx, Who, PY};
use serde_json::json;

/// Allocates (and touches) 1 MiB at a time; gives up at 1 GiB so that a
/// limit that does not hold shows up as "ESCAPED", not as a host OOM.
const MEMORY_BOMB: &str = r#"
import sys
chunks = []
for i in range(1024):
    chunks.append(b"\x01" * (1 << 20))
print("ESCAPED", len(chunks))
sys.exit(3)
"#;

fn memory_bomb(who: Who) {
    let ctx = Ctx::new(who, "memory-bomb");
    let r = ctx.run(
        &["--memory", "64M", "--timeout", "30"],
        &[PY, "-c", MEMORY_BOMB],
    );
    let show = r.show();
    assert!(
        !r.stdout.contains("ESCAPED"),
        "attack: the memory bomb allocated 1 GiB under --memory 64M\n{show}"
    );
    r.assert_code(137, "memory bomb under --memory 64M");
    let o = r.outcome();
    assert_eq!(
        o["oom_killed"], true,
        "memory bomb: outcome must say oom_killed\n{show}"
    );
    assert_eq!(o["signal"], 9, "memory bomb: killed by SIGKILL\n{show}");
    assert_eq!(o["exit_code"], json!(null));
    assert_eq!(o["timed_out"], false);
    assert_eq!(o["cbrun_exit"], 137);
    let mem = &o["limits"]["memory"];
    assert_eq!(mem["requested"], 67108864, "limits.memory.requested: {mem}");
    assert_eq!(
        mem["enforced"], 67108864,
        "limits.memory.enforced must be what the kernel holds: {mem}"
    );
    assert!(
        mem["via"].as_str().unwrap_or("").starts_with("cgroup"),
        "limits.memory.via: {mem}"
    );
    if let Some(peak) = o["peak_memory_bytes"].as_u64() {
        assert!(
            peak <= 67108864 + (1 << 20),
            "peak memory {peak} exceeds the 64M limit"
        );
    }
    assert!(
        r.stderr.contains("OOM"),
        "cbrun should say the sandbox was OOM-killed\n{show}"
    );
    ctx.assert_clean("memory bomb");
}

#[test]
fn memory_bomb_is_oom_killed_root() {
    memory_bomb(Who::Root);
}

#[test]
fn memory_bomb_is_oom_killed_delegated_user() {
    memory_bomb(Who::Delegated);
}

/// The classic shell fork bomb; `$0` is the test's marker, so every copy of
/// the shell carries it in its argv. It collapses once forks start failing.
const SHELL_BOMB: &str = "f(){ f|f & }; f; sleep 1";

/// A fork bomb that keeps at it: every process forks in a loop for 3
/// seconds, children included, backing off briefly when fork fails.
const PYTHON_BOMB: &str = r#"
import os, time
end = time.time() + 3
while time.time() < end:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
"#;

fn fork_bomb(who: Who) {
    let ctx = Ctx::new(who, "fork-bomb");
    let mut opts = vec!["--pids", "64", "--timeout", "10"];
    if !who.has_cgroup() {
        opts.extend_from_slice(&["--nproc", "64"]);
    }
    let cap = if who.has_cgroup() { 64 } else { 80 };
    for bomb in [&["sh", "-c", SHELL_BOMB][..], &[PY, "-c", PYTHON_BOMB][..]] {
        let marker = ctx.marker("bomb");
        let mut cmd = bomb.to_vec();
        cmd.push(&marker);
        let started = Instant::now();
        let mut running = ctx.spawn(&opts, &cmd);
        let mut peak = 0;
        while running.is_running() && started.elapsed() < Duration::from_secs(30) {
            peak = peak.max(live_procs_with_arg(&marker).len());
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = running.wait(Duration::from_secs(30));
        let show = r.show();
        let what = bomb[0];
        assert!(
            r.code.is_some() && r.code != Some(125),
            "{what} fork bomb: cbrun must return the sandbox's status\n{show}"
        );
        assert!(
            r.elapsed < Duration::from_secs(20),
            "{what} fork bomb: cbrun took {:?}",
            r.elapsed
        );
        assert!(
            peak <= cap,
            "attack: {what} fork bomb reached {peak} processes under --pids 64 / --nproc 64 ({})",
            who.label()
        );
        if bomb[0] == PY {
            assert!(
                peak > 8,
                "{what} fork bomb: saw at most {peak} of its processes (test is vacuous)"
            );
        }
        let o = r.outcome();
        if who.has_cgroup() {
            assert_eq!(
                o["pids_limit_hit"], true,
                "{what} fork bomb: outcome must report pids_limit_hit\n{show}"
            );
            assert_eq!(o["limits"]["pids"]["enforced"], 64);
        } else {
            assert_eq!(
                o["limits"]["pids"]["enforced"],
                json!(null),
                "no delegation: pids must be reported as not enforced"
            );
            assert_eq!(o["limits"]["nproc"], 64);
        }
        // The host is fine: it can still fork, and nothing of the bomb is left.
        assert!(
            Command::new("true")
                .status()
                .map(|s| s.success())
                .unwrap_or(false),
            "host cannot fork after the bomb"
        );
        assert!(
            common::wait_until(Duration::from_secs(2), || live_procs_with_arg(&marker)
                .is_empty()),
            "attack: {what} fork bomb processes survived the sandbox: {:?}",
            live_procs_with_arg(&marker)
                .iter()
                .map(|p| p.pid)
                .collect::<Vec<_>>()
        );
        ctx.assert_clean(&format!("{what} fork bomb"));
    }
}

#[test]
fn fork_bomb_is_contained_root() {
    fork_bomb(Who::Root);
}

#[test]
fn fork_bomb_is_contained_delegated_user() {
    fork_bomb(Who::Delegated);
}

#[test]
fn fork_bomb_is_contained_undelegated_user() {
    fork_bomb(Who::Undelegated);
}

/// With a cgroup, every asked limit is enforced and read back, and
/// `--require-limits` is satisfied.
fn limits_enforced(who: Who) {
    let ctx = Ctx::new(who, "limits-enforced");
    let r = ctx.run(
        &[
            "--memory",
            "128M",
            "--pids",
            "100",
            "--cpus",
            "0.5",
            "--require-limits",
        ],
        &["true"],
    );
    r.assert_code(0, "--require-limits with a delegated cgroup");
    let l = &r.outcome()["limits"];
    assert_eq!(l["memory"]["enforced"], 134217728, "{l}");
    assert_eq!(l["pids"]["enforced"], 100, "{l}");
    assert_eq!(l["cpus"]["enforced"], 0.5, "{l}");
    assert!(
        l["cgroup"].is_string(),
        "limits.cgroup must name the sandbox's cgroup: {l}"
    );
    assert_eq!(r.outcome()["warnings"], json!([]), "{}", r.show());
    ctx.assert_clean("limits enforced");
}

#[test]
fn limits_are_enforced_root() {
    limits_enforced(Who::Root);
}

#[test]
fn limits_are_enforced_delegated_user() {
    limits_enforced(Who::Delegated);
}

#[test]
fn limits_unenforced_without_delegation_are_reported() {
    let ctx = Ctx::new(Who::Undelegated, "limits-unenforced");
    let r = ctx.run(
        &["--memory", "64M", "--pids", "64", "--cpus", "0.5"],
        &["true"],
    );
    r.assert_code(0, "limits without delegation (no --require-limits)");
    let show = r.show();
    assert!(
        r.stderr
            .lines()
            .any(|l| l.contains("warning") && l.contains("not enforced")),
        "a warning on stderr must say the limits are not enforced\n{show}"
    );
    let o = r.outcome();
    for (name, asked) in [
        ("memory", json!(67108864)),
        ("pids", json!(64)),
        ("cpus", json!(0.5)),
    ] {
        let l = &o["limits"][name];
        assert_eq!(l["requested"], asked, "limits.{name}: {l}");
        assert_eq!(
            l["enforced"],
            json!(null),
            "limits.{name} must not claim enforcement: {l}"
        );
        assert_eq!(l["via"], "none", "limits.{name}: {l}");
        assert!(
            l["note"].as_str().map(|n| !n.is_empty()).unwrap_or(false),
            "limits.{name} must say why: {l}"
        );
    }
    assert_eq!(o["limits"]["cgroup"], json!(null));
    assert!(
        !o["warnings"].as_array().unwrap().is_empty(),
        "outcome warnings must mention the unenforced limits"
    );

    // --require-limits refuses, runs nothing and leaves nothing.
    let ran = ctx.out_file("ran");
    let bind = format!("{}:/out", ctx.out.display());
    let r = ctx.run(
        &["--memory", "64M", "--require-limits", "--bind", &bind],
        &["sh", "-c", "touch /out/ran"],
    );
    r.assert_code(125, "--require-limits without delegation");
    assert!(
        !ran.exists(),
        "--require-limits refused, yet the command ran"
    );
    assert!(
        r.stderr.contains("--require-limits"),
        "the refusal must name --require-limits\n{}",
        r.show()
    );
    assert_eq!(
        r.stderr.trim().lines().count(),
        1,
        "the refusal must be one line\n{}",
        r.show()
    );
    assert_eq!(r.outcome()["cbrun_exit"], 125);
    assert!(r.outcome()["error"]
        .as_str()
        .unwrap_or("")
        .contains("--require-limits"));
    ctx.assert_clean("--require-limits refusal");
}
