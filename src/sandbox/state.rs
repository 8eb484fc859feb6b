//! Per-run state on disk, and garbage collection of runs whose cbrun died.
//!
//! Layout under the state root:
//! ```text
//! <root>/runs/<id>/owner      flock'ed by the live cbrun; JSON record
//! <root>/runs/<id>/bundle/    OCI bundle (config.json)
//! <root>/runs/<id>/root/      rootfs scaffold for `--rootfs host`
//! <root>/runs/<id>/lc/        libcontainer's state dir
//! ```
//! The owner file's lock is what tells a live run from a dead one: the kernel
//! drops it when its holder dies, however it dies, and pids may be reused.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cgroups::CgroupRoots;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state directory {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("state directory {0} is not owned by the current user; refusing to use it")]
    NotOwned(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where cbrun keeps its per-run state: `$CBRUN_STATE_DIR`, else a
/// memory-backed directory (`/run/cbrun` for root, `$XDG_RUNTIME_DIR/cbrun`
/// for users), else `/dev/shm/cbrun-<uid>`, else `/tmp/cbrun-<uid>`. State
/// is small and short-lived; on a disk-backed /run every create and unlink
/// would cost journal writes on each sandbox start.
pub fn state_root() -> PathBuf {
    if let Some(p) = std::env::var_os("CBRUN_STATE_DIR").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let uid = nix::unistd::geteuid().as_raw();
    if uid == 0 && is_tmpfs(Path::new("/run")) {
        return PathBuf::from("/run/cbrun");
    }
    if uid != 0 {
        if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
            let x = PathBuf::from(x);
            if fs::metadata(&x).map(|m| m.uid() == uid).unwrap_or(false) {
                return x.join("cbrun");
            }
        }
    }
    if is_tmpfs(Path::new("/dev/shm")) {
        return PathBuf::from(format!("/dev/shm/cbrun-{uid}"));
    }
    PathBuf::from(format!("/tmp/cbrun-{uid}"))
}

fn is_tmpfs(p: &Path) -> bool {
    nix::sys::statfs::statfs(p)
        .map(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
        .unwrap_or(false)
}

/// Create `dir` (and parents) if missing, check it is ours and a real
/// directory, and give it `mode`. The sandbox's mapped root must be able to
/// traverse it, so runs dirs are 0711, not 0700.
fn ensure_dir(dir: &Path, mode: u32) -> Result<(), StateError> {
    match fs::DirBuilder::new().recursive(true).mode(mode).create(dir) {
        Ok(()) => {}
        Err(e) => return Err(io_err(dir)(e)),
    }
    let m = fs::symlink_metadata(dir).map_err(io_err(dir))?;
    let uid = nix::unistd::geteuid().as_raw();
    if !m.is_dir() || m.uid() != uid {
        return Err(StateError::NotOwned(dir.to_path_buf()));
    }
    if m.mode() & 0o7777 != mode {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode)).map_err(io_err(dir))?;
    }
    Ok(())
}

/// Run ids (and so cgroup names) carry a tag of their state root, so that
/// gc never takes the cgroup of a run kept under another state root for an
/// orphan.
pub fn run_prefix(root: &Path) -> String {
    let tag = super::rootfs::fnv1a(root.as_os_str().as_encoded_bytes()) & 0xffff;
    format!("{}{tag:04x}-", super::cgroups::RUN_ID_PREFIX)
}

/// What a run records about itself, for `gc` to undo after a crash.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OwnerRecord {
    pub cbrun_pid: u32,
    /// Name of the run's cgroup under cbrun's base, if one was made.
    pub cgroup: Option<String>,
    /// Host pid of the sandbox's first process, once known.
    pub init_pid: Option<i32>,
    /// Inode of the sandbox's pid namespace, to check `init_pid` was not
    /// reused by an unrelated process.
    pub pidns: Option<u64>,
}

/// A live run's directory; the lock is held for as long as this value lives.
pub struct RunDir {
    pub id: String,
    pub path: PathBuf,
    owner: File,
    pub record: OwnerRecord,
}

