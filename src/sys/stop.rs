//! Process-level calls `cbrun run` needs: a stop flag set by a signal
//! handler (the worker notices a signal that arrives between two
//! sandboxes), and the set-up of a worker process between fork and exec
//! (dies with its supervisor, pinned to its slot's CPUs, signal mask
//! cleared).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sched::CpuSet;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal};

/// The last stop-signal received (0: none).
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_stop(sig: libc::c_int) {
    // An atomic store is async-signal-safe.
    STOP.store(sig, Ordering::SeqCst);
}

/// From now on SIGINT, SIGTERM and SIGHUP set the stop flag instead of
/// killing the process. A sandbox run still reads them from its signalfd
/// while it blocks them (see `sandbox::run`); the flag catches those that
/// arrive between sandboxes.
pub fn install_stop_flag() -> io::Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(note_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe; no other handler is replaced that Rust code
        // relies on.
        unsafe { nix::sys::signal::sigaction(sig, &action) }.map_err(io::Error::from)?;
    }
    Ok(())
}

/// The stop-signal received since [`install_stop_flag`], if any.
pub fn stop_signal() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

fn stop_set() -> SigSet {
    let mut s = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        s.add(sig);
    }
    s
}

/// Blocks SIGINT, SIGTERM and SIGHUP on this thread: one that arrives now
/// stays pending, and the next sandbox run (which reads them from a
/// signalfd) stops at once. A sandbox run unblocks them when it ends.
pub fn block_stop_signals() -> io::Result<()> {
    stop_set().thread_block().map_err(io::Error::from)
}

/// Whether a stop-signal is pending (arrived while blocked).
pub fn stop_pending() -> bool {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigpending fills the set it is given; it is only read after
    // a successful call.
    if unsafe { libc::sigpending(set.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: initialised by the successful sigpending above.
    let set = unsafe { set.assume_init() };
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP]
        .iter()
        // SAFETY: a valid, initialised set and a valid signal number.
        .any(|s| unsafe { libc::sigismember(&set, *s) } == 1)
}

/// Sets up a worker between fork and exec: SIGKILL when the process that
/// spawns it (`parent`, the calling thread) dies, so that a supervisor
/// killed with SIGKILL leaves no worker behind (each worker's sandboxes
/// die with it in turn); pinned to `cpus` when given; an empty signal
/// mask (the supervisor blocks the signals it reads from a signalfd).
pub fn worker_setup(cmd: &mut Command, parent: libc::pid_t, cpus: Option<CpuSet>) {
    let setup = move || -> io::Result<()> {
        // SAFETY: prctl with integer arguments; async-signal-safe.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The parent may have died before the prctl took effect.
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } != parent {
            return Err(io::Error::other("the supervisor is gone"));
        }
        if let Some(set) = &cpus {
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), set)
                .map_err(io::Error::from)?;
        }
        nix::sys::signal::sigprocmask(
            nix::sys::signal::SigmaskHow::SIG_SETMASK,
            Some(&SigSet::empty()),
            None,
        )
        .map_err(io::Error::from)
    };
    // SAFETY: the closure makes only async-signal-safe system calls (prctl,
    // getppid, sched_setaffinity, sigprocmask) and allocates nothing but
    // on its error paths, which std reports to the parent.
    unsafe {
        cmd.pre_exec(setup);
    }
}

/// In a worker that no supervisor of cbrun's spawned (a Slurm task, a
/// hand-run worker): SIGTERM, which interrupts the trial cleanly, when the
/// parent dies. A parent-death signal already set (a local supervisor's
/// SIGKILL) is kept. Returns whether the parent is already gone (the
/// process was reparented before the call took effect).
pub fn die_with_parent_gently() -> io::Result<bool> {
    let parent = nix::unistd::getppid();
    let mut cur: libc::c_int = 0;
    // SAFETY: PR_GET_PDEATHSIG writes one int through the valid pointer.
    if unsafe {
        libc::prctl(
            libc::PR_GET_PDEATHSIG,
            &mut cur as *mut libc::c_int,
            0,
            0,
            0,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    if cur == 0 {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(nix::unistd::getppid() != parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_sets_the_flag_instead_of_killing() {
        install_stop_flag().unwrap();
        assert_eq!(stop_signal(), None);
        nix::sys::signal::raise(Signal::SIGHUP).unwrap();
        assert_eq!(stop_signal(), Some(libc::SIGHUP));
        STOP.store(0, Ordering::SeqCst);
        // Blocked, it stays pending for a signalfd to read.
        block_stop_signals().unwrap();
        assert!(!stop_pending());
        nix::sys::signal::raise(Signal::SIGTERM).unwrap();
        assert!(stop_pending());
        assert_eq!(stop_signal(), None);
        // Unblocked, the handler takes it.
        stop_set().thread_unblock().unwrap();
        assert!(!stop_pending());
        assert_eq!(stop_signal(), Some(libc::SIGTERM));
        STOP.store(0, Ordering::SeqCst);
    }

    #[test]
    fn a_worker_is_pinned_and_dies_with_its_parent() {
        let mut one = CpuSet::new();
        let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
        let first = (0..CpuSet::count()).find(|c| allowed.is_set(*c).unwrap_or(false));
        one.set(first.unwrap()).unwrap();
        let mut cmd = Command::new("/bin/sh");
        cmd.args([
            "-c",
            "grep -E '^(Cpus_allowed_list|SigBlk)' /proc/self/status",
        ]);
        // SAFETY: getpid cannot fail.
        worker_setup(&mut cmd, unsafe { libc::getpid() }, Some(one));
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("Cpus_allowed_list:\t{}\n", first.unwrap())),
            "{text}"
        );
        assert!(text.contains("SigBlk:\t0000000000000000"), "{text}");
        // A wrong parent: the spawn fails rather than leave an orphan.
        let mut cmd = Command::new("/bin/true");
        worker_setup(&mut cmd, 1, None);
        assert!(cmd.status().is_err());
    }
}
