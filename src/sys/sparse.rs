//! Copying a regular file's content without filling its holes: only the
//! ranges `SEEK_DATA`/`SEEK_HOLE` call data are read, and blocks of zeros
//! are not written, so a 10 GiB file holding a few bytes costs a few bytes
//! to copy and to store. On filesystems without hole reporting the kernel
//! calls the whole file data, and the copy is simply dense but correct.

use std::io;
use std::os::fd::BorrowedFd;

use super::at::{ftruncate, pread, pwrite_all, seek};

const CHUNK: usize = 128 * 1024;

/// Why a sparse copy stopped.
#[derive(Debug)]
pub enum SparseError {
    /// More than the budget of data bytes would have been read.
    OverBudget,
    /// The source ended before its size said (it shrank mid-copy).
    Shrank,
    Io(io::Error),
}

impl From<io::Error> for SparseError {
    fn from(e: io::Error) -> Self {
        SparseError::Io(e)
    }
}

/// Copies the first `size` bytes of `src` into `dst` (empty, freshly
/// created) and sets its length to `size`. Returns the data bytes read,
/// which never exceed `budget`.
pub fn copy_sparse(
    src: BorrowedFd,
    dst: BorrowedFd,
    size: u64,
    budget: u64,
) -> Result<u64, SparseError> {
    let mut buf = vec![0u8; CHUNK.min(usize::try_from(size).unwrap_or(CHUNK)).max(1)];
    let mut off = 0u64;
    let mut data = 0u64;
    while off < size {
        let Some(start) = seek(src, off, libc::SEEK_DATA)? else {
            break;
        };
        if start >= size {
            break;
        }
        let end = seek(src, start, libc::SEEK_HOLE)?.unwrap_or(size).min(size);
        let mut pos = start;
        while pos < end {
            let want = usize::try_from(end - pos)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            if data.saturating_add(want as u64) > budget {
                return Err(SparseError::OverBudget);
            }
            let n = pread(src, &mut buf[..want], pos)?;
            if n == 0 {
                return Err(SparseError::Shrank);
            }
            data += n as u64;
            // Zeros stay a hole in the copy.
            if buf[..n].iter().any(|b| *b != 0) {
                pwrite_all(dst, &buf[..n], pos)?;
            }
            pos += n as u64;
        }
        off = end;
    }
    ftruncate(dst, size)?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, File, OpenOptions};
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cbrun-sparse-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn holes_stay_holes_and_content_survives() {
        let d = scratch("holes");
        let src = d.join("src");
        let mut f = File::create(&src).unwrap();
        f.write_all(b"head").unwrap();
        f.seek(SeekFrom::Start(1 << 30)).unwrap();
        f.write_all(b"middle").unwrap();
        f.set_len(3 << 30).unwrap();
        drop(f);
        let dst = d.join("dst");
        let s = File::open(&src).unwrap();
        let t = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&dst)
            .unwrap();
        let data = copy_sparse(s.as_fd(), t.as_fd(), 3 << 30, 1 << 20).unwrap();
        assert!(data < 1 << 20, "{data}");
        let m = fs::metadata(&dst).unwrap();
        assert_eq!(m.len(), 3 << 30);
        assert!(m.blocks() * 512 < 1 << 20, "{} blocks", m.blocks());
        let mut t = File::open(&dst).unwrap();
        let mut head = [0u8; 4];
        t.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"head");
        t.seek(SeekFrom::Start(1 << 30)).unwrap();
        let mut mid = [0u8; 6];
        t.read_exact(&mut mid).unwrap();
        assert_eq!(&mid, b"middle");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn data_over_budget_stops() {
        let d = scratch("budget");
        let src = d.join("src");
        fs::write(&src, vec![7u8; 300_000]).unwrap();
        let s = File::open(&src).unwrap();
        let t = File::create(d.join("dst")).unwrap();
        assert!(matches!(
            copy_sparse(s.as_fd(), t.as_fd(), 300_000, 200_000),
            Err(SparseError::OverBudget)
        ));
        let t2 = File::create(d.join("dst2")).unwrap();
        assert_eq!(
            copy_sparse(s.as_fd(), t2.as_fd(), 300_000, 300_000).unwrap(),
            300_000
        );
        assert_eq!(fs::read(d.join("dst2")).unwrap(), vec![7u8; 300_000]);
        fs::remove_dir_all(&d).unwrap();
    }
}
