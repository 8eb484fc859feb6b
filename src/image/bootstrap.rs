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

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::Instant;

use flate2::write::GzEncoder;
use flate2::Compression;
use serde::Serialize;

use super::digest::{Digest, DigestWriter};
use super::store::{check_name, check_tag};

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

/// mmdebstrap's variants (`--variant`).
const VARIANTS: &[&str] = &[
    "extract",
    "custom",
    "essential",
    "apt",
    "required",
    "minbase",
    "buildd",
    "important",
    "debootstrap",
    "-",
    "standard",
];

/// Debian architecture name -> OCI architecture name.
const ARCHITECTURES: &[(&str, &str)] = &[
    ("amd64", "amd64"),
    ("arm64", "arm64"),
    ("armhf", "arm"),
    ("i386", "386"),
    ("ppc64el", "ppc64le"),
    ("s390x", "s390x"),
    ("riscv64", "riscv64"),
];

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
    #[error("{what} {}: {source}", path.display())]
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
// Recipes

/// Reads `path` (a `recipe.toml`, or a directory holding one).
pub fn load_recipe(path: &Path) -> Result<Recipe, BootstrapError> {
    let file = if path.is_dir() {
        path.join("recipe.toml")
    } else {
        path.to_path_buf()
    };
    let text = fs::read_to_string(&file).map_err(|e| BootstrapError::Recipe {
        path: file.clone(),
        msg: format!("cannot read: {e}"),
    })?;
    parse_recipe(&text, &file)
}

/// Parses recipe text; `path` is only used in messages.
pub fn parse_recipe(text: &str, path: &Path) -> Result<Recipe, BootstrapError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let msg = e.message().replace('\n', " ");
        BootstrapError::Recipe {
            path: path.to_path_buf(),
            msg: match line {
                Some(l) => format!("line {l}: {}", msg.trim()),
                None => msg.trim().to_owned(),
            },
        }
    })?;
    let mut f = Fields {
        table,
        path,
        taken: BTreeSet::new(),
    };

    let name = f.string("name")?.ok_or_else(|| f.err("name", "missing"))?;
    check_name(&name).map_err(|m| f.err("name", &m))?;
    let tag = f.string("tag")?.ok_or_else(|| f.err("tag", "missing"))?;
    check_tag(&tag).map_err(|m| f.err("tag", &m))?;
    let kind_s = f.string("kind")?.ok_or_else(|| f.err("kind", "missing"))?;

    const MMDEBSTRAP_ONLY: &[&str] = &[
        "suite",
        "mirror",
        "variant",
        "packages",
        "components",
        "customize",
        "architecture",
    ];
    const BUSYBOX_ONLY: &[&str] = &["busybox"];

    let (kind, architecture) = match kind_s.as_str() {
        "busybox" => {
            f.not_for(MMDEBSTRAP_ONLY, "busybox")?;
            let binary = match f.string("busybox")? {
                Some(p) => {
                    if !p.starts_with('/') {
                        return Err(f.err("busybox", "expected an absolute path"));
                    }
                    PathBuf::from(p)
                }
                None => PathBuf::from(DEFAULT_BUSYBOX),
            };
            (
                RecipeKind::Busybox(BusyboxSpec { binary }),
                host_oci_arch().to_owned(),
            )
        }
        "mmdebstrap" => {
            f.not_for(BUSYBOX_ONLY, "mmdebstrap")?;
            let suite = f
                .string("suite")?
                .ok_or_else(|| f.err("suite", "missing"))?;
            check_word(&suite, "a suite or codename such as bookworm")
                .map_err(|m| f.err("suite", &m))?;
            let mirror = f
                .string("mirror")?
                .unwrap_or_else(|| DEFAULT_MIRROR.to_owned());
            check_mirror(&mirror).map_err(|m| f.err("mirror", &m))?;
            let variant = f
                .string("variant")?
                .unwrap_or_else(|| DEFAULT_VARIANT.to_owned());
            if !VARIANTS.contains(&variant.as_str()) {
                return Err(f.err(
                    "variant",
                    &format!("{variant:?}: expected one of {}", VARIANTS.join(", ")),
                ));
            }
            let packages = f.strings("packages")?.unwrap_or_default();
            for (i, p) in packages.iter().enumerate() {
                check_package(p).map_err(|m| f.err("packages", &format!("item {i}: {m}")))?;
            }
            let components = f
                .strings("components")?
                .unwrap_or_else(|| vec!["main".to_owned()]);
            if components.is_empty() {
                return Err(f.err("components", "empty (leave it out for [\"main\"])"));
            }
            for (i, c) in components.iter().enumerate() {
                check_word(c, "a component such as main")
                    .map_err(|m| f.err("components", &format!("item {i}: {m}")))?;
            }
            let customize = f.strings("customize")?.unwrap_or_default();
            for (i, c) in customize.iter().enumerate() {
                if c.trim().is_empty() {
                    return Err(f.err("customize", &format!("item {i}: empty command")));
                }
            }
            let (debian_architecture, architecture) = match f.string("architecture")? {
                None => (None, host_oci_arch().to_owned()),
                Some(a) => match ARCHITECTURES.iter().find(|(deb, _)| *deb == a) {
                    Some((deb, oci)) => (Some((*deb).to_owned()), (*oci).to_owned()),
                    None => {
                        let known: Vec<&str> = ARCHITECTURES.iter().map(|(d, _)| *d).collect();
                        return Err(f.err(
                            "architecture",
                            &format!(
                                "{a:?}: expected a Debian architecture ({})",
                                known.join(", ")
                            ),
                        ));
                    }
                },
            };
            (
                RecipeKind::Mmdebstrap(MmdebstrapSpec {
                    suite,
                    mirror,
                    variant,
                    packages,
                    components,
                    customize,
                    debian_architecture,
                }),
                architecture,
            )
        }
        other => {
            return Err(f.err(
                "kind",
                &format!("{other:?}: expected \"busybox\" or \"mmdebstrap\""),
            ))
        }
    };

    let env = match f.strings("env")? {
        Some(env) => {
            for (i, e) in env.iter().enumerate() {
                check_env(e).map_err(|m| f.err("env", &format!("item {i}: {m}")))?;
            }
            env
        }
        None => vec![DEFAULT_PATH_ENV.to_owned()],
    };
    let workdir = f.string("workdir")?;
    if let Some(w) = &workdir {
        if !w.starts_with('/') {
            return Err(f.err("workdir", "expected an absolute path"));
        }
    }
    let user = f.string("user")?;
    if let Some(u) = &user {
        if u.is_empty() || u.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(f.err(
                "user",
                "expected a user name or id, optionally with :group (no spaces)",
            ));
        }
    }
    let cmd = f.strings("cmd")?.unwrap_or_default();
    let entrypoint = f.strings("entrypoint")?.unwrap_or_default();
    let source_date_epoch = f.epoch("source_date_epoch")?;

    f.no_unknown()?;
    Ok(Recipe {
        path: path.to_path_buf(),
        name,
        tag,
        kind,
        architecture,
        source_date_epoch,
        config: ImageConfig {
            env,
            workdir,
            user,
            cmd,
            entrypoint,
        },
    })
}

