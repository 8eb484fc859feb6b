//! The command line: exit statuses, bad input, clap's messages, help,
//! version, completions and manual pages, identities, output files, the
//! outcome JSON, the environment, and `doctor`.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::{
    live_procs_with_arg, wait_until, Ctx, Proc, Who, CANARY_KEY, CANARY_VALUE, PY, ROOT_RANGE_LEN,
    ROOT_RANGE_START,
};
use serde_json::{json, Value};

// ------------------------------------------------------------ exit codes

fn exit_codes(who: Who) {
    let ctx = Ctx::new(who, "exit-codes");
    let r = ctx.run(&[], &["sh", "-c", "exit 42"]);
    r.assert_code(42, "sh -c 'exit 42'");
    let o = r.outcome();
    assert_eq!(
        (
            o["exit_code"].clone(),
            o["signal"].clone(),
            o["cbrun_exit"].clone()
        ),
        (json!(42), json!(null), json!(42))
    );

    // Killed by a signal (a fault is delivered even to pid 1): 128+N.
    let r = ctx.run(&[], &[PY, "-c", "import ctypes; ctypes.string_at(0)"]);
    r.assert_code(139, "command killed by SIGSEGV");
    let o = r.outcome();
    assert_eq!(
        (o["exit_code"].clone(), o["signal"].clone()),
        (json!(null), json!(11)),
        "{}",
        r.show()
    );

    let r = ctx.run(&[], &["no-such-cmd-cbrun-it"]);
    r.assert_code(127, "-- no-such-cmd");
    assert!(
        r.stderr.contains("not found") && r.stderr.contains("no-such-cmd-cbrun-it"),
        "a missing command needs a clear message\n{}",
        r.show()
    );
    assert_eq!(r.outcome()["cbrun_exit"], 127, "{}", r.show());

    let r = ctx.run(&[], &["/etc/passwd"]);
    r.assert_code(126, "-- /etc/passwd (not executable)");
    assert!(r.stderr.contains("not executable"), "{}", r.show());
    ctx.assert_clean("exit-code runs");
}

#[test]
fn exit_codes_mirror_the_command_root() {
    exit_codes(Who::Root);
}

#[test]
fn exit_codes_mirror_the_command_delegated_user() {
    exit_codes(Who::Delegated);
}

#[test]
fn exit_codes_mirror_the_command_undelegated_user() {
    exit_codes(Who::Undelegated);
}

// ------------------------------------------------------------- bad input

/// Which `--outcome` a bad input is expected to leave.
#[derive(Clone, Copy, PartialEq)]
enum Expect {
    /// Rejected while parsing the command line: no outcome is required.
    ParseError,
    /// Rejected by cbrun after parsing: `{"error", "cbrun_exit": 125}`.
    ErrorOutcome,
}

/// (arguments, strings stderr must contain, outcome expectation)
fn bad_inputs() -> Vec<(Vec<&'static str>, Vec<&'static str>, Expect)> {
    use Expect::*;
    vec![
        (
            vec!["--rootfs", "/nonexistent-cbrun-it"],
            vec!["--rootfs", "/nonexistent-cbrun-it"],
            ErrorOutcome,
        ),
        (vec!["--bind", "/etc"], vec!["--bind", "/etc"], ParseError),
        (
            vec!["--bind", "/etc:relative"],
            vec!["--bind", "/etc:relative"],
            ParseError,
        ),
        (
            vec!["--bind", "/nonexistent-cbrun-it:/x"],
            vec!["--bind", "/nonexistent-cbrun-it"],
            ErrorOutcome,
        ),
        (
            vec!["--memory", "12XB"],
            vec!["--memory", "12XB"],
            ErrorOutcome,
        ),
        (vec!["--no-such-flag"], vec!["--no-such-flag"], ParseError),
        (vec!["--user", "root"], vec!["--user", "root"], ParseError),
        (
            vec!["--timeout", "abc"],
            vec!["--timeout", "abc"],
            ParseError,
        ),
        (
            vec!["--workdir", "relative"],
            vec!["--workdir", "relative"],
            ErrorOutcome,
        ),
        (
            vec!["--env", "NOEQUALS"],
            vec!["--env", "NOEQUALS"],
            ParseError,
        ),
        (vec!["--pids", "0"], vec!["--pids", "0"], ErrorOutcome),
    ]
}

