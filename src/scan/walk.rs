//! The workspace walk: depth first, each directory in name order (so the
//! report lists the first entries by path), one directory descriptor per
//! level, every entry opened relative to its parent without following
//! links. See the parent module's docs for what is read and what is
//! bounded.

use std::ffi::{CString, OsStr};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::modname::{is_python_module_file, python_path_dir, Names};
use super::{
    scan_source, tree_err, Language, ScanError, ScanReport, Violation, ViolationKind, MAX_DEPTH,
    MAX_ENTRIES, MAX_FILE_BYTES,
};
use crate::fsutil::quote_path;
use crate::sys::dir::{Dir, DirError, Kind};

/// One open directory of the walk.
struct Frame {
    dir: Dir,
    rel: PathBuf,
    /// Entries still to visit, last name first (they are popped).
    names: Vec<CString>,
    /// Python may put this directory on `sys.path`.
    path_dir: bool,
}

struct Walker<'a> {
    bans: &'a [String],
    /// Bytes to read over the whole scan ([`MAX_TOTAL_BYTES`]).
    total_cap: u64,
    names: Names,
    report: ScanReport,
    entries: u64,
}

pub(super) fn walk(root: &Dir, bans: &[String], total_cap: u64) -> Result<ScanReport, ScanError> {
    let mut w = Walker {
        bans,
        total_cap,
        names: Names::new(bans),
        report: ScanReport::default(),
        entries: 0,
    };
    let top = root.try_clone().map_err(|e| ScanError::Io {
        path: quote_path(root.path()),
        err: e,
        blame: crate::sys::dir::Blame::Host,
    })?;
    let first = w.frame(top, PathBuf::new(), false)?;
    let mut stack = vec![first];
    while let Some(name) = stack.last_mut().and_then(|f| f.names.pop()) {
        let top = stack.last().expect("a frame");
        let os = OsStr::from_bytes(name.to_bytes());
        let rel = top.rel.join(os);
        w.entries += 1;
        if w.entries > MAX_ENTRIES {
            return Err(ScanError::TooManyEntries {
                limit: MAX_ENTRIES,
                path: clip_path(&rel),
            });
        }
        let st = match top.dir.entry(os) {
            Ok(Some(st)) => st,
            Ok(None) => return Err(tree_err(&rel, io::Error::from_raw_os_error(libc::ENOENT))),
            Err(e) => return Err(ScanError::Dir(e)),
        };
        match Kind::of(&st) {
            Kind::Dir => {
                if stack.len() > MAX_DEPTH {
                    return Err(ScanError::TooDeep {
                        limit: MAX_DEPTH,
                        path: clip_path(&rel),
                    });
                }
                let parent_path_dir = top.path_dir;
                let sub = top.dir.open_dir(os).map_err(ScanError::Dir)?;
                let frame = w.frame(sub, rel, parent_path_dir)?;
                stack.push(frame);
            }
            Kind::Symlink => {
                let module = top.path_dir
                    && (w.names.python_file(name.to_bytes()).is_some()
                        || w.names.python_dir(name.to_bytes()).is_some());
                if module {
                    let ban = w
                        .names
                        .python_file(name.to_bytes())
                        .or_else(|| w.names.python_dir(name.to_bytes()))
                        .unwrap_or_default()
                        .to_owned();
                    w.module(&rel, Language::Python, &ban);
                } else {
                    w.report.skip(&rel, "symbolic link (not followed)".into());
                }
            }
            Kind::File => {
                if top.path_dir {
                    if let Some(ban) = w.names.python_file(name.to_bytes()) {
                        let ban = ban.to_owned();
                        w.module(&rel, Language::Python, &ban);
                    }
                }
                if let Some(lang) = Language::from_path(&rel) {
                    w.scan_file(&top.dir, os, &rel, Some(lang))?;
                } else if Path::new(os).extension().is_none() {
                    // Maybe a script with a `#!` line.
                    w.scan_file(&top.dir, os, &rel, None)?;
                }
            }
            _ => {
                if Language::from_path(&rel).is_some() {
                    w.report.skip(&rel, "not a regular file".into());
                }
            }
        }
        while stack.last().is_some_and(|f| f.names.is_empty()) {
            stack.pop();
        }
    }
    Ok(w.report)
}

