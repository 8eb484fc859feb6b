//! Garbage collection of runs whose cbrun died, trusting nothing on disk.
//!
//! A dead run's directory holds an owner record naming a pid, a pid
//! namespace and a cgroup. Whoever could write that file (a sandbox that got
//! hold of a descriptor to it, any process of the same user) could aim gc,
//! which runs as root or with the user's delegated cgroups, at any process
//! or cgroup. So gc checks every claim against what the kernel says:
//!
//! - a run directory is looked at only when its name is a run id of this
//!   state root ([`RunId::parse`]), it is a real directory owned by the
//!   caller, and its owner file is a regular file owned by the caller;
//! - the cgroup gc empties and removes is the one named after the run
//!   directory under cbrun's own base; a record naming any other cgroup is
//!   a forgery and gc then acts on nothing the record says;
//! - a pid is signalled only once it is proved to be the dead run's init:
//!   pid 1 of a pid namespace below gc's own, with the recorded namespace
//!   and start time, running as one of the host ids this user's sandboxes
//!   map to, and inside the run's cgroup whenever this user has cgroups.
//!   The signal goes through a pidfd opened before the checks, so it cannot
//!   land on a process that took over the pid in between.
//!
//! Every refusal is one line in the report's `errors`, naming the file and
//! the field.

use std::fs::{self, File};
use std::io::{self, Read, Seek};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde::Serialize;

use super::cgroups::{CgroupRoots, SandboxCgroup};
use super::idmap::MappingSource;
use super::run::HostView;
use super::state::{OwnerRecord, RunId};
use crate::sys::proc::{self, PidFd, ProcStat};

/// What one gc pass did.
#[derive(Debug, Default, Serialize)]
pub struct GcReport {
    pub live_runs: usize,
    pub removed_runs: Vec<String>,
    pub removed_scaffolds: bool,
    pub killed_processes: usize,
    pub removed_cgroups: usize,
    /// What gc could not do or refused to do, one line each.
    pub errors: Vec<String>,
}

/// Owner records are a few hundred bytes; more is not a record.
const MAX_RECORD: u64 = 64 << 10;

/// [`gc_with`] for the current user, as [`HostView`] sees the host.
pub fn gc(root: &Path, cgroups: Option<&CgroupRoots>, orphans: bool) -> GcReport {
    gc_with(
        root,
        cgroups,
        orphans,
        &sandbox_uids(&HostView::detect().mapping),
    )
}

/// The uids (as this process's user namespace shows them) that the
/// processes of this user's sandboxes run as: `(first, count)` ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxUids(Vec<(u32, u32)>);

impl SandboxUids {
    pub fn contains(&self, uid: u32) -> bool {
        self.0
            .iter()
            .any(|(first, n)| uid >= *first && uid - first < *n)
    }
}

/// Real root maps sandboxes onto its range; anybody else maps them onto
/// the single id cbrun runs as (inside its own user namespace, once it
/// entered it, that id is 0).
pub fn sandbox_uids(mapping: &MappingSource) -> SandboxUids {
    if !crate::host::userns::is_real_root() {
        return SandboxUids(vec![(nix::unistd::getuid().as_raw(), 1)]);
    }
    SandboxUids(match mapping {
        MappingSource::RootRange { start, len } => vec![(*start, *len)],
        MappingSource::Ranges { uid, sub_uid, .. } => vec![(*uid, 1), *sub_uid],
        MappingSource::SingleId { uid, .. } => vec![(*uid, 1)],
    })
}