fn run_bad(ctx: &Ctx, args: &[&str]) -> common::Run {
    let outcome = ctx.out_file(&format!("bad-{}.json", args.join("_").replace('/', "_")));
    let outcome_s = outcome.display().to_string();
    let mut full = vec!["sandbox", "run", "--outcome", &outcome_s];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--", "true"]);
    ctx.cbrun_with_outcome(&full, &outcome)
}

fn bad_input(who: Who) {
    let ctx = Ctx::new(who, "bad-input");
    for (args, names, _) in bad_inputs() {
        let r = run_bad(&ctx, &args);
        let show = r.show();
        r.assert_code(125, &format!("bad input {args:?}"));
        for n in names {
            assert!(
                r.stderr.contains(n),
                "bad input {args:?}: stderr must name {n:?}\n{show}"
            );
        }
        if let Some(o) = &r.outcome {
            assert_eq!(o["cbrun_exit"], 125, "{show}");
            assert!(
                o["error"]
                    .as_str()
                    .map(|e| e.contains(args[0]))
                    .unwrap_or(false),
                "outcome error must name {}: {o}",
                args[0]
            );
        }
        assert!(
            ctx.new_runs().is_empty(),
            "bad input {args:?} left a run dir: {:?}",
            ctx.new_runs()
        );
    }
    ctx.assert_clean("bad input");
}

/// Every error cbrun reports after parsing its command line also goes to
/// the `--outcome` file as `{"error": ..., "cbrun_exit": 125}`.
#[test]
fn bad_input_writes_an_error_outcome() {
    let ctx = Ctx::new(Who::Root, "bad-input-outcome");
    let mut bad = Vec::new();
    for (args, _, expect) in bad_inputs() {
        if expect != Expect::ErrorOutcome {
            continue;
        }
        let r = run_bad(&ctx, &args);
        match &r.outcome {
            Some(o)
                if o["cbrun_exit"] == 125
                    && o["error"]
                        .as_str()
                        .map(|e| e.contains(args[0]))
                        .unwrap_or(false) => {}
            other => bad.push(format!(
                "{args:?}: outcome {other:?}, stderr {:?}",
                r.stderr.trim()
            )),
        }
    }
    assert!(
        bad.is_empty(),
        "error outcome missing or wrong:\n  {}",
        bad.join("\n  ")
    );
    ctx.assert_clean("bad input");
}

#[test]
fn bad_input_exits_125_and_names_the_value_root() {
    bad_input(Who::Root);
}

#[test]
fn bad_input_exits_125_and_names_the_value_undelegated_user() {
    bad_input(Who::Undelegated);
}

/// A bad value cbrun finds is one line; a command line clap refuses keeps
/// clap's whole message (tips, usage, the pointer to `--help`) behind
/// `cbrun: error:`.
#[test]
fn bad_values_are_one_line_and_parse_errors_keep_clap_s_message() {
    let ctx = Ctx::new(Who::Root, "bad-input-lines");
    let mut bad = Vec::new();
    for (args, _, expect) in bad_inputs() {
        let r = run_bad(&ctx, &args);
        let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let first_ok = lines
            .first()
            .is_some_and(|l| l.starts_with("cbrun: error: ") && l.contains(args[0]));
        let ok = match expect {
            Expect::ErrorOutcome => lines.len() == 1 && first_ok,
            Expect::ParseError => {
                first_ok
                    && r.stderr
                        .trim_end()
                        .ends_with("For more information, try '--help'.")
            }
        };
        if !ok {
            bad.push(format!("{args:?}: {:?}", r.stderr));
        }
    }
    assert!(
        bad.is_empty(),
        "bad input must give one `cbrun: error:` line naming the flag (plus clap's tips for parse errors):\n  {}",
        bad.join("\n  ")
    );
    ctx.assert_clean("bad input");
}

