//! `cbrun image tag SRC DST`: give an image another name.

use anyhow::Result;

use super::{store, ExitStatus};

#[derive(clap::Args)]
pub struct Args {
    /// The image to name: `NAME[:TAG]` or `NAME@sha256:...`.
    src: String,
    /// Its new name, `NAME[:TAG]`.
    dst: String,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    println!("{}", store()?.tag(&a.src, &a.dst)?);
    Ok(ExitStatus::Success)
}
