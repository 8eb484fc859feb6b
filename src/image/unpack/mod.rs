//! Applying OCI image layers (tar streams, maybe compressed) to a rootfs
//! directory, rootless, with layer contents treated as hostile input.
//!
//! The stream is read by our own tar reader ([`tarread`]), which hands out
//! file content straight from the stream's buffer. Every filesystem write
//! is made with `*at` calls relative to an open directory, naming one
//! component at a time, never following a symlink in the last component.
//!
//! Names. Leading `/` is stripped (as tar does), `.` and empty components
//! are dropped and `..` is applied lexically within the name; a name whose
//! `..` would leave the root, or that holds a NUL, is refused (the layer
//! fails). Names deeper than [`MAX_DEPTH`] components are refused.
//!
//! Parent directories are resolved component by component from a handle on
//! the rootfs, each opened with `O_PATH | O_NOFOLLOW | O_DIRECTORY`. A
//! component that is a symlink (planted by this or an earlier layer) is
//! resolved *inside* the rootfs, as container runtimes do and as
//! `openat2(RESOLVE_IN_ROOT)` would: an absolute target restarts at the
//! rootfs, `..` stops at it, at most 40 links per name. So after
//! `lib -> /usr/lib`, `lib/x` writes the rootfs's `usr/lib/x`, and after
//! `etc -> /etc`, `etc/passwd` fails: inside the rootfs that link points
//! at itself. Missing parents named by the entry are created (0755, owned
//! as the layer's root); a missing directory named only by a symlink's
//! target is an error (`esc -> /home/x` then `esc/f` fails unless the
//! rootfs has `home/x`). The
//! walk is done in user space rather than with `openat2` so that it also
//! yields the physical path it took (needed to finish directories); its
//! in-root semantics are checked against `openat2` in the tests. It relies
//! on nothing else writing to the rootfs while a layer is applied.
//!
//! Entry types. Regular files (also contiguous and GNU sparse ones; a
//! sparse file's holes stay holes: only its stored pieces are written,
//! each at its offset), directories, symlinks (the target kept as text,
//! whatever it is) and hard links (the target name resolved
//! like any entry name, inside the rootfs; it must already be a regular
//! file there, from this or an earlier layer). Character and block
//! devices and FIFOs are dropped and counted (`devices_dropped`); whatever
//! an earlier layer had at their path is removed, as the layer says the
//! path is something else. GNU long names and links and PAX headers are
//! handled by the reader; global PAX headers are ignored; other types
//! are skipped and listed in `skipped`.
//!
//! Duplicates. A name may appear once per layer: a second entry whose name
//! normalises to the same path (`./a`, `a`, `a/`) fails the layer, whatever
//! the two entries' types (a later layer replacing the path is ordinary
//! layering). A whiteout is a name of its own: `.wh.x` beside `x` is fine,
//! `.wh.x` twice is not. The names seen are kept per layer as sha256
//! digests, 32 bytes each, however long the names.
//!
//! Replacing. A directory over a directory merges (the newer header's
//! owner, mode and times win); anything else removes what was there first
//! (a whole tree for a directory), so writing a file never writes through a
//! hard link or a symlink left by an earlier layer.
//!
//! Whiteouts (OCI): `d/.wh.n` removes `d/n` as earlier layers left it and
//! is not created; `d/.wh..wh..opq` removes everything earlier layers put
//! in `d`. Neither touches what the same layer creates, before or after
//! the marker: the entries a layer creates are recorded (by parent
//! directory inode and name, and every directory above them) and kept.
//! Other `.wh..wh.` names (aufs metadata) are skipped.
//!
//! Metadata. Permission bits are applied after a file's content and a
//! directory's final owner, mode and times at the end of the layer,
//! deepest first, so read-only directories can be filled; setuid and setgid
//! bits are stripped and counted, the sticky bit kept. mtimes (PAX
//! fractional ones too) are kept; atime is set to the mtime. A directory
//! that a layer writes into without an entry of its own gets the time of
//! the write, as with other unpackers. Hard links share their target's
//! inode and metadata. Ownership per [`OwnerMode`].
//! Unprivileged, a directory left read-only by an earlier layer is opened
//! up (u+rwx) while this layer writes into it and restored afterwards.
//!
//! xattrs (`SCHILY.xattr.*` PAX records), when `keep_xattrs`: `user.*` set,
//! `trusted.*` only as root, `security.capability` always dropped,
//! `system.*` (ACLs: their ids would not be shifted) dropped, other
//! `security.*` attempted. Whatever is not set, for any reason, is counted
//! in `xattrs_dropped`; symlinks get none.
//!
//! Limits: the caps in [`UnpackOptions`] hold across all layers of one
//! call; PAX and GNU extension headers may total at most 4 MiB per entry,
//! and at most 16 MiB may follow the end-of-archive marker. A stream that
//! ends inside an entry or a header, or without the end-of-archive marker,
//! is an error (an empty stream is an empty layer). The whole stream is
//! read, so a compression trailer (gzip CRC) is checked and a digesting
//! reader below sees every byte. Removing a tree (a whiteout, a
//! replacement) holds two descriptors at any depth; pruning the part of
//! an opaque directory a layer keeps stops with an error below 512
//! directories.
//!
//! On error the rootfs is left half-applied: callers discard it.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, BufRead, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

