//! Hostile layers built in memory. Everything runs as root and as an
//! unprivileged user (`setpriv --reuid=65534 ...`); tests needing root say
//! so and return early otherwise.

use super::*;
use crate::image::digest::DigestReader;
use std::fs;
use std::io::{BufReader, Cursor, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;
use tar::{EntryType, Header};

/// A scratch directory holding `root/` (the rootfs) and room beside it
/// for sentinels; removed on drop, read-only directories included.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "cbrun-unpack-test-{}-{}-{}",
            std::process::id(),
            tag,
            N.fetch_add(1, Ordering::SeqCst)
        ));
        rm_rf(&p);
        fs::create_dir_all(p.join("root")).unwrap();
        Scratch(p)
    }
    fn root(&self) -> PathBuf {
        self.0.join("root")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        rm_rf(&self.0);
    }
}

fn rm_rf(p: &Path) {
    fn open_up(p: &Path) {
        if let Ok(m) = fs::symlink_metadata(p) {
            if m.is_dir() {
                let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o700));
                if let Ok(rd) = fs::read_dir(p) {
                    for e in rd.flatten() {
                        open_up(&e.path());
                    }
                }
            }
        }
    }
    if fs::remove_dir_all(p).is_err() {
        open_up(p);
        let _ = fs::remove_dir_all(p);
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

const MTIME: u64 = 1_600_000_000;

/// A layer tar written header by header, with no validation of names.
struct L {
    b: tar::Builder<Vec<u8>>,
    ids: (u64, u64),
    pax: Vec<(String, Vec<u8>)>,
}

impl L {
    fn new() -> L {
        L {
            b: tar::Builder::new(Vec::new()),
            ids: (0, 0),
            pax: Vec::new(),
        }
    }
    fn ids(mut self, uid: u64, gid: u64) -> L {
        self.ids = (uid, gid);
        self
    }
    /// PAX records for the next entry.
    fn pax(mut self, key: &str, value: &[u8]) -> L {
        self.pax.push((key.to_owned(), value.to_vec()));
        self
    }
    fn raw(mut self, kind: EntryType, name: &[u8], link: &[u8], data: &[u8], mode: u32) -> L {
        if name.len() > 100 {
            self.pax.push(("path".into(), name.to_vec()));
        }
        if link.len() > 100 {
            self.pax.push(("linkpath".into(), link.to_vec()));
        }
        if !self.pax.is_empty() {
            let recs: Vec<(&str, &[u8])> = self
                .pax
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_slice()))
                .collect();
            self.b.append_pax_extensions(recs).unwrap();
            self.pax.clear();
        }
        let mut h = Header::new_ustar();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_uid(self.ids.0);
        h.set_gid(self.ids.1);
        h.set_mtime(MTIME);
        let n = name.len().min(100);
        h.as_old_mut().name[..n].copy_from_slice(&name[..n]);
        let n = link.len().min(100);
        h.as_old_mut().linkname[..n].copy_from_slice(&link[..n]);
        h.set_cksum();
        self.b.append(&h, data).unwrap();
        self
    }
    fn dir(self, name: &str, mode: u32) -> L {
        self.raw(EntryType::Directory, name.as_bytes(), b"", b"", mode)
    }
    fn file(self, name: &str, data: &str) -> L {
        self.raw(
            EntryType::Regular,
            name.as_bytes(),
            b"",
            data.as_bytes(),
            0o644,
        )
    }
    fn file_mode(self, name: &str, data: &str, mode: u32) -> L {
        self.raw(
            EntryType::Regular,
            name.as_bytes(),
            b"",
            data.as_bytes(),
            mode,
        )
    }
    fn symlink(self, name: &str, target: &str) -> L {
        self.raw(
            EntryType::Symlink,
            name.as_bytes(),
            target.as_bytes(),
            b"",
            0o777,
        )
    }
    fn hardlink(self, name: &str, target: &str) -> L {
        self.raw(
            EntryType::Link,
            name.as_bytes(),
            target.as_bytes(),
            b"",
            0o644,
        )
    }
    fn done(self) -> Vec<u8> {
        self.b.into_inner().unwrap()
    }
}

fn opts() -> UnpackOptions {
    UnpackOptions::default()
}

fn apply(root: &Path, layers: &[&[u8]]) -> Result<UnpackReport, UnpackError> {
    apply_layers(root, layers.iter().map(|l| Cursor::new(*l)), &opts())
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn exists(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// Every name below `p`, sorted, relative.
fn listing(p: &Path) -> Vec<String> {
    fn walk(base: &Path, p: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(p).unwrap().flatten() {
            let path = e.path();
            out.push(path.strip_prefix(base).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                walk(base, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(p, p, &mut out);
    out.sort();
    out
}

fn inner(e: &UnpackError) -> &UnpackError {
    e.innermost()
}

/// A small deterministic generator (xorshift64) for noise and mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
// The tests, by topic; the helpers above are theirs.
mod bulk;
mod entries;
mod hostile;
mod paths;
