//! `cbrun image ls [--json]`: the images in the store.

use anyhow::Result;

use super::{human, store, ExitStatus};
use crate::cli::messages;

#[derive(clap::Args)]
pub struct Args {
    /// Print the list as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    if a.json {
        messages::json_mode("image ls");
    }
    let list = store()?.list()?;
    if a.json {
        messages::json_result("image ls", &list)?;
        return Ok(ExitStatus::Success);
    }
    println!(
        "{:<40} {:<19} {:>6} {:>10}",
        "IMAGE", "MANIFEST", "LAYERS", "SIZE"
    );
    for i in &list {
        println!(
            "{:<40} {:<19} {:>6} {:>10}",
            i.reference,
            &i.manifest.to_string()[..19],
            i.layers,
            human(i.size)
        );
    }
    Ok(ExitStatus::Success)
}
