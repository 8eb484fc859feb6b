//! `cbrun image bootstrap`: base images built without Docker or a registry.
//!
//! A recipe (`rootfs/<name>/recipe.toml`, documented in `rootfs/README.md`)
//! says how to make the root filesystem: from the host's static `busybox`
//! (`kind = "busybox"`, a fraction of a second) or from Debian's packages
//! with `mmdebstrap` (`kind = "mmdebstrap"`). [`bootstrap`] writes the result
//! as an OCI image layout directory (`oci-layout`, `index.json`,
//! `blobs/sha256/`) holding one manifest, one config and one gzip-compressed
//! layer; importing that layout into the store is someone else's job.
//!
//! The busybox layer is built here, entry by entry, in sorted order with a
//! fixed mtime and owner, so the same binary and epoch always give the same
//! digest. The mmdebstrap layer is the tarball mmdebstrap writes (sorted,
//! numeric owners, pax), streamed from its stdout through the compressor.
//!
//! Here: the recipe's types, the options and [`bootstrap`] itself; the
//! recipe file is parsed in `recipe`, each kind's layer is made in
//! `busybox` and `mmdebstrap`, and `oci` writes the layout's documents.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use flate2::write::GzEncoder;
use flate2::Compression;

use super::digest::{Digest, DigestWriter};

mod busybox;
mod mmdebstrap;
mod oci;
mod recipe;

#[cfg(test)]
mod tests;

pub use mmdebstrap::mmdebstrap_args;
pub use recipe::{host_oci_arch, load_recipe, parse_recipe};

use busybox::write_busybox_tar;
use mmdebstrap::run_mmdebstrap;
use oci::{
    non_empty, rfc3339_utc, to_json, write_file, write_json_blob, Descriptor, OciConfig,
    OciHistory, OciIndex, OciManifest, OciRootfs, OciRuntimeConfig, Platform,
};

pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";
pub const DEFAULT_BUSYBOX: &str = "/bin/busybox";
pub const DEFAULT_VARIANT: &str = "apt";
/// The image's environment when a recipe has no `env`.
pub const DEFAULT_PATH_ENV: &str =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// `org.opencontainers.image.ref.name`: the tag, in `index.json`.
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

pub const MEDIA_TYPE_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_TYPE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_TYPE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_TYPE_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// A recipe that cannot be read or used; `msg` starts with `field NAME:`
    /// when one field is at fault.
    #[error("{}: {msg}", path.display())]
    Recipe { path: PathBuf, msg: String },
    #[error("mmdebstrap not found ({program}): install it with `apt-get install mmdebstrap`")]
    MmdebstrapMissing { program: String },
    #[error("mmdebstrap failed: {0}")]
    Mmdebstrap(String),
    #[error("busybox {}: {msg}", path.display())]
    Busybox { path: PathBuf, msg: String },
    #[error("output {}: {msg}", path.display())]
    Output { path: PathBuf, msg: String },
    #[error("{what} {}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("SOURCE_DATE_EPOCH={0:?}: expected a non-negative whole number of seconds")]
    SourceDateEpoch(String),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> BootstrapError + 'a {
    move |source| BootstrapError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// A parsed, validated recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// The `recipe.toml` it was read from (for messages).
    pub path: PathBuf,
    pub name: String,
    pub tag: String,
    pub kind: RecipeKind,
    /// OCI architecture name (`amd64`, `arm64`, ...).
    pub architecture: String,
    /// Fixed mtime for the layer; `SOURCE_DATE_EPOCH` overrides it.
    pub source_date_epoch: Option<u64>,
    pub config: ImageConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecipeKind {
    Busybox(BusyboxSpec),
    Mmdebstrap(MmdebstrapSpec),
}

impl RecipeKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            RecipeKind::Busybox(_) => "busybox",
            RecipeKind::Mmdebstrap(_) => "mmdebstrap",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusyboxSpec {
    /// The static busybox binary copied into the image.
    pub binary: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MmdebstrapSpec {
    pub suite: String,
    pub mirror: String,
    /// `deb [trusted=yes]`: an unsigned local mirror (loopback or file://
    /// only, checked when the recipe is read).
    pub trusted_mirror: bool,
    pub variant: String,
    pub packages: Vec<String>,
    pub components: Vec<String>,
    /// Shell commands, each run as `chroot "$1" /bin/sh -c CMD` in
    /// mmdebstrap's customize hook, in order.
    pub customize: Vec<String>,
    /// Debian architecture name passed to `--architectures`, when the recipe
    /// names one.
    pub debian_architecture: Option<String>,
}

/// The runtime part of the image config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    pub env: Vec<String>,
    pub workdir: Option<String>,
    pub user: Option<String>,
    pub cmd: Vec<String>,
    pub entrypoint: Vec<String>,
}

/// How mmdebstrap gets the privileges it needs (`--mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MmdebstrapMode {
    /// mmdebstrap decides: `root` as root, else `unshare` when
    /// `/etc/subuid` has a range for the user, else `fakechroot`.
    #[default]
    Auto,
    Root,
    Unshare,
    Fakechroot,
}

