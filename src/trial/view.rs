//! The judge's view of the stored workspace: a kernel overlay, or a copy.
//!
//! The overlay has the workspace as its read-only lower layer and a
//! private, size-capped tmpfs as its upper layer, mounted in cbrun's own
//! mount namespace (invisible on the host, gone with cbrun) with `nosuid`
//! and `nodev`; the judge's writes land in the tmpfs and die with it. Its
//! set-up does not grow with the workspace beyond one metadata walk:
//!
//! - **The walk** reads directories only (kinds from the entries, a stat
//!   per directory, none per file): it applies the copy's entry and depth
//!   limits with the copy's errors, lists FIFOs, sockets and device nodes,
//!   and checks that every directory belongs to the workspace root's
//!   owner. It is fd-based like the copy: `*at` calls from open parents,
//!   `O_NOFOLLOW`. There is no byte cap on the lower layer: nothing is
//!   read or copied, and what the judge writes is capped by the tmpfs.
//! - **Specials** are masked: a whiteout in the upper layer at each one's
//!   path, so the judge does not see them at all (parent directories made
//!   in the upper layer take the lower ones' owner, mode and times).
//!   setuid/setgid bits stay visible but are inert (`nosuid`, and the
//!   judge runs with `no_new_privs`).
//! - **Ownership**: the judge runs as uid 1000 and must own the tree, as it
//!   owns the copy. Rootless, every id of every sandbox lands on the
//!   caller, so a workspace the caller owns is the judge's. As real root the
//!   lower layer is an idmapped mount of the workspace (read-only, nosuid,
//!   nodev) that shows the owner's files as the judge's host ids, whoever
//!   owns them on disk (the solve sandbox's root, or host root for a
//!   replayed folder); the upper layer's directories are made as the
//!   judge's ids.
//! - **Paths**: the lower layer is the directory cbrun opened (given to the
//!   kernel as `/proc/self/fd/N`), and every mount point is a directory
//!   cbrun made and opened; no path a planted symlink could redirect.
//!
//! Where any of that is not possible (no overlayfs, an older kernel that
//! refuses it in a user namespace, a filesystem without idmapped mounts, a
//! rootless workspace owned by someone else, directories of other owners),
//! the judge falls back to the copy and says why. `CBRUN_JUDGE_VIEW=copy`
//! forces the copy. A regular file the agent gave another owner is not
//! looked for (that would cost a stat per file): the judge sees it as an
//! unmapped owner's, readable by its mode's "other" bits, not writable in
//! place.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use serde::Serialize;

use crate::sandbox::cgroupfs_shim;
use crate::sandbox::run::HostView;
use crate::sys::at::{
    fchmod, fchown, fstat, futimens, lstat_at, mkdir_at, mkdir_path, open_at, open_path,
    read_dir_typed, timespec as ts,
};
use crate::trial::copy::{self, CopyError, CopyLimits, CopyReport, Ownership};
use crate::trial::phase::{self, NONROOT};

/// Which view the judge should try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewPolicy {
    /// The overlay where it can be had, else the copy.
    Auto,
    /// Always the copy.
    Copy,
}

impl ViewPolicy {
    /// `CBRUN_JUDGE_VIEW=copy` forces the copy; anything else is `Auto`.
    pub fn from_env() -> Self {
        match std::env::var("CBRUN_JUDGE_VIEW").as_deref() {
            Ok("copy") => ViewPolicy::Copy,
            _ => ViewPolicy::Auto,
        }
    }
}

/// What the judge got at `/app`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewKind {
    Overlay,
    Copy,
}

/// What the walk before an overlay found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScanReport {
    /// Regular-file names (hard links counted per name).
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// FIFOs, sockets and devices, hidden from the judge by whiteouts
    /// (paths relative to the root).
    pub masked_special: Vec<PathBuf>,
    /// Time the walk and the mounts took.
    pub seconds: f64,
}

