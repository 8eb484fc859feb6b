//! Resolving directory names inside the rootfs, symlinks included, the way
//! `openat2(RESOLVE_IN_ROOT)` does (see the parent module's docs), but in
//! user space so the physical path taken is known.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::Rc;

use super::{DirHandle, OwnerMode, Unpacker, CACHE_SLOTS, MAX_DEPTH};
use crate::sys::at::{self, InodeId};

/// Symlinks followed while resolving one name (the kernel's own limit).
const MAX_SYMLINKS: u32 = 40;

/// The directory a walk is at: one it opened, or the cached one it
/// started from (not duplicated unless the walk ends there).
enum Cur {
    Owned(OwnedFd),
    Shared(Rc<DirHandle>),
}

impl Cur {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Cur::Owned(fd) => fd.as_fd(),
            Cur::Shared(h) => h.fd.as_fd(),
        }
    }

    fn into_owned(self) -> io::Result<OwnedFd> {
        match self {
            Cur::Owned(fd) => Ok(fd),
            Cur::Shared(h) => at::open_at(h.fd.as_fd(), c".", libc::O_PATH | libc::O_DIRECTORY, 0),
        }
    }
}

impl Unpacker<'_> {
    /// The directory named by `comps` (normalised entry-name components),
    /// resolved inside the rootfs. With `create`, missing directories the
    /// name itself mentions are made (0755, owned as the layer's root); a
    /// missing directory reached through a symlink's target is ENOENT.
    pub(super) fn resolve(&mut self, comps: &[&[u8]], create: bool) -> io::Result<Rc<DirHandle>> {
        let cached = |cache: &VecDeque<(Vec<u8>, Rc<DirHandle>)>, comps: &[&[u8]]| {
            cache
                .iter()
                .find(|(k, _)| joined_is(k, comps))
                .map(|(_, h)| h.clone())
        };
        if let Some(h) = cached(&self.layer.cache, comps) {
            return Ok(h);
        }
        // A new directory is most often just made inside the last one
        // resolved: walk on from the cached parent instead of from `/`.
        // The cache is emptied by every removal, so a cached handle is what
        // a walk from `/` would give.
        let start = comps
            .split_last()
            .and_then(|(_, parent)| cached(&self.layer.cache, parent));
        let h = Rc::new(match start {
            Some(p) => self.walk_from(&p, &comps[comps.len() - 1..], create)?,
            None => self.walk(comps, create)?,
        });
        if self.layer.cache.len() >= CACHE_SLOTS {
            self.layer.cache.pop_back();
        }
        self.layer.cache.push_front((comps.join(&b'/'), h.clone()));
        Ok(h)
    }

    fn walk(&mut self, comps: &[&[u8]], create: bool) -> io::Result<DirHandle> {
        let start = (Cur::Owned(self.root_dup()?), Vec::new(), vec![self.root_id]);
        self.walk_on(start, comps, create)
    }

    /// Walks `comps` on from an already resolved directory.
    fn walk_from(
        &mut self,
        from: &Rc<DirHandle>,
        comps: &[&[u8]],
        create: bool,
    ) -> io::Result<DirHandle> {
        let start = (
            Cur::Shared(from.clone()),
            from.phys.clone(),
            from.chain.clone(),
        );
        self.walk_on(start, comps, create)
    }

    fn walk_on(
        &mut self,
        (mut cur, mut phys, mut chain): (Cur, Vec<CString>, Vec<InodeId>),
        comps: &[&[u8]],
        create: bool,
    ) -> io::Result<DirHandle> {
        // Components still to walk, and whether each may be created.
        let mut queue: VecDeque<(Vec<u8>, bool)> =
            comps.iter().map(|c| (c.to_vec(), create)).collect();
        let mut links = 0u32;
        while let Some((comp, may_create)) = queue.pop_front() {
            match comp.as_slice() {
                b"" | b"." => continue,
                b".." => {
                    // The physical parent; the root is its own parent.
                    if phys.pop().is_some() {
                        chain.pop();
                        cur = Cur::Owned(self.reopen(&phys)?);
                    }
                    continue;
                }
                _ => {}
            }
            let name = at::cname(&comp)?;
            let cur_id = chain[chain.len() - 1];
            match at::open_dir_path(cur.as_fd(), &name) {
                Ok(fd) => {
                    let st = at::fstat(fd.as_fd())?;
                    phys.push(name);
                    if phys.len() > MAX_DEPTH {
                        return Err(io::Error::other(format!(
                            "directories nested deeper than {MAX_DEPTH} levels"
                        )));
                    }
                    self.unlock_dir(cur.as_fd(), &phys, &st);
                    chain.push(at::id_of(&st));
                    cur = Cur::Owned(fd);
                }
                Err(e) if at::errno_is(&e, &[libc::ENOTDIR, libc::ELOOP]) => {
                    let st = at::lstat_at(cur.as_fd(), &name)?;
                    if at::kind_bits(&st) != libc::S_IFLNK {
                        // A file in the way.
                        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
                    }
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(io::Error::from_raw_os_error(libc::ELOOP));
                    }
                    let target = crate::fsutil::readlink_at(cur.as_fd(), &name)?;
                    if target.first() == Some(&b'/') {
                        // Absolute: from the rootfs, not the host's root.
                        phys.clear();
                        chain.truncate(1);
                        cur = Cur::Owned(self.root_dup()?);
                    }
                    for c in target.split(|b| *b == b'/').rev() {
                        queue.push_front((c.to_vec(), false));
                    }
                }
                Err(e) if may_create && at::errno_is(&e, &[libc::ENOENT]) => {
                    match at::mkdir_at(cur.as_fd(), &name, 0o755) {
                        Ok(()) => {
                            if let OwnerMode::Preserve {
                                uid_shift,
                                gid_shift,
                            } = self.opts.owner
                            {
                                at::chown_at_nofollow(cur.as_fd(), &name, uid_shift, gid_shift)?;
                            }
                            self.layer.created.insert(self.keys.child(cur_id, &comp));
                        }
                        Err(e) if at::errno_is(&e, &[libc::EEXIST]) => {}
                        Err(e) => return Err(e),
                    }
                    // Open it next, without creating again.
                    queue.push_front((comp, false));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(DirHandle {
            fd: cur.into_owned()?,
            id: chain[chain.len() - 1],
            phys,
            chain,
            live_marked: Cell::new(false),
        })
    }

    /// A new `O_PATH` handle on the rootfs.
    fn root_dup(&self) -> io::Result<OwnedFd> {
        at::open_at(self.root.as_fd(), c".", libc::O_PATH | libc::O_DIRECTORY, 0)
    }

    /// The directory at a physical path, following nothing.
    pub(super) fn reopen(&self, phys: &[CString]) -> io::Result<OwnedFd> {
        let mut cur = self.root_dup()?;
        for n in phys {
            cur = at::open_dir_path(cur.as_fd(), n)?;
        }
        Ok(cur)
    }
}

/// `key` is `comps` joined by `/` (compared without joining them).
fn joined_is(key: &[u8], comps: &[&[u8]]) -> bool {
    // Most cached names differ in length: settled without a compare.
    let len = comps.iter().map(|c| c.len()).sum::<usize>() + comps.len().saturating_sub(1);
    if len != key.len() {
        return false;
    }
    let mut rest = key;
    for (i, c) in comps.iter().enumerate() {
        if i > 0 {
            match rest.split_first() {
                Some((b'/', r)) => rest = r,
                _ => return false,
            }
        }
        match rest.strip_prefix(*c) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::joined_is;

    #[test]
    fn joined_is_matches_only_the_same_components() {
        assert!(joined_is(b"", &[]));
        assert!(joined_is(b"a", &[b"a"]));
        assert!(joined_is(b"usr/lib", &[b"usr", b"lib"]));
        assert!(!joined_is(b"usr/lib", &[b"usr"]));
        assert!(!joined_is(b"usr", &[b"usr", b"lib"]));
        assert!(!joined_is(b"usrlib", &[b"usr", b"lib"]));
        assert!(!joined_is(b"usr/lib/", &[b"usr", b"lib"]));
        assert!(!joined_is(b"a", &[]));
        assert!(!joined_is(b"", &[b"a"]));
    }
}
