//! Copying an agent's workspace, which is hostile input: for the judge after
//! the solve sandbox, and for `replay:DIR`.
//!
//! The walk is fd-based: every entry is reached with `*at` calls from an
//! already-open parent directory and opened with `O_NOFOLLOW`, so no symlink
//! in the source is ever followed, not even one swapped in mid-copy.
//! Symlinks are recreated as text, hard links as hard links, special files
//! are dropped and listed. Permission bits and times are kept; setuid, setgid
//! and sticky bits are not. Files keep their holes (only the ranges the
//! kernel reports as data are read and counted against the size cap), so a
//! sparse 10 GiB file costs what it holds. Content size, entry count and
//! depth are capped. On any error the partial copy is removed.
//!
//! Paths in errors are relative to the copied root and quoted
//! ([`crate::fsutil::quote_path`]): an agent's file name cannot add lines
//! or escape sequences to a message.

use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::fsutil::quote_path;
use crate::sys::at::{
    chown_at_nofollow, cpath, fchmod, fchown, fstat, futimens, link_at, lstat_at, mkdir_at,
    mkdir_path, open_at, open_path, read_dir_names, same_inode, symlink_at, timespec as ts,
    utimens_at_nofollow,
};
use crate::sys::dir::{Blame, Dir};
use crate::sys::sparse::{copy_sparse, SparseError};

/// Bounds on what a copy may hold; exceeding any is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyLimits {
    /// Sum of regular-file data: the bytes in the ranges the kernel
    /// reports as data (holes are neither read nor counted; hard-linked
    /// content counts once).
    pub max_bytes: u64,
    /// Entries of any kind below the root (files, links, dirs, dropped
    /// specials): an empty-directory bomb costs as much as a file bomb.
    pub max_files: u64,
    /// Path components below the root (`a/b` is depth 2). Also bounds
    /// recursion: the copy holds two fds per level.
    pub max_depth: u32,
}

impl Default for CopyLimits {
    fn default() -> Self {
        CopyLimits {
            max_bytes: 2 << 30,
            max_files: 200_000,
            max_depth: 64,
        }
    }
}

/// What a copy held. Counts are of entries below the root.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CopyReport {
    /// Regular files copied (first link of each inode).
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// Extra links to an already-copied inode.
    pub hardlinks: u64,
    /// Regular-file data bytes read (holes left out).
    pub bytes: u64,
    /// Regular-file sizes as `ls` shows them (holes included).
    pub apparent_bytes: u64,
    /// Files whose copy kept holes (fewer data bytes than their size).
    pub sparse_files: u64,
    /// FIFOs, sockets and devices left out (paths relative to the root).
    pub dropped_special: Vec<PathBuf>,
}

/// Owner given to every entry of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    pub uid: u32,
    pub gid: u32,
}

/// Why a copy failed. Paths are relative to the copied root (`.` is the
/// root itself), except for the root-level errors that name `src` / `dst`.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(
        "the workspace holds more than {limit} bytes of file content (limit passed at {})", shown(.path)
    )]
    TooLarge { limit: u64, path: PathBuf },
    #[error("the workspace holds more than {limit} entries (limit passed at {})", shown(.path))]
    TooManyFiles { limit: u64, path: PathBuf },
    #[error("the workspace is nested more than {limit} levels deep at {}", shown(.path))]
    TooDeep { limit: u32, path: PathBuf },
    #[error("{} changed while being copied (is something still writing to the workspace?)", shown(.path))]
    Changed { path: PathBuf },
    #[error("{} is not a directory (symlinks are not followed)", shown(.path))]
    NotADirectory { path: PathBuf },
    #[error("destination {} already exists", shown(.path))]
    DestExists { path: PathBuf },
    #[error("{op} {}: {err}", shown(.path))]
    Io {
        op: &'static str,
        path: PathBuf,
        err: io::Error,
    },
    #[error("{cause}; removing the partial copy {} also failed: {err}", shown(.path))]
    Cleanup {
        path: PathBuf,
        err: io::Error,
        cause: Box<CopyError>,
    },
}

impl CopyError {
    /// Who caused it when the source is a workspace a sandbox wrote: the
    /// tree's shape, size and entries are the agent's doing; a failure to
    /// write the copy or remove it is the host's.
    pub fn blame(&self) -> Blame {
        match self {
            CopyError::Io { err, .. } => crate::sys::dir::blame_for(true, err),
            CopyError::Cleanup { .. } | CopyError::DestExists { .. } => Blame::Host,
            _ => Blame::Agent,
        }
    }
}

/// A path of a copied tree, as messages show it: relative, `.` for the
/// root, quoted.
fn shown(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        quote_path(rel)
    }
}

/// Deepest tree `chown_tree` walks (one fd per level).
const CHOWN_MAX_DEPTH: u32 = 512;
/// Deeper directories are not looked into by `tree_fingerprint`.
const FINGERPRINT_MAX_DEPTH: u32 = 256;

/// Copies the tree at `src` to `dst` (which must not exist; its parent
/// must). See the module docs for what is kept.
pub fn copy_workspace(
    src: &Path,
    dst: &Path,
    limits: &CopyLimits,
) -> Result<CopyReport, CopyError> {
    copy_workspace_owned(src, dst, limits, None)
}