impl MmdebstrapMode {
    pub fn as_str(self) -> &'static str {
        match self {
            MmdebstrapMode::Auto => "auto",
            MmdebstrapMode::Root => "root",
            MmdebstrapMode::Unshare => "unshare",
            MmdebstrapMode::Fakechroot => "fakechroot",
        }
    }
}

impl FromStr for MmdebstrapMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(MmdebstrapMode::Auto),
            "root" | "sudo" => Ok(MmdebstrapMode::Root),
            "unshare" => Ok(MmdebstrapMode::Unshare),
            "fakechroot" | "fakeroot" => Ok(MmdebstrapMode::Fakechroot),
            other => Err(format!(
                "mmdebstrap mode {other:?}: expected auto, root, unshare or fakechroot"
            )),
        }
    }
}

#[derive(Debug, Clone)]
pub struct BootstrapOptions {
    pub mode: MmdebstrapMode,
    /// Overrides the recipe's `source_date_epoch` (see [`Self::from_env`]).
    pub source_date_epoch: Option<u64>,
    /// The mmdebstrap program (a name looked up in `PATH`, or a path).
    pub mmdebstrap: PathBuf,
    /// Overrides the recipe's `mirror` (a local mirror or a cache).
    pub mirror: Option<String>,
    /// Pass `--quiet` to mmdebstrap (its progress goes to stderr otherwise).
    pub quiet: bool,
    /// gzip level, 0..=9. Level 6 (the default) compresses the dev image's
    /// 775 MB to 262 MB at about 21 MB/s on one core; level 1 gives 320 MB
    /// about six times faster.
    pub compression_level: u32,
    /// Where mmdebstrap makes its temporary chroot (`TMPDIR`; unset: the
    /// inherited `TMPDIR`, else /tmp). A tmpfs such as /dev/shm spares dpkg
    /// its fsyncs: several times faster on a busy disk.
    pub tmpdir: Option<PathBuf>,
}

impl Default for BootstrapOptions {
    fn default() -> Self {
        BootstrapOptions {
            mode: MmdebstrapMode::Auto,
            source_date_epoch: None,
            mmdebstrap: PathBuf::from("mmdebstrap"),
            mirror: None,
            quiet: false,
            compression_level: 6,
            tmpdir: None,
        }
    }
}

