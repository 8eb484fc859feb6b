//! Running one sandbox from start to teardown.
//!
//! cbrun stays single-threaded throughout: libcontainer forks from this
//! process. Signals that ask cbrun to stop are blocked and read from a
//! signalfd, so an interrupt at any point still leads to the same teardown.

use std::fs::{self, File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use libcontainer::container::builder::ContainerBuilder;
use libcontainer::syscall::syscall::SyscallType;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

use super::cgroupfs_shim;
use super::cgroups::{CgroupRoots, Readback, SandboxCgroup};
use super::config::{NetworkPolicy, SandboxConfig, Stdio};
use super::executor::SandboxExecutor;
use super::idmap::{self, MappingSource};
use super::outcome::{exit, Isolation, Limits, Outcome};
use super::rootfs;
use super::seccomp::{SeccompMode, SeccompProgram};
use super::spec::{self, SpecInputs};
use super::state::{self, RunDir};
use crate::host::cgroup::{CgroupHost, Delegation};
use crate::host::idmap::{IdMapInfo, MappingKind};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Rootfs(#[from] rootfs::RootfsError),
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error(transparent)]
    Spec(#[from] spec::SpecError),
    #[error(transparent)]
    Seccomp(#[from] super::seccomp::SeccompError),
    #[error(transparent)]
    Shim(#[from] super::cgroupfs_shim::ShimError),
    #[error("--require-limits: {0}")]
    LimitsRequired(String),
    #[error("{what} {path}")]
    File {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    CommandNotFound(String),
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    #[error("{0}")]
    Os(String),
}

impl RunError {
    /// The exit status cbrun uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::CommandNotFound(m) if m.contains("not executable") => exit::NOT_EXECUTABLE,
            RunError::CommandNotFound(_) => exit::NOT_FOUND,
            _ => exit::CBRUN_ERROR,
        }
    }
}

/// The host facts a run needs; gathered once per process (after the first
/// run cbrun sits in a private mount namespace where the cgroup tree is
/// hidden, so the handles opened here are what reaches it).
#[derive(Debug, Clone)]
pub struct HostView {
    pub euid: u32,
    pub egid: u32,
    pub cgroups: CgroupHost,
    pub delegation: Delegation,
    /// Open handles on the cgroup hierarchies, when this user may use them.
    pub roots: Option<Arc<CgroupRoots>>,
    pub mapping: MappingSource,
    pub state_root: PathBuf,
}

static HOST_VIEW: OnceLock<HostView> = OnceLock::new();

impl HostView {
    pub fn detect() -> Self {
        HOST_VIEW.get_or_init(Self::probe).clone()
    }

    fn probe() -> Self {
        let euid = nix::unistd::geteuid().as_raw();
        let egid = nix::unistd::getegid().as_raw();
        let cgroups = CgroupHost::detect().unwrap_or(CgroupHost {
            layout: crate::host::cgroup::Layout::Absent,
            v1: Vec::new(),
            unified: None,
        });
        let mut delegation = Delegation::probe(&cgroups, euid);
        let roots = if delegation.usable {
            match CgroupRoots::open(&cgroups, &delegation.base, euid == 0) {
                Ok(r) => Some(Arc::new(r)),
                Err(e) => {
                    delegation.usable = false;
                    delegation.problems.push(e.to_string());
                    None
                }
            }
        } else {
            None
        };
        let mapping = mapping_source(&crate::host::idmap::probe());
        // libcontainer's path-safety layer caches one private procfs handle
        // per process; made here, every forked sandbox process inherits it
        // instead of mounting a procfs of its own. Failure only costs time.
        let _ = pathrs::procfs::ProcfsHandle::new();
        HostView {
            euid,
            egid,
            cgroups,
            delegation,
            roots,
            mapping,
            state_root: state::state_root(),
        }
    }
}

/// Turn the host's mapping facts into what a sandbox maps.
fn mapping_source(info: &IdMapInfo) -> MappingSource {
    match &info.kind {
        MappingKind::RootRange { host_start, len } => MappingSource::RootRange {
            start: *host_start,
            len: (*len).min(65536),
        },
        MappingKind::Ranges {
            uid_ranges,
            gid_ranges,
        } if !uid_ranges.is_empty() && !gid_ranges.is_empty() => MappingSource::Ranges {
            uid: info.uid,
            gid: info.gid,
            sub_uid: uid_ranges[0],
            sub_gid: gid_ranges[0],
        },
        _ => MappingSource::SingleId {
            uid: info.uid,
            gid: info.gid,
        },
    }
}

/// What a caller may do around one sandbox's life.
pub trait RunHooks {
    /// The sandbox exists (its namespaces are up), its command has not
    /// started. An error aborts the run.
    fn created(&mut self, _init: Pid) -> Result<(), String> {
        Ok(())
    }
    /// How often [`RunHooks::stalled`] is asked; `None` never.
    fn watch_interval(&self) -> Option<Duration> {
        None
    }
    /// True when the sandbox should be stopped as stalled (it is then
    /// terminated like a timeout and the outcome says `stalled`).
    fn stalled(&mut self) -> bool {
        false
    }
    /// Descriptors to watch while the sandbox runs: read ends of pipes whose
    /// write ends the sandbox holds. Asked again after every wake-up, so a
    /// hook drops a descriptor once it has seen its end.
    fn watch_fds(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
    /// One of [`RunHooks::watch_fds`] is readable or closed at its far end.
    fn readable(&mut self, _fd: std::os::fd::RawFd) {}
}

/// No hooks.
pub struct NoHooks;
impl RunHooks for NoHooks {}

/// Whether this process has not said `warning` yet: a trial or a
/// validation runs many sandboxes on one host, whose limits warnings are
/// all the same (the outcomes still hold each one).
fn first_time(warning: &str) -> bool {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    SEEN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(warning.to_owned())
}

/// Run one sandbox to completion and tear it down.
pub fn run(cfg: &SandboxConfig, host: &HostView) -> Result<Outcome, RunError> {
    run_with(cfg, host, &mut NoHooks)
}

/// [`run`] with hooks.
pub fn run_with(
    cfg: &SandboxConfig,
    host: &HostView,
    hooks: &mut dyn RunHooks,
) -> Result<Outcome, RunError> {
    let t0 = Instant::now();
    let mut warnings: Vec<String> = Vec::new();

    // Stop-signals are handled through a signalfd from here on.
    let stop_signals = stop_sigset();
    stop_signals
        .thread_block()
        .map_err(|e| RunError::Os(format!("blocking signals: {e}")))?;
    let sfd = SignalFd::with_flags(
        &stop_signals,
        SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK,
    )
    .map_err(|e| RunError::Os(format!("signalfd: {e}")))?;

    // Leftovers of runs whose cbrun died: cheap when there are none.
    state::gc_with(
        &host.state_root,
        host.roots.as_deref(),
        false,
        &super::gc::sandbox_uids(&host.mapping),
    );

    let wants_limits =
        cfg.limits.memory.is_some() || cfg.limits.pids.is_some() || cfg.limits.cpus.is_some();
    let cgroup_ok = host.roots.is_some();
    let why_no_cgroup = (!cgroup_ok).then(|| {
        format!(
            "no writable cgroup for uid {} ({})",
            host.euid,
            host.delegation.problems.join("; ")
        )
    });
    if wants_limits {
        let mut missing = Vec::new();
        if let Some(why) = &why_no_cgroup {
            missing.push(why.clone());
        } else {
            for (name, asked) in [
                ("memory", cfg.limits.memory.is_some()),
                ("pids", cfg.limits.pids.is_some()),
                ("cpu", cfg.limits.cpus.is_some()),
            ] {
                if asked && !host.delegation.controllers.iter().any(|c| c == name) {
                    missing.push(format!("cgroup controller {name} is not available"));
                }
            }
        }
        if !missing.is_empty() {
            if cfg.require_limits {
                return Err(RunError::LimitsRequired(missing.join("; ")));
            }
            for m in missing {
                warnings.push(format!("limits not enforced: {m}"));
            }
        }
    }
    if cfg.seccomp == SeccompMode::Off {
        warnings.push("seccomp is OFF (--seccomp off): every syscall the kernel allows in a user namespace is reachable".into());
    }

    phase("checked", t0);
    let mut rd = RunDir::create(&host.state_root)?;
    let mut watch = Watch {
        sfd: &sfd,
        hooks,
        t0,
    };
    let result = run_in(
        cfg,
        host,
        &mut rd,
        &mut watch,
        why_no_cgroup.as_deref(),
        &mut warnings,
    );
    // Teardown happens in run_in; the directory goes last.
    phase("run_in returned", t0);
    // A cgroup that could not be removed keeps its run directory, so that
    // gc (in this or a later cbrun) can find and finish it.
    let cgroup_left = host
        .roots
        .as_deref()
        .map(|r| r.existing(&rd.id).exists())
        .unwrap_or(false);
    if cgroup_left {
        crate::notice::warning("the sandbox's cgroup is still there; `cbrun gc` will remove it");
    } else {
        let _ = rd.remove();
    }
    phase("run dir removed", t0);
    let _ = stop_signals.thread_unblock();
    result
}

/// What a run reacts to while it waits: stop-signals and the caller's hooks.
struct Watch<'a> {
    sfd: &'a SignalFd,
    hooks: &'a mut dyn RunHooks,
    t0: Instant,
}

fn stop_sigset() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    set
}

fn run_in(
    cfg: &SandboxConfig,
    host: &HostView,
    rd: &mut RunDir,
    watch: &mut Watch<'_>,
    why_no_cgroup: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<Outcome, RunError> {
    let t0 = watch.t0;
    // The sandbox's real cgroup, made while the host tree is still in view.
    let roots = host.roots.as_deref();
    let cg = match roots {
        Some(r) => {
            let cg = r
                .create(&rd.id, &cgroup_controllers(&cfg.limits))
                .map_err(|e| RunError::Setup(format!("cgroup: {e}")))?;
            rd.record.cgroup = Some(rd.id.to_string());
            rd.save()?;
            Some(cg)
        }
        None => None,
    };
    let mut guard = CgroupGuard {
        roots,
        cg: cg.as_ref(),
        inside: false,
    };

    // libcontainer's view of cgroups: private, scratch.
    let shim = cgroupfs_shim::ensure(&host.cgroups)?;
    let lc_rel = shim.libcontainer_path(&rd.id);
    cgroupfs_shim::prepare_run(&host.cgroups, shim, &lc_rel)?;
    let _shim_files = ShimFiles {
        host,
        shim,
        rel: &lc_rel,
    };
    let mut mapping = host.mapping.clone();
    if shim.own_userns {
        // cbrun is now uid 0 of its own user namespace: the sandbox maps
        // into that single id.
        mapping = MappingSource::SingleId { uid: 0, gid: 0 };
    }

    let root = rootfs::prepare(
        &cfg.rootfs,
        &host.state_root.join("scaffolds"),
        &rd.path,
        &cfg.binds,
    )?;
    if let Some(n) = &root.note {
        warnings.push(n.clone());
    }
    // libcontainer reports a bad working directory only as a failed
    // syscall; check it here, against what the sandbox will see.
    if !matches!(cfg.workdir.to_str(), Some("/" | "/tmp" | "/proc" | "/dev"))
        && !root.host_path_of(&cfg.workdir).is_dir()
    {
        return Err(RunError::Setup(format!(
            "--workdir {}: no such directory inside the sandbox",
            cfg.workdir.display()
        )));
    }
    let ids = idmap::plan(&mapping, cfg.user);
    // What the record shows is the mapping onto host ids: inside cbrun's own
    // user namespace the sandbox maps onto that namespace's single id.
    let host_ids = if shim.own_userns {
        idmap::plan(
            &MappingSource::SingleId {
                uid: host.euid,
                gid: host.egid,
            },
            cfg.user,
        )
    } else {
        ids.clone()
    };
    let seccomp = match cfg.seccomp {
        SeccompMode::Default => Some(Arc::new(SeccompProgram::default_profile()?)),
        SeccompMode::Off => None,
    };
    let nofile = clamp_rlimit(
        nix::sys::resource::Resource::RLIMIT_NOFILE,
        cfg.limits.nofile,
    );
    let nproc = clamp_rlimit(nix::sys::resource::Resource::RLIMIT_NPROC, cfg.limits.nproc);
    if nofile < cfg.limits.nofile {
        warnings.push(format!(
            "nofile rlimit lowered to {nofile} (cbrun's own hard limit)"
        ));
    }
    if nproc < cfg.limits.nproc {
        warnings.push(format!(
            "nproc rlimit lowered to {nproc} (cbrun's own hard limit)"
        ));
    }
    let spec = spec::build(&SpecInputs {
        config: cfg,
        root: &root,
        ids: &ids,
        cgroup: Some(lc_rel.clone()),
        nofile,
        nproc,
    })?;
    let bundle = rd.path.join("bundle");
    fs::create_dir(&bundle).map_err(|source| RunError::File {
        what: "bundle",
        path: bundle.clone(),
        source,
    })?;
    let cfg_path = bundle.join("config.json");
    spec.save(&cfg_path)
        .map_err(|e| RunError::Setup(format!("writing {}: {e}", cfg_path.display())))?;

    phase("spec written", t0);
    let mut targets: Vec<i32> = cfg.pass_fds.iter().map(|p| p.target).collect();
    targets.sort_unstable();
    targets.dedup();
    if targets.len() != cfg.pass_fds.len() || targets.first().is_some_and(|t| *t < 3) {
        return Err(RunError::Setup(
            "passed descriptors need distinct numbers of 3 or above".into(),
        ));
    }
    let executor = SandboxExecutor {
        seccomp: seccomp.clone(),
        lo_up: cfg.network == NetworkPolicy::None,
        nested_user: ids.nested,
        init: cfg.init,
        keep_caps: cfg.caps.clone(),
        pass_fds: cfg
            .pass_fds
            .iter()
            .map(|p| (std::os::fd::AsRawFd::as_raw_fd(&*p.fd), p.target))
            .collect(),
    };
    let lc_root = rd.path.join("lc");
    fs::create_dir(&lc_root).map_err(|source| RunError::File {
        what: "state",
        path: lc_root.clone(),
        source,
    })?;
    let mut builder = ContainerBuilder::new(rd.id.to_string(), SyscallType::default())
        .with_root_path(&lc_root)
        .map_err(|e| RunError::Setup(e.to_string()))?
        .with_executor(executor);
    match &cfg.stdout {
        Stdio::File(p) => builder = builder.with_stdout(open_out("--stdout", p, false)?),
        Stdio::Append(p) => builder = builder.with_stdout(open_out("--stdout", p, true)?),
        Stdio::Inherit => {}
    }
    match &cfg.stderr {
        Stdio::File(p) => builder = builder.with_stderr(open_out("--stderr", p, false)?),
        Stdio::Append(p) => builder = builder.with_stderr(open_out("--stderr", p, true)?),
        Stdio::Inherit => {}
    }

    // cbrun steps into the sandbox's cgroup so that what it forks is born
    // there, and steps out once the sandbox exists.
    if let Some(cg) = &cg {
        guard.inside = true;
        cg.join_self()
            .map_err(|e| RunError::Setup(format!("joining cgroup: {e}")))?;
    }
    let built = builder
        .as_init(&bundle)
        .with_systemd(false)
        .with_detach(true)
        .build();
    if let Some(r) = roots {
        r.leave_self()
            .map_err(|e| RunError::Setup(format!("leaving the sandbox cgroup: {e}")))?;
        guard.inside = false;
    }
    let mut container = built.map_err(|e| classify_build_error(&e))?;
    let Some(init) = container.pid() else {
        return Err(RunError::Setup("container has no init pid".into()));
    };
    let init_guard = InitGuard(init);
    // What gc needs to prove, after a crash, that a pid is this sandbox's
    // init: its pid namespace and its start time.
    rd.record.init_pid = Some(init.as_raw());
    rd.record.pidns = crate::sys::proc::pidns_inode(init.as_raw());
    rd.record.init_start = crate::sys::proc::ProcStat::read(init.as_raw()).map(|s| s.start_time);
    let _ = rd.save();

    // Limits go in now, before the command starts; then read them back as
    // the kernel has them, not as we asked.
    let readback = match (&cg, roots) {
        (Some(cg), Some(r)) => {
            cg.apply(r, &cfg.limits)
                .map_err(|e| RunError::Setup(format!("applying limits: {e}")))?;
            Some(cg.readback(r))
        }
        _ => None,
    };
    let via = if host.cgroups.uses_v1() {
        "cgroup v1"
    } else {
        "cgroup v2"
    };
    let limits = Limits::from_readback(
        cg.as_ref().map(|_| host.delegation.base.join(&rd.id)),
        via,
        &cfg.limits,
        readback.as_ref(),
        why_no_cgroup,
        nofile,
        nproc,
    );
    if let Some(rb) = &readback {
        if let Some(problem) = readback_mismatch(cfg, rb) {
            if cfg.require_limits {
                return Err(RunError::LimitsRequired(problem));
            }
            warnings.push(problem);
        }
    }
    for w in warnings.iter().filter(|w| first_time(w)) {
        crate::notice::warning(w);
    }

    watch
        .hooks
        .created(init)
        .map_err(|e| RunError::Setup(format!("preparing the sandbox: {e}")))?;
    let setup_ms = t0.elapsed().as_millis() as u64;
    phase("built", t0);
    container
        .start()
        .map_err(|e| RunError::Setup(format!("starting: {e}")))?;
    let waited = wait_for(
        init,
        cfg,
        watch.sfd,
        cg.as_ref(),
        rd.record.pidns,
        watch.hooks,
    );
    phase("exited", t0);
    let usage = match (&cg, roots) {
        (Some(cg), Some(r)) => Some(cg.usage(r)),
        _ => None,
    };
    // libcontainer's own delete would redo cgroup work cbrun does itself;
    // its state dir goes with the run dir.
    drop(init_guard);
    drop(guard);
    let wall_ms = t0.elapsed().as_millis() as u64;
    phase("torn down", t0);

    let (exit_code, signal) = match waited.status {
        // cbrun's init reports a command killed by signal N as 128+N.
        WaitStatus::Exited(_, c) if cfg.init && (129..=128 + 64).contains(&c) => {
            (Some(c), Some(c - 128))
        }
        WaitStatus::Exited(_, c) => (Some(c), None),
        WaitStatus::Signaled(_, s, _) => (None, Some(s as i32)),
        _ => (None, None),
    };
    let oom_killed = usage.as_ref().map(|u| u.oom_kills > 0).unwrap_or(false) && signal.is_some();
    let cbrun_exit = if waited.timed_out || waited.stalled {
        exit::TIMEOUT
    } else if let Some(sig) = waited.interrupted_by {
        128 + sig
    } else if let Some(c) = exit_code {
        c
    } else if let Some(sig) = signal {
        128 + sig
    } else {
        128 + signal.unwrap_or(9)
    };

    Ok(Outcome {
        id: rd.id.to_string(),
        command: cfg.command.clone(),
        exit_code,
        signal,
        timed_out: waited.timed_out,
        interrupted: waited.interrupted_by.is_some(),
        stalled: waited.stalled,
        oom_killed,
        pids_limit_hit: usage
            .as_ref()
            .map(|u| u.pids_limit_hits > 0)
            .unwrap_or(false),
        wall_ms,
        setup_ms,
        peak_memory_bytes: usage.as_ref().and_then(|u| u.peak_memory_bytes),
        isolation: Isolation {
            namespaces: {
                let mut namespaces = vec!["user", "mount", "pid", "ipc", "uts", "cgroup"];
                if cfg.network == NetworkPolicy::None {
                    namespaces.push("net");
                }
                namespaces
            },
            network: cfg.network,
            loopback_up: cfg.network == NetworkPolicy::None,
            rootfs: cfg.rootfs.describe(),
            root_readonly: !root.writable,
            seccomp: cfg.seccomp,
            seccomp_rules: seccomp.as_ref().map(|s| s.describe()).unwrap_or_default(),
            capabilities: if cfg.caps.is_empty() {
                "none (bounding, effective, permitted, inheritable, ambient all empty)"
            } else {
                "an image build's: root keeps CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETUID, SETGID in its user namespace; no other"
            },
            no_new_privs: true,
            id_mapping: host_ids,
            dies_with_cbrun: true,
            init: cfg.init,
        },
        limits,
        warnings: warnings.clone(),
        cbrun_exit,
    })
}

/// Kills the sandbox's init (and so its pid namespace) when dropped.
struct InitGuard(Pid);

impl Drop for InitGuard {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, Signal::SIGKILL);
        let _ = waitpid(self.0, None);
    }
}

