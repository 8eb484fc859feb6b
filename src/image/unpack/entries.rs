//! Applying one tar entry of each kind: regular files, directories,
//! symlinks, hard links, devices (dropped) and whiteouts.

use std::collections::hash_map::Entry;
use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, Seek, SeekFrom};
use std::os::fd::AsFd;

use super::error::{io_err, unsafe_err};
use super::names::{normalise, Shown};
use super::tarread::{Entry as TarEntry, TarReader};
use super::{copy_data, DirMeta, Final, UnpackError, Unpacker};
use crate::sys::at::{self, InodeId};

impl Unpacker<'_> {
    pub(super) fn file<R: BufRead>(
        &mut self,
        entry: &TarEntry,
        comps: &[&[u8]],
        name: Shown<'_>,
        tar: &mut TarReader<R>,
    ) -> Result<(), UnpackError> {
        let expected = entry.sparse.as_ref().map_or(entry.size, |s| s.real_size);
        if self.report.bytes.saturating_add(expected) > self.opts.max_bytes {
            return Err(UnpackError::TooLarge {
                entry: name.to_string(),
                limit: self.opts.max_bytes,
            });
        }
        let meta = self.meta(entry, name, true)?;
        let (parent, last) = self.parent(comps, name, true)?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        // Created with its final mode when the umask leaves that intact and
        // no xattr has to be set first (user.* needs a writable file): one
        // chmod less per file. The new descriptor is writable either way.
        let direct = meta.xattrs.is_empty() && self.umask_keeps(meta.mode);
        let create_mode = if direct { meta.mode } else { 0o600 };
        let fd = match at::open_at(parent.fd.as_fd(), &last, flags, create_mode) {
            Err(err) if at::errno_is(&err, &[libc::EEXIST]) => {
                self.remove(parent.fd.as_fd(), &last)
                    .map_err(io_err(name, "removing what was there"))?;
                at::open_at(parent.fd.as_fd(), &last, flags, create_mode)
            }
            r => r,
        }
        .map_err(io_err(name, "creating"))?;
        self.note_created(&parent, last.to_bytes());
        let file = File::from(fd);

        let copied = match &entry.sparse {
            None => copy_data(tar, &file, entry.size, name)?,
            Some(sparse) => {
                let mut copied = 0;
                for &(at, len) in &sparse.map {
                    (&file)
                        .seek(SeekFrom::Start(at))
                        .map_err(io_err(name, "seeking over a hole"))?;
                    let n = copy_data(tar, &file, len, name)?;
                    copied += n;
                    if n < len {
                        break;
                    }
                }
                if copied == entry.size {
                    // A hole at the end has no write to give the file its
                    // length.
                    file.set_len(sparse.real_size)
                        .map_err(io_err(name, "setting the length"))?;
                    sparse.real_size
                } else {
                    copied
                }
            }
        };
        if copied != expected {
            return Err(UnpackError::Truncated {
                at: format!("entry {name}"),
                why: format!("{expected} bytes of content expected, {copied} found"),
            });
        }
        self.report.bytes += copied;
        self.report.files += 1;

        // Chown first (it clears mode bits), xattrs while the file is still
        // writable by its owner, then the final mode and times.
        if let Some((uid, gid)) = meta.owner {
            at::fchown(file.as_fd(), uid, gid).map_err(io_err(name, "chown"))?;
        }
        self.set_xattrs(Some(file.as_fd()), meta.xattrs);
        if !direct {
            at::fchmod(file.as_fd(), meta.mode).map_err(io_err(name, "chmod"))?;
        }
        at::futimens(file.as_fd(), &[meta.mtime, meta.mtime])
            .map_err(io_err(name, "setting times"))?;
        Ok(())
    }

    pub(super) fn dir(
        &mut self,
        entry: &TarEntry,
        comps: &[&[u8]],
        name: Shown<'_>,
    ) -> Result<(), UnpackError> {
        let meta = self.meta(entry, name, true)?;
        self.report.dirs += 1;
        let dmeta = DirMeta {
            owner: meta.owner,
            mode: meta.mode,
            mtime: meta.mtime,
        };
        if comps.is_empty() {
            // `./`: the rootfs itself.
            let fd = at::reopen_dir_readable(self.root.as_fd()).ok();
            self.set_xattrs(fd.as_ref().map(|f| f.as_fd()), meta.xattrs);
            let id = self.root_id;
            self.add_final(id, Vec::new(), name, Some(dmeta), None);
            return Ok(());
        }
        let (parent, last) = self.parent(comps, name, true)?;
        let pfd = parent.fd.as_fd();
        // Owner-writable until the end of the layer: its entries must fit
        // in. Made with its final mode when that already allows it and the
        // umask leaves it intact (the finishing chmod is then skipped).
        let create_mode = if meta.mode & 0o700 == 0o700 && self.umask_keeps(meta.mode) {
            meta.mode
        } else {
            0o700
        };
        match at::mkdir_at(pfd, &last, create_mode) {
            Err(e) if at::errno_is(&e, &[libc::EEXIST]) => {
                let st = at::lstat_at(pfd, &last).map_err(io_err(name, "stat"))?;
                if !at::is_dir(&st) {
                    self.remove(pfd, &last)
                        .map_err(io_err(name, "removing what was there"))?;
                    at::mkdir_at(pfd, &last, create_mode)
                } else {
                    Ok(())
                }
            }
            r => r,
        }
        .map_err(io_err(name, "creating directory"))?;
        let st = at::lstat_at(pfd, &last).map_err(io_err(name, "stat"))?;
        self.note_created(&parent, last.to_bytes());
        if !meta.xattrs.is_empty() {
            let fd = at::open_at(
                pfd,
                &last,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )
            .ok();
            self.set_xattrs(fd.as_ref().map(|f| f.as_fd()), meta.xattrs);
        }
        let mut phys = parent.phys.clone();
        phys.push(last);
        self.add_final(at::id_of(&st), phys, name, Some(dmeta), None);
        Ok(())
    }

    /// Records a directory to finish; a header's metadata replaces an
    /// earlier one, a restore mode never replaces anything. An entry for
    /// the same inode at another path is stale (a directory removed
    /// earlier in the layer whose inode number came back) and is dropped.
    pub(super) fn add_final(
        &mut self,
        id: InodeId,
        phys: Vec<CString>,
        name: Shown<'_>,
        meta: Option<DirMeta>,
        restore: Option<libc::mode_t>,
    ) {
        let fresh = |phys| Final {
            phys,
            entry: name.0.to_vec(),
            meta: None,
            restore: None,
        };
        let slot = match self.layer.finals.entry(id) {
            Entry::Occupied(o) if o.get().phys != phys => {
                let slot = o.into_mut();
                *slot = fresh(phys);
                slot
            }
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => v.insert(fresh(phys)),
        };
        if meta.is_some() {
            slot.meta = meta;
            slot.entry = name.0.to_vec();
        }
        if slot.restore.is_none() {
            slot.restore = restore;
        }
    }

    pub(super) fn symlink(
        &mut self,
        entry: &TarEntry,
        comps: &[&[u8]],
        name: Shown<'_>,
    ) -> Result<(), UnpackError> {
        if entry.link.is_empty() {
            return Err(unsafe_err(name, "symlink without a target"));
        }
        // The target is kept as text; resolving it is left to whoever
        // reads the rootfs (and to our in-root resolution of parents).
        let target = CString::new(entry.link.as_slice())
            .map_err(|_| unsafe_err(name, "NUL in symlink target"))?;
        let meta = self.meta(entry, name, false)?;
        let (parent, last) = self.parent(comps, name, true)?;
        let pfd = parent.fd.as_fd();
        match at::symlink_at(&target, pfd, &last) {
            Err(e) if at::errno_is(&e, &[libc::EEXIST]) => {
                self.remove(pfd, &last)
                    .map_err(io_err(name, "removing what was there"))?;
                at::symlink_at(&target, pfd, &last)
            }
            r => r,
        }
        .map_err(io_err(name, "creating symlink"))?;
        self.note_created(&parent, last.to_bytes());
        if let Some((uid, gid)) = meta.owner {
            at::chown_at_nofollow(pfd, &last, uid, gid).map_err(io_err(name, "chown"))?;
        }
        at::utimens_at_nofollow(pfd, &last, &[meta.mtime, meta.mtime])
            .map_err(io_err(name, "setting times"))?;
        // user.* is not allowed on symlinks; none are set.
        self.set_xattrs(None, meta.xattrs);
        self.report.symlinks += 1;
        Ok(())
    }

    pub(super) fn hardlink(
        &mut self,
        entry: &TarEntry,
        comps: &[&[u8]],
        name: Shown<'_>,
    ) -> Result<(), UnpackError> {
        let target = &entry.link;
        if target.is_empty() {
            return Err(unsafe_err(name, "hard link without a target"));
        }
        let tshown = Shown(target);
        let tcomps = normalise(target)
            .map_err(|why| unsafe_err(name, format!("hard link target {tshown}: {why}")))?;
        let (tlast, tdir) = tcomps
            .split_last()
            .ok_or_else(|| unsafe_err(name, "hard link to the root"))?;
        let missing = || {
            unsafe_err(
                name,
                format!("hard link target {tshown} is not in the rootfs"),
            )
        };
        let tparent = match self.resolve(tdir, false) {
            Ok(p) => p,
            Err(e) if at::errno_is(&e, &[libc::ENOENT, libc::ENOTDIR]) => return Err(missing()),
            Err(e) => return Err(io_err(name, "resolving the hard link target")(e)),
        };
        let tlast = at::cname(tlast).map_err(io_err(name, "naming"))?;
        let tst = at::lstat_at_opt(tparent.fd.as_fd(), &tlast)
            .map_err(io_err(name, "stat of the hard link target"))?
            .ok_or_else(missing)?;
        if at::kind_bits(&tst) != libc::S_IFREG {
            return Err(unsafe_err(
                name,
                format!("hard link target {tshown} is not a regular file"),
            ));
        }
        let (parent, last) = self.parent(comps, name, true)?;
        let pfd = parent.fd.as_fd();
        match at::link_at(tparent.fd.as_fd(), &tlast, pfd, &last) {
            Err(e) if at::errno_is(&e, &[libc::EEXIST]) => {
                let st = at::lstat_at(pfd, &last).map_err(io_err(name, "stat"))?;
                if at::id_of(&st) == at::id_of(&tst) {
                    // Already that very file (a link to itself).
                    Ok(())
                } else {
                    self.remove(pfd, &last)
                        .map_err(io_err(name, "removing what was there"))?;
                    at::link_at(tparent.fd.as_fd(), &tlast, pfd, &last)
                }
            }
            r => r,
        }
        .map_err(io_err(name, "creating hard link"))?;
        self.note_created(&parent, last.to_bytes());
        self.report.hardlinks += 1;
        Ok(())
    }

    pub(super) fn device(&mut self, comps: &[&[u8]], name: Shown<'_>) -> Result<(), UnpackError> {
        let (parent, last) = self.parent(comps, name, true)?;
        self.remove(parent.fd.as_fd(), &last)
            .map_err(io_err(name, "removing what was there"))?;
        self.report.devices_dropped += 1;
        Ok(())
    }

    pub(super) fn whiteout(&mut self, comps: &[&[u8]], name: Shown<'_>) -> Result<(), UnpackError> {
        let (last, dir) = comps
            .split_last()
            .ok_or_else(|| unsafe_err(name, "names the root itself"))?;
        if *last == b".wh..wh..opq" {
            // The layer has this directory: make it if it is missing.
            let opaque = self
                .resolve(dir, true)
                .map_err(io_err(name, "resolving the opaque directory"))?;
            let mut phys = opaque.phys.clone();
            self.layer.cache.clear();
            self.prune(opaque.fd.as_fd(), opaque.id, &mut phys, 0)
                .map_err(io_err(name, "emptying the opaque directory"))?;
            self.report.opaque_dirs += 1;
            return Ok(());
        }
        if last.starts_with(b".wh..wh.") {
            self.skip(name, "aufs metadata".into());
            return Ok(());
        }
        let target = &last[4..];
        if matches!(target, b"" | b"." | b"..") {
            return Err(unsafe_err(name, "whiteout of nothing, `.` or `..`"));
        }
        self.report.whiteouts += 1;
        let parent = match self.resolve(dir, false) {
            Ok(p) => p,
            // Nothing there to hide.
            Err(e) if at::errno_is(&e, &[libc::ENOENT, libc::ENOTDIR]) => return Ok(()),
            Err(e) => return Err(io_err(name, "resolving the parent directory")(e)),
        };
        let ctarget = at::cname(target).map_err(io_err(name, "naming"))?;
        if !self
            .layer
            .created
            .contains(&self.keys.child(parent.id, target))
        {
            self.remove(parent.fd.as_fd(), &ctarget)
                .map_err(io_err(name, "removing"))?;
            return Ok(());
        }
        // This layer made it: the whiteout hides only what earlier layers
        // had, which for a directory is the part of its content this layer
        // did not create.
        let st = at::lstat_at_opt(parent.fd.as_fd(), &ctarget).map_err(io_err(name, "stat"))?;
        if st.as_ref().is_some_and(at::is_dir) {
            let mut all = dir.to_vec();
            all.push(target);
            let whited_out = self
                .resolve(&all, false)
                .map_err(io_err(name, "resolving"))?;
            let mut phys = whited_out.phys.clone();
            self.layer.cache.clear();
            self.prune(whited_out.fd.as_fd(), whited_out.id, &mut phys, 0)
                .map_err(io_err(name, "removing earlier layers' content"))?;
        }
        Ok(())
    }
}
