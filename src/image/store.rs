//! The local image store: content-addressed blobs, name:tag references,
//! reserved places for unpacked root filesystems, locking and garbage
//! collection. The on-disk layout is described in [`super`].

use std::collections::BTreeSet;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oci_spec::image::{Descriptor, ImageConfiguration, ImageManifest};
use serde::{Deserialize, Serialize};

use super::digest::{Digest, DigestReader, DigestWriter};
use super::hasher::{ThreadedDigestReader, THREAD_MIN};
use super::layout::{self, MAX_JSON_SIZE};

/// Temp entries older than this are removed when a store is opened.
pub const STALE_TMP_AGE: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {op}: {source}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    #[error("image store {}: {why}", path.display())]
    Root { path: PathBuf, why: String },
    #[error("image reference {input:?}: {why}")]
    BadReference { input: String, why: String },
    #[error("image {0} is not in the store")]
    NotFound(String),
    #[error("{what}: blob {digest} is not in the store")]
    MissingBlob { what: String, digest: Digest },
    #[error("{what}: content digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        what: String,
        expected: Digest,
        actual: Digest,
    },
    #[error("{what}: {why}")]
    Invalid { what: String, why: String },
    #[error("image store {}: {why}", path.display())]
    Busy { path: PathBuf, why: String },
}

fn io_err(path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { path, op, source }
}

// ---------------------------------------------------------------------------
// References

/// A parsed image reference: `name[:tag][@sha256:<hex>]`. Parsing a bare
/// name gives the tag `latest`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ImageRef {
    pub name: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

impl ImageRef {
    /// Parse `name[:tag][@digest]` (tag `latest` when neither is given).
    pub fn parse(input: &str) -> Result<ImageRef, StoreError> {
        let bad = |why: String| StoreError::BadReference {
            input: input.to_owned(),
            why,
        };
        let (rest, digest) = match input.split_once('@') {
            Some((rest, d)) => {
                let d = Digest::parse(d).map_err(|_| {
                    bad(format!(
                        "digest {d:?}: expected sha256:<64 lowercase hex digits>"
                    ))
                })?;
                (rest, Some(d))
            }
            None => (input, None),
        };
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        check_name(name).map_err(bad)?;
        if let Some(t) = tag {
            check_tag(t).map_err(bad)?;
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_owned()),
            (None, Some(_)) => None,
            (None, None) => Some("latest".to_owned()),
        };
        Ok(ImageRef {
            name: name.to_owned(),
            tag,
            digest,
        })
    }

    /// `name:tag` from separate parts, both validated.
    pub fn with_tag(name: &str, tag: &str) -> Result<ImageRef, StoreError> {
        let bad = |why: String| StoreError::BadReference {
            input: format!("{name}:{tag}"),
            why,
        };
        check_name(name).map_err(bad)?;
        check_tag(tag).map_err(bad)?;
        Ok(ImageRef {
            name: name.to_owned(),
            tag: Some(tag.to_owned()),
            digest: None,
        })
    }

    /// The file of this reference under `images/<escaped name>/`: `<tag>.json`,
    /// or `@<hex>.json` for a reference by digest only.
    fn file_name(&self) -> String {
        match (&self.tag, &self.digest) {
            (Some(t), _) => format!("{t}.json"),
            (None, Some(d)) => format!("@{}.json", d.hex()),
            (None, None) => unreachable!("a parsed reference has a tag or a digest"),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// Validate a repository name: optional `registry[:port]/` prefix, then
/// `/`-separated path components of lowercase letters and digits joined by
/// `.`, `_`, `__` or runs of `-` (the OCI distribution grammar).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".to_owned());
    }
    if name.len() > 255 {
        return Err(format!(
            "the name is {} characters long (at most 255)",
            name.len()
        ));
    }
    let parts: Vec<&str> = name.split('/').collect();
    let first = parts[0];
    let has_registry =
        parts.len() > 1 && (first.contains('.') || first.contains(':') || first == "localhost");
    let path = if has_registry {
        check_registry(first)?;
        &parts[1..]
    } else {
        &parts[..]
    };
    for c in path {
        check_path_component(c)?;
    }
    Ok(())
}

fn check_registry(reg: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "registry {reg:?}: expected host[:port] (letters, digits, '-' and '.', port 1-65535)"
        )
    };
    let (host, port) = match reg.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (reg, None),
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !host.split('.').all(label_ok) {
        return Err(bad());
    }
    if let Some(p) = port {
        if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        if !(1..=65535).contains(&p.parse::<u32>().unwrap_or(0)) {
            return Err(bad());
        }
    }
    Ok(())
}

/// One `/`-separated component of a repository path (see [`check_name`]).
pub(crate) fn check_path_component(c: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "path component {c:?}: must be lowercase letters and digits, \
             separated by '.', '_', '__' or '-'"
        )
    };
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return Err(bad());
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // a separator: '.', '_', '__' or '-'+, followed by an alphanumeric
        let start = i;
        match b[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < b.len() && b[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < b.len() && b[i] == b'-' {
                    i += 1;
                }
            }
            _ => return Err(bad()),
        }
        if i == start || i >= b.len() || !alnum(b[i]) {
            return Err(bad());
        }
    }
    Ok(())
}

/// Validate a tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
pub fn check_tag(tag: &str) -> Result<(), String> {
    let b = tag.as_bytes();
    let ok_first = |x: u8| x.is_ascii_alphanumeric() || x == b'_';
    let ok_rest = |x: u8| ok_first(x) || x == b'.' || x == b'-';
    if b.is_empty() || b.len() > 128 || !ok_first(b[0]) || !b[1..].iter().all(|&x| ok_rest(x)) {
        return Err(format!(
            "tag {tag:?}: must be 1-128 of letters, digits, '_', '.', '-', not starting with '.' or '-'"
        ));
    }
    Ok(())
}

/// Directory name for a repository name: `/` and `:` percent-escaped
/// (neither `%` nor any other special character occurs in valid names).
fn escape_name(name: &str) -> String {
    name.replace('%', "%25")
        .replace('/', "%2F")
        .replace(':', "%3A")
}

/// The contents of `images/<escaped name>/<tag>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefRecord {
    pub name: String,
    /// Absent for a reference by digest only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Digest of the image manifest.
    pub manifest: Digest,
    /// When the reference was written (RFC 3339, UTC).
    pub created: String,
    /// Where the image came from, e.g. `import oci-archive /path/x.tar`.
    pub source: String,
}

impl RefRecord {
    pub fn reference(&self) -> ImageRef {
        ImageRef {
            name: self.name.clone(),
            tag: self.tag.clone(),
            digest: if self.tag.is_none() {
                Some(self.manifest.clone())
            } else {
                None
            },
        }
    }
}

// ---------------------------------------------------------------------------
// Results

/// One line of `cbrun image ls`.
#[derive(Debug, Clone, Serialize)]
pub struct ImageInfo {
    /// `name:tag` or `name@sha256:...`.
    pub reference: String,
    pub name: String,
    pub tag: Option<String>,
    pub manifest: Digest,
    pub config: Option<Digest>,
    pub layers: usize,
    /// Config plus layer blobs, as stored (compressed layers count compressed).
    pub size: u64,
    /// The image's own creation time (from its config), if recorded.
    pub created: Option<String>,
    /// When this reference was written.
    pub added: String,
    pub source: String,
    /// Why the manifest or config could not be read (a damaged store entry).
    pub error: Option<String>,
}

/// `cbrun image inspect`.
#[derive(Debug, Clone, Serialize)]
pub struct ImageDetails {
    pub reference: String,
    pub manifest_digest: Digest,
    pub manifest: ImageManifest,
    pub config_digest: Digest,
    pub config: ImageConfiguration,
    pub size: u64,
    pub added: String,
    pub source: String,
}

