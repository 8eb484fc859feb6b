//! clap's own messages, help, version, completions and manual pages.

use super::*;

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
