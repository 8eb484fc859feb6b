//! `cbrun image build`: an agent image from a case (its recipe's base image
//! plus `install_command` and `build_command`, and its resources) or from a
//! standalone recipe file.
//!
//! The commands run in a build sandbox on the base image's overlay, with
//! host networking (stated in the output) and root inside the user
//! namespace. The overlay's upper directory is exactly what changed; it is
//! turned into one layer (whiteouts for deletions) on top of the base.
//! Results are cached by (base manifest, commands, environment, resources).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::digest::{Digest, DigestWriter};
use super::store::{remove_tree, ImageRef, Store, StoreError};
use super::unpack::{apply_layer, decompress, OwnerMode, UnpackOptions};
use super::unpacked::{use_image, UnpackedError};
use crate::case::Case;
use crate::sandbox::config::{EnvVar, NetworkPolicy, RootfsSource, SandboxConfig, Stdio};
use crate::sandbox::idmap::MappingSource;
use crate::sandbox::run::{self, HostView};

/// Shipped base-image mapping (`rootfs/base-images.toml`).
pub const DEFAULT_BASE_MAP: &str = include_str!("../../rootfs/base-images.toml");

/// apt drops to `_apt`, which a single-id user namespace cannot switch to.
const APT_SANDBOX_CONF: &str = "etc/apt/apt.conf.d/00cbrun-build-sandbox";

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{file}: {field}: {why}")]
    Input {
        file: String,
        field: String,
        why: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Unpacked(#[from] UnpackedError),
    #[error("resource {id}: {why}")]
    Resource { id: String, why: String },
    #[error("build sandbox: {0}")]
    Sandbox(String),
    #[error("the build commands failed ({status}); log: {log}")]
    Failed { status: String, log: PathBuf },
    #[error("capturing the layer: {path}: {source}")]
    Layer { path: PathBuf, source: io::Error },
}

/// A standalone recipe (TOML): an image not tied to a case.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeFile {
    /// An image in the store (after base-map lookup).
    pub base: String,
    #[serde(default)]
    pub install_command: String,
    #[serde(default)]
    pub build_command: String,
    /// `KEY=VALUE` set during the build and in the image.
    #[serde(default)]
    pub env: Vec<String>,
    /// Name for the result (default `cbrun-recipe/<file stem>`).
    #[serde(default)]
    pub name: Option<String>,
}

/// What to build, from a case or a recipe file.
#[derive(Debug, Clone)]
pub struct BuildPlan {
    pub base: String,
    pub install_command: String,
    pub build_command: String,
    pub env: Vec<(String, String)>,
    pub resources: Vec<ResourcePlan>,
    /// Repository name of the result; the tag is the cache key.
    pub name: String,
    pub origin: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResourcePlan {
    pub id: String,
    pub url: String,
    pub sha256: String,
    /// Absolute path inside the image.
    pub dest: PathBuf,
}

#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Replaces the base from the plan/map.
    pub base_override: Option<String>,
    pub base_map: BTreeMap<String, String>,
    pub resource_cache: Option<PathBuf>,
    pub timeout: Duration,
    /// Build even when a cached result exists.
    pub no_cache: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    pub image: String,
    pub manifest_digest: Digest,
    pub base: String,
    pub base_manifest: Digest,
    pub cache_hit: bool,
    pub seconds: f64,
    pub layer_bytes: u64,
    pub layer_entries: u64,
    pub whiteouts: u64,
    /// Always `host` for builds (installers need the network).
    pub network: &'static str,
    pub log: Option<PathBuf>,
}

pub fn parse_base_map(text: &str, file: &str) -> Result<BTreeMap<String, String>, BuildError> {
    toml::from_str(text).map_err(|e| BuildError::Input {
        file: file.to_owned(),
        field: "(toml)".into(),
        why: e.message().to_owned(),
    })
}

