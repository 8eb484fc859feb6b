//! `cbrun image ...`: the command-line edge of the image store.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Subcommand;

use cbrun::image::export::{export, ExportFormat, ExportOptions};
use cbrun::image::import::{import, Format, ImportOptions};
use cbrun::image::platform::Platform;
use cbrun::image::pull::{pull, PullOptions};
use cbrun::image::store::{ImageRef, Store};
use cbrun::image::unpacked::{ensure_unpacked, owner_mode};

#[derive(Subcommand)]
pub enum ImageCmd {
    /// List the images in the store.
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// Show an image's manifest and config (JSON).
    Inspect { name: String },
    /// Remove image references (blobs go with `image gc`).
    Rm {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Delete blobs and unpacked roots no image refers to.
    Gc {
        #[arg(long)]
        json: bool,
    },
    /// Give an image another name.
    Tag { src: String, dst: String },
    /// Import an OCI layout dir, an oci-archive, a docker-archive, or a plain
    /// rootfs tarball or directory.
    Import {
        path: PathBuf,
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
    },
    /// Write an image as an OCI layout directory or oci-archive tar.
    Export {
        name: String,
        #[arg(
            long,
            default_value = "oci-archive",
            value_name = "oci-dir|oci-archive"
        )]
        format: ExportFormat,
        #[arg(long, short)]
        output: PathBuf,
        #[arg(long)]
        force: bool,
    },
    /// Pull from a registry (OCI distribution protocol).
    Pull {
        reference: String,
        /// Store it under this name (default: the reference).
        #[arg(long, value_name = "NAME[:TAG]")]
        tag: Option<String>,
        /// Plain http, for registries on loopback only.
        #[arg(long)]
        insecure: bool,
        #[arg(long)]
        platform: Option<String>,
        #[arg(long, default_value_t = 4)]
        retries: u32,
    },
    /// Unpack an image's layers into its shared root (done on first use anyway).
    Unpack { name: String },
    /// Build a base image from a recipe under rootfs/ (busybox, or Debian
    /// with mmdebstrap) and import it (or only write the OCI layout).
    Bootstrap {
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
    },
    /// Build an agent image from a case (recipe base + install/build
    /// commands + resources) or from a standalone recipe file (.toml).
    Build {
        /// A case folder or a recipe file.
        source: PathBuf,
        /// Use this base image instead of the recipe's (after mapping).
        #[arg(long, value_name = "NAME[:TAG]")]
        base: Option<String>,
        /// Base-image mapping (TOML: published name = local image); default rootfs/base-images.toml.
        #[arg(long, value_name = "FILE")]
        base_map: Option<PathBuf>,
        /// Where resources are looked up (by sha256) and downloaded to.
        #[arg(long, value_name = "DIR")]
        resource_cache: Option<PathBuf>,
        #[arg(long, default_value_t = 3600.0, value_name = "SECS")]
        timeout: f64,
        #[arg(long)]
        no_cache: bool,
        #[arg(long)]
        json: bool,
    },
}

fn store() -> Result<Store> {
    let root = Store::default_root()?;
    Ok(Store::open(&root)?)
}

fn platform(p: &Option<String>) -> Result<Option<Platform>> {
    p.as_deref()
        .map(|s| Platform::parse(s).map_err(|e| anyhow::anyhow!("--platform: {e}")))
        .transpose()
}

