//! Neutral copies of what sandboxes only read, so that their bind sources
//! say nothing about the host.
//!
//! A bind mount shows its source's path inside the sandbox, in
//! `/proc/self/mountinfo` (the "root" field: the path within the source's
//! filesystem). Bound from the case folder, the public documents and the
//! hidden tests would show where the case lives (`/home/alice/bench/
//! case042/milestones/final`), and the guard files and the empty folder
//! that hides host paths would show the trial folder. So small read-only
//! inputs are copied first into a directory of their own under cbrun's
//! state root (a tmpfs: `/run/cbrun`, `$XDG_RUNTIME_DIR/cbrun`,
//! `/dev/shm/cbrun-<uid>`), named only by pid and time, and bound from
//! there: inside, mountinfo shows `/cbrun/stage/<pid>-<time>/Full_PRD.md`.
//!
//! What still shows: the folders a sandbox writes (the solve's workspace,
//! `logs/agent` and home; the judge's copy of the workspace and its output
//! folder) are bound from the trial folder, and a bind's source path is
//! the path within its filesystem whatever cbrun does (it would take a
//! filesystem of their own to hide). Inputs over the caps below are bound
//! from where they are, with a warning in the record.
//!
//! Each stage holds a lock while it lives; a stage whose cbrun died is
//! removed by the next one made.

use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::case::Case;
use crate::sys::at::try_lock_exclusive;
use crate::sys::dir::Dir;
use crate::trial::copy::{copy_workspace, CopyError, CopyLimits};

/// A public document bigger than this is bound from the case folder.
pub const MAX_STAGED_FILE: u64 = 16 << 20;

/// Hidden tests bigger than this (data, entries, depth) are bound from the
/// case folder.
pub const STAGED_TESTS: CopyLimits = CopyLimits {
    max_bytes: 64 << 20,
    max_files: 20_000,
    max_depth: 64,
};

/// One stage directory; removed when dropped.
pub struct Stage {
    path: PathBuf,
    parent: Dir,
    name: String,
    /// Held (locked) for the stage's life.
    _lock: fs::File,
}

impl Stage {
    /// A fresh stage under cbrun's state root, as found before cbrun
    /// entered a user namespace of its own (inside it, its uid reads 0 and
    /// `state_root()` would name root's).
    pub fn new() -> io::Result<Stage> {
        Stage::under(&crate::sandbox::run::HostView::detect().state_root)
    }

    /// A fresh stage under `state_root`.
    pub fn under(state_root: &Path) -> io::Result<Stage> {
        let root = state_root.join("stage");
        // Traversable by a sandbox's mapped ids, listable only by us.
        ensure_own_dir(state_root, 0o711)?;
        ensure_own_dir(&root, 0o711)?;
        let parent = Dir::open(&root).map_err(io::Error::other)?;
        sweep(&parent);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let name = format!("{}-{nanos:x}", std::process::id());
        let path = root.join(&name);
        fs::DirBuilder::new().mode(0o711).create(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o711))?;
        // Locked before it takes its name: a `.lock` nobody holds always
        // means a dead stage, to a sweep running in another cbrun.
        let lock = fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(path.join(".lock.new"))?;
        if !try_lock_exclusive(lock.as_fd())? {
            return Err(io::Error::other("a fresh stage's lock is taken"));
        }
        fs::rename(path.join(".lock.new"), path.join(".lock"))?;
        Ok(Stage {
            path,
            parent,
            name,
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A new empty directory `name` in the stage (mode 0755).
    pub fn subdir(&self, name: &str) -> io::Result<PathBuf> {
        let p = self.path.join(name);
        fs::DirBuilder::new().mode(0o755).create(&p)?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755))?;
        Ok(p)
    }

    /// A copy of the file `src` (world-readable), or `None` when it is
    /// bigger than [`MAX_STAGED_FILE`].
    pub fn file(&self, src: &Path, name: &str) -> io::Result<Option<PathBuf>> {
        let parent = src.parent().unwrap_or(Path::new("/"));
        let file = src
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        let got = Dir::open(parent)
            .and_then(|d| d.read_capped(file, MAX_STAGED_FILE))
            .map_err(io::Error::other)?;
        if got.truncated() {
            return Ok(None);
        }
        let dir = Dir::open(&self.path).map_err(io::Error::other)?;
        dir.write_replace(name, &got.bytes, 0o644)
            .map_err(io::Error::other)?;
        Ok(Some(self.path.join(name)))
    }

