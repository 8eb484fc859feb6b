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
//! reader below sees every byte. Trees nested deeper than 512 directories
//! cannot be removed (by a whiteout or a replacement): an error.
//!
//! On error the rootfs is left half-applied: callers discard it.

use std::cell::Cell;
use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

mod keys;
mod resolve;
mod tarread;
#[cfg(test)]
mod tests;

use crate::sys::at::{self, InodeId};
use keys::{IdMap, IdSet, KeySet, Salt};
use tarread::{Entry as TarEntry, TarError, TarReader};

/// Deepest entry name, in components.
pub const MAX_DEPTH: usize = 1024;
/// Extension headers (PAX, GNU long name/link, sparse maps) per entry.
const META_MAX: u64 = 4 << 20;
/// Bytes read after the end-of-archive marker (record padding).
const TRAILER_MAX: u64 = 16 << 20;
/// Entries listed in `UnpackReport::skipped`; more are skipped unlisted.
/// Deepest directory nesting the pruning of an opaque directory walks (it
/// holds one descriptor per level).
const MAX_PRUNE_DEPTH: u32 = 512;
const MAX_SKIPPED_LISTED: usize = 1000;

// ---- compression ----

/// How a layer blob is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

fn classify(head: &[u8]) -> Compression {
    if head.starts_with(GZIP_MAGIC) {
        Compression::Gzip
    } else if head.starts_with(ZSTD_MAGIC) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// The compression of the stream `r`, from its magic bytes, without
/// consuming anything. It looks only at what `fill_buf` has buffered: a
/// fresh `BufReader` holds the start; [`decompress`] copes with short
/// buffers itself.
pub fn detect(r: &mut impl BufRead) -> io::Result<Compression> {
    Ok(classify(r.fill_buf()?))
}

/// A reader of the uncompressed tar in `r` (gzip, zstd or none, detected
/// from the magic bytes; concatenated gzip members and zstd frames are
/// read through). xz and bzip2 are refused by name.
pub fn decompress<'a>(mut r: impl BufRead + 'a) -> io::Result<Box<dyn BufRead + 'a>> {
    let buf = r.fill_buf()?;
    if buf.len() >= ZSTD_MAGIC.len() || buf.is_empty() {
        let c = sniff(buf)?;
        return wrap(c, r);
    }
    // Short buffer (a pipe, a nearly drained BufReader): take the first
    // bytes out and chain them back in front.
    let mut head = Vec::with_capacity(ZSTD_MAGIC.len());
    while head.len() < ZSTD_MAGIC.len() {
        let b = r.fill_buf()?;
        if b.is_empty() {
            break;
        }
        let n = b.len().min(ZSTD_MAGIC.len() - head.len());
        head.extend_from_slice(&b[..n]);
        r.consume(n);
    }
    let c = sniff(&head)?;
    wrap(c, io::Cursor::new(head).chain(r))
}

fn sniff(head: &[u8]) -> io::Result<Compression> {
    let unsupported = |what: &str| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{what}-compressed layers are not supported (gzip, zstd or none)"),
        )
    };
    if head.starts_with(&[0xfd, b'7', b'z', b'X']) {
        return Err(unsupported("xz"));
    }
    if head.starts_with(b"BZh") {
        return Err(unsupported("bzip2"));
    }
    Ok(classify(head))
}

/// Buffer between a decompressor and the unpacker (file data is written
/// straight from it).
const DECOMPRESSED_BUF: usize = 256 << 10;

fn wrap<'a>(c: Compression, r: impl BufRead + 'a) -> io::Result<Box<dyn BufRead + 'a>> {
    Ok(match c {
        Compression::None => Box::new(r),
        Compression::Gzip => Box::new(io::BufReader::with_capacity(
            DECOMPRESSED_BUF,
            flate2::bufread::MultiGzDecoder::new(r),
        )),
        Compression::Zstd => Box::new(io::BufReader::with_capacity(
            DECOMPRESSED_BUF,
            zstd::stream::read::Decoder::with_buffer(r)?,
        )),
    })
}

// ---- options, report, errors ----

