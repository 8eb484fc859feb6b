//! Tar archives holding an image (oci-archive, docker-archive): their
//! headers indexed once, members read in place; and the directory of an OCI
//! layout, read through the same [`Source`].

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;

use super::{MAX_ARCHIVE_ENTRIES, MAX_LINK_HOPS};
use crate::image::layout::MAX_JSON_SIZE;

/// `s` with control and non-ASCII characters as `?`, at most 200 of them
/// (tar errors quote raw header bytes).
pub(super) fn printable(s: &str) -> String {
    s.chars()
        .take(200)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Normalize a member name: no leading `/`, no `..`, `.` and empty parts dropped.
pub(super) fn normalize_member(name: &str) -> Result<String, &'static str> {
    if name.starts_with('/') {
        return Err("absolute path");
    }
    let mut parts = Vec::new();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err("path leaves the archive"),
            c => parts.push(c),
        }
    }
    Ok(parts.join("/"))
}

/// Resolve `target` relative to directory `base` lexically, refusing to
/// leave the archive root.
pub(super) fn resolve_relative(base: &str, target: &str) -> Result<String, &'static str> {
    if target.starts_with('/') {
        return Err("absolute path");
    }
    let mut parts: Vec<&str> = base.split('/').filter(|c| !c.is_empty()).collect();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("path leaves the archive");
                }
            }
            c => parts.push(c),
        }
    }
    Ok(parts.join("/"))
}

fn parent_of(name: &str) -> &str {
    name.rfind('/').map(|i| &name[..i]).unwrap_or("")
}

#[derive(Debug, Clone)]
enum Member {
    File { offset: u64, size: u64 },
    Symlink(String),
    Hardlink(String),
    Dir,
    Other(&'static str),
}

/// The headers of a tar file, indexed by normalized name (members up to 3
/// levels deep: all an image archive uses).
pub(super) struct TarIndex {
    pub(super) file: File,
    members: HashMap<String, Member>,
    /// Entries an image archive must not have: (raw name, why).
    pub(super) bad: Vec<(String, String)>,
    pub(super) entries: usize,
}

impl TarIndex {
    pub(super) fn scan(file: File) -> Result<TarIndex, String> {
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        let mut members = HashMap::new();
        let mut bad = Vec::new();
        let mut entries = 0usize;
        {
            let mut ar = tar::Archive::new(&file);
            let iter = ar
                .entries_with_seek()
                .map_err(|e| format!("not a tar archive: {e}"))?;
            for e in iter {
                let e = e.map_err(|e| {
                    if entries == 0 {
                        "not a tar archive (plain, gzip or zstd)".to_owned()
                    } else {
                        format!(
                            "corrupt tar after {entries} entries: {}",
                            printable(&e.to_string())
                        )
                    }
                })?;
                entries += 1;
                let raw = String::from_utf8_lossy(&e.path_bytes()).into_owned();
                let name = match normalize_member(&raw) {
                    Ok(n) => n,
                    Err(why) => {
                        if bad.len() < 16 {
                            bad.push((printable(&raw), why.to_owned()));
                        }
                        continue;
                    }
                };
                // Deeper members are not image-archive files; past the cap the
                // input is no image archive either (and memory stays bounded).
                if name.is_empty()
                    || name.split('/').count() > 3
                    || members.len() >= MAX_ARCHIVE_ENTRIES
                {
                    continue;
                }
                let ty = e.header().entry_type();
                let size = e.size();
                let offset = e.raw_file_position();
                let link = e
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let member = match ty {
                    tar::EntryType::Regular | tar::EntryType::Continuous => {
                        if offset.checked_add(size).is_none_or(|end| end > len) {
                            return Err(format!(
                                "entry {:?}: size {size} runs past the end of the file",
                                printable(&raw)
                            ));
                        }
                        Member::File { offset, size }
                    }
                    tar::EntryType::Symlink => Member::Symlink(link),
                    tar::EntryType::Link => match normalize_member(&link) {
                        Ok(t) => Member::Hardlink(t),
                        Err(why) => {
                            bad.push((
                                printable(&raw),
                                format!("hard link to {:?}: {why}", printable(&link)),
                            ));
                            continue;
                        }
                    },
                    tar::EntryType::Directory => Member::Dir,
                    tar::EntryType::GNUSparse => Member::Other("sparse file"),
                    tar::EntryType::Char | tar::EntryType::Block => Member::Other("device"),
                    tar::EntryType::Fifo => Member::Other("fifo"),
                    _ => Member::Other("special entry"),
                };
                if !matches!(member, Member::Dir) {
                    if let Some(prev) = members.insert(name.clone(), member) {
                        if !matches!(prev, Member::Dir) && bad.len() < 16 {
                            bad.push((printable(&raw), "appears twice".to_owned()));
                        }
                    }
                } else {
                    members.entry(name).or_insert(Member::Dir);
                }
            }
        }
        Ok(TarIndex {
            file,
            members,
            bad,
            entries,
        })
    }