/// Typed access to the recipe's top-level table, one field at a time.
struct Fields<'a> {
    table: toml::Table,
    path: &'a Path,
    taken: BTreeSet<String>,
}

impl Fields<'_> {
    fn err(&self, field: &str, msg: &str) -> BootstrapError {
        BootstrapError::Recipe {
            path: self.path.to_path_buf(),
            msg: format!("field {field}: {msg}"),
        }
    }

    fn take(&mut self, key: &str) -> Option<toml::Value> {
        self.taken.insert(key.to_owned());
        self.table.get(key).cloned()
    }

    fn string(&mut self, key: &str) -> Result<Option<String>, BootstrapError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => {
                if s.contains('\0') {
                    Err(self.err(key, "contains a NUL byte"))
                } else {
                    Ok(Some(s))
                }
            }
            Some(v) => Err(self.err(key, &format!("expected a string, got {}", v.type_str()))),
        }
    }

    fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, BootstrapError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, v) in items.into_iter().enumerate() {
                    match v {
                        toml::Value::String(s) if !s.contains('\0') => out.push(s),
                        toml::Value::String(_) => {
                            return Err(self.err(key, &format!("item {i}: contains a NUL byte")))
                        }
                        other => {
                            return Err(self.err(
                                key,
                                &format!("item {i}: expected a string, got {}", other.type_str()),
                            ))
                        }
                    }
                }
                Ok(Some(out))
            }
            Some(v) => Err(self.err(
                key,
                &format!("expected an array of strings, got {}", v.type_str()),
            )),
        }
    }

    fn epoch(&mut self, key: &str) -> Result<Option<u64>, BootstrapError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) if n >= 0 => Ok(Some(n as u64)),
            Some(toml::Value::Integer(_)) => Err(self.err(key, "expected seconds >= 0")),
            Some(v) => Err(self.err(key, &format!("expected an integer, got {}", v.type_str()))),
        }
    }

    /// Fields that belong to the other kind are an error when present.
    fn not_for(&mut self, keys: &[&str], kind: &str) -> Result<(), BootstrapError> {
        for k in keys {
            if self.table.contains_key(*k) {
                return Err(self.err(k, &format!("not used by kind \"{kind}\"")));
            }
        }
        Ok(())
    }

    fn no_unknown(&self) -> Result<(), BootstrapError> {
        match self.table.keys().find(|k| !self.taken.contains(*k)) {
            Some(k) => Err(self.err(k, "unknown field")),
            None => Ok(()),
        }
    }
}

fn check_word(s: &str, what: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/+".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("{s:?}: expected {what}"))
    }
}