/// Remove every run under `root` whose owner is gone: kill what is left of
/// its sandbox, remove its cgroup and its directory. `uids` are the host
/// ids its sandboxes may run as ([`sandbox_uids`]); `orphans` also looks
/// for cgroups whose run directory is gone (a directory scan per hierarchy).
pub fn gc_with(
    root: &Path,
    cgroups: Option<&CgroupRoots>,
    orphans: bool,
    uids: &SandboxUids,
) -> GcReport {
    let mut report = GcReport::default();
    let runs = root.join("runs");
    let me = nix::unistd::geteuid().as_raw();
    match fs::symlink_metadata(&runs) {
        Ok(m) if m.is_dir() && m.uid() == me => {}
        Ok(_) => {
            report.errors.push(format!(
                "{}: not a directory owned by uid {me}; left alone",
                runs.display()
            ));
            return report;
        }
        Err(_) => return report,
    }
    let entries: Vec<fs::DirEntry> = fs::read_dir(&runs)
        .map(|rd| rd.flatten().collect())
        .unwrap_or_default();
    for entry in entries {
        let path = entry.path();
        let id = match entry.file_name().to_str().map(|n| RunId::parse(root, n)) {
            Some(Ok(id)) => id,
            Some(Err(why)) => {
                report
                    .errors
                    .push(format!("{}: {why}; left alone", path.display()));
                continue;
            }
            None => {
                report
                    .errors
                    .push(format!("{}: not a run id; left alone", path.display()));
                continue;
            }
        };
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() && m.uid() == me => {}
            _ => {
                report.errors.push(format!(
                    "{}: not a directory owned by uid {me}; left alone",
                    path.display()
                ));
                continue;
            }
        }
        collect_run(&path, &id, cgroups, uids, &mut report);
    }
    // Cgroups whose run directory is gone: a run makes its directory before
    // its cgroup and removes it after, so these are orphans (left by a
    // crash between the two).
    if let Some(roots) = cgroups.filter(|_| orphans) {
        for name in roots.sandbox_names() {
            let Ok(id) = RunId::parse(root, &name) else {
                continue;
            };
            if fs::symlink_metadata(runs.join(&id)).is_ok() {
                continue;
            }
            remove_cgroup(&roots.existing(&id), roots, &mut report);
        }
    }
    report
}

/// One run directory with a valid name.
fn collect_run(
    path: &Path,
    id: &RunId,
    cgroups: Option<&CgroupRoots>,
    uids: &SandboxUids,
    report: &mut GcReport,
) {
    let owner_path = path.join("owner");
    let owner = match open_owner(&owner_path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Created but never locked, or half-removed: only reap it when
            // old enough that its creator is surely done.
            if is_stale(path) {
                reap_dir(path, report);
            }
            return;
        }
        Err(e) => {
            report
                .errors
                .push(format!("{}: {e}; left alone", owner_path.display()));
            return;
        }
    };
    if !locked(&owner) && !reap_abandoned_setup(&owner_path, &owner, report) {
        report.live_runs += 1;
        return;
    }
    let record = read_record(&owner);
    let cg = cgroups.map(|r| (r, r.existing(id)));
    match &record {
        Err(why) => report
            .errors
            .push(format!("{}: {why}; no process signalled", owner_path.display())),
        Ok(rec) => match rec.cgroup.as_deref() {
            Some(name) if name != id.as_str() => report.errors.push(format!(
                "{}: cgroup: {name:?} is not this run's ({id}); record ignored, no process signalled",
                owner_path.display()
            )),
            _ => {
                if let Some(pid) = rec.init_pid {
                    kill_init(
                        &owner_path,
                        rec,
                        pid,
                        cg.as_ref().map(|(_, c)| c),
                        uids,
                        report,
                    );
                }
            }
        },
    }
    // The run's own cgroup, named after its directory, is cbrun's: what is
    // inside is the sandbox, whatever the record says.
    if let Some((roots, cg)) = &cg {
        remove_cgroup(cg, roots, report);
    }
    reap_dir(path, report);
    drop(owner);
}

/// Takes the owner file's lock if nobody holds it.
fn locked(owner: &File) -> bool {
    crate::sys::fd::flock(owner.as_fd(), libc::LOCK_EX | libc::LOCK_NB).is_ok()
}

