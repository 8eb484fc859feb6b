//! `cbrun image unpack NAME`: unpack an image's layers into its shared
//! root now (otherwise done on first use).

use anyhow::Result;

use cbrun::image::unpacked::{ensure_unpacked, owner_mode};
use cbrun::sandbox::run::HostView;

use super::{store, ExitStatus};
use crate::cli::messages;

#[derive(clap::Args)]
pub struct Args {
    /// The image: `NAME[:TAG]` or `NAME@sha256:...`.
    name: String,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    let s = store()?;
    let img = s.resolve(&a.name)?;
    let mapping = HostView::detect().mapping;
    let u = ensure_unpacked(&s, &img, owner_mode(&mapping))?;
    if let Some(r) = &u.report {
        messages::status(format_args!("unpacked: {}", serde_json::to_string(r)?));
    }
    println!("{}", u.path.display());
    Ok(ExitStatus::Success)
}