/// `copy_workspace`, and with `owner` every created entry (symlinks
/// included) is chowned to it; needs CAP_CHOWN.
pub fn copy_workspace_owned(
    src: &Path,
    dst: &Path,
    limits: &CopyLimits,
    owner: Option<Ownership>,
) -> Result<CopyReport, CopyError> {
    // The root path is the caller's, but the root itself is refused if it is
    // a symlink, like every other entry (callers canonicalise user paths).
    let src_fd = open_path(src, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW).map_err(
        |e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => CopyError::NotADirectory {
                path: src.to_owned(),
            },
            _ => CopyError::Io {
                op: "opening",
                path: src.to_owned(),
                err: e,
            },
        },
    )?;
    copy_from_fd(src_fd, src, dst, limits, owner)
}

fn copy_from_fd(
    src_fd: OwnedFd,
    src: &Path,
    dst: &Path,
    limits: &CopyLimits,
    owner: Option<Ownership>,
) -> Result<CopyReport, CopyError> {
    let src_st = fstat(src_fd.as_fd()).map_err(|e| CopyError::Io {
        op: "stat",
        path: src.to_owned(),
        err: e,
    })?;
    // 0700 while filling; the source root's mode is applied at the end.
    if let Err(e) = mkdir_path(dst, 0o700) {
        return Err(match e.kind() {
            io::ErrorKind::AlreadyExists => CopyError::DestExists {
                path: dst.to_owned(),
            },
            _ => CopyError::Io {
                op: "creating",
                path: dst.to_owned(),
                err: e,
            },
        });
    }
    match fill(&src_fd, &src_st, dst, limits, owner) {
        Ok(report) => Ok(report),
        Err(cause) => match remove_partial(dst) {
            Ok(()) => Err(cause),
            Err(err) => Err(CopyError::Cleanup {
                path: dst.to_owned(),
                err,
                cause: Box::new(cause),
            }),
        },
    }
}

fn fill(
    src_fd: &OwnedFd,
    src_st: &libc::stat,
    dst: &Path,
    limits: &CopyLimits,
    owner: Option<Ownership>,
) -> Result<CopyReport, CopyError> {
    let dst_fd =
        open_path(dst, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW).map_err(|e| {
            CopyError::Io {
                op: "opening",
                path: dst.to_owned(),
                err: e,
            }
        })?;
    let mut c = Copier {
        limits,
        owner,
        report: CopyReport::default(),
        entries: 0,
        first_links: HashMap::new(),
        dst_root: dst_fd.try_clone().map_err(|e| CopyError::Io {
            op: "opening",
            path: dst.to_owned(),
            err: e,
        })?,
    };
    let root = Path::new("");
    c.copy_dir(src_fd.as_fd(), dst_fd.as_fd(), root, 0)?;
    c.finish(dst_fd.as_fd(), src_st, root)?;
    Ok(c.report)
}

struct Copier<'a> {
    limits: &'a CopyLimits,
    owner: Option<Ownership>,
    report: CopyReport,
    entries: u64,
    /// (dev, ino) of multiply-linked source files -> relative path of their
    /// copy, the target for later links.
    first_links: HashMap<(libc::dev_t, libc::ino_t), PathBuf>,
    dst_root: OwnedFd,
}

