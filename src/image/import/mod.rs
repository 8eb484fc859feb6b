//! `cbrun image import PATH --tag NAME`: bring an image into the store from
//! an OCI image-layout directory, an oci-archive, a docker-archive (`docker
//! save`), or a plain root filesystem (directory or tarball).
//!
//! Archives are never extracted: their tar headers are indexed once and
//! members are read in place (compressed archives are first decompressed
//! into one temp file in the store's `tmp/`). Every blob is hashed on its way
//! into the store and checked against the digest that names it; the
//! reference is written last, so a failed import leaves no reference (blobs
//! that made it in are unreferenced, and `gc` removes them).
//!
//! [`import`] detects the format and hands over to the reader of that
//! format: `oci` (layout directory or archive), `docker`
//! (`docker save`), `rootfs` (a tarball or directory as one layer; the
//! directory is written as a tar by `tar_dir`), `sif` (Apptainer/Singularity
//! images: the squashfs partition, unpacked by unsquashfs, as a rootfs
//! directory). `archive` indexes tar
//! archives and reads their members in place.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;
use std::str::FromStr;

use oci_spec::image::{Descriptor, ImageConfiguration};
use serde::Serialize;

use super::digest::Digest;
use super::layout::{self, Compression};
use super::platform::Platform;
use super::store::{BlobWriter, ImageRef, Store, StoreError};

mod archive;
mod docker;
mod oci;
mod rootfs;
pub mod sif;
mod tar_dir;

#[cfg(test)]
pub(crate) mod tests;

pub use tar_dir::{tar_directory, Ownership};

use archive::{Source, TarIndex};

/// Most entries an image archive may have (a rootfs tarball is not limited).
const MAX_ARCHIVE_ENTRIES: usize = 1_000_000;
/// Most symlink/hardlink hops followed inside an archive.
const MAX_LINK_HOPS: usize = 16;
/// Most levels of nested indexes followed.
const MAX_INDEX_DEPTH: usize = 4;
/// `PATH` of images made from a plain root filesystem.
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// A directory in the OCI image layout (`oci-layout`, `index.json`, `blobs/`).
    OciDir,
    /// A tar of an OCI image layout.
    OciArchive,
    /// What `docker save` writes (`manifest.json` with `Config`, `Layers`).
    DockerArchive,
    /// A tarball (plain, gzip or zstd) of a root filesystem: one layer.
    RootfsTar,
    /// A directory holding a root filesystem: one layer.
    RootfsDir,
    /// An Apptainer/Singularity image: its squashfs system partition, as
    /// one layer.
    Sif,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::OciDir => "oci-dir",
            Format::OciArchive => "oci-archive",
            Format::DockerArchive => "docker-archive",
            Format::RootfsTar => "rootfs-tar",
            Format::RootfsDir => "rootfs-dir",
            Format::Sif => "sif",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Ok(match s {
            "oci-dir" | "oci" => Format::OciDir,
            "oci-archive" => Format::OciArchive,
            "docker-archive" => Format::DockerArchive,
            "rootfs-tar" => Format::RootfsTar,
            "rootfs-dir" => Format::RootfsDir,
            "sif" => Format::Sif,
            _ => {
                return Err(format!(
                    "format {s:?}: expected oci-dir, oci-archive, docker-archive, rootfs-tar, rootfs-dir or sif"
                ))
            }
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The platform to pick from a multi-platform index, and the platform an
    /// image must be for (default: the host's). For a plain root filesystem,
    /// the platform recorded in the generated config.
    pub platform: Option<Platform>,
    /// Skip format detection.
    pub format: Option<Format>,
    /// Which image of a layout or archive holding several: an OCI
    /// `org.opencontainers.image.ref.name` annotation or a docker `RepoTags`
    /// entry.
    pub select: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub reference: String,
    pub format: Format,
    pub manifest_digest: Digest,
    pub config_digest: Digest,
    pub platform: String,
    pub layers: usize,
    /// Config plus layers as stored.
    pub size: u64,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The input is malformed, hostile or unsupported.
    #[error("{src}: {msg}")]
    Input { src: String, msg: String },
    /// The store failed (disk, locking, a blob that does not match).
    #[error("{src}")]
    Store { src: String, source: StoreError },
    /// The target name is not a valid `name[:tag]`.
    #[error(transparent)]
    Name(StoreError),
}

/// Error context: `docker-archive /path/x.tar`.
struct Ctx {
    src: String,
}

impl Ctx {
    fn bad(&self, msg: impl Into<String>) -> ImportError {
        ImportError::Input {
            src: self.src.clone(),
            msg: msg.into(),
        }
    }
    fn store(&self, field: &str) -> impl FnOnce(StoreError) -> ImportError + '_ {
        let field = field.to_owned();
        move |e| match e {
            StoreError::DigestMismatch {
                expected, actual, ..
            } if !field.is_empty() => self.bad(format!(
                "{field}: content digest mismatch: expected {expected}, content is {actual}"
            )),
            other if field.is_empty() => ImportError::Store {
                src: self.src.clone(),
                source: other,
            },
            other => ImportError::Store {
                src: format!("{}: {field}", self.src),
                source: other,
            },
        }
    }
}

