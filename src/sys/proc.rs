//! Processes: what procfs says about one (for gc to prove a pid is the
//! sandbox it recorded before signalling it), pidfds (so a signal reaches
//! the process that was checked, never a later one that reused its pid),
//! and hiding cbrun's own command line and environment in the `--init`
//! pid 1, which is a fork of cbrun and never execs.

use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use super::fd::cvt;

/// The fields of `/proc/<pid>/stat` after the command name, which may hold
/// spaces and parentheses: split after its last `)`. Index 0 is field 3
/// (the state) of proc(5).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    stat_fields_at(&format!("/proc/{pid}/stat"))
}

fn stat_fields_at(path: &str) -> Option<Vec<String>> {
    let text = fs::read_to_string(path).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

fn stat_field(fields: &[String], n: usize) -> Option<u64> {
    fields.get(n.checked_sub(3)?)?.parse().ok()
}

/// What `/proc/<pid>/stat` tells gc about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// `R`, `S`, `Z`, ...
    pub state: char,
    /// Start time in clock ticks after boot (field 22): with the pid, it
    /// names one process for the life of the machine.
    pub start_time: u64,
}

impl ProcStat {
    pub fn read(pid: i32) -> Option<ProcStat> {
        let f = stat_fields(pid)?;
        Some(ProcStat {
            state: f.first()?.chars().next()?,
            start_time: stat_field(&f, 22)?,
        })
    }

    /// Exited (a zombie or on its way out): nothing left to kill.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Inode of the pid namespace `pid` lives in; needs ptrace-read access to
/// it (a non-dumpable process of another user hides it).
pub fn pidns_inode(pid: i32) -> Option<u64> {
    fs::metadata(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

/// The pid namespace this process lives in.
pub fn own_pidns_inode() -> Option<u64> {
    fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

fn status_line(pid: i32, key: &str) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(key)?
            .strip_prefix(':')
            .map(|v| v.trim().to_owned())
    })
}

/// Whether `pid` is pid 1 of a pid namespace below the reader's: its
/// `NSpid` line has the reader's number first and 1 last.
pub fn is_pidns_init(pid: i32) -> bool {
    let Some(line) = status_line(pid, "NSpid") else {
        return false;
    };
    let ids: Vec<&str> = line.split_whitespace().collect();
    ids.len() >= 2 && ids.last() == Some(&"1")
}

/// Real uid of `pid`, as the reader's user namespace sees it.
pub fn real_uid(pid: i32) -> Option<u32> {
    status_line(pid, "Uid")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Processes whose command name (`/proc/<pid>/comm`) starts with
/// `comm_prefix` and that hold a descriptor to the file `(dev, ino)`, each
/// with a pidfd opened before its descriptors were looked at (so a signal
/// through it reaches the process that was checked). Processes whose
/// descriptors the caller may not read are skipped: only ones it could
/// ptrace are found. A `/proc` scan; for rare paths only.
pub fn holders_of(dev: u64, ino: u64, comm_prefix: &str) -> Vec<(i32, PidFd)> {
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        match fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(comm) if comm.starts_with(comm_prefix) => {}
            _ => continue,
        }
        let Ok(pidfd) = PidFd::open(pid) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        // `metadata` follows the fd's magic link to the open file itself.
        let holds = fds
            .flatten()
            .any(|fd| fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino));
        if holds {
            found.push((pid, pidfd));
        }
    }
    found
}

/// A pidfd: refers to one process, whatever later reuses its number.
#[derive(Debug)]
pub struct PidFd(OwnedFd);

