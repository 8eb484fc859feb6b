//! Real attempts at the kernel features a sandbox relies on.
//!
//! Each probe forks a child that does the work and `_exit`s; whatever the
//! child set up (namespaces, mounts, a seccomp filter) dies with it, so the
//! caller's process and the host are left exactly as they were.

use std::fs;
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, getegid, geteuid, ForkResult, Pid};

/// A probe child that takes longer than this is killed and counted as failed.
const CHILD_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest failure reason a child sends back; well under the pipe buffer so
/// the child never blocks on the write before `_exit`.
const MAX_REASON: usize = 4000;

/// Exit code a probe child uses when its closure fails without naming one.
const GENERIC_FAILURE: i32 = 1;

/// Why a probe child failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildError {
    /// The child's exit code; `None` when it was killed by a signal or could
    /// not be started.
    pub code: Option<i32>,
    pub reason: String,
}

/// Run `f` in a forked child. Exit code 0 means success; on failure `f`
/// names an exit code and a reason, which travels back over a pipe.
///
/// The child never returns into the caller's code: it ends with `_exit`, so
/// no destructors, atexit handlers or buffered stdio of the parent run twice.
pub(crate) fn run_in_child<F>(f: F) -> Result<(), ChildError>
where
    F: FnOnce() -> Result<(), (i32, String)>,
{
    let start_err = |reason: String| ChildError { code: None, reason };
    let (rd, wr) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| start_err(format!("pipe: {e}")))?;
    // SAFETY: the child only runs `f` (plain syscalls and allocation, which
    // glibc keeps usable after fork) and then `_exit`s.
    match unsafe { fork() } {
        Err(e) => Err(start_err(format!("fork: {e}"))),
        Ok(ForkResult::Child) => {
            drop(rd);
            // A panic must not unwind into the parent's frames inside the child.
            let (code, msg) = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
                Ok(Ok(())) => (0, String::new()),
                Ok(Err((code, msg))) => (if code == 0 { GENERIC_FAILURE } else { code }, msg),
                Err(_) => (GENERIC_FAILURE, "probe child panicked".to_owned()),
            };
            let bytes = msg.as_bytes();
            let _ = nix::unistd::write(&wr, &bytes[..bytes.len().min(MAX_REASON)]);
            crate::sys::proc::exit_child(code)
        }
        Ok(ForkResult::Parent { child }) => {
            drop(wr);
            let status = wait_with_deadline(child, CHILD_TIMEOUT);
            // The child has exited, so the write end is closed and this hits EOF.
            let mut raw = Vec::new();
            let _ = fs::File::from(rd).read_to_end(&mut raw);
            let reason = String::from_utf8_lossy(&raw).trim().to_owned();
            match status {
                Ok(WaitStatus::Exited(_, 0)) => Ok(()),
                Ok(WaitStatus::Exited(_, code)) => Err(ChildError {
                    code: Some(code),
                    reason: if reason.is_empty() {
                        format!("probe child exited with {code}")
                    } else {
                        reason
                    },
                }),
                Ok(WaitStatus::Signaled(_, sig, _)) => {
                    Err(start_err(format!("probe child killed by {sig}")))
                }
                Ok(other) => Err(start_err(format!("probe child ended oddly: {other:?}"))),
                Err(e) => Err(start_err(e)),
            }
        }
    }
}

/// [`run_in_child`] for probes that only need a reason.
pub(crate) fn in_child<F>(f: F) -> Result<(), String>
where
    F: FnOnce() -> Result<(), String>,
{
    run_in_child(|| f().map_err(|m| (GENERIC_FAILURE, m))).map_err(|e| e.reason)
}

/// Reap `child`, killing it if it overruns `limit` so a wedged probe can't
/// hang `cbrun doctor`.
fn wait_with_deadline(child: Pid, limit: Duration) -> Result<WaitStatus, String> {
    let deadline = Instant::now() + limit;
    loop {
        match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() >= deadline {
                    let _ = kill(child, Signal::SIGKILL);
                    return match waitpid(child, None) {
                        Ok(_) => Err(format!("probe child timed out after {}s", limit.as_secs())),
                        Err(e) => Err(format!("waitpid: {e}")),
                    };
                }
                sleep(Duration::from_millis(2));
            }
            Ok(status) => return Ok(status),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(format!("waitpid: {e}")),
        }
    }
}

/// Write `content` to a /proc or /sys file, naming the file on failure.
pub(crate) fn write_file(path: &str, content: &str) -> Result<(), String> {
    fs::write(path, content).map_err(|e| format!("write {content:?} to {path}: {e}"))
}

