//! `--init`: a minimal pid 1 for long-running sandboxes.
//!
//! Without it the command is pid 1, and orphaned grandchildren become its
//! zombies; a command that never reaps them (most agent CLIs) slowly fills
//! the pids limit. With it, cbrun's own code stays pid 1: it forks the
//! command, reaps every orphan, forwards the signals a shell would pass on,
//! and exits with the command's status (128+N when a signal N killed it).
//! When it exits, the kernel kills whatever is left in the pid namespace,
//! exactly as when the command itself was pid 1.
//!
//! Being a fork of cbrun that never execs, pid 1 still holds a copy of
//! cbrun's memory: its host command line and environment, its heap. Before
//! the command exists, pid 1 overwrites its argument and environment
//! strings and makes itself non-dumpable, so that nothing in the sandbox
//! can read `/proc/1/environ`, `/proc/1/mem`, `/proc/1/fd` or take its
//! descriptors (`pidfd_getfd`): those need CAP_SYS_PTRACE over the host's
//! user namespace once the process is not dumpable. The command gets an
//! ordinary dumpable process back at its execve.
//!
//! It prints its own failures (`eprintln!`) on the sandbox's stderr: it is a
//! process of its own inside the sandbox, with no caller to return them to.

use std::ffi::CString;

use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

/// Signals pid 1 passes on to the command.
const FORWARDED: &[Signal] = &[
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// Fork the command and act as its init; never returns.
/// Called after the seccomp filter is installed: both processes keep it.
pub fn run_as_init(path: &CString, args: &[CString]) -> ! {
    let mut waited = SigSet::empty();
    for s in FORWARDED {
        waited.add(*s);
    }
    waited.add(Signal::SIGCHLD);
    // Blocked before the fork so no signal is lost in between; the child
    // unblocks everything before exec.
    let _ = waited.thread_block();
    if let Err(e) = crate::sys::proc::scrub_cmdline_environ()
        .and_then(|()| crate::sys::proc::set_non_dumpable())
    {
        eprintln!("cbrun: init: hiding cbrun's memory from the sandbox: {e}");
        std::process::exit(super::outcome::exit::CBRUN_ERROR);
    }
    // SAFETY: this init is a fork of cbrun and has a single thread, so no
    // lock can be held by a thread that does not exist in the child; the
    // child only resets its signal mask and execs (or reports and exits).
    let child = match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            let _ = SigSet::empty().thread_set_mask();
            let err = nix::unistd::execv(path, args).unwrap_err();
            eprintln!("cbrun: cannot execute {}: {err}", path.to_string_lossy());
            std::process::exit(if err == nix::errno::Errno::ENOENT {
                super::executor::EXIT_NOT_FOUND
            } else {
                super::executor::EXIT_NOT_EXECUTABLE
            });
        }
        Ok(ForkResult::Parent { child }) => {
            // Shown in `ps` inside the sandbox instead of libcontainer's name.
            let _ = nix::sys::prctl::set_name(c"cbrun-init");
            child
        }
        Err(e) => {
            eprintln!("cbrun: init: fork: {e}");
            std::process::exit(super::outcome::exit::CBRUN_ERROR);
        }
    };
    loop {
        let sig = match waited.wait() {
            Ok(s) => s,
            Err(_) => continue,
        };
        if sig != Signal::SIGCHLD {
            let _ = kill(child, sig);
            continue;
        }
        if let Some(code) = reap(child) {
            std::process::exit(code);
        }
    }
}

/// Reap every exited child; the command's exit status once it is gone.
fn reap(command: Pid) -> Option<i32> {
    let mut result = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => result = Some(code),
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == command => {
                result = Some(128 + sig as i32)
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return result,
            Ok(_) => {}
        }
    }
}
