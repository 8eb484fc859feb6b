//! The local image store: content-addressed blobs, name:tag references,
//! reserved places for unpacked root filesystems, locking and garbage
//! collection. The on-disk layout is described in [`super`].
//!
//! [`Store`] is opened here; its methods live beside what they work on:
//! image names in `reference`, locks and holds in `lock`, blobs in
//! `blobs`, references (commit, resolve, list, tag, remove) in `refs`,
//! garbage collection in `gc`; `tree` removes directory trees.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::digest::Digest;

mod blobs;
mod gc;
mod lock;
mod reference;
mod refs;
mod tree;

#[cfg(test)]
pub(crate) mod tests;

pub use blobs::{BlobReader, BlobWriter};
pub use gc::GcReport;
pub use lock::Hold;
pub(crate) use reference::check_path_component;
pub use reference::{check_name, check_tag, ImageRef, RefRecord};
pub use refs::{ImageDetails, ImageInfo, RemoveReport, ResolvedImage};
pub use tree::remove_tree;

use lock::take_lock;

/// Temp entries older than this are removed when a store is opened.
pub const STALE_TMP_AGE: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {op}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    #[error("image store {}: {why}", path.display())]
    Root { path: PathBuf, why: String },
    #[error("image reference {input:?}: {why}")]
    BadReference { input: String, why: String },
    #[error("image {0} is not in the store")]
    NotFound(String),
    #[error("{what}: blob {digest} is not in the store")]
    MissingBlob { what: String, digest: Digest },
    #[error("{what}: content digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        what: String,
        expected: Digest,
        actual: Digest,
    },
    #[error("{what}: {why}")]
    Invalid { what: String, why: String },
    #[error("image store {}: {why}", path.display())]
    Busy { path: PathBuf, why: String },
    #[error("image store {}: {what}: the store is shared read-only (owned by uid {owner}); only its owner may change it", path.display())]
    ReadOnly {
        path: PathBuf,
        owner: u32,
        what: String,
    },
}

fn io_err(path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { path, op, source }
}

// ---------------------------------------------------------------------------
// The store

#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    /// Holds taken by this process (gc refuses to wait on itself).
    holds: Arc<AtomicUsize>,
    access: Access,
}

/// How this process may use a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The store is ours: every operation.
    Owner {
        /// Shared with other users (readable by them; see [`SHARED_MARKER`]).
        shared: bool,
    },
    /// Somebody else's shared store: resolve, list, inspect, export and run
    /// on what its owner unpacked; no writes of any kind.
    ReadOnly { owner: u32 },
}