/// The plan for a case: recipe base and commands, its resources.
pub fn plan_for_case(case: &Case) -> BuildPlan {
    let mut resources = Vec::new();
    if let Some(r) = &case.resources {
        for res in &r.resources {
            let mut dest = PathBuf::from(
                res.destination
                    .as_ref()
                    .map(|d| d.as_str())
                    .unwrap_or(r.destination.as_str()),
            );
            if let Some(d) = &res.directory {
                dest = dest.join(d.as_str());
            }
            resources.push(ResourcePlan {
                id: res.id.clone(),
                url: res.url.clone(),
                sha256: res.sha256.as_str().to_owned(),
                dest,
            });
        }
    }
    BuildPlan {
        base: case.recipe.base_image.clone(),
        install_command: case.recipe.runner.install_command.clone(),
        build_command: case.recipe.runner.build_command.clone(),
        env: Vec::new(),
        resources,
        name: format!("cbrun-case/{}", case.id.as_str()),
        origin: format!("case {}", case.dir.display()),
    }
}

pub fn plan_for_recipe(path: &Path) -> Result<BuildPlan, BuildError> {
    let file = path.display().to_string();
    let text = fs::read_to_string(path).map_err(|e| BuildError::Input {
        file: file.clone(),
        field: "(file)".into(),
        why: e.to_string(),
    })?;
    let r: RecipeFile = toml::from_str(&text).map_err(|e| BuildError::Input {
        file: file.clone(),
        field: e
            .span()
            .map(|s| text[..s.start].lines().count().to_string())
            .map(|l| format!("line {l}"))
            .unwrap_or_else(|| "(toml)".into()),
        why: e.message().to_owned(),
    })?;
    let mut env = Vec::new();
    for (i, kv) in r.env.iter().enumerate() {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(BuildError::Input {
                file,
                field: format!("env[{i}]"),
                why: format!("{kv:?}: expected KEY=VALUE"),
            });
        };
        env.push((k.to_owned(), v.to_owned()));
    }
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("recipe")
        .to_ascii_lowercase()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    Ok(BuildPlan {
        base: r.base,
        install_command: r.install_command,
        build_command: r.build_command,
        env,
        resources: Vec::new(),
        name: r.name.unwrap_or(format!("cbrun-recipe/{stem}")),
        origin: format!("recipe {file}"),
    })
}

/// Builds (or finds in the cache) the image for `plan`.
pub fn build(
    store: &Store,
    plan: &BuildPlan,
    opts: &BuildOptions,
    host: &HostView,
) -> Result<BuildReport, BuildError> {
    let started = Instant::now();
    let base = opts
        .base_override
        .clone()
        .or_else(|| opts.base_map.get(&plan.base).cloned())
        .unwrap_or_else(|| plan.base.clone());
    let base_img = store.resolve(&base).map_err(|e| BuildError::Input {
        file: plan.origin.clone(),
        field: "base image".into(),
        why: format!("{base}: {e} (map it in rootfs/base-images.toml or pass --base)"),
    })?;
    let key = cache_key(&base_img.manifest_digest, plan);
    let reference = ImageRef::with_tag(&plan.name, &key[..16])?;
    if !opts.no_cache {
        if let Ok(hit) = store.resolve(&reference.to_string()) {
            return Ok(BuildReport {
                image: reference.to_string(),
                manifest_digest: hit.manifest_digest,
                base,
                base_manifest: base_img.manifest_digest,
                cache_hit: true,
                seconds: started.elapsed().as_secs_f64(),
                layer_bytes: 0,
                layer_entries: 0,
                whiteouts: 0,
                network: "host",
                log: None,
            });
        }
    }

    let work = store.temp_path("build");
    let upper = work.join("upper");
    fs::create_dir_all(&upper).map_err(|source| BuildError::Layer {
        path: upper.clone(),
        source,
    })?;
    let logs = store.root().join("logs");
    let _ = fs::create_dir_all(&logs);
    let log = logs.join(format!(
        "build-{}-{}.log",
        plan.name.replace('/', "_"),
        &key[..16]
    ));
    let result = build_in(store, plan, opts, host, &base, &upper, &log);
    let out = result.and_then(|()| commit_layer(store, &base_img, &upper, plan, &reference, host));
    let _ = remove_tree(&work);
    let (manifest_digest, layer_bytes, layer_entries, whiteouts) = out?;
    Ok(BuildReport {
        image: reference.to_string(),
        manifest_digest,
        base,
        base_manifest: base_img.manifest_digest,
        cache_hit: false,
        seconds: started.elapsed().as_secs_f64(),
        layer_bytes,
        layer_entries,
        whiteouts,
        network: "host",
        log: Some(log),
    })
}