impl Copier<'_> {
    fn copy_dir(
        &mut self,
        src: BorrowedFd,
        dst: BorrowedFd,
        rel: &Path,
        depth: u32,
    ) -> Result<(), CopyError> {
        // Listing stops one past the entry budget so a huge directory costs
        // no more memory than the limit allows.
        let budget = self
            .limits
            .max_files
            .saturating_sub(self.entries)
            .saturating_add(1);
        let (mut names, truncated) =
            read_dir_names(src, usize::try_from(budget).unwrap_or(usize::MAX))
                .map_err(|e| src_err("reading directory", rel, e))?;
        if truncated {
            return Err(CopyError::TooManyFiles {
                limit: self.limits.max_files,
                path: rel.to_owned(),
            });
        }
        // Sorted: the same tree always copies the same way (which link is
        // "first", which path an error names).
        names.sort_unstable();
        for name in names {
            let child = rel.join(OsStr::from_bytes(name.to_bytes()));
            self.entries += 1;
            if self.entries > self.limits.max_files {
                return Err(CopyError::TooManyFiles {
                    limit: self.limits.max_files,
                    path: child,
                });
            }
            if depth + 1 > self.limits.max_depth {
                return Err(CopyError::TooDeep {
                    limit: self.limits.max_depth,
                    path: child,
                });
            }
            let st = lstat_at(src, &name).map_err(|e| src_err("stat", &child, e))?;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => self.copy_subdir(src, dst, &name, &st, &child, depth + 1)?,
                libc::S_IFREG => self.copy_file(src, dst, &name, &st, &child)?,
                libc::S_IFLNK => self.copy_symlink(src, dst, &name, &st, &child)?,
                _ => self.report.dropped_special.push(child),
            }
        }
        Ok(())
    }

    fn copy_subdir(
        &mut self,
        src: BorrowedFd,
        dst: BorrowedFd,
        name: &CStr,
        st: &libc::stat,
        rel: &Path,
        depth: u32,
    ) -> Result<(), CopyError> {
        let sub = open_at(
            src,
            name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| src_err("opening", rel, e))?;
        let sub_st = fstat(sub.as_fd()).map_err(|e| io_err("stat", rel, e))?;
        if !same_inode(st, &sub_st) {
            return Err(CopyError::Changed {
                path: rel.to_owned(),
            });
        }
        mkdir_at(dst, name, 0o700).map_err(|e| io_err("creating directory", rel, e))?;
        let dsub = open_at(
            dst,
            name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| io_err("opening the copy of", rel, e))?;
        self.report.dirs += 1;
        self.copy_dir(sub.as_fd(), dsub.as_fd(), rel, depth)?;
        // After the contents: adding entries would move the mtime, and a
        // read-only mode would stop the filling.
        self.finish(dsub.as_fd(), &sub_st, rel)
    }

    fn copy_file(
        &mut self,
        src: BorrowedFd,
        dst: BorrowedFd,
        name: &CStr,
        st: &libc::stat,
        rel: &Path,
    ) -> Result<(), CopyError> {
        let key = (st.st_dev, st.st_ino);
        if st.st_nlink > 1 {
            if let Some(first) = self.first_links.get(&key) {
                let first = cpath(first.as_os_str()).map_err(|e| io_err("linking", rel, e))?;
                link_at(self.dst_root.as_fd(), &first, dst, name)
                    .map_err(|e| io_err("linking", rel, e))?;
                self.report.hardlinks += 1;
                return Ok(());
            }
        }
        // TOCTOU policy: the tree should be quiescent (the solve sandbox is
        // gone), so an entry that vanished or was swapped between the lstat
        // and the open is an error (`Changed`), not skipped: a copy mixing
        // two states would be graded as if it were the agent's work.
        // O_NONBLOCK: opening a FIFO swapped in must not hang.
        let sfd = open_at(
            src,
            name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        )
        .map_err(|e| src_err("opening", rel, e))?;
        let fst = fstat(sfd.as_fd()).map_err(|e| io_err("stat", rel, e))?;
        if fst.st_mode & libc::S_IFMT != libc::S_IFREG || !same_inode(st, &fst) {
            return Err(CopyError::Changed {
                path: rel.to_owned(),
            });
        }
        let size = fst.st_size.max(0) as u64;
        let too_large = || CopyError::TooLarge {
            limit: self.limits.max_bytes,
            path: rel.to_owned(),
        };
        let budget = self.limits.max_bytes.saturating_sub(self.report.bytes);
        // Allocated blocks bound the data from above (plus a block of
        // slack for filesystems that keep small files inline).
        if (fst.st_blocks.max(0) as u64).saturating_mul(512) > budget.saturating_add(1 << 16) {
            return Err(too_large());
        }
        let dfd = open_at(
            dst,
            name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            0o600,
        )
        .map_err(|e| io_err("creating", rel, e))?;
        let data = match copy_sparse(sfd.as_fd(), dfd.as_fd(), size, budget) {
            Ok(d) => d,
            Err(SparseError::OverBudget) => return Err(too_large()),
            Err(SparseError::Shrank) => {
                return Err(CopyError::Changed {
                    path: rel.to_owned(),
                })
            }
            Err(SparseError::Io(e)) => return Err(io_err("copying", rel, e)),
        };
        // A file still growing (or rewritten) is not what was judged.
        let after = fstat(sfd.as_fd()).map_err(|e| io_err("stat", rel, e))?;
        if after.st_size != fst.st_size || mtime_ns(&after) != mtime_ns(&fst) {
            return Err(CopyError::Changed {
                path: rel.to_owned(),
            });
        }
        self.report.bytes += data;
        self.report.apparent_bytes = self.report.apparent_bytes.saturating_add(size);
        if data < size {
            self.report.sparse_files += 1;
        }
        self.report.files += 1;
        self.finish(dfd.as_fd(), &fst, rel)?;
        if fst.st_nlink > 1 {
            self.first_links.insert(key, rel.to_owned());
        }
        Ok(())
    }

    fn copy_symlink(
        &mut self,
        src: BorrowedFd,
        dst: BorrowedFd,
        name: &CStr,
        st: &libc::stat,
        rel: &Path,
    ) -> Result<(), CopyError> {
        // The target is only text here; the judge resolves it inside its
        // own sandbox.
        let target = readlink_at(src, name).map_err(|e| match e.raw_os_error() {
            // EINVAL: no longer a symlink.
            Some(libc::EINVAL) => CopyError::Changed {
                path: rel.to_owned(),
            },
            _ => src_err("reading symlink", rel, e),
        })?;
        symlink_at(&target, dst, name).map_err(|e| io_err("creating symlink", rel, e))?;
        if let Some(o) = self.owner {
            chown_at_nofollow(dst, name, o.uid, o.gid).map_err(|e| io_err("chown", rel, e))?;
        }
        let times = [
            ts(st.st_atime, st.st_atime_nsec),
            ts(st.st_mtime, st.st_mtime_nsec),
        ];
        utimens_at_nofollow(dst, name, &times).map_err(|e| io_err("setting times of", rel, e))?;
        self.report.symlinks += 1;
        Ok(())
    }

    /// Owner, permission bits (no setuid/setgid/sticky) and times of a
    /// created file or directory. Chown first: it would clear mode bits.
    fn finish(&self, fd: BorrowedFd, st: &libc::stat, rel: &Path) -> Result<(), CopyError> {
        if let Some(o) = self.owner {
            fchown(fd, o.uid, o.gid).map_err(|e| io_err("chown", rel, e))?;
        }
        fchmod(fd, st.st_mode & 0o777).map_err(|e| io_err("chmod", rel, e))?;
        let times = [
            ts(st.st_atime, st.st_atime_nsec),
            ts(st.st_mtime, st.st_mtime_nsec),
        ];
        futimens(fd, &times).map_err(|e| io_err("setting times of", rel, e))?;
        Ok(())
    }
}