// ------------------------------------------------- clap's own messages

#[test]
fn clap_errors_keep_their_usage_tips_and_suggestions() {
    let ctx = Ctx::new(Who::Root, "clap-errors");
    // Unknown flag: the tip about `--`, the usage, and 125 (sandbox run's
    // documented status for a bad flag).
    let r = ctx.cbrun(&["sandbox", "run", "--no-such-flag", "--", "true"]);
    r.assert_code(125, "sandbox run --no-such-flag");
    let first = r.stderr.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "cbrun: error: unexpected argument '--no-such-flag' found",
        "{}",
        r.show()
    );
    for want in [
        "tip: to pass '--no-such-flag' as a value, use '-- --no-such-flag'",
        "Usage: cbrun sandbox run [OPTIONS] -- <CMD>...",
        "For more information, try '--help'.",
    ] {
        assert!(r.stderr.contains(want), "missing {want:?}\n{}", r.show());
    }

    // A misspelt command: "did you mean".
    let r = ctx.cbrun(&["sandboxx", "run"]);
    r.assert_code(125, "cbrun sandboxx");
    assert!(
        r.stderr.contains("unrecognized subcommand 'sandboxx'")
            && r.stderr.contains("a similar subcommand exists: 'sandbox'"),
        "{}",
        r.show()
    );

    // A missing required argument is named.
    let r = ctx.cbrun(&["sandbox", "run"]);
    r.assert_code(125, "sandbox run without a command");
    assert!(
        r.stderr
            .starts_with("cbrun: error: the following required arguments were not provided")
            && r.stderr.contains("<CMD>..."),
        "{}",
        r.show()
    );

    // No command at all: the help on stderr, not the description as an error.
    let r = ctx.cbrun(&[]);
    r.assert_code(125, "cbrun without a command");
    assert!(
        r.stderr.contains("Usage: cbrun <COMMAND>")
            && r.stderr.contains("Commands:")
            && !r.stderr.contains("error: Daemonless"),
        "{}",
        r.show()
    );
    assert!(r.stdout.is_empty(), "{}", r.show());

    // `trial` says 2 for usage errors.
    let r = ctx.cbrun(&["trial", "--no-such-flag"]);
    r.assert_code(2, "trial --no-such-flag");
    assert!(
        r.stderr
            .starts_with("cbrun: error: unexpected argument '--no-such-flag' found"),
        "{}",
        r.show()
    );

    // Help and version are no errors: stdout, exit 0.
    for args in [
        &["--help"][..],
        &["sandbox", "run", "--help"],
        &["help", "trial"],
    ] {
        let r = ctx.cbrun(args);
        r.assert_code(0, &args.join(" "));
        assert!(
            r.stdout.contains("Usage: cbrun") && r.stderr.is_empty(),
            "{args:?}\n{}",
            r.show()
        );
    }
}

/// `NAME  description` lines of a help section (`Commands:`, `Options:`,
/// `Arguments:`): (the entry, its description), the description empty when
/// there is none on its line or, indented deeper, on the next.
fn help_section(help: &str, title: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = help.lines().collect();
    let Some(start) = lines.iter().position(|l| *l == title) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut i = start + 1;
    while i < lines.len() && !lines[i].trim().is_empty() {
        let l = lines[i];
        let t = l.trim_start();
        let (entry, desc) = match t.find("  ") {
            Some(k) => (t[..k].to_owned(), t[k..].trim().to_owned()),
            None => (t.to_owned(), String::new()),
        };
        let mut desc = desc;
        if desc.is_empty() && i + 1 < lines.len() && indent(lines[i + 1]) > indent(l) {
            desc = lines[i + 1].trim().to_owned();
        }
        // Continuation lines of a description indented under the entry.
        i += 1;
        while i < lines.len()
            && !lines[i].trim().is_empty()
            && indent(lines[i]) > indent(l)
            && !lines[i].trim_start().starts_with('-')
        {
            i += 1;
        }
        out.push((entry, desc));
    }
    out
}