fn cache_key(base: &Digest, plan: &BuildPlan) -> String {
    let v = serde_json::json!({
        "base": base.to_string(),
        "install": plan.install_command,
        "build": plan.build_command,
        "env": plan.env,
        "resources": plan.resources,
        "version": 1,
    });
    Digest::of_bytes(v.to_string().as_bytes()).hex().to_owned()
}

fn build_in(
    store: &Store,
    plan: &BuildPlan,
    opts: &BuildOptions,
    host: &HostView,
    base: &str,
    upper: &Path,
    log: &Path,
) -> Result<(), BuildError> {
    let u = use_image(store, base, &host.mapping, Some(upper.to_path_buf()))?;
    let lower = u.root.lower.clone();
    for r in &plan.resources {
        let rel = r.dest.strip_prefix("/").unwrap_or(&r.dest);
        mkdirs_as_lower(&lower, upper, rel)?;
        fetch_resource(r, opts.resource_cache.as_deref(), upper, &host.mapping)?;
    }
    let apt_conf = upper.join(APT_SANDBOX_CONF);
    let mut apt_dirs = Vec::new();
    if let Some(parent) = Path::new(APT_SANDBOX_CONF).parent() {
        apt_dirs = mkdirs_as_lower(&lower, upper, parent)?;
    }
    fs::write(&apt_conf, "APT::Sandbox::User \"root\";\n").map_err(|source| BuildError::Layer {
        path: apt_conf.clone(),
        source,
    })?;
    own_like(&apt_conf, &lower).map_err(|source| BuildError::Layer {
        path: apt_conf.clone(),
        source,
    })?;
    let script = [&plan.install_command, &plan.build_command]
        .iter()
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let script = if script.is_empty() {
        "true".to_owned()
    } else {
        format!("set -e\n{script}")
    };
    let mut cfg = SandboxConfig::new(vec!["/bin/sh".into(), "-c".into(), script]);
    cfg.rootfs = RootfsSource::Image(u.root.clone());
    cfg.network = NetworkPolicy::Host;
    cfg.timeout = Some(opts.timeout);
    cfg.init = true;
    cfg.hostname = "build".into();
    cfg.stdout = Stdio::File(log.to_path_buf());
    cfg.stderr = Stdio::Append(log.to_path_buf());
    let mut env: Vec<EnvVar> = u
        .env
        .iter()
        .chain(plan.env.iter())
        .map(|(k, v)| EnvVar {
            key: k.clone(),
            value: v.clone(),
        })
        .collect();
    for (k, v) in [("DEBIAN_FRONTEND", "noninteractive"), ("HOME", "/root")] {
        if !env.iter().any(|e| e.key == k) {
            env.push(EnvVar {
                key: k.into(),
                value: v.into(),
            });
        }
    }
    cfg.env = env;
    eprintln!("cbrun: build: network: host (the build sandbox shares the host's network)");
    let out = run::run(&cfg, host).map_err(|e| BuildError::Sandbox(e.to_string()))?;
    drop(u);
    // The apt setting is the build's, not the image's.
    let _ = fs::remove_file(&apt_conf);
    for d in apt_dirs.iter().rev() {
        let _ = fs::remove_dir(d);
    }
    if out.timed_out || out.exit_code != Some(0) {
        let status = if out.timed_out {
            "timed out".to_owned()
        } else if let Some(c) = out.exit_code {
            format!("exit {c}")
        } else {
            format!("signal {}", out.signal.unwrap_or(0))
        };
        return Err(BuildError::Failed {
            status,
            log: log.to_path_buf(),
        });
    }
    Ok(())
}

