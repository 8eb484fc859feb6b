//! Exit codes and bad input.

use super::*;

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