    /// A copy of the tree `src` (modes kept), or `None` when it exceeds
    /// [`STAGED_TESTS`].
    pub fn tree(&self, src: &Path, name: &str) -> Result<Option<PathBuf>, CopyError> {
        let dst = self.path.join(name);
        match copy_workspace(src, &dst, &STAGED_TESTS) {
            Ok(_) => Ok(Some(dst)),
            Err(
                CopyError::TooLarge { .. }
                | CopyError::TooManyFiles { .. }
                | CopyError::TooDeep { .. },
            ) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = self.parent.remove_tree(&self.name);
    }
}

/// Creates `dir` (and parents) if missing, checks it is ours and a real
/// directory, and gives it `mode`.
fn ensure_own_dir(dir: &Path, mode: u32) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)?;
    let m = fs::symlink_metadata(dir)?;
    if !m.is_dir() || m.uid() != nix::unistd::geteuid().as_raw() {
        return Err(io::Error::other(format!(
            "{} is not a directory owned by the current user",
            dir.display()
        )));
    }
    if m.mode() & 0o7777 != mode {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Removes stages whose lock nobody holds (their cbrun died), and
/// lockless ones older than a minute (died while being made).
fn sweep(parent: &Dir) {
    let Ok((names, _)) = parent.names(4096) else {
        return;
    };
    for n in names {
        let Ok(name) = n.to_str() else { continue };
        let stale = match parent.open_dir(name).and_then(|d| d.open_read(".lock")) {
            Ok((f, _)) => try_lock_exclusive(f.as_fd()).unwrap_or(false),
            Err(_) => parent
                .entry(name)
                .ok()
                .flatten()
                .map(|st| {
                    let age = SystemTime::now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map(|d| d.as_secs() as i64)
                        .unwrap_or(0)
                        - st.st_mtime;
                    age > Duration::from_secs(60).as_secs() as i64
                })
                .unwrap_or(false),
        };
        if stale {
            let _ = parent.remove(name);
        }
    }
}

/// What the solve sandbox binds from a stage.
pub struct SolveInputs {
    pub full_prd: PathBuf,
    pub interface_contract: PathBuf,
    pub hardware_requirements: Option<PathBuf>,
    /// For the package-manager shims.
    pub shims: PathBuf,
    /// An empty folder to hide host paths with.
    pub empty: PathBuf,
    pub warnings: Vec<String>,
    /// Kept alive until the sandboxes are done; `None` when no stage could
    /// be made and everything is bound from where it is.
    pub stage: Option<Stage>,
}

impl SolveInputs {
    /// Stages the case's public documents. Without a stage (the state root
    /// is unusable) the originals are bound and `scratch` holds the rest.
    pub fn prepare(case: &Case, scratch: &Path) -> SolveInputs {
        let mut warnings = Vec::new();
        let stage = match Stage::new() {
            Ok(s) => Some(s),
            Err(e) => {
                warnings.push(format!(
                    "no neutral staging directory ({e}): the solve sandbox's mountinfo shows the case folder's path"
                ));
                None
            }
        };
        let mut staged = |src: &Path, name: &str| -> PathBuf {
            let Some(stage) = &stage else {
                return src.to_path_buf();
            };
            match stage.file(src, name) {
                Ok(Some(p)) => p,
                Ok(None) => {
                    warnings.push(format!(
                        "{name} is over {MAX_STAGED_FILE} bytes: bound from the case folder, whose path the solve sandbox's mountinfo shows"
                    ));
                    src.to_path_buf()
                }
                Err(e) => {
                    warnings.push(format!("staging {name}: {e}: bound from the case folder"));
                    src.to_path_buf()
                }
            }
        };
        let full_prd = staged(&case.public.full_prd, "Full_PRD.md");
        let interface_contract = staged(&case.public.interface_contract, "Interface_Contract.md");
        let hardware_requirements = case
            .public
            .hardware_requirements
            .as_deref()
            .map(|h| staged(h, "Hardware_Requirements.md"));
        let (shims, empty) = scratch_or_stage(&stage, scratch, &mut warnings);
        SolveInputs {
            full_prd,
            interface_contract,
            hardware_requirements,
            shims: shims.join("shims"),
            empty,
            warnings,
            stage,
        }
    }
}

/// What the judge sandbox binds from a stage.
pub struct JudgeInputs {
    /// The hidden tests (a staged copy, or the case's own folder).
    pub tests: PathBuf,
    /// For the judge's Python and Node hooks.
    pub hooks: PathBuf,
    pub empty: PathBuf,
    pub warnings: Vec<String>,
    pub stage: Option<Stage>,
}

impl JudgeInputs {
    /// Stages the hidden tests when they are small. Without a stage the
    /// originals are bound and `scratch` holds the rest.
    pub fn prepare(case: &Case, scratch: &Path) -> JudgeInputs {
        let mut warnings = Vec::new();
        let stage = match Stage::new() {
            Ok(s) => Some(s),
            Err(e) => {
                warnings.push(format!(
                    "no neutral staging directory ({e}): the judge's mountinfo shows the case folder's path"
                ));
                None
            }
        };
        let tests = match &stage {
            None => case.final_dir.clone(),
            Some(s) => match s.tree(&case.final_dir, "final") {
                Ok(Some(p)) => p,
                Ok(None) => {
                    warnings.push(format!(
                        "the hidden tests exceed the staging caps ({} bytes, {} entries, {} levels): bound from the case folder, whose path the judge's mountinfo shows",
                        STAGED_TESTS.max_bytes, STAGED_TESTS.max_files, STAGED_TESTS.max_depth
                    ));
                    case.final_dir.clone()
                }
                Err(e) => {
                    warnings.push(format!(
                        "staging the hidden tests: {e}: bound from the case folder"
                    ));
                    case.final_dir.clone()
                }
            },
        };
        let (hooks, empty) = scratch_or_stage(&stage, scratch, &mut warnings);
        JudgeInputs {
            tests,
            hooks: hooks.join("hooks"),
            empty,
            warnings,
            stage,
        }
    }
}

/// The folder guard files go in, and an empty folder, from the stage when
/// there is one, else from `scratch`.
fn scratch_or_stage(
    stage: &Option<Stage>,
    scratch: &Path,
    warnings: &mut Vec<String>,
) -> (PathBuf, PathBuf) {
    if let Some(s) = stage {
        match s.subdir("empty") {
            Ok(empty) => return (s.path().to_path_buf(), empty),
            Err(e) => warnings.push(format!("staging an empty folder: {e}")),
        }
    }
    (scratch.to_path_buf(), scratch.join("empty"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_private_removed_and_swept() {
        let root = std::env::temp_dir().join(format!("cbrun-stage-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let src = root.join("case-src");
        fs::create_dir_all(src.join("tests/sub")).unwrap();
        fs::write(src.join("doc.md"), "public").unwrap();
        fs::write(src.join("tests/sub/t.py"), "def test(): pass\n").unwrap();
        let s = Stage::under(&root.join("state")).unwrap();
        let p = s.path().to_path_buf();
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o711);
        let f = s.file(&src.join("doc.md"), "doc.md").unwrap().unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "public");
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o777, 0o644);
        let t = s.tree(&src.join("tests"), "final").unwrap().unwrap();
        assert!(t.join("sub/t.py").is_file());
        // A big file is not staged.
        let big = src.join("big.md");
        fs::File::create(&big)
            .unwrap()
            .set_len(MAX_STAGED_FILE + 1)
            .unwrap();
        assert!(s.file(&big, "big.md").unwrap().is_none());
        drop(s);
        assert!(!p.exists());

        // A stage whose owner died (its lock free) goes with the next one.
        let dead = root.join("state/stage/1-dead");
        fs::create_dir_all(&dead).unwrap();
        fs::write(dead.join(".lock"), "").unwrap();
        let s = Stage::under(&root.join("state")).unwrap();
        assert!(!dead.exists());
        // A live one is left alone.
        let s2 = Stage::under(&root.join("state")).unwrap();
        assert!(s.path().exists() && s2.path().exists());
        drop((s, s2));
        fs::remove_dir_all(&root).unwrap();
    }
}