/// Who owns what a layer creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerMode {
    /// Single-id mapping: everything stays owned by the caller; the tar's
    /// ids are not applied (entries with ids other than 0:0 are counted in
    /// `ids_not_applied`).
    Caller,
    /// Root, or a newuidmap range: chown to the tar's uid/gid plus the
    /// shifts (implicitly created directories get the shifted 0:0). Needs
    /// CAP_CHOWN over those ids; a failed chown fails the layer.
    Preserve { uid_shift: u32, gid_shift: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpackOptions {
    pub owner: OwnerMode,
    pub keep_xattrs: bool,
    /// Regular-file content written, and separately the data the tars
    /// carry (any entry type, written or not), each summed over the
    /// layers of one call. Hard links count nothing.
    pub max_bytes: u64,
    /// Tar entries of any kind, whiteouts included, summed likewise.
    pub max_entries: u64,
}

impl Default for UnpackOptions {
    fn default() -> Self {
        UnpackOptions {
            owner: OwnerMode::Caller,
            keep_xattrs: true,
            max_bytes: 64 << 30,
            max_entries: 2_000_000,
        }
    }
}

/// What was applied; `apply_layers` sums its layers.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UnpackReport {
    pub files: u64,
    /// Directory entries, created or merged.
    pub dirs: u64,
    pub symlinks: u64,
    pub hardlinks: u64,
    /// `.wh.` entries (not counting opaque markers).
    pub whiteouts: u64,
    pub opaque_dirs: u64,
    /// Regular-file content written.
    pub bytes: u64,
    /// Character and block devices and FIFOs.
    pub devices_dropped: u64,
    pub setid_stripped: u64,
    pub xattrs_dropped: u64,
    /// `OwnerMode::Caller` only: entries whose tar ids were not 0:0.
    pub ids_not_applied: u64,
    /// (entry, why) for entries left out (the first 1000).
    pub skipped: Vec<(String, String)>,
}

/// Why applying a layer failed; one line, naming the tar entry.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("layer entry {entry}: refused: {why}")]
    Unsafe { entry: String, why: String },
    #[error("layer entry {entry}: {op}: {source}")]
    Io {
        entry: String,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("layer entry {entry}: more than {limit} bytes of file content")]
    TooLarge { entry: String, limit: u64 },
    #[error("layer entry {entry}: appears twice in this layer")]
    Duplicate { entry: String },
    #[error("layer entry {entry}: more than {limit} entries")]
    TooManyEntries { entry: String, limit: u64 },
    #[error("layer tar truncated at {at}: {why}")]
    Truncated { at: String, why: String },
    #[error("layer tar unreadable at {at}: {source}")]
    Tar {
        at: String,
        #[source]
        source: io::Error,
    },
    #[error("rootfs {path}: {source}")]
    Root {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// From `apply_layers`: which layer (1-based) failed.
    #[error("layer {index}: {source}")]
    Layer {
        index: usize,
        #[source]
        source: Box<UnpackError>,
    },
}

impl UnpackError {
    /// The error itself, without `Layer` wrappers.
    pub fn innermost(&self) -> &UnpackError {
        match self {
            UnpackError::Layer { source, .. } => source.innermost(),
            e => e,
        }
    }
}

fn unsafe_err(entry: Shown<'_>, why: impl Into<String>) -> UnpackError {
    UnpackError::Unsafe {
        entry: entry.to_string(),
        why: why.into(),
    }
}

fn io_err<'a>(entry: Shown<'a>, op: &'static str) -> impl FnOnce(io::Error) -> UnpackError + 'a {
    move |source| UnpackError::Io {
        entry: entry.to_string(),
        op,
        source,
    }
}

/// An entry name as messages show it (see [`shown`]), made into text only
/// when a message is: not once per entry.
#[derive(Clone, Copy)]
struct Shown<'a>(&'a [u8]);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&shown(self.0))
    }
}

/// An entry name for messages: lossy UTF-8, control characters escaped,
/// long names cut.
fn shown(name: &[u8]) -> String {
    let s = String::from_utf8_lossy(name);
    // The usual case, once per entry: nothing to escape or cut.
    if !s.is_empty() && s.len() <= 300 && !s.chars().any(char::is_control) {
        return s.into_owned();
    }
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i >= 300 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push_str("(empty name)");
    }
    out
}

/// The components of an entry name (see the module docs), or why not.
fn normalise(name: &[u8]) -> Result<Vec<&[u8]>, String> {
    if name.contains(&0) {
        return Err("NUL in name".into());
    }
    let mut out: Vec<&[u8]> = Vec::new();
    for c in name.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                if out.pop().is_none() {
                    return Err("`..` leads out of the root".into());
                }
            }
            c => out.push(c),
        }
    }
    if out.len() > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    Ok(out)
}

