//! Directory capabilities: a [`Dir`] is a descriptor cbrun opened itself,
//! and every file operation under it is relative to that descriptor, with
//! no symlink followed anywhere on the way.
//!
//! Paths below a `Dir` are resolved with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` where the kernel has it
//! (5.6 and later), else one component at a time with `O_NOFOLLOW` (RHEL 8's
//! 4.18): the same result either way, a symlink anywhere is an error, never
//! a detour. On top of that:
//!
//! - [`Dir::write_replace`]: a temporary file created `O_EXCL | O_NOFOLLOW`
//!   in the directory, synced, renamed over the name. A planted symlink,
//!   FIFO or hard link at the name is replaced, never written through; a
//!   planted directory is a clear error.
//! - [`Dir::read_capped`], [`Dir::read_head_tail`]: opened `O_NONBLOCK |
//!   O_NOFOLLOW | O_NOCTTY` (a FIFO cannot hang the open), refused unless
//!   `fstat` says regular file, read in pieces up to a cap, truncation
//!   reported.
//! - [`Dir::open_append`]: for logs; only a regular file with one link.
//! - [`Dir::remove`], [`Dir::remove_tree`]: entries removed as what they are
//!   (a link is unlinked, not its target); trees of any depth with two
//!   descriptors at a time.
//!
//! A `Dir` marked [`Dir::sandbox_writable`] (the workspace, the agent's
//! logs, its home, the judge's scratch) blames the agent for what goes
//! wrong inside it that the agent can cause (a planted entry, a permission
//! it removed, a name it took): see [`DirError::blame`].

use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use super::at::{self, id_of, kind_bits, InodeId};

/// Who caused a failure: what the trial record's `failure_class` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The agent (or the judged code) did it: `implementation`.
    Agent,
    /// cbrun or the host: `infrastructure`.
    Host,
}

/// What an entry is, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Other,
}

impl Kind {
    pub fn of(st: &libc::stat) -> Kind {
        match kind_bits(st) {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::CharDevice,
            libc::S_IFBLK => Kind::BlockDevice,
            _ => Kind::Other,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symbolic link",
            Kind::Fifo => "a FIFO",
            Kind::Socket => "a socket",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Other => "a special file",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// Something other than what cbrun expected sits at the path.
    #[error("{path} is {found}, not {wanted}; cbrun never follows links or opens special files in folders a sandbox writes")]
    Planted {
        path: String,
        found: Kind,
        wanted: Kind,
    },
    #[error("{path} has {links} hard links; cbrun only reads or appends to files with one")]
    HardLinked { path: String, links: u64 },
    #[error("{op} {path}: {err}")]
    Io {
        op: &'static str,
        path: String,
        err: io::Error,
        blame: Blame,
    },
}

impl DirError {
    pub fn blame(&self) -> Blame {
        match self {
            DirError::Planted { .. } | DirError::HardLinked { .. } => Blame::Agent,
            DirError::Io { blame, .. } => *blame,
        }
    }

    /// The OS error, when there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            DirError::Io { err, .. } => err.raw_os_error(),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.raw_os_error() == Some(libc::ENOENT)
    }
}

/// Errors a sandbox can cause in a directory it writes: a name it took or
/// removed, a permission it dropped, a type it swapped, a size it chose.
/// The rest (no space, I/O errors, no memory, no descriptors) is the host's.
pub fn blame_for(sandbox_writable: bool, e: &io::Error) -> Blame {
    if !sandbox_writable {
        return Blame::Host;
    }
    match e.raw_os_error() {
        Some(
            libc::ELOOP
            | libc::EISDIR
            | libc::ENOTDIR
            | libc::EACCES
            | libc::EPERM
            | libc::ENOENT
            | libc::EEXIST
            | libc::ENOTEMPTY
            | libc::EXDEV
            | libc::ENAMETOOLONG
            | libc::EMLINK
            | libc::ENXIO
            | libc::ETXTBSY
            | libc::EFBIG
            | libc::EOVERFLOW,
        ) => Blame::Agent,
        _ => Blame::Host,
    }
}

/// What a capped read got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    pub bytes: Vec<u8>,
    /// The file's size when it was opened.
    pub size: u64,
    /// Bytes of the file that were not read.
    pub omitted: u64,
}