fn check_mirror(s: &str) -> Result<(), String> {
    let scheme_ok = ["http://", "https://", "file://"]
        .iter()
        .any(|p| s.starts_with(p) && s.len() > p.len());
    if scheme_ok && !s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Ok(())
    } else {
        Err(format!(
            "{s:?}: expected an http://, https:// or file:// URL without spaces"
        ))
    }
}

/// A package as apt takes it: `name`, `name=version`, `name/release` or
/// `name:arch`. No commas or spaces: mmdebstrap splits `--include` on them.
fn check_package(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"+-.:~=/_".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!("{s:?}: expected a Debian package name"))
    }
}

fn check_env(s: &str) -> Result<(), String> {
    let Some((k, _)) = s.split_once('=') else {
        return Err(format!("{s:?}: expected KEY=VALUE"));
    };
    let kb = k.as_bytes();
    let ok = !kb.is_empty()
        && (kb[0].is_ascii_alphabetic() || kb[0] == b'_')
        && kb.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?}: expected KEY=VALUE with KEY of letters, digits and '_'"
        ))
    }
}

/// The OCI architecture name of the machine cbrun was built for.
pub fn host_oci_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
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

fn non_empty(v: &[String]) -> Option<Vec<String>> {
    if v.is_empty() {
        None
    } else {
        Some(v.to_vec())
    }
}

fn to_json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("serializing plain structs cannot fail")
}

fn write_file(path: &Path, data: &[u8]) -> Result<(), BootstrapError> {
    fs::write(path, data).map_err(io_err("write", path))
}

fn write_json_blob<T: Serialize>(
    blobs: &Path,
    media_type: &str,
    v: &T,
) -> Result<Descriptor, BootstrapError> {
    let data = to_json(v);
    let digest = Digest::of_bytes(&data);
    write_file(&blobs.join(digest.hex()), &data)?;
    Ok(Descriptor {
        media_type: media_type.to_owned(),
        digest,
        size: data.len() as u64,
        annotations: None,
        platform: None,
    })
}

/// `1970-01-01T00:00:00Z` style, from seconds since the epoch.
fn rfc3339_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

// OCI documents, with fields in a fixed order so that the same input always
// gives the same bytes.

#[derive(Debug, Clone, Serialize)]
struct Descriptor {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: Digest,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    platform: Option<Platform>,
}

#[derive(Debug, Clone, Serialize)]
struct Platform {
    architecture: String,
    os: String,
}

#[derive(Serialize)]
struct OciIndex {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    #[serde(rename = "mediaType")]
    media_type: &'static str,
    manifests: Vec<Descriptor>,
}

#[derive(Serialize)]
struct OciManifest {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    #[serde(rename = "mediaType")]
    media_type: &'static str,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Serialize)]
struct OciConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<String>,
    architecture: String,
    os: String,
    config: OciRuntimeConfig,
    rootfs: OciRootfs,
    history: Vec<OciHistory>,
}

#[derive(Serialize)]
struct OciRuntimeConfig {
    #[serde(rename = "User", skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(rename = "Env")]
    env: Vec<String>,
    #[serde(rename = "Entrypoint", skip_serializing_if = "Option::is_none")]
    entrypoint: Option<Vec<String>>,
    #[serde(rename = "Cmd", skip_serializing_if = "Option::is_none")]
    cmd: Option<Vec<String>>,
    #[serde(rename = "WorkingDir", skip_serializing_if = "Option::is_none")]
    working_dir: Option<String>,
    #[serde(rename = "Labels")]
    labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct OciRootfs {
    #[serde(rename = "type")]
    kind: &'static str,
    diff_ids: Vec<Digest>,
}

#[derive(Serialize)]
struct OciHistory {
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<String>,
    created_by: String,
}

// ---------------------------------------------------------------------------
// busybox

/// One entry of the busybox rootfs.
enum Node {
    Dir { mode: u32, owner: u64 },
    File { mode: u32, data: Vec<u8> },
    Symlink { target: String },
}

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
user:x:1000:1000:user:/home/user:/bin/sh\n\
nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n";
const HOSTS: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// The applets `busybox` provides, as paths relative to `/`
/// (`bin/sh`, `usr/bin/env`, ...). `--list-full` gives each its usual
/// directory; a busybox without it gets them all in `bin/`.
fn busybox_applets(binary: &Path) -> Result<Vec<String>, BootstrapError> {
    let run = |arg: &str| {
        Command::new(binary)
            .arg(arg)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
    };
    let bb_err = |msg: String| BootstrapError::Busybox {
        path: binary.to_path_buf(),
        msg,
    };
    let full = run("--list-full").map_err(|e| bb_err(format!("cannot run: {e}")))?;
    let (out, full) = if full.status.success() && !full.stdout.is_empty() {
        (full.stdout, true)
    } else {
        let l = run("--list").map_err(|e| bb_err(format!("cannot run: {e}")))?;
        if !l.status.success() {
            return Err(bb_err(format!("`--list` failed ({})", l.status)));
        }
        (l.stdout, false)
    };
    let text = String::from_utf8(out).map_err(|_| bb_err("`--list` is not UTF-8".to_owned()))?;
    let mut applets = BTreeSet::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (dir, name) = match line.rsplit_once('/') {
            Some((d, n)) if full => (d, n),
            _ => ("bin", line),
        };
        let dir = if ["bin", "sbin", "usr/bin", "usr/sbin"].contains(&dir) {
            dir
        } else {
            // `linuxrc` and the like: nothing a sandbox needs.
            continue;
        };
        let bad = name.is_empty()
            || name == "."
            || name == ".."
            || name.contains('/')
            || name
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control());
        if bad || (dir == "bin" && name == "busybox") {
            continue;
        }
        applets.insert(format!("{dir}/{name}"));
    }
    if !applets.contains("bin/sh") {
        return Err(bb_err("provides no `sh` applet".to_owned()));
    }
    Ok(applets.into_iter().collect())
}

