//! A directory written as a tar, deterministically (the layer of a
//! `rootfs-dir` import).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Owners recorded for a directory import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// uid/gid as on disk (imports as root).
    AsOnDisk,
    /// Everything 0:0 (rootless imports: the files belong to the caller).
    Root,
}

/// Write `dir` as a tar to `out`, deterministically: entries in byte order
/// of their names, depth first, a directory before its contents; modes and
/// mtimes as on disk, uid/gid per `owner`, no user/group names, no atime,
/// no xattrs. Hard links within the tree become link entries. Sockets are
/// skipped (returned as warnings). `skip` (dev, ino) is never descended into.
pub fn tar_directory(
    dir: &Path,
    out: &mut impl Write,
    owner: Ownership,
    skip: Option<(u64, u64)>,
) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    let mut b = tar::Builder::new(out);
    let mut seen: HashMap<(u64, u64), PathBuf> = HashMap::new();
    // Stack of (relative path, absolute path) to visit, reversed order.
    let mut stack: Vec<PathBuf> = children_sorted(dir, Path::new(""))?;
    stack.reverse();
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        let m = abs
            .symlink_metadata()
            .map_err(|e| format!("{}: {e}", abs.display()))?;
        let ft = m.file_type();
        let mut h = tar::Header::new_gnu();
        h.set_mode(m.mode() & 0o7777);
        let (uid, gid) = match owner {
            Ownership::AsOnDisk => (m.uid() as u64, m.gid() as u64),
            Ownership::Root => (0, 0),
        };
        h.set_uid(uid);
        h.set_gid(gid);
        h.set_mtime(m.mtime().max(0) as u64);
        h.set_size(0);
        let err = |e: io::Error| format!("{}: {e}", abs.display());
        if ft.is_dir() {
            if skip == Some((m.dev(), m.ino())) {
                warnings.push(format!(
                    "{}: skipped (the image store itself)",
                    rel.display()
                ));
                continue;
            }
            h.set_entry_type(tar::EntryType::Directory);
            let mut name = rel.as_os_str().to_owned();
            name.push("/");
            b.append_data(&mut h, Path::new(&name), io::empty())
                .map_err(err)?;
            let kids = children_sorted(dir, &rel)?;
            stack.extend(kids.into_iter().rev());
        } else if ft.is_symlink() {
            let target = fs::read_link(&abs).map_err(err)?;
            h.set_entry_type(tar::EntryType::Symlink);
            b.append_link(&mut h, &rel, &target).map_err(err)?;
        } else if ft.is_file() {
            if m.nlink() > 1 {
                if let Some(first) = seen.get(&(m.dev(), m.ino())) {
                    h.set_entry_type(tar::EntryType::Link);
                    b.append_link(&mut h, &rel, first).map_err(err)?;
                    continue;
                }
                seen.insert((m.dev(), m.ino()), rel.clone());
            }
            let f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&abs)
                .map_err(err)?;
            let size = f.metadata().map_err(err)?.len();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(size);
            b.append_data(
                &mut h,
                &rel,
                ExactReader {
                    inner: f,
                    left: size,
                },
            )
            .map_err(err)?;
        } else if ft.is_char_device() || ft.is_block_device() {
            h.set_entry_type(if ft.is_char_device() {
                tar::EntryType::Char
            } else {
                tar::EntryType::Block
            });
            let rdev = m.rdev();
            h.set_device_major(libc::major(rdev)).map_err(err)?;
            h.set_device_minor(libc::minor(rdev)).map_err(err)?;
            b.append_data(&mut h, &rel, io::empty()).map_err(err)?;
        } else if ft.is_fifo() {
            h.set_entry_type(tar::EntryType::Fifo);
            b.append_data(&mut h, &rel, io::empty()).map_err(err)?;
        } else {
            warnings.push(format!("{}: socket skipped", rel.display()));
        }
    }
    b.finish().map_err(|e| format!("writing the layer: {e}"))?;
    Ok(warnings)
}

fn children_sorted(root: &Path, rel: &Path) -> Result<Vec<PathBuf>, String> {
    let abs = root.join(rel);
    let mut names: Vec<std::ffi::OsString> = fs::read_dir(&abs)
        .map_err(|e| format!("{}: {e}", abs.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", abs.display()))?;
    names.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
    Ok(names.into_iter().map(|n| rel.join(n)).collect())
}

/// Exactly `left` bytes of a file that must not shrink while being read.
struct ExactReader {
    inner: File,
    left: u64,
}

impl Read for ExactReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = self.left.min(buf.len() as u64) as usize;
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being read",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}
