//! The last steps inside the sandbox, between libcontainer's setup and the
//! user's command: bring `lo` up, drop every capability (but those an image
//! build's root keeps), tie the sandbox's life to cbrun's, install our
//! seccomp filter, exec.
//!
//! libcontainer ignores a spec's seccomp section without its libseccomp
//! feature, and it leaves `lo` down; both are done here. The spec keeps
//! CAP_NET_ADMIN, CAP_SETPCAP and CAP_SETFCAP only so these steps can run;
//! they are gone before the command starts.
//!
//! This runs in the sandbox's child process, which either execs or exits:
//! there is no caller to return a warning or an error to, so its failures
//! are printed (`eprintln!`) on the sandbox's stderr, where the command's
//! own would go.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use libcontainer::oci_spec::runtime::Spec;
use libcontainer::workload::{Executor, ExecutorError, ExecutorValidationError};

use super::seccomp::SeccompProgram;

/// Exit status the sandbox's init uses when the command cannot be executed
/// (after setup succeeded). Mirrors the shell's conventions.
pub const EXIT_NOT_FOUND: i32 = 127;
pub const EXIT_NOT_EXECUTABLE: i32 = 126;

#[derive(Clone)]
pub struct SandboxExecutor {
    pub seccomp: Option<Arc<SeccompProgram>>,
    /// Bring up `lo` (a fresh network namespace has it down).
    pub lo_up: bool,
    /// Enter a nested user namespace as this (uid, gid) (single-id hosts).
    pub nested_user: Option<(u32, u32)>,
    /// Stay as pid 1 (reaper, signal forwarder) and run the command as pid 2.
    pub init: bool,
    /// `(descriptor in this process, number inside)`: all the sandbox keeps
    /// besides 0, 1 and 2. This process is a fork of cbrun and so holds
    /// every descriptor cbrun had (cgroup directories, its state file,
    /// sockets); none of them may reach the command, or the `--init` pid 1
    /// that stays this very process.
    pub pass_fds: Vec<(std::os::fd::RawFd, std::os::fd::RawFd)>,
    /// Capabilities the command keeps (empty but for image builds).
    pub keep_caps: super::config::CapabilitySet,
}

impl Executor for SandboxExecutor {
    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        // Die with cbrun. Set here, after libcontainer's setuid (which would
        // clear it) and while cbrun is certainly alive: it is blocked
        // waiting for this process to report ready.
        if nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).is_err() {
            return Err(ExecutorValidationError::ArgValidationError(
                "cannot set the parent-death signal".into(),
            ));
        }
        // Let cbrun (same ids outside) open /proc/<init>/ns/* while the
        // sandbox waits to start: the egress proxy listens inside its netns.
        // The command's execve makes it dumpable anyway.
        if nix::sys::prctl::set_dumpable(true).is_err() {
            return Err(ExecutorValidationError::ArgValidationError(
                "cannot make the sandbox's init dumpable".into(),
            ));
        }
        let (args, env) = args_env(spec);
        let Some(cmd) = args.first() else {
            return Err(ExecutorValidationError::ArgValidationError(
                "no command given".into(),
            ));
        };
        match resolve(cmd, &env) {
            Ok(_) => Ok(()),
            Err(why) => Err(ExecutorValidationError::ArgValidationError(why)),
        }
    }

    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        // Past this point libcontainer only logs (and we install no logger):
        // say what went wrong ourselves.
        let err = self.exec_inner(spec).err();
        let msg = err
            .map(|e| e.to_string())
            .unwrap_or_else(|| "exec returned".into());
        eprintln!("cbrun: error: sandbox setup failed inside the sandbox: {msg}");
        std::process::exit(super::outcome::exit::CBRUN_ERROR);
    }
}