/// Every command's `--help` works and says what each of its arguments and
/// flags is for (no flag with an empty description).
#[test]
fn every_command_and_flag_is_described_in_help() {
    let ctx = Ctx::new(Who::Root, "help");
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    let mut undescribed = Vec::new();
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let r = ctx.cbrun(&args);
        r.assert_code(0, &args.join(" "));
        seen += 1;
        for title in ["Arguments:", "Options:"] {
            for (entry, desc) in help_section(&r.stdout, title) {
                if desc.is_empty() {
                    undescribed.push(format!("cbrun {} {entry}", path.join(" ")));
                }
            }
        }
        for (name, desc) in help_section(&r.stdout, "Commands:") {
            if desc.is_empty() {
                undescribed.push(format!("cbrun {} {name}", path.join(" ")));
            }
            if name != "help" {
                let mut sub = path.clone();
                sub.push(name);
                todo.push(sub);
            }
        }
    }
    // cbrun, its 12 commands, and sandbox run, case check, image's 11 and
    // admin delegate-cgroups.
    assert!(seen >= 27, "only {seen} commands found");
    assert!(
        undescribed.is_empty(),
        "--help shows no description for:\n  {}",
        undescribed.join("\n  ")
    );
    let r = ctx.cbrun(&["sandbox", "run", "--help"]);
    let opts = help_section(&r.stdout, "Options:");
    for flag in [
        "--stdout <FILE>",
        "--stderr <FILE>",
        "--hostname <HOSTNAME>",
    ] {
        assert!(
            opts.iter().any(|(e, d)| e == flag && !d.is_empty()),
            "sandbox run --help: {flag}\n{}",
            r.stdout
        );
    }
}

/// `git` in the source tree, if it is a checkout and git is there.
fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn version_names_the_git_commit() {
    let ctx = Ctx::new(Who::Root, "version");
    let r = ctx.cbrun(&["--version"]);
    r.assert_code(0, "--version");
    let line = r.stdout.trim_end();
    let base = format!("cbrun {}", env!("CARGO_PKG_VERSION"));
    let top = git(&["rev-parse", "--show-toplevel"]);
    let checkout = top.as_deref().map(std::path::Path::new)
        == Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    match git(&["rev-parse", "HEAD"]).filter(|_| checkout) {
        Some(head) => {
            let commit = line
                .strip_prefix(&format!("{base} ("))
                .and_then(|r| r.strip_suffix(')'))
                .unwrap_or_else(|| panic!("--version {line:?}: not `{base} (COMMIT)`"));
            assert!(
                commit.len() >= 7 && head.starts_with(commit),
                "--version {line:?} does not name HEAD {head}"
            );
        }
        // A tarball build: the package version alone.
        None => assert_eq!(line, base),
    }
}

#[test]
fn completions_for_every_shell() {
    let ctx = Ctx::new(Who::Root, "completions");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let r = ctx.cbrun(&["completions", shell]);
        r.assert_code(0, &format!("completions {shell}"));
        for word in ["sandbox", "kill-grace", "delegate-cgroups", "completions"] {
            assert!(
                r.stdout.contains(word),
                "completions {shell}: no {word:?}\n{}",
                r.show()
            );
        }
    }
    // The bash script is valid bash, and completes `cbrun sandbox r`.
    let script = ctx.out_file("cbrun.bash");
    let r = ctx.cbrun(&["completions", "bash"]);
    std::fs::write(&script, &r.stdout).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(cbrun sandbox r); COMP_CWORD=2; _cbrun cbrun r sandbox; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .expect("running bash");
    let words = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && words.lines().any(|w| w == "run"),
        "bash completion of `cbrun sandbox r`: {words:?} {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let r = ctx.cbrun(&["completions", "tcsh"]);
    r.assert_code(125, "completions tcsh");
    assert!(
        r.stderr.contains("invalid value 'tcsh'") && r.stderr.contains("bash"),
        "{}",
        r.show()
    );
}

