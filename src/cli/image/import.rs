//! `cbrun image import PATH --tag NAME[:TAG]`: an OCI layout dir, an
//! oci-archive, a docker-archive, or a plain rootfs tarball or directory.

use std::path::PathBuf;

use anyhow::Result;

use cbrun::image::import::{import, Format, ImportOptions};

use super::{platform, store, ExitStatus};
use crate::cli::messages;

#[derive(clap::Args)]
pub struct Args {
    /// The directory or file to import.
    path: PathBuf,
    /// The name to store it under.
    #[arg(long, value_name = "NAME[:TAG]")]
    tag: String,
    /// Skip detection: oci-dir, oci-archive, docker-archive, rootfs-tar, rootfs-dir.
    #[arg(long)]
    format: Option<Format>,
    /// os/arch[/variant] to pick from a multi-platform index.
    #[arg(long)]
    platform: Option<String>,
    /// Which image of an archive holding several (ref name or RepoTag).
    #[arg(long = "ref")]
    select: Option<String>,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    let s = store()?;
    let opts = ImportOptions {
        platform: platform(&a.platform)?,
        format: a.format,
        select: a.select,
    };
    let r = import(&s, &a.path, &a.tag, &opts)?;
    for w in &r.warnings {
        messages::warning(w);
    }
    println!("{} {}", r.reference, r.manifest_digest);
    Ok(ExitStatus::Success)
}