/// libcontainer's set-up processes (named `youki:[1:INTER]` and
/// `youki:[2:INIT]` until the sandbox's command is executed) are forks of
/// cbrun and so hold its open owner file, and with it the lock. A cbrun
/// killed while they are set up leaves them blocked for ever on a channel
/// whose other end they hold themselves (and in the init's case before it
/// could ask for a parent-death signal), and the run looks live. When the
/// recorded cbrun is gone, every holder of this very owner file that is
/// such a set-up process is one of them: it is SIGKILLed (through a pidfd
/// opened before its descriptors were looked at) and the lock taken.
/// Nobody but this user (or root) could have opened the owner file.
fn reap_abandoned_setup(owner_path: &Path, owner: &File, report: &mut GcReport) -> bool {
    let Ok(rec) = read_record(owner) else {
        return false;
    };
    // Rewind for the normal path, which reads the record again.
    let _ = (&*owner).seek(io::SeekFrom::Start(0));
    let cbrun = rec.cbrun_pid as i32;
    if cbrun <= 0 || ProcStat::read(cbrun).is_some_and(|s| !s.is_dead()) {
        // The owner (or a process that reused its pid) lives: a live run.
        return false;
    }
    let Ok(meta) = owner.metadata() else {
        return false;
    };
    let holders = proc::holders_of(meta.dev(), meta.ino(), "youki:[");
    if holders.is_empty() {
        return false;
    }
    for (pid, pidfd) in &holders {
        match pidfd.signal(Signal::SIGKILL) {
            Ok(()) => report.killed_processes += 1,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => report.errors.push(format!(
                "{}: set-up process {pid} of a dead cbrun: {e}",
                owner_path.display()
            )),
        }
    }
    // The lock goes with the last descriptor, when the killed exit.
    for _ in 0..100 {
        if locked(owner) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    report.errors.push(format!(
        "{}: still locked after its dead cbrun's set-up processes were killed; left alone",
        owner_path.display()
    ));
    false
}

/// The owner file, without following a planted symlink or blocking on a
/// planted FIFO; it must be a regular file of ours.
fn open_owner(p: &Path) -> io::Result<File> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)?;
    let meta = file.metadata()?;
    let me = nix::unistd::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != me {
        return Err(io::Error::other(format!(
            "not a regular file owned by uid {me}"
        )));
    }
    Ok(file)
}

fn read_record(owner: &File) -> Result<OwnerRecord, String> {
    let mut data = Vec::new();
    owner
        .take(MAX_RECORD + 1)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    if data.len() as u64 > MAX_RECORD {
        return Err(format!("larger than {MAX_RECORD} bytes"));
    }
    if data.is_empty() {
        // A crash between truncating and writing: nothing recorded.
        return Ok(OwnerRecord::default());
    }
    serde_json::from_slice(&data).map_err(|e| format!("not an owner record: {e}"))
}

/// SIGKILL the run's init once it is proved to be that; a refusal is
/// reported unless the process turns out to be exiting anyway.
fn kill_init(
    owner_path: &Path,
    rec: &OwnerRecord,
    pid: i32,
    cg: Option<&SandboxCgroup>,
    uids: &SandboxUids,
    report: &mut GcReport,
) {
    if pid <= 1 {
        report.errors.push(format!(
            "{}: init_pid: {pid} is not a process gc may signal",
            owner_path.display()
        ));
        return;
    }
    // Opened first: whatever the checks below look at, the signal can only
    // reach the process that held `pid` now.
    let pidfd = match PidFd::open(pid) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
        Err(e) => {
            report.errors.push(format!(
                "{}: init_pid: {pid}: pidfd_open: {e}; not signalled",
                owner_path.display()
            ));
            return;
        }
    };
    match prove_init(rec, pid, cg, uids) {
        Ok(Init::Proved) => {
            if pidfd.signal(Signal::SIGKILL).is_ok() {
                report.killed_processes += 1;
            }
        }
        // The recorded process is gone: its pid now names another one.
        Ok(Init::Gone) => {}
        Err(why) => {
            // A sandbox init dying right now (its cbrun just died) loses its
            // namespace files before it becomes a zombie: not a forgery.
            std::thread::sleep(Duration::from_millis(20));
            let exiting = ProcStat::read(pid).is_none_or(|s| s.is_dead());
            if !exiting {
                report.errors.push(format!(
                    "{}: init_pid: {pid} {why}; not signalled",
                    owner_path.display()
                ));
            }
        }
    }
}

/// What the kernel says of a recorded init.
#[derive(Debug, PartialEq, Eq)]
enum Init {
    /// It is the run's init, alive.
    Proved,
    /// The pid is free or names a process started at another time: the
    /// recorded one is gone (pids are reused), nothing to do.
    Gone,
}

