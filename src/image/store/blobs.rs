//! Blobs: content-addressed files under `blobs/sha256/`, verified when
//! written ([`BlobWriter`]) and when read ([`BlobReader`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::lock::Hold;
use super::{io_err, sync_dir, Store, StoreError};
use crate::image::digest::{Digest, DigestReader, DigestWriter};
use crate::image::hasher::{ThreadedDigestReader, THREAD_MIN};
use crate::image::layout::MAX_JSON_SIZE;

impl Store {
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
        self.check_writable("writing a blob")?;
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
}

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