/// A file in a store's root saying its owner shares it: other users may
/// open it read-only. Made when the owner opens `$CBRUN_IMAGE_STORE`.
pub const SHARED_MARKER: &str = "shared";
/// The variable naming a shared store (before `$CBRUN_HOME`).
pub const SHARED_STORE_ENV: &str = "CBRUN_IMAGE_STORE";

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// `$CBRUN_IMAGE_STORE` (a shared store), else `$CBRUN_HOME`, else
    /// `/var/lib/cbrun` for euid 0, else `$XDG_DATA_HOME/cbrun`, else
    /// `$HOME/.local/share/cbrun`.
    pub fn default_root() -> Result<PathBuf, StoreError> {
        default_root_from(|k| std::env::var_os(k), crate::host::userns::is_real_root()).ok_or_else(
            || StoreError::Root {
                path: PathBuf::from("$HOME/.local/share/cbrun"),
                why: "neither CBRUN_HOME, XDG_DATA_HOME nor HOME is set".to_owned(),
            },
        )
    }

    /// Open (creating if needed) the store at `root`. The root must belong to
    /// the current user, or be another user's shared store (it holds
    /// [`SHARED_MARKER`]), which is then opened read-only. The owner opening
    /// the store `$CBRUN_IMAGE_STORE` names makes it shared. Temp files
    /// older than [`STALE_TMP_AGE`] are removed when no other process is
    /// writing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let root: PathBuf = root.into();
        let euid = nix::unistd::geteuid().as_raw();
        if let Ok(meta) = fs::metadata(&root) {
            if meta.is_dir() && meta.uid() != euid {
                return Self::open_read_only(root, meta.uid(), euid);
            }
        }
        if !root.exists() {
            if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(parent).map_err(io_err(parent, "create directory"))?;
            }
            match fs::DirBuilder::new().mode(0o711).create(&root) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(&root, "create directory")(e)),
            }
        }
        let meta = fs::metadata(&root).map_err(io_err(&root, "stat"))?;
        if !meta.is_dir() {
            return Err(StoreError::Root {
                path: root,
                why: "not a directory".to_owned(),
            });
        }
        if meta.uid() != euid {
            return Err(StoreError::Root {
                path: root,
                why: format!(
                    "owned by uid {}, not by the current user (uid {euid}); refusing to use it",
                    meta.uid()
                ),
            });
        }
        let shared = root.join(SHARED_MARKER).is_file() || names_shared_store(&root);
        // Shared: others traverse the blob directories and read names.
        let (blobs, images) = if shared {
            (0o711, 0o755)
        } else {
            (0o700, 0o700)
        };
        for (dir, mode) in [
            ("blobs", blobs),
            ("blobs/sha256", blobs),
            ("images", images),
            ("rootfs", 0o711),
            ("tmp", 0o700),
        ] {
            let p = root.join(dir);
            match fs::DirBuilder::new().mode(mode).create(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && p.is_dir() => {}
                Err(e) => return Err(io_err(&p, "create directory")(e)),
            }
        }
        let store = Store {
            root,
            holds: Arc::new(AtomicUsize::new(0)),
            access: Access::Owner { shared },
        };
        if shared {
            store.share()?;
        }
        store.clean_stale_tmp()?;
        Ok(store)
    }

    /// Another user's store: only when it is shared, and then read-only.
    fn open_read_only(root: PathBuf, owner: u32, euid: u32) -> Result<Store, StoreError> {
        let marker = fs::symlink_metadata(root.join(SHARED_MARKER));
        if !marker
            .map(|m| m.is_file() && m.uid() == owner)
            .unwrap_or(false)
        {
            return Err(StoreError::Root {
                path: root,
                why: format!(
                    "owned by uid {owner}, not by the current user (uid {euid}), and not shared \
                     (its owner shares it by opening it as ${SHARED_STORE_ENV}); refusing to use it"
                ),
            });
        }
        for dir in ["blobs/sha256", "images", "rootfs"] {
            let p = root.join(dir);
            let m = fs::symlink_metadata(&p).map_err(io_err(&p, "stat"))?;
            if !m.is_dir() || m.uid() != owner {
                return Err(StoreError::Root {
                    path: root,
                    why: format!("{dir} is not a directory of the store's owner"),
                });
            }
        }
        Ok(Store {
            root,
            holds: Arc::new(AtomicUsize::new(0)),
            access: Access::ReadOnly { owner },
        })
    }

    /// Makes this (our own) store readable by others: the marker, lock
    /// files others can open read-only (a shared flock needs no write
    /// access), directories others may traverse, references they may read.
    /// Blob files are 0444 and unpacked roots keep their images' modes.
    fn share(&self) -> Result<(), StoreError> {
        use std::os::unix::fs::PermissionsExt;
        let marker = self.root.join(SHARED_MARKER);
        if !marker.is_file() {
            fs::write(
                &marker,
                "This image store is shared: other users open it read-only.\n",
            )
            .map_err(io_err(&marker, "write"))?;
        }
        let perm = |p: &Path, mode: u32| {
            fs::set_permissions(p, fs::Permissions::from_mode(mode)).map_err(io_err(p, "chmod"))
        };
        perm(&marker, 0o644)?;
        perm(&self.root, 0o755)?;
        for lock in [self.lock_path(), self.gc_lock_path()] {
            if !lock.exists() {
                drop(take_lock(&lock, false, false)?);
            }
            perm(&lock, 0o644)?;
        }
        perm(&self.root.join("blobs"), 0o711)?;
        perm(&self.root.join("blobs/sha256"), 0o711)?;
        let images = self.root.join("images");
        perm(&images, 0o755)?;
        for d in fs::read_dir(&images)
            .map_err(io_err(&images, "read directory"))?
            .flatten()
        {
            let p = d.path();
            if p.symlink_metadata().map(|m| m.is_dir()).unwrap_or(false) {
                perm(&p, 0o755)?;
                for f in fs::read_dir(&p)
                    .map_err(io_err(&p, "read directory"))?
                    .flatten()
                {
                    if f.path()
                        .symlink_metadata()
                        .map(|m| m.is_file())
                        .unwrap_or(false)
                    {
                        perm(&f.path(), 0o644)?;
                    }
                }
            }
        }
        Ok(())
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether other users may read this store.
    pub fn is_shared(&self) -> bool {
        !matches!(self.access, Access::Owner { shared: false })
    }

    /// An error unless this process may change the store.
    pub fn check_writable(&self, what: &str) -> Result<(), StoreError> {
        match self.access {
            Access::Owner { .. } => Ok(()),
            Access::ReadOnly { owner } => Err(StoreError::ReadOnly {
                path: self.root.clone(),
                owner,
                what: what.to_owned(),
            }),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `blobs/sha256/<hex>` (read-only file; prefer [`Store::open_blob`]).
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root
            .join("blobs")
            .join(digest.algorithm())
            .join(digest.hex())
    }

    /// `rootfs/<manifest hex>/`: where the unpacked, read-only root
    /// filesystem of an image goes. Build it under [`Store::tmp_dir`] and
    /// rename it here, holding a [`Hold`] throughout.
    pub fn rootfs_dir(&self, manifest: &Digest) -> PathBuf {
        self.root.join("rootfs").join(manifest.hex())
    }

    /// `tmp/`: in-progress writes (same file system as the rest).
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// A fresh, unused path under `tmp/` (nothing is created).
    pub fn temp_path(&self, prefix: &str) -> PathBuf {
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        self.tmp_dir()
            .join(format!("{prefix}-{}-{n}-{nanos:08x}", std::process::id()))
    }

    /// `rootfs/<manifest hex>.u<UID>g<GID>/`: an image's root unpacked by
    /// the owner of a shared store *for* a user whose sandboxes map only
    /// that user's ids (every rootless user): its files belong to that user,
    /// so the user's overlay can copy them up.
    pub fn rootfs_dir_for(&self, manifest: &Digest, uid: u32, gid: u32) -> PathBuf {
        self.root
            .join("rootfs")
            .join(format!("{}.u{uid}g{gid}", manifest.hex()))
    }

    fn clean_stale_tmp(&self) -> Result<(), StoreError> {
        let Some(_gc) = take_lock(&self.gc_lock_path(), true, false)? else {
            return Ok(()); // someone is writing; leave tmp/ alone
        };
        let tmp = self.tmp_dir();
        let now = SystemTime::now();
        for entry in fs::read_dir(&tmp).map_err(io_err(&tmp, "read directory"))? {
            let entry = entry.map_err(io_err(&tmp, "read directory"))?;
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            let old = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age > STALE_TMP_AGE);
            if old {
                let p = entry.path();
                remove_tree(&p).map_err(io_err(&p, "remove stale temp entry"))?;
            }
        }
        Ok(())
    }
}

/// Whether `root` is the store `$CBRUN_IMAGE_STORE` names.
fn names_shared_store(root: &Path) -> bool {
    let Some(v) = std::env::var_os(SHARED_STORE_ENV).filter(|v| !v.is_empty()) else {
        return false;
    };
    match (fs::canonicalize(&v), fs::canonicalize(root)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn default_root_from(env: impl Fn(&str) -> Option<OsString>, euid_root: bool) -> Option<PathBuf> {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(s) = get(SHARED_STORE_ENV) {
        return Some(PathBuf::from(s));
    }
    if let Some(h) = get("CBRUN_HOME") {
        return Some(PathBuf::from(h));
    }
    if euid_root {
        return Some(PathBuf::from("/var/lib/cbrun"));
    }
    if let Some(x) = get("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(x.join("cbrun"));
    }
    get("HOME").map(|h| PathBuf::from(h).join(".local/share/cbrun"))
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

// ---------------------------------------------------------------------------
// Time

/// Now as RFC 3339 UTC (`2024-05-01T12:00:00Z`).
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// Seconds since the epoch as RFC 3339 UTC.
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