#[test]
fn man_pages_for_cbrun_and_every_command() {
    let ctx = Ctx::new(Who::Root, "man");
    let r = ctx.cbrun(&["man"]);
    r.assert_code(0, "man");
    for want in [
        ".TH cbrun 1",
        ".SH NAME",
        ".SH SYNOPSIS",
        "cbrun\\-sandbox(1)",
    ] {
        assert!(
            r.stdout.contains(want),
            "cbrun man: no {want:?}\n{}",
            r.show()
        );
    }
    let dir = ctx.out_file("man");
    std::fs::create_dir(&dir).unwrap();
    let r = ctx.cbrun(&["man", "--dir", dir.to_str().unwrap()]);
    r.assert_code(0, "man --dir");
    let page = std::fs::read_to_string(dir.join("cbrun-sandbox-run.1"))
        .unwrap_or_else(|e| panic!("cbrun-sandbox-run.1: {e}\n{}", r.show()));
    assert!(
        page.contains(".TH cbrun-sandbox-run 1")
            && page.contains(&format!("cbrun {}", env!("CARGO_PKG_VERSION")))
            && page.contains("kill\\-grace"),
        "{page}"
    );
    for name in [
        "cbrun.1",
        "cbrun-trial.1",
        "cbrun-image-import.1",
        "cbrun-admin-delegate-cgroups.1",
    ] {
        assert!(dir.join(name).is_file(), "man --dir wrote no {name}");
    }
    let r = ctx.cbrun(&["man", "--dir", "/nonexistent-cbrun-it"]);
    r.assert_code(125, "man --dir /nonexistent");
    assert!(r.stderr.contains("/nonexistent-cbrun-it"), "{}", r.show());
}

// ------------------------------------------------------------ identities

fn identities(who: Who) {
    let ctx = Ctx::new(who, "identities");
    let r = ctx.run(&["--user", "1000:1000"], &["sh", "-c", "id -u; id -g"]);
    r.assert_code(0, "--user 1000:1000");
    assert_eq!(
        r.stdout.split_whitespace().collect::<Vec<_>>(),
        ["1000", "1000"],
        "--user 1000:1000 inside\n{}",
        r.show()
    );
    let r = ctx.run(&[], &["id", "-u"]);
    assert_eq!(
        r.stdout.trim(),
        "0",
        "default identity inside is 0\n{}",
        r.show()
    );

    // From the host, the sandbox's processes are never host root.
    let base = who.sandbox_host_uids().start;
    for (opts, inside) in [(&[][..], 0u32), (&["--user", "1000:1000"][..], 1000)] {
        let (p, _) = observe_sleeper(&ctx, opts);
        assert!(
            p.uids.iter().all(|u| *u != 0),
            "attack: a sandbox process runs as host uid 0: {:?}",
            p.uids
        );
        assert!(
            p.gids.iter().all(|g| *g != 0),
            "attack: a sandbox process runs as host gid 0: {:?}",
            p.gids
        );
        let want = if who == Who::Root {
            base + inside
        } else {
            base
        };
        assert_eq!(
            p.uids,
            vec![want; 4],
            "host uid of the sandbox's process ({}, inside uid {inside})",
            who.label()
        );
        if who == Who::Root {
            assert!((ROOT_RANGE_START..ROOT_RANGE_START + ROOT_RANGE_LEN).contains(&p.uids[0]));
        }
    }
    ctx.assert_clean("identity runs");
}

/// Run `sleep` in a sandbox, read its process from the host, then stop the
/// run with SIGINT.
fn observe_sleeper(ctx: &Ctx, opts: &[&str]) -> (Proc, common::Run) {
    let m = ctx.sleep_marker();
    let mut all = opts.to_vec();
    all.extend_from_slice(&["--kill-grace", "1"]);
    let running = ctx.spawn(&all, &["sleep", &m]);
    let mut p = None;
    wait_until(Duration::from_secs(15), || {
        p = live_procs_with_arg(&m).into_iter().next();
        p.is_some()
    });
    let p = p.expect("the sandbox's sleeper never appeared on the host");
    running.signal("INT");
    let r = running.wait(Duration::from_secs(20));
    r.assert_code(130, "SIGINT to cbrun");
    (p, r)
}

