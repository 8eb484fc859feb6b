//! The environment, `--json`, doctor and `--init`.

use super::*;

// ----------------------------------------------------------- environment

fn env_lines(s: &str) -> BTreeMap<String, String> {
    s.lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

fn environment(who: Who) {
    let ctx = Ctx::new(who, "env");
    let r = ctx.run(&["--env", "FOO=bar baz", "--hostname", "box1"], &["env"]);
    r.assert_code(0, "env inside");
    let env = env_lines(&r.stdout);
    assert!(
        !env.contains_key(CANARY_KEY) && !r.stdout.contains(CANARY_VALUE),
        "attack: host env var {CANARY_KEY} leaked into the sandbox\n{}",
        r.show()
    );
    assert_eq!(
        env.get("FOO").map(String::as_str),
        Some("bar baz"),
        "--env FOO must be visible\n{}",
        r.show()
    );
    assert_eq!(
        env.keys().map(String::as_str).collect::<Vec<_>>(),
        ["FOO", "HOME", "PATH"],
        "the environment inside must be PATH, HOME and --env only\n{}",
        r.show()
    );
    assert_eq!(env["HOME"], "/root");

    let r = ctx.run(
        &["--env-pass", CANARY_KEY, "--env-pass", "CBRUN_IT_UNSET_VAR"],
        &["env"],
    );
    r.assert_code(0, "--env-pass");
    let env = env_lines(&r.stdout);
    assert_eq!(
        env.get(CANARY_KEY).map(String::as_str),
        Some(CANARY_VALUE),
        "--env-pass must pass the variable\n{}",
        r.show()
    );
    assert!(
        !env.contains_key("CBRUN_IT_UNSET_VAR"),
        "--env-pass of an unset variable must pass nothing"
    );

    let r = ctx.run(
        &["--hostname", "box1"],
        &["cat", "/proc/sys/kernel/hostname"],
    );
    assert_eq!(r.stdout.trim(), "box1", "--hostname\n{}", r.show());
    ctx.assert_clean("environment");
}

#[test]
fn environment_is_clean_root() {
    environment(Who::Root);
}

#[test]
fn environment_is_clean_delegated_user() {
    environment(Who::Delegated);
}

#[test]
fn environment_is_clean_undelegated_user() {
    environment(Who::Undelegated);
}

// ---------------------------------------------------------------- --json

/// Every `--json` command prints one envelope on stdout: its result when
/// it did its job, its error (and exit status) when it did not.
#[test]
fn json_envelope_for_results_and_errors() {
    let ctx = Ctx::new(Who::Root, "json-envelope");
    let r = ctx.cbrun(&["doctor", "--json"]);
    r.assert_code(0, "doctor --json");
    let v = r.envelope_or_json();
    assert_eq!(v["cbrun"], env!("CARGO_PKG_VERSION"), "{v}");
    assert_eq!(v["command"], "doctor", "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["result"]["sandbox_possible"], true, "{v}");

    // A case folder that is not one: the error, as JSON, on stdout.
    let missing = ctx.dir.join("no-such-case");
    let out = ctx.out.join("json-out");
    let r = ctx.cbrun(&[
        "judge",
        missing.to_str().unwrap(),
        "--workspace",
        ctx.dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_ne!(r.code, Some(0), "{}", r.show());
    let v = r.envelope_or_json();
    assert_eq!(v["command"], "judge", "{v}");
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["exit_code"].as_i64().map(|c| c as i32), r.code, "{v}");
    let msg = v["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("no-such-case"), "{v}");
    // The same error also on stderr, for whoever reads the terminal.
    assert!(r.stderr.contains("no-such-case"), "{}", r.show());
}

/// `solve --json` prints its report and nothing else; without it, the
/// workspace's path.
#[test]
fn solve_json_prints_only_json() {
    let ctx = Ctx::new(Who::Root, "solve-json");
    let case = common::sample_case(&ctx, "case001");
    let out = ctx.out.join("solved");
    let r = ctx.cbrun(&[
        "solve",
        case.to_str().unwrap(),
        "--agent",
        "none",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    r.assert_code(0, "solve --json");
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is one JSON document ({e})\n{}", r.show()));
    assert_eq!(v["command"], "solve", "{v}");
    assert_eq!(v["result"]["end"], "not_submitted", "{v}");
    let out2 = ctx.out.join("solved2");
    let r = ctx.cbrun(&[
        "solve",
        case.to_str().unwrap(),
        "--agent",
        "none",
        "--out",
        out2.to_str().unwrap(),
    ]);
    r.assert_code(0, "solve");
    assert!(
        r.stdout
            .lines()
            .any(|l| l == format!("workspace {}", out2.join("workspace").display())),
        "{}",
        r.show()
    );
}

// ---------------------------------------------------------------- doctor

fn doctor(who: Who) {
    let ctx = Ctx::new(who, "doctor");
    let r = ctx.cbrun(&["doctor", "--json"]);
    r.assert_code(0, "cbrun doctor --json");
    let d = r.stdout_json();
    assert_eq!(d["sandbox_possible"], true, "{d}");
    assert_eq!(d["user"]["uid"], who.uid());
    assert_eq!(d["user"]["real_root"], who == Who::Root);
    let g = d["guarantees"].as_array().expect("guarantees list");
    let memory = g
        .iter()
        .find(|x| x["name"] == "memory limit")
        .unwrap_or_else(|| panic!("no memory guarantee: {d}"));
    let want = if who.has_cgroup() {
        "enforced"
    } else {
        "not-enforced"
    };
    assert_eq!(
        memory["status"],
        want,
        "doctor's memory limit status for {}: {memory}",
        who.label()
    );
    // Human output works too.
    let r = ctx.cbrun(&["doctor"]);
    r.assert_code(0, "cbrun doctor");
    assert!(!r.stdout.trim().is_empty());
    ctx.assert_clean("doctor");
}

#[test]
fn doctor_root() {
    doctor(Who::Root);
}

#[test]
fn doctor_delegated_user() {
    doctor(Who::Delegated);
}

#[test]
fn doctor_undelegated_user() {
    doctor(Who::Undelegated);
}

// ------------------------------------------------------------------ --init

/// Leaves orphans behind (each double-forked `true` exits at once, its
/// parent gone), then counts the zombies pid 1 has not reaped.
const ORPHANS: &str = r#"
import os, time
for _ in range(20):
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(0.05)
            os._exit(0)
        os._exit(0)
    os.wait()
time.sleep(0.5)
z = 0
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[0] == "Z":
                z += 1
        except OSError:
            pass
print(z)
"#;

fn zombies(who: Who) {
    let ctx = Ctx::new(who, "init");
    let plain = ctx.run(&[], &[PY, "-c", ORPHANS]);
    plain.assert_code(0, "orphans without --init");
    let with_init = ctx.run(&["--init"], &[PY, "-c", ORPHANS]);
    with_init.assert_code(0, "orphans with --init");
    let count = |r: &common::Run| r.stdout.trim().parse::<u32>().unwrap_or(u32::MAX);
    // Without an init the command (pid 1) never reaps its adopted orphans:
    // this shows the check can see zombies at all.
    assert!(
        count(&plain) >= 10,
        "expected unreaped zombies without --init\n{}",
        plain.show()
    );
    assert_eq!(
        count(&with_init),
        0,
        "--init left zombies\n{}",
        with_init.show()
    );
    // The command is pid 2 under --init, and a signal it sends itself works.
    let r = ctx.run(
        &["--init"],
        &["sh", "-c", "echo $$; kill -TERM $$; sleep 5; exit 3"],
    );
    r.assert_code(143, "sh -c 'kill -TERM $$' under --init");
    assert_eq!(
        r.stdout.trim(),
        "2",
        "the command must be pid 2 under --init\n{}",
        r.show()
    );
    assert_eq!(r.outcome()["signal"], 15, "{}", r.show());
    assert_eq!(r.outcome()["isolation"]["init"], true, "{}", r.show());
    ctx.assert_clean("--init");
}

#[test]
fn init_reaps_orphans_root() {
    zombies(Who::Root);
}

#[test]
fn init_reaps_orphans_undelegated_user() {
    zombies(Who::Undelegated);
}
