//! Extended attributes by path: `getxattr`/`lgetxattr`/`setxattr`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Whether a symbolic link at the path is followed or read itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// `getxattr`: the link's target.
    Yes,
    /// `lgetxattr`: the link itself.
    No,
}

fn c(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Reads attribute `name` of `path` into `buf`; the value's length. ERANGE
/// when `buf` is too small, ENODATA when there is no such attribute.
pub fn get(path: &Path, name: &str, buf: &mut [u8], follow: Follow) -> io::Result<usize> {
    let p = c(path.as_os_str().as_bytes())?;
    let n = c(name.as_bytes())?;
    // SAFETY: both strings are NUL-terminated and outlive the call; the
    // kernel writes at most `buf.len()` bytes into `buf`.
    let r = unsafe {
        match follow {
            Follow::Yes => {
                libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
            }
            Follow::No => {
                libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
            }
        }
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Sets attribute `name` of `path` (following a link) to `value`.
pub fn set(path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    let p = c(path.as_os_str().as_bytes())?;
    let n = c(name.as_bytes())?;
    // SAFETY: NUL-terminated strings and `value`, which the kernel only
    // reads, for its length.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r != 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