impl Walker<'_> {
    /// Lists `dir` and checks it, as a whole, against the module-name rule.
    fn frame(&mut self, dir: Dir, rel: PathBuf, parent_path_dir: bool) -> Result<Frame, ScanError> {
        let room = MAX_ENTRIES.saturating_sub(self.entries).saturating_add(1);
        let (mut names, more) = dir
            .names(usize::try_from(room).unwrap_or(usize::MAX))
            .map_err(ScanError::Dir)?;
        if more || names.len() as u64 >= room {
            return Err(ScanError::TooManyEntries {
                limit: MAX_ENTRIES,
                path: clip_path(&rel),
            });
        }
        names.sort_unstable_by(|a, b| b.cmp(a));
        let has_init = names.iter().any(|n| n.to_bytes() == b"__init__.py");
        let own = rel.file_name().map(|n| n.as_bytes()).unwrap_or_default();
        // This directory as a Python package named like a ban.
        if parent_path_dir && !rel.as_os_str().is_empty() {
            if let Some(ban) = self.names.python_dir(own) {
                if has_init || names.iter().any(|n| is_python_module_file(n.to_bytes())) {
                    let ban = ban.to_owned();
                    self.module(&rel, Language::Python, &ban);
                }
            }
        }
        // Installed JavaScript packages: `node_modules/<name>` and
        // `node_modules/@scope/<name>`, whatever the entry is.
        let parent_name = rel
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.as_bytes())
            .unwrap_or_default();
        let scope = match std::str::from_utf8(own) {
            Ok(o) if o.starts_with('@') && parent_name == b"node_modules" => Some(o.to_owned()),
            _ => None,
        };
        let node_dir = own == b"node_modules" || scope.is_some();
        if node_dir {
            for n in names.iter().rev() {
                let Ok(n) = n.to_str() else { continue };
                let package = match &scope {
                    Some(s) => format!("{s}/{n}"),
                    None => n.to_owned(),
                };
                if let Some(ban) = self.names.js_package(&package) {
                    let ban = ban.to_owned();
                    self.module(&rel.join(n), Language::JavaScript, &ban);
                }
            }
        }
        Ok(Frame {
            dir,
            // A node_modules entry is already the JavaScript package (and
            // nobody puts node_modules on sys.path).
            path_dir: !node_dir && python_path_dir(&rel, has_init),
            rel,
            names,
        })
    }

    fn module(&mut self, rel: &Path, language: Language, ban: &str) {
        self.report.violation(Violation {
            file: rel.to_path_buf(),
            line: 0,
            language,
            import: module_name(rel, language),
            banned: ban.to_owned(),
            kind: ViolationKind::Module,
        });
    }

    /// Reads and scans one file. `lang` None: sniff a `#!` line, and leave
    /// the file alone (uncounted) when it names no scanned language.
    fn scan_file(
        &mut self,
        dir: &Dir,
        name: &OsStr,
        rel: &Path,
        lang: Option<Language>,
    ) -> Result<(), ScanError> {
        let (file, _) = match dir.open_read(name) {
            Ok(f) => f,
            // Listed as a file, opened as something else: the sandbox is
            // gone, so this is a tree that changed under a walk that
            // should not see changes. Report it rather than read it.
            Err(DirError::Planted { found, .. }) => {
                if lang.is_some() {
                    self.report.skip(rel, format!("{found} (not read)"));
                }
                return Ok(());
            }
            Err(e) => return Err(ScanError::Dir(e)),
        };
        let remaining = self.total_cap.saturating_sub(self.report.bytes_read);
        if remaining == 0 {
            self.report.stopped_at_bytes = Some(self.report.bytes_read);
            if lang.is_some() {
                self.report.skip(
                    rel,
                    format!(
                        "not read: the scan reads at most {} bytes in all",
                        self.total_cap
                    ),
                );
            }
            return Ok(());
        }
        let mut bytes = Vec::new();
        let read = |bytes: &mut Vec<u8>, n: u64| -> Result<(), ScanError> {
            (&file)
                .take(n)
                .read_to_end(bytes)
                .map(drop)
                .map_err(|e| tree_err(rel, e))
        };
        let lang = match lang {
            Some(l) => l,
            None => {
                read(&mut bytes, 256.min(remaining))?;
                match Language::from_shebang(&bytes) {
                    Some(l) => l,
                    None => {
                        self.report.bytes_read += bytes.len() as u64;
                        return Ok(());
                    }
                }
            }
        };
        let cap = MAX_FILE_BYTES.min(remaining);
        // One byte past the cap tells a cut file from one that fits.
        let more = (cap + 1).saturating_sub(bytes.len() as u64);
        read(&mut bytes, more)?;
        let cut = bytes.len() as u64 > cap;
        bytes.truncate(cap as usize);
        self.report.bytes_read += bytes.len() as u64;
        if cut {
            if cap < MAX_FILE_BYTES {
                self.report.stopped_at_bytes = Some(self.report.bytes_read);
                self.report.part(
                    rel,
                    format!(
                        "read in part: the scan reads at most {} bytes in all",
                        self.total_cap
                    ),
                );
            } else {
                self.report.part(
                    rel,
                    format!("only the first {MAX_FILE_BYTES} bytes scanned"),
                );
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        self.report.files_scanned += 1;
        for (line, import, banned) in scan_source(lang, &text, self.bans) {
            self.report.violation(Violation {
                file: rel.to_path_buf(),
                line,
                language: lang,
                import,
                banned,
                kind: ViolationKind::Import,
            });
        }
        Ok(())
    }
}

/// The name a module entry imports as: `semver` for `semver.py` or
/// `semver/`, `@s/p` for `node_modules/@s/p`.
fn module_name(rel: &Path, language: Language) -> String {
    let own = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match language {
        Language::JavaScript => {
            let parent = rel
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if parent.starts_with('@') {
                format!("{parent}/{own}")
            } else {
                own
            }
        }
        _ => own.split('.').next().unwrap_or_default().to_owned(),
    }
}

/// A path for a message, cut in the middle when very deep (a 3000-level
/// path would be the whole message), quoted.
fn clip_path(rel: &Path) -> String {
    let comps: Vec<&OsStr> = rel.iter().collect();
    if comps.len() <= 12 {
        return quote_path(rel);
    }
    let head: PathBuf = comps[..8].iter().collect();
    let tail: PathBuf = comps[comps.len() - 2..].iter().collect();
    format!(
        "{}/.../{} ({} levels)",
        quote_path(&head),
        quote_path(&tail),
        comps.len()
    )
}