/// Whether `pid` is, by everything the kernel says, the recorded init. An
/// error is a claim the kernel contradicts for the very process recorded
/// (same pid, same start time): a forged or broken record.
fn prove_init(
    rec: &OwnerRecord,
    pid: i32,
    cg: Option<&SandboxCgroup>,
    uids: &SandboxUids,
) -> Result<Init, String> {
    let (Some(ns), Some(start)) = (rec.pidns, rec.init_start) else {
        return Err("has no recorded pid namespace and start time".into());
    };
    let Some(stat) = ProcStat::read(pid) else {
        return Ok(Init::Gone);
    };
    if stat.is_dead() || stat.start_time != start {
        return Ok(Init::Gone);
    }
    if proc::own_pidns_inode() == Some(ns) {
        return Err("is recorded in gc's own pid namespace".into());
    }
    match proc::pidns_inode(pid) {
        Some(actual) if actual == ns => {}
        Some(actual) => {
            return Err(format!(
                "lives in pid namespace {actual}, not the recorded {ns}"
            ))
        }
        None => return Err("has no readable pid namespace".into()),
    }
    if !proc::is_pidns_init(pid) {
        return Err("is not pid 1 of a pid namespace".into());
    }
    match proc::real_uid(pid) {
        Some(u) if uids.contains(u) => {}
        other => {
            return Err(format!(
                "runs as uid {other:?}, not a sandbox id of this user"
            ))
        }
    }
    if let Some(cg) = cg {
        if !cg.procs().contains(&pid) {
            return Err("is not in the run's cgroup".into());
        }
    }
    Ok(Init::Proved)
}

/// Kill everything in one of this user's sandbox cgroups and remove it.
fn remove_cgroup(cg: &SandboxCgroup, roots: &CgroupRoots, report: &mut GcReport) {
    if !cg.exists() {
        return;
    }
    report.killed_processes += cg.kill_all();
    match cg.remove(roots) {
        Ok(n) => report.removed_cgroups += n,
        Err(e) => report.errors.push(e.to_string()),
    }
}

/// `cbrun gc` also drops the shared scaffolds, but only when no run is
/// live (a starting run may be about to use one).
pub fn gc_scaffolds(root: &Path, report: &mut GcReport) {
    if report.live_runs > 0 {
        return;
    }
    let dir = root.join("scaffolds");
    match fs::remove_dir_all(&dir) {
        Ok(()) => report.removed_scaffolds = true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => report.errors.push(format!("{}: {e}", dir.display())),
    }
}

