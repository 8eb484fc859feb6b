//! `cbrun image pull REF`: an image from a registry (OCI distribution
//! protocol; credentials from `CBRUN_REGISTRY_USER`/`_PASSWORD`).

use anyhow::{Context, Result};

use cbrun::image::pull::{pull, PullOptions};
use cbrun::image::store::ImageRef;

use super::{human, platform, store, ExitStatus};
use crate::cli::messages;

#[derive(clap::Args)]
pub struct Args {
    /// `[REGISTRY/]REPOSITORY[:TAG|@DIGEST]`.
    reference: String,
    /// Store it under this name (default: the reference).
    #[arg(long, value_name = "NAME[:TAG]")]
    tag: Option<String>,
    /// Plain http, for registries on loopback only.
    #[arg(long)]
    insecure: bool,
    /// os/arch[/variant] to pick from a multi-platform index (default: the host's).
    #[arg(long)]
    platform: Option<String>,
    /// Retries of a transient failure (connection error, 408, 429, 5xx, a
    /// broken blob download, which resumes with Range).
    #[arg(long, default_value_t = 4)]
    retries: u32,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    let s = store()?;
    let plat =
        platform(&a.platform)?.map(|p| (p.os.clone(), p.architecture.clone(), p.variant.clone()));
    let credentials = match (
        std::env::var("CBRUN_REGISTRY_USER"),
        std::env::var("CBRUN_REGISTRY_PASSWORD"),
    ) {
        (Ok(u), Ok(p)) => Some((u, p)),
        _ => None,
    };
    s.check_writable("pull")?;
    let _hold = s.hold()?;
    let pulled = pull(
        &a.reference,
        &s,
        &PullOptions {
            insecure: a.insecure,
            platform: plat,
            retries: a.retries,
            credentials,
        },
    )?;
    let name = a.tag.unwrap_or_else(|| {
        let r = &pulled.reference;
        format!(
            "{}/{}:{}",
            r.registry,
            r.repository,
            r.tag.clone().unwrap_or_else(|| "latest".into())
        )
    });
    let iref = ImageRef::parse(&name).with_context(|| format!("--tag {name}"))?;
    let d = s.commit_image(
        &iref,
        &pulled.manifest_bytes,
        &format!("pull {}", a.reference),
    )?;
    messages::status(format_args!(
        "pulled {} ({} downloaded, {} blob(s) already present)",
        pulled.reference,
        human(pulled.bytes_downloaded),
        pulled.blobs_skipped
    ));
    println!("{iref} {d}");
    Ok(ExitStatus::Success)
}