/// The judge's `/app`, and what it takes to use it. Dropping it unmounts
/// the overlay and its tmpfs.
#[derive(Debug)]
pub struct JudgeView {
    /// The host path to bind at `/app`.
    pub app: PathBuf,
    pub kind: ViewKind,
    /// Why the copy, when it was not asked for.
    pub note: Option<String>,
    pub scan: Option<ScanReport>,
    pub copy: Option<CopyReport>,
    /// Host owner for writable folders handed to the judge.
    pub owner: Option<Ownership>,
    _mounts: Option<Mounts>,
}

/// Unmounts, innermost first, when dropped.
#[derive(Debug)]
struct Mounts {
    points: Vec<PathBuf>,
}

impl Drop for Mounts {
    fn drop(&mut self) {
        for p in self.points.iter().rev() {
            let _ = umount2(p, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW);
        }
    }
}

/// Why no overlay: the tree's own fault (the same errors as the copy), or
/// something that makes the copy the way.
enum NoOverlay {
    Refused(CopyError),
    Unavailable(String),
}

/// Makes the judge's view of `workspace` under `work` (a fresh folder of
/// cbrun's): `work/view` for an overlay, `work/app` for a copy. `upper`
/// caps what the judge may write on an overlay.
pub fn prepare(
    workspace: &Path,
    work: &Path,
    limits: &CopyLimits,
    upper: u64,
    policy: ViewPolicy,
    host: &HostView,
) -> Result<JudgeView, CopyError> {
    let note = match policy {
        ViewPolicy::Copy => None,
        ViewPolicy::Auto => match overlay(workspace, work, limits, upper, host) {
            Ok(v) => return Ok(v),
            Err(NoOverlay::Refused(e)) => return Err(e),
            Err(NoOverlay::Unavailable(why)) => Some(why),
        },
    };
    let owner = phase::sandbox_owner(host, Some(NONROOT));
    let app = work.join("app");
    let report = copy::copy_workspace_owned(workspace, &app, limits, owner)?;
    Ok(JudgeView {
        app,
        kind: ViewKind::Copy,
        note,
        scan: None,
        copy: Some(report),
        owner,
        _mounts: None,
    })
}

fn overlay(
    workspace: &Path,
    work: &Path,
    limits: &CopyLimits,
    upper: u64,
    host: &HostView,
) -> Result<JudgeView, NoOverlay> {
    let t0 = Instant::now();
    let unavailable = |what: &str, e: &dyn std::fmt::Display| {
        NoOverlay::Unavailable(format!(
            "no overlay ({what}: {e}): the workspace was copied"
        ))
    };
    // The judge's sandbox is made from cbrun's private mount namespace;
    // the overlay has to be mounted there (entering it is done once).
    let shim = cgroupfs_shim::ensure(&host.cgroups)
        .map_err(|e| unavailable("mount namespace", &crate::error::Chain(&e)))?;
    let root = open_root(workspace).map_err(NoOverlay::Refused)?;
    let st = fstat(root.as_fd()).map_err(|e| {
        NoOverlay::Refused(CopyError::Io {
            op: "stat",
            path: workspace.to_owned(),
            err: e,
        })
    })?;
    let owner = (st.st_uid, st.st_gid);
    // Rootless, cbrun is uid 0 of its own namespace and the judge's ids
    // all land on it: the tree must be its own. As real root, the judge's
    // host ids, which the idmapped lower layer shows the owner's files as.
    let judge_ids = if shim.own_userns {
        if owner != (0, 0) {
            return Err(NoOverlay::Unavailable(format!(
                "the workspace belongs to uid {} gid {}, not to the user cbrun runs as: the workspace was copied",
                owner.0, owner.1
            )));
        }
        None
    } else {
        match phase::sandbox_owner(host, Some(NONROOT)) {
            Some(o) => Some(o),
            None => {
                return Err(NoOverlay::Unavailable(
                    "the judge's user has no host ids of its own: the workspace was copied".into(),
                ))
            }
        }
    };
    let mut scan = Scan {
        limits,
        owner,
        report: ScanReport::default(),
        entries: 0,
        foreign: None,
    };
    scan.dir(root.as_fd(), Path::new(""), 0)
        .map_err(NoOverlay::Refused)?;
    if let Some(p) = &scan.foreign {
        return Err(NoOverlay::Unavailable(format!(
            "{} has another owner than the workspace itself: the workspace was copied",
            crate::fsutil::quote_path(p)
        )));
    }
    let mut report = scan.report;
    let layers = Layers {
        lower: &root,
        lower_st: &st,
        idmap: judge_ids.map(|j| ((owner.0, j.uid), (owner.1, j.gid))),
        upper_owner: judge_ids.map_or(owner, |j| (j.uid, j.gid)),
        upper_bytes: upper,
    };
    let mounts = mount_overlay(&layers, work, &report.masked_special).map_err(|e| {
        NoOverlay::Unavailable(format!("no overlay ({e}): the workspace was copied"))
    })?;
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(JudgeView {
        app: work.join("view/merged"),
        kind: ViewKind::Overlay,
        note: None,
        scan: Some(report),
        copy: None,
        owner: judge_ids,
        _mounts: Some(mounts),
    })
}