/// What a sandbox or the unpacker needs to know about an image.
#[derive(Debug, Clone)]
pub struct ResolvedImage {
    pub reference: ImageRef,
    pub manifest_digest: Digest,
    pub manifest: ImageManifest,
    pub config_digest: Digest,
    pub config: ImageConfiguration,
    /// The manifest's layers, base first.
    pub layers: Vec<Descriptor>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RemoveReport {
    /// References removed.
    pub removed: Vec<String>,
    /// Unpacked root filesystems deleted because no reference uses them any more.
    pub rootfs_removed: Vec<Digest>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GcReport {
    pub removed_blobs: usize,
    pub removed_bytes: u64,
    pub removed_rootfs: usize,
    pub removed_tmp: usize,
    pub kept_blobs: usize,
    /// References whose manifest could not be read (their layers could not be
    /// marked and were collected unless another image uses them).
    pub warnings: Vec<String>,
}

// ---------------------------------------------------------------------------
// Locks

/// An flock held on a lock file; released on drop.
struct LockFile {
    _file: File,
}

fn take_lock(path: &Path, exclusive: bool, wait: bool) -> Result<Option<LockFile>, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err(path, "open lock file"))?;
    let mut op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    if !wait {
        op |= libc::LOCK_NB;
    }
    loop {
        // SAFETY: flock on a file descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(Some(LockFile { _file: file }));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(None),
            _ => return Err(io_err(path, "flock")(e)),
        }
    }
}

/// While held, `gc` and `remove` never delete blobs, unpacked root
/// filesystems or temp files of this store. Hold one across a whole import,
/// pull, unpack, or the life of a sandbox that uses `rootfs/<hex>/`.
pub struct Hold {
    _lock: LockFile,
    count: Arc<AtomicUsize>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------
// The store

#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    /// Holds taken by this process (gc refuses to wait on itself).
    holds: Arc<AtomicUsize>,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// `$CBRUN_HOME`, else `/var/lib/cbrun` for euid 0, else
    /// `$XDG_DATA_HOME/cbrun`, else `$HOME/.local/share/cbrun`.
    pub fn default_root() -> Result<PathBuf, StoreError> {
        default_root_from(|k| std::env::var_os(k), crate::host::userns::is_real_root()).ok_or_else(
            || StoreError::Root {
                path: PathBuf::from("$HOME/.local/share/cbrun"),
                why: "neither CBRUN_HOME, XDG_DATA_HOME nor HOME is set".to_owned(),
            },
        )
    }