/// Import the image at `path` into `store` as `name` (`name[:tag]`, tag
/// `latest` by default).
pub fn import(
    store: &Store,
    path: &Path,
    name: &str,
    opts: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    let target = ImageRef::parse(name).map_err(ImportError::Name)?;
    if target.digest.is_some() {
        return Err(ImportError::Name(StoreError::BadReference {
            input: name.to_owned(),
            why: "an imported image is named name[:tag], not by digest".to_owned(),
        }));
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let ctx0 = Ctx {
        src: format!("import {}", path.display()),
    };
    store.check_writable("import").map_err(ctx0.store(""))?;
    let _hold = store.hold().map_err(ctx0.store(""))?;
    let meta = fs::metadata(path).map_err(|e| ctx0.bad(e.to_string()))?;
    let wanted = opts.platform.clone().unwrap_or_else(Platform::host);

    if meta.is_dir() {
        let format = match opts.format {
            Some(f @ (Format::OciDir | Format::RootfsDir)) => f,
            Some(f) => return Err(ctx0.bad(format!("is a directory, not a {f}"))),
            None if path
                .join(layout::OCI_LAYOUT_FILE)
                .symlink_metadata()
                .is_ok() =>
            {
                Format::OciDir
            }
            None => Format::RootfsDir,
        };
        let ctx = Ctx {
            src: format!("{format} {}", path.display()),
        };
        let mut imp = Importer {
            store,
            ctx: &ctx,
            target: &target,
            source_note: format!("import {format} {}", abs.display()),
            format,
            warnings: Vec::new(),
        };
        return match format {
            Format::OciDir => imp.oci(&Source::Dir(path.to_path_buf()), opts, &wanted),
            _ => imp.rootfs_dir(path, &wanted),
        };
    }
    if !meta.is_file() {
        return Err(ctx0.bad("not a regular file or directory"));
    }
    if opts.format == Some(Format::OciDir) || opts.format == Some(Format::RootfsDir) {
        return Err(ctx0.bad(format!("is a file, not a {}", opts.format.expect("some"))));
    }
    let mut sniff = [0u8; sif::HEADER_LEN];
    let got = File::open(path)
        .and_then(|mut f| read_full(&mut f, &mut sniff))
        .map_err(|e| ctx0.bad(e.to_string()))?;
    if opts.format == Some(Format::Sif) || (opts.format.is_none() && sif::is_sif(&sniff[..got])) {
        let ctx = Ctx {
            src: format!("sif {}", path.display()),
        };
        let mut imp = Importer {
            store,
            ctx: &ctx,
            target: &target,
            source_note: format!("import sif {}", abs.display()),
            format: Format::Sif,
            warnings: Vec::new(),
        };
        return imp.sif(path, &wanted);
    }

    // Sniff compression; a compressed input is decompressed once into tmp/.
    let mut file = File::open(path).map_err(|e| ctx0.bad(e.to_string()))?;
    let mut head = [0u8; 6];
    let n = read_full(&mut file, &mut head).map_err(|e| ctx0.bad(e.to_string()))?;
    let compression = Compression::detect(&head[..n]);
    // Decompressed straight into a blob writer: if the input turns out to be
    // a rootfs tarball, that temp file becomes its layer without a copy.
    let mut decompressed: Option<BlobWriter> = None;
    let tar_file = match compression {
        Compression::None => File::open(path).map_err(|e| ctx0.bad(e.to_string()))?,
        Compression::Other(kind) => {
            return Err(ctx0.bad(format!(
                "{kind}-compressed input is not supported (gzip and zstd are)"
            )))
        }
        Compression::Gzip | Compression::Zstd => {
            let src = File::open(path).map_err(|e| ctx0.bad(e.to_string()))?;
            let mut dec: Box<dyn Read> = match compression {
                Compression::Gzip => {
                    Box::new(flate2::read::MultiGzDecoder::new(io::BufReader::new(src)))
                }
                _ => Box::new(
                    zstd::stream::read::Decoder::new(src)
                        .map_err(|e| ctx0.bad(format!("zstd: {e}")))?,
                ),
            };
            let mut w = store.blob_writer().map_err(ctx0.store(""))?;
            io::copy(&mut dec, &mut w).map_err(|e| ctx0.bad(format!("decompressing: {e}")))?;
            w.flush()
                .map_err(|e| ctx0.bad(format!("decompressing: {e}")))?;
            let f = File::open(w.temp_path()).map_err(|e| ctx0.bad(e.to_string()))?;
            decompressed = Some(w);
            f
        }
    };
    let scan = TarIndex::scan(tar_file).map_err(|e| ctx0.bad(e))?;
    let format = match opts.format {
        Some(f) => f,
        None if scan.has_top(layout::OCI_LAYOUT_FILE) && scan.has_top(layout::INDEX_FILE) => {
            Format::OciArchive
        }
        None if scan.has_top("manifest.json") => Format::DockerArchive,
        None => Format::RootfsTar,
    };
    let ctx = Ctx {
        src: format!("{format} {}", path.display()),
    };
    let mut imp = Importer {
        store,
        ctx: &ctx,
        target: &target,
        source_note: format!("import {format} {}", abs.display()),
        format,
        warnings: Vec::new(),
    };
    match format {
        Format::RootfsTar => imp.rootfs_tar(scan, decompressed, &wanted),
        Format::OciArchive | Format::DockerArchive => {
            if let Some((name, why)) = scan.bad.first() {
                return Err(ctx.bad(format!("entry {name:?}: {why}")));
            }
            if scan.entries > MAX_ARCHIVE_ENTRIES {
                return Err(ctx.bad(format!(
                    "{} entries is more than an image archive has",
                    scan.entries
                )));
            }
            let src = Source::Tar(scan);
            if format == Format::OciArchive {
                imp.oci(&src, opts, &wanted)
            } else {
                imp.docker(&src, opts, &wanted)
            }
        }
        Format::OciDir | Format::RootfsDir | Format::Sif => unreachable!("checked above"),
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

// ---------------------------------------------------------------------------
// The importer

/// One import under way: where it goes, what it is, and the warnings so far.
struct Importer<'a> {
    store: &'a Store,
    ctx: &'a Ctx,
    target: &'a ImageRef,
    source_note: String,
    format: Format,
    warnings: Vec<String>,
}

impl Importer<'_> {
    fn finish(
        &mut self,
        manifest_bytes: &[u8],
        config_digest: Digest,
        config: &ImageConfiguration,
        layers: usize,
        size: u64,
    ) -> Result<ImportReport, ImportError> {
        let manifest_digest = self
            .store
            .commit_image(self.target, manifest_bytes, &self.source_note)
            .map_err(self.ctx.store(""))?;
        Ok(ImportReport {
            reference: self.target.to_string(),
            format: self.format,
            manifest_digest,
            config_digest,
            platform: Platform::from(config).to_string(),
            layers,
            size,
            warnings: std::mem::take(&mut self.warnings),
        })
    }

    fn check_platform(
        &self,
        config: &ImageConfiguration,
        wanted: &Platform,
    ) -> Result<(), ImportError> {
        let have = Platform::from(config);
        if have.fitness_for(wanted).is_none() {
            return Err(self.ctx.bad(format!(
                "the image is for {have}, not {wanted}; pass --platform {have} to import it anyway"
            )));
        }
        Ok(())
    }
}

/// An image manifest as cbrun writes it (field order fixed, compact JSON).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestOut {
    schema_version: u32,
    media_type: &'static str,
    config: Descriptor,
    layers: Vec<Descriptor>,
}