// ---- entry points ----

/// Applies one uncompressed layer tar to `rootfs` (an existing directory,
/// not a symlink).
pub fn apply_layer(
    rootfs: &Path,
    layer: impl BufRead,
    opts: &UnpackOptions,
) -> Result<UnpackReport, UnpackError> {
    let mut u = Unpacker::open(rootfs, opts)?;
    u.apply(layer)?;
    Ok(u.report)
}

/// Applies layers in order; the limits hold across all of them and the
/// report is their sum. Errors say which layer (1-based).
pub fn apply_layers(
    rootfs: &Path,
    layers: impl IntoIterator<Item = impl BufRead>,
    opts: &UnpackOptions,
) -> Result<UnpackReport, UnpackError> {
    let mut u = Unpacker::open(rootfs, opts)?;
    for (i, layer) in layers.into_iter().enumerate() {
        u.apply(layer).map_err(|e| UnpackError::Layer {
            index: i + 1,
            source: Box::new(e),
        })?;
    }
    Ok(u.report)
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
    rd: &mut TarReader<R>,
    mut file: &File,
    max: u64,
    name: Shown<'_>,
) -> Result<u64, UnpackError> {
    let mut done = 0u64;
    while done < max {
        let avail = rd.data().map_err(|source| UnpackError::Tar {
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
        rd.consume_data(n);
        done += n as u64;
    }
    Ok(done)
}

/// A tar stream error as an unpack error at `at`.
fn tar_error(err: TarError, at: String) -> UnpackError {
    match err {
        TarError::Truncated(what) => UnpackError::Truncated {
            at,
            why: format!("the stream ends inside {what}"),
        },
        TarError::Bad(why) => UnpackError::Tar {
            at,
            source: io::Error::other(why),
        },
        TarError::TooLarge => UnpackError::Tar {
            at,
            source: io::Error::other(format!(
                "tar extension headers too large (over {META_MAX} bytes for one entry)"
            )),
        },
        TarError::Io(source) => UnpackError::Tar { at, source },
    }
}

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
        let mut rd = TarReader::new(layer, META_MAX);
        let mut e = TarEntry::default();
        // The previous entry's name, for messages; it and the entry's name
        // buffer swap places after every entry.
        let mut last: Option<Vec<u8>> = None;
        let after = |last: &Option<Vec<u8>>| match last {
            Some(n) => format!("the entry after {}", Shown(n)),
            None => "the first entry".to_owned(),
        };
        loop {
            match rd.next(&mut e) {
                Ok(true) => {}
                Ok(false) => break,
                Err(err) => return Err(tar_error(err, after(&last))),
            }
            let name = Shown(&e.name);
            self.entries += 1;
            if self.entries > self.opts.max_entries {
                return Err(UnpackError::TooManyEntries {
                    entry: name.to_string(),
                    limit: self.opts.max_entries,
                });
            }
            // Data the tar carries counts whether we write it or not (a
            // "device" with gigabytes of data is read through too).
            self.data_seen = self.data_seen.saturating_add(e.size);
            if self.data_seen > self.opts.max_bytes {
                return Err(UnpackError::TooLarge {
                    entry: name.to_string(),
                    limit: self.opts.max_bytes,
                });
            }
            self.entry(&e, name, &mut rd)?;
            match &mut last {
                Some(l) => std::mem::swap(l, &mut e.name),
                None => last = Some(std::mem::take(&mut e.name)),
            }
        }
        if !rd.saw_end_marker() && rd.position() > 0 {
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
        rd.finish(TRAILER_MAX)
            .map_err(|err| tar_error(err, "the end-of-archive marker".into()))?;
        self.finalize()
    }

    fn entry<R: BufRead>(
        &mut self,
        e: &TarEntry,
        name: Shown<'_>,
        rd: &mut TarReader<R>,
    ) -> Result<(), UnpackError> {
        if e.kind == b'g' {
            // PAX global records: nothing in them is applied.
            return Ok(());
        }
        let comps = normalise(&e.name).map_err(|why| unsafe_err(name, why))?;
        if !self.layer.names.insert(self.keys.name(&comps)) {
            return Err(UnpackError::Duplicate {
                entry: name.to_string(),
            });
        }
        if comps.last().is_some_and(|c| c.starts_with(b".wh.")) {
            return self.whiteout(&comps, name);
        }
        match e.kind {
            b'5' => self.dir(e, &comps, name),
            // Old tars mark directories by a trailing slash on a type-NUL
            // entry.
            0 if e.name.ends_with(b"/") => self.dir(e, &comps, name),
            // Regular, contiguous, GNU sparse.
            0 | b'0' | b'7' | b'S' => self.file(e, &comps, name, rd),
            b'2' => self.symlink(e, &comps, name),
            b'1' => self.hardlink(e, &comps, name),
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
        e: &'e TarEntry,
        name: Shown<'_>,
        count_setid: bool,
    ) -> Result<Meta<'e>, UnpackError> {
        if e.pax_sparse {
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
        let mut mode = e.mode as u32 & 0o7777;
        if mode & 0o6000 != 0 {
            mode &= !0o6000;
            if count_setid {
                self.report.setid_stripped += 1;
            }
        }
        let (uid, gid) = (e.uid, e.gid);
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
            mtime: at::timespec(e.mtime.0, e.mtime.1.into()),
            xattrs: &e.xattrs,
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

    fn file<R: BufRead>(
        &mut self,
        e: &TarEntry,
        comps: &[&[u8]],
        name: Shown<'_>,
        rd: &mut TarReader<R>,
    ) -> Result<(), UnpackError> {
        let expected = e.sparse.as_ref().map_or(e.size, |s| s.real_size);
        if self.report.bytes.saturating_add(expected) > self.opts.max_bytes {
            return Err(UnpackError::TooLarge {
                entry: name.to_string(),
                limit: self.opts.max_bytes,
            });
        }
        let meta = self.meta(e, name, true)?;
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

        let copied = match &e.sparse {
            None => copy_data(rd, &file, e.size, name)?,
            Some(sparse) => {
                let mut copied = 0;
                for &(at, len) in &sparse.map {
                    (&file)
                        .seek(SeekFrom::Start(at))
                        .map_err(io_err(name, "seeking over a hole"))?;
                    let n = copy_data(rd, &file, len, name)?;
                    copied += n;
                    if n < len {
                        break;
                    }
                }
                if copied == e.size {
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

    fn dir(&mut self, e: &TarEntry, comps: &[&[u8]], name: Shown<'_>) -> Result<(), UnpackError> {
        let meta = self.meta(e, name, true)?;
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
    fn add_final(
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
        let f = match self.layer.finals.entry(id) {
            Entry::Occupied(o) if o.get().phys != phys => {
                let f = o.into_mut();
                *f = fresh(phys);
                f
            }
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => v.insert(fresh(phys)),
        };
        if meta.is_some() {
            f.meta = meta;
            f.entry = name.0.to_vec();
        }
        if f.restore.is_none() {
            f.restore = restore;
        }
    }

    fn symlink(
        &mut self,
        e: &TarEntry,
        comps: &[&[u8]],
        name: Shown<'_>,
    ) -> Result<(), UnpackError> {
        if e.link.is_empty() {
            return Err(unsafe_err(name, "symlink without a target"));
        }
        // The target is kept as text; resolving it is left to whoever
        // reads the rootfs (and to our in-root resolution of parents).
        let target = CString::new(e.link.as_slice())
            .map_err(|_| unsafe_err(name, "NUL in symlink target"))?;
        let meta = self.meta(e, name, false)?;
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

    fn hardlink(
        &mut self,
        e: &TarEntry,
        comps: &[&[u8]],
        name: Shown<'_>,
    ) -> Result<(), UnpackError> {
        let target = &e.link;
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

    fn device(&mut self, comps: &[&[u8]], name: Shown<'_>) -> Result<(), UnpackError> {
        let (parent, last) = self.parent(comps, name, true)?;
        self.remove(parent.fd.as_fd(), &last)
            .map_err(io_err(name, "removing what was there"))?;
        self.report.devices_dropped += 1;
        Ok(())
    }

    fn whiteout(&mut self, comps: &[&[u8]], name: Shown<'_>) -> Result<(), UnpackError> {
        let (last, dir) = comps
            .split_last()
            .ok_or_else(|| unsafe_err(name, "names the root itself"))?;
        if *last == b".wh..wh..opq" {
            // The layer has this directory: make it if it is missing.
            let d = self
                .resolve(dir, true)
                .map_err(io_err(name, "resolving the opaque directory"))?;
            let mut phys = d.phys.clone();
            self.layer.cache.clear();
            self.prune(d.fd.as_fd(), d.id, &mut phys, 0)
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
            let d = self
                .resolve(&all, false)
                .map_err(io_err(name, "resolving"))?;
            let mut phys = d.phys.clone();
            self.layer.cache.clear();
            self.prune(d.fd.as_fd(), d.id, &mut phys, 0)
                .map_err(io_err(name, "removing earlier layers' content"))?;
        }
        Ok(())
    }

    /// Removes from `dir` everything this layer did not create, keeping
    /// (and pruning in turn) directories this layer created or created
    /// something in.
    fn prune(
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
    fn unlock_dir(&mut self, parent: BorrowedFd, phys: &[CString], st: &libc::stat) {
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

    fn unlock_root(&mut self) -> Result<(), UnpackError> {
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
    fn root_check(&self) -> io::Result<()> {
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
    fn umask_keeps(&self, mode: libc::mode_t) -> bool {
        mode & !0o777 == 0 && mode & self.umask == 0
    }

    fn root_chmod(&self, mode: libc::mode_t) -> io::Result<()> {
        self.root_check()?;
        at::chmod_path(&self.rootfs_c, mode)
    }

    /// Gives the directories of this layer their final owner, mode and
    /// times, and restores the ones it opened up; deepest first, so each
    /// is still reachable. A directory removed or replaced later in the
    /// layer is skipped.
    fn finalize(&mut self) -> Result<(), UnpackError> {
        let mut finals: Vec<(InodeId, Final)> = self.layer.finals.drain().collect();
        // Deepest first; siblings and cousins next to each other, so the
        // walk down to each parent reuses most of the previous one.
        finals.sort_by(|a, b| {
            (b.1.phys.len().cmp(&a.1.phys.len())).then_with(|| a.1.phys.cmp(&b.1.phys))
        });
        let mut walk = PhysWalk::default();
        for (id, f) in finals {
            let Some((last, dir)) = f.phys.split_last() else {
                self.finish_root(&f)?;
                continue;
            };
            let pfd = match walk.open(self.root.as_fd(), dir) {
                Ok(p) => p,
                Err(e) if at::errno_is(&e, &[libc::ENOENT, libc::ENOTDIR, libc::ELOOP]) => continue,
                Err(e) => return Err(io_err(Shown(&f.entry), "finishing directory")(e)),
            };
            let st = at::lstat_at_opt(pfd, last).map_err(io_err(Shown(&f.entry), "stat"))?;
            if !st.is_some_and(|st| at::is_dir(&st) && at::id_of(&st) == id) {
                continue;
            }
            if let Some(m) = f.meta {
                if let Some((uid, gid)) = m.owner {
                    at::chown_at_nofollow(pfd, last, uid, gid)
                        .map_err(io_err(Shown(&f.entry), "chown"))?;
                }
                // `st` is from before the chown, which keeps a directory's
                // mode bits; setid bits are never in `m.mode`.
                let current = st.map_or(0, |st| st.st_mode & 0o7777);
                if current != m.mode {
                    at::chmod_at_checked(pfd, last, m.mode)
                        .map_err(io_err(Shown(&f.entry), "chmod"))?;
                }
                at::utimens_at_nofollow(pfd, last, &[m.mtime, m.mtime])
                    .map_err(io_err(Shown(&f.entry), "setting times"))?;
            } else if let Some(mode) = f.restore {
                at::chmod_at_checked(pfd, last, mode)
                    .map_err(io_err(Shown(&f.entry), "restoring mode"))?;
            }
        }
        Ok(())
    }

    fn finish_root(&self, f: &Final) -> Result<(), UnpackError> {
        let root_err = |source| UnpackError::Root {
            path: self.rootfs.clone(),
            source,
        };
        if let Some(m) = f.meta {
            if let Some((uid, gid)) = m.owner {
                self.root_check().map_err(root_err)?;
                at::lchown_path(&self.rootfs_c, uid, gid).map_err(root_err)?;
            }
            self.root_chmod(m.mode).map_err(root_err)?;
            at::utimens_path_nofollow(&self.rootfs_c, &[m.mtime, m.mtime]).map_err(root_err)?;
        } else if let Some(mode) = f.restore {
            self.root_chmod(mode).map_err(root_err)?;
        }
        Ok(())
    }
}

/// Removes `name` in `dir`, a whole tree if it is a directory, never
/// following symlinks. `Ok(false)` when there was nothing to remove.
fn remove_entry(dir: BorrowedFd, name: &CStr) -> io::Result<bool> {
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