/// The controllers a sandbox's cgroup needs: memory (its limit, the peak
/// and OOM kills are read from it) and pids (its process list is what gets
/// killed) always, cpu only for a CPU limit.
fn cgroup_controllers(limits: &super::config::Limits) -> Vec<&'static str> {
    let mut controllers = vec!["memory", "pids"];
    if limits.cpus.is_some() {
        controllers.push("cpu");
    }
    controllers
}

/// Empties and removes the sandbox's cgroup when dropped, on every path.
struct CgroupGuard<'a> {
    roots: Option<&'a CgroupRoots>,
    cg: Option<&'a SandboxCgroup>,
    /// cbrun itself may still be in the sandbox's cgroup (it steps in to
    /// fork, and out right after).
    inside: bool,
}

impl Drop for CgroupGuard<'_> {
    fn drop(&mut self) {
        if let (Some(r), Some(cg)) = (self.roots, self.cg) {
            if self.inside {
                let _ = r.leave_self();
            }
            cg.kill_all();
            if let Err(e) = cg.remove(r) {
                crate::notice::warning(e);
            }
        }
    }
}

/// Removes libcontainer's scratch cgroup files of this run when dropped.
struct ShimFiles<'a> {
    host: &'a HostView,
    shim: cgroupfs_shim::ShimKind,
    rel: &'a Path,
}