/// The outcome's id_mapping says which host ids the sandbox really has.
fn id_mapping_is_truthful(who: Who) {
    let ctx = Ctx::new(who, "id-mapping");
    let (p, r) = observe_sleeper(&ctx, &[]);
    let idm = &r.outcome()["isolation"]["id_mapping"];
    let inside = idm["uid"].as_u64().unwrap_or(u64::MAX);
    let host = map_entries(&idm["uid_map"])
        .into_iter()
        .find(|(i, _, l)| inside >= *i && inside < i + l)
        .map(|(i, h, _)| h + (inside - i));
    assert_eq!(
        host,
        Some(u64::from(p.uids[0])),
        "outcome id_mapping {idm} says inside uid {inside} is host uid {host:?}, but the sandbox's process runs as host uid {} ({})",
        p.uids[0],
        who.label()
    );
    ctx.assert_clean("id mapping");
}

#[test]
fn id_mapping_is_truthful_root() {
    id_mapping_is_truthful(Who::Root);
}

#[test]
fn id_mapping_is_truthful_delegated_user() {
    id_mapping_is_truthful(Who::Delegated);
}

#[test]
fn id_mapping_is_truthful_undelegated_user() {
    id_mapping_is_truthful(Who::Undelegated);
}

#[test]
fn identities_root() {
    identities(Who::Root);
}

#[test]
fn identities_delegated_user() {
    identities(Who::Delegated);
}

#[test]
fn identities_undelegated_user() {
    identities(Who::Undelegated);
}

// ----------------------------------------------- stdio files and outcome

fn has_keys(v: &Value, keys: &[&str], what: &str) {
    for k in keys {
        assert!(v.get(k).is_some(), "outcome: {what} lacks {k:?}: {v}");
    }
}

