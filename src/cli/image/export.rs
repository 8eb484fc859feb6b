//! `cbrun image export NAME -o PATH`: an image as an OCI layout directory
//! or oci-archive tar (skopeo and umoci read both).

use std::path::PathBuf;

use anyhow::Result;

use cbrun::image::export::{export, ExportFormat, ExportOptions};

use super::{store, ExitStatus};

#[derive(clap::Args)]
pub struct Args {
    /// The image: `NAME[:TAG]` or `NAME@sha256:...`.
    name: String,
    /// What to write: a layout directory or a tar of one.
    #[arg(
        long,
        default_value = "oci-archive",
        value_name = "oci-dir|oci-archive"
    )]
    format: ExportFormat,
    /// Where to write it.
    #[arg(long, short)]
    output: PathBuf,
    /// Replace an existing output.
    #[arg(long)]
    force: bool,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    let s = store()?;
    let r = export(
        &s,
        &a.name,
        &a.output,
        &ExportOptions {
            format: a.format,
            force: a.force,
            ref_name: None,
        },
    )?;
    println!("{}", serde_json::to_string(&r)?);
    Ok(ExitStatus::Success)
}
