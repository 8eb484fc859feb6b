//! `cbrun case check CASE...`: validate case folders; one line per problem
//! (`cbrun: error: file: field: reason`); exit 1 on errors.

use std::path::PathBuf;

use anyhow::Result;
use cbrun::sandbox::config::RootfsSource;
use cbrun::sandbox::run::HostView;
use clap::Subcommand;

use super::exit::ExitStatus;
use super::messages;

#[derive(Subcommand)]
pub enum CaseCommand {
    /// Validate case folders: layout, every schema, cross-file rules,
    /// controls, leaks of hidden tests into public docs.
    Check {
        /// Case folders (files among them, e.g. a README from `cases/*`, are skipped).
        #[arg(required = true, value_name = "CASE")]
        cases: Vec<PathBuf>,
        /// Also run each case's environment_checks (and cbrun's baseline)
        /// in solve-like and judge-like sandboxes, as their `phase` says.
        #[arg(long)]
        run: bool,
        /// With --run: the root filesystem, `host` or a directory.
        #[arg(
            long,
            default_value = "host",
            value_name = "host|DIR",
            conflicts_with = "image"
        )]
        rootfs: RootfsSource,
        /// With --run: an image from the store (e.g. from `cbrun image build CASE`).
        #[arg(long, value_name = "NAME[:TAG]", requires = "run")]
        image: Option<String>,
    },
}

pub fn exec(cmd: CaseCommand) -> Result<ExitStatus> {
    match cmd {
        CaseCommand::Check {
            cases,
            run,
            rootfs,
            image,
        } => check(&cases, run.then_some((rootfs, image))),
    }
}

/// One line per problem; with `run`, one line per environment check.
fn check(cases: &[PathBuf], run: Option<(RootfsSource, Option<String>)>) -> Result<ExitStatus> {
    use cbrun::case::envcheck;
    let mut runner = None;
    if let Some((rootfs, image)) = run {
        let host = HostView::detect();
        let root = envcheck::CheckRoot::open(rootfs, image.as_deref(), &host)?;
        runner = Some((envcheck::EnvCheckOptions::new(root), host));
    }
    let mut errors = 0;
    for dir in cases {
        // `cbrun case check cases/*` also matches files such as README.md.
        if dir.is_file() {
            messages::warning(format_args!(
                "{}: not a case folder, skipped",
                dir.display()
            ));
            continue;
        }
        let problems = cbrun::case::check(dir);
        for p in &problems {
            if p.is_error() {
                messages::error(p);
            } else {
                messages::warning(p);
            }
        }
        let n = problems.iter().filter(|p| p.is_error()).count();
        errors += n;
        if n == 0 {
            println!("ok: {}", dir.display());
        }
        let (Some((opts, host)), 0) = (&runner, n) else {
            continue;
        };
        let case = cbrun::case::load(dir)?;
        for r in envcheck::run_checks(&case, opts, host)? {
            let name = if r.builtin {
                format!("{} (cbrun)", r.name)
            } else {
                r.name.clone()
            };
            let at = format!("{}: {}: {name}", dir.display(), r.phase.as_str());
            if r.passed {
                println!("pass: {at} ({:.2} s)", r.seconds);
            } else {
                errors += 1;
                let last = r.output.lines().rev().find(|l| !l.trim().is_empty());
                let last = last.map(|l| format!(": {}", l.trim())).unwrap_or_default();
                println!("FAIL: {at}: {}{last}", r.failure());
            }
        }
    }
    Ok(ExitStatus::from_ok(errors == 0))
}