mod compress;
mod entries;
mod error;
mod finish;
mod keys;
mod names;
mod options;
mod resolve;
mod tarread;
#[cfg(test)]
mod tests;

use crate::sys::at::{self, InodeId};
pub use compress::{decompress, detect, Compression};
pub use error::UnpackError;
use error::{io_err, tar_error, unsafe_err};
use finish::remove_entry;
use keys::{IdMap, IdSet, KeySet, Salt};
use names::{normalise, Shown};
pub use options::{OwnerMode, UnpackOptions, UnpackReport};
use tarread::{Entry as TarEntry, TarReader};

/// Deepest entry name, in components.
pub const MAX_DEPTH: usize = 1024;
/// Extension headers (PAX, GNU long name/link, sparse maps) per entry.
const META_MAX: u64 = 4 << 20;
/// Bytes read after the end-of-archive marker (record padding).
const TRAILER_MAX: u64 = 16 << 20;
/// Entries listed in `UnpackReport::skipped`; more are skipped unlisted.
const MAX_SKIPPED_LISTED: usize = 1000;
/// Deepest directory nesting the pruning of an opaque directory walks (it
/// holds one descriptor per level).
const MAX_PRUNE_DEPTH: u32 = 512;

// ---- entry points ----

/// Applies one uncompressed layer tar to `rootfs` (an existing directory,
/// not a symlink).
pub fn apply_layer(
    rootfs: &Path,
    layer: impl BufRead,
    opts: &UnpackOptions,
) -> Result<UnpackReport, UnpackError> {
    let mut unpacker = Unpacker::open(rootfs, opts)?;
    unpacker.apply(layer)?;
    Ok(unpacker.report)
}

/// Applies layers in order; the limits hold across all of them and the
/// report is their sum. Errors say which layer (1-based).
pub fn apply_layers(
    rootfs: &Path,
    layers: impl IntoIterator<Item = impl BufRead>,
    opts: &UnpackOptions,
) -> Result<UnpackReport, UnpackError> {
    let mut unpacker = Unpacker::open(rootfs, opts)?;
    for (i, layer) in layers.into_iter().enumerate() {
        unpacker.apply(layer).map_err(|e| UnpackError::Layer {
            index: i + 1,
            err: Box::new(e),
        })?;
    }
    Ok(unpacker.report)
}

// ---- the unpacker ----

/// A directory reached by resolution.
struct DirHandle {
    /// `O_PATH` handle.
    fd: OwnedFd,
    id: InodeId,
    /// Names of the real directories from the root to this one.
    phys: Vec<CString>,
    /// Identities of the root and every directory of `phys`.
    chain: Vec<InodeId>,
    /// `chain` is already in `LayerState::live`.
    live_marked: Cell<bool>,
}

