//! Thin wrappers over the `*at` system calls the unpacker uses. Every call
//! names a single component relative to an open directory; none follows a
//! symlink in the last component except `chmod_at`, whose callers have just
//! checked that the name is a directory (the rootfs has no other writer
//! while a layer is applied).

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// (st_dev, st_ino): an inode's identity.
pub(super) type Id = (u64, u64);

/// Deepest directory nesting the recursive removal walks (it holds one fd
/// per level).
pub(super) const MAX_REMOVE_DEPTH: u32 = 512;

pub(super) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(super) fn errno_is(e: &io::Error, codes: &[libc::c_int]) -> bool {
    e.raw_os_error().is_some_and(|c| codes.contains(&c))
}

pub(super) fn other(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

pub(super) fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
}

pub(super) fn open_at(
    dir: BorrowedFd,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `O_PATH` handle on the directory `name` in `dir`; a symlink is not
/// followed (ENOTDIR or ELOOP).
pub(super) fn open_dir_path(dir: BorrowedFd, name: &CStr) -> io::Result<OwnedFd> {
    open_at(
        dir,
        name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
}

/// A readable fd on the directory `dir` itself (for listing), from any fd
/// on it, `O_PATH` included.
pub(super) fn reopen_dir_readable(dir: BorrowedFd) -> io::Result<OwnedFd> {
    open_at(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

pub(super) fn fstat(fd: BorrowedFd) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    Ok(unsafe { st.assume_init() })
}

pub(super) fn lstat_at(dir: BorrowedFd, name: &CStr) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    cvt(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(unsafe { st.assume_init() })
}

/// `lstat_at`, with "does not exist" as `None`.
pub(super) fn lstat_opt(dir: BorrowedFd, name: &CStr) -> io::Result<Option<libc::stat>> {
    match lstat_at(dir, name) {
        Ok(st) => Ok(Some(st)),
        Err(e) if errno_is(&e, &[libc::ENOENT]) => Ok(None),
        Err(e) => Err(e),
    }
}

// The casts are no-ops on 64-bit targets only.
#[allow(clippy::unnecessary_cast)]
pub(super) fn id_of(st: &libc::stat) -> Id {
    (st.st_dev as u64, st.st_ino as u64)
}

pub(super) fn file_type(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

pub(super) fn is_dir(st: &libc::stat) -> bool {
    file_type(st) == libc::S_IFDIR
}

pub(super) fn mkdir_at(dir: BorrowedFd, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
}

pub(super) fn symlink_at(target: &CStr, dir: BorrowedFd, name: &CStr) -> io::Result<()> {
    cvt(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

/// A hard link; flags 0: a symlink `old` would be linked itself, never
/// followed (callers only pass regular files anyway).
pub(super) fn link_at(
    odir: BorrowedFd,
    oname: &CStr,
    ndir: BorrowedFd,
    nname: &CStr,
) -> io::Result<()> {
    cvt(unsafe {
        libc::linkat(
            odir.as_raw_fd(),
            oname.as_ptr(),
            ndir.as_raw_fd(),
            nname.as_ptr(),
            0,
        )
    })
    .map(drop)
}

pub(super) fn chown_at(dir: BorrowedFd, name: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    cvt(unsafe {
        libc::fchownat(
            dir.as_raw_fd(),
            name.as_ptr(),
            uid,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// Follows a symlink in `name` (Linux has no lchmod): callers check first
/// that `name` is a directory.
pub(super) fn chmod_at(dir: BorrowedFd, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    cvt(unsafe { libc::fchmodat(dir.as_raw_fd(), name.as_ptr(), mode, 0) }).map(drop)
}

pub(super) fn times_at(dir: BorrowedFd, name: &CStr, t: &libc::timespec) -> io::Result<()> {
    let times = [*t, *t];
    cvt(unsafe {
        libc::utimensat(
            dir.as_raw_fd(),
            name.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

pub(super) fn fchown(fd: BorrowedFd, uid: u32, gid: u32) -> io::Result<()> {
    cvt(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) }).map(drop)
}

pub(super) fn fchmod(fd: BorrowedFd, mode: libc::mode_t) -> io::Result<()> {
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

pub(super) fn futimens(fd: BorrowedFd, t: &libc::timespec) -> io::Result<()> {
    let times = [*t, *t];
    cvt(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) }).map(drop)
}

pub(super) fn fsetxattr(fd: BorrowedFd, name: &CStr, value: &[u8]) -> io::Result<()> {
    cvt(unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    })
    .map(drop)
}

/// Names in the directory open (readable) at `dir`, without `.` and `..`.
pub(super) fn read_names(dir: BorrowedFd) -> io::Result<Vec<CString>> {
    crate::fsutil::read_dir_names(dir, usize::MAX).map(|(names, _)| names)
}

/// Removes `name` in `dir`, a whole tree if it is a directory, never
/// following symlinks. `Ok(false)` when there was nothing to remove.
pub(super) fn remove_tree(dir: BorrowedFd, name: &CStr, depth: u32) -> io::Result<bool> {
    let Some(st) = lstat_opt(dir, name)? else {
        return Ok(false);
    };
    if !is_dir(&st) {
        cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })?;
        return Ok(true);
    }
    if depth >= MAX_REMOVE_DEPTH {
        return Err(other(format!(
            "directory tree nested deeper than {MAX_REMOVE_DEPTH} levels"
        )));
    }
    // A read-only directory (left by an earlier layer) cannot be emptied by
    // an unprivileged owner: open it up; it is going away. Best effort: if
    // this fails, the listing or unlinks below report the real error.
    if st.st_mode & 0o700 != 0o700 {
        let _ = chmod_at(dir, name, 0o700);
    }
    let sub = open_at(
        dir,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )?;
    for child in read_names(sub.as_fd())? {
        remove_tree(sub.as_fd(), &child, depth + 1)?;
    }
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) })?;
    Ok(true)
}

pub(super) fn timespec(sec: i64, nsec: u32) -> libc::timespec {
    // Zeroed then assigned: some targets' timespec has private padding.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    t.tv_sec = sec as libc::time_t;
    t.tv_nsec = nsec as _;
    t
}