impl PidFd {
    /// `pidfd_open(pid, 0)`. ENOSYS before Linux 5.3.
    pub fn open(pid: i32) -> io::Result<PidFd> {
        // SAFETY: plain integer arguments; a returned descriptor is new
        // and owned by nothing else.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: see above.
        Ok(PidFd(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// `pidfd_send_signal`: ESRCH once the process has exited.
    pub fn signal(&self, sig: nix::sys::signal::Signal) -> io::Result<()> {
        // SAFETY: a valid pidfd, a signal number and no siginfo.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                std::os::fd::AsRawFd::as_raw_fd(&self.0),
                sig as libc::c_int,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            )
        };
        cvt(r as libc::c_int).map(|_| ())
    }
}

impl AsFd for PidFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// What `/proc/1/cmdline` shows of the `--init` pid 1 after
/// [`scrub_cmdline_environ`].
pub const INIT_TITLE: &[u8] = b"cbrun-init";

/// Overwrite this process's argument and environment strings (the memory
/// `/proc/<pid>/cmdline` and `/proc/<pid>/environ` read) with NULs, the
/// arguments starting with [`INIT_TITLE`]. The `--init` pid 1 is a fork of
/// cbrun that never execs, so without this the sandbox would read cbrun's
/// host command line (anyone may read a process's cmdline) and, were the
/// process dumpable, its whole host environment.
///
/// Whatever still points into these strings (std's saved `argv`, libc's
/// `environ`) reads empty strings afterwards: the process must not need its
/// arguments or environment any more.
pub fn scrub_cmdline_environ() -> io::Result<()> {
    let f = stat_fields_at("/proc/self/stat")
        .ok_or_else(|| io::Error::other("cannot read /proc/self/stat"))?;
    let field = |n| stat_field(&f, n).ok_or_else(|| io::Error::other("short /proc/self/stat"));
    let (arg_start, arg_end) = (field(48)?, field(49)?);
    let (env_start, env_end) = (field(50)?, field(51)?);
    for (start, end, title) in [
        (arg_start, arg_end, INIT_TITLE),
        (env_start, env_end, &b""[..]),
    ] {
        // The kernel reports zeros to readers without ptrace access; this
        // process reads its own. Refuse anything implausible.
        if start == 0 || end <= start || end - start > 16 << 20 {
            return Err(io::Error::other("implausible argument/environment bounds"));
        }
        let len = (end - start) as usize;
        let keep = title.len().min(len.saturating_sub(1));
        // SAFETY: [start, end) is this process's initial-stack string
        // area, mapped writable for the process's life; nothing holds a
        // Rust reference into it (std and libc keep raw pointers, which
        // stay valid and NUL-terminated: every byte past `keep` is NUL).
        unsafe {
            let p = start as usize as *mut u8;
            std::ptr::copy_nonoverlapping(title.as_ptr(), p, keep);
            std::ptr::write_bytes(p.add(keep), 0, len - keep);
        }
    }
    Ok(())
}

/// `prctl(PR_SET_DUMPABLE, 0)`: the process's memory, descriptors,
/// environment and namespace files become unreachable to processes
/// without CAP_SYS_PTRACE over the user namespace it was exec'd in (the
/// host's, for cbrun). Children inherit it until they exec.
pub fn set_non_dumpable() -> io::Result<()> {
    // SAFETY: integer arguments only.
    cvt(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }).map(|_| ())
}

/// Gives up root for good: no supplementary groups, `uid:gid` for every id
/// (real, effective, saved), and `no_new_privs`. For helper processes that
/// parse what a sandbox sends and need no privilege to do it.
pub fn drop_to(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain system calls on this process's credentials; each result
    // is checked, and a failure leaves the caller to exit.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(gid, gid, gid) != 0
            || libc::setresuid(uid, uid, uid) != 0
            || libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `_exit(code)`: ends a forked child at once, without running the
/// parent's destructors, atexit handlers or stdio flushes (async-signal-safe).
pub fn exit_child(code: i32) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_facts() {
        let me = std::process::id() as i32;
        let st = ProcStat::read(me).expect("own stat");
        assert!(!st.is_dead());
        assert!(st.start_time > 0);
        assert_eq!(pidns_inode(me), own_pidns_inode());
        assert_eq!(real_uid(me), Some(nix::unistd::getuid().as_raw()));
        assert!(PidFd::open(me).is_ok());
        assert!(ProcStat::read(-5).is_none());
    }

    #[test]
    fn stat_with_hostile_command_name() {
        // A name with spaces and a closing parenthesis must not shift fields.
        let fields = {
            let text = "42 (a) b ) S) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19777 20";
            let rest = &text[text.rfind(')').unwrap() + 1..];
            rest.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(fields[0], "S");
        assert_eq!(stat_field(&fields, 22), Some(19777));
    }

    /// In a forked child: after scrubbing, /proc/self/cmdline is the title
    /// and NULs, /proc/self/environ all NULs.
    #[test]
    fn scrub_hides_arguments_and_environment() {
        // SAFETY: the test forks; the child only reads procfs and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = scrub_cmdline_environ().is_ok()
                && fs::read("/proc/self/cmdline")
                    .map(|c| {
                        c.starts_with(INIT_TITLE) && c[INIT_TITLE.len()..].iter().all(|b| *b == 0)
                    })
                    .unwrap_or(false)
                && fs::read("/proc/self/environ")
                    .map(|e| e.iter().all(|b| *b == 0))
                    .unwrap_or(false);
            // SAFETY: leaving the forked child without the harness.
            unsafe { libc::_exit(if ok { 0 } else { 3 }) };
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status}"
        );
    }
}