/// Creates `rel` under the upper layer, each directory owned and moded like
/// the image's own (the overlay shows the upper directory's attributes, so
/// a directory made by cbrun would otherwise hide the image's root owner).
fn mkdirs_as_lower(lower: &Path, upper: &Path, rel: &Path) -> Result<Vec<PathBuf>, BuildError> {
    let mut made = Vec::new();
    let mut cur = PathBuf::new();
    for c in rel.components() {
        cur.push(c);
        let dir = upper.join(&cur);
        if dir.is_dir() {
            continue;
        }
        let e = |source| BuildError::Layer {
            path: dir.clone(),
            source,
        };
        fs::create_dir(&dir).map_err(e)?;
        made.push(dir.clone());
        let like = lower.join(&cur);
        let like = if like.is_dir() {
            like
        } else {
            lower.to_path_buf()
        };
        let m = fs::metadata(&like).map_err(|source| BuildError::Layer {
            path: like.clone(),
            source,
        })?;
        std::os::unix::fs::chown(&dir, Some(m.uid()), Some(m.gid())).map_err(|source| {
            BuildError::Layer {
                path: dir.clone(),
                source,
            }
        })?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(m.mode() & 0o7777)).map_err(
            |source| BuildError::Layer {
                path: dir.clone(),
                source,
            },
        )?;
    }
    Ok(made)
}

/// Gives `path` the owner of the image's `/`.
fn own_like(path: &Path, lower: &Path) -> io::Result<()> {
    let m = fs::metadata(lower)?;
    std::os::unix::fs::chown(path, Some(m.uid()), Some(m.gid()))
}

/// Fetches (or takes from the cache) one resource, checks its sha256, and
/// unpacks it safely under its destination in the new layer.
fn fetch_resource(
    r: &ResourcePlan,
    cache: Option<&Path>,
    upper: &Path,
    mapping: &MappingSource,
) -> Result<(), BuildError> {
    let rerr = |why: String| BuildError::Resource {
        id: r.id.clone(),
        why,
    };
    let want = Digest::parse(&format!("sha256:{}", r.sha256.to_ascii_lowercase()))
        .map_err(|e| rerr(e.to_string()))?;
    let cached = cache.map(|c| c.join(want.hex()));
    let path = match &cached {
        Some(p) if p.is_file() => p.clone(),
        _ => {
            let dir = cache
                .map(Path::to_path_buf)
                .unwrap_or_else(std::env::temp_dir);
            fs::create_dir_all(&dir).map_err(|e| rerr(format!("{}: {e}", dir.display())))?;
            let tmp = dir.join(format!(".{}.part{}", want.hex(), std::process::id()));
            download(&r.url, &tmp).map_err(|e| rerr(format!("{}: {e}", r.url)))?;
            let dst = dir.join(want.hex());
            fs::rename(&tmp, &dst).map_err(|e| rerr(e.to_string()))?;
            dst
        }
    };
    let got = Digest::of_reader(fs::File::open(&path).map_err(|e| rerr(e.to_string()))?)
        .map_err(|e| rerr(e.to_string()))?;
    if got != want {
        let _ = fs::remove_file(&path);
        return Err(rerr(format!("sha256 mismatch: expected {want}, got {got}")));
    }
    let dest = upper.join(r.dest.strip_prefix("/").unwrap_or(&r.dest));
    fs::create_dir_all(&dest).map_err(|e| rerr(format!("{}: {e}", dest.display())))?;
    let f = fs::File::open(&path).map_err(|e| rerr(e.to_string()))?;
    let owner = match mapping {
        MappingSource::RootRange { start, .. } => OwnerMode::Preserve {
            uid_shift: *start,
            gid_shift: *start,
        },
        _ => OwnerMode::Caller,
    };
    // Tarballs (plain, gzip, zstd) unpack with the layer rules (no escapes);
    // anything else is placed as a file named after the URL.
    let mut r2 = BufReader::new(f);
    let looks_tar = {
        let mut probe = decompress(BufReader::new(
            fs::File::open(&path).map_err(|e| rerr(e.to_string()))?,
        ))
        .map_err(|e| rerr(e.to_string()))?;
        let mut head = [0u8; 512];
        let n = read_full(&mut probe, &mut head);
        n == 512 && &head[257..262] == b"ustar"
    };
    if looks_tar {
        let d = decompress(r2).map_err(|e| rerr(e.to_string()))?;
        apply_layer(
            &dest,
            d,
            &UnpackOptions {
                owner,
                ..UnpackOptions::default()
            },
        )
        .map_err(|e| rerr(format!("unpacking: {e}")))?;
    } else {
        let name = r
            .url
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty() && !n.contains(".."))
            .unwrap_or("resource");
        let mut out =
            fs::File::create(dest.join(name)).map_err(|e| rerr(format!("{name}: {e}")))?;
        io::copy(&mut r2, &mut out).map_err(|e| rerr(e.to_string()))?;
    }
    Ok(())
}

fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    n
}

fn download(url: &str, to: &Path) -> io::Result<()> {
    if let Some(p) = url.strip_prefix("file://") {
        fs::copy(p, to)?;
        return Ok(());
    }
    let resp = ureq::get(url)
        .timeout(Duration::from_secs(600))
        .call()
        .map_err(io::Error::other)?;
    let mut f = fs::File::create(to)?;
    io::copy(&mut resp.into_reader(), &mut f)?;
    f.sync_all()
}

/// Turns the upper directory into a gzip'd layer, writes config and manifest
/// and names the image. Returns (manifest digest, layer bytes, entries, whiteouts).
fn commit_layer(
    store: &Store,
    base: &super::store::ResolvedImage,
    upper: &Path,
    plan: &BuildPlan,
    reference: &ImageRef,
    host: &HostView,
) -> Result<(Digest, u64, u64, u64), BuildError> {
    let lerr = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BuildError::Layer { path, source }
    };
    let shift = match host.mapping {
        MappingSource::RootRange { start, .. } => start,
        _ => 0,
    };
    let mut blob = store.blob_writer()?;
    let (diff_id, entries, whiteouts) = {
        let gz = flate2::write::GzEncoder::new(&mut blob, flate2::Compression::default());
        let mut raw = DigestWriter::new(gz);
        let (entries, whiteouts) = {
            let mut tar = tar::Builder::new(&mut raw);
            tar.follow_symlinks(false);
            let mut counts = (0u64, 0u64);
            diff_dir(&mut tar, upper, Path::new(""), shift, &mut counts).map_err(lerr(upper))?;
            tar.finish().map_err(lerr(upper))?;
            counts
        };
        let (d, _, gz) = raw.finish();
        gz.finish().map_err(lerr(upper))?;
        (d, entries, whiteouts)
    };
    let (layer_digest, layer_size) = blob.finish(None)?;

    let base_manifest: serde_json::Value =
        serde_json::from_slice(&store.read_blob_verified(&base.manifest_digest)?).map_err(|e| {
            BuildError::Layer {
                path: PathBuf::from(base.manifest_digest.to_string()),
                source: io::Error::other(e),
            }
        })?;
    let mut config: serde_json::Value =
        serde_json::from_slice(&store.read_blob_verified(&base.config_digest)?).map_err(|e| {
            BuildError::Layer {
                path: PathBuf::from(base.config_digest.to_string()),
                source: io::Error::other(e),
            }
        })?;
    let docker = base_manifest["mediaType"]
        .as_str()
        .map(|m| m.contains("docker"))
        .unwrap_or(false);
    if let Some(ids) = config["rootfs"]["diff_ids"].as_array_mut() {
        ids.push(diff_id.to_string().into());
    } else {
        config["rootfs"] = serde_json::json!({"type": "layers", "diff_ids": [diff_id.to_string()]});
    }
    if !plan.env.is_empty() {
        let mut env: Vec<serde_json::Value> = config["config"]["Env"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (k, v) in &plan.env {
            env.retain(|e| !e.as_str().is_some_and(|s| s.starts_with(&format!("{k}="))));
            env.push(format!("{k}={v}").into());
        }
        config["config"]["Env"] = env.into();
    }
    let history = serde_json::json!({
        "created_by": format!("cbrun image build ({})", plan.origin),
        "comment": "install_command + build_command",
    });
    match config["history"].as_array_mut() {
        Some(h) => h.push(history),
        None => config["history"] = serde_json::json!([history]),
    }
    let config_bytes = serde_json::to_vec(&config).map_err(|e| BuildError::Layer {
        path: upper.to_path_buf(),
        source: io::Error::other(e),
    })?;
    let (config_digest, config_size) = store.put_blob(&config_bytes[..], None)?;
    let mut manifest = base_manifest.clone();
    manifest["config"]["digest"] = config_digest.to_string().into();
    manifest["config"]["size"] = config_size.into();
    let layer_type = if docker {
        "application/vnd.docker.image.rootfs.diff.tar.gzip"
    } else {
        "application/vnd.oci.image.layer.v1.tar+gzip"
    };
    let layer = serde_json::json!({
        "mediaType": layer_type,
        "digest": layer_digest.to_string(),
        "size": layer_size,
    });
    match manifest["layers"].as_array_mut() {
        Some(l) => l.push(layer),
        None => manifest["layers"] = serde_json::json!([layer]),
    }
    if let Some(obj) = manifest.as_object_mut() {
        obj.remove("annotations");
    }
    let manifest_bytes = serde_json::to_vec(&manifest).map_err(|e| BuildError::Layer {
        path: upper.to_path_buf(),
        source: io::Error::other(e),
    })?;
    let d = store.commit_image(
        reference,
        &manifest_bytes,
        &format!("build {}", plan.origin),
    )?;
    Ok((d, layer_size, entries, whiteouts))
}

