//! `cbrun image ...`: the command-line edge of the image store, one file
//! per subcommand (its arguments and its `exec`).

use anyhow::Result;
use clap::Subcommand;

use cbrun::image::platform::Platform;
use cbrun::image::store::Store;

use super::exit::ExitStatus;

mod bootstrap;
mod build;
mod export;
mod gc;
mod import;
mod inspect;
mod ls;
mod pull;
mod rm;
mod tag;
mod unpack;

#[derive(Subcommand)]
pub enum ImageCommand {
    /// List the images in the store.
    Ls(ls::Args),
    /// Show an image's manifest and config (JSON).
    Inspect(inspect::Args),
    /// Remove image references (blobs go with `image gc`).
    Rm(rm::Args),
    /// Delete blobs and unpacked roots no image refers to.
    Gc(gc::Args),
    /// Give an image another name.
    Tag(tag::Args),
    /// Import an OCI layout dir, an oci-archive, a docker-archive, or a plain
    /// rootfs tarball or directory.
    Import(import::Args),
    /// Write an image as an OCI layout directory or oci-archive tar.
    Export(export::Args),
    /// Pull from a registry (OCI distribution protocol).
    Pull(pull::Args),
    /// Unpack an image's layers into its shared root (done on first use anyway).
    Unpack(unpack::Args),
    /// Build a base image from a recipe under rootfs/ (busybox, or Debian
    /// with mmdebstrap) and import it (or only write the OCI layout).
    Bootstrap(bootstrap::Args),
    /// Build an agent image from a case (recipe base + install/build
    /// commands + resources) or from a standalone recipe file (.toml).
    Build(build::Args),
}

pub fn exec(cmd: ImageCommand) -> Result<ExitStatus> {
    match cmd {
        ImageCommand::Ls(a) => ls::exec(a),
        ImageCommand::Inspect(a) => inspect::exec(a),
        ImageCommand::Rm(a) => rm::exec(a),
        ImageCommand::Gc(a) => gc::exec(a),
        ImageCommand::Tag(a) => tag::exec(a),
        ImageCommand::Import(a) => import::exec(a),
        ImageCommand::Export(a) => export::exec(a),
        ImageCommand::Pull(a) => pull::exec(a),
        ImageCommand::Unpack(a) => unpack::exec(a),
        ImageCommand::Bootstrap(a) => bootstrap::exec(a),
        ImageCommand::Build(a) => build::exec(a),
    }
}

/// The store at its default place.
fn store() -> Result<Store> {
    let root = Store::default_root()?;
    Ok(Store::open(&root)?)
}

/// `--platform os/arch[/variant]`, when given.
fn platform(p: &Option<String>) -> Result<Option<Platform>> {
    p.as_deref()
        .map(|s| Platform::parse(s).map_err(|e| anyhow::anyhow!("--platform: {e}")))
        .transpose()
}

/// A byte count for people: `512 B`, `1.5 MiB`.
fn human(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_sizes() {
        assert_eq!(super::human(512), "512 B");
        assert_eq!(super::human(1536), "1.5 KiB");
        assert_eq!(super::human(3 << 30), "3.0 GiB");
    }
}