pub fn run(cmd: ImageCmd) -> Result<i32> {
    match cmd {
        ImageCmd::Ls { json } => {
            let list = store()?.list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
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
            }
        }
        ImageCmd::Inspect { name } => {
            println!(
                "{}",
                serde_json::to_string_pretty(&store()?.inspect(&name)?)?
            );
        }
        ImageCmd::Rm { names } => {
            let s = store()?;
            for n in names {
                let r = s.remove(&n)?;
                for x in r.removed {
                    println!("removed {x}");
                }
            }
        }
        ImageCmd::Gc { json } => {
            let r = store()?.gc()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
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
        }
        ImageCmd::Tag { src, dst } => {
            let r = store()?.tag(&src, &dst)?;
            println!("{r}");
        }
        ImageCmd::Import {
            path,
            tag,
            format,
            platform: p,
            select,
        } => {
            let s = store()?;
            let opts = ImportOptions {
                platform: platform(&p)?,
                format,
                select,
            };
            let r = import(&s, &path, &tag, &opts)?;
            for w in &r.warnings {
                eprintln!("cbrun: warning: {w}");
            }
            println!("{} {}", r.reference, r.manifest_digest);
        }
        ImageCmd::Export {
            name,
            format,
            output,
            force,
        } => {
            let s = store()?;
            let r = export(
                &s,
                &name,
                &output,
                &ExportOptions {
                    format,
                    force,
                    ref_name: None,
                },
            )?;
            println!("{}", serde_json::to_string(&r)?);
        }
        ImageCmd::Pull {
            reference,
            tag,
            insecure,
            platform: p,
            retries,
        } => {
            let s = store()?;
            let plat =
                platform(&p)?.map(|p| (p.os.clone(), p.architecture.clone(), p.variant.clone()));
            let credentials = match (
                std::env::var("CBRUN_REGISTRY_USER"),
                std::env::var("CBRUN_REGISTRY_PASSWORD"),
            ) {
                (Ok(u), Ok(p)) => Some((u, p)),
                _ => None,
            };
            let _hold = s.hold()?;
            let pulled = pull(
                &reference,
                &s,
                &PullOptions {
                    insecure,
                    platform: plat,
                    retries,
                    credentials,
                },
            )?;
            let name = tag.unwrap_or_else(|| {
                let r = &pulled.reference;
                format!(
                    "{}/{}:{}",
                    r.registry,
                    r.repository,
                    r.tag.clone().unwrap_or_else(|| "latest".into())
                )
            });
            let iref = ImageRef::parse(&name).with_context(|| format!("--tag {name}"))?;
            let d = s.commit_image(&iref, &pulled.manifest_bytes, &format!("pull {reference}"))?;
            eprintln!(
                "cbrun: pulled {} ({} downloaded, {} blob(s) already present)",
                pulled.reference,
                human(pulled.bytes_downloaded),
                pulled.blobs_skipped
            );
            println!("{iref} {d}");
        }
        ImageCmd::Bootstrap {
            recipe,
            layout,
            mode,
            tag,
            tmpdir,
        } => {
            use cbrun::image::bootstrap;
            let r = bootstrap::load_recipe(&recipe)?;
            let mut opts = bootstrap::BootstrapOptions::from_env()?;
            opts.mode = mode
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--mode: {e}"))?;
            opts.tmpdir = tmpdir;
            let name = tag.unwrap_or_else(|| format!("{}:{}", r.name, r.tag));
            match layout {
                Some(out) => {
                    let rep = bootstrap::bootstrap(&r, &out, &opts)?;
                    eprintln!(
                        "cbrun: bootstrap: {} in {:.1} s ({} compressed, {} uncompressed)",
                        out.display(),
                        rep.seconds,
                        human(rep.layer_bytes),
                        human(rep.uncompressed_bytes)
                    );
                    println!("{} {}", out.display(), rep.manifest_digest);
                }
                None => {
                    let s = store()?;
                    let out = s.temp_path("bootstrap");
                    let rep = bootstrap::bootstrap(&r, &out, &opts);
                    let imported =
                        rep.map(|rep| (rep, import(&s, &out, &name, &ImportOptions::default())));
                    let _ = cbrun::image::store::remove_tree(&out);
                    let (rep, imp) = imported?;
                    let imp = imp?;
                    eprintln!(
                        "cbrun: bootstrap: {} in {:.1} s ({} compressed, {} uncompressed)",
                        imp.reference,
                        rep.seconds,
                        human(rep.layer_bytes),
                        human(rep.uncompressed_bytes)
                    );
                    println!("{} {}", imp.reference, imp.manifest_digest);
                }
            }
        }
        ImageCmd::Build {
            source,
            base,
            base_map,
            resource_cache,
            timeout,
            no_cache,
            json,
        } => {
            use cbrun::image::build;
            if !timeout.is_finite() || timeout <= 0.0 {
                anyhow::bail!("--timeout: {timeout}: must be a positive number of seconds");
            }
            let plan = if source.is_dir() {
                let case = cbrun::case::load(&source)?;
                build::plan_for_case(&case)
            } else {
                build::plan_for_recipe(&source)?
            };
            let map = match &base_map {
                Some(p) => build::parse_base_map(
                    &std::fs::read_to_string(p)
                        .with_context(|| format!("--base-map {}", p.display()))?,
                    &p.display().to_string(),
                )?,
                None => build::parse_base_map(build::DEFAULT_BASE_MAP, "rootfs/base-images.toml")?,
            };
            let s = store()?;
            let host = cbrun::sandbox::run::HostView::detect();
            let r = build::build(
                &s,
                &plan,
                &build::BuildOptions {
                    base_override: base,
                    base_map: map,
                    resource_cache,
                    timeout: std::time::Duration::from_secs_f64(timeout),
                    no_cache,
                },
                &host,
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                eprintln!(
                    "cbrun: build: {} in {:.2} s{}",
                    if r.cache_hit { "cache hit" } else { "built" },
                    r.seconds,
                    r.log
                        .as_ref()
                        .map(|l| format!("; log {}", l.display()))
                        .unwrap_or_default()
                );
                println!("{} {}", r.image, r.manifest_digest);
            }
        }
        ImageCmd::Unpack { name } => {
            let s = store()?;
            let img = s.resolve(&name)?;
            let mapping = cbrun::sandbox::run::HostView::detect().mapping;
            let u = ensure_unpacked(&s, &img, owner_mode(&mapping))?;
            if let Some(r) = &u.report {
                eprintln!("cbrun: unpacked: {}", serde_json::to_string(r)?);
            }
            println!("{}", u.path.display());
        }
    }
    Ok(0)
}

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