/// Refuses a busybox that needs a dynamic loader: the image has no libc.
fn check_static(binary: &Path, data: &[u8]) -> Result<(), BootstrapError> {
    let err = |msg: &str| BootstrapError::Busybox {
        path: binary.to_path_buf(),
        msg: msg.to_owned(),
    };
    if data.len() < 64 || &data[..4] != b"\x7fELF" {
        return Err(err("not an ELF executable"));
    }
    if elf_has_interp(data) {
        return Err(err(
            "is dynamically linked; the image needs a static one (`apt-get install busybox-static`)",
        ));
    }
    Ok(())
}

/// Whether an ELF file has a PT_INTERP program header (needs ld.so).
fn elf_has_interp(d: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let is64 = d[4] == 2;
    let le = d[5] == 1;
    let u16_at = |o: usize| -> Option<u64> {
        let b: [u8; 2] = d.get(o..o + 2)?.try_into().ok()?;
        Some(u64::from(if le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }))
    };
    let u32_at = |o: usize| -> Option<u64> {
        let b: [u8; 4] = d.get(o..o + 4)?.try_into().ok()?;
        Some(u64::from(if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }))
    };
    let u64_at = |o: usize| -> Option<u64> {
        let b: [u8; 8] = d.get(o..o + 8)?.try_into().ok()?;
        Some(if le {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    };
    let scan = || -> Option<bool> {
        let (phoff, phentsize, phnum) = if is64 {
            (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?)
        } else {
            (u32_at(0x1c)?, u16_at(0x2a)?, u16_at(0x2c)?)
        };
        for i in 0..phnum {
            let off = usize::try_from(phoff + i * phentsize).ok()?;
            if u32_at(off)? == u64::from(PT_INTERP) {
                return Some(true);
            }
        }
        Some(false)
    };
    scan().unwrap_or(false)
}

fn busybox_tree(spec: &BusyboxSpec) -> Result<BTreeMap<String, Node>, BootstrapError> {
    let data = fs::read(&spec.binary).map_err(|e| BootstrapError::Busybox {
        path: spec.binary.clone(),
        msg: format!("cannot read: {e} (install busybox-static)"),
    })?;
    check_static(&spec.binary, &data)?;
    let applets = busybox_applets(&spec.binary)?;

    let dir = |mode| Node::Dir { mode, owner: 0 };
    let file = |mode, text: &str| Node::File {
        mode,
        data: text.as_bytes().to_vec(),
    };
    let mut t = BTreeMap::new();
    for d in [
        "bin", "dev", "etc", "home", "proc", "sbin", "sys", "usr", "usr/bin", "usr/sbin", "var",
    ] {
        t.insert(d.to_owned(), dir(0o755));
    }
    t.insert("root".to_owned(), dir(0o700));
    t.insert("tmp".to_owned(), dir(0o1777));
    t.insert("var/tmp".to_owned(), dir(0o1777));
    t.insert(
        "home/user".to_owned(),
        Node::Dir {
            mode: 0o755,
            owner: 1000,
        },
    );
    t.insert("etc/passwd".to_owned(), file(0o644, PASSWD));
    t.insert("etc/group".to_owned(), file(0o644, GROUP));
    t.insert("etc/hosts".to_owned(), file(0o644, HOSTS));
    t.insert("etc/hostname".to_owned(), file(0o644, "localhost\n"));
    t.insert("bin/busybox".to_owned(), Node::File { mode: 0o755, data });
    for a in applets {
        let depth = a.matches('/').count();
        let target = format!("{}bin/busybox", "../".repeat(depth));
        let target = if depth == 1 && a.starts_with("bin/") {
            "busybox".to_owned()
        } else {
            target
        };
        t.entry(a).or_insert(Node::Symlink { target });
    }
    Ok(t)
}

/// Writes the busybox rootfs as a tar: entries in sorted path order, every
/// mtime `epoch`, owner 0:0 (1000:1000 for `/home/user`), no user or group
/// names, no other metadata from the host.
fn write_busybox_tar(
    spec: &BusyboxSpec,
    epoch: u64,
    out: &mut impl Write,
) -> Result<(), BootstrapError> {
    let tree = busybox_tree(spec)?;
    let mut b = tar::Builder::new(out);
    let werr = |e: io::Error| BootstrapError::Io {
        what: "write layer for",
        path: spec.binary.clone(),
        source: e,
    };
    for (path, node) in &tree {
        let mut h = tar::Header::new_ustar();
        h.set_mtime(epoch);
        h.set_uid(0);
        h.set_gid(0);
        match node {
            Node::Dir { mode, owner } => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                h.set_uid(*owner);
                h.set_gid(*owner);
                h.set_size(0);
                b.append_data(&mut h, format!("{path}/"), io::empty())
                    .map_err(werr)?;
            }
            Node::File { mode, data } => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, path, data.as_slice()).map_err(werr)?;
            }
            Node::Symlink { target } => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, path, target).map_err(werr)?;
            }
        }
    }
    b.into_inner().map_err(werr)?;
    Ok(())
}