    /// Open (creating if needed) the store at `root`. The root must belong to
    /// the current user. Temp files older than [`STALE_TMP_AGE`] are removed
    /// when no other process is writing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let root: PathBuf = root.into();
        if !root.exists() {
            if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(parent).map_err(io_err(parent, "create directory"))?;
            }
            match fs::DirBuilder::new().mode(0o711).create(&root) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(&root, "create directory")(e)),
            }
        }
        let meta = fs::metadata(&root).map_err(io_err(&root, "stat"))?;
        if !meta.is_dir() {
            return Err(StoreError::Root {
                path: root,
                why: "not a directory".to_owned(),
            });
        }
        let euid = nix::unistd::geteuid().as_raw();
        if meta.uid() != euid {
            return Err(StoreError::Root {
                path: root,
                why: format!(
                    "owned by uid {}, not by the current user (uid {euid}); refusing to use it",
                    meta.uid()
                ),
            });
        }
        for (dir, mode) in [
            ("blobs", 0o700),
            ("blobs/sha256", 0o700),
            ("images", 0o700),
            ("rootfs", 0o711),
            ("tmp", 0o700),
        ] {
            let p = root.join(dir);
            match fs::DirBuilder::new().mode(mode).create(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && p.is_dir() => {}
                Err(e) => return Err(io_err(&p, "create directory")(e)),
            }
        }
        let store = Store {
            root,
            holds: Arc::new(AtomicUsize::new(0)),
        };
        store.clean_stale_tmp()?;
        Ok(store)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `blobs/sha256/<hex>` (read-only file; prefer [`Store::open_blob`]).
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root
            .join("blobs")
            .join(digest.algorithm())
            .join(digest.hex())
    }

    /// `rootfs/<manifest hex>/`: where the unpacked, read-only root
    /// filesystem of an image goes. Build it under [`Store::tmp_dir`] and
    /// rename it here, holding a [`Hold`] throughout.
    pub fn rootfs_dir(&self, manifest: &Digest) -> PathBuf {
        self.root.join("rootfs").join(manifest.hex())
    }

    /// `tmp/`: in-progress writes (same file system as the rest).
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// A fresh, unused path under `tmp/` (nothing is created).
    pub fn temp_path(&self, prefix: &str) -> PathBuf {
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        self.tmp_dir()
            .join(format!("{prefix}-{}-{n}-{nanos:08x}", std::process::id()))
    }

    fn lock_path(&self) -> PathBuf {
        self.root.join("lock")
    }

    fn gc_lock_path(&self) -> PathBuf {
        self.root.join("gc.lock")
    }

    /// Keep `gc`/`remove` from deleting anything until the guard is dropped.
    pub fn hold(&self) -> Result<Hold, StoreError> {
        let lock = take_lock(&self.gc_lock_path(), false, true)?.expect("blocking lock");
        self.holds.fetch_add(1, Ordering::SeqCst);
        Ok(Hold {
            _lock: lock,
            count: self.holds.clone(),
        })
    }

    fn lock_refs(&self) -> Result<LockFile, StoreError> {
        Ok(take_lock(&self.lock_path(), true, true)?.expect("blocking lock"))
    }

    fn clean_stale_tmp(&self) -> Result<(), StoreError> {
        let Some(_gc) = take_lock(&self.gc_lock_path(), true, false)? else {
            return Ok(()); // someone is writing; leave tmp/ alone
        };
        let tmp = self.tmp_dir();
        let now = SystemTime::now();
        for entry in fs::read_dir(&tmp).map_err(io_err(&tmp, "read directory"))? {
            let entry = entry.map_err(io_err(&tmp, "read directory"))?;
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            let old = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age > STALE_TMP_AGE);
            if old {
                let p = entry.path();
                remove_tree(&p).map_err(io_err(&p, "remove stale temp entry"))?;
            }
        }
        Ok(())
    }

    // -- blobs --------------------------------------------------------------

    pub fn has_blob(&self, digest: &Digest) -> bool {
        self.blob_path(digest)
            .symlink_metadata()
            .is_ok_and(|m| m.is_file())
    }

    /// Size of a stored blob.
    pub fn blob_size(&self, digest: &Digest) -> Option<u64> {
        let m = self.blob_path(digest).symlink_metadata().ok()?;
        m.is_file().then_some(m.len())
    }

    /// A writer for a new blob: hashes while writing to `tmp/`;
    /// [`BlobWriter::finish`] verifies and moves it into place.
    pub fn blob_writer(&self) -> Result<BlobWriter, StoreError> {
        let hold = self.hold()?;
        let tmp = self.temp_path("blob");
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(io_err(&tmp, "create temp file"))?;
        Ok(BlobWriter {
            store: self.clone(),
            tmp,
            w: Some(DigestWriter::new(BufWriter::with_capacity(256 << 10, file))),
            _hold: hold,
        })
    }

    /// Store everything `reader` yields as a blob; returns its digest and
    /// size. With `expected`, the content must hash to it (else nothing is
    /// stored), and when that blob is already present `reader` is not read.
    /// A blob already present is never rewritten.
    pub fn put_blob(
        &self,
        mut reader: impl Read,
        expected: Option<&Digest>,
    ) -> Result<(Digest, u64), StoreError> {
        if let Some(d) = expected {
            if let Some(size) = self.blob_size(d) {
                return Ok((d.clone(), size));
            }
        }
        let mut w = self.blob_writer()?;
        let tmp = w.tmp.clone();
        io::copy(&mut reader, &mut w).map_err(io_err(&tmp, "write blob"))?;
        w.finish(expected)
    }

    /// A reader of a stored blob that hashes what it reads and fails at end
    /// of file when the content does not match the digest (the damaged blob is
    /// then deleted, so that importing or pulling the image again repairs it).
    pub fn open_blob(&self, digest: &Digest) -> Result<BlobReader, StoreError> {
        let path = self.blob_path(digest);
        let file = File::open(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                StoreError::MissingBlob {
                    what: "open".to_owned(),
                    digest: digest.clone(),
                }
            } else {
                io_err(&path, "open blob")(e)
            }
        })?;
        let size = file.metadata().map_err(io_err(&path, "stat blob"))?.len();
        Ok(BlobReader::new(file, digest.clone(), path, size))
    }

    /// The whole content of a small blob (JSON), verified; at most
    /// [`MAX_JSON_SIZE`] bytes.
    pub fn read_blob_verified(&self, digest: &Digest) -> Result<Vec<u8>, StoreError> {
        let mut r = self.open_blob(digest)?;
        if r.size() > MAX_JSON_SIZE {
            return Err(StoreError::Invalid {
                what: format!("blob {digest}"),
                why: format!(
                    "{} bytes is over the {MAX_JSON_SIZE} byte limit for JSON",
                    r.size()
                ),
            });
        }
        let mut buf = Vec::with_capacity(r.size() as usize);
        r.read_to_end(&mut buf).map_err(|e| StoreError::Invalid {
            what: format!("blob {digest}"),
            why: e.to_string(),
        })?;
        Ok(buf)
    }

    // -- references -----------------------------------------------------------

    fn ref_dir(&self, name: &str) -> PathBuf {
        self.root.join("images").join(escape_name(name))
    }

    fn read_ref_file(path: &Path) -> Result<RefRecord, StoreError> {
        let bytes = fs::read(path).map_err(io_err(path, "read reference"))?;
        let rec: RefRecord = serde_json::from_slice(&bytes).map_err(|e| StoreError::Invalid {
            what: path.display().to_string(),
            why: format!("not a reference record: {e}"),
        })?;
        Ok(rec)
    }

    /// All reference records, sorted by name and tag; `name` limits to one
    /// repository.
    fn read_refs(&self, name: Option<&str>) -> Result<Vec<(PathBuf, RefRecord)>, StoreError> {
        let images = self.root.join("images");
        let dirs: Vec<PathBuf> = match name {
            Some(n) => vec![self.ref_dir(n)],
            None => {
                let mut v = Vec::new();
                for e in fs::read_dir(&images).map_err(io_err(&images, "read directory"))? {
                    let e = e.map_err(io_err(&images, "read directory"))?;
                    v.push(e.path());
                }
                v
            }
        };
        let mut out = Vec::new();
        for dir in dirs {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => continue,
                Err(e) => return Err(io_err(&dir, "read directory")(e)),
            };
            for e in entries {
                let e = e.map_err(io_err(&dir, "read directory"))?;
                let file = e.file_name();
                let file = file.to_string_lossy();
                if file.starts_with('.') || !file.ends_with(".json") {
                    continue;
                }
                let path = e.path();
                let rec = Self::read_ref_file(&path)?;
                let expect_dir = escape_name(&rec.name);
                let expect_file = rec.reference().file_name();
                if dir.file_name() != Some(OsStr::new(&expect_dir)) || *file != expect_file {
                    return Err(StoreError::Invalid {
                        what: path.display().to_string(),
                        why: format!(
                            "records {} but is not where that reference belongs",
                            rec.reference()
                        ),
                    });
                }
                out.push((path, rec));
            }
        }
        out.sort_by(|a, b| (&a.1.name, &a.1.tag).cmp(&(&b.1.name, &b.1.tag)));
        Ok(out)
    }

    /// The reference record that `r` denotes.
    fn find_ref(&self, r: &ImageRef) -> Result<RefRecord, StoreError> {
        let not_found = || StoreError::NotFound(r.to_string());
        match &r.digest {
            None => {
                let path = self.ref_dir(&r.name).join(r.file_name());
                match Self::read_ref_file(&path) {
                    Ok(rec) => Ok(rec),
                    Err(StoreError::Io { source, .. })
                        if source.kind() == io::ErrorKind::NotFound =>
                    {
                        Err(not_found())
                    }
                    Err(e) => Err(e),
                }
            }
            Some(d) => {
                let refs = self.read_refs(Some(&r.name))?;
                let mut matching = refs
                    .into_iter()
                    .map(|(_, rec)| rec)
                    .filter(|rec| &rec.manifest == d);
                match &r.tag {
                    Some(t) => matching
                        .find(|rec| rec.tag.as_deref() == Some(t))
                        .ok_or_else(not_found),
                    None => matching.next().ok_or_else(not_found),
                }
            }
        }
    }

    fn write_ref(&self, rec: &RefRecord) -> Result<(), StoreError> {
        let dir = self.ref_dir(&rec.name);
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(&dir, "create directory")(e)),
        }
        let mut bytes = serde_json::to_vec_pretty(rec).expect("serializable");
        bytes.push(b'\n');
        let tmp = self.temp_path("ref");
        let target = dir.join(rec.reference().file_name());
        let result = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io_err(&tmp, "create temp file"))?;
            f.write_all(&bytes).map_err(io_err(&tmp, "write"))?;
            f.sync_all().map_err(io_err(&tmp, "fsync"))?;
            fs::rename(&tmp, &target).map_err(io_err(&target, "rename into place"))?;
            sync_dir(&dir);
            Ok(())
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Check that a manifest's config and layers are present with the sizes
    /// it states and that the config parses; returns the parsed manifest.
    fn check_complete(&self, manifest_digest: &Digest) -> Result<ImageManifest, StoreError> {
        let ctx = format!("manifest {manifest_digest}");
        let what = |w: String| format!("{ctx}: {w}");
        let bytes = self.read_blob_verified(manifest_digest)?;
        let manifest = layout::parse_manifest(&bytes).map_err(|why| StoreError::Invalid {
            what: ctx.clone(),
            why,
        })?;
        let check = |field: String, d: &Descriptor| -> Result<Digest, StoreError> {
            let digest = layout::descriptor_digest(d).map_err(|why| StoreError::Invalid {
                what: what(field.clone()),
                why,
            })?;
            match self.blob_size(&digest) {
                None => Err(StoreError::MissingBlob {
                    what: what(field),
                    digest,
                }),
                Some(n) if n != d.size() => Err(StoreError::Invalid {
                    what: what(field),
                    why: format!(
                        "blob {digest} has {n} bytes, the descriptor says {}",
                        d.size()
                    ),
                }),
                Some(_) => Ok(digest),
            }
        };
        let config_digest = check("config".to_owned(), manifest.config())?;
        for (i, l) in manifest.layers().iter().enumerate() {
            check(format!("layers[{i}]"), l)?;
        }
        let config = self.read_blob_verified(&config_digest)?;
        layout::parse_config(&config).map_err(|why| StoreError::Invalid {
            what: what("config".to_owned()),
            why,
        })?;
        Ok(manifest)
    }

    /// Record `manifest_bytes` as the image `reference`: checks that the
    /// config and every layer it names are in the store (with the sizes the
    /// manifest states), stores the manifest blob, then writes the reference
    /// atomically. A reference with a digest must match the manifest's.
    pub fn commit_image(
        &self,
        reference: &ImageRef,
        manifest_bytes: &[u8],
        source: &str,
    ) -> Result<Digest, StoreError> {
        let digest = Digest::of_bytes(manifest_bytes);
        if let Some(want) = &reference.digest {
            if want != &digest {
                return Err(StoreError::DigestMismatch {
                    what: format!("manifest of {reference}"),
                    expected: want.clone(),
                    actual: digest,
                });
            }
        }
        layout::parse_manifest(manifest_bytes).map_err(|why| StoreError::Invalid {
            what: format!("manifest of {reference}"),
            why,
        })?;
        self.put_blob(manifest_bytes, Some(&digest))?;
        let _lock = self.lock_refs()?;
        // gc may have run since the blobs were written: check under the lock.
        self.check_complete(&digest)?;
        self.write_ref(&RefRecord {
            name: reference.name.clone(),
            tag: reference.tag.clone(),
            manifest: digest.clone(),
            created: now_rfc3339(),
            source: source.to_owned(),
        })?;
        Ok(digest)
    }

    /// Resolve `name[:tag]` or `name@sha256:...` to its manifest, config and layers.
    pub fn resolve(&self, reference: &str) -> Result<ResolvedImage, StoreError> {
        let r = ImageRef::parse(reference)?;
        let rec = self.find_ref(&r)?;
        let mut img = self.load(&rec)?;
        if r.digest.is_some() {
            img.reference = ImageRef { tag: None, ..r };
        }
        Ok(img)
    }

    fn load(&self, rec: &RefRecord) -> Result<ResolvedImage, StoreError> {
        let manifest = self.check_complete(&rec.manifest)?;
        let config_digest = layout::descriptor_digest(manifest.config()).expect("checked");
        let config_bytes = self.read_blob_verified(&config_digest)?;
        let config = layout::parse_config(&config_bytes).expect("checked");
        Ok(ResolvedImage {
            reference: rec.reference(),
            manifest_digest: rec.manifest.clone(),
            layers: manifest.layers().clone(),
            manifest,
            config_digest,
            config,
        })
    }

    pub fn inspect(&self, reference: &str) -> Result<ImageDetails, StoreError> {
        let r = ImageRef::parse(reference)?;
        let rec = self.find_ref(&r)?;
        let img = self.load(&rec)?;
        let size = img.manifest.config().size() + img.layers.iter().map(|l| l.size()).sum::<u64>();
        Ok(ImageDetails {
            reference: rec.reference().to_string(),
            manifest_digest: img.manifest_digest,
            manifest: img.manifest,
            config_digest: img.config_digest,
            config: img.config,
            size,
            added: rec.created,
            source: rec.source,
        })
    }

    /// Every reference, sorted by name and tag.
    pub fn list(&self) -> Result<Vec<ImageInfo>, StoreError> {
        let mut out = Vec::new();
        for (_, rec) in self.read_refs(None)? {
            let mut info = ImageInfo {
                reference: rec.reference().to_string(),
                name: rec.name.clone(),
                tag: rec.tag.clone(),
                manifest: rec.manifest.clone(),
                config: None,
                layers: 0,
                size: 0,
                created: None,
                added: rec.created.clone(),
                source: rec.source.clone(),
                error: None,
            };
            match self.load(&rec) {
                Ok(img) => {
                    info.config = Some(img.config_digest);
                    info.layers = img.layers.len();
                    info.size = img.manifest.config().size()
                        + img.layers.iter().map(|l| l.size()).sum::<u64>();
                    info.created = img.config.created().clone();
                }
                Err(e) => info.error = Some(e.to_string()),
            }
            out.push(info);
        }
        Ok(out)
    }

    /// Point `dst` (`name[:tag]`) at the image `src` denotes.
    pub fn tag(&self, src: &str, dst: &str) -> Result<ImageRef, StoreError> {
        let src_ref = ImageRef::parse(src)?;
        let dst_ref = ImageRef::parse(dst)?;
        if dst_ref.digest.is_some() {
            return Err(StoreError::BadReference {
                input: dst.to_owned(),
                why: "a new tag cannot carry a digest".to_owned(),
            });
        }
        let _lock = self.lock_refs()?;
        let rec = self.find_ref(&src_ref)?;
        self.check_complete(&rec.manifest)?;
        self.write_ref(&RefRecord {
            name: dst_ref.name.clone(),
            tag: dst_ref.tag.clone(),
            manifest: rec.manifest,
            created: now_rfc3339(),
            source: rec.source,
        })?;
        Ok(dst_ref)
    }

    /// Remove a reference (`name:tag`), or with `name@digest` every reference
    /// of that name to that manifest. Blobs stay until [`Store::gc`]; the
    /// unpacked root filesystem goes now if no reference uses it any more and
    /// nobody holds the store (else gc removes it later).
    pub fn remove(&self, reference: &str) -> Result<RemoveReport, StoreError> {
        let r = ImageRef::parse(reference)?;
        let _lock = self.lock_refs()?;
        let victims: Vec<(PathBuf, RefRecord)> = match &r.digest {
            None => {
                let rec = self.find_ref(&r)?;
                vec![(self.ref_dir(&r.name).join(r.file_name()), rec)]
            }
            Some(d) => self
                .read_refs(Some(&r.name))?
                .into_iter()
                .filter(|(_, rec)| &rec.manifest == d && (r.tag.is_none() || rec.tag == r.tag))
                .collect(),
        };
        if victims.is_empty() {
            return Err(StoreError::NotFound(r.to_string()));
        }
        let mut report = RemoveReport::default();
        for (path, rec) in &victims {
            fs::remove_file(path).map_err(io_err(path, "remove reference"))?;
            report.removed.push(rec.reference().to_string());
        }
        let dir = self.ref_dir(&r.name);
        let _ = fs::remove_dir(&dir); // only when empty
        sync_dir(&self.root.join("images"));
        let still_used: BTreeSet<Digest> = self
            .read_refs(None)?
            .into_iter()
            .map(|(_, rec)| rec.manifest)
            .collect();
        let gone: BTreeSet<Digest> = victims
            .into_iter()
            .map(|(_, rec)| rec.manifest)
            .filter(|m| !still_used.contains(m))
            .collect();
        if gone
            .iter()
            .any(|m| self.rootfs_dir(m).symlink_metadata().is_ok())
        {
            if let Some(_gc) = take_lock(&self.gc_lock_path(), true, false)? {
                for m in gone {
                    let dir = self.rootfs_dir(&m);
                    if dir.symlink_metadata().is_ok() {
                        remove_tree(&dir).map_err(io_err(&dir, "remove unpacked rootfs"))?;
                        report.rootfs_removed.push(m);
                    }
                }
            }
        }
        Ok(report)
    }

    /// Delete every blob no reference reaches (manifest, config, layers),
    /// unpacked root filesystems of manifests no reference names, and all of
    /// `tmp/`. Waits for holders ([`Store::hold`]) of other processes; fails
    /// if this process holds the store.
    pub fn gc(&self) -> Result<GcReport, StoreError> {
        if self.holds.load(Ordering::SeqCst) > 0 {
            return Err(StoreError::Busy {
                path: self.root.clone(),
                why: "gc while this process holds the store".to_owned(),
            });
        }
        let _gc = take_lock(&self.gc_lock_path(), true, true)?.expect("blocking lock");
        let _lock = self.lock_refs()?;
        let mut report = GcReport::default();
        let mut live_blobs: BTreeSet<String> = BTreeSet::new();
        let mut live_manifests: BTreeSet<String> = BTreeSet::new();
        for (_, rec) in self.read_refs(None)? {
            live_blobs.insert(rec.manifest.hex().to_owned());
            live_manifests.insert(rec.manifest.hex().to_owned());
            let manifest = self.read_blob_verified(&rec.manifest).and_then(|b| {
                layout::parse_manifest(&b).map_err(|why| StoreError::Invalid {
                    what: format!("manifest {}", rec.manifest),
                    why,
                })
            });
            match manifest {
                Ok(m) => {
                    for d in std::iter::once(m.config()).chain(m.layers().iter()) {
                        if let Ok(digest) = layout::descriptor_digest(d) {
                            live_blobs.insert(digest.hex().to_owned());
                        }
                    }
                }
                Err(e) => report.warnings.push(format!("{}: {e}", rec.reference())),
            }
        }
        let blobs = self.root.join("blobs/sha256");
        for e in fs::read_dir(&blobs).map_err(io_err(&blobs, "read directory"))? {
            let e = e.map_err(io_err(&blobs, "read directory"))?;
            let name = e.file_name();
            if live_blobs.contains(&*name.to_string_lossy()) {
                report.kept_blobs += 1;
                continue;
            }
            let p = e.path();
            let size = p.symlink_metadata().map(|m| m.len()).unwrap_or(0);
            remove_tree(&p).map_err(io_err(&p, "remove blob"))?;
            report.removed_blobs += 1;
            report.removed_bytes += size;
        }
        let rootfs = self.root.join("rootfs");
        for e in fs::read_dir(&rootfs).map_err(io_err(&rootfs, "read directory"))? {
            let e = e.map_err(io_err(&rootfs, "read directory"))?;
            if live_manifests.contains(&*e.file_name().to_string_lossy()) {
                continue;
            }
            let p = e.path();
            remove_tree(&p).map_err(io_err(&p, "remove unpacked rootfs"))?;
            report.removed_rootfs += 1;
        }
        let tmp = self.tmp_dir();
        for e in fs::read_dir(&tmp).map_err(io_err(&tmp, "read directory"))? {
            let p = e.map_err(io_err(&tmp, "read directory"))?.path();
            remove_tree(&p).map_err(io_err(&p, "remove temp entry"))?;
            report.removed_tmp += 1;
        }
        let images = self.root.join("images");
        for e in fs::read_dir(&images)
            .map_err(io_err(&images, "read directory"))?
            .flatten()
        {
            let _ = fs::remove_dir(e.path()); // empty name directories
        }
        Ok(report)
    }
}