/// Owner, mode and mtime a directory gets at the end of its layer.
#[derive(Clone, Copy)]
struct DirMeta {
    owner: Option<(u32, u32)>,
    mode: libc::mode_t,
    mtime: libc::timespec,
}

/// A directory to finish at the end of the layer.
struct Final {
    phys: Vec<CString>,
    /// The entry's name, for messages.
    entry: Vec<u8>,
    /// From this layer's header for it; wins over `restore`.
    meta: Option<DirMeta>,
    /// Its mode before this layer opened it up.
    restore: Option<libc::mode_t>,
}

#[derive(Default)]
struct LayerState {
    /// Entries this layer created, by parent directory and name
    /// (`Salt::child`).
    created: KeySet,
    /// Directories with something this layer created below them.
    live: IdSet,
    finals: IdMap<Final>,
    /// sha256 of every normalised entry name of this layer.
    names: KeySet,
    /// Recently resolved parents by name. Cleared on every removal, the
    /// only way a resolved name can come to mean something else.
    cache: VecDeque<(Vec<u8>, Rc<DirHandle>)>,
}

impl LayerState {
    /// Empties it for the next layer, keeping the tables' room: the next
    /// layer is likely of a similar size, and growing a table rehashes it.
    fn clear(&mut self) {
        let LayerState {
            created,
            live,
            finals,
            names,
            cache,
        } = self;
        created.clear();
        live.clear();
        finals.clear();
        names.clear();
        cache.clear();
    }
}

const CACHE_SLOTS: usize = 8;

/// Metadata of a file, directory or symlink entry.
struct Meta<'e> {
    mode: libc::mode_t,
    owner: Option<(u32, u32)>,
    mtime: libc::timespec,
    xattrs: &'e [(Vec<u8>, Vec<u8>)],
}

struct Unpacker<'o> {
    opts: &'o UnpackOptions,
    rootfs: PathBuf,
    rootfs_c: CString,
    /// `O_PATH` handle on the rootfs.
    root: OwnedFd,
    root_id: InodeId,
    euid: u32,
    /// The process's file mode creation mask.
    umask: libc::mode_t,
    report: UnpackReport,
    entries: u64,
    /// Entry data in the tars (sparse files at their stored size).
    data_seen: u64,
    layer: LayerState,
    keys: Salt,
}

/// Copies up to `max` bytes of the current entry's data into `file`,
/// straight from the stream's buffer; the bytes copied (fewer only at the
/// entry's end or where the stream ends early).
fn copy_data<R: BufRead>(
    tar: &mut TarReader<R>,
    mut file: &File,
    max: u64,
    name: Shown<'_>,
) -> Result<u64, UnpackError> {
    let mut done = 0u64;
    while done < max {
        let avail = tar.data().map_err(|source| UnpackError::Tar {
            at: format!("entry {name}"),
            source,
        })?;
        if avail.is_empty() {
            break;
        }
        let n = avail
            .len()
            .min(usize::try_from(max - done).unwrap_or(usize::MAX));
        file.write_all(&avail[..n])
            .map_err(io_err(name, "writing"))?;
        tar.consume_data(n);
        done += n as u64;
    }
    Ok(done)
}

/// The umask, read without leaving it changed (there is no call that only
/// reads it; nothing else creates files while an unpack starts).
fn current_umask() -> libc::mode_t {
    use nix::sys::stat::{umask, Mode};
    let old = umask(Mode::from_bits_truncate(0o077));
    umask(old);
    old.bits()
}