    pub(super) fn has_top(&self, name: &str) -> bool {
        matches!(self.members.get(name), Some(Member::File { .. }))
    }

    /// Offset and size of the regular file `name` denotes, following links.
    fn lookup(&self, name: &str) -> Result<(u64, u64), String> {
        let mut cur = name.to_owned();
        for _ in 0..MAX_LINK_HOPS {
            match self.members.get(&cur) {
                None => return Err(format!("{cur:?}: not in the archive")),
                Some(Member::File { offset, size }) => return Ok((*offset, *size)),
                Some(Member::Dir) => return Err(format!("{cur:?}: is a directory")),
                Some(Member::Other(kind)) => {
                    return Err(format!("{cur:?}: is a {kind}, not a regular file"))
                }
                Some(Member::Hardlink(t)) => cur = t.clone(),
                Some(Member::Symlink(t)) => {
                    cur = resolve_relative(parent_of(&cur), t)
                        .map_err(|why| format!("{cur:?}: symlink to {t:?}: {why}"))?;
                }
            }
        }
        Err(format!("{name:?}: too many levels of links"))
    }
}

/// Where an OCI layout or docker archive is read from.
pub(super) enum Source {
    Dir(PathBuf),
    Tar(TarIndex),
}

struct MemberReader<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for MemberReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.pos).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "archive member is truncated",
            ));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Source {
    /// A reader of the member or file `name` (normalized), and its size.
    pub(super) fn open(&self, name: &str) -> Result<(Box<dyn Read + '_>, u64), String> {
        match self {
            Source::Tar(t) => {
                let (offset, size) = t.lookup(name)?;
                Ok((
                    Box::new(MemberReader {
                        file: &t.file,
                        pos: offset,
                        end: offset + size,
                    }),
                    size,
                ))
            }
            Source::Dir(root) => {
                // No symlinks anywhere on the way: the layout is read as is.
                let mut p = root.clone();
                for c in name.split('/') {
                    p.push(c);
                    match p.symlink_metadata() {
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            return Err(format!("{name:?}: not in the layout"))
                        }
                        Err(e) => return Err(format!("{name:?}: {e}")),
                        Ok(m) if m.file_type().is_symlink() => {
                            return Err(format!("{name:?}: is a symlink"))
                        }
                        Ok(_) => {}
                    }
                }
                let f = fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&p)
                    .map_err(|e| format!("{name:?}: {e}"))?;
                let m = f.metadata().map_err(|e| format!("{name:?}: {e}"))?;
                if !m.is_file() {
                    return Err(format!("{name:?}: not a regular file"));
                }
                Ok((Box::new(f), m.len()))
            }
        }
    }

    /// A whole (JSON) member, at most [`MAX_JSON_SIZE`] bytes.
    pub(super) fn read_small(&self, name: &str) -> Result<Vec<u8>, String> {
        let (r, size) = self.open(name)?;
        if size > MAX_JSON_SIZE {
            return Err(format!(
                "{name:?}: {size} bytes is over the {MAX_JSON_SIZE} byte limit for JSON"
            ));
        }
        let mut buf = Vec::with_capacity(size as usize);
        r.take(MAX_JSON_SIZE + 1)
            .read_to_end(&mut buf)
            .map_err(|e| format!("{name:?}: {e}"))?;
        Ok(buf)
    }
}