fn default_root_from(env: impl Fn(&str) -> Option<OsString>, euid_root: bool) -> Option<PathBuf> {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(h) = get("CBRUN_HOME") {
        return Some(PathBuf::from(h));
    }
    if euid_root {
        return Some(PathBuf::from("/var/lib/cbrun"));
    }
    if let Some(x) = get("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(x.join("cbrun"));
    }
    get("HOME").map(|h| PathBuf::from(h).join(".local/share/cbrun"))
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

// ---------------------------------------------------------------------------
// Blob I/O

/// A blob being written; see [`Store::blob_writer`]. Dropped without
/// `finish`, its temp file is removed.
pub struct BlobWriter {
    store: Store,
    tmp: PathBuf,
    w: Option<DigestWriter<BufWriter<File>>>,
    _hold: Hold,
}

impl Write for BlobWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w.as_mut().expect("not finished").write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.w.as_mut().expect("not finished").flush()
    }
}

impl BlobWriter {
    /// The temp file being written (under `tmp/`); after a `flush` it can
    /// be opened and read, e.g. to inspect content before deciding to keep it.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Verify (against `expected`, if given), fsync, make read-only and move
    /// into `blobs/sha256/`. Returns the digest and size.
    pub fn finish(mut self, expected: Option<&Digest>) -> Result<(Digest, u64), StoreError> {
        let (digest, size, buf) = self.w.take().expect("not finished").finish();
        let file = buf
            .into_inner()
            .map_err(|e| io_err(&self.tmp, "write blob")(e.into_error()))?;
        if let Some(want) = expected {
            if want != &digest {
                return Err(StoreError::DigestMismatch {
                    what: "blob".to_owned(),
                    expected: want.clone(),
                    actual: digest,
                });
            }
        }
        file.sync_all().map_err(io_err(&self.tmp, "fsync"))?;
        file.set_permissions(fs::Permissions::from_mode(0o444))
            .map_err(io_err(&self.tmp, "chmod"))?;
        drop(file);
        let target = self.store.blob_path(&digest);
        if target
            .symlink_metadata()
            .is_ok_and(|m| m.is_file() && m.len() == size)
        {
            // Already there (a concurrent writer or an earlier import).
            let _ = fs::remove_file(&self.tmp);
        } else {
            fs::rename(&self.tmp, &target).map_err(io_err(&target, "rename blob into place"))?;
            sync_dir(target.parent().expect("blob path has a parent"));
        }
        Ok((digest, size))
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.tmp);
    }
}