impl Capped {
    pub fn truncated(&self) -> bool {
        self.omitted > 0
    }
    pub fn text_lossy(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// 0 = not tried yet, 1 = works, 2 = missing or refused.
static OPENAT2: AtomicU8 = AtomicU8::new(0);

/// A directory descriptor cbrun opened itself. See the module docs.
pub struct Dir {
    fd: OwnedFd,
    /// For messages: the directory's host path, or where it sits below the
    /// root it was opened from.
    shown: PathBuf,
    sandbox_writable: bool,
    /// Never use openat2 (tests of the fallback).
    component_walk: bool,
}

impl fmt::Debug for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dir")
            .field("fd", &self.fd.as_raw_fd())
            .field("path", &self.shown)
            .field("sandbox_writable", &self.sandbox_writable)
            .finish()
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The parent directory of an operation: the `Dir` itself, or one opened
/// below it for the occasion.
enum Held<'a> {
    Borrowed(BorrowedFd<'a>),
    Owned(OwnedFd),
}

impl Held<'_> {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Held::Borrowed(b) => *b,
            Held::Owned(o) => o.as_fd(),
        }
    }
}

impl Dir {
    /// Opens the directory at `path`, a path the caller chose (a trial
    /// root, `--workspace`). Its last component must not be a symlink.
    pub fn open(path: &Path) -> Result<Dir, DirError> {
        let fd = at::open_path(path, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .map_err(|err| DirError::Io {
                op: "opening",
                path: show(path),
                err,
                blame: Blame::Host,
            })?;
        Ok(Dir {
            fd,
            shown: path.to_path_buf(),
            sandbox_writable: false,
            component_walk: false,
        })
    }

    /// Marks the directory as one a sandbox writes (or wrote): failures it
    /// can cause are blamed on it, and directories opened below inherit
    /// the mark.
    pub fn sandbox_writable(mut self) -> Dir {
        self.sandbox_writable = true;
        self
    }

    /// Resolves below this directory one component at a time even where
    /// openat2 exists (to test the path RHEL 8 takes).
    #[doc(hidden)]
    pub fn component_walk(mut self) -> Dir {
        self.component_walk = true;
        self
    }

    /// The path messages show for this directory.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// The path messages show for `rel` below this directory.
    pub fn shown(&self, rel: impl AsRef<Path>) -> PathBuf {
        let rel = rel.as_ref();
        if rel.as_os_str().is_empty() {
            self.shown.clone()
        } else {
            self.shown.join(rel)
        }
    }

    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
            shown: self.shown.clone(),
            sandbox_writable: self.sandbox_writable,
            component_walk: self.component_walk,
        })
    }

    fn io(&self, op: &'static str, rel: &Path, err: io::Error) -> DirError {
        DirError::Io {
            op,
            path: show(&self.shown(rel)),
            blame: blame_for(self.sandbox_writable, &err),
            err,
        }
    }

    /// Why opening `rel` as `wanted` failed: a planted entry of another
    /// kind when there is one there, else the OS error.
    fn explain(&self, op: &'static str, rel: &Path, err: io::Error, wanted: Kind) -> DirError {
        if matches!(
            err.raw_os_error(),
            Some(libc::ELOOP | libc::ENOTDIR | libc::EISDIR | libc::ENXIO | libc::EXDEV)
        ) {
            if let Some(found) = self.first_unexpected(rel, wanted) {
                return DirError::Planted {
                    path: show(&self.shown(found.0)),
                    found: found.1,
                    wanted: found.2,
                };
            }
        }
        self.io(op, rel, err)
    }

    /// The first component of `rel` that is not what the walk needs (a
    /// directory on the way, `wanted` at the end), without following
    /// anything.
    fn first_unexpected(&self, rel: &Path, wanted: Kind) -> Option<(PathBuf, Kind, Kind)> {
        let comps = components(rel).ok()?;
        let mut cur = Held::Borrowed(self.fd.as_fd());
        let mut so_far = PathBuf::new();
        for (i, c) in comps.iter().enumerate() {
            so_far.push(OsStr::from_bytes(c.to_bytes()));
            let st = at::lstat_at(cur.fd(), c).ok()?;
            let last = i + 1 == comps.len();
            let want = if last { wanted } else { Kind::Dir };
            let kind = Kind::of(&st);
            if kind != want {
                return Some((so_far, kind, want));
            }
            if !last {
                let next = at::open_at(
                    cur.fd(),
                    c,
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    0,
                )
                .ok()?;
                cur = Held::Owned(next);
            }
        }
        None
    }

    /// Opens `rel` below this directory with `flags` (plus `O_NOFOLLOW`
    /// and `O_CLOEXEC`), following no symlink on the way.
    fn open_beneath(
        &self,
        rel: &Path,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> io::Result<OwnedFd> {
        let comps = components(rel)?;
        let flags = flags | libc::O_NOFOLLOW;
        if comps.len() == 1 {
            // One name: O_NOFOLLOW already says everything.
            return at::open_at(self.fd.as_fd(), &comps[0], flags, mode);
        }
        if !self.component_walk && OPENAT2.load(Ordering::Relaxed) != 2 {
            let c = at::cpath(rel.as_os_str())?;
            let how = at::open_how(
                (flags | libc::O_CLOEXEC) as u64,
                if flags & libc::O_CREAT != 0 {
                    mode as u64
                } else {
                    0
                },
                libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
            );
            match at::openat2(self.fd.as_fd(), &c, &how) {
                Ok(fd) => {
                    OPENAT2.store(1, Ordering::Relaxed);
                    return Ok(fd);
                }
                // Not there (before 5.6), refused by a seccomp filter, or
                // an older open_how: walk instead, from now on.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ENOSYS | libc::EPERM | libc::E2BIG)
                    ) && OPENAT2.load(Ordering::Relaxed) != 1 =>
                {
                    OPENAT2.store(2, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        let (last, dirs) = comps.split_last().expect("at least one component");
        let mut cur = Held::Borrowed(self.fd.as_fd());
        for c in dirs {
            let next = at::open_at(
                cur.fd(),
                c,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )?;
            cur = Held::Owned(next);
        }
        at::open_at(cur.fd(), last, flags, mode)
    }

    /// The directory holding `rel`'s last component, and that component.
    fn parent_of(&self, rel: &Path) -> io::Result<(Held<'_>, CString)> {
        let mut comps = components(rel)?;
        let last = comps.pop().expect("at least one component");
        if comps.is_empty() {
            return Ok((Held::Borrowed(self.fd.as_fd()), last));
        }
        let parent: PathBuf = comps
            .iter()
            .map(|c| OsStr::from_bytes(c.to_bytes()))
            .collect();
        let fd = self.open_beneath(&parent, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok((Held::Owned(fd), last))
    }

    /// Opens the directory `rel` below this one.
    pub fn open_dir(&self, rel: impl AsRef<Path>) -> Result<Dir, DirError> {
        let rel = rel.as_ref();
        let fd = self
            .open_beneath(rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .map_err(|e| self.explain("opening", rel, e, Kind::Dir))?;
        Ok(Dir {
            fd,
            shown: self.shown(rel),
            sandbox_writable: self.sandbox_writable,
            component_walk: self.component_walk,
        })
    }

    /// Creates the directory `rel` (its parent must exist).
    pub fn create_dir(&self, rel: impl AsRef<Path>, mode: libc::mode_t) -> Result<(), DirError> {
        let rel = rel.as_ref();
        let (parent, name) = self
            .parent_of(rel)
            .map_err(|e| self.explain("creating", rel, e, Kind::Dir))?;
        at::mkdir_at(parent.fd(), &name, mode).map_err(|e| self.io("creating", rel, e))
    }

    /// Creates `rel` when missing and opens it; an existing directory is
    /// fine, anything else at the name is an error.
    pub fn ensure_dir(&self, rel: impl AsRef<Path>, mode: libc::mode_t) -> Result<Dir, DirError> {
        let rel = rel.as_ref();
        match self.create_dir(rel, mode) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(e),
        }
        self.open_dir(rel)
    }

    /// `lstat` of `rel`: the entry itself; `None` when there is none.
    pub fn entry(&self, rel: impl AsRef<Path>) -> Result<Option<libc::stat>, DirError> {
        let rel = rel.as_ref();
        let (parent, name) = match self.parent_of(rel) {
            Ok(p) => p,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(self.explain("looking up", rel, e, Kind::Other)),
        };
        match at::lstat_at(parent.fd(), &name) {
            Ok(st) => Ok(Some(st)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(self.io("looking up", rel, e)),
        }
    }

    /// Entry names of this directory, at most `cap`; the flag says more
    /// were left.
    pub fn names(&self, cap: usize) -> Result<(Vec<CString>, bool), DirError> {
        at::read_dir_names(self.fd.as_fd(), cap)
            .map_err(|e| self.io("reading directory", Path::new(""), e))
    }

    /// Replaces `rel` with a regular file holding `bytes` (mode `mode`),
    /// atomically: readers see the old file or the new one. Whatever was
    /// at the name (a symlink, a FIFO, a hard link) is replaced without
    /// being opened; a directory there is an error.
    pub fn write_replace(
        &self,
        rel: impl AsRef<Path>,
        bytes: &[u8],
        mode: libc::mode_t,
    ) -> Result<(), DirError> {
        let rel = rel.as_ref();
        let (parent, name) = self
            .parent_of(rel)
            .map_err(|e| self.explain("writing", rel, e, Kind::File))?;
        let (tmp, fd) =
            create_temp(parent.fd(), &name, mode).map_err(|e| self.io("writing", rel, e))?;
        let written = (|| {
            let mut f = File::from(fd);
            f.write_all(bytes)?;
            // The umask may have narrowed the creation mode.
            at::fchmod(f.as_fd(), mode)?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = at::unlink_at(parent.fd(), &tmp, 0);
            return Err(self.io("writing", rel, e));
        }
        if let Err(e) = at::rename_at(parent.fd(), &tmp, parent.fd(), &name) {
            let _ = at::unlink_at(parent.fd(), &tmp, 0);
            if matches!(
                e.raw_os_error(),
                Some(libc::EISDIR | libc::ENOTEMPTY | libc::EEXIST)
            ) {
                return Err(DirError::Planted {
                    path: show(&self.shown(rel)),
                    found: Kind::Dir,
                    wanted: Kind::File,
                });
            }
            return Err(self.io("replacing", rel, e));
        }
        Ok(())
    }

    /// Opens `rel` for reading: never blocks (a FIFO is refused, not
    /// waited on), never follows a link, refuses anything but a regular
    /// file. Returns the file and its `fstat`.
    pub fn open_read(&self, rel: impl AsRef<Path>) -> Result<(File, libc::stat), DirError> {
        let rel = rel.as_ref();
        let fd = self
            .open_beneath(rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY, 0)
            .map_err(|e| self.explain("opening", rel, e, Kind::File))?;
        let st = at::fstat(fd.as_fd()).map_err(|e| self.io("stat", rel, e))?;
        if Kind::of(&st) != Kind::File {
            return Err(DirError::Planted {
                path: show(&self.shown(rel)),
                found: Kind::of(&st),
                wanted: Kind::File,
            });
        }
        at::clear_nonblock(fd.as_fd()).map_err(|e| self.io("opening", rel, e))?;
        Ok((File::from(fd), st))
    }

    /// An error unless `st` (of `rel`) has exactly one link.
    // nlink_t is u64 on x86_64 and u32 on aarch64.
    #[allow(clippy::unnecessary_cast)]
    pub fn single_link(&self, rel: impl AsRef<Path>, st: &libc::stat) -> Result<(), DirError> {
        if st.st_nlink > 1 {
            return Err(DirError::HardLinked {
                path: show(&self.shown(rel)),
                links: st.st_nlink as u64,
            });
        }
        Ok(())
    }

    /// At most `cap` bytes from the start of the regular file `rel`.
    pub fn read_capped(&self, rel: impl AsRef<Path>, cap: u64) -> Result<Capped, DirError> {
        let rel = rel.as_ref();
        let (f, st) = self.open_read(rel)?;
        let size = st.st_size.max(0) as u64;
        let bytes = read_up_to(&f, cap).map_err(|e| self.io("reading", rel, e))?;
        let omitted = size.saturating_sub(bytes.len() as u64);
        Ok(Capped {
            bytes,
            size,
            omitted,
        })
    }

    /// The first `head` and the last `tail` bytes of the regular file
    /// `rel`, with one line between them saying how much was left out
    /// when the file is longer. Reads nothing in between, so a sparse
    /// terabyte costs what its ends cost.
    pub fn read_head_tail(
        &self,
        rel: impl AsRef<Path>,
        head: u64,
        tail: u64,
    ) -> Result<Capped, DirError> {
        let rel = rel.as_ref();
        let (f, st) = self.open_read(rel)?;
        let size = st.st_size.max(0) as u64;
        let both = head.saturating_add(tail);
        if size <= both {
            let bytes = read_up_to(&f, both).map_err(|e| self.io("reading", rel, e))?;
            let omitted = size.saturating_sub(bytes.len() as u64);
            return Ok(Capped {
                bytes,
                size,
                omitted,
            });
        }
        let mut bytes = read_up_to(&f, head).map_err(|e| self.io("reading", rel, e))?;
        let omitted = size - head - tail;
        bytes.extend_from_slice(
            format!("\n[cbrun: {omitted} bytes of this file not read]\n").as_bytes(),
        );
        let from = size - tail;
        let mut end = vec![0u8; usize::try_from(tail).unwrap_or(usize::MAX)];
        let mut got = 0usize;
        while got < end.len() {
            let n = at::pread(f.as_fd(), &mut end[got..], from + got as u64)
                .map_err(|e| self.io("reading", rel, e))?;
            if n == 0 {
                break;
            }
            got += n;
        }
        end.truncate(got);
        bytes.extend_from_slice(&end);
        Ok(Capped {
            bytes,
            size,
            omitted,
        })
    }

    /// Opens (creating it `mode` when missing) the log `rel` for appending:
    /// only a regular file with one link; a symlink, FIFO or directory at
    /// the name is an error, never followed or blocked on.
    pub fn open_append(&self, rel: impl AsRef<Path>, mode: libc::mode_t) -> Result<File, DirError> {
        let rel = rel.as_ref();
        let fd = self
            .open_beneath(
                rel,
                libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_NONBLOCK | libc::O_NOCTTY,
                mode,
            )
            .map_err(|e| self.explain("opening", rel, e, Kind::File))?;
        let st = at::fstat(fd.as_fd()).map_err(|e| self.io("stat", rel, e))?;
        if Kind::of(&st) != Kind::File {
            return Err(DirError::Planted {
                path: show(&self.shown(rel)),
                found: Kind::of(&st),
                wanted: Kind::File,
            });
        }
        self.single_link(rel, &st)?;
        at::clear_nonblock(fd.as_fd()).map_err(|e| self.io("opening", rel, e))?;
        Ok(File::from(fd))
    }

    /// Removes `rel` whatever it is (a directory with everything in it);
    /// false when there was nothing.
    pub fn remove(&self, rel: impl AsRef<Path>) -> Result<bool, DirError> {
        let rel = rel.as_ref();
        let Some(st) = self.entry(rel)? else {
            return Ok(false);
        };
        if Kind::of(&st) == Kind::Dir {
            self.remove_tree(rel)?;
        } else {
            let (parent, name) = self
                .parent_of(rel)
                .map_err(|e| self.explain("removing", rel, e, Kind::Other))?;
            match at::unlink_at(parent.fd(), &name, 0) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(false),
                Err(e) => return Err(self.io("removing", rel, e)),
            }
        }
        Ok(true)
    }

    /// Removes the directory `rel` and everything below it, however deep,
    /// holding two descriptors at a time: it climbs back through `..`,
    /// checking each parent is the inode it came down from. Meant for
    /// trees nothing writes to any more (a finished sandbox's); a tree
    /// moved under it stops the removal with an error rather than removing
    /// elsewhere. Directories it cannot enter or empty are opened up
    /// (`0700`) first.
    pub fn remove_tree(&self, rel: impl AsRef<Path>) -> Result<(), DirError> {
        let rel = rel.as_ref();
        let (parent, name) = self
            .parent_of(rel)
            .map_err(|e| self.explain("removing", rel, e, Kind::Dir))?;
        remove_tree_at(parent.fd(), &name).map_err(|e| self.io("removing", rel, e))
    }
}

/// Removes the directory `name` in `parent` and everything below it: see
/// [`Dir::remove_tree`]. The one tree removal of the crate; the image store
/// and the unpacker use it too.
pub fn remove_tree_at(parent: BorrowedFd, name: &CStr) -> io::Result<()> {
    if let Ok(st) = at::lstat_at(parent, name) {
        if kind_bits(&st) == libc::S_IFDIR && st.st_mode & 0o700 != 0o700 {
            // A directory (lstat), in a tree nothing runs in any more.
            let _ = at::chmod_at_checked(parent, name, 0o700);
        }
    }
    let top = open_subdir(parent, name)?;
    // The way down: (name in its parent, the directory's inode).
    let mut trail: Vec<(CString, InodeId)> =
        vec![(name.to_owned(), id_of(&at::fstat(top.as_fd())?))];
    let mut cur = top;
    loop {
        if let Some((child, fd, id)) = empty_files_or_descend(cur.as_fd())? {
            trail.push((child, id));
            cur = fd;
            continue;
        }
        // `cur` holds no files and no directories now.
        let (done, _) = trail.pop().expect("the top is on the trail");
        if trail.is_empty() {
            drop(cur);
            return at::unlink_at(parent, &done, libc::AT_REMOVEDIR);
        }
        let up = at::open_at(
            cur.as_fd(),
            c"..",
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        let up_id = id_of(&at::fstat(up.as_fd())?);
        if Some(&up_id) != trail.last().map(|(_, id)| id) {
            return Err(io::Error::other(
                "the tree moved while it was being removed",
            ));
        }
        cur = up;
        at::unlink_at(cur.as_fd(), &done, libc::AT_REMOVEDIR)?;
    }
}

/// Removes every non-directory in `dir` until a subdirectory turns up; then
/// opens it and returns it (its name, descriptor and inode). `None` once
/// `dir` holds nothing.
fn empty_files_or_descend(dir: BorrowedFd) -> io::Result<Option<(CString, OwnedFd, InodeId)>> {
    loop {
        let (names, more) = at::read_dir_names(dir, 4096)?;
        for n in names {
            let st = match at::lstat_at(dir, &n) {
                Ok(st) => st,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => return Err(e),
            };
            if kind_bits(&st) == libc::S_IFDIR {
                if st.st_mode & 0o700 != 0o700 {
                    // lstat just said directory, and nothing runs in the
                    // tree any more, so this chmod follows no link.
                    let _ = at::chmod_at_checked(dir, &n, 0o700);
                }
                let fd = open_subdir(dir, &n)?;
                let id = id_of(&at::fstat(fd.as_fd())?);
                if id != id_of(&st) {
                    return Err(io::Error::other(
                        "the tree changed while it was being removed",
                    ));
                }
                return Ok(Some((n, fd, id)));
            }
            match at::unlink_at(dir, &n, 0) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(e),
            }
        }
        if !more {
            return Ok(None);
        }
    }
}

fn open_subdir(dir: BorrowedFd, name: &CStr) -> io::Result<OwnedFd> {
    at::open_at(
        dir,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
}

/// A new, empty temporary file next to `name`, created `O_EXCL |
/// O_NOFOLLOW` (a planted entry at the temporary name is never opened: the
/// next name is tried).
fn create_temp(dir: BorrowedFd, name: &CStr, mode: libc::mode_t) -> io::Result<(CString, OwnedFd)> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    // Short enough that any name fits within NAME_MAX with the suffix.
    let stem: Vec<u8> = name.to_bytes().iter().take(120).copied().collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..32 {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(&stem);
        tmp.extend_from_slice(format!(".cbrun-{}-{nanos:x}-{n}", std::process::id()).as_bytes());
        let tmp = CString::new(tmp).expect("no NUL in a C string's bytes");
        match at::open_at(
            dir,
            &tmp,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            mode,
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Reads at most `cap` bytes, in pieces (memory grows with what is read,
/// not with what the file claims).
fn read_up_to(f: &File, cap: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    f.take(cap).read_to_end(&mut out)?;
    Ok(out)
}

/// `rel` as C-string components; `..`, a root and an empty path are refused.
fn components(rel: &Path) -> io::Result<Vec<CString>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(at::cpath(n)?),
            Component::CurDir => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a relative path without `..`",
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty path"));
    }
    Ok(out)
}

fn show(p: &Path) -> String {
    crate::fsutil::quote_path(p)
}

#[cfg(test)]
mod tests;
