//! `cbrun image inspect NAME`: an image's manifest and config as JSON.

use anyhow::Result;

use super::{store, ExitStatus};

#[derive(clap::Args)]
pub struct Args {
    /// The image: `NAME[:TAG]` or `NAME@sha256:...`.
    name: String,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    println!(
        "{}",
        serde_json::to_string_pretty(&store()?.inspect(&a.name)?)?
    );
    Ok(ExitStatus::Success)
}