/// A verifying reader of a stored blob; see [`Store::open_blob`].
pub struct BlobReader {
    inner: Option<BlobSource>,
    expected: Digest,
    path: PathBuf,
    size: u64,
    /// Bytes handed out so far.
    taken: u64,
    failed: Option<String>,
}

/// Small blobs are hashed in line; large ones on a second thread, beside
/// whatever consumes them (see [`super::hasher`]).
enum BlobSource {
    Inline(BufReader<DigestReader<File>>),
    Threaded(ThreadedDigestReader<File>),
}

impl BlobReader {
    fn new(file: File, expected: Digest, path: PathBuf, size: u64) -> BlobReader {
        let inner = if size >= THREAD_MIN {
            match file.try_clone().ok().and_then(ThreadedDigestReader::new) {
                Some(r) => BlobSource::Threaded(r),
                None => BlobSource::inline(file, size),
            }
        } else {
            BlobSource::inline(file, size)
        };
        BlobReader {
            inner: Some(inner),
            expected,
            path,
            size,
            taken: 0,
            failed: None,
        }
    }

    /// Size of the blob file.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn digest(&self) -> &Digest {
        &self.expected
    }

    fn failure(&self) -> io::Result<()> {
        match &self.failed {
            Some(msg) => Err(io::Error::new(io::ErrorKind::InvalidData, msg.clone())),
            None => Ok(()),
        }
    }

    /// At end of input: compare the digest (and that the hashed bytes are
    /// the bytes read), and delete a damaged blob.
    fn check(&mut self) -> io::Result<()> {
        let (actual, len) = match self.inner.take().expect("present") {
            BlobSource::Inline(r) => r.into_inner().finish(),
            BlobSource::Threaded(r) => r.finish()?,
        };
        if len != self.taken {
            let msg = format!(
                "{}: stored blob changed while it was read ({} bytes read, {len} hashed)",
                self.path.display(),
                self.taken
            );
            self.failed = Some(msg.clone());
            return Err(io::Error::new(io::ErrorKind::InvalidData, msg));
        }
        if actual != self.expected {
            let removed = fs::remove_file(&self.path).is_ok();
            let msg = format!(
                "{}: stored blob is damaged (its content is {actual}){}",
                self.path.display(),
                if removed {
                    "; removed it: import or pull the image again"
                } else {
                    ""
                }
            );
            self.failed = Some(msg.clone());
            return Err(io::Error::new(io::ErrorKind::InvalidData, msg));
        }
        Ok(())
    }
}

impl BlobSource {
    fn inline(file: File, size: u64) -> BlobSource {
        let cap = (size.max(1) as usize).min(128 << 10);
        BlobSource::Inline(BufReader::with_capacity(cap, DigestReader::new(file)))
    }
}

impl BlobSource {
    fn reader(&mut self) -> &mut dyn BufRead {
        match self {
            BlobSource::Inline(r) => r,
            BlobSource::Threaded(r) => r,
        }
    }
}

impl BufRead for BlobReader {
    /// The end of the blob is reported only once its digest has matched.
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.failure()?;
        let Some(inner) = self.inner.as_mut() else {
            return Ok(&[]);
        };
        if inner.reader().fill_buf()?.is_empty() {
            self.check()?;
            return Ok(&[]);
        }
        self.inner.as_mut().expect("present").reader().fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        if let Some(inner) = self.inner.as_mut() {
            inner.reader().consume(amt);
            self.taken += amt as u64;
        }
    }
}

impl Read for BlobReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.failure()?;
        let Some(inner) = self.inner.as_mut() else {
            return Ok(0);
        };
        let n = inner.reader().read(buf)?;
        self.taken += n as u64;
        if n == 0 && !buf.is_empty() {
            self.check()?;
        }
        Ok(n)
    }
}

// ---------------------------------------------------------------------------
// Removing trees

/// Remove `path` and everything under it, without following symlinks, even
/// when directories inside are read-only (they are made writable first) and
/// however deep the tree is (no path-length limit, constant file
/// descriptors). `path` itself may be a file or a symlink.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let meta = path.symlink_metadata()?;
    if !meta.is_dir() {
        return fs::remove_file(path);
    }
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let parent_fd = open_dir_at(libc::AT_FDCWD, &cpath(parent.as_os_str())?)?;
    remove_dir_at(&parent_fd, &cpath(name)?)
}

fn cpath(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

fn open_dir_at(dirfd: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    loop {
        // SAFETY: openat with a valid C string; the fd returned is owned here.
        let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
        if fd >= 0 {
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: fstat fills a zeroed stat struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Names in a directory (without `.` and `..`).
fn list_dir(fd: RawFd) -> io::Result<Vec<CString>> {
    // SAFETY: fdopendir takes ownership of the duplicated descriptor and
    // closedir releases it; readdir entries are copied before the next call.
    unsafe {
        let dup = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0);
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        let dir = libc::fdopendir(dup);
        if dir.is_null() {
            let e = io::Error::last_os_error();
            libc::close(dup);
            return Err(e);
        }
        libc::rewinddir(dir);
        let mut names = Vec::new();
        loop {
            nix::errno::Errno::clear();
            let ent = libc::readdir(dir);
            if ent.is_null() {
                let errno = nix::errno::Errno::last_raw();
                libc::closedir(dir);
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(errno));
                }
                return Ok(names);
            }
            let name = CStr::from_ptr((*ent).d_name.as_ptr());
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                names.push(name.to_owned());
            }
        }
    }
}