// ---------------------------------------------------------------------------
// mmdebstrap

/// The mmdebstrap command line for `spec` (the tarball goes to stdout).
pub fn mmdebstrap_args(spec: &MmdebstrapSpec, opts: &BootstrapOptions) -> Vec<String> {
    let mut args = vec![
        format!("--variant={}", spec.variant),
        format!("--mode={}", opts.mode.as_str()),
        "--format=tar".to_owned(),
        format!("--components={}", spec.components.join(",")),
    ];
    if opts.quiet {
        args.push("--quiet".to_owned());
    }
    if let Some(arch) = &spec.debian_architecture {
        args.push(format!("--architectures={arch}"));
    }
    if !spec.packages.is_empty() {
        args.push(format!("--include={}", spec.packages.join(",")));
    }
    for c in &spec.customize {
        args.push(format!(
            "--customize-hook=chroot \"$1\" /bin/sh -c {}",
            sh_quote(c)
        ));
    }
    args.push(spec.suite.clone());
    args.push("-".to_owned());
    args.push(opts.mirror.clone().unwrap_or_else(|| spec.mirror.clone()));
    args
}

/// Single-quotes `s` for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn run_mmdebstrap(
    spec: &MmdebstrapSpec,
    epoch: Option<u64>,
    opts: &BootstrapOptions,
    out: &mut impl Write,
) -> Result<(), BootstrapError> {
    let program = opts.mmdebstrap.to_string_lossy().into_owned();
    let mut cmd = Command::new(&opts.mmdebstrap);
    cmd.args(mmdebstrap_args(spec, opts))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    match epoch {
        Some(e) => cmd.env("SOURCE_DATE_EPOCH", e.to_string()),
        None => cmd.env_remove("SOURCE_DATE_EPOCH"),
    };
    if let Some(t) = &opts.tmpdir {
        cmd.env("TMPDIR", t);
    }
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            BootstrapError::MmdebstrapMissing {
                program: program.clone(),
            }
        } else {
            BootstrapError::Mmdebstrap(format!("cannot start {program}: {e}"))
        }
    })?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let copied = copy_stream(&mut stdout, out);
    drop(stdout);
    let status = child
        .wait()
        .map_err(|e| BootstrapError::Mmdebstrap(format!("waiting for {program}: {e}")))?;
    if !status.success() {
        return Err(BootstrapError::Mmdebstrap(format!(
            "{program} exited with {status} (mode {}; its messages are above)",
            opts.mode.as_str()
        )));
    }
    let n = copied.map_err(|e| BootstrapError::Mmdebstrap(format!("reading its tarball: {e}")))?;
    if n == 0 {
        return Err(BootstrapError::Mmdebstrap("it wrote no tarball".to_owned()));
    }
    Ok(())
}

