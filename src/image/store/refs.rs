//! References: committing an image (its reference written last, under the
//! lock, once every blob is present), resolving, inspecting, listing,
//! tagging and removing them.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use oci_spec::image::{Descriptor, ImageConfiguration, ImageManifest};
use serde::Serialize;

use super::reference::escape_name;
use super::{
    io_err, now_rfc3339, remove_tree, sync_dir, take_lock, ImageRef, RefRecord, Store, StoreError,
};
use crate::image::digest::Digest;
use crate::image::layout;

/// One line of `cbrun image ls`.
#[derive(Debug, Clone, Serialize)]
pub struct ImageInfo {
    /// `name:tag` or `name@sha256:...`.
    pub reference: String,
    pub name: String,
    pub tag: Option<String>,
    pub manifest: Digest,
    pub config: Option<Digest>,
    pub layers: usize,
    /// Config plus layer blobs, as stored (compressed layers count compressed).
    pub size: u64,
    /// The image's own creation time (from its config), if recorded.
    pub created: Option<String>,
    /// When this reference was written.
    pub added: String,
    pub source: String,
    /// Why the manifest or config could not be read (a damaged store entry).
    pub error: Option<String>,
}

/// `cbrun image inspect`.
#[derive(Debug, Clone, Serialize)]
pub struct ImageDetails {
    pub reference: String,
    pub manifest_digest: Digest,
    pub manifest: ImageManifest,
    pub config_digest: Digest,
    pub config: ImageConfiguration,
    pub size: u64,
    pub added: String,
    pub source: String,
}

/// What a sandbox or the unpacker needs to know about an image.
#[derive(Debug, Clone)]
pub struct ResolvedImage {
    pub reference: ImageRef,
    pub manifest_digest: Digest,
    pub manifest: ImageManifest,
    pub config_digest: Digest,
    pub config: ImageConfiguration,
    /// The manifest's layers, base first.
    pub layers: Vec<Descriptor>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RemoveReport {
    /// References removed.
    pub removed: Vec<String>,
    /// Unpacked root filesystems deleted because no reference uses them any more.
    pub rootfs_removed: Vec<Digest>,
}

impl Store {
    fn ref_dir(&self, name: &str) -> PathBuf {
        self.root.join("images").join(escape_name(name))
    }

    fn read_ref_file(path: &Path) -> Result<RefRecord, StoreError> {
        let bytes = fs::read(path).map_err(io_err(path, "read reference"))?;
        let rec: RefRecord = serde_json::from_slice(&bytes).map_err(|e| StoreError::Invalid {
            what: path.display().to_string(),
            why: format!("not a reference record: {e}"),
        })?;
        Ok(rec)
    }

    /// All reference records, sorted by name and tag; `name` limits to one
    /// repository.
    pub(super) fn read_refs(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<(PathBuf, RefRecord)>, StoreError> {
        let images = self.root.join("images");
        let dirs: Vec<PathBuf> = match name {
            Some(n) => vec![self.ref_dir(n)],
            None => {
                let mut v = Vec::new();
                for e in fs::read_dir(&images).map_err(io_err(&images, "read directory"))? {
                    let e = e.map_err(io_err(&images, "read directory"))?;
                    v.push(e.path());
                }
                v
            }
        };
        let mut out = Vec::new();
        for dir in dirs {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => continue,
                Err(e) => return Err(io_err(&dir, "read directory")(e)),
            };
            for e in entries {
                let e = e.map_err(io_err(&dir, "read directory"))?;
                let file = e.file_name();
                let file = file.to_string_lossy();
                if file.starts_with('.') || !file.ends_with(".json") {
                    continue;
                }
                let path = e.path();
                let rec = Self::read_ref_file(&path)?;
                let expect_dir = escape_name(&rec.name);
                let expect_file = rec.reference().file_name();
                if dir.file_name() != Some(OsStr::new(&expect_dir)) || *file != expect_file {
                    return Err(StoreError::Invalid {
                        what: path.display().to_string(),
                        why: format!(
                            "records {} but is not where that reference belongs",
                            rec.reference()
                        ),
                    });
                }
                out.push((path, rec));
            }
        }
        out.sort_by(|a, b| (&a.1.name, &a.1.tag).cmp(&(&b.1.name, &b.1.tag)));
        Ok(out)
    }

    /// The reference record that `r` denotes.
    fn find_ref(&self, r: &ImageRef) -> Result<RefRecord, StoreError> {
        let not_found = || StoreError::NotFound(r.to_string());
        match &r.digest {
            None => {
                let path = self.ref_dir(&r.name).join(r.file_name());
                match Self::read_ref_file(&path) {
                    Ok(rec) => Ok(rec),
                    Err(StoreError::Io { source, .. })
                        if source.kind() == io::ErrorKind::NotFound =>
                    {
                        Err(not_found())
                    }
                    Err(e) => Err(e),
                }
            }
            Some(d) => {
                let refs = self.read_refs(Some(&r.name))?;
                let mut matching = refs
                    .into_iter()
                    .map(|(_, rec)| rec)
                    .filter(|rec| &rec.manifest == d);
                match &r.tag {
                    Some(t) => matching
                        .find(|rec| rec.tag.as_deref() == Some(t))
                        .ok_or_else(not_found),
                    None => matching.next().ok_or_else(not_found),
                }
            }
        }
    }

