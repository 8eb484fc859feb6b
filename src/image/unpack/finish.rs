//! The end of a layer and the removal of earlier layers' content: opaque
//! directories pruned, directories opened up for the layer and restored,
//! every directory given its final owner, mode and times.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::error::io_err;
use super::names::Shown;
use super::{Final, UnpackError, Unpacker, MAX_PRUNE_DEPTH};
use crate::sys::at::{self, InodeId};

/// Handles on the directories of one physical path from the root, kept
/// from one lookup to the next: finishing directories in sorted order then
/// opens only the components that differ from the previous path. Only a
/// directory deeper than every one finished so far is ever walked through,
/// so no handle kept here has had its mode changed yet.
#[derive(Default)]
struct PhysWalk {
    names: Vec<CString>,
    /// `fds[i]` is the directory `names[..=i]`.
    fds: Vec<OwnedFd>,
}

impl PhysWalk {
    fn open<'a>(
        &'a mut self,
        root: BorrowedFd<'a>,
        path: &[CString],
    ) -> io::Result<BorrowedFd<'a>> {
        let common = self
            .names
            .iter()
            .zip(path)
            .take_while(|(a, b)| a == b)
            .count();
        self.names.truncate(common);
        self.fds.truncate(common);
        for name in &path[common..] {
            let from = self.fds.last().map_or(root, |f| f.as_fd());
            let fd = at::open_dir_path(from, name)?;
            self.fds.push(fd);
            self.names.push(name.clone());
        }
        Ok(self.fds.last().map_or(root, |f| f.as_fd()))
    }
}

