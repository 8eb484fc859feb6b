//! `cbrun image gc [--json]`: delete blobs and unpacked roots no image
//! refers to.

use anyhow::Result;

use super::{human, store, ExitStatus};
use crate::cli::messages;

#[derive(clap::Args)]
pub struct Args {
    /// Print the report as JSON instead of a summary line.
    #[arg(long)]
    json: bool,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    if a.json {
        messages::json_mode("image gc");
    }
    let r = store()?.gc()?;
    if a.json {
        messages::json_result("image gc", &r)?;
    } else {
        println!(
            "cbrun image gc: removed {} blob(s) ({}), {} unpacked root(s), {} temp file(s); kept {} blob(s)",
            r.removed_blobs,
            human(r.removed_bytes),
            r.removed_rootfs,
            r.removed_tmp,
            r.kept_blobs
        );
    }
    Ok(ExitStatus::Success)
}