    fn write_ref(&self, rec: &RefRecord) -> Result<(), StoreError> {
        let dir = self.ref_dir(&rec.name);
        // A shared store's names are readable by the users it serves.
        let (dmode, fmode) = if self.is_shared() {
            (0o755, 0o644)
        } else {
            (0o700, 0o600)
        };
        match fs::DirBuilder::new().mode(dmode).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(&dir, "create directory")(e)),
        }
        let mut bytes = serde_json::to_vec_pretty(rec).expect("serializable");
        bytes.push(b'\n');
        let tmp = self.temp_path("ref");
        let target = dir.join(rec.reference().file_name());
        let result = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(fmode)
                .open(&tmp)
                .map_err(io_err(&tmp, "create temp file"))?;
            f.write_all(&bytes).map_err(io_err(&tmp, "write"))?;
            f.sync_all().map_err(io_err(&tmp, "fsync"))?;
            fs::rename(&tmp, &target).map_err(io_err(&target, "rename into place"))?;
            sync_dir(&dir);
            Ok(())
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Check that a manifest's config and layers are present with the sizes
    /// it states and that the config parses; returns the parsed manifest.
    fn check_complete(&self, manifest_digest: &Digest) -> Result<ImageManifest, StoreError> {
        let ctx = format!("manifest {manifest_digest}");
        let what = |w: String| format!("{ctx}: {w}");
        let bytes = self.read_blob_verified(manifest_digest)?;
        let manifest = layout::parse_manifest(&bytes).map_err(|why| StoreError::Invalid {
            what: ctx.clone(),
            why,
        })?;
        let check = |field: String, d: &Descriptor| -> Result<Digest, StoreError> {
            let digest = layout::descriptor_digest(d).map_err(|why| StoreError::Invalid {
                what: what(field.clone()),
                why,
            })?;
            match self.blob_size(&digest) {
                None => Err(StoreError::MissingBlob {
                    what: what(field),
                    digest,
                }),
                Some(n) if n != d.size() => Err(StoreError::Invalid {
                    what: what(field),
                    why: format!(
                        "blob {digest} has {n} bytes, the descriptor says {}",
                        d.size()
                    ),
                }),
                Some(_) => Ok(digest),
            }
        };
        let config_digest = check("config".to_owned(), manifest.config())?;
        for (i, l) in manifest.layers().iter().enumerate() {
            check(format!("layers[{i}]"), l)?;
        }
        let config = self.read_blob_verified(&config_digest)?;
        layout::parse_config(&config).map_err(|why| StoreError::Invalid {
            what: what("config".to_owned()),
            why,
        })?;
        Ok(manifest)
    }

    /// Record `manifest_bytes` as the image `reference`: checks that the
    /// config and every layer it names are in the store (with the sizes the
    /// manifest states), stores the manifest blob, then writes the reference
    /// atomically. A reference with a digest must match the manifest's.
    pub fn commit_image(
        &self,
        reference: &ImageRef,
        manifest_bytes: &[u8],
        source: &str,
    ) -> Result<Digest, StoreError> {
        let digest = Digest::of_bytes(manifest_bytes);
        if let Some(want) = &reference.digest {
            if want != &digest {
                return Err(StoreError::DigestMismatch {
                    what: format!("manifest of {reference}"),
                    expected: want.clone(),
                    actual: digest,
                });
            }
        }
        layout::parse_manifest(manifest_bytes).map_err(|why| StoreError::Invalid {
            what: format!("manifest of {reference}"),
            why,
        })?;
        self.put_blob(manifest_bytes, Some(&digest))?;
        let _lock = self.lock_refs()?;
        // gc may have run since the blobs were written: check under the lock.
        self.check_complete(&digest)?;
        self.write_ref(&RefRecord {
            name: reference.name.clone(),
            tag: reference.tag.clone(),
            manifest: digest.clone(),
            created: now_rfc3339(),
            source: source.to_owned(),
        })?;
        Ok(digest)
    }

    /// Resolve `name[:tag]` or `name@sha256:...` to its manifest, config and layers.
    pub fn resolve(&self, reference: &str) -> Result<ResolvedImage, StoreError> {
        let r = ImageRef::parse(reference)?;
        let rec = self.find_ref(&r)?;
        let mut img = self.load(&rec)?;
        if r.digest.is_some() {
            img.reference = ImageRef { tag: None, ..r };
        }
        Ok(img)
    }

