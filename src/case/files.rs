//! Reading inside a case folder without ever leaving it: symlinks are
//! resolved and refused when they point outside, only regular files are
//! read, and reads are size-capped.

use std::fs;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::fields::{Doc, Presence};

/// Largest JSON file read.
pub(crate) const MAX_JSON_BYTES: u64 = 16 << 20;
/// Largest public document scanned by the leak guard.
pub(crate) const MAX_DOC_BYTES: u64 = 64 << 20;
/// Bounds on directory walks (entries per walk, depth).
pub(crate) const MAX_WALK_ENTRIES: usize = 10_000;
pub(crate) const MAX_WALK_DEPTH: usize = 16;

/// A case folder, canonicalised.
pub(crate) struct Root {
    pub canon: PathBuf,
}

/// What a relative path inside the case names.
#[derive(Debug)]
pub(crate) enum Entry {
    Missing,
    /// A symlink whose target does not exist.
    Dangling,
    /// Resolves outside the case folder (never read).
    Outside(PathBuf),
    File(PathBuf),
    Dir(PathBuf),
    /// A FIFO, socket, device...
    Special,
    Unreadable(String),
}

impl Entry {
    /// Why this entry is not a regular file / directory, for a problem report.
    pub fn defect(&self, want_dir: bool) -> Option<String> {
        let what = if want_dir { "directory" } else { "file" };
        match self {
            Entry::Missing => Some(format!("missing required {what}")),
            Entry::Dangling => Some("dangling symlink".into()),
            Entry::Outside(t) => Some(format!(
                "symlink resolves outside the case folder ({}); not followed",
                t.display()
            )),
            Entry::File(_) if want_dir => Some("expected a directory, found a file".into()),
            Entry::Dir(_) if !want_dir => Some("expected a file, found a directory".into()),
            Entry::File(_) | Entry::Dir(_) => None,
            Entry::Special => Some(format!("not a regular {what}")),
            Entry::Unreadable(e) => Some(format!("cannot read: {e}")),
        }
    }
}

impl Root {
    pub fn open(dir: &Path) -> Result<Root, String> {
        let canon = fs::canonicalize(dir).map_err(|e| format!("case folder unreadable: {e}"))?;
        if !canon.is_dir() {
            return Err("case folder is not a directory".into());
        }
        Ok(Root { canon })
    }

    /// Resolves `rel` (a relative path with no `..`) inside the case folder.
    pub fn resolve(&self, rel: &str) -> Entry {
        let p = self.canon.join(rel);
        match fs::symlink_metadata(&p) {
            Err(e) if e.kind() == ErrorKind::NotFound => return Entry::Missing,
            // ENOTDIR: a parent component is a file.
            Err(e) if e.raw_os_error() == Some(20) => return Entry::Missing,
            Err(e) => return Entry::Unreadable(e.to_string()),
            Ok(_) => {}
        }
        let c = match fs::canonicalize(&p) {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::NotFound => return Entry::Dangling,
            Err(e) => return Entry::Unreadable(e.to_string()),
        };
        if !c.starts_with(&self.canon) {
            return Entry::Outside(c);
        }
        match fs::metadata(&c) {
            Ok(m) if m.is_file() => Entry::File(c),
            Ok(m) if m.is_dir() => Entry::Dir(c),
            Ok(_) => Entry::Special,
            Err(e) => Entry::Unreadable(e.to_string()),
        }
    }

    /// Regular files under `rel_dir` (relative paths, sorted), bounded in
    /// depth and count; entries resolving outside the folder are listed
    /// with their `Entry` so callers can report them.
    pub fn walk(&self, rel_dir: &str) -> Vec<(String, Entry)> {
        let mut out = Vec::new();
        self.walk_into(rel_dir, 0, &mut out);
        out
    }

    fn walk_into(&self, rel_dir: &str, depth: usize, out: &mut Vec<(String, Entry)>) {
        if depth > MAX_WALK_DEPTH {
            return;
        }
        for name in self.list(rel_dir) {
            if out.len() >= MAX_WALK_ENTRIES {
                return;
            }
            let rel = format!("{rel_dir}/{name}");
            match self.resolve(&rel) {
                // Do not descend through symlinked directories (no loops).
                Entry::Dir(_) if !is_symlink(&self.canon.join(&rel)) => {
                    self.walk_into(&rel, depth + 1, out)
                }
                Entry::Dir(_) => {}
                e => out.push((rel, e)),
            }
        }
    }

    /// Names in a directory, sorted; empty when it cannot be read.
    pub fn list(&self, rel_dir: &str) -> Vec<String> {
        let Ok(rd) = fs::read_dir(self.canon.join(rel_dir)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .take(MAX_WALK_ENTRIES)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn is_symlink(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Reads at most `cap` bytes of a regular file; larger files are an error.
pub(crate) fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let f = fs::File::open(path).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    f.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    if buf.len() as u64 > cap {
        return Err(format!("larger than {cap} bytes"));
    }
    Ok(buf)
}

/// Reads and parses a JSON file of the case, reporting through `doc`.
pub(crate) fn read_json(
    root: &Root,
    rel: &str,
    presence: Presence,
    doc: &mut Doc,
) -> Option<Value> {
    let entry = root.resolve(rel);
    let path = match entry {
        Entry::File(p) => p,
        Entry::Missing if presence != Presence::Required => return None,
        other => {
            doc.error("", &other.defect(false).unwrap_or_default());
            return None;
        }
    };
    let bytes = match read_capped(&path, MAX_JSON_BYTES) {
        Ok(b) => b,
        Err(e) => {
            doc.error("", &format!("cannot read: {e}"));
            return None;
        }
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        doc.error("", "empty file (expected a JSON object)");
        return None;
    }
    match serde_json::from_slice(&bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            let msg = e.to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg);
            doc.error(
                "",
                &format!(
                    "invalid JSON at line {}, column {}: {msg}",
                    e.line(),
                    e.column()
                ),
            );
            None
        }
    }
}