impl Drop for ShimFiles<'_> {
    fn drop(&mut self) {
        cgroupfs_shim::finish_run(&self.host.cgroups, self.shim, self.rel);
    }
}

fn clamp_rlimit(res: nix::sys::resource::Resource, want: u64) -> u64 {
    match nix::sys::resource::getrlimit(res) {
        Ok((_, max)) if max != libc::RLIM_INFINITY => want.min(max),
        _ => want,
    }
}

fn open_out(what: &'static str, p: &Path, append: bool) -> Result<OwnedFd, RunError> {
    let f: File = OpenOptions::new()
        .create(true)
        .write(!append)
        .append(append)
        .truncate(!append)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC)
        .open(p)
        .map_err(|source| RunError::File {
            what,
            path: p.to_path_buf(),
            source,
        })?;
    Ok(OwnedFd::from(f))
}

/// A requested limit the kernel reports differently (beyond page rounding).
fn readback_mismatch(cfg: &SandboxConfig, rb: &Readback) -> Option<String> {
    let mut bad = Vec::new();
    if let Some(m) = cfg.limits.memory {
        match rb.memory_bytes {
            Some(v) if v.abs_diff(m.0) < 65536 => {}
            other => bad.push(format!(
                "memory limit reads back as {other:?}, asked {}",
                m.0
            )),
        }
    }
    if let Some(p) = cfg.limits.pids {
        if rb.pids != Some(p) {
            bad.push(format!("pids limit reads back as {:?}, asked {p}", rb.pids));
        }
    }
    if let Some(c) = cfg.limits.cpus {
        match rb.cpus {
            Some(v) if (v - c.0).abs() < 0.01 => {}
            other => bad.push(format!("cpu limit reads back as {other:?}, asked {}", c.0)),
        }
    }
    (!bad.is_empty()).then(|| bad.join("; "))
}

