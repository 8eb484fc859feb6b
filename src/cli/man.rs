//! `cbrun man [--dir DIR]`: the manual page (roff) on stdout, or one page
//! per command (`cbrun.1`, `cbrun-sandbox-run.1`, ...) written into DIR.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use clap_mangen::Man;

use super::exit::ExitStatus;

#[derive(Args)]
pub struct ManArgs {
    /// Write a page for cbrun and for every subcommand into this existing
    /// directory instead of cbrun's page on stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn exec(a: ManArgs) -> Result<ExitStatus> {
    let mut cmd = super::command().disable_help_subcommand(true);
    cmd.build();
    match a.dir {
        Some(dir) => {
            if !dir.is_dir() {
                bail!("--dir {}: not a directory", dir.display());
            }
            write_pages(&cmd, &dir).with_context(|| format!("--dir {}", dir.display()))?;
            println!("{}", dir.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            page(&cmd).render(&mut out)?;
            out.flush()?;
        }
    }
    Ok(ExitStatus::Success)
}

/// The page of `cmd` (a built command, so subcommands carry their full
/// names), its footer naming cbrun's version rather than the subcommand's.
fn page(cmd: &clap::Command) -> Man {
    Man::new(cmd.clone())
        .source(format!("cbrun {}", super::VERSION))
        .manual("cbrun manual")
}

/// `cmd`'s page and those of its subcommands, one file each.
fn write_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<()> {
    page(cmd).generate_to(dir)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    Ok(())
}