impl SandboxExecutor {
    fn exec_inner(&self, spec: &Spec) -> Result<(), ExecutorError> {
        let (args, env) = args_env(spec);
        if self.lo_up {
            loopback_up().map_err(|e| ExecutorError::Other(format!("bringing up lo: {e}")))?;
        }
        if let Some((uid, gid)) = self.nested_user {
            become_user(uid, gid)
                .map_err(|e| ExecutorError::Other(format!("entering --user {uid}:{gid}: {e}")))?;
        }
        drop_capabilities(&self.keep_caps)
            .map_err(|e| ExecutorError::Other(format!("dropping capabilities: {e}")))?;
        if nix::sys::prctl::get_no_new_privs() != Ok(true) {
            return Err(ExecutorError::Other("no_new_privs is not set".into()));
        }
        let path = match resolve(&args[0], &env) {
            Ok(p) => p,
            Err(why) => {
                eprintln!("cbrun: {why}");
                std::process::exit(EXIT_NOT_FOUND);
            }
        };
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| ExecutorError::Other("command path contains NUL".into()))?;
        let c_args: Vec<CString> = args
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| ExecutorError::Other("argument contains NUL".into()))?;
        crate::sys::fd::keep_only(&self.pass_fds)
            .map_err(|e| ExecutorError::Other(format!("closing cbrun's descriptors: {e}")))?;
        if let Some(prog) = &self.seccomp {
            prog.install()
                .map_err(|e| ExecutorError::Other(format!("installing seccomp filter: {e}")))?;
        }
        if self.init {
            super::init::run_as_init(&c_path, &c_args);
        }
        // cbrun blocks its stop-signals; the command must not inherit that.
        let _ = nix::sys::signal::SigSet::empty().thread_set_mask();
        // From here on only execve and exit are needed (both allowed).
        let err = nix::unistd::execv(&c_path, &c_args).unwrap_err();
        eprintln!("cbrun: cannot execute {}: {err}", path.display());
        std::process::exit(if err == nix::errno::Errno::ENOENT {
            EXIT_NOT_FOUND
        } else {
            EXIT_NOT_EXECUTABLE
        });
    }
}

fn args_env(spec: &Spec) -> (Vec<String>, Vec<String>) {
    let process = spec.process().as_ref();
    let args = process
        .and_then(|process| process.args().clone())
        .unwrap_or_default();
    let env = process
        .and_then(|process| process.env().clone())
        .unwrap_or_default();
    (args, env)
}

/// Find the command like execvp would, but say clearly why it is not there.
fn resolve(cmd: &str, env: &[String]) -> Result<PathBuf, String> {
    let is_exec = |p: &Path| {
        nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
            && p.metadata().map(|m| m.is_file()).unwrap_or(false)
    };
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        if !p.exists() {
            return Err(format!("command not found inside the sandbox: {cmd}"));
        }
        if !is_exec(&p) {
            return Err(format!(
                "command is not executable inside the sandbox: {cmd}"
            ));
        }
        return Ok(p);
    }
    let path_var = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    for dir in path_var.split(':').filter(|d| !d.is_empty()) {
        let p = Path::new(dir).join(cmd);
        if is_exec(&p) {
            return Ok(p);
        }
    }
    Err(format!(
        "command not found inside the sandbox: {cmd} (PATH={path_var})"
    ))
}

/// Become `uid:gid` through a user namespace nested in the sandbox's: the
/// one host id the sandbox has becomes `uid` here. The sandbox's other
/// namespaces belong to the outer user namespace, so this process holds no
/// capability over them afterwards.
fn become_user(uid: u32, gid: u32) -> std::io::Result<()> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)?;
    // libcontainer made this process non-dumpable, which leaves its /proc
    // files owned by host root and the maps unwritable. execve resets it
    // anyway.
    nix::sys::prctl::set_dumpable(true)?;
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} 0 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} 0 1"))?;
    Ok(())
}

/// `ip link set lo up`, with one ioctl pair.
fn loopback_up() -> std::io::Result<()> {
    crate::sys::net::loopback_up((libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short)
}

/// Empty all five capability sets but for `keep`, which stays in the
/// bounding, permitted and effective sets (so root keeps it across execve;
/// no_new_privs caps what execve may add at the permitted set). Bounding
/// first: dropping from it needs CAP_SETPCAP, which goes with the
/// effective set last.
fn drop_capabilities(keep: &super::config::CapabilitySet) -> Result<(), caps::errors::CapsError> {
    use caps::CapSet;
    let kept: caps::CapsHashSet = keep.iter().map(caps_capability).collect();
    for cap in caps::all() {
        if !kept.contains(&cap) && caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) {
            caps::drop(None, CapSet::Bounding, cap)?;
        }
    }
    caps::clear(None, CapSet::Ambient)?;
    caps::clear(None, CapSet::Inheritable)?;
    caps::set(None, CapSet::Effective, &kept)?;
    caps::set(None, CapSet::Permitted, &kept)?;
    Ok(())
}

fn caps_capability(c: super::config::Capability) -> caps::Capability {
    use super::config::Capability as C;
    match c {
        C::CapChown => caps::Capability::CAP_CHOWN,
        C::CapDacOverride => caps::Capability::CAP_DAC_OVERRIDE,
        C::CapFowner => caps::Capability::CAP_FOWNER,
        C::CapFsetid => caps::Capability::CAP_FSETID,
        C::CapKill => caps::Capability::CAP_KILL,
        C::CapSetuid => caps::Capability::CAP_SETUID,
        C::CapSetgid => caps::Capability::CAP_SETGID,
    }
}