    fn load(&self, rec: &RefRecord) -> Result<ResolvedImage, StoreError> {
        let manifest = self.check_complete(&rec.manifest)?;
        let config_digest = layout::descriptor_digest(manifest.config()).expect("checked");
        let config_bytes = self.read_blob_verified(&config_digest)?;
        let config = layout::parse_config(&config_bytes).expect("checked");
        Ok(ResolvedImage {
            reference: rec.reference(),
            manifest_digest: rec.manifest.clone(),
            layers: manifest.layers().clone(),
            manifest,
            config_digest,
            config,
        })
    }

    pub fn inspect(&self, reference: &str) -> Result<ImageDetails, StoreError> {
        let r = ImageRef::parse(reference)?;
        let rec = self.find_ref(&r)?;
        let img = self.load(&rec)?;
        let size = img.manifest.config().size() + img.layers.iter().map(|l| l.size()).sum::<u64>();
        Ok(ImageDetails {
            reference: rec.reference().to_string(),
            manifest_digest: img.manifest_digest,
            manifest: img.manifest,
            config_digest: img.config_digest,
            config: img.config,
            size,
            added: rec.created,
            source: rec.source,
        })
    }

    /// Every reference, sorted by name and tag.
    pub fn list(&self) -> Result<Vec<ImageInfo>, StoreError> {
        let mut out = Vec::new();
        for (_, rec) in self.read_refs(None)? {
            let mut info = ImageInfo {
                reference: rec.reference().to_string(),
                name: rec.name.clone(),
                tag: rec.tag.clone(),
                manifest: rec.manifest.clone(),
                config: None,
                layers: 0,
                size: 0,
                created: None,
                added: rec.created.clone(),
                source: rec.source.clone(),
                error: None,
            };
            match self.load(&rec) {
                Ok(img) => {
                    info.config = Some(img.config_digest);
                    info.layers = img.layers.len();
                    info.size = img.manifest.config().size()
                        + img.layers.iter().map(|l| l.size()).sum::<u64>();
                    info.created = img.config.created().clone();
                }
                Err(e) => info.error = Some(crate::error::chain(&e)),
            }
            out.push(info);
        }
        Ok(out)
    }

    /// Point `dst` (`name[:tag]`) at the image `src` denotes.
    pub fn tag(&self, src: &str, dst: &str) -> Result<ImageRef, StoreError> {
        let src_ref = ImageRef::parse(src)?;
        let dst_ref = ImageRef::parse(dst)?;
        if dst_ref.digest.is_some() {
            return Err(StoreError::BadReference {
                input: dst.to_owned(),
                why: "a new tag cannot carry a digest".to_owned(),
            });
        }
        let _lock = self.lock_refs()?;
        let rec = self.find_ref(&src_ref)?;
        self.check_complete(&rec.manifest)?;
        self.write_ref(&RefRecord {
            name: dst_ref.name.clone(),
            tag: dst_ref.tag.clone(),
            manifest: rec.manifest,
            created: now_rfc3339(),
            source: rec.source,
        })?;
        Ok(dst_ref)
    }

    /// Remove a reference (`name:tag`), or with `name@digest` every reference
    /// of that name to that manifest. Blobs stay until [`Store::gc`]; the
    /// unpacked root filesystem goes now if no reference uses it any more and
    /// nobody holds the store (else gc removes it later).
    pub fn remove(&self, reference: &str) -> Result<RemoveReport, StoreError> {
        let r = ImageRef::parse(reference)?;
        let _lock = self.lock_refs()?;
        let victims: Vec<(PathBuf, RefRecord)> = match &r.digest {
            None => {
                let rec = self.find_ref(&r)?;
                vec![(self.ref_dir(&r.name).join(r.file_name()), rec)]
            }
            Some(d) => self
                .read_refs(Some(&r.name))?
                .into_iter()
                .filter(|(_, rec)| &rec.manifest == d && (r.tag.is_none() || rec.tag == r.tag))
                .collect(),
        };
        if victims.is_empty() {
            return Err(StoreError::NotFound(r.to_string()));
        }
        let mut report = RemoveReport::default();
        for (path, rec) in &victims {
            fs::remove_file(path).map_err(io_err(path, "remove reference"))?;
            report.removed.push(rec.reference().to_string());
        }
        let dir = self.ref_dir(&r.name);
        let _ = fs::remove_dir(&dir); // only when empty
        sync_dir(&self.root.join("images"));
        let still_used: BTreeSet<Digest> = self
            .read_refs(None)?
            .into_iter()
            .map(|(_, rec)| rec.manifest)
            .collect();
        let gone: BTreeSet<Digest> = victims
            .into_iter()
            .map(|(_, rec)| rec.manifest)
            .filter(|m| !still_used.contains(m))
            .collect();
        if gone
            .iter()
            .any(|m| self.rootfs_dir(m).symlink_metadata().is_ok())
        {
            if let Some(_gc) = take_lock(&self.gc_lock_path(), true, false)? {
                for m in gone {
                    let dir = self.rootfs_dir(&m);
                    if dir.symlink_metadata().is_ok() {
                        remove_tree(&dir).map_err(io_err(&dir, "remove unpacked rootfs"))?;
                        report.rootfs_removed.push(m);
                    }
                }
            }
        }
        Ok(report)
    }
}