/// Map the caller's euid/egid to 0 inside the user namespace it just
/// unshared: the one mapping an unprivileged process may write itself.
/// `setgroups` must be denied first or the kernel rejects an unprivileged
/// gid_map.
pub(crate) fn write_single_id_maps(uid: u32, gid: u32) -> Result<(), String> {
    match fs::write("/proc/self/setgroups", "deny") {
        // Kernels before 3.19 have no setgroups file and need no deny.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("write \"deny\" to /proc/self/setgroups: {e}")),
        Ok(()) => {}
    }
    write_file("/proc/self/uid_map", &format!("0 {uid} 1\n"))?;
    write_file("/proc/self/gid_map", &format!("0 {gid} 1\n"))
}

/// Namespaces to unshare alongside another one: root already has the
/// capability; anybody else gets it by first entering a new user namespace.
fn with_userns_if_unprivileged(flags: CloneFlags) -> CloneFlags {
    if geteuid().is_root() {
        flags
    } else {
        flags | CloneFlags::CLONE_NEWUSER
    }
}

/// Create an empty 0700 directory under the temp dir for the overlay probe.
fn private_temp_dir() -> Result<PathBuf, String> {
    let base = std::env::temp_dir();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let pid = std::process::id();
    let mut last = String::new();
    // A stale dir of the same name is possible after a crash; try a few names.
    for n in 0..16u32 {
        let dir = base.join(format!("cbrun-probe-{pid}-{nanos:x}-{n}"));
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = e.to_string(),
            Err(e) => return Err(format!("create {}: {e}", dir.display())),
        }
    }
    Err(format!(
        "no free probe directory under {}: {last}",
        base.display()
    ))
}

/// Can overlayfs (with `userxattr`) be mounted and written inside a user +
/// mount namespace? Mounts a tmpfs on a private temp dir in the child's own
/// mount namespace and stacks an overlay on it; the host never sees either.
pub fn overlay_in_userns() -> Result<(), String> {
    let dir = private_temp_dir()?;
    let (uid, gid) = (geteuid().as_raw(), getegid().as_raw());
    let target = dir.clone();
    let res = in_child(move || overlay_child(&target, uid, gid));
    // The mounts lived in the child's namespace only; the empty dir is ours.
    let _ = fs::remove_dir(&dir);
    res
}

fn overlay_child(dir: &Path, uid: u32, gid: u32) -> Result<(), String> {
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("unshare(CLONE_NEWUSER|CLONE_NEWNS): {e}"))?;
    write_single_id_maps(uid, gid)?;
    // Nothing mounted below may propagate back to the host's namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("make / private: {e}"))?;
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("mode=0700,size=1m"),
    )
    .map_err(|e| format!("mount tmpfs in a user namespace: {e}"))?;
    let sub = |n: &str| dir.join(n);
    for d in ["lower", "upper", "work", "merged"] {
        fs::create_dir(sub(d)).map_err(|e| format!("mkdir {d} on tmpfs: {e}"))?;
    }
    fs::write(sub("lower").join("f"), "lower").map_err(|e| format!("write lower file: {e}"))?;
    let opts = format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        sub("lower").display(),
        sub("upper").display(),
        sub("work").display()
    );
    let merged = sub("merged");
    if let Err(e) = mount(
        Some("overlay"),
        &merged,
        Some("overlay"),
        MsFlags::empty(),
        Some(opts.as_str()),
    ) {
        let hint = match e {
            Errno::ENODEV => " (overlay module not loaded: modprobe overlay)",
            Errno::EINVAL => " (kernel lacks the userxattr option: needs Linux >= 5.11)",
            Errno::EPERM => " (overlayfs not mountable in a user namespace: needs Linux >= 5.11, or a distro patch is missing)",
            _ => "",
        };
        return Err(format!("mount overlay with userxattr: {e}{hint}"));
    }
    // Copy-up of an existing file and a new file exercise the writable
    // layer, which is what a sandbox needs, not just the mount call.
    fs::write(merged.join("f"), "upper")
        .map_err(|e| format!("copy-up write through overlay: {e}"))?;
    fs::write(merged.join("new"), "new")
        .map_err(|e| format!("create file through overlay: {e}"))?;
    match fs::read_to_string(sub("upper").join("f")) {
        Ok(s) if s == "upper" => Ok(()),
        Ok(_) => Err("overlay copy-up left the upper layer stale".to_owned()),
        Err(e) => Err(format!(
            "overlay copy-up did not reach the upper layer: {e}"
        )),
    }
}

/// Are seccomp filters available? Checks the kernel reports seccomp at all,
/// then in a child sets no_new_privs and installs an allow-all filter.
pub fn seccomp_filters() -> Result<(), String> {
    let status = fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("read /proc/self/status: {e}"))?;
    if !status.lines().any(|l| l.starts_with("Seccomp:")) {
        return Err(
            "kernel built without seccomp (no Seccomp: line in /proc/self/status)".to_owned(),
        );
    }
    in_child(seccomp_child)
}

