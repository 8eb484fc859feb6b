//! `cbrun image ls [--json]`: the images in the store.

use anyhow::Result;

use super::{human, store, ExitStatus};

#[derive(clap::Args)]
pub struct Args {
    /// Print the list as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    let list = store()?.list()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
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