/// `remove_dir_all` neither follows symlinks nor leaves the tree.
fn reap_dir(path: &Path, report: &mut GcReport) {
    match fs::remove_dir_all(path) {
        Ok(()) => report.removed_runs.push(
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => report.errors.push(format!("{}: {e}", path.display())),
    }
}

fn is_stale(path: &Path) -> bool {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .map(|age| age.as_secs() > 60)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn uid_ranges() {
        let u = SandboxUids(vec![(0x7000_0000, 65536), (1000, 1)]);
        assert!(u.contains(0x7000_0000) && u.contains(0x7000_ffff) && u.contains(1000));
        assert!(!u.contains(0x7001_0000) && !u.contains(0) && !u.contains(1001));
        assert!(SandboxUids(vec![(u32::MAX, 1)]).contains(u32::MAX));
    }

    fn record_from(bytes: &[u8]) -> Result<OwnerRecord, String> {
        let p = std::env::temp_dir().join(format!(
            "cbrun-gc-record-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        File::create(&p).unwrap().write_all(bytes).unwrap();
        let r = read_record(&File::open(&p).unwrap());
        let _ = fs::remove_file(&p);
        r
    }

    #[test]
    fn records_are_bounded_and_typed() {
        assert!(record_from(b"").unwrap().init_pid.is_none());
        let r = record_from(br#"{"cbrun_pid":1,"cgroup":null,"init_pid":5,"pidns":7}"#).unwrap();
        assert_eq!(
            (r.init_pid, r.pidns, r.init_start),
            (Some(5), Some(7), None)
        );
        assert!(record_from(b"{not json").is_err());
        let mut huge = b"{\"cbrun_pid\":1}".to_vec();
        huge.resize(MAX_RECORD as usize + 10, b' ');
        assert!(record_from(&huge).unwrap_err().contains("larger"));
    }

    /// A process that is pid 1 of a pid namespace of its own (the
    /// grandchild of a forked child that unshared user and pid
    /// namespaces); killed and reaped on drop.
    struct NsInit {
        child: libc::pid_t,
        init: i32,
    }

    impl NsInit {
        fn start() -> NsInit {
            let (r, w) = nix::unistd::pipe().unwrap();
            // SAFETY: the child makes raw calls only and _exits.
            let child = unsafe { libc::fork() };
            assert!(child >= 0);
            if child == 0 {
                // SAFETY: raw calls in the forked, single-threaded child.
                unsafe {
                    if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) != 0 {
                        libc::_exit(3);
                    }
                    let gc = libc::fork();
                    if gc == 0 {
                        libc::pause();
                        libc::_exit(0);
                    }
                    let b = gc.to_ne_bytes();
                    libc::write(w.as_raw_fd(), b.as_ptr().cast(), b.len());
                    libc::waitpid(gc, std::ptr::null_mut(), 0);
                    libc::_exit(0);
                }
            }
            drop(w);
            let mut b = [0u8; 4];
            (&File::from(r))
                .read_exact(&mut b)
                .expect("the child could not make user and pid namespaces");
            let init = i32::from_ne_bytes(b);
            // Wait until it runs in its namespace (before the unshare's
            // fork returns, /proc may not show it there yet).
            for _ in 0..200 {
                if proc::is_pidns_init(init) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            NsInit { child, init }
        }

        fn record(&self) -> OwnerRecord {
            OwnerRecord {
                init_pid: Some(self.init),
                pidns: proc::pidns_inode(self.init),
                init_start: ProcStat::read(self.init).map(|s| s.start_time),
                ..Default::default()
            }
        }
    }

    impl Drop for NsInit {
        fn drop(&mut self) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.init),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.child), None);
        }
    }

    #[test]
    fn a_pid_namespace_init_is_proved_and_killed() {
        let ns = NsInit::start();
        let rec = ns.record();
        let all = SandboxUids(vec![(0, u32::MAX)]);
        assert_eq!(prove_init(&rec, ns.init, None, &all), Ok(Init::Proved));
        // Each fact on its own is checked; another start time is another
        // process (the recorded one is gone).
        let wrong_start = OwnerRecord {
            init_start: rec.init_start.map(|s| s + 1),
            ..rec.clone()
        };
        assert_eq!(
            prove_init(&wrong_start, ns.init, None, &all),
            Ok(Init::Gone)
        );
        let wrong_ns = OwnerRecord {
            pidns: rec.pidns.map(|n| n + 1),
            ..rec.clone()
        };
        assert!(prove_init(&wrong_ns, ns.init, None, &all).is_err());
        let nobody = SandboxUids(vec![(4_000_000_000, 1)]);
        assert!(prove_init(&rec, ns.init, None, &nobody)
            .unwrap_err()
            .contains("uid"));

        // End to end: a dead run directory naming it gets it killed.
        let root = std::env::temp_dir().join(format!("cbrun-gc-e2e-{}", std::process::id()));
        let id = format!("{}1-2", super::super::state::run_prefix(&root));
        let dir = root.join("runs").join(&id);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("owner"), serde_json::to_vec(&rec).unwrap()).unwrap();
        let rep = gc_with(&root, None, false, &all);
        assert_eq!(rep.errors, Vec::<String>::new());
        assert_eq!(rep.killed_processes, 1, "{rep:?}");
        assert_eq!(rep.removed_runs, vec![id]);
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            ProcStat::read(ns.init).is_none_or(|s| s.is_dead())
        });
        assert!(gone, "gc did not kill the proved init");
        let _ = fs::remove_dir_all(&root);
    }

    /// A record naming the calling process itself (its real pid namespace
    /// and start time) proves nothing: gc's own namespace, not an init.
    #[test]
    fn a_host_process_is_never_proved() {
        let me = std::process::id() as i32;
        let rec = OwnerRecord {
            init_pid: Some(me),
            pidns: proc::pidns_inode(me),
            init_start: ProcStat::read(me).map(|s| s.start_time),
            ..Default::default()
        };
        let uids = SandboxUids(vec![(0, u32::MAX)]);
        let why = prove_init(&rec, me, None, &uids).unwrap_err();
        assert!(why.contains("own pid namespace"), "{why}");
        let rec = OwnerRecord {
            pidns: Some(1),
            ..rec
        };
        assert!(prove_init(&rec, me, None, &uids).is_err());
        let rec = OwnerRecord {
            init_start: Some(1),
            ..rec
        };
        assert_eq!(prove_init(&rec, me, None, &uids), Ok(Init::Gone));
    }
}
