//! Garbage collection: blobs no reference reaches, unpacked roots no
//! reference names, and `tmp/`, never while a [`super::Hold`] is held.

use std::collections::BTreeSet;
use std::fs;
use std::sync::atomic::Ordering;

use serde::Serialize;

use super::{io_err, remove_tree, take_lock, Store, StoreError};
use crate::image::layout;

#[derive(Debug, Clone, Default, Serialize)]
pub struct GcReport {
    pub removed_blobs: usize,
    pub removed_bytes: u64,
    pub removed_rootfs: usize,
    pub removed_tmp: usize,
    pub kept_blobs: usize,
    /// References whose manifest could not be read (their layers could not be
    /// marked and were collected unless another image uses them).
    pub warnings: Vec<String>,
}

impl Store {
    /// Delete every blob no reference reaches (manifest, config, layers),
    /// unpacked root filesystems of manifests no reference names, and all of
    /// `tmp/`. Waits for holders ([`Store::hold`]) of other processes; fails
    /// if this process holds the store.
    pub fn gc(&self) -> Result<GcReport, StoreError> {
        self.check_writable("gc")?;
        if self.holds.load(Ordering::SeqCst) > 0 {
            return Err(StoreError::Busy {
                path: self.root.clone(),
                why: "gc while this process holds the store".to_owned(),
            });
        }
        let _gc = take_lock(&self.gc_lock_path(), true, true)?.expect("blocking lock");
        let _lock = self.lock_refs()?;
        let mut report = GcReport::default();
        let mut live_blobs: BTreeSet<String> = BTreeSet::new();
        let mut live_manifests: BTreeSet<String> = BTreeSet::new();
        for (_, rec) in self.read_refs(None)? {
            live_blobs.insert(rec.manifest.hex().to_owned());
            live_manifests.insert(rec.manifest.hex().to_owned());
            let manifest = self.read_blob_verified(&rec.manifest).and_then(|b| {
                layout::parse_manifest(&b).map_err(|why| StoreError::Invalid {
                    what: format!("manifest {}", rec.manifest),
                    why,
                })
            });
            match manifest {
                Ok(m) => {
                    for d in std::iter::once(m.config()).chain(m.layers().iter()) {
                        if let Ok(digest) = layout::descriptor_digest(d) {
                            live_blobs.insert(digest.hex().to_owned());
                        }
                    }
                }
                Err(e) => report.warnings.push(format!(
                    "{}: {}",
                    rec.reference(),
                    crate::error::Chain(&e)
                )),
            }
        }
        let blobs = self.root.join("blobs/sha256");
        for e in fs::read_dir(&blobs).map_err(io_err(&blobs, "read directory"))? {
            let e = e.map_err(io_err(&blobs, "read directory"))?;
            let name = e.file_name();
            if live_blobs.contains(&*name.to_string_lossy()) {
                report.kept_blobs += 1;
                continue;
            }
            let p = e.path();
            let size = p.symlink_metadata().map(|m| m.len()).unwrap_or(0);
            remove_tree(&p).map_err(io_err(&p, "remove blob"))?;
            report.removed_blobs += 1;
            report.removed_bytes += size;
        }
        let rootfs = self.root.join("rootfs");
        for e in fs::read_dir(&rootfs).map_err(io_err(&rootfs, "read directory"))? {
            let e = e.map_err(io_err(&rootfs, "read directory"))?;
            // `<hex>` or `<hex>.u<UID>g<GID>` (unpacked for another user).
            let name = e.file_name().to_string_lossy().into_owned();
            if live_manifests.contains(name.split('.').next().unwrap_or("")) {
                continue;
            }
            let p = e.path();
            remove_tree(&p).map_err(io_err(&p, "remove unpacked rootfs"))?;
            report.removed_rootfs += 1;
        }
        let tmp = self.tmp_dir();
        for e in fs::read_dir(&tmp).map_err(io_err(&tmp, "read directory"))? {
            let p = e.map_err(io_err(&tmp, "read directory"))?.path();
            remove_tree(&p).map_err(io_err(&p, "remove temp entry"))?;
            report.removed_tmp += 1;
        }
        let images = self.root.join("images");
        for e in fs::read_dir(&images)
            .map_err(io_err(&images, "read directory"))?
            .flatten()
        {
            let _ = fs::remove_dir(e.path()); // empty name directories
        }
        Ok(report)
    }
}