fn open_root(workspace: &Path) -> Result<OwnedFd, CopyError> {
    open_path(
        workspace,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
    )
    .map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => CopyError::NotADirectory {
            path: workspace.to_owned(),
        },
        _ => CopyError::Io {
            op: "opening",
            path: workspace.to_owned(),
            err: e,
        },
    })
}

/// The walk (see the module docs). Kinds come from the directory entries
/// (`d_type`), so regular files cost no stat: only directories (through
/// the descriptor the walk opens anyway) and entries the filesystem gives
/// no kind for are looked at.
struct Scan<'a> {
    limits: &'a CopyLimits,
    owner: (u32, u32),
    report: ScanReport,
    entries: u64,
    /// The first directory with another owner, if any.
    foreign: Option<PathBuf>,
}

impl Scan<'_> {
    fn dir(&mut self, dir: BorrowedFd, rel: &Path, depth: u32) -> Result<(), CopyError> {
        let budget = self
            .limits
            .max_files
            .saturating_sub(self.entries)
            .saturating_add(1);
        let (mut names, truncated) =
            read_dir_typed(dir, usize::try_from(budget).unwrap_or(usize::MAX))
                .map_err(|e| io_err("reading directory", rel, e))?;
        if truncated {
            return Err(CopyError::TooManyFiles {
                limit: self.limits.max_files,
                path: rel.to_owned(),
            });
        }
        // Sorted, as the copy does, so errors name the same entry.
        names.sort_unstable();
        for (name, dtype) in names {
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
            let kind = match dtype {
                libc::DT_DIR => libc::S_IFDIR,
                libc::DT_REG => libc::S_IFREG,
                libc::DT_LNK => libc::S_IFLNK,
                libc::DT_UNKNOWN => {
                    lstat_at(dir, &name)
                        .map_err(|e| io_err("stat", &child, e))?
                        .st_mode
                        & libc::S_IFMT
                }
                _ => 0,
            };
            match kind {
                libc::S_IFDIR => {
                    let sub = open_at(
                        dir,
                        &name,
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                        0,
                    )
                    .map_err(|e| io_err("opening", &child, e))?;
                    let st = fstat(sub.as_fd()).map_err(|e| io_err("stat", &child, e))?;
                    if (st.st_uid, st.st_gid) != self.owner && self.foreign.is_none() {
                        self.foreign = Some(child.clone());
                    }
                    self.report.dirs += 1;
                    self.dir(sub.as_fd(), &child, depth + 1)?;
                }
                libc::S_IFREG => self.report.files += 1,
                libc::S_IFLNK => self.report.symlinks += 1,
                _ => self.report.masked_special.push(child),
            }
        }
        Ok(())
    }
}

fn io_err(op: &'static str, rel: &Path, err: std::io::Error) -> CopyError {
    CopyError::Io {
        op,
        path: rel.to_owned(),
        err,
    }
}

/// `/proc/self/fd/N`: how the kernel is given a directory cbrun holds.
fn fd_path(fd: BorrowedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in a fixed name")
}

