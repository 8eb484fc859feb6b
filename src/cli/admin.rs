//! `cbrun admin ...`: one-time host set-up steps that need real root
//! (the work is [`cbrun::admin`]'s). Exit 1 when a step fails.

use anyhow::Result;
use clap::{Args, Subcommand};

use cbrun::admin::{delegate, DelegateOptions, Step};

use super::exit::ExitStatus;
use super::messages;

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Give a user its own cgroup subtree so its sandboxes get memory, pids
    /// and cpu limits (run once, as root).
    DelegateCgroups(DelegateArgs),
}

#[derive(Args)]
pub struct DelegateArgs {
    /// User name or numeric uid.
    #[arg(long, value_name = "NAME")]
    user: String,
    /// Remove the user's cgroup directories again.
    #[arg(long)]
    undo: bool,
}

pub fn exec(cmd: AdminCommand) -> Result<ExitStatus> {
    match cmd {
        AdminCommand::DelegateCgroups(a) => Ok(delegate_cgroups(a)),
    }
}

/// Each step on stdout as it was taken (warnings on stderr), then the error
/// if one stopped it.
fn delegate_cgroups(a: DelegateArgs) -> ExitStatus {
    let mut log = Vec::new();
    let res = delegate(
        &DelegateOptions {
            user: a.user,
            undo: a.undo,
        },
        &mut log,
    );
    for step in &log {
        match step {
            Step::Done(s) => println!("{s}"),
            Step::Note(s) => println!("note: {s}"),
            Step::Warning(s) => messages::warning(s),
        }
    }
    match res {
        Ok(_) => ExitStatus::Success,
        Err(e) => {
            messages::error(format_args!(
                "admin delegate-cgroups: {}",
                messages::one_line(&e)
            ));
            ExitStatus::Failure
        }
    }
}
