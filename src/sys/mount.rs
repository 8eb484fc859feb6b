//! The new mount API calls the judge's overlay needs for an idmapped lower
//! layer (`open_tree`, `mount_setattr`, `move_mount`), and a user namespace
//! that only carries id maps for one.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::fd::cvt;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_EMPTY_PATH: libc::c_uint = 0x1000;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// `struct mount_attr` (version 0, 32 bytes).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const EMPTY: &CStr = c"";

fn cvt_long(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A detached copy of the mount at directory `dir` (that one mount, not
/// the ones below it), rooted at `dir`.
pub fn clone_tree(dir: BorrowedFd) -> io::Result<OwnedFd> {
    // SAFETY: `dir` is an open descriptor, the path a valid empty C string;
    // on success the kernel returns a new descriptor that we own.
    let fd = cvt_long(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dir.as_raw_fd(),
            EMPTY.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_EMPTY_PATH,
        )
    })?;
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A detached copy of the mount at `path` (that one mount), by path.
pub fn clone_tree_at(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a NUL-terminated path the kernel only reads; on
    // success it returns a new descriptor that we own.
    let fd = cvt_long(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    })?;
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Attaches the detached mount `mnt` on the path `target`.
pub fn attach_at(mnt: BorrowedFd, target: &Path) -> io::Result<()> {
    let c = CString::new(target.as_os_str().as_bytes())?;
    // SAFETY: `mnt` is open for the call; the empty path and `c` are
    // NUL-terminated strings the kernel only reads.
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mnt.as_raw_fd(),
            EMPTY.as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// Makes the detached mount `mnt` read-only, nosuid, nodev and idmapped
/// through `userns` (its uid/gid maps say which on-disk id shows as which).
pub fn idmap_readonly(mnt: BorrowedFd, userns: BorrowedFd) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    // SAFETY: `attr` lives across the call and its size is passed.
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mnt.as_raw_fd(),
            EMPTY.as_ptr(),
            AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Attaches the detached mount `mnt` on the directory `target`.
pub fn attach(mnt: BorrowedFd, target: BorrowedFd) -> io::Result<()> {
    // SAFETY: both descriptors are open; the paths are empty C strings.
    cvt_long(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mnt.as_raw_fd(),
            EMPTY.as_ptr(),
            target.as_raw_fd(),
            EMPTY.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// A user namespace with one uid and one gid mapping (`inside host 1`),
/// for an idmapped mount; nothing runs in it once this returns. Needs
/// CAP_SETUID/CAP_SETGID over the host ids; forks (call single-threaded).
pub fn userns_mapping(uid: (u32, u32), gid: (u32, u32)) -> io::Result<OwnedFd> {
    let mut go = [0i32; 2];
    let mut done = [0i32; 2];
    // SAFETY: arrays of two descriptors, as pipe2 wants.
    cvt(unsafe { libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: as above.
    if let Err(e) = cvt(unsafe { libc::pipe2(done.as_mut_ptr(), libc::O_CLOEXEC) }) {
        // SAFETY: ours, closed once.
        unsafe {
            libc::close(go[0]);
            libc::close(go[1]);
        }
        return Err(e);
    }
    // SAFETY: the child only makes async-signal-safe calls (unshare,
    // write, read, _exit) before it exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above; the descriptors are the pipes made here.
        unsafe {
            // Its copies of the parent's ends go, so the parent closing
            // `done` is seen as EOF.
            libc::close(go[0]);
            libc::close(done[1]);
            let ok: u8 = u8::from(libc::unshare(libc::CLONE_NEWUSER) == 0);
            libc::write(go[1], (&ok as *const u8).cast(), 1);
            let mut b = 0u8;
            libc::read(done[0], (&mut b as *mut u8).cast(), 1);
            libc::_exit(0);
        }
    }
    // SAFETY: the parent's copies of the child's ends.
    unsafe {
        libc::close(go[1]);
        libc::close(done[0]);
    }
    // SAFETY: the remaining ends are ours alone from here on.
    let (go_r, done_w) = unsafe { (OwnedFd::from_raw_fd(go[0]), OwnedFd::from_raw_fd(done[1])) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let result = (|| {
        let mut ok = 0u8;
        // SAFETY: reading one byte into a local.
        let n = unsafe { libc::read(go_r.as_raw_fd(), (&mut ok as *mut u8).cast(), 1) };
        if n != 1 || ok != 1 {
            return Err(io::Error::other(
                "the helper could not make a user namespace",
            ));
        }
        std::fs::write(
            format!("/proc/{pid}/uid_map"),
            format!("{} {} 1", uid.0, uid.1),
        )?;
        std::fs::write(
            format!("/proc/{pid}/gid_map"),
            format!("{} {} 1", gid.0, gid.1),
        )?;
        let f = std::fs::File::open(format!("/proc/{pid}/ns/user"))?;
        Ok(OwnedFd::from(f))
    })();
    drop(done_w);
    drop(go_r);
    let mut status = 0;
    // SAFETY: our own child, reaped once.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    result
}
