//! Capturing a build: the overlay's upper directory becomes one gzip'd
//! layer (deletions as whiteouts, opaque directories as `.wh..wh..opq`) on
//! top of the base image's, with a config and manifest to match.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::super::digest::{Digest, DigestWriter};
use super::super::store::{ImageRef, ResolvedImage, Store};
use super::{BuildError, BuildPlan};
use crate::sandbox::idmap::MappingSource;
use crate::sandbox::run::HostView;

/// Turns the upper directory into a gzip'd layer, writes config and manifest
/// and names the image. Returns (manifest digest, layer bytes, entries, whiteouts).
pub(super) fn commit_layer(
    store: &Store,
    base: &ResolvedImage,
    upper: &Path,
    plan: &BuildPlan,
    labels: &[(String, String)],
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
    // What the build did (attempts, capabilities, a CA bundle), for
    // `image inspect`.
    if !labels.is_empty() {
        if !config["config"].is_object() {
            config["config"] = serde_json::json!({});
        }
        if !config["config"]["Labels"].is_object() {
            config["config"]["Labels"] = serde_json::json!({});
        }
        for (k, v) in labels {
            config["config"]["Labels"][k] = v.clone().into();
        }
    }
    let history = serde_json::json!({
        "created_by": format!("cbrun image build ({})", plan.origin),
        "comment": "install_command (build_command is the agent's, never run here)",
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
    let digest = store.commit_image(
        reference,
        &manifest_bytes,
        &format!("build {}", plan.origin),
    )?;
    Ok((digest, layer_size, entries, whiteouts))
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
    let mut buf = [0u8; 8];
    crate::sys::xattr::get(path, name, &mut buf, crate::sys::xattr::Follow::No).is_ok()
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