fn make_owner_rwx(fd: RawFd) -> io::Result<()> {
    let st = fstat(fd)?;
    if st.st_mode & 0o700 != 0o700 {
        // SAFETY: fchmod on an open directory descriptor.
        if unsafe { libc::fchmod(fd, (st.st_mode & 0o7777) | 0o700) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Open subdirectory `name` of `dirfd`, making it readable first if needed.
fn open_subdir(dirfd: RawFd, name: &CStr) -> io::Result<OwnedFd> {
    match open_dir_at(dirfd, name) {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            // SAFETY: fchmodat on a name in a directory we own.
            if unsafe { libc::fchmodat(dirfd, name.as_ptr(), 0o700, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            open_dir_at(dirfd, name)
        }
        r => r,
    }
}

/// Iterative removal of directory `name` in `parent`. Only the current
/// directory is kept open; going back up uses `..`, checked against the
/// device and inode recorded on the way down.
fn remove_dir_at(parent: &OwnedFd, name: &CStr) -> io::Result<()> {
    struct Frame {
        name: CString,
        /// Subdirectories still to visit.
        pending: Vec<CString>,
        dev: u64,
        ino: u64,
    }
    let mut cur = open_subdir(parent.as_raw_fd(), name)?;
    let st = fstat(cur.as_raw_fd())?;
    let mut stack = vec![Frame {
        name: name.to_owned(),
        pending: Vec::new(),
        dev: st.st_dev,
        ino: st.st_ino,
    }];
    let mut fresh = true; // `cur` not yet emptied of files
    loop {
        let fd = cur.as_raw_fd();
        if fresh {
            make_owner_rwx(fd)?;
            let mut dirs = Vec::new();
            for n in list_dir(fd)? {
                // SAFETY: unlinkat on a name in an open directory.
                if unsafe { libc::unlinkat(fd, n.as_ptr(), 0) } != 0 {
                    let e = io::Error::last_os_error();
                    match e.raw_os_error() {
                        Some(libc::EISDIR) | Some(libc::EPERM) if is_dir_at(fd, &n) => dirs.push(n),
                        Some(libc::ENOENT) => {}
                        _ => return Err(e),
                    }
                }
            }
            stack.last_mut().expect("frame").pending = dirs;
            fresh = false;
        }
        let frame = stack.last_mut().expect("frame");
        if let Some(child) = frame.pending.pop() {
            let next = open_subdir(fd, &child)?;
            let st = fstat(next.as_raw_fd())?;
            stack.push(Frame {
                name: child,
                pending: Vec::new(),
                dev: st.st_dev,
                ino: st.st_ino,
            });
            cur = next;
            fresh = true;
            continue;
        }
        // `cur` is empty: remove it from its parent.
        let done = stack.pop().expect("frame");
        if stack.is_empty() {
            drop(cur);
            // SAFETY: unlinkat with AT_REMOVEDIR on a name in `parent`.
            if unsafe { libc::unlinkat(parent.as_raw_fd(), done.name.as_ptr(), libc::AT_REMOVEDIR) }
                != 0
            {
                return Err(io::Error::last_os_error());
            }
            return Ok(());
        }
        let up = open_dir_at(fd, c"..")?;
        let st = fstat(up.as_raw_fd())?;
        let expect = stack.last().expect("frame");
        if (st.st_dev, st.st_ino) != (expect.dev, expect.ino) {
            return Err(io::Error::other("directory tree moved while being removed"));
        }
        drop(cur);
        // SAFETY: as above.
        if unsafe { libc::unlinkat(up.as_raw_fd(), done.name.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
            return Err(io::Error::last_os_error());
        }
        cur = up;
    }
}

fn is_dir_at(dirfd: RawFd, name: &CStr) -> bool {
    // SAFETY: fstatat into a zeroed struct, not following symlinks.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    r == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFDIR
}

// ---------------------------------------------------------------------------
// Time

/// Now as RFC 3339 UTC (`2024-05-01T12:00:00Z`).
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// Seconds since the epoch as RFC 3339 UTC.
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::image::layout::{MT_OCI_CONFIG, MT_OCI_LAYER, MT_OCI_MANIFEST};

    /// A temp directory removed (read-only parts included) on drop.
    pub(crate) struct TempDir(pub PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> TempDir {
            static N: AtomicU64 = AtomicU64::new(0);
            let p = std::env::temp_dir().join(format!(
                "cbrun-{tag}-{}-{}-{}",
                nix::unistd::geteuid(),
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = remove_tree(&p);
            fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = remove_tree(&self.0);
        }
    }

    pub(crate) fn config_json(diff_ids: &[&Digest]) -> Vec<u8> {
        let ids: Vec<String> = diff_ids.iter().map(|d| d.to_string()).collect();
        serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64", "os": "linux", "created": "2024-01-02T03:04:05Z",
            "config": {"Env": ["PATH=/usr/bin:/bin"]},
            "rootfs": {"type": "layers", "diff_ids": ids},
        }))
        .unwrap()
    }

    pub(crate) fn manifest_json(config: (&Digest, u64), layers: &[(&Digest, u64)]) -> Vec<u8> {
        let layers: Vec<serde_json::Value> = layers
            .iter()
            .map(|(d, n)| serde_json::json!({"mediaType": MT_OCI_LAYER, "digest": d.to_string(), "size": n}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
            "config": {"mediaType": MT_OCI_CONFIG, "digest": config.0.to_string(), "size": config.1},
            "layers": layers,
        }))
        .unwrap()
    }

    /// Store a one-layer image under `reference`; returns its manifest digest
    /// and the layer digest.
    pub(crate) fn add_image(store: &Store, reference: &str, layer: &[u8]) -> (Digest, Digest) {
        let (ld, ln) = store.put_blob(layer, None).unwrap();
        let config = config_json(&[&ld]);
        let (cd, cn) = store.put_blob(&config[..], None).unwrap();
        let m = manifest_json((&cd, cn), &[(&ld, ln)]);
        let md = store
            .commit_image(&ImageRef::parse(reference).unwrap(), &m, "test")
            .unwrap();
        (md, ld)
    }

    fn blob_count(store: &Store) -> usize {
        fs::read_dir(store.root().join("blobs/sha256"))
            .unwrap()
            .count()
    }

    fn tmp_count(store: &Store) -> usize {
        fs::read_dir(store.tmp_dir()).unwrap().count()
    }

    #[test]
    fn references_parse_and_validate() {
        let r = ImageRef::parse("alpine").unwrap();
        assert_eq!(
            (r.name.as_str(), r.tag.as_deref(), r.digest.is_none()),
            ("alpine", Some("latest"), true)
        );
        let r = ImageRef::parse("localhost:5000/team/app:v1.2_rc-3").unwrap();
        assert_eq!(
            (r.name.as_str(), r.tag.as_deref()),
            ("localhost:5000/team/app", Some("v1.2_rc-3"))
        );
        let r = ImageRef::parse("localhost:5000/app").unwrap();
        assert_eq!(
            (r.name.as_str(), r.tag.as_deref()),
            ("localhost:5000/app", Some("latest"))
        );
        let d = Digest::of_bytes(b"m");
        let r = ImageRef::parse(&format!("a/b@{d}")).unwrap();
        assert_eq!((r.tag.as_deref(), r.digest.as_ref()), (None, Some(&d)));
        assert_eq!(r.to_string(), format!("a/b@{d}"));
        let r = ImageRef::parse(&format!("a:t@{d}")).unwrap();
        assert_eq!(r.to_string(), format!("a:t@{d}"));
        for ok in [
            "a__b",
            "a--b",
            "a.b_c-d",
            "registry.example.com/x/y",
            "my-reg:443/x",
            "127.0.0.1:5000/x",
        ] {
            ImageRef::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, part) in [
            ("", "empty"),
            ("Alpine", "\"Alpine\""),
            ("a/B/c", "\"B\""),
            ("a//b", "\"\""),
            ("a___b", "\"a___b\""),
            ("-a", "\"-a\""),
            ("a.", "\"a.\""),
            ("a:", "tag \"\""),
            ("a:.x", "tag \".x\""),
            ("a:x/y", "registry \"a:x\""),
            ("my_reg:5000/x", "\"my_reg:5000\""),
            ("reg:99999/x", "registry"),
            ("a@sha256:zz", "digest"),
            ("../etc", "\"..\""),
        ] {
            let e = ImageRef::parse(bad).unwrap_err().to_string();
            assert!(e.contains(part), "{bad:?}: {e}");
            assert!(!e.contains('\n'));
        }
        assert!(ImageRef::parse(&format!("a:{}", "x".repeat(129))).is_err());
        assert!(ImageRef::parse(&"a".repeat(256)).is_err());
        assert_eq!(
            escape_name("localhost:5000/a/b"),
            "localhost%3A5000%2Fa%2Fb"
        );
    }

    #[test]
    fn default_root_precedence() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let all: &[(&str, &str)] = &[
            ("CBRUN_HOME", "/c"),
            ("XDG_DATA_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(
            default_root_from(env(all), false),
            Some(PathBuf::from("/c"))
        );
        let no_c: &[(&str, &str)] = &[("CBRUN_HOME", ""), ("XDG_DATA_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(
            default_root_from(env(no_c), true),
            Some(PathBuf::from("/var/lib/cbrun"))
        );
        assert_eq!(
            default_root_from(env(no_c), false),
            Some(PathBuf::from("/x/cbrun"))
        );
        let rel: &[(&str, &str)] = &[("XDG_DATA_HOME", "rel"), ("HOME", "/h")];
        assert_eq!(
            default_root_from(env(rel), false),
            Some(PathBuf::from("/h/.local/share/cbrun"))
        );
        assert_eq!(default_root_from(env(&[]), false), None);
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_704_164_645), "2024-01-02T03:04:05Z");
        assert_eq!(rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn open_creates_layout_and_refuses_foreign_roots() {
        let t = TempDir::new("store-open");
        let store = Store::open(t.path().join("a/b/store")).unwrap();
        for d in ["blobs/sha256", "images", "rootfs", "tmp"] {
            assert!(store.root().join(d).is_dir(), "{d}");
        }
        let mode = fs::metadata(store.root().join("blobs"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700);
        let file = t.path().join("file");
        fs::write(&file, b"").unwrap();
        assert!(Store::open(&file)
            .unwrap_err()
            .to_string()
            .contains("not a directory"));
        let foreign = if nix::unistd::geteuid().is_root() {
            let d = t.path().join("foreign");
            fs::create_dir(&d).unwrap();
            std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
            d
        } else {
            PathBuf::from("/")
        };
        let e = Store::open(&foreign).unwrap_err().to_string();
        assert!(e.contains("not by the current user"), "{e}");
    }

    #[test]
    fn blobs_are_verified_on_write() {
        let t = TempDir::new("store-put");
        let store = Store::open(t.path()).unwrap();
        let d = Digest::of_bytes(b"hello");
        assert!(!store.has_blob(&d));
        let wrong = Digest::of_bytes(b"other");
        let e = store.put_blob(&b"hello"[..], Some(&wrong)).unwrap_err();
        assert!(matches!(e, StoreError::DigestMismatch { .. }), "{e}");
        assert_eq!((blob_count(&store), tmp_count(&store)), (0, 0));
        assert_eq!(
            store.put_blob(&b"hello"[..], Some(&d)).unwrap(),
            (d.clone(), 5)
        );
        let p = store.blob_path(&d);
        let meta = fs::metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o444);
        // present: not rewritten (same inode), with or without expectation
        assert_eq!(store.put_blob(&b"hello"[..], None).unwrap(), (d.clone(), 5));
        assert_eq!(
            store.put_blob(&b"ignored"[..], Some(&d)).unwrap(),
            (d.clone(), 5)
        );
        assert_eq!(fs::metadata(&p).unwrap().ino(), meta.ino());
        assert_eq!((blob_count(&store), tmp_count(&store)), (1, 0));
        // a dropped writer leaves no temp file
        let mut w = store.blob_writer().unwrap();
        w.write_all(b"partial").unwrap();
        assert_eq!(tmp_count(&store), 1);
        drop(w);
        assert_eq!(tmp_count(&store), 0);
    }

    #[test]
    fn blobs_are_verified_on_read_and_damage_is_removed() {
        let t = TempDir::new("store-read");
        let store = Store::open(t.path()).unwrap();
        let (d, _) = store.put_blob(&b"{\"a\":1}"[..], None).unwrap();
        assert_eq!(store.read_blob_verified(&d).unwrap(), b"{\"a\":1}");
        let mut s = String::new();
        store.open_blob(&d).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "{\"a\":1}");
        let p = store.blob_path(&d);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&p, b"{\"a\":2}").unwrap();
        let e = store
            .open_blob(&d)
            .unwrap()
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("damaged"), "{e}");
        assert!(!store.has_blob(&d), "damaged blob removed");
        assert!(matches!(
            store.read_blob_verified(&d),
            Err(StoreError::MissingBlob { .. })
        ));
        // the next put repairs it
        store.put_blob(&b"{\"a\":1}"[..], Some(&d)).unwrap();
        assert!(store.read_blob_verified(&d).is_ok());
        // size cap for JSON reads
        let big = vec![b' '; MAX_JSON_SIZE as usize + 1];
        let (bd, _) = store.put_blob(&big[..], None).unwrap();
        assert!(store
            .read_blob_verified(&bd)
            .unwrap_err()
            .to_string()
            .contains("limit"));
    }

    #[test]
    fn commit_requires_every_blob_and_writes_the_ref_last() {
        let t = TempDir::new("store-commit");
        let store = Store::open(t.path()).unwrap();
        let (ld, ln) = store.put_blob(&b"layer"[..], None).unwrap();
        let config = config_json(&[&ld]);
        let cd = Digest::of_bytes(&config);
        let m = manifest_json((&cd, config.len() as u64), &[(&ld, ln)]);
        let r = ImageRef::parse("x/y:1").unwrap();
        let e = store.commit_image(&r, &m, "test").unwrap_err().to_string();
        assert!(
            e.contains("config") && e.contains("not in the store"),
            "{e}"
        );
        store.put_blob(&config[..], None).unwrap();
        // wrong size in the descriptor
        let lying = manifest_json((&cd, config.len() as u64), &[(&ld, ln + 1)]);
        let e = store
            .commit_image(&r, &lying, "test")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("layers[0]") && e.contains("descriptor says"),
            "{e}"
        );
        assert!(store.list().unwrap().is_empty());
        // a digest reference must match
        let other = ImageRef::parse(&format!("x/y@{}", Digest::of_bytes(b"z"))).unwrap();
        assert!(matches!(
            store.commit_image(&other, &m, "t"),
            Err(StoreError::DigestMismatch { .. })
        ));
        // not a manifest
        assert!(store.commit_image(&r, b"{}", "t").is_err());
        let md = store.commit_image(&r, &m, "import test").unwrap();
        assert_eq!(md, Digest::of_bytes(&m));
        let rec: RefRecord =
            serde_json::from_slice(&fs::read(store.root().join("images/x%2Fy/1.json")).unwrap())
                .unwrap();
        assert_eq!(
            (rec.name.as_str(), rec.tag.as_deref(), &rec.manifest),
            ("x/y", Some("1"), &md)
        );
        assert_eq!(rec.source, "import test");
        assert_eq!(tmp_count(&store), 0);
        // by digest only
        let pin = ImageRef::parse(&format!("x/z@{md}")).unwrap();
        store.commit_image(&pin, &m, "pull").unwrap();
        assert!(store
            .root()
            .join(format!("images/x%2Fz/@{}.json", md.hex()))
            .is_file());
    }

    #[test]
    fn list_inspect_resolve_tag_remove() {
        let t = TempDir::new("store-ops");
        let store = Store::open(t.path()).unwrap();
        let (m1, l1) = add_image(&store, "app:1", b"one");
        let (m2, _) = add_image(&store, "reg.io:5000/lib/base", b"two");
        let list = store.list().unwrap();
        let names: Vec<&str> = list.iter().map(|i| i.reference.as_str()).collect();
        assert_eq!(names, ["app:1", "reg.io:5000/lib/base:latest"]);
        assert_eq!(list[0].layers, 1);
        assert_eq!(list[0].created.as_deref(), Some("2024-01-02T03:04:05Z"));
        assert!(list[0].error.is_none());
        let r = store.resolve("app:1").unwrap();
        assert_eq!((&r.manifest_digest, r.layers.len()), (&m1, 1));
        assert_eq!(layout::descriptor_digest(&r.layers[0]).unwrap(), l1);
        assert_eq!(r.config.architecture().to_string(), "amd64");
        assert!(matches!(store.resolve("app"), Err(StoreError::NotFound(_))));
        assert_eq!(
            store.resolve(&format!("app@{m1}")).unwrap().manifest_digest,
            m1
        );
        assert!(matches!(
            store.resolve(&format!("app@{m2}")),
            Err(StoreError::NotFound(_))
        ));
        assert!(store.resolve(&format!("app:2@{m1}")).is_err());
        let d = store.inspect("reg.io:5000/lib/base").unwrap();
        assert_eq!(d.manifest_digest, m2);
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["manifest"]["schemaVersion"], 2);
        store.tag("app:1", "app:latest").unwrap();
        store.tag("app:1", "other/app:x").unwrap();
        assert!(store.tag(&format!("app@{m1}"), "app:2").is_ok());
        assert!(store.tag("app:1", &format!("app@{m1}")).is_err());
        assert!(store.tag("nope", "app:3").is_err());
        assert_eq!(store.list().unwrap().len(), 5);
        let rep = store.remove("app:latest").unwrap();
        assert_eq!(rep.removed, ["app:latest"]);
        let rep = store.remove(&format!("app@{m1}")).unwrap();
        assert_eq!(rep.removed, ["app:1", "app:2"]);
        assert!(!store.root().join("images/app").exists());
        assert!(matches!(
            store.remove("app:1"),
            Err(StoreError::NotFound(_))
        ));
        assert_eq!(store.list().unwrap().len(), 2);
    }

    #[test]
    fn gc_frees_unreferenced_blobs_rootfs_and_tmp() {
        let t = TempDir::new("store-gc");
        let store = Store::open(t.path()).unwrap();
        let (m1, l1) = add_image(&store, "a", b"layer-a");
        let (m2, _) = add_image(&store, "b", b"layer-b");
        store.put_blob(&b"stray"[..], None).unwrap();
        fs::write(store.temp_path("junk"), b"x").unwrap();
        // unpacked rootfs with read-only directories, for both images
        for m in [&m1, &m2] {
            let dir = store.rootfs_dir(m);
            fs::create_dir_all(dir.join("usr/bin")).unwrap();
            fs::write(dir.join("usr/bin/tool"), b"x").unwrap();
            for p in ["usr/bin", "usr", ""] {
                fs::set_permissions(dir.join(p), fs::Permissions::from_mode(0o555)).unwrap();
            }
        }
        let rep = store.gc().unwrap();
        assert_eq!(
            (rep.removed_blobs, rep.removed_rootfs, rep.removed_tmp),
            (1, 0, 1)
        );
        assert_eq!(rep.kept_blobs, 6);
        // rm of b removes its rootfs right away (nobody holds the store)
        let rep = store.remove("b").unwrap();
        assert_eq!(rep.rootfs_removed, vec![m2.clone()]);
        assert!(!store.rootfs_dir(&m2).exists());
        // while held, rm leaves the rootfs to gc, and gc refuses in-process
        store.tag("a", "a2").unwrap();
        store.remove("a").unwrap(); // still referenced by a2
        assert!(store.rootfs_dir(&m1).exists());
        let hold = store.hold().unwrap();
        let rep = store.remove("a2").unwrap();
        assert!(rep.rootfs_removed.is_empty());
        assert!(matches!(store.gc(), Err(StoreError::Busy { .. })));
        drop(hold);
        let rep = store.gc().unwrap();
        assert_eq!((rep.removed_blobs, rep.removed_rootfs), (6, 1));
        assert_eq!(blob_count(&store), 0);
        assert!(!store.has_blob(&l1));
        assert!(fs::read_dir(store.root().join("rootfs"))
            .unwrap()
            .next()
            .is_none());
    }

    #[test]
    fn gc_waits_for_holders_in_other_processes() {
        // A hold is an flock on its own open file description, so a second
        // descriptor in this process stands in for another process.
        let t = TempDir::new("store-gcwait");
        let store = Store::open(t.path()).unwrap();
        let other = take_lock(&store.gc_lock_path(), false, true)
            .unwrap()
            .unwrap();
        let s2 = store.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            let r = s2.gc().map(|r| r.removed_blobs);
            tx.send(()).unwrap();
            r
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "gc must wait"
        );
        drop(other);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(h.join().unwrap().unwrap(), 0);
    }

    #[test]
    fn concurrent_writers_of_the_same_blob() {
        let t = TempDir::new("store-conc");
        let store = Store::open(t.path()).unwrap();
        let data: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let want = Digest::of_bytes(&data);
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (s, d, w) = (store.clone(), data.clone(), want.clone());
                std::thread::spawn(move || {
                    let exp = if i % 2 == 0 { None } else { Some(&w) };
                    s.put_blob(&d[..], exp).unwrap()
                })
            })
            .collect();
        for th in threads {
            assert_eq!(th.join().unwrap(), (want.clone(), data.len() as u64));
        }
        assert_eq!((blob_count(&store), tmp_count(&store)), (1, 0));
        // concurrent ref updates of distinct tags
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let s = store.clone();
                std::thread::spawn(move || add_image(&s, &format!("img:{i}"), b"same layer"))
            })
            .collect();
        let ms: BTreeSet<Digest> = threads.into_iter().map(|t| t.join().unwrap().0).collect();
        assert_eq!(ms.len(), 1);
        assert_eq!(store.list().unwrap().len(), 8);
    }

    #[test]
    fn stale_tmp_is_cleaned_on_open() {
        let t = TempDir::new("store-stale");
        let store = Store::open(t.path()).unwrap();
        let old = store.temp_path("old");
        fs::create_dir_all(old.join("d")).unwrap();
        fs::set_permissions(old.join("d"), fs::Permissions::from_mode(0o500)).unwrap();
        let fresh = store.temp_path("fresh");
        fs::write(&fresh, b"x").unwrap();
        let past = SystemTime::now() - Duration::from_secs(2 * 3600);
        File::open(&old).unwrap().set_modified(past).unwrap();
        Store::open(t.path()).unwrap();
        assert!(!old.exists());
        assert!(fresh.exists());
        // not while someone holds the store
        let hold = store.hold().unwrap();
        File::open(&fresh).unwrap().set_modified(past).unwrap();
        Store::open(t.path()).unwrap();
        assert!(fresh.exists());
        drop(hold);
    }

    #[test]
    fn remove_tree_handles_deep_read_only_trees_and_symlinks() {
        let t = TempDir::new("store-rmtree");
        let top = t.path().join("top");
        let outside = t.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("keep"), b"k").unwrap();
        // deeper than PATH_MAX allows as one path (built with mkdirat)
        fs::create_dir(&top).unwrap();
        let name = CString::new("d".repeat(200)).unwrap();
        let mut fd = open_dir_at(libc::AT_FDCWD, &cpath(top.as_os_str()).unwrap()).unwrap();
        for _ in 0..40 {
            assert_eq!(
                unsafe { libc::mkdirat(fd.as_raw_fd(), name.as_ptr(), 0o755) },
                0
            );
            fd = open_dir_at(fd.as_raw_fd(), &name).unwrap();
        }
        // the deepest directory read-only, with a file
        let f = CString::new("f").unwrap();
        let ffd = unsafe {
            libc::openat(
                fd.as_raw_fd(),
                f.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY,
                0o444,
            )
        };
        assert!(ffd >= 0);
        unsafe { libc::close(ffd) };
        assert_eq!(unsafe { libc::fchmod(fd.as_raw_fd(), 0o500) }, 0);
        drop(fd);
        // read-only dirs and a symlink to outside
        std::os::unix::fs::symlink(&outside, top.join("link")).unwrap();
        fs::create_dir(top.join("ro")).unwrap();
        fs::write(top.join("ro/f"), b"x").unwrap();
        fs::set_permissions(top.join("ro/f"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::set_permissions(top.join("ro"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::set_permissions(&top, fs::Permissions::from_mode(0o555)).unwrap();
        remove_tree(&top).unwrap();
        assert!(!top.exists());
        assert!(outside.join("keep").exists());
        // a symlink or a file as the argument
        std::os::unix::fs::symlink(&outside, t.path().join("l2")).unwrap();
        remove_tree(&t.path().join("l2")).unwrap();
        assert!(outside.join("keep").exists());
    }
}
