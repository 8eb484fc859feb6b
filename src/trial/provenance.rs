//! Which case files a trial used, by content: the SHA-256 of every file
//! under `public/`, `source/` and `milestones/final/` (the documents the
//! agent read, the runner metadata and bans, the hidden tests), and one
//! hash over all of them that names the case's content in a run's plan.
//!
//! The case folder is walked by descriptor (`Dir`): links are never
//! followed (a symbolic link counts as the text of its target), special
//! files are refused, and the walk is capped in depth, entries and bytes.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::case::layout;
use crate::fsutil::quote_path;
use crate::sys::at::readlink_at;
use crate::sys::dir::{Dir, DirError, Kind};

/// The folders of a case that a trial uses, relative to the case folder.
pub const USED: [&str; 3] = [layout::PUBLIC_DIR, "source", layout::FINAL_DIR];

/// How deep, how many entries and how many bytes a case may hold.
const MAX_DEPTH: usize = 64;
const MAX_ENTRIES: usize = 200_000;
const MAX_BYTES: u64 = 8 << 30;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// SHA-256 over the `files` listing (see [`case_hash`]).
    pub case_sha256: String,
    /// Path relative to the case folder -> SHA-256 of the file's bytes.
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error("{path}: {what}")]
    Refused { path: String, what: String },
}

/// Hashes the used files of the case at `case_dir`.
pub fn of_case(case_dir: &Path) -> Result<Provenance, ProvenanceError> {
    let root = Dir::open(case_dir)?;
    let mut walk = Walk {
        files: BTreeMap::new(),
        entries: 0,
        bytes: 0,
        case_dir,
    };
    for top in USED {
        match root.entry(top)? {
            None => continue,
            Some(st) if Kind::of(&st) == Kind::Dir => {
                let d = root.open_dir(top)?;
                walk.dir(&d, top, 1)?;
            }
            Some(st) => walk.entry(&root, top, top, &st)?,
        }
    }
    Ok(Provenance {
        case_sha256: case_hash(&walk.files),
        files: walk.files,
    })
}

/// The case's hash: SHA-256 over `<sha256>  <path>\n` lines (the format of
/// `sha256sum`), sorted by path.
pub fn case_hash(files: &BTreeMap<String, String>) -> String {
    let mut h = Sha256::new();
    for (path, sum) in files {
        h.update(sum.as_bytes());
        h.update(b"  ");
        h.update(path.as_bytes());
        h.update(b"\n");
    }
    hex(&h.finalize())
}

struct Walk<'a> {
    files: BTreeMap<String, String>,
    entries: usize,
    bytes: u64,
    case_dir: &'a Path,
}

impl Walk<'_> {
    fn refused(&self, rel: &str, what: impl Into<String>) -> ProvenanceError {
        ProvenanceError::Refused {
            path: quote_path(&self.case_dir.join(rel)),
            what: what.into(),
        }
    }

    fn dir(&mut self, d: &Dir, rel: &str, depth: usize) -> Result<(), ProvenanceError> {
        if depth > MAX_DEPTH {
            return Err(self.refused(rel, format!("deeper than {MAX_DEPTH} levels")));
        }
        let (names, more) = d.names(MAX_ENTRIES)?;
        if more {
            return Err(self.refused(rel, format!("more than {MAX_ENTRIES} entries")));
        }
        for name in names {
            let name = OsStr::from_bytes(name.to_bytes());
            let Some(text) = name.to_str() else {
                return Err(self.refused(rel, "a file name that is not UTF-8"));
            };
            let child = format!("{rel}/{text}");
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                return Err(self.refused(rel, format!("more than {MAX_ENTRIES} entries")));
            }
            let Some(st) = d.entry(name)? else { continue };
            if Kind::of(&st) == Kind::Dir {
                let sub = d.open_dir(name)?;
                self.dir(&sub, &child, depth + 1)?;
            } else {
                self.entry(d, name, &child, &st)?;
            }
        }
        Ok(())
    }

    fn entry(
        &mut self,
        d: &Dir,
        name: impl AsRef<Path>,
        rel: &str,
        st: &libc::stat,
    ) -> Result<(), ProvenanceError> {
        let name = name.as_ref();
        let sum = match Kind::of(st) {
            Kind::File => {
                let (mut f, st) = d.open_read(name)?;
                self.bytes += st.st_size.max(0) as u64;
                if self.bytes > MAX_BYTES {
                    return Err(self.refused(rel, "the case holds more than 8 GiB"));
                }
                let mut h = Sha256::new();
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = f
                        .read(&mut buf)
                        .map_err(|e| self.refused(rel, format!("reading: {e}")))?;
                    if n == 0 {
                        break;
                    }
                    h.update(&buf[..n]);
                }
                hex(&h.finalize())
            }
            Kind::Symlink => {
                let c = crate::sys::at::cpath(name.as_os_str())
                    .map_err(|e| self.refused(rel, e.to_string()))?;
                let target = readlink_at(std::os::fd::AsFd::as_fd(d), &c)
                    .map_err(|e| self.refused(rel, format!("reading the link: {e}")))?;
                hex(&Sha256::digest(&target))
            }
            other => return Err(self.refused(rel, format!("is {other}"))),
        };
        self.files.insert(rel.to_owned(), sum);
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cbrun-prov-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn every_used_file_by_content_and_nothing_else() {
        let d = scratch("used");
        fs::create_dir_all(d.join("public")).unwrap();
        fs::create_dir_all(d.join("source/env")).unwrap();
        fs::create_dir_all(d.join("milestones/final/tests")).unwrap();
        fs::create_dir_all(d.join("controls/ref/app")).unwrap();
        fs::write(d.join("public/Full_PRD.md"), "prd").unwrap();
        fs::write(d.join("source/env/resources.json"), "{}").unwrap();
        fs::write(d.join("milestones/final/tests/test_a.py"), "t").unwrap();
        fs::write(d.join("controls/ref/app/x.py"), "control").unwrap();
        std::os::unix::fs::symlink("test_a.py", d.join("milestones/final/tests/link")).unwrap();
        let p = of_case(&d).unwrap();
        let keys: Vec<&str> = p.files.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "milestones/final/tests/link",
                "milestones/final/tests/test_a.py",
                "public/Full_PRD.md",
                "source/env/resources.json"
            ]
        );
        // `printf prd | sha256sum`
        assert_eq!(
            p.files["public/Full_PRD.md"],
            "ea7e4017f6d750b4c5fcbcb9c9c491181bbed0a24b91bf748d391b2097a0d444"
        );
        assert_eq!(p.case_sha256, case_hash(&p.files));
        // A change anywhere used changes the case hash; a control does not.
        fs::write(d.join("controls/ref/app/x.py"), "other").unwrap();
        assert_eq!(of_case(&d).unwrap().case_sha256, p.case_sha256);
        fs::write(d.join("milestones/final/tests/test_a.py"), "u").unwrap();
        assert_ne!(of_case(&d).unwrap().case_sha256, p.case_sha256);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn special_files_are_refused() {
        let d = scratch("fifo");
        fs::create_dir_all(d.join("public")).unwrap();
        nix::unistd::mkfifo(
            &d.join("public/pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let e = of_case(&d).unwrap_err();
        assert!(e.to_string().contains("public/pipe: is a FIFO"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }
}