/// What the overlay is made of.
struct Layers<'a> {
    /// The workspace root, opened by cbrun.
    lower: &'a OwnedFd,
    lower_st: &'a libc::stat,
    /// As real root: (on-disk uid, judge's host uid) and the same for gids,
    /// for an idmapped lower layer.
    idmap: Option<((u32, u32), (u32, u32))>,
    /// Owner of the upper layer's directories (as the judge must see them).
    upper_owner: (u32, u32),
    upper_bytes: u64,
}

/// Mounts, under `work/view`: a tmpfs (`upper_bytes`) holding `upper/`
/// and `work/`, as real root the idmapped workspace at `lower/`, and the
/// overlay at `merged/`, all `nosuid,nodev`.
fn mount_overlay(l: &Layers, work: &Path, specials: &[PathBuf]) -> Result<Mounts, String> {
    let real_root = l.idmap.is_some();
    let view = work.join("view");
    mkdir_path(&view, 0o700).map_err(|e| format!("creating {}: {e}", view.display()))?;
    let point = open_path(&view, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .map_err(|e| format!("opening {}: {e}", view.display()))?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    // 0711: the sandbox's own root walks through it to the bind source.
    let opts = format!("size={},mode=0711", l.upper_bytes);
    mount(
        Some("tmpfs"),
        fd_path(point.as_fd()).as_str(),
        Some("tmpfs"),
        flags,
        Some(opts.as_str()),
    )
    .map_err(|e| format!("tmpfs for the upper layer: {e}"))?;
    let mut mounts = Mounts {
        points: vec![view.clone()],
    };
    // Opened by name now, so the open crosses into the fresh tmpfs.
    let tmp = open_path(&view, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .map_err(|e| format!("opening the upper tmpfs: {e}"))?;
    let is_tmpfs = nix::sys::statfs::fstatfs(tmp.as_fd())
        .map(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
        .unwrap_or(false);
    if !is_tmpfs {
        return Err("the upper tmpfs is not where it was mounted".into());
    }
    let sub = |name: &str, mode| -> Result<OwnedFd, String> {
        let n = cstr(name);
        mkdir_at(tmp.as_fd(), &n, mode).map_err(|e| format!("creating {name}: {e}"))?;
        open_at(
            tmp.as_fd(),
            &n,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| format!("opening {name}: {e}"))
    };
    let up = sub("upper", 0o700)?;
    let wk = sub("work", 0o700)?;
    let merged = sub("merged", 0o755)?;
    let lower = match l.idmap {
        None => l.lower.try_clone().map_err(|e| e.to_string())?,
        Some((uid, gid)) => {
            let point = sub("lower", 0o700)?;
            let ns = crate::sys::mount::userns_mapping(uid, gid)
                .map_err(|e| format!("a user namespace for the idmap: {e}"))?;
            let tree = crate::sys::mount::clone_tree(l.lower.as_fd())
                .map_err(|e| format!("cloning the workspace mount: {e}"))?;
            crate::sys::mount::idmap_readonly(tree.as_fd(), ns.as_fd())
                .map_err(|e| format!("idmapped mount: {e}"))?;
            crate::sys::mount::attach(tree.as_fd(), point.as_fd())
                .map_err(|e| format!("attaching the idmapped workspace: {e}"))?;
            mounts.points.push(view.join("lower"));
            open_at(
                tmp.as_fd(),
                &cstr("lower"),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )
            .map_err(|e| format!("opening the idmapped workspace: {e}"))?
        }
    };
    mask_specials(l.lower.as_fd(), up.as_fd(), specials, l.upper_owner)?;
    // The merged root takes the upper root's owner, mode and times: the
    // workspace root's own, owned as the judge sees it.
    copy_attrs(up.as_fd(), l.lower_st, l.upper_owner)
        .map_err(|e| format!("upper layer root: {e}"))?;
    let base = format!(
        "lowerdir={},upperdir={},workdir={}",
        fd_path(lower.as_fd()),
        fd_path(up.as_fd()),
        fd_path(wk.as_fd())
    );
    // Real root keeps overlay metadata in trusted.* xattrs; in a user
    // namespace only user.* are allowed.
    let attempts = if real_root {
        vec![base.clone(), format!("{base},userxattr")]
    } else {
        vec![format!("{base},userxattr")]
    };
    let mut last = String::new();
    for o in &attempts {
        match mount(
            Some("overlay"),
            fd_path(merged.as_fd()).as_str(),
            Some("overlay"),
            flags,
            Some(o.as_str()),
        ) {
            Ok(()) => {
                mounts.points.push(view.join("merged"));
                return Ok(mounts);
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!("overlayfs: {last}"))
}

/// `owner`, and the mode and times of `st`, onto the upper-layer
/// directory `fd`.
fn copy_attrs(fd: BorrowedFd, st: &libc::stat, owner: (u32, u32)) -> std::io::Result<()> {
    fchown(fd, owner.0, owner.1)?;
    fchmod(fd, st.st_mode & 0o7777)?;
    futimens(
        fd,
        &[
            ts(st.st_atime, st.st_atime_nsec),
            ts(st.st_mtime, st.st_mtime_nsec),
        ],
    )
}

/// A whiteout (character device 0:0) in the upper layer at each special's
/// path hides it. Its parents are made in the upper layer with the lower
/// directories' attributes, times last (adding an entry moves them).
fn mask_specials(
    lower: BorrowedFd,
    upper: BorrowedFd,
    specials: &[PathBuf],
    owner: (u32, u32),
) -> Result<(), String> {
    // Upper directories made, by path, with the lower ones' stat.
    let mut made: BTreeMap<PathBuf, libc::stat> = BTreeMap::new();
    for rel in specials {
        let shown = crate::fsutil::quote_path(rel);
        let fail = |what: &str, e: &dyn std::fmt::Display| format!("masking {shown} ({what}): {e}");
        let parts: Vec<&OsStr> = rel.iter().collect();
        let Some((leaf, dirs)) = parts.split_last() else {
            continue;
        };
        let mut lo: Option<OwnedFd> = None;
        let mut up: Option<OwnedFd> = None;
        let mut path = PathBuf::new();
        for d in dirs {
            path.push(d);
            let name = CString::new(d.as_bytes()).map_err(|e| fail("name", &e))?;
            let dir_flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
            let l = open_at(
                lo.as_ref().map_or(lower, |f| f.as_fd()),
                &name,
                dir_flags,
                0,
            )
            .map_err(|e| fail("lower", &e))?;
            let parent = up.as_ref().map_or(upper, |f| f.as_fd());
            if !made.contains_key(&path) {
                let st = fstat(l.as_fd()).map_err(|e| fail("lower", &e))?;
                mkdir_at(parent, &name, 0o700).map_err(|e| fail("upper", &e))?;
                made.insert(path.clone(), st);
            }
            let u = open_at(parent, &name, dir_flags, 0).map_err(|e| fail("upper", &e))?;
            lo = Some(l);
            up = Some(u);
        }
        let leaf = CString::new(leaf.as_bytes()).map_err(|e| fail("name", &e))?;
        whiteout(up.as_ref().map_or(upper, |f| f.as_fd()), &leaf)
            .map_err(|e| fail("whiteout", &e))?;
    }
    // Deepest first: setting a directory's times does not touch its parent.
    let mut dirs: Vec<(&PathBuf, &libc::stat)> = made.iter().collect();
    dirs.sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
    for (path, st) in dirs {
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        // Only directories cbrun just made in its own tmpfs are walked.
        let fd = open_at(
            upper,
            &c,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| format!("masking under {}: {e}", crate::fsutil::quote_path(path)))?;
        copy_attrs(fd.as_fd(), st, owner)
            .map_err(|e| format!("masking under {}: {e}", crate::fsutil::quote_path(path)))?;
    }
    Ok(())
}

fn whiteout(dir: BorrowedFd, name: &CStr) -> nix::Result<()> {
    nix::sys::stat::mknodat(
        Some(dir.as_raw_fd()),
        name,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::empty(),
        0,
    )
}