impl BootstrapOptions {
    /// Defaults, with `source_date_epoch` from `SOURCE_DATE_EPOCH` when it is
    /// set (and not empty).
    pub fn from_env() -> Result<Self, BootstrapError> {
        let mut opts = BootstrapOptions::default();
        if let Some(v) = std::env::var_os("SOURCE_DATE_EPOCH") {
            let s = v.to_string_lossy().into_owned();
            if !s.is_empty() {
                let n = s
                    .parse::<u64>()
                    .map_err(|_| BootstrapError::SourceDateEpoch(s.clone()))?;
                opts.source_date_epoch = Some(n);
            }
        }
        Ok(opts)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapReport {
    /// Size of the compressed layer blob.
    pub layer_bytes: u64,
    /// Size of the uncompressed layer tar.
    pub uncompressed_bytes: u64,
    pub seconds: f64,
    pub manifest_digest: Digest,
    pub config_digest: Digest,
    pub layer_digest: Digest,
    /// sha256 of the uncompressed tar (the config's `rootfs.diff_ids[0]`).
    pub diff_id: Digest,
}

// ---------------------------------------------------------------------------
// Building

/// Builds `recipe` into a new OCI image layout at `out_layout` (which must
/// not exist, or be an empty directory). The layout is assembled in a
/// sibling directory and renamed into place, so a failed build leaves
/// nothing at `out_layout`.
pub fn bootstrap(
    recipe: &Recipe,
    out_layout: &Path,
    opts: &BootstrapOptions,
) -> Result<BootstrapReport, BootstrapError> {
    let start = Instant::now();
    let epoch = opts.source_date_epoch.or(recipe.source_date_epoch);
    let level = opts.compression_level.min(9);

    prepare_output(out_layout)?;
    let staging = staging_dir(out_layout);
    let _ = fs::remove_dir_all(&staging);
    let blobs = staging.join("blobs").join("sha256");
    fs::create_dir_all(&blobs).map_err(io_err("create", &blobs))?;
    let mut guard = RemoveOnDrop(Some(staging.clone()));

    // The layer: a tar, hashed as it is written (diff_id), gzip-compressed
    // and hashed again (the blob digest).
    let tmp_layer = blobs.join(".layer.tmp");
    let file = File::create(&tmp_layer).map_err(io_err("create", &tmp_layer))?;
    let gz = GzEncoder::new(
        DigestWriter::new(BufWriter::with_capacity(1 << 20, file)),
        Compression::new(level),
    );
    let mut tar_out = DigestWriter::new(gz);
    let history = match &recipe.kind {
        RecipeKind::Busybox(spec) => {
            write_busybox_tar(spec, epoch.unwrap_or(0), &mut tar_out)?;
            format!("cbrun image bootstrap: busybox {}", spec.binary.display())
        }
        RecipeKind::Mmdebstrap(spec) => {
            run_mmdebstrap(spec, epoch, opts, &mut tar_out)?;
            format!(
                "cbrun image bootstrap: mmdebstrap --variant={} {} ({})",
                spec.variant,
                spec.suite,
                spec.packages.join(" ")
            )
        }
    };
    let (diff_id, uncompressed_bytes, gz) = tar_out.finish();
    let compressed = gz.finish().map_err(io_err("compress layer", &tmp_layer))?;
    let (layer_digest, layer_bytes, mut buf) = compressed.finish();
    buf.flush().map_err(io_err("write", &tmp_layer))?;
    let file = buf
        .into_inner()
        .map_err(|e| io_err("write", &tmp_layer)(e.into_error()))?;
    file.sync_all().map_err(io_err("sync", &tmp_layer))?;
    drop(file);
    let layer_path = blobs.join(layer_digest.hex());
    fs::rename(&tmp_layer, &layer_path).map_err(io_err("rename", &layer_path))?;

    // The config. Always with a date (umoci, for one, trips over history
    // without one): the layer's mtime, or now for an mmdebstrap build
    // without an epoch.
    let created = Some(rfc3339_utc(epoch.unwrap_or_else(|| {
        match recipe.kind {
            RecipeKind::Busybox(_) => 0,
            RecipeKind::Mmdebstrap(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    })));
    let config = OciConfig {
        created: created.clone(),
        architecture: recipe.architecture.clone(),
        os: "linux".to_owned(),
        config: OciRuntimeConfig {
            user: recipe.config.user.clone(),
            env: recipe.config.env.clone(),
            entrypoint: non_empty(&recipe.config.entrypoint),
            cmd: non_empty(&recipe.config.cmd),
            working_dir: recipe.config.workdir.clone(),
            labels: BTreeMap::from([
                ("io.cbrun.recipe.name".to_owned(), recipe.name.clone()),
                (
                    "io.cbrun.recipe.kind".to_owned(),
                    recipe.kind.as_str().to_owned(),
                ),
            ]),
        },
        rootfs: OciRootfs {
            kind: "layers",
            diff_ids: vec![diff_id.clone()],
        },
        history: vec![OciHistory {
            created,
            created_by: history,
        }],
    };
    let config_desc = write_json_blob(&blobs, MEDIA_TYPE_CONFIG, &config)?;

    // The manifest.
    let manifest = OciManifest {
        schema_version: 2,
        media_type: MEDIA_TYPE_MANIFEST,
        config: config_desc.clone(),
        layers: vec![Descriptor {
            media_type: MEDIA_TYPE_LAYER_GZIP.to_owned(),
            digest: layer_digest.clone(),
            size: layer_bytes,
            annotations: None,
            platform: None,
        }],
    };
    let mut manifest_desc = write_json_blob(&blobs, MEDIA_TYPE_MANIFEST, &manifest)?;
    manifest_desc.annotations = Some(BTreeMap::from([
        (REF_NAME_ANNOTATION.to_owned(), recipe.tag.clone()),
        ("io.cbrun.image.name".to_owned(), recipe.name.clone()),
    ]));
    manifest_desc.platform = Some(Platform {
        architecture: recipe.architecture.clone(),
        os: "linux".to_owned(),
    });
    let manifest_digest = manifest_desc.digest.clone();

    // index.json and oci-layout.
    let index = OciIndex {
        schema_version: 2,
        media_type: MEDIA_TYPE_INDEX,
        manifests: vec![manifest_desc],
    };
    write_file(&staging.join("index.json"), &to_json(&index))?;
    write_file(
        &staging.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;

    // Into place.
    if out_layout.exists() {
        fs::remove_dir(out_layout).map_err(io_err("replace empty directory", out_layout))?;
    }
    fs::rename(&staging, out_layout).map_err(io_err("rename into place", out_layout))?;
    guard.0 = None;

    Ok(BootstrapReport {
        layer_bytes,
        uncompressed_bytes,
        seconds: start.elapsed().as_secs_f64(),
        manifest_digest,
        config_digest: config_desc.digest,
        layer_digest,
        diff_id,
    })
}

fn prepare_output(out: &Path) -> Result<(), BootstrapError> {
    match fs::symlink_metadata(out) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("inspect", out)(e)),
        Ok(m) if m.is_dir() => {
            let mut entries = fs::read_dir(out).map_err(io_err("read", out))?;
            if entries.next().is_some() {
                return Err(BootstrapError::Output {
                    path: out.to_path_buf(),
                    msg: "exists and is not empty".to_owned(),
                });
            }
        }
        Ok(_) => {
            return Err(BootstrapError::Output {
                path: out.to_path_buf(),
                msg: "exists and is not a directory".to_owned(),
            })
        }
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_err("create", parent))?;
    }
    Ok(())
}

fn staging_dir(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "layout".to_owned());
    out.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_dir_all(p);
        }
    }
}
