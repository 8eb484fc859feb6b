//! Thin wrappers over the `*at` family and friends: every call takes a
//! directory descriptor and one name (or a descriptor of its own), so
//! callers never hand a whole path to the kernel. Nothing here decides
//! policy (which flags, which modes); [`super::dir`] and the trial's copy
//! do.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::fd::cvt;

/// `(st_dev, st_ino)`: what identifies an inode.
pub type InodeId = (libc::dev_t, libc::ino_t);

pub fn id_of(st: &libc::stat) -> InodeId {
    (st.st_dev, st.st_ino)
}

pub fn same_inode(a: &libc::stat, b: &libc::stat) -> bool {
    id_of(a) == id_of(b)
}

/// The file-type bits of a mode.
pub fn kind_bits(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

/// A C string of `p`; a NUL inside is an error, never a silent cut.
pub fn cpath(p: &OsStr) -> io::Result<CString> {
    CString::new(p.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

/// A C string of one name's bytes (a tar entry's, a directory entry's); a
/// NUL inside is an error.
pub fn cname(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
}

/// Whether `err` is one of the `errno` values `codes`.
pub fn errno_is(err: &io::Error, codes: &[libc::c_int]) -> bool {
    err.raw_os_error().is_some_and(|code| codes.contains(&code))
}

pub fn is_dir(st: &libc::stat) -> bool {
    kind_bits(st) == libc::S_IFDIR
}

/// `open(2)` of a whole path. Only for paths the caller chose (a trial
/// root, a `--workspace`), never for paths below a folder a sandbox writes.
pub fn open_path(p: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cpath(p.as_os_str())?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let fd = cvt(unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: open just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdir(2)` of a whole path the caller chose.
pub fn mkdir_path(p: &Path, mode: libc::mode_t) -> io::Result<()> {
    let c = cpath(p.as_os_str())?;
    // SAFETY: `c` is a valid NUL-terminated string.
    cvt(unsafe { libc::mkdir(c.as_ptr(), mode) }).map(drop)
}

/// `lstat(2)` of a whole path the caller chose: the entry itself.
pub fn lstat_path(path: &CStr) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `path` is NUL-terminated and `st` a buffer of the right size,
    // both valid for the call.
    cvt(unsafe { libc::lstat(path.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: lstat succeeded, so it initialised the whole struct.
    Ok(unsafe { st.assume_init() })
}

/// `chmod(2)` of a whole path the caller chose; follows a symlink, so the
/// caller checks first that the path is not one.
pub fn chmod_path(path: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a NUL-terminated string, only read.
    cvt(unsafe { libc::chmod(path.as_ptr(), mode) }).map(drop)
}

/// `lchown(2)` of a whole path the caller chose: the entry itself.
pub fn lchown_path(path: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: a NUL-terminated string, only read.
    cvt(unsafe { libc::lchown(path.as_ptr(), uid, gid) }).map(drop)
}

/// Times of a whole path the caller chose, the entry itself (a symlink's
/// own times, not its target's).
pub fn utimens_path_nofollow(path: &CStr, times: &[libc::timespec; 2]) -> io::Result<()> {
    // SAFETY: a NUL-terminated string and two initialised timespecs, only
    // read; AT_FDCWD makes `path` relative to the working directory as a
    // plain path call would.
    cvt(unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            path.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// `openat(2)`; `O_CLOEXEC` is always added. `mode` only matters with
/// `O_CREAT`.
pub fn open_at(
    dir: BorrowedFd,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string,
    // both borrowed for the call; openat reads nothing else of ours.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: openat just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `open_how` for [`openat2`].
pub fn open_how(flags: u64, mode: u64, resolve: u64) -> libc::open_how {
    // SAFETY: open_how is plain integers (non-exhaustive in libc only to
    // allow new fields); all-zero is valid and means "no option".
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    how
}

/// `openat2(2)` with `how`; ENOSYS (kernels before 5.6) and EPERM (a
/// seccomp filter that refuses it) come back as they are, for the caller
/// to fall back.
pub fn openat2(dir: BorrowedFd, path: &CStr, how: &libc::open_how) -> io::Result<OwnedFd> {
    // SAFETY: `how` is a fully initialised open_how of the size passed, and
    // `path` a NUL-terminated string; the kernel only reads both.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat2 just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(r as libc::c_int) })
}

pub fn fstat(fd: BorrowedFd) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat fills the buffer it is given, which is large enough.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it initialised the whole struct.
    Ok(unsafe { st.assume_init() })
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: the entry itself.
pub fn lstat_at(dir: BorrowedFd, name: &CStr) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid descriptor, a NUL-terminated name and a buffer of the
    // right size; AT_SYMLINK_NOFOLLOW keeps the call on the entry itself.
    cvt(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: fstatat succeeded, so it initialised the whole struct.
    Ok(unsafe { st.assume_init() })
}

/// [`lstat_at`], with "does not exist" as `None`.
pub fn lstat_at_opt(dir: BorrowedFd, name: &CStr) -> io::Result<Option<libc::stat>> {
    match lstat_at(dir, name) {
        Ok(st) => Ok(Some(st)),
        Err(err) if errno_is(&err, &[libc::ENOENT]) => Ok(None),
        Err(err) => Err(err),
    }
}

/// An `O_PATH` handle on the directory `name` in `dir`; a symlink is not
/// followed (ENOTDIR or ELOOP).
pub fn open_dir_path(dir: BorrowedFd, name: &CStr) -> io::Result<OwnedFd> {
    open_at(
        dir,
        name,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
}

/// A readable descriptor on the directory `dir` itself (for listing), from
/// any descriptor on it, `O_PATH` included.
pub fn reopen_dir_readable(dir: BorrowedFd) -> io::Result<OwnedFd> {
    open_at(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

pub fn mkdir_at(dir: BorrowedFd, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a valid descriptor and NUL-terminated name; mkdirat never
    // follows a symlink in the last component (it fails with EEXIST).
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
}

/// `linkat` without `AT_SYMLINK_FOLLOW`: a link to the entry itself.
pub fn link_at(old_dir: BorrowedFd, old: &CStr, new_dir: BorrowedFd, new: &CStr) -> io::Result<()> {
    // SAFETY: valid descriptors and NUL-terminated names, only read.
    cvt(unsafe {
        libc::linkat(
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            0,
        )
    })
    .map(drop)
}

pub fn symlink_at(target: &CStr, dir: BorrowedFd, name: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated strings and a valid descriptor, only read.
    cvt(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

pub fn rename_at(
    old_dir: BorrowedFd,
    old: &CStr,
    new_dir: BorrowedFd,
    new: &CStr,
) -> io::Result<()> {
    // SAFETY: valid descriptors and NUL-terminated names, only read.
    // renameat acts on directory entries and never follows a symlink at
    // either name: a link at `new` is replaced, not written through.
    cvt(unsafe {
        libc::renameat(
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
        )
    })
    .map(drop)
}

/// `unlinkat`; `flags` 0 or `AT_REMOVEDIR`.
pub fn unlink_at(dir: BorrowedFd, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid descriptor and a NUL-terminated name; unlinkat removes
    // the entry itself, never what a symlink names.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
}

/// `fchownat(.., AT_SYMLINK_NOFOLLOW)`: the entry itself, links included.
pub fn chown_at_nofollow(dir: BorrowedFd, name: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: a valid descriptor and NUL-terminated name, only read.
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

/// `fchmodat` with no flags, which follows a symlink at `name`: callers
/// must know the entry is not one (Linux before 6.6 has no
/// `AT_SYMLINK_NOFOLLOW` for chmod).
pub fn chmod_at_checked(dir: BorrowedFd, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a valid descriptor and NUL-terminated name, only read.
    cvt(unsafe { libc::fchmodat(dir.as_raw_fd(), name.as_ptr(), mode, 0) }).map(drop)
}

pub fn fchown(fd: BorrowedFd, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain integers; an invalid descriptor is reported as EBADF.
    cvt(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) }).map(drop)
}

pub fn fchmod(fd: BorrowedFd, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: plain integers; an invalid descriptor is reported as EBADF.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

/// Access and modification times of an open file.
pub fn futimens(fd: BorrowedFd, times: &[libc::timespec; 2]) -> io::Result<()> {
    // SAFETY: `times` points at two initialised timespecs, only read.
    cvt(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) }).map(drop)
}

/// Times of the entry itself (a symlink's own times, not its target's).
pub fn utimens_at_nofollow(
    dir: BorrowedFd,
    name: &CStr,
    times: &[libc::timespec; 2],
) -> io::Result<()> {
    // SAFETY: a valid descriptor, a NUL-terminated name and two initialised
    // timespecs, all only read.
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

/// Sets the extended attribute `name` of an open file to `value`.
pub fn fsetxattr(fd: BorrowedFd, name: &CStr, value: &[u8]) -> io::Result<()> {
    // SAFETY: a valid descriptor, a NUL-terminated name and `value`, valid
    // for reads of its length; the kernel only reads them.
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

pub fn fsync(fd: BorrowedFd) -> io::Result<()> {
    // SAFETY: a plain integer; an invalid descriptor is reported as EBADF.
    cvt(unsafe { libc::fsync(fd.as_raw_fd()) }).map(drop)
}

pub fn ftruncate(fd: BorrowedFd, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length out of range"))?;
    // SAFETY: plain integers; an invalid descriptor is reported as EBADF.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }).map(drop)
}

/// Clears `O_NONBLOCK` (set to open without hanging on a FIFO) once the
/// descriptor is known to be a regular file.
pub fn clear_nonblock(fd: BorrowedFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL on a descriptor we hold; only flags change.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) }).map(drop)
}

/// `lseek(fd, from, whence)` for `SEEK_DATA`/`SEEK_HOLE`; `None` for ENXIO
/// (no data at or after `from`).
pub fn seek(fd: BorrowedFd, from: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
    let from = libc::off_t::try_from(from)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
    // SAFETY: plain integers; lseek only moves the descriptor's offset.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), from, whence) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    Ok(Some(r as u64))
}

/// `pread` into `buf` at `off`; the count read.
pub fn pread(fd: BorrowedFd, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let off = libc::off_t::try_from(off)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
    loop {
        // SAFETY: `buf` is valid for writes of its length for the call.
        let r = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `pwrite` of all of `buf` at `off`.
pub fn pwrite_all(fd: BorrowedFd, mut buf: &[u8], mut off: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let o = libc::off_t::try_from(off)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))?;
        // SAFETY: `buf` is valid for reads of its length for the call.
        let r = unsafe { libc::pwrite(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), o) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        buf = &buf[r as usize..];
        off += r as u64;
    }
    Ok(())
}

/// A `timespec` from seconds and nanoseconds.
pub fn timespec(sec: libc::time_t, nsec: i64) -> libc::timespec {
    // SAFETY: timespec is plain integers; zero is a valid value, and zeroing
    // first covers targets whose struct has private padding.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    t.tv_sec = sec;
    t.tv_nsec = nsec as _;
    t
}

/// Closes a `DIR*` stream.
struct DirStream(*mut libc::DIR);

impl Drop for DirStream {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a successful fdopendir and is closed
        // exactly once, here.
        unsafe { libc::closedir(self.0) };
    }
}

/// Names in `dir` (without `.` and `..`), at most `cap` of them; the flag
/// says whether more were left.
pub fn read_dir_names(dir: BorrowedFd, cap: usize) -> io::Result<(Vec<CString>, bool)> {
    let (entries, more) = read_dir_typed(dir, cap)?;
    Ok((entries.into_iter().map(|(name, _)| name).collect(), more))
}

/// The names in `dir` as [`read_dir_names`] gives them, with each entry's `d_type` (`DT_UNKNOWN` where the
/// filesystem does not say): a walk that needs only kinds skips a stat per
/// entry.
pub fn read_dir_typed(dir: BorrowedFd, cap: usize) -> io::Result<(Vec<(CString, u8)>, bool)> {
    // fdopendir takes ownership of its fd: give it a duplicate so `dir`
    // stays usable. The duplicate shares the offset, hence the rewind.
    let dup = dir.try_clone_to_owned()?.into_raw_fd();
    // SAFETY: `dup` is a descriptor we own; on success the stream owns it.
    let ptr = unsafe { libc::fdopendir(dup) };
    if ptr.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `dup` is still ours to close.
        unsafe { libc::close(dup) };
        return Err(e);
    }
    let stream = DirStream(ptr);
    // SAFETY: a live stream.
    unsafe { libc::rewinddir(stream.0) };
    let mut names = Vec::new();
    loop {
        // readdir reports errors only through errno.
        // SAFETY: errno is thread-local; writing it is always allowed.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: a live stream; the entry stays valid until the next call.
        let ent = unsafe { libc::readdir(stream.0) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(0) | None => Ok((names, false)),
                Some(_) => Err(e),
            };
        }
        // SAFETY: d_name is NUL-terminated within the entry readdir returned,
        // which is valid until the next readdir; it is copied right away.
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        if name == c"." || name == c".." {
            continue;
        }
        if names.len() >= cap {
            return Ok((names, true));
        }
        // SAFETY: as above, the entry is valid until the next readdir.
        names.push((name.to_owned(), unsafe { (*ent).d_type }));
    }
}

/// The target of the symlink `name` in `dir`, whatever its length (bounded
/// at 1 MiB; Linux filesystems keep targets within PATH_MAX).
pub fn readlink_at(dir: BorrowedFd, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    loop {
        // SAFETY: `buf` is valid for writes of its length; readlinkat writes
        // at most that many bytes and no NUL.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(buf);
        }
        // Possibly truncated: retry larger, within reason.
        if buf.len() >= 1 << 20 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "symlink target too long",
            ));
        }
        buf.resize(buf.len() * 2, 0);
    }
}

/// Whether the open directory `dir` has no entries but `.` and `..`.
/// Reads a few entries at most, where a full listing has the kernel walk
/// the whole directory into a 32 KiB buffer.
pub fn dir_fd_is_empty(dir: BorrowedFd) -> io::Result<bool> {
    // Room for `.`, `..` and a couple of names: enough to find one.
    let mut buf = [0u64; 64];
    loop {
        // SAFETY: `buf` is valid for writes of the size passed; getdents64
        // fills it with whole records and returns the byte count.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(true);
        }
        // SAFETY: the first `n` bytes of `buf` were just written by the
        // kernel; u64 storage is suitably aligned for a byte view.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
        let mut off = 0usize;
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        while off + 19 < bytes.len() {
            let reclen = u16::from_ne_bytes([bytes[off + 16], bytes[off + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let name = &bytes[off + 19..(off + reclen).min(bytes.len())];
            let name = name.split(|b| *b == 0).next().unwrap_or(&[]);
            if name != b"." && name != b".." {
                return Ok(false);
            }
            off += reclen;
        }
    }
}

/// An advisory exclusive lock on `fd`, without waiting; false when another
/// holder has it.
pub fn try_lock_exclusive(fd: BorrowedFd) -> io::Result<bool> {
    // SAFETY: flock takes plain integers and only changes lock state.
    let r = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}