impl<'o> Unpacker<'o> {
    fn open(rootfs: &Path, opts: &'o UnpackOptions) -> Result<Self, UnpackError> {
        let root_err = |source| UnpackError::Root {
            path: rootfs.to_owned(),
            source,
        };
        let rootfs_c = at::cname(rootfs.as_os_str().as_bytes()).map_err(root_err)?;
        // O_PATH: usable whatever the root's mode; O_NOFOLLOW: the caller
        // gives the real directory.
        let root = at::open_path(rootfs, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .map_err(root_err)?;
        let st = at::fstat(root.as_fd()).map_err(root_err)?;
        Ok(Unpacker {
            opts,
            rootfs: rootfs.to_owned(),
            rootfs_c,
            root,
            root_id: at::id_of(&st),
            euid: nix::unistd::geteuid().as_raw(),
            umask: current_umask(),
            report: UnpackReport::default(),
            entries: 0,
            data_seen: 0,
            layer: LayerState::default(),
            keys: Salt::new(),
        })
    }

    fn apply(&mut self, layer: impl BufRead) -> Result<(), UnpackError> {
        self.layer.clear();
        self.unlock_root()?;
        let mut tar = TarReader::new(layer, META_MAX);
        let mut entry = TarEntry::default();
        // The previous entry's name, for messages; it and the entry's name
        // buffer swap places after every entry.
        let mut last: Option<Vec<u8>> = None;
        let after = |last: &Option<Vec<u8>>| match last {
            Some(n) => format!("the entry after {}", Shown(n)),
            None => "the first entry".to_owned(),
        };
        loop {
            match tar.next(&mut entry) {
                Ok(true) => {}
                Ok(false) => break,
                Err(err) => return Err(tar_error(err, after(&last))),
            }
            let name = Shown(&entry.name);
            self.entries += 1;
            if self.entries > self.opts.max_entries {
                return Err(UnpackError::TooManyEntries {
                    entry: name.to_string(),
                    limit: self.opts.max_entries,
                });
            }
            // Data the tar carries counts whether we write it or not (a
            // "device" with gigabytes of data is read through too).
            self.data_seen = self.data_seen.saturating_add(entry.size);
            if self.data_seen > self.opts.max_bytes {
                return Err(UnpackError::TooLarge {
                    entry: name.to_string(),
                    limit: self.opts.max_bytes,
                });
            }
            self.entry(&entry, name, &mut tar)?;
            match &mut last {
                Some(l) => std::mem::swap(l, &mut entry.name),
                None => last = Some(std::mem::take(&mut entry.name)),
            }
        }
        if !tar.saw_end_marker() && tar.position() > 0 {
            return Err(UnpackError::Truncated {
                at: match &last {
                    Some(n) => format!("the end, after entry {}", Shown(n)),
                    None => "the start".to_owned(),
                },
                why: "no end-of-archive marker".into(),
            });
        }
        // Read the padding through: a compressed stream's trailer is
        // checked and a digesting reader below sees every byte.
        tar.finish(TRAILER_MAX)
            .map_err(|err| tar_error(err, "the end-of-archive marker".into()))?;
        self.finalize()
    }

    fn entry<R: BufRead>(
        &mut self,
        entry: &TarEntry,
        name: Shown<'_>,
        tar: &mut TarReader<R>,
    ) -> Result<(), UnpackError> {
        if entry.kind == b'g' {
            // PAX global records: nothing in them is applied.
            return Ok(());
        }
        let comps = normalise(&entry.name).map_err(|why| unsafe_err(name, why))?;
        if !self.layer.names.insert(self.keys.name(&comps)) {
            return Err(UnpackError::Duplicate {
                entry: name.to_string(),
            });
        }
        if comps.last().is_some_and(|c| c.starts_with(b".wh.")) {
            return self.whiteout(&comps, name);
        }
        match entry.kind {
            b'5' => self.dir(entry, &comps, name),
            // Old tars mark directories by a trailing slash on a type-NUL
            // entry.
            0 if entry.name.ends_with(b"/") => self.dir(entry, &comps, name),
            // Regular, contiguous, GNU sparse.
            0 | b'0' | b'7' | b'S' => self.file(entry, &comps, name, tar),
            b'2' => self.symlink(entry, &comps, name),
            b'1' => self.hardlink(entry, &comps, name),
            // Character and block devices, FIFOs.
            b'3' | b'4' | b'6' => self.device(&comps, name),
            other => {
                self.skip(name, format!("unsupported entry type {:?}", other as char));
                Ok(())
            }
        }
    }

    fn skip(&mut self, name: Shown<'_>, why: String) {
        if self.report.skipped.len() < MAX_SKIPPED_LISTED {
            self.report.skipped.push((name.to_string(), why));
        }
    }

    /// Mode (setid stripped and counted), owner and times from the header
    /// and PAX records.
    fn meta<'e>(
        &mut self,
        entry: &'e TarEntry,
        name: Shown<'_>,
        count_setid: bool,
    ) -> Result<Meta<'e>, UnpackError> {
        if entry.pax_sparse {
            // PAX sparse files (what `tar --format=posix --sparse` writes)
            // keep their real name and their map in these records and the
            // entry's data; taken as a plain entry they would land as
            // `GNUSparseFile.N/NAME` holding the map. Refused rather than
            // unpacked wrong.
            return Err(UnpackError::Tar {
                at: format!("entry {name}"),
                source: io::Error::other(
                    "PAX sparse file (GNU.sparse.* records) is not supported; \
                     repack the layer without --sparse or in GNU format",
                ),
            });
        }
        let mut mode = entry.mode as u32 & 0o7777;
        if mode & 0o6000 != 0 {
            mode &= !0o6000;
            if count_setid {
                self.report.setid_stripped += 1;
            }
        }
        let (uid, gid) = (entry.uid, entry.gid);
        let owner = match self.opts.owner {
            OwnerMode::Caller => {
                if (uid, gid) != (0, 0) {
                    self.report.ids_not_applied += 1;
                }
                None
            }
            OwnerMode::Preserve {
                uid_shift,
                gid_shift,
            } => {
                let shift = |id: u64, by: u32, what: &str| {
                    u32::try_from(id)
                        .ok()
                        .and_then(|id| id.checked_add(by))
                        .filter(|id| *id != u32::MAX)
                        .ok_or_else(|| {
                            unsafe_err(
                                name,
                                format!("{what} {id} (shifted by {by}) is out of range"),
                            )
                        })
                };
                Some((shift(uid, uid_shift, "uid")?, shift(gid, gid_shift, "gid")?))
            }
        };
        Ok(Meta {
            mode,
            owner,
            mtime: at::timespec(entry.mtime.0, entry.mtime.1.into()),
            xattrs: &entry.xattrs,
        })
    }

    /// Sets the xattrs allowed (module docs) on `fd`; counts the rest.
    fn set_xattrs(&mut self, fd: Option<BorrowedFd>, xattrs: &[(Vec<u8>, Vec<u8>)]) {
        for (name, value) in xattrs {
            let allowed = self.opts.keep_xattrs
                && name.as_slice() != b"security.capability"
                && !name.starts_with(b"system.")
                && (!name.starts_with(b"trusted.") || self.euid == 0);
            let set = allowed
                && match (fd, CString::new(name.as_slice())) {
                    (Some(fd), Ok(cname)) => at::fsetxattr(fd, &cname, value).is_ok(),
                    _ => false,
                };
            if !set {
                self.report.xattrs_dropped += 1;
            }
        }
    }

    /// Removes `name` in `dir` (a whole tree for a directory).
    fn remove(&mut self, dir: BorrowedFd, name: &CStr) -> io::Result<bool> {
        self.layer.cache.clear();
        remove_entry(dir, name)
    }

    /// Records that this layer created `name` in `parent`.
    fn note_created(&mut self, parent: &DirHandle, name: &[u8]) {
        self.layer.created.insert(self.keys.child(parent.id, name));
        if !parent.live_marked.get() {
            self.layer.live.extend(parent.chain.iter().copied());
            parent.live_marked.set(true);
        }
    }

    /// The parent directory of the entry `comps` and its last component.
    fn parent(
        &mut self,
        comps: &[&[u8]],
        name: Shown<'_>,
        create: bool,
    ) -> Result<(Rc<DirHandle>, CString), UnpackError> {
        let (last, dir) = comps
            .split_last()
            .ok_or_else(|| unsafe_err(name, "names the root itself"))?;
        let parent = self
            .resolve(dir, create)
            .map_err(io_err(name, "resolving the parent directory"))?;
        let last = at::cname(last).map_err(io_err(name, "naming"))?;
        Ok((parent, last))
    }
}
