//! `cbrun image rm NAME...`: remove references (blobs go with `image gc`).

use anyhow::Result;

use super::{store, ExitStatus};

#[derive(clap::Args)]
pub struct Args {
    /// The references to remove: `NAME[:TAG]`, or `NAME@sha256:...` for
    /// every tag of that name on that manifest.
    #[arg(required = true)]
    names: Vec<String>,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    let s = store()?;
    for n in a.names {
        for x in s.remove(&n)?.removed {
            println!("removed {x}");
        }
    }
    Ok(ExitStatus::Success)
}
