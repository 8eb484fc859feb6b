//! Small file-system helpers shared by the CLI and the trial runner.

use std::ffi::{CStr, CString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{BorrowedFd, IntoRawFd};
use std::path::Path;

/// Write `bytes` to `path` atomically: a temp file in the same directory,
/// synced, then renamed over the target. A reader sees the old file or the
/// new one, never half of one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// [`write_atomic`] of pretty JSON with a trailing newline.
pub fn write_json_atomic<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Closes a `DIR*` stream.
struct DirStream(*mut libc::DIR);

impl Drop for DirStream {
    fn drop(&mut self) {
        unsafe { libc::closedir(self.0) };
    }
}

/// Names in `dir` (without `.` and `..`), at most `cap` of them; the flag
/// says whether more were left.
pub fn read_dir_names(dir: BorrowedFd, cap: usize) -> io::Result<(Vec<CString>, bool)> {
    // fdopendir takes ownership of its fd: give it a duplicate so `dir`
    // stays usable. The duplicate shares the offset, hence the rewind.
    let dup = dir.try_clone_to_owned()?.into_raw_fd();
    let ptr = unsafe { libc::fdopendir(dup) };
    if ptr.is_null() {
        let e = io::Error::last_os_error();
        unsafe { libc::close(dup) };
        return Err(e);
    }
    let stream = DirStream(ptr);
    unsafe { libc::rewinddir(stream.0) };
    let mut names = Vec::new();
    loop {
        // readdir reports errors only through errno.
        unsafe { *libc::__errno_location() = 0 };
        let ent = unsafe { libc::readdir(stream.0) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(0) | None => Ok((names, false)),
                Some(_) => Err(e),
            };
        }
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        if name == c"." || name == c".." {
            continue;
        }
        if names.len() >= cap {
            return Ok((names, true));
        }
        names.push(name.to_owned());
    }
}

/// The target of the symlink `name` in `dir`, whatever its length (bounded
/// at 1 MiB; Linux filesystems keep targets within PATH_MAX).
pub fn readlink_at(dir: BorrowedFd, name: &CStr) -> io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    loop {
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(buf);
        }
        // Possibly truncated: retry larger, within reason.
        if buf.len() >= 1 << 20 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "symlink target too long",
            ));
        }
        buf.resize(buf.len() * 2, 0);
    }
}

/// Whether the directory at `path` has no entries but `.` and `..`.
/// Reads a few entries at most, where a full listing (`read_dir`) has the
/// kernel walk the whole directory into a 32 KiB buffer.
pub fn dir_is_empty(path: &Path) -> io::Result<bool> {
    let dir = File::open(path)?;
    // Room for `.`, `..` and a couple of names: enough to find one.
    let mut buf = [0u64; 64];
    loop {
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                std::os::fd::AsRawFd::as_raw_fd(&dir),
                buf.as_mut_ptr(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(true);
        }
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
        let mut off = 0usize;
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        while off + 19 < bytes.len() {
            let reclen = u16::from_ne_bytes([bytes[off + 16], bytes[off + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let name = &bytes[off + 19..(off + reclen).min(bytes.len())];
            let name = name.split(|b| *b == 0).next().unwrap_or(&[]);
            if name != b"." && name != b".." {
                return Ok(false);
            }
            off += reclen;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("cbrun-fsutil-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.json");
        write_json_atomic(&p, &serde_json::json!({"a": 1})).unwrap();
        write_json_atomic(&p, &serde_json::json!({"a": 2})).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        assert_eq!(v["a"], 2);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dir_is_empty_sees_one_entry_among_many() {
        let d = std::env::temp_dir().join(format!("cbrun-empty-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir(&d).unwrap();
        assert!(dir_is_empty(&d).unwrap());
        fs::create_dir(d.join("sub")).unwrap();
        assert!(!dir_is_empty(&d).unwrap());
        fs::remove_dir(d.join("sub")).unwrap();
        assert!(dir_is_empty(&d).unwrap());
        // Many long names: the first small read holds no `.`-only batch.
        for i in 0..300 {
            fs::write(d.join(format!("{i:0>200}")), b"").unwrap();
        }
        assert!(!dir_is_empty(&d).unwrap());
        assert!(dir_is_empty(&d.join("missing")).is_err());
        fs::remove_dir_all(&d).unwrap();
    }
}
