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
//! What a dead run left is collected by `gc` (see `gc.rs`), which takes
//! nothing in a run directory on trust.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use super::gc::{gc, gc_scaffolds, gc_with, GcReport};

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state directory {path}")]
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

/// A run's id, which also names its run directory and its cgroups:
/// `cb<tag>-<pid>-<nanos><attempt>`, the tag being four hex digits of the
/// state root, the rest lowercase hex. Only [`RunDir::create`] makes new
/// ones; [`RunId::parse`] accepts nothing else, so a name read from disk or
/// from a cgroup directory can never climb out of cbrun's base (`..`, `/`)
/// or name another state root's runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(String);

impl RunId {
    /// `s` when it is a run id of state root `root`.
    pub fn parse(root: &Path, s: &str) -> Result<RunId, String> {
        let prefix = run_prefix(root);
        let rest = s.strip_prefix(&prefix).ok_or_else(|| {
            format!("{s:?} is not a run id of this state root (they start with {prefix})")
        })?;
        let hex = |p: &str| {
            !p.is_empty()
                && p.len() <= 16
                && p.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        match rest.split_once('-') {
            Some((pid, stamp)) if hex(pid) && hex(stamp) => Ok(RunId(s.to_owned())),
            _ => Err(format!(
                "{s:?} is not a run id (expected {prefix}<hex pid>-<hex stamp>)"
            )),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for RunId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<Path> for RunId {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a run records about itself, for `gc` to undo after a crash. gc
/// treats it as a claim to check, never as an order: see `gc.rs`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OwnerRecord {
    pub cbrun_pid: u32,
    /// Name of the run's cgroup under cbrun's base, if one was made (always
    /// the run's id).
    pub cgroup: Option<String>,
    /// Host pid of the sandbox's first process, once known.
    pub init_pid: Option<i32>,
    /// Inode of the sandbox's pid namespace.
    pub pidns: Option<u64>,
    /// Start time of `init_pid` (clock ticks after boot, `/proc/<pid>/stat`
    /// field 22): with the pid, it names exactly one process.
    #[serde(default)]
    pub init_start: Option<u64>,
}

/// A live run's directory; the lock is held for as long as this value lives.
pub struct RunDir {
    pub id: RunId,
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
            let id = RunId(format!(
                "{}{pid:x}-{nanos:08x}{attempt:x}",
                run_prefix(root)
            ));
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
            match crate::sys::at::try_lock_exclusive(owner.as_fd()) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(io_err(&owner_path)(io::Error::from_raw_os_error(
                        libc::EWOULDBLOCK,
                    )))
                }
                Err(e) => return Err(io_err(&owner_path)(e)),
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
        let state = lc.join(self.id.as_str());
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

fn ignore_missing(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_of_this_root_only() {
        let root = Path::new("/run/cbrun");
        let p = run_prefix(root);
        let good = format!("{p}1a2b-0badf00d3");
        assert_eq!(RunId::parse(root, &good).unwrap().as_str(), good);
        let other = Path::new("/dev/shm/cbrun-65534");
        assert_ne!(run_prefix(other), p, "the test needs two distinct tags");
        for bad in [
            format!("{}1a2b-0badf00d3", run_prefix(other)),
            "../something".to_owned(),
            format!("{p}../x"),
            format!("{p}1/../../x"),
            "/sys/fs/cgroup/memory/victim".to_owned(),
            format!("/{p}1-2"),
            "parking".to_owned(),
            format!("{p}1-"),
            format!("{p}-2"),
            format!("{p}1-2-3"),
            format!("{p}1A-2"),
            format!("{p}1-2 "),
            format!("{p}1-{}", "f".repeat(17)),
            String::new(),
        ] {
            assert!(RunId::parse(root, &bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn created_ids_parse() {
        let dir = std::env::temp_dir().join(format!("cbrun-state-test-{}", std::process::id()));
        let rd = RunDir::create(&dir).unwrap();
        assert_eq!(RunId::parse(&dir, &rd.id).unwrap(), rd.id);
        rd.remove().unwrap();
        let _ = fs::remove_dir_all(&dir);
    }
}
