//! File-descriptor tables: what a sandbox's first process keeps open.

use std::io;
use std::os::fd::RawFd;

/// Turns `errno`-style returns into `io::Result`.
pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Leaves exactly 0, 1, 2 and the `(source, target)` pairs open: each
/// source is duplicated onto its target number (without close-on-exec),
/// and every other descriptor is closed. Runs in a freshly forked sandbox
/// process before its command starts, so it must not rely on anything the
/// closed descriptors held.
///
/// Sources may sit on another pair's target number: they are first
/// duplicated above every target, then moved into place.
pub fn keep_only(pairs: &[(RawFd, RawFd)]) -> io::Result<()> {
    if pairs.iter().any(|(_, t)| *t < 3) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "passed descriptors must be 3 or above",
        ));
    }
    let above = pairs.iter().map(|(_, t)| *t).max().unwrap_or(2) + 1;
    let mut staged = Vec::with_capacity(pairs.len());
    for (src, target) in pairs {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) only reads the descriptor number;
        // an invalid one is reported as EBADF.
        let tmp = cvt(unsafe { libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, above) })?;
        staged.push((tmp, *target));
    }
    for (tmp, target) in &staged {
        // SAFETY: dup2 onto a number we chose; the old occupant (if any) is
        // one of the descriptors being dropped anyway.
        cvt(unsafe { libc::dup2(*tmp, *target) })?;
    }
    let mut keep: Vec<RawFd> = staged.iter().map(|(_, t)| *t).collect();
    keep.sort_unstable();
    keep.dedup();
    let mut from: u32 = 3;
    for k in keep {
        let k = k as u32;
        if k > from {
            close_range(from, k - 1)?;
        }
        from = k + 1;
    }
    close_range(from, u32::MAX)
}

/// Closes descriptors `first..=last`, by `close_range` where the kernel has
/// it (5.9 and later), else one by one over what `/proc/self/fd` lists.
fn close_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: close_range takes plain integers; closing descriptors this
    // process owns is the point, and nothing in this process refers to them
    // afterwards (the caller is about to exec).
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if r == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) {
        return Err(err);
    }
    let open: Vec<u32> = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| (first..=last).contains(fd))
        .collect();
    for fd in open {
        // SAFETY: see above; EBADF (the listing's own descriptor, already
        // closed) is harmless.
        unsafe { libc::close(fd as RawFd) };
    }
    Ok(())
}

/// `flock(fd, op)` (`LOCK_EX` or `LOCK_SH`, with `LOCK_NB` not to wait);
/// EWOULDBLOCK when `LOCK_NB` meets another holder.
pub fn flock(fd: std::os::fd::BorrowedFd<'_>, op: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor the caller keeps open for the call.
    cvt(unsafe { libc::flock(fd.as_raw_fd(), op) }).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a forked child: stage three descriptors onto swapped numbers and
    /// check only they (and 0-2) survive.
    #[test]
    fn keep_only_moves_and_closes() {
        // SAFETY: the test forks; the child only makes raw calls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = (|| -> io::Result<i32> {
                let a = std::fs::File::open("/dev/null")?;
                let b = std::fs::File::open("/proc/self/status")?;
                let extra = std::fs::File::open("/dev/zero")?;
                use std::os::fd::IntoRawFd;
                let (a, b, _extra) = (a.into_raw_fd(), b.into_raw_fd(), extra.into_raw_fd());
                // b goes to a's number and a to 9.
                keep_only(&[(b, a), (a, 9)])?;
                let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect();
                // The listing's own descriptor is among them; drop it.
                let mut open: Vec<i32> = open
                    .into_iter()
                    .filter(|fd| std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok())
                    .collect();
                open.sort_unstable();
                let link = |fd: i32| std::fs::read_link(format!("/proc/self/fd/{fd}")).ok();
                let ok = open.iter().filter(|fd| **fd > 2).count() == 2
                    && link(a).map(|p| p.ends_with("status")).unwrap_or(false)
                    && link(9).map(|p| p.ends_with("null")).unwrap_or(false);
                Ok(if ok { 0 } else { 3 })
            })()
            .unwrap_or(4);
            // SAFETY: leaving the forked child without running the test
            // harness's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "{status}");
        assert_eq!(libc::WEXITSTATUS(status), 0);
    }

    #[test]
    fn low_targets_are_refused() {
        assert!(keep_only(&[(5, 2)]).is_err());
    }
}
