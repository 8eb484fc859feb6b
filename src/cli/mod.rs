//! cbrun's command line. Each command (or command group) has its own file
//! here holding its clap definition (an `Args` struct or a `Subcommand`
//! enum) and its handler, `exec(args) -> Result<ExitStatus>`; the library
//! gets plain option structs, never clap types.
//!
//! To add a command `foo`: write `foo.rs` with `FooArgs` and `exec`, add
//! `mod foo;`, a `Foo(foo::FooArgs)` variant to [`Command`] (its doc comment
//! is the command's help) and its line in [`dispatch`].
//!
//! Errors and warnings go through [`messages`] (`cbrun: error: ...`); exit
//! statuses are [`exit::ExitStatus`]. A command returns `Err` only for
//! cbrun's own errors, which exit 125; a command with other error statuses
//! (`trial`) prints its error and returns the status itself.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

use cbrun::case::Case;

mod admin;
mod case;
mod completions;
mod doctor;
mod exit;
mod gc;
mod image;
mod judge;
mod limits;
mod man;
pub mod messages;
mod report;
mod run;
mod run_slurm;
mod sandbox;
mod solve;
mod trial;
mod validate;

use exit::ExitStatus;

/// `0.1.0 (abc1234)`: the package version and, when built from a git
/// checkout, its commit (see build.rs).
const VERSION: &str = env!("CBRUN_VERSION");

#[derive(Parser)]
#[command(
    name = "cbrun",
    version = VERSION,
    about = "Daemonless, rootless sandbox runner for coding-agent benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run commands in sandboxes.
    #[command(subcommand)]
    Sandbox(Box<sandbox::SandboxCommand>),
    /// Work with benchmark cases (the published task-package format).
    #[command(subcommand)]
    Case(case::CaseCommand),
    /// Say what this host lets cbrun enforce for the current user.
    Doctor(doctor::DoctorArgs),
    /// Manage images: import, export, pull, list, remove, unpack.
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Run one trial: solve, submission check, import scan, judge, record.
    Trial(Box<trial::TrialArgs>),
    /// Run only the solve phase (agent, submission, scan) into a trial folder.
    Solve(Box<solve::SolveCommand>),
    /// Judge a stored workspace against a case's hidden tests.
    Judge(Box<judge::JudgeArgs>),
    /// A benchmark run: cases x configurations x repeats, in parallel, resumable.
    Run(Box<run::RunArgs>),
    /// Run every control of the cases through the scan and the judge and
    /// check their expect.json.
    Validate(validate::ValidateArgs),
    /// Tables (and an HTML page) from run folders: pass rates, times, costs, repeats, a baseline.
    Report(Box<report::ReportArgs>),
    /// One-time host set-up steps that need real root.
    #[command(subcommand)]
    Admin(admin::AdminCommand),
    /// Remove what runs whose cbrun died left behind (processes, cgroups, state).
    Gc(gc::GcArgs),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff), or write one per command.
    Man(man::ManArgs),
}

fn dispatch(command: Command) -> Result<ExitStatus> {
    match command {
        Command::Sandbox(c) => sandbox::exec(*c),
        Command::Case(c) => case::exec(c),
        Command::Doctor(a) => doctor::exec(a),
        Command::Image(c) => image::exec(c),
        Command::Trial(a) => trial::exec(*a),
        Command::Solve(a) => solve::exec(*a),
        Command::Judge(a) => judge::exec(*a),
        Command::Run(a) => run::exec(*a),
        Command::Validate(a) => validate::exec(a),
        Command::Report(a) => report::exec(*a),
        Command::Admin(c) => admin::exec(c),
        Command::Gc(a) => gc::exec(a),
        Command::Completions(a) => completions::exec(a),
        Command::Man(a) => man::exec(a),
    }
}

/// The whole command tree, for completions and manual pages.
fn command() -> clap::Command {
    Cli::command()
}

pub fn main() -> ExitCode {
    let started = Instant::now();
    cbrun::notice::set_sink(messages::notice);
    let status = run(std::env::args_os().collect());
    timing("main", started);
    status.into()
}

fn run(argv: Vec<OsString>) -> ExitStatus {
    let result = match sandbox::fast_path(&argv) {
        Some(a) => sandbox::run(a),
        None => match Cli::try_parse_from(&argv) {
            Ok(cli) => dispatch(cli.command),
            Err(e) => return refused(&e, &argv),
        },
    };
    let status = result.unwrap_or_else(|e| {
        if is_broken_pipe(&e) {
            // `cbrun man | head`: whoever read stdout has all it wanted.
            return ExitStatus::Success;
        }
        messages::error_chain(&e);
        ExitStatus::Error
    });
    messages::json_finish(status.as_u8());
    status
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Print what clap says about a command line it did not accept (help and
/// version included, which are no errors) and return the status for it.
/// Errors keep clap's whole message (usage, "did you mean", tips) behind
/// the `cbrun: ` every error line starts with.
fn refused(e: &clap::Error, argv: &[OsString]) -> ExitStatus {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitStatus::Success
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            usage_status(argv)
        }
        _ => {
            eprint!("cbrun: {}", e.render());
            usage_status(argv)
        }
    }
}

/// The status of a command line clap refused: 2 for `trial` and `run`, whose
/// statuses say so; 125, cbrun's own error, for every other command, as
/// `sandbox run` documents.
fn usage_status(argv: &[OsString]) -> ExitStatus {
    match argv.get(1).and_then(|a| a.to_str()) {
        Some("trial" | "run") => ExitStatus::Usage,
        _ => ExitStatus::Error,
    }
}

/// `CBRUN_TIMING=1`: how long a step took, on stderr.
fn timing(what: &str, since: Instant) {
    if std::env::var_os("CBRUN_TIMING").is_some() {
        messages::status(format_args!(
            "timing: {what}: {:.2} ms",
            since.elapsed().as_secs_f64() * 1e3
        ));
    }
}

/// A positive number of seconds from `--what`.
fn secs(what: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v <= 0.0 || v > 1e7 {
        bail!("{what}: {v:?}: must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(v))
}

fn load_case(dir: &Path) -> Result<Case> {
    Ok(cbrun::case::load(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_tree_is_consistent() {
        command().debug_assert();
    }

    /// Every argument of every command says what it is for in `--help`.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for s in cmd.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let mut cmd = command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "cbrun", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn seconds_must_be_positive_and_finite() {
        assert!(secs("--t", 1.5).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e8] {
            assert!(secs("--t", bad).is_err(), "{bad}");
        }
    }
}
