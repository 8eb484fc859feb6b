//! `cbrun image bootstrap rootfs/<recipe>`: a base image built from the
//! host's busybox or Debian's packages, imported into the store (or only
//! written as an OCI layout).

use std::path::PathBuf;

use anyhow::Result;

use cbrun::image::bootstrap::{self, BootstrapOptions, BootstrapReport, Recipe};
use cbrun::image::import::{import, ImportOptions};
use cbrun::image::store::remove_tree;

use super::{human, store, ExitStatus};
use crate::cli::messages;

#[derive(clap::Args)]
pub struct Args {
    /// The recipe: a `recipe.toml`, a directory holding one, or a shipped
    /// recipe by name (`busybox`, `debian-bookworm-dev`; embedded).
    recipe: PathBuf,
    /// Write the OCI layout here instead of importing it.
    #[arg(long, value_name = "DIR")]
    layout: Option<PathBuf>,
    /// mmdebstrap mode: auto, root, unshare, fakechroot.
    #[arg(long, default_value = "auto")]
    mode: String,
    /// Store it under this name (default: the recipe's name:tag).
    #[arg(long, value_name = "NAME[:TAG]")]
    tag: Option<String>,
    /// Where mmdebstrap builds its chroot (a tmpfs is much faster).
    #[arg(long, value_name = "DIR")]
    tmpdir: Option<PathBuf>,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    let r = bootstrap::load_recipe(&a.recipe)?;
    let mut opts = BootstrapOptions::from_env()?;
    opts.mode = a
        .mode
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--mode: {e}"))?;
    opts.tmpdir = a.tmpdir;
    let name = a.tag.unwrap_or_else(|| format!("{}:{}", r.name, r.tag));
    match a.layout {
        Some(out) => {
            let rep = bootstrap::bootstrap(&r, &out, &opts)?;
            built(&out.display(), &rep);
            println!("{} {}", out.display(), rep.manifest_digest);
        }
        None => into_store(&r, &name, &opts)?,
    }
    Ok(ExitStatus::Success)
}

/// Build into a temp layout in the store, import it, remove the layout.
fn into_store(r: &Recipe, name: &str, opts: &BootstrapOptions) -> Result<()> {
    let s = store()?;
    s.check_writable("bootstrap")?;
    let out = s.temp_path("bootstrap");
    let rep = bootstrap::bootstrap(r, &out, opts);
    let imported = rep.map(|rep| (rep, import(&s, &out, name, &ImportOptions::default())));
    let _ = remove_tree(&out);
    let (rep, imp) = imported?;
    let imp = imp?;
    built(&imp.reference, &rep);
    println!("{} {}", imp.reference, imp.manifest_digest);
    Ok(())
}

fn built(what: &dyn std::fmt::Display, rep: &BootstrapReport) {
    messages::status(format_args!(
        "bootstrap: {what} in {:.1} s ({} compressed, {} uncompressed)",
        rep.seconds,
        human(rep.layer_bytes),
        human(rep.uncompressed_bytes)
    ));
}