fn copy_stream(r: &mut impl Read, w: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = match r.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..k])?;
        n += k as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;

    fn parse(text: &str) -> Result<Recipe, String> {
        parse_recipe(text, Path::new("rootfs/x/recipe.toml")).map_err(|e| e.to_string())
    }

    fn repo_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("cbrun-bootstrap-test-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn have_busybox() -> bool {
        if Path::new(DEFAULT_BUSYBOX).exists() {
            true
        } else {
            eprintln!(
                "note: {DEFAULT_BUSYBOX} is missing (apt-get install busybox-static): skipped"
            );
            false
        }
    }

    #[test]
    fn parses_a_busybox_recipe_with_defaults() {
        let r = parse("name = \"busybox\"\ntag = \"latest\"\nkind = \"busybox\"\n").unwrap();
        assert_eq!(r.name, "busybox");
        assert_eq!(r.tag, "latest");
        assert_eq!(
            r.kind,
            RecipeKind::Busybox(BusyboxSpec {
                binary: PathBuf::from("/bin/busybox")
            })
        );
        assert_eq!(r.config.env, vec![DEFAULT_PATH_ENV.to_owned()]);
        assert_eq!(r.config.cmd, Vec::<String>::new());
        assert_eq!(r.source_date_epoch, None);
        assert_eq!(r.architecture, host_oci_arch());
    }

    #[test]
    fn parses_an_mmdebstrap_recipe() {
        let r = parse(
            r#"
name = "debian-dev"
tag = "bookworm"
kind = "mmdebstrap"
suite = "bookworm"
variant = "minbase"
packages = ["python3", "libc6-dev=2.36-9", "git"]
components = ["main", "contrib"]
customize = ["useradd -m -u 1000 user", "echo 'a b' > /x"]
env = ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
workdir = "/app"
user = "1000:1000"
cmd = ["/bin/bash"]
source_date_epoch = 1700000000
"#,
        )
        .unwrap();
        let RecipeKind::Mmdebstrap(spec) = &r.kind else {
            panic!("kind {:?}", r.kind)
        };
        assert_eq!(spec.mirror, DEFAULT_MIRROR);
        assert_eq!(spec.variant, "minbase");
        assert_eq!(spec.components, ["main", "contrib"]);
        assert_eq!(r.config.workdir.as_deref(), Some("/app"));
        assert_eq!(r.config.user.as_deref(), Some("1000:1000"));
        assert_eq!(r.source_date_epoch, Some(1_700_000_000));

        let args = mmdebstrap_args(spec, &BootstrapOptions::default());
        assert_eq!(
            &args[..4],
            [
                "--variant=minbase",
                "--mode=auto",
                "--format=tar",
                "--components=main,contrib"
            ]
        );
        assert!(args.contains(&"--include=python3,libc6-dev=2.36-9,git".to_owned()));
        assert!(args.contains(
            &"--customize-hook=chroot \"$1\" /bin/sh -c 'useradd -m -u 1000 user'".to_owned()
        ));
        assert!(args.contains(
            &"--customize-hook=chroot \"$1\" /bin/sh -c 'echo '\\''a b'\\'' > /x'".to_owned()
        ));
        assert_eq!(&args[args.len() - 3..], ["bookworm", "-", DEFAULT_MIRROR]);
    }

    #[test]
    fn recipe_errors_name_the_file_and_field_on_one_line() {
        let base = "name = \"x\"\ntag = \"t\"\nkind = \"mmdebstrap\"\nsuite = \"bookworm\"\n";
        let cases = [
            (
                format!("{base}packages = \"python3\"\n"),
                "field packages: expected an array of strings, got string",
            ),
            (
                format!("{base}packages = [\"ok\", 3]\n"),
                "field packages: item 1: expected a string, got integer",
            ),
            (
                format!("{base}packages = [\"a,b\"]\n"),
                "field packages: item 0: \"a,b\": expected a Debian package name",
            ),
            (
                format!("{base}variant = \"huge\"\n"),
                "field variant: \"huge\": expected one of",
            ),
            (format!("{base}mirror = \"ftp://x\"\n"), "field mirror:"),
            (
                format!("{base}components = []\n"),
                "field components: empty",
            ),
            (
                format!("{base}busybox = \"/bin/busybox\"\n"),
                "field busybox: not used by kind \"mmdebstrap\"",
            ),
            (
                format!("{base}env = [\"NOEQUALS\"]\n"),
                "field env: item 0: \"NOEQUALS\": expected KEY=VALUE",
            ),
            (
                format!("{base}workdir = \"app\"\n"),
                "field workdir: expected an absolute path",
            ),
            (
                format!("{base}source_date_epoch = -1\n"),
                "field source_date_epoch: expected seconds >= 0",
            ),
            (
                format!("{base}packagse = []\n"),
                "field packagse: unknown field",
            ),
            (
                format!("{base}architecture = \"vax\"\n"),
                "field architecture: \"vax\"",
            ),
            (
                "name = \"x\"\ntag = \"t\"\nkind = \"mmdebstrap\"\n".to_owned(),
                "field suite: missing",
            ),
            (
                "name = \"x\"\ntag = \"t\"\nkind = \"docker\"\n".to_owned(),
                "field kind: \"docker\": expected",
            ),
            (
                "tag = \"t\"\nkind = \"busybox\"\n".to_owned(),
                "field name: missing",
            ),
            (
                "name = \"X Y\"\ntag = \"t\"\nkind = \"busybox\"\n".to_owned(),
                "field name: path component \"X Y\"",
            ),
            (
                "name = \"x\"\ntag = \"-t\"\nkind = \"busybox\"\n".to_owned(),
                "field tag: tag \"-t\": must be",
            ),
            (
                "name = \"x\"\ntag = \"t\"\nkind = \"busybox\"\npackages = []\n".to_owned(),
                "field packages: not used by kind \"busybox\"",
            ),
            (
                "name = \"x\"\ntag = \"t\"\nkind = \"busybox\"\nbusybox = \"busybox\"\n".to_owned(),
                "field busybox: expected an absolute path",
            ),
            ("name = \"x\"\ntag = \n".to_owned(), "line 2:"),
        ];
        for (text, want) in cases {
            let err = parse(&text).expect_err(&text);
            assert!(
                err.starts_with("rootfs/x/recipe.toml: "),
                "{err:?} for {text:?}"
            );
            assert!(err.contains(want), "{err:?} does not contain {want:?}");
            assert!(!err.contains('\n'), "{err:?} is not one line");
        }
        let err = load_recipe(Path::new("/nonexistent/recipe.toml")).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("/nonexistent/recipe.toml: cannot read"));
    }

    #[test]
    fn shipped_recipes_parse() {
        let root = repo_root().join("rootfs");
        let bb = load_recipe(&root.join("busybox")).unwrap();
        assert!(matches!(bb.kind, RecipeKind::Busybox(_)));
        let dev = load_recipe(&root.join("debian-bookworm-dev/recipe.toml")).unwrap();
        let RecipeKind::Mmdebstrap(spec) = &dev.kind else {
            panic!("{:?}", dev.kind)
        };
        assert_eq!(spec.suite, "bookworm");
        // rootfs/base-images.toml maps the published cases' base image to it.
        assert_eq!(
            format!("{}:{}", dev.name, dev.tag),
            "debian-bookworm-dev:latest"
        );
        for p in [
            "python3",
            "python3-pytest",
            "build-essential",
            "git",
            "nodejs",
            "npm",
        ] {
            assert!(spec.packages.iter().any(|q| q == p), "{p}");
        }
    }

    #[test]
    fn missing_mmdebstrap_says_how_to_install_it() {
        let r = parse("name = \"x\"\ntag = \"t\"\nkind = \"mmdebstrap\"\nsuite = \"bookworm\"\n")
            .unwrap();
        let dir = tmpdir("nommdebstrap");
        let opts = BootstrapOptions {
            mmdebstrap: PathBuf::from("/nonexistent/mmdebstrap"),
            ..BootstrapOptions::default()
        };
        let err = bootstrap(&r, &dir.join("out"), &opts).unwrap_err();
        assert!(
            err.to_string().contains("apt-get install mmdebstrap"),
            "{err}"
        );
        assert!(!dir.join("out").exists());
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "staging left behind"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn output_must_be_new_or_empty() {
        let r = parse("name = \"x\"\ntag = \"t\"\nkind = \"busybox\"\n").unwrap();
        let dir = tmpdir("nonempty");
        fs::write(dir.join("file"), b"x").unwrap();
        let err = bootstrap(&r, &dir, &BootstrapOptions::default()).unwrap_err();
        assert!(err.to_string().contains("exists and is not empty"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn elf_interp_detection() {
        if Path::new("/bin/sh").exists() {
            let sh = fs::read(fs::canonicalize("/bin/sh").unwrap()).unwrap();
            if sh.starts_with(b"\x7fELF") {
                assert!(
                    elf_has_interp(&sh),
                    "/bin/sh is dynamically linked on Debian"
                );
            }
        }
        if have_busybox() {
            assert!(!elf_has_interp(&fs::read(DEFAULT_BUSYBOX).unwrap()));
        }
    }

    /// What a verified layout holds.
    struct Layout {
        manifest_digest: Digest,
        layer_digest: Digest,
        config: serde_json::Value,
        tar: Vec<u8>,
    }

    fn read_blob(dir: &Path, d: &serde_json::Value) -> (Digest, Vec<u8>) {
        let digest = Digest::parse(d["digest"].as_str().unwrap()).unwrap();
        let data = fs::read(dir.join("blobs/sha256").join(digest.hex())).unwrap();
        digest.verify(&Digest::of_bytes(&data)).unwrap();
        assert_eq!(d["size"].as_u64().unwrap(), data.len() as u64);
        (digest, data)
    }

    /// Checks every digest and size from `index.json` down to the
    /// uncompressed layer.
    fn verify_layout(dir: &Path, tag: &str) -> Layout {
        let layout: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("oci-layout")).unwrap()).unwrap();
        assert_eq!(layout["imageLayoutVersion"], "1.0.0");
        let index: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("index.json")).unwrap()).unwrap();
        assert_eq!(index["schemaVersion"], 2);
        let descs = index["manifests"].as_array().unwrap();
        assert_eq!(descs.len(), 1);
        assert_eq!(descs[0]["mediaType"], MEDIA_TYPE_MANIFEST);
        assert_eq!(descs[0]["annotations"][REF_NAME_ANNOTATION], tag);
        let (manifest_digest, m) = read_blob(dir, &descs[0]);
        let manifest: serde_json::Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(manifest["schemaVersion"], 2);
        assert_eq!(manifest["config"]["mediaType"], MEDIA_TYPE_CONFIG);
        let (_, c) = read_blob(dir, &manifest["config"]);
        let config: serde_json::Value = serde_json::from_slice(&c).unwrap();
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0]["mediaType"], MEDIA_TYPE_LAYER_GZIP);
        let (layer_digest, gz) = read_blob(dir, &layers[0]);
        let mut tar = Vec::new();
        GzDecoder::new(gz.as_slice()).read_to_end(&mut tar).unwrap();
        let diff_ids = config["rootfs"]["diff_ids"].as_array().unwrap();
        assert_eq!(config["rootfs"]["type"], "layers");
        assert_eq!(diff_ids.len(), 1);
        assert_eq!(
            diff_ids[0].as_str().unwrap(),
            Digest::of_bytes(&tar).to_string()
        );
        // Nothing but what the descriptors name.
        let mut blobs: Vec<String> = fs::read_dir(dir.join("blobs/sha256"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        blobs.sort();
        let mut want = vec![
            manifest_digest.hex().to_owned(),
            layer_digest.hex().to_owned(),
            Digest::of_bytes(&c).hex().to_owned(),
        ];
        want.sort();
        assert_eq!(blobs, want);
        Layout {
            manifest_digest,
            layer_digest,
            config,
            tar,
        }
    }

    #[test]
    fn busybox_layout_verifies_and_is_deterministic() {
        if !have_busybox() {
            return;
        }
        let recipe = load_recipe(&repo_root().join("rootfs/busybox")).unwrap();
        let dir = tmpdir("busybox");
        let opts = BootstrapOptions {
            source_date_epoch: Some(1_700_000_000),
            ..BootstrapOptions::default()
        };
        let a = bootstrap(&recipe, &dir.join("a"), &opts).unwrap();
        let b = bootstrap(&recipe, &dir.join("b"), &opts).unwrap();
        eprintln!("busybox image built in {:.3} s", a.seconds);
        assert!(a.seconds < 30.0, "took {} s", a.seconds);
        assert_eq!(a.manifest_digest, b.manifest_digest);
        assert_eq!(a.layer_digest, b.layer_digest);
        assert_eq!(a.diff_id, b.diff_id);

        let la = verify_layout(&dir.join("a"), &recipe.tag);
        assert_eq!(la.manifest_digest, a.manifest_digest);
        assert_eq!(la.layer_digest, a.layer_digest);
        assert_eq!(la.tar.len() as u64, a.uncompressed_bytes);
        assert_eq!(la.config["architecture"], host_oci_arch());
        assert_eq!(la.config["os"], "linux");
        assert_eq!(la.config["created"], "2023-11-14T22:13:20Z");
        assert!(la.config["config"]["Env"][0]
            .as_str()
            .unwrap()
            .starts_with("PATH="));
        assert_eq!(la.config["config"]["Cmd"][0], "/bin/sh");

        // Another epoch gives another layer, same tree.
        let c = bootstrap(
            &recipe,
            &dir.join("c"),
            &BootstrapOptions {
                source_date_epoch: Some(1),
                ..BootstrapOptions::default()
            },
        )
        .unwrap();
        assert_ne!(c.diff_id, a.diff_id);

        // The tar: sorted, owned by root (but /home/user), fixed mtime.
        let mut ar = tar::Archive::new(la.tar.as_slice());
        let mut paths = Vec::new();
        let mut kinds = BTreeMap::new();
        for e in ar.entries().unwrap() {
            let e = e.unwrap();
            let p = e.path().unwrap().to_string_lossy().into_owned();
            let h = e.header();
            assert_eq!(h.mtime().unwrap(), 1_700_000_000, "{p}");
            let owner = if p == "home/user/" { 1000 } else { 0 };
            assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (owner, owner), "{p}");
            if h.entry_type() == tar::EntryType::Symlink {
                kinds.insert(
                    p.clone(),
                    e.link_name()
                        .unwrap()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            } else {
                kinds.insert(
                    p.clone(),
                    format!("{:?} {:o}", h.entry_type(), h.mode().unwrap()),
                );
            }
            paths.push(p);
        }
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);
        assert_eq!(kinds["bin/busybox"], "Regular 755");
        assert_eq!(kinds["bin/sh"], "busybox");
        assert_eq!(kinds["tmp/"], "Directory 1777");
        for d in ["dev/", "proc/", "sys/", "etc/"] {
            assert_eq!(kinds[d], "Directory 755", "{d}");
        }
        if let Some(t) = kinds.get("usr/bin/env") {
            assert_eq!(t, "../../bin/busybox");
        }
        let mut ar = tar::Archive::new(la.tar.as_slice());
        let passwd = ar
            .entries()
            .unwrap()
            .map(|e| e.unwrap())
            .find(|e| e.path().unwrap().to_str() == Some("etc/passwd"))
            .map(|mut e| {
                let mut s = String::new();
                e.read_to_string(&mut s).unwrap();
                s
            })
            .unwrap();
        assert!(passwd.contains("user:x:1000:1000:"), "{passwd}");

        // Unpacked, the shell runs from the image.
        let root = dir.join("rootfs");
        tar::Archive::new(la.tar.as_slice()).unpack(&root).unwrap();
        let out = Command::new(root.join("bin/sh"))
            .args(["-c", "echo ok"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");

        fs::remove_dir_all(&dir).unwrap();
    }
}