impl RunDir {
    /// Make a fresh run directory with a unique id, locked.
    pub fn create(root: &Path) -> Result<Self, StateError> {
        ensure_dir(root, 0o711)?;
        let runs = root.join("runs");
        ensure_dir(&runs, 0o711)?;
        let pid = std::process::id();
        let mut attempt = 0u32;
        loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let id = format!("{}{pid:x}-{nanos:08x}{attempt:x}", run_prefix(root));
            let path = runs.join(&id);
            match fs::DirBuilder::new().mode(0o711).create(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 64 => {
                    attempt += 1;
                    continue;
                }
                Err(e) => return Err(io_err(&path)(e)),
            }
            let owner_path = path.join("owner");
            let owner = OpenOptions::new()
                .create_new(true)
                .write(true)
                .read(true)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC)
                .open(&owner_path)
                .map_err(io_err(&owner_path))?;
            // Exclusive, held until we drop it (or die).
            if unsafe { libc::flock(owner.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                return Err(io_err(&owner_path)(io::Error::last_os_error()));
            }
            let mut rd = RunDir {
                id,
                path,
                owner,
                record: OwnerRecord {
                    cbrun_pid: pid,
                    ..Default::default()
                },
            };
            rd.save()?;
            return Ok(rd);
        }
    }

    /// Remove what a run leaves, by name: a third of the system calls of a
    /// directory walk. Anything unexpected (ENOTEMPTY) falls back to one.
    fn remove_known(&self) -> io::Result<()> {
        let lc = self.path.join("lc");
        let state = lc.join(&self.id);
        for f in ["state.json", "youki_config.json", "notify.sock"] {
            ignore_missing(fs::remove_file(state.join(f)))?;
        }
        ignore_missing(fs::remove_dir(&state))?;
        ignore_missing(fs::remove_dir(&lc))?;
        let bundle = self.path.join("bundle");
        ignore_missing(fs::remove_file(bundle.join("config.json")))?;
        ignore_missing(fs::remove_dir(&bundle))?;
        ignore_missing(fs::remove_file(self.path.join("owner")))?;
        fs::remove_dir(&self.path)
    }

    /// Persist the record (truncate + write; readers only read dead runs).
    pub fn save(&mut self) -> Result<(), StateError> {
        let p = self.path.join("owner");
        let data = serde_json::to_vec(&self.record).unwrap_or_default();
        self.owner.set_len(0).map_err(io_err(&p))?;
        self.owner.write_all_at(&data, 0).map_err(io_err(&p))?;
        Ok(())
    }

    /// Remove the directory (after the sandbox is torn down).
    pub fn remove(self) -> Result<(), StateError> {
        let r = self
            .remove_known()
            .or_else(|_| fs::remove_dir_all(&self.path));
        drop(self.owner);
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&self.path)(e)),
        }
    }
}

/// What one gc pass did.
#[derive(Debug, Default, Serialize)]
pub struct GcReport {
    pub live_runs: usize,
    pub removed_runs: Vec<String>,
    pub removed_scaffolds: bool,
    pub killed_processes: usize,
    pub removed_cgroups: usize,
    pub errors: Vec<String>,
}

/// Remove every run under `root` whose owner is gone: kill what is left of
/// its sandbox, remove its cgroup and its directory.
pub fn gc(root: &Path, cgroups: Option<&CgroupRoots>, orphans: bool) -> GcReport {
    let mut report = GcReport::default();
    let runs = root.join("runs");
    let entries: Vec<fs::DirEntry> = fs::read_dir(&runs)
        .map(|rd| rd.flatten().collect())
        .unwrap_or_default();
    for entry in entries {
        let path = entry.path();
        let owner_path = path.join("owner");
        let owner = match File::open(&owner_path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Created but never locked, or half-removed: only reap it
                // when old enough that its creator is surely done.
                if is_stale(&path) {
                    reap_dir(&path, &mut report);
                }
                continue;
            }
            Err(e) => {
                report.errors.push(format!("{}: {e}", owner_path.display()));
                continue;
            }
        };
        if unsafe { libc::flock(owner.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            report.live_runs += 1;
            continue;
        }
        let record: OwnerRecord = fs::read(&owner_path)
            .ok()
            .and_then(|d| serde_json::from_slice(&d).ok())
            .unwrap_or_default();
        if let (Some(pid), Some(ns)) = (record.init_pid, record.pidns) {
            if pidns_inode(pid) == Some(ns) {
                // Killing the namespace's init kills every process in it.
                if nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::SIGKILL,
                )
                .is_ok()
                {
                    report.killed_processes += 1;
                }
            }
        }
        if let (Some(name), Some(roots)) = (&record.cgroup, cgroups) {
            let cg = roots.existing(name);
            report.killed_processes += cg.kill_all();
            match cg.remove(roots) {
                Ok(n) => report.removed_cgroups += n,
                Err(e) => report.errors.push(e.to_string()),
            }
        }
        reap_dir(&path, &mut report);
        drop(owner);
    }
    // Cgroups whose run directory is gone: a run makes its directory before
    // its cgroup and removes it after, so these are orphans (left by a
    // crash between the two). Only an explicit `cbrun gc` looks: it costs a
    // directory scan per hierarchy.
    if let Some(roots) = cgroups.filter(|_| orphans) {
        let prefix = run_prefix(root);
        for name in roots
            .sandbox_names()
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
        {
            if runs.join(&name).exists() {
                continue;
            }
            let cg = roots.existing(&name);
            report.killed_processes += cg.kill_all();
            match cg.remove(roots) {
                Ok(n) => report.removed_cgroups += n,
                Err(e) => report.errors.push(e.to_string()),
            }
        }
    }
    report
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

/// Inode of `pid`'s pid namespace (for its children), if readable.
pub fn pidns_inode(pid: i32) -> Option<u64> {
    fs::metadata(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

fn ignore_missing(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