/// Chowns `root` and everything below it, never following symlinks
/// (symlinks themselves are chowned). Needs CAP_CHOWN.
pub fn chown_tree(root: &Path, owner: Ownership) -> Result<(), CopyError> {
    let fd = open_path(root, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW).map_err(
        |e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => CopyError::NotADirectory {
                path: root.to_owned(),
            },
            _ => CopyError::Io {
                op: "opening",
                path: root.to_owned(),
                err: e,
            },
        },
    )?;
    fchown(fd.as_fd(), owner.uid, owner.gid).map_err(|e| CopyError::Io {
        op: "chown",
        path: root.to_owned(),
        err: e,
    })?;
    chown_dir(fd.as_fd(), Path::new(""), 0, owner)
}

fn chown_dir(dir: BorrowedFd, rel: &Path, depth: u32, owner: Ownership) -> Result<(), CopyError> {
    let (names, _) =
        read_dir_names(dir, usize::MAX).map_err(|e| io_err("reading directory", rel, e))?;
    for name in names {
        let child = rel.join(OsStr::from_bytes(name.to_bytes()));
        chown_at_nofollow(dir, &name, owner.uid, owner.gid)
            .map_err(|e| io_err("chown", &child, e))?;
        let st = lstat_at(dir, &name).map_err(|e| io_err("stat", &child, e))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            continue;
        }
        if depth + 1 >= CHOWN_MAX_DEPTH {
            return Err(CopyError::TooDeep {
                limit: CHOWN_MAX_DEPTH,
                path: child,
            });
        }
        let sub = open_at(
            dir,
            &name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| io_err("opening", &child, e))?;
        chown_dir(sub.as_fd(), &child, depth + 1, owner)?;
    }
    Ok(())
}

/// A cheap summary of the tree at `root` for a stall watchdog: entries
/// below the root, regular-file bytes, newest mtime (ns since the epoch,
/// root included). `root` may be a regular file too (a log the sandbox's
/// output goes to): then its size and mtime. Symlinks are not followed;
/// entries that vanish or cannot be read during the walk are skipped, only
/// an unreadable root is an error. Directories deeper than 256 levels are
/// not looked into, and the walk stops counting after a million entries.
pub fn tree_fingerprint(root: &Path) -> io::Result<(u64, u64, i128)> {
    let fd = match open_path(root, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            let m = std::fs::symlink_metadata(root)?;
            use std::os::unix::fs::MetadataExt;
            return Ok((
                0,
                m.size(),
                m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ));
        }
        Err(e) => return Err(e),
    };
    let st = fstat(fd.as_fd())?;
    let mut fp = (0u64, 0u64, mtime_ns(&st));
    fingerprint_dir(fd.as_fd(), 0, &mut fp);
    Ok(fp)
}

const FINGERPRINT_MAX_ENTRIES: u64 = 1_000_000;

fn fingerprint_dir(dir: BorrowedFd, depth: u32, fp: &mut (u64, u64, i128)) {
    let room = FINGERPRINT_MAX_ENTRIES.saturating_sub(fp.0);
    let Ok((names, _)) = read_dir_names(dir, usize::try_from(room).unwrap_or(usize::MAX)) else {
        return;
    };
    for name in names {
        let Ok(st) = lstat_at(dir, &name) else {
            continue;
        };
        fp.0 += 1;
        fp.2 = fp.2.max(mtime_ns(&st));
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => fp.1 = fp.1.saturating_add(st.st_size as u64),
            libc::S_IFDIR
                if depth + 1 < FINGERPRINT_MAX_DEPTH && fp.0 < FINGERPRINT_MAX_ENTRIES =>
            {
                // O_NOFOLLOW: a directory swapped for a symlink is not entered.
                if let Ok(sub) = open_at(
                    dir,
                    &name,
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    0,
                ) {
                    fingerprint_dir(sub.as_fd(), depth + 1, fp);
                }
            }
            _ => {}
        }
    }
}

