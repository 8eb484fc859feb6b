//! `cbrun case check CASE...`: validate case folders; one line per problem
//! (`cbrun: error: file: field: reason`); exit 1 on errors.

use std::path::PathBuf;

use anyhow::Result;
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
    },
}

pub fn exec(cmd: CaseCommand) -> Result<ExitStatus> {
    match cmd {
        CaseCommand::Check { cases } => Ok(check(&cases)),
    }
}

fn check(cases: &[PathBuf]) -> ExitStatus {
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
    }
    ExitStatus::from_ok(errors == 0)
}
