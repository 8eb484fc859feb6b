//! `cbrun completions SHELL`: a completion script on stdout, e.g.
//! `cbrun completions bash > /etc/bash_completion.d/cbrun`.

use anyhow::Result;
use clap::Args;
use clap_complete::{Generator, Shell};

use super::exit::ExitStatus;

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    shell: Shell,
}

pub fn exec(a: CompletionsArgs) -> Result<ExitStatus> {
    let mut cmd = super::command().bin_name("cbrun");
    cmd.build();
    // `try_generate`, not `generate`, which panics when stdout is closed.
    a.shell.try_generate(&cmd, &mut std::io::stdout().lock())?;
    Ok(ExitStatus::Success)
}