fn classify_build_error(e: &libcontainer::error::LibcontainerError) -> RunError {
    let mut chain = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        src = s.source();
    }
    // libcontainer appends its own cleanup of the scratch cgroup view,
    // which says nothing about the user's problem.
    if let Some(i) = chain.find(". error during cleanup:") {
        chain.truncate(i);
    }
    if let Some(i) = chain.find("command not found inside the sandbox") {
        return RunError::CommandNotFound(chain[i..].to_owned());
    }
    if let Some(i) = chain.find("command is not executable inside the sandbox") {
        return RunError::CommandNotFound(chain[i..].to_owned());
    }
    RunError::Setup(chain)
}

struct Waited {
    status: WaitStatus,
    timed_out: bool,
    stalled: bool,
    interrupted_by: Option<i32>,
}

/// Wait for the sandbox's init, enforcing the timeout and reacting to
/// stop-signals: SIGTERM to every process, a grace period, then SIGKILL.
fn wait_for(
    init: Pid,
    cfg: &SandboxConfig,
    sfd: &SignalFd,
    cg: Option<&SandboxCgroup>,
    pidns: Option<u64>,
    hooks: &mut dyn RunHooks,
) -> Waited {
    let pidfd = crate::sys::proc::PidFd::open(init.as_raw()).ok();
    let deadline = cfg.timeout.map(|t| Instant::now() + t);
    let watch = hooks.watch_interval();
    let mut next_watch = watch.map(|w| Instant::now() + w);
    let mut timed_out = false;
    let mut stalled = false;
    let mut interrupted_by = None;
    let mut kill_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let next = [
            deadline.filter(|_| kill_at.is_none()),
            next_watch.filter(|_| kill_at.is_none()),
            kill_at,
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout = match next {
            Some(t) if t <= now => PollTimeout::ZERO,
            Some(t) => PollTimeout::try_from((t - now).as_millis().min(60_000) as i32 + 1)
                .unwrap_or(PollTimeout::MAX),
            None => PollTimeout::NONE,
        };
        let extra = hooks.watch_fds();
        let mut fds: Vec<PollFd> = Vec::with_capacity(2 + extra.len());
        fds.push(PollFd::new(sfd.as_fd(), PollFlags::POLLIN));
        fds.extend(extra.iter().map(|fd| PollFd::new(*fd, PollFlags::POLLIN)));
        let timeout = match &pidfd {
            Some(pfd) => {
                fds.push(PollFd::new(pfd.as_fd(), PollFlags::POLLIN));
                timeout
            }
            // No pidfd (very old kernel): a short tick instead.
            None => PollTimeout::from(20u8),
        };
        let _ = poll(&mut fds, timeout);
        let ready: Vec<std::os::fd::RawFd> = extra
            .iter()
            .zip(&fds[1..=extra.len()])
            .filter(|(_, p)| p.revents().is_some_and(|r| !r.is_empty()))
            .map(|(fd, _)| fd.as_raw_fd())
            .collect();
        drop(fds);
        drop(extra);
        for fd in ready {
            hooks.readable(fd);
        }
        match waitpid(init, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(status) => {
                return Waited {
                    status,
                    timed_out,
                    stalled,
                    interrupted_by,
                }
            }
            Err(_) => {
                return Waited {
                    status: WaitStatus::StillAlive,
                    timed_out,
                    stalled,
                    interrupted_by,
                }
            }
        }
        if let Ok(Some(info)) = sfd.read_signal() {
            if interrupted_by.is_none() && !timed_out {
                interrupted_by = Some(info.ssi_signo as i32);
                kill_at = Some(Instant::now() + cfg.kill_grace);
                terminate(init, cg, pidns, Signal::SIGTERM);
            } else {
                // A second request: no more grace.
                kill_at = Some(Instant::now());
            }
        }
        let now = Instant::now();
        if let (Some(w), Some(at)) = (watch, next_watch) {
            if kill_at.is_none() && now >= at {
                next_watch = Some(now + w);
                if hooks.stalled() {
                    stalled = true;
                    kill_at = Some(now + cfg.kill_grace);
                    terminate(init, cg, pidns, Signal::SIGTERM);
                }
            }
        }
        if let Some(d) = deadline {
            if kill_at.is_none() && now >= d {
                timed_out = true;
                kill_at = Some(now + cfg.kill_grace);
                terminate(init, cg, pidns, Signal::SIGTERM);
            }
        }
        if let Some(k) = kill_at {
            if now >= k {
                terminate(init, cg, pidns, Signal::SIGKILL);
                kill_at = Some(now + Duration::from_secs(3600));
            }
        }
    }
}

/// Signal every process of the sandbox. SIGKILL to the namespace's init
/// takes the whole pid namespace with it; SIGTERM has to reach each one
/// (init ignores signals it has no handler for).
fn terminate(init: Pid, cg: Option<&SandboxCgroup>, pidns: Option<u64>, sig: Signal) {
    let _ = nix::sys::signal::kill(init, sig);
    if let Some(cg) = cg {
        cg.signal_all(sig);
    } else if let Some(ns) = pidns {
        for pid in pidns_members(ns) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), sig);
        }
    }
}

/// Processes whose pid namespace is `ns` (when there is no cgroup to ask).
fn pidns_members(ns: u64) -> Vec<i32> {
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::metadata(format!("/proc/{pid}/ns/pid"))
                .map(|m| m.ino() == ns)
                .unwrap_or(false)
        })
        .collect()
}

/// `CBRUN_TIMING=1` prints phase times to stderr (for profiling start-up).
fn phase(name: &str, t0: Instant) {
    if std::env::var_os("CBRUN_TIMING").is_some() {
        crate::notice::timing(format_args!(
            "timing: {name}: {:.2} ms",
            t0.elapsed().as_secs_f64() * 1e3
        ));
    }
}