/// Removes a partial copy, whatever its depth and modes (our copy may
/// hold directories whose copied mode denies their owner write or search).
fn remove_partial(dst: &Path) -> io::Result<()> {
    let parent = dst
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dst
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    match Dir::open(parent).and_then(|d| d.remove(name)) {
        Ok(_) => Ok(()),
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

fn io_err(op: &'static str, rel: &Path, err: io::Error) -> CopyError {
    CopyError::Io {
        op,
        path: rel.to_owned(),
        err,
    }
}

/// A source-side failure: "gone" or "not what lstat said" means the tree
/// changed under us.
fn src_err(op: &'static str, rel: &Path, err: io::Error) -> CopyError {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP) => CopyError::Changed {
            path: rel.to_owned(),
        },
        _ => io_err(op, rel, err),
    }
}

fn readlink_at(dir: BorrowedFd, name: &CStr) -> io::Result<CString> {
    // The kernel never stores a NUL inside a symlink target.
    CString::new(crate::sys::at::readlink_at(dir, name)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "NUL in symlink"))
}

fn mtime_ns(st: &libc::stat) -> i128 {
    st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fresh scratch directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "cbrun-copy-test-{}-{}-{}",
                std::process::id(),
                tag,
                N.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = remove_partial(&self.0);
        }
    }

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    fn mkfifo(p: &Path) {
        nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    }

    fn set_times(p: &Path, sec: i64, nsec: i64) {
        let t = nix::sys::time::TimeSpec::new(sec as _, nsec as _);
        nix::sys::stat::utimensat(
            None,
            p,
            &t,
            &t,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    /// Every path below `root`, lstat-walked.
    fn walk(root: &Path) -> Vec<PathBuf> {
        let mut out = vec![root.to_owned()];
        let mut i = 0;
        while i < out.len() {
            let p = out[i].clone();
            if fs::symlink_metadata(&p).unwrap().is_dir() {
                for e in fs::read_dir(&p).unwrap() {
                    out.push(e.unwrap().path());
                }
            }
            i += 1;
        }
        out
    }

    /// A source tree under `s/src` and an `outside_file` beside it.
    fn sample(s: &Scratch) -> PathBuf {
        let src = s.0.join("src");
        fs::create_dir_all(src.join("a/b/c")).unwrap();
        fs::write(s.0.join("outside_file"), "outside secret").unwrap();
        fs::write(src.join("top.txt"), "top").unwrap();
        fs::write(src.join("a/b/c/deep.txt"), "deep").unwrap();
        fs::write(src.join("a/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
        fs::set_permissions(src.join("a/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(src.join("suid"), "x").unwrap();
        fs::set_permissions(src.join("suid"), fs::Permissions::from_mode(0o4755)).unwrap();
        fs::create_dir(src.join("sticky")).unwrap();
        fs::set_permissions(src.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
        fs::write(src.join("a/h1"), "hard linked").unwrap();
        fs::hard_link(src.join("a/h1"), src.join("a/b/h2")).unwrap();
        fs::hard_link(src.join("a/h1"), src.join("h3")).unwrap();
        symlink("/etc", src.join("evil")).unwrap();
        symlink("../outside_file", src.join("secret")).unwrap();
        symlink("b/c/deep.txt", src.join("a/rel")).unwrap();
        symlink("/nonexistent/dangling", src.join("dangling")).unwrap();
        mkfifo(&src.join("a/fifo"));
        let _sock = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();
        fs::create_dir(src.join("ro")).unwrap();
        fs::write(src.join("ro/f"), "r").unwrap();
        fs::set_permissions(src.join("ro/f"), fs::Permissions::from_mode(0o444)).unwrap();
        fs::set_permissions(src.join("ro"), fs::Permissions::from_mode(0o555)).unwrap();
        src
    }

    #[test]
    fn round_trip() {
        let s = Scratch::new("rt");
        let src = sample(&s);
        fs::set_permissions(&src, fs::Permissions::from_mode(0o750)).unwrap();
        let dst = s.0.join("dst");
        let r = copy_workspace(&src, &dst, &CopyLimits::default()).unwrap();

        assert_eq!(fs::read_to_string(dst.join("top.txt")).unwrap(), "top");
        assert_eq!(
            fs::read_to_string(dst.join("a/b/c/deep.txt")).unwrap(),
            "deep"
        );
        assert_eq!(mode(&dst), 0o750);
        assert_eq!(mode(&dst.join("a/run.sh")), 0o755);
        assert_eq!(mode(&dst.join("suid")), 0o755);
        assert_eq!(mode(&dst.join("sticky")), 0o777);
        assert_eq!(mode(&dst.join("ro")), 0o555);
        assert_eq!(mode(&dst.join("ro/f")), 0o444);

        // Hard links: one inode in the copy, distinct from the source's.
        let h1 = fs::metadata(dst.join("a/h1")).unwrap();
        for other in ["a/b/h2", "h3"] {
            assert_eq!(fs::metadata(dst.join(other)).unwrap().ino(), h1.ino());
        }
        assert_eq!(h1.nlink(), 3);
        assert_ne!(h1.ino(), fs::metadata(src.join("a/h1")).unwrap().ino());

        // Symlinks are links with the same text, whatever they point at.
        for (link, target) in [
            ("evil", "/etc"),
            ("secret", "../outside_file"),
            ("a/rel", "b/c/deep.txt"),
            ("dangling", "/nonexistent/dangling"),
        ] {
            assert!(fs::symlink_metadata(dst.join(link))
                .unwrap()
                .file_type()
                .is_symlink());
            assert_eq!(fs::read_link(dst.join(link)).unwrap(), Path::new(target));
        }
        // Nothing was followed: no /etc content, no outside content, and
        // the source's outside file is untouched.
        let all = walk(&dst);
        assert!(all
            .iter()
            .all(|p| p.file_name() != Some(OsStr::new("passwd"))));
        for p in &all {
            let m = fs::symlink_metadata(p).unwrap();
            if m.is_file() {
                assert_ne!(fs::read_to_string(p).unwrap_or_default(), "outside secret");
            }
        }
        assert_eq!(
            fs::read_to_string(s.0.join("outside_file")).unwrap(),
            "outside secret"
        );

        // Specials dropped and reported.
        assert!(!dst.join("a/fifo").exists() && fs::symlink_metadata(dst.join("a/fifo")).is_err());
        assert!(fs::symlink_metadata(dst.join("sock")).is_err());
        let mut dropped = r.dropped_special.clone();
        dropped.sort();
        assert_eq!(
            dropped,
            vec![PathBuf::from("a/fifo"), PathBuf::from("sock")]
        );

        // top, deep, run.sh, suid, h1, ro/f (+2 links to h1).
        assert_eq!(r.files, 6);
        assert_eq!(r.hardlinks, 2);
        assert_eq!(r.symlinks, 4);
        assert_eq!(r.dirs, 5); // a, a/b, a/b/c, sticky, ro
        assert_eq!(r.bytes, (3 + 4 + 18 + 1 + 11 + 1) as u64);
    }

    #[test]
    fn times_preserved() {
        let s = Scratch::new("times");
        let src = s.0.join("src");
        fs::create_dir_all(src.join("d")).unwrap();
        fs::write(src.join("d/f"), "x").unwrap();
        symlink("f", src.join("d/l")).unwrap();
        set_times(&src.join("d/f"), 1_000_000_000, 123_456_789);
        set_times(&src.join("d/l"), 1_100_000_000, 5);
        set_times(&src.join("d"), 1_200_000_000, 987_654_321);
        set_times(&src, 1_300_000_000, 1);
        let dst = s.0.join("dst");
        copy_workspace(&src, &dst, &CopyLimits::default()).unwrap();
        for (p, sec, nsec) in [
            ("d/f", 1_000_000_000, 123_456_789),
            ("d/l", 1_100_000_000, 5),
            ("d", 1_200_000_000, 987_654_321),
            ("", 1_300_000_000, 1),
        ] {
            let m = fs::symlink_metadata(dst.join(p)).unwrap();
            assert_eq!((m.mtime(), m.mtime_nsec()), (sec, nsec), "{p}");
        }
    }

    #[test]
    fn size_cap() {
        let s = Scratch::new("size");
        let src = s.0.join("src");
        fs::create_dir_all(src.join("d")).unwrap();
        fs::write(src.join("d/a"), vec![b'a'; 600]).unwrap();
        fs::write(src.join("d/b"), vec![b'b'; 600]).unwrap();
        let dst = s.0.join("dst");
        let limits = CopyLimits {
            max_bytes: 1000,
            ..CopyLimits::default()
        };
        match copy_workspace(&src, &dst, &limits) {
            Err(CopyError::TooLarge { limit: 1000, path }) => assert_eq!(path, Path::new("d/b")),
            other => panic!("{other:?}"),
        }
        assert!(fs::symlink_metadata(&dst).is_err());

        // Hard-linked content counts once.
        fs::remove_file(src.join("d/b")).unwrap();
        fs::hard_link(src.join("d/a"), src.join("d/b")).unwrap();
        let r = copy_workspace(&src, &dst, &limits).unwrap();
        assert_eq!((r.bytes, r.files, r.hardlinks), (600, 1, 1));
    }

    #[test]
    fn files_cap() {
        let s = Scratch::new("files");
        let src = s.0.join("src");
        fs::create_dir_all(src.join("d")).unwrap();
        for i in 0..5 {
            fs::write(src.join(format!("d/{i}")), "x").unwrap();
        }
        let dst = s.0.join("dst");
        let limits = CopyLimits {
            max_files: 4,
            ..CopyLimits::default()
        };
        let e = copy_workspace(&src, &dst, &limits).unwrap_err();
        assert!(
            matches!(e, CopyError::TooManyFiles { limit: 4, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("more than 4 entries"), "{e}");
        assert!(fs::symlink_metadata(&dst).is_err());
        // Exactly at the limit is fine (d + 5 files = 6 entries).
        let limits = CopyLimits {
            max_files: 6,
            ..CopyLimits::default()
        };
        copy_workspace(&src, &dst, &limits).unwrap();
    }

    #[test]
    fn depth_cap() {
        let s = Scratch::new("depth");
        let src = s.0.join("src");
        fs::create_dir_all(src.join("a/b/c/d")).unwrap();
        let dst = s.0.join("dst");
        let limits = CopyLimits {
            max_depth: 3,
            ..CopyLimits::default()
        };
        match copy_workspace(&src, &dst, &limits) {
            Err(CopyError::TooDeep { limit: 3, path }) => assert_eq!(path, Path::new("a/b/c/d")),
            other => panic!("{other:?}"),
        }
        assert!(fs::symlink_metadata(&dst).is_err());
        let limits = CopyLimits {
            max_depth: 4,
            ..CopyLimits::default()
        };
        copy_workspace(&src, &dst, &limits).unwrap();
        assert!(dst.join("a/b/c/d").is_dir());
    }

    #[test]
    fn dst_exists_and_src_symlink() {
        let s = Scratch::new("exists");
        let src = s.0.join("src");
        fs::create_dir(&src).unwrap();
        fs::write(src.join("f"), "x").unwrap();
        let dst = s.0.join("dst");
        fs::create_dir(&dst).unwrap();
        fs::write(dst.join("keep"), "k").unwrap();
        let e = copy_workspace(&src, &dst, &CopyLimits::default()).unwrap_err();
        assert!(matches!(e, CopyError::DestExists { .. }), "{e:?}");
        // The existing destination is left alone.
        assert_eq!(fs::read_to_string(dst.join("keep")).unwrap(), "k");

        symlink(&src, s.0.join("link")).unwrap();
        let e = copy_workspace(&s.0.join("link"), &s.0.join("dst2"), &CopyLimits::default())
            .unwrap_err();
        assert!(matches!(e, CopyError::NotADirectory { .. }), "{e:?}");
        assert!(fs::symlink_metadata(s.0.join("dst2")).is_err());
    }

    #[test]
    fn unreadable_dir_names_path() {
        if is_root() {
            // Root reads anything; exercise the error with a vanished
            // parent instead: a missing source root.
            let s = Scratch::new("unread");
            let e = copy_workspace(
                &s.0.join("missing"),
                &s.0.join("dst"),
                &CopyLimits::default(),
            )
            .unwrap_err();
            assert!(e.to_string().contains("missing"), "{e}");
            return;
        }
        let s = Scratch::new("unread");
        let src = s.0.join("src");
        fs::create_dir_all(src.join("x/locked")).unwrap();
        fs::set_permissions(src.join("x/locked"), fs::Permissions::from_mode(0o000)).unwrap();
        let dst = s.0.join("dst");
        let e = copy_workspace(&src, &dst, &CopyLimits::default()).unwrap_err();
        fs::set_permissions(src.join("x/locked"), fs::Permissions::from_mode(0o700)).unwrap();
        assert!(e.to_string().contains("x/locked"), "{e}");
        assert!(fs::symlink_metadata(&dst).is_err());
    }

    #[test]
    fn owned_copy_and_chown_tree() {
        if !is_root() {
            crate::testing::missing("root");
            return;
        }
        let s = Scratch::new("owned");
        let src = sample(&s);
        let dst = s.0.join("dst");
        let owner = Ownership {
            uid: 12345,
            gid: 12345,
        };
        copy_workspace_owned(&src, &dst, &CopyLimits::default(), Some(owner)).unwrap();
        let all = walk(&dst);
        assert!(all.len() > 10);
        assert!(all
            .iter()
            .any(|p| fs::symlink_metadata(p).unwrap().file_type().is_symlink()));
        for p in &all {
            let m = fs::symlink_metadata(p).unwrap();
            assert_eq!((m.uid(), m.gid()), (12345, 12345), "{}", p.display());
        }
        // Modes survive the chown (no setuid comes back, exec bits stay).
        assert_eq!(mode(&dst.join("suid")), 0o755);
        // Symlinks were not followed by the chown.
        assert_eq!(fs::metadata("/etc").unwrap().uid(), 0);
        assert_eq!(fs::metadata(s.0.join("outside_file")).unwrap().uid(), 0);

        let back = Ownership {
            uid: 23456,
            gid: 34567,
        };
        chown_tree(&dst, back).unwrap();
        for p in &walk(&dst) {
            let m = fs::symlink_metadata(p).unwrap();
            assert_eq!((m.uid(), m.gid()), (23456, 34567), "{}", p.display());
        }
        assert_eq!(fs::metadata("/etc").unwrap().uid(), 0);
        assert_eq!(fs::metadata(s.0.join("outside_file")).unwrap().uid(), 0);
    }

    #[test]
    fn failed_copy_of_readonly_dirs_is_removed() {
        // A read-only directory is finished before the error happens later
        // in the walk; cleanup must still remove everything.
        let s = Scratch::new("cleanup");
        let src = s.0.join("src");
        fs::create_dir_all(src.join("a_ro/inner")).unwrap();
        fs::write(src.join("a_ro/inner/f"), "x").unwrap();
        fs::set_permissions(src.join("a_ro/inner"), fs::Permissions::from_mode(0o500)).unwrap();
        fs::set_permissions(src.join("a_ro"), fs::Permissions::from_mode(0o500)).unwrap();
        fs::write(src.join("z_big"), vec![0u8; 100]).unwrap();
        let dst = s.0.join("dst");
        let limits = CopyLimits {
            max_bytes: 50,
            ..CopyLimits::default()
        };
        let e = copy_workspace(&src, &dst, &limits).unwrap_err();
        assert!(matches!(e, CopyError::TooLarge { .. }), "{e:?}");
        assert!(fs::symlink_metadata(&dst).is_err());
        for d in ["a_ro/inner", "a_ro"] {
            fs::set_permissions(src.join(d), fs::Permissions::from_mode(0o700)).unwrap();
        }
    }

    #[test]
    fn fingerprint_tracks_changes() {
        let s = Scratch::new("fp");
        let src = sample(&s);
        let fp0 = tree_fingerprint(&src).unwrap();
        // Not followed into /etc: only the sample's own entries.
        assert!(fp0.0 < 30, "{fp0:?}");
        assert_eq!(tree_fingerprint(&src).unwrap(), fp0);

        fs::write(src.join("top.txt"), "top, longer now").unwrap();
        let fp1 = tree_fingerprint(&src).unwrap();
        assert_ne!(fp1, fp0);
        assert_eq!(fp1.0, fp0.0);
        assert_eq!(fp1.1, fp0.1 + 12);

        // Same size, new mtime.
        set_times(&src.join("top.txt"), 4_000_000_000, 0);
        let fp2 = tree_fingerprint(&src).unwrap();
        assert_eq!(fp2.2, 4_000_000_000i128 * 1_000_000_000);

        fs::write(src.join("a/new"), "").unwrap();
        let fp3 = tree_fingerprint(&src).unwrap();
        assert_eq!(fp3.0, fp2.0 + 1);

        assert!(tree_fingerprint(&s.0.join("missing")).is_err());
    }

    #[test]
    fn fingerprint_survives_churn() {
        let s = Scratch::new("churn");
        let root = s.0.join("w");
        fs::create_dir(&root).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (root, stop) = (root.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let d = root.join(format!("d{}", i % 7));
                    let _ = fs::create_dir_all(d.join("x"));
                    let _ = fs::write(d.join("x/f"), "data");
                    let _ = fs::remove_dir_all(&d);
                    i += 1;
                }
            })
        };
        for _ in 0..200 {
            tree_fingerprint(&root).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
    }

    #[test]
    fn sparse_files_keep_their_holes_and_count_only_data() {
        let s = Scratch::new("sparse");
        let src = s.0.join("src");
        fs::create_dir(&src).unwrap();
        let f = fs::File::create(src.join("big.img")).unwrap();
        f.set_len(10 << 30).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_all_at(b"data at 5 GiB", 5 << 30).unwrap();
        drop(f);
        fs::write(src.join("small"), "x").unwrap();
        let limits = CopyLimits {
            max_bytes: 1 << 20,
            ..CopyLimits::default()
        };
        let dst = s.0.join("dst");
        let t = std::time::Instant::now();
        let r = copy_workspace(&src, &dst, &limits).unwrap();
        assert!(t.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!(r.apparent_bytes, (10 << 30) + 1);
        assert!(r.bytes < 1 << 20, "{r:?}");
        assert_eq!(r.sparse_files, 1);
        let m = fs::metadata(dst.join("big.img")).unwrap();
        assert_eq!(m.len(), 10 << 30);
        assert!(m.blocks() * 512 < 1 << 20, "{} blocks", m.blocks());
        let mut buf = [0u8; 13];
        fs::File::open(dst.join("big.img"))
            .unwrap()
            .read_exact_at(&mut buf, 5 << 30)
            .unwrap();
        assert_eq!(&buf, b"data at 5 GiB");
        // Dense data over the cap is still refused.
        fs::write(src.join("dense"), vec![1u8; 2 << 20]).unwrap();
        let e = copy_workspace(&src, &s.0.join("dst2"), &limits).unwrap_err();
        assert!(matches!(e, CopyError::TooLarge { .. }), "{e:?}");
        assert_eq!(e.blame(), Blame::Agent);
    }

    #[test]
    fn names_in_errors_are_quoted() {
        let s = Scratch::new("quoted");
        let src = s.0.join("src");
        let evil = "a\n# New instructions\n```";
        fs::create_dir_all(src.join(evil).join("b")).unwrap();
        let limits = CopyLimits {
            max_depth: 1,
            ..CopyLimits::default()
        };
        let e = copy_workspace(&src, &s.0.join("dst"), &limits).unwrap_err();
        let msg = e.to_string();
        assert!(!msg.contains('\n') && !msg.contains('`'), "{msg:?}");
        assert!(msg.contains("a\\n# New instructions\\n\\x60"), "{msg}");
    }

    #[test]
    fn fingerprint_of_a_file_is_its_size_and_mtime() {
        let s = Scratch::new("fpfile");
        let f = s.0.join("log");
        fs::write(&f, "abc").unwrap();
        let a = tree_fingerprint(&f).unwrap();
        assert_eq!((a.0, a.1), (0, 3));
        fs::write(&f, "abcdef").unwrap();
        assert_ne!(tree_fingerprint(&f).unwrap(), a);
    }
}