impl Unpacker<'_> {
    /// Removes from `dir` everything this layer did not create, keeping
    /// (and pruning in turn) directories this layer created or created
    /// something in.
    pub(super) fn prune(
        &mut self,
        dir: BorrowedFd,
        dir_id: InodeId,
        phys: &mut Vec<CString>,
        depth: u32,
    ) -> io::Result<()> {
        let names = {
            let rd = at::reopen_dir_readable(dir)?;
            at::read_dir_names(rd.as_fd(), usize::MAX)?.0
        };
        for child in names {
            let Some(st) = at::lstat_at_opt(dir, &child)? else {
                continue;
            };
            let made = self
                .layer
                .created
                .contains(&self.keys.child(dir_id, child.to_bytes()));
            let keep = made || (at::is_dir(&st) && self.layer.live.contains(&at::id_of(&st)));
            if !keep {
                remove_entry(dir, &child)?;
                continue;
            }
            if at::is_dir(&st) {
                if depth + 1 >= MAX_PRUNE_DEPTH {
                    return Err(io::Error::other("directory tree nested too deep"));
                }
                let sub = at::open_dir_path(dir, &child)?;
                phys.push(child);
                self.unlock_dir(dir, phys, &st);
                self.prune(sub.as_fd(), at::id_of(&st), phys, depth + 1)?;
                phys.pop();
            }
        }
        Ok(())
    }

    /// Unprivileged, a directory without owner rwx (left so by an earlier
    /// layer) is opened up for this layer and its mode restored at the
    /// end. `phys` names it; `parent` holds it. Best effort: a failure
    /// shows as EACCES where it matters.
    pub(super) fn unlock_dir(&mut self, parent: BorrowedFd, phys: &[CString], st: &libc::stat) {
        if st.st_mode & 0o700 == 0o700 || st.st_uid != self.euid {
            return;
        }
        let Some(last) = phys.last() else {
            return;
        };
        let old = st.st_mode & 0o7777;
        if at::chmod_at_checked(parent, last, old | 0o700).is_ok() {
            let name = phys_bytes(phys);
            self.add_final(at::id_of(st), phys.to_vec(), Shown(&name), None, Some(old));
        }
    }

    pub(super) fn unlock_root(&mut self) -> Result<(), UnpackError> {
        let st = at::fstat(self.root.as_fd()).map_err(|source| UnpackError::Root {
            path: self.rootfs.clone(),
            source,
        })?;
        if st.st_mode & 0o700 == 0o700 || st.st_uid != self.euid {
            return Ok(());
        }
        let old = st.st_mode & 0o7777;
        self.root_chmod(old | 0o700)
            .map_err(|source| UnpackError::Root {
                path: self.rootfs.clone(),
                source,
            })?;
        let id = self.root_id;
        self.add_final(id, Vec::new(), Shown(b"."), None, Some(old));
        Ok(())
    }

    /// The rootfs itself is changed through the caller's path (trusted,
    /// checked to still be our root): Linux cannot chmod an `O_PATH` fd.
    pub(super) fn root_check(&self) -> io::Result<()> {
        let st = at::lstat_path(&self.rootfs_c)?;
        if at::is_dir(&st) && at::id_of(&st) == self.root_id {
            Ok(())
        } else {
            Err(io::Error::other(
                "the rootfs path no longer names the rootfs",
            ))
        }
    }

    /// Whether creating with `mode` gives exactly `mode`: plain permission
    /// bits the umask leaves alone.
    pub(super) fn umask_keeps(&self, mode: libc::mode_t) -> bool {
        mode & !0o777 == 0 && mode & self.umask == 0
    }

    pub(super) fn root_chmod(&self, mode: libc::mode_t) -> io::Result<()> {
        self.root_check()?;
        at::chmod_path(&self.rootfs_c, mode)
    }

    /// Gives the directories of this layer their final owner, mode and
    /// times, and restores the ones it opened up; deepest first, so each
    /// is still reachable. A directory removed or replaced later in the
    /// layer is skipped.
    pub(super) fn finalize(&mut self) -> Result<(), UnpackError> {
        let mut finals: Vec<(InodeId, Final)> = self.layer.finals.drain().collect();
        // Deepest first; siblings and cousins next to each other, so the
        // walk down to each parent reuses most of the previous one.
        finals.sort_by(|a, b| {
            (b.1.phys.len().cmp(&a.1.phys.len())).then_with(|| a.1.phys.cmp(&b.1.phys))
        });
        let mut walk = PhysWalk::default();
        for (id, dir_final) in finals {
            let Some((last, dir)) = dir_final.phys.split_last() else {
                self.finish_root(&dir_final)?;
                continue;
            };
            let pfd = match walk.open(self.root.as_fd(), dir) {
                Ok(p) => p,
                Err(e) if at::errno_is(&e, &[libc::ENOENT, libc::ENOTDIR, libc::ELOOP]) => continue,
                Err(e) => return Err(io_err(Shown(&dir_final.entry), "finishing directory")(e)),
            };
            let st =
                at::lstat_at_opt(pfd, last).map_err(io_err(Shown(&dir_final.entry), "stat"))?;
            if !st.is_some_and(|st| at::is_dir(&st) && at::id_of(&st) == id) {
                continue;
            }
            if let Some(meta) = dir_final.meta {
                if let Some((uid, gid)) = meta.owner {
                    at::chown_at_nofollow(pfd, last, uid, gid)
                        .map_err(io_err(Shown(&dir_final.entry), "chown"))?;
                }
                // `st` is from before the chown, which keeps a directory's
                // mode bits; setid bits are never in `meta.mode`.
                let current = st.map_or(0, |st| st.st_mode & 0o7777);
                if current != meta.mode {
                    at::chmod_at_checked(pfd, last, meta.mode)
                        .map_err(io_err(Shown(&dir_final.entry), "chmod"))?;
                }
                at::utimens_at_nofollow(pfd, last, &[meta.mtime, meta.mtime])
                    .map_err(io_err(Shown(&dir_final.entry), "setting times"))?;
            } else if let Some(mode) = dir_final.restore {
                at::chmod_at_checked(pfd, last, mode)
                    .map_err(io_err(Shown(&dir_final.entry), "restoring mode"))?;
            }
        }
        Ok(())
    }

    pub(super) fn finish_root(&self, dir_final: &Final) -> Result<(), UnpackError> {
        let root_err = |source| UnpackError::Root {
            path: self.rootfs.clone(),
            source,
        };
        if let Some(meta) = dir_final.meta {
            if let Some((uid, gid)) = meta.owner {
                self.root_check().map_err(root_err)?;
                at::lchown_path(&self.rootfs_c, uid, gid).map_err(root_err)?;
            }
            self.root_chmod(meta.mode).map_err(root_err)?;
            at::utimens_path_nofollow(&self.rootfs_c, &[meta.mtime, meta.mtime])
                .map_err(root_err)?;
        } else if let Some(mode) = dir_final.restore {
            self.root_chmod(mode).map_err(root_err)?;
        }
        Ok(())
    }
}

/// Removes `name` in `dir`, a whole tree if it is a directory, never
/// following symlinks. `Ok(false)` when there was nothing to remove.
pub(super) fn remove_entry(dir: BorrowedFd, name: &CStr) -> io::Result<bool> {
    let Some(st) = at::lstat_at_opt(dir, name)? else {
        return Ok(false);
    };
    if at::is_dir(&st) {
        crate::sys::dir::remove_tree_at(dir, name)?;
    } else {
        at::unlink_at(dir, name, 0)?;
    }
    Ok(true)
}

fn phys_bytes(phys: &[CString]) -> Vec<u8> {
    let parts: Vec<&[u8]> = phys.iter().map(|c| c.to_bytes()).collect();
    parts.join(&b'/')
}
