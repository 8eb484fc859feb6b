//! Removing directory trees the store made, read-only directories and
//! any depth included, without following symlinks.

use std::ffi::{CStr, CString, OsStr};
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Remove `path` and everything under it, without following symlinks, even
/// when directories inside are read-only (they are made writable first) and
/// however deep the tree is (no path-length limit, constant file
/// descriptors). `path` itself may be a file or a symlink.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let meta = path.symlink_metadata()?;
    if !meta.is_dir() {
        return fs::remove_file(path);
    }
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let parent_fd = open_dir_at(libc::AT_FDCWD, &cpath(parent.as_os_str())?)?;
    remove_dir_at(&parent_fd, &cpath(name)?)
}

fn cpath(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

fn open_dir_at(dirfd: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    loop {
        // SAFETY: openat with a valid C string; the fd returned is owned here.
        let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
        if fd >= 0 {
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: fstat fills a zeroed stat struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Names in a directory (without `.` and `..`).
fn list_dir(fd: RawFd) -> io::Result<Vec<CString>> {
    // SAFETY: fdopendir takes ownership of the duplicated descriptor and
    // closedir releases it; readdir entries are copied before the next call.
    unsafe {
        let dup = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0);
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        let dir = libc::fdopendir(dup);
        if dir.is_null() {
            let e = io::Error::last_os_error();
            libc::close(dup);
            return Err(e);
        }
        libc::rewinddir(dir);
        let mut names = Vec::new();
        loop {
            nix::errno::Errno::clear();
            let ent = libc::readdir(dir);
            if ent.is_null() {
                let errno = nix::errno::Errno::last_raw();
                libc::closedir(dir);
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(errno));
                }
                return Ok(names);
            }
            let name = CStr::from_ptr((*ent).d_name.as_ptr());
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                names.push(name.to_owned());
            }
        }
    }
}

fn make_owner_rwx(fd: RawFd) -> io::Result<()> {
    let st = fstat(fd)?;
    if st.st_mode & 0o700 != 0o700 {
        // SAFETY: fchmod on an open directory descriptor.
        if unsafe { libc::fchmod(fd, (st.st_mode & 0o7777) | 0o700) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Open subdirectory `name` of `dirfd`, making it readable first if needed.
fn open_subdir(dirfd: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    match open_dir_at(dirfd, name) {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            // SAFETY: fchmodat on a name in a directory we own.
            if unsafe { libc::fchmodat(dirfd, name.as_ptr(), 0o700, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            open_dir_at(dirfd, name)
        }
        r => r,
    }
}

/// Iterative removal of directory `name` in `parent`. Only the current
/// directory is kept open; going back up uses `..`, checked against the
/// device and inode recorded on the way down.
fn remove_dir_at(parent: &OwnedFd, name: &CStr) -> io::Result<()> {
    struct Frame {
        name: CString,
        /// Subdirectories still to visit.
        pending: Vec<CString>,
        dev: u64,
        ino: u64,
    }
    let mut cur = open_subdir(parent.as_raw_fd(), name)?;
    let st = fstat(cur.as_raw_fd())?;
    let mut stack = vec![Frame {
        name: name.to_owned(),
        pending: Vec::new(),
        dev: st.st_dev,
        ino: st.st_ino,
    }];
    let mut fresh = true; // `cur` not yet emptied of files
    loop {
        let fd = cur.as_raw_fd();
        if fresh {
            make_owner_rwx(fd)?;
            let mut dirs = Vec::new();
            for n in list_dir(fd)? {
                // SAFETY: unlinkat on a name in an open directory.
                if unsafe { libc::unlinkat(fd, n.as_ptr(), 0) } != 0 {
                    let e = io::Error::last_os_error();
                    match e.raw_os_error() {
                        Some(libc::EISDIR) | Some(libc::EPERM) if is_dir_at(fd, &n) => dirs.push(n),
                        Some(libc::ENOENT) => {}
                        _ => return Err(e),
                    }
                }
            }
            stack.last_mut().expect("frame").pending = dirs;
            fresh = false;
        }
        let frame = stack.last_mut().expect("frame");
        if let Some(child) = frame.pending.pop() {
            let next = open_subdir(fd, &child)?;
            let st = fstat(next.as_raw_fd())?;
            stack.push(Frame {
                name: child,
                pending: Vec::new(),
                dev: st.st_dev,
                ino: st.st_ino,
            });
            cur = next;
            fresh = true;
            continue;
        }
        // `cur` is empty: remove it from its parent.
        let done = stack.pop().expect("frame");
        if stack.is_empty() {
            drop(cur);
            // SAFETY: unlinkat with AT_REMOVEDIR on a name in `parent`.
            if unsafe { libc::unlinkat(parent.as_raw_fd(), done.name.as_ptr(), libc::AT_REMOVEDIR) }
                != 0
            {
                return Err(io::Error::last_os_error());
            }
            return Ok(());
        }
        let up = open_dir_at(fd, c"..")?;
        let st = fstat(up.as_raw_fd())?;
        let expect = stack.last().expect("frame");
        if (st.st_dev, st.st_ino) != (expect.dev, expect.ino) {
            return Err(io::Error::other("directory tree moved while being removed"));
        }
        drop(cur);
        // SAFETY: as above.
        if unsafe { libc::unlinkat(up.as_raw_fd(), done.name.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
            return Err(io::Error::last_os_error());
        }
        cur = up;
    }
}

fn is_dir_at(dirfd: RawFd, name: &CStr) -> bool {
    // SAFETY: fstatat into a zeroed struct, not following symlinks.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    r == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFDIR
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::image::store::tests::TempDir;

    #[test]
    fn remove_tree_handles_deep_read_only_trees_and_symlinks() {
        let t = TempDir::new("store-rmtree");
        let top = t.path().join("top");
        let outside = t.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("keep"), b"k").unwrap();
        // deeper than PATH_MAX allows as one path (built with mkdirat)
        fs::create_dir(&top).unwrap();
        let name = CString::new("d".repeat(200)).unwrap();
        let mut fd = open_dir_at(libc::AT_FDCWD, &cpath(top.as_os_str()).unwrap()).unwrap();
        for _ in 0..40 {
            assert_eq!(
                unsafe { libc::mkdirat(fd.as_raw_fd(), name.as_ptr(), 0o755) },
                0
            );
            fd = open_dir_at(fd.as_raw_fd(), &name).unwrap();
        }
        // the deepest directory read-only, with a file
        let f = CString::new("f").unwrap();
        let ffd = unsafe {
            libc::openat(
                fd.as_raw_fd(),
                f.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY,
                0o444,
            )
        };
        assert!(ffd >= 0);
        unsafe { libc::close(ffd) };
        assert_eq!(unsafe { libc::fchmod(fd.as_raw_fd(), 0o500) }, 0);
        drop(fd);
        // read-only dirs and a symlink to outside
        std::os::unix::fs::symlink(&outside, top.join("link")).unwrap();
        fs::create_dir(top.join("ro")).unwrap();
        fs::write(top.join("ro/f"), b"x").unwrap();
        fs::set_permissions(top.join("ro/f"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::set_permissions(top.join("ro"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::set_permissions(&top, fs::Permissions::from_mode(0o555)).unwrap();
        remove_tree(&top).unwrap();
        assert!(!top.exists());
        assert!(outside.join("keep").exists());
        // a symlink or a file as the argument
        std::os::unix::fs::symlink(&outside, t.path().join("l2")).unwrap();
        remove_tree(&t.path().join("l2")).unwrap();
        assert!(outside.join("keep").exists());
    }
}