fn stdio_and_outcome(who: Who) {
    let ctx = Ctx::new(who, "stdio-outcome");
    let m = ctx.marker("stdio");
    let out = ctx.out_file("stdout.txt");
    let err = ctx.out_file("stderr.txt");
    let (out_s, err_s) = (out.display().to_string(), err.display().to_string());
    let script = format!("echo out-{m}; echo err-{m} >&2; exit 3");
    let r = ctx.run(
        &["--stdout", &out_s, "--stderr", &err_s],
        &["sh", "-c", &script],
    );
    r.assert_code(3, "--stdout/--stderr run");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap_or_default(),
        format!("out-{m}\n"),
        "--stdout file"
    );
    assert_eq!(
        std::fs::read_to_string(&err).unwrap_or_default(),
        format!("err-{m}\n"),
        "--stderr file"
    );
    assert!(
        !r.stdout.contains(&m) && !r.stderr.contains(&m),
        "output went to cbrun's own streams too\n{}",
        r.show()
    );

    let o = r.outcome();
    has_keys(
        o,
        &[
            "id",
            "command",
            "exit_code",
            "signal",
            "timed_out",
            "interrupted",
            "oom_killed",
            "pids_limit_hit",
            "wall_ms",
            "setup_ms",
            "peak_memory_bytes",
            "isolation",
            "limits",
            "warnings",
            "cbrun_exit",
        ],
        "top level",
    );
    let iso = &o["isolation"];
    has_keys(
        iso,
        &[
            "namespaces",
            "network",
            "loopback_up",
            "rootfs",
            "root_readonly",
            "seccomp",
            "seccomp_rules",
            "capabilities",
            "no_new_privs",
            "id_mapping",
            "dies_with_cbrun",
        ],
        "isolation",
    );
    has_keys(
        &iso["id_mapping"],
        &["kind", "uid_map", "gid_map", "uid", "gid"],
        "isolation.id_mapping",
    );
    let lim = &o["limits"];
    has_keys(
        lim,
        &[
            "cgroup", "memory", "pids", "cpus", "nofile", "nproc", "core",
        ],
        "limits",
    );
    for l in ["memory", "pids", "cpus"] {
        has_keys(&lim[l], &["requested", "enforced", "via", "note"], l);
    }

    assert!(o["id"].as_str().map(|s| !s.is_empty()).unwrap_or(false));
    assert_eq!(o["command"], json!(["sh", "-c", script]));
    assert_eq!(o["exit_code"], 3);
    assert_eq!(o["cbrun_exit"], 3);
    assert_eq!(o["signal"], json!(null));
    for f in ["timed_out", "interrupted", "oom_killed", "pids_limit_hit"] {
        assert_eq!(o[f], false, "{f}");
    }
    let (wall, setup) = (
        o["wall_ms"].as_u64().unwrap(),
        o["setup_ms"].as_u64().unwrap(),
    );
    assert!(
        setup <= wall && wall <= r.elapsed.as_millis() as u64 + 50,
        "wall_ms {wall}, setup_ms {setup}, observed {:?}",
        r.elapsed
    );
    let ns: Vec<&str> = iso["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for n in ["user", "mount", "pid", "ipc", "uts", "cgroup", "net"] {
        assert!(ns.contains(&n), "isolation.namespaces lacks {n}: {ns:?}");
    }
    assert_eq!(iso["network"], "none");
    assert_eq!(iso["loopback_up"], true);
    assert_eq!(iso["rootfs"], "host");
    assert_eq!(iso["root_readonly"], true);
    assert_eq!(iso["seccomp"], "default");
    assert_eq!(iso["no_new_privs"], true);
    assert_eq!(iso["dies_with_cbrun"], true);
    let idm = &iso["id_mapping"];
    assert_eq!(
        (idm["uid"].clone(), idm["gid"].clone()),
        (json!(0), json!(0))
    );
    if who == Who::Root {
        assert_eq!(idm["kind"], "root-range");
        assert_eq!(
            idm["uid_map"],
            json!([[0, ROOT_RANGE_START, ROOT_RANGE_LEN]])
        );
        assert_eq!(
            idm["gid_map"],
            json!([[0, ROOT_RANGE_START, ROOT_RANGE_LEN]])
        );
    }
    assert_eq!(
        (
            lim["nofile"].clone(),
            lim["nproc"].clone(),
            lim["core"].clone()
        ),
        (json!(4096), json!(4096), json!(0))
    );
    assert_eq!(lim["memory"]["requested"], json!(null));
    assert_eq!(
        o["warnings"],
        json!([]),
        "no warnings expected for a plain run"
    );
    assert_eq!(
        lim["cgroup"].is_string(),
        who.has_cgroup(),
        "limits.cgroup: {lim}"
    );

    // The rlimits the outcome reports are the ones inside.
    let rl =
        "import resource as r; print(*(r.getrlimit(x)[0] for x in (r.RLIMIT_NOFILE, r.RLIMIT_NPROC, r.RLIMIT_CORE)))";
    let r = ctx.run(&["--nofile", "100", "--nproc", "50"], &[PY, "-c", rl]);
    r.assert_code(0, "ulimit inside");
    assert_eq!(
        r.stdout.split_whitespace().collect::<Vec<_>>(),
        ["100", "50", "0"],
        "rlimits inside\n{}",
        r.show()
    );
    assert_eq!(
        (
            r.outcome()["limits"]["nofile"].clone(),
            r.outcome()["limits"]["nproc"].clone()
        ),
        (json!(100), json!(50))
    );
    ctx.assert_clean("stdio and outcome");
}

fn map_entries(v: &Value) -> Vec<(u64, u64, u64)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| Some((e[0].as_u64()?, e[1].as_u64()?, e[2].as_u64()?)))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn stdio_files_and_outcome_root() {
    stdio_and_outcome(Who::Root);
}

#[test]
fn stdio_files_and_outcome_delegated_user() {
    stdio_and_outcome(Who::Delegated);
}

#[test]
fn stdio_files_and_outcome_undelegated_user() {
    stdio_and_outcome(Who::Undelegated);
}

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