/// overlayfs marks: a whiteout is a 0/0 character device (or, with
/// `userxattr`, a file carrying `user.overlay.whiteout`); an opaque
/// directory carries `trusted.overlay.opaque` / `user.overlay.opaque` = y.
fn is_whiteout(path: &Path, meta: &fs::Metadata) -> bool {
    (meta.file_type().is_char_device() && meta.rdev() == 0)
        || (meta.is_file() && meta.len() == 0 && has_xattr(path, "user.overlay.whiteout"))
}

fn is_opaque(path: &Path) -> bool {
    has_xattr(path, "trusted.overlay.opaque") || has_xattr(path, "user.overlay.opaque")
}

fn has_xattr(path: &Path, name: &str) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(p) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let Ok(n) = std::ffi::CString::new(name) else {
        return false;
    };
    let mut buf = [0u8; 8];
    // SAFETY: `p` and `n` are NUL-terminated and outlive the call; `buf` is
    // valid for writes of its length, which lgetxattr never exceeds.
    let r = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    r >= 0
}

fn diff_dir<W: Write>(
    tar: &mut tar::Builder<W>,
    dir: &Path,
    rel: &Path,
    shift: u32,
    counts: &mut (u64, u64),
) -> io::Result<()> {
    let mut names: Vec<_> = fs::read_dir(dir)?
        .flatten()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let r = rel.join(&name);
        let meta = fs::symlink_metadata(&path)?;
        if is_whiteout(&path, &meta) {
            let wh = rel.join(format!(".wh.{}", name.to_string_lossy()));
            append_empty(tar, &wh)?;
            counts.1 += 1;
            continue;
        }
        let mut h = tar::Header::new_gnu();
        h.set_mtime(meta.mtime().max(0) as u64);
        h.set_uid(u64::from(meta.uid().saturating_sub(shift)));
        h.set_gid(u64::from(meta.gid().saturating_sub(shift)));
        h.set_mode(meta.permissions().mode() & 0o7777);
        counts.0 += 1;
        let ft = meta.file_type();
        if ft.is_dir() {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            tar.append_data(&mut h, &r, io::empty())?;
            if is_opaque(&path) {
                append_empty(tar, &r.join(".wh..wh..opq"))?;
                counts.1 += 1;
            }
            diff_dir(tar, &path, &r, shift, counts)?;
        } else if ft.is_symlink() {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            let target = fs::read_link(&path)?;
            tar.append_link(&mut h, &r, &target)?;
        } else if ft.is_file() {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(meta.len());
            let f = fs::File::open(&path)?;
            tar.append_data(&mut h, &r, f)?;
        }
        // Sockets, fifos and devices other than whiteouts are not image content.
    }
    Ok(())
}

fn append_empty<W: Write>(tar: &mut tar::Builder<W>, path: &Path) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(0);
    h.set_mode(0o644);
    h.set_mtime(0);
    tar.append_data(&mut h, path, io::empty())
}