fn seccomp_child() -> Result<(), String> {
    if let Err(e) = nix::sys::prctl::set_no_new_privs() {
        return Err(format!("prctl(PR_SET_NO_NEW_PRIVS): {e}"));
    }
    let filter = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let rc = crate::sandbox::seccomp::install_raw(&filter, 1);
    if rc != 0 {
        return Err(format!(
            "seccomp(SECCOMP_SET_MODE_FILTER): {}",
            Errno::last()
        ));
    }
    // Mode 2 is "filter": proof the kernel really attached it.
    let status = fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("read /proc/self/status: {e}"))?;
    let mode = status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))
        .map(str::trim)
        .unwrap_or("");
    if mode == "2" {
        Ok(())
    } else {
        Err(format!(
            "filter installed but /proc/self/status says Seccomp: {mode}"
        ))
    }
}

/// Can a new network namespace be created (inside a user namespace unless
/// root), with only a loopback interface that can be brought up and no route
/// anywhere else?
pub fn network_namespace() -> Result<(), String> {
    let flags = with_userns_if_unprivileged(CloneFlags::CLONE_NEWNET);
    in_child(move || {
        unshare(flags).map_err(|e| format!("unshare({}): {e}", flag_names(flags)))?;
        let dev = fs::read_to_string("/proc/self/net/dev")
            .map_err(|e| format!("read /proc/self/net/dev: {e}"))?;
        // The first two lines of net/dev are headers.
        let ifaces: Vec<&str> = dev
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .map(str::trim)
            .collect();
        if ifaces != ["lo"] {
            return Err(format!(
                "new network namespace has interfaces {ifaces:?}, expected only lo"
            ));
        }
        loopback_up()?;
        // TEST-NET-1 must be unreachable: the namespace has no route out.
        let sock = std::net::UdpSocket::bind("127.0.0.1:0")
            .map_err(|e| format!("bind on loopback: {e}"))?;
        match sock.connect("192.0.2.1:9") {
            Err(_) => Ok(()),
            Ok(()) => Err("new network namespace has a route off the host".to_owned()),
        }
    })
}

/// `ip link set lo up` via SIOCSIFFLAGS.
fn loopback_up() -> Result<(), String> {
    use crate::sys::net::IfStep;
    crate::sys::net::loopback_up_steps(libc::IFF_UP as libc::c_short).map_err(|(step, e)| {
        let e = Errno::from_raw(e.raw_os_error().unwrap_or(0));
        match step {
            IfStep::Socket => format!("socket: {}", std::io::Error::from(e)),
            IfStep::GetFlags => format!("SIOCGIFFLAGS lo: {e}"),
            IfStep::SetFlags => format!("bring lo up: {e}"),
        }
    })
}

/// Can a new cgroup namespace be created (inside a user namespace unless
/// root), hiding the host's cgroup paths?
pub fn cgroup_namespace() -> Result<(), String> {
    let flags = with_userns_if_unprivileged(CloneFlags::CLONE_NEWCGROUP);
    in_child(move || {
        unshare(flags).map_err(|e| format!("unshare({}): {e}", flag_names(flags)))?;
        let cg = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("read /proc/self/cgroup: {e}"))?;
        // Inside the namespace every membership is shown relative to its root.
        match cg.lines().find(|l| !l.ends_with(":/")) {
            None => Ok(()),
            Some(l) => Err(format!("cgroup namespace does not hide the host path: {l}")),
        }
    })
}

fn flag_names(flags: CloneFlags) -> String {
    let names = [
        (CloneFlags::CLONE_NEWUSER, "CLONE_NEWUSER"),
        (CloneFlags::CLONE_NEWNS, "CLONE_NEWNS"),
        (CloneFlags::CLONE_NEWNET, "CLONE_NEWNET"),
        (CloneFlags::CLONE_NEWCGROUP, "CLONE_NEWCGROUP"),
        (CloneFlags::CLONE_NEWUTS, "CLONE_NEWUTS"),
        (CloneFlags::CLONE_NEWIPC, "CLONE_NEWIPC"),
        (CloneFlags::CLONE_NEWPID, "CLONE_NEWPID"),
    ];
    names
        .iter()
        .filter(|(f, _)| flags.contains(*f))
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join("|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_success_and_failure_are_reported() {
        assert_eq!(in_child(|| Ok(())), Ok(()));
        assert_eq!(in_child(|| Err("nope".to_owned())), Err("nope".to_owned()));
        let e = run_in_child(|| Err((7, "seven".to_owned()))).unwrap_err();
        assert_eq!(
            e,
            ChildError {
                code: Some(7),
                reason: "seven".to_owned()
            }
        );
    }

    #[test]
    fn child_panic_stays_in_child() {
        let e = in_child(|| panic!("boom")).unwrap_err();
        assert!(e.contains("panicked") || e.contains("killed"), "{e}");
    }

    #[test]
    fn flag_names_are_readable() {
        assert_eq!(
            flag_names(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET),
            "CLONE_NEWUSER|CLONE_NEWNET"
        );
    }
}
