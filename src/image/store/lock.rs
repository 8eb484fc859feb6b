//! Locking: the `lock` flock around reference changes, rm and gc, and the
//! shared `gc.lock` a [`Hold`] keeps while an import, pull, unpack or
//! sandbox needs what is not referenced yet.

use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{io_err, Store, StoreError};

/// An flock held on a lock file; released on drop.
pub(super) struct LockFile {
    _file: File,
}

pub(super) fn take_lock(
    path: &Path,
    exclusive: bool,
    wait: bool,
) -> Result<Option<LockFile>, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err(path, "open lock file"))?;
    flock(file, path, exclusive, wait)
}

/// A shared lock on a lock file this process may only read (another
/// user's shared store): flock needs no write access.
fn take_shared_read_only(path: &Path) -> Result<LockFile, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_err(path, "open lock file"))?;
    Ok(flock(file, path, false, true)?.expect("blocking lock"))
}

fn flock(
    file: File,
    path: &Path,
    exclusive: bool,
    wait: bool,
) -> Result<Option<LockFile>, StoreError> {
    let mut op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    if !wait {
        op |= libc::LOCK_NB;
    }
    loop {
        let Err(e) = crate::sys::fd::flock(file.as_fd(), op) else {
            return Ok(Some(LockFile { _file: file }));
        };
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(None),
            _ => return Err(io_err(path, "flock")(e)),
        }
    }
}

/// While held, `gc` and `remove` never delete blobs, unpacked root
/// filesystems or temp files of this store. Hold one across a whole import,
/// pull, unpack, or the life of a sandbox that uses `rootfs/<hex>/`.
pub struct Hold {
    _lock: LockFile,
    count: Arc<AtomicUsize>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Store {
    pub(super) fn lock_path(&self) -> PathBuf {
        self.root.join("lock")
    }

    pub(super) fn gc_lock_path(&self) -> PathBuf {
        self.root.join("gc.lock")
    }

    /// Keep `gc`/`remove` from deleting anything until the guard is dropped.
    /// In another user's shared store this is a shared flock on its
    /// `gc.lock`, opened read-only: the owner's `gc` waits for it.
    pub fn hold(&self) -> Result<Hold, StoreError> {
        let lock = match self.access {
            super::Access::ReadOnly { .. } => take_shared_read_only(&self.gc_lock_path())?,
            super::Access::Owner { .. } => {
                take_lock(&self.gc_lock_path(), false, true)?.expect("blocking lock")
            }
        };
        self.holds.fetch_add(1, Ordering::SeqCst);
        Ok(Hold {
            _lock: lock,
            count: self.holds.clone(),
        })
    }

    pub(super) fn lock_refs(&self) -> Result<LockFile, StoreError> {
        self.check_writable("changing references")?;
        Ok(take_lock(&self.lock_path(), true, true)?.expect("blocking lock"))
    }
}
