//! The static post-submission import scan: which source files of a
//! submitted workspace import a module the case bans (`import_ban[]` of
//! `source/denylist.json`).
//!
//! - [`scan_workspace()`]: walks a workspace and scans every source file.
//! - [`scan_source()`]: scans one file's text.
//!
//! Each language has a small hand-written lexer (comments and string
//! literals never count, only code: `lex`, `clike`, `pylex`) and a parser
//! that reads the import forms of that language and matches them its own
//! way: `python`, `js` (JavaScript and TypeScript), `go`, `c` (C and C++),
//! `rust`. Every ban entry is tried against every language.
//!
//! The input is untrusted (an agent wrote it), so every nesting, length and
//! count has a bound: no file can overflow the stack, take long, or make
//! the report huge.

mod c;
mod clike;
mod go;
mod js;
mod lex;
mod pylex;
mod python;
mod rust;

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};

/// Files larger than this are skipped (and reported).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Directories never entered: VCS data, dependency trees, caches, build
/// output. They are reported as skipped.
pub const EXCLUDED_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    "target",
    ".mypy_cache",
    ".pytest_cache",
];

/// Violations kept per file (the first by line); a file with more is
/// conclusive already, and the bound keeps a hostile file from flooding
/// the report.
pub const MAX_HITS_PER_FILE: usize = 1000;

/// Violations and skipped entries listed in one report; beyond these, the
/// report only counts them (`violations_omitted`, `skipped_omitted`).
pub const MAX_LISTED: usize = 10_000;

/// `(line, import as written, ban entry)` found in one file.
type Hit = (usize, String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Python,
    JavaScript,
    Go,
    C,
    Rust,
}

impl Language {
    /// The language of a file, by its extension (any case).
    pub fn from_path(path: &Path) -> Option<Language> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "py" | "pyi" | "pyw" => Language::Python,
            "js" | "mjs" | "cjs" | "jsx" | "ts" | "tsx" | "mts" | "cts" => Language::JavaScript,
            "go" => Language::Go,
            "c" | "h" | "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "h++" | "ipp"
            | "tpp" | "inl" | "ino" | "cu" | "cuh" | "m" | "mm" => Language::C,
            "rs" => Language::Rust,
            _ => return None,
        })
    }

    /// The language of an extensionless script, by its `#!` line.
    fn from_shebang(head: &[u8]) -> Option<Language> {
        let line = head.strip_prefix(b"#!")?;
        let line = line.split(|&b| b == b'\n').next().unwrap_or(line);
        let line = String::from_utf8_lossy(line);
        // `/usr/bin/python3`, `/usr/bin/env -S node --flag`: any word's
        // last path component names the interpreter.
        line.split_whitespace().find_map(|word| {
            let prog = word.rsplit('/').next().unwrap_or(word);
            if prog.starts_with("python") {
                Some(Language::Python)
            } else if matches!(prog, "node" | "nodejs" | "deno" | "bun" | "ts-node" | "tsx") {
                Some(Language::JavaScript)
            } else {
                None
            }
        })
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Language::Python => "python",
            Language::JavaScript => "javascript",
            Language::Go => "go",
            Language::C => "c",
            Language::Rust => "rust",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Relative to the workspace.
    #[serde(serialize_with = "lossy_path")]
    pub file: PathBuf,
    /// 1-based.
    pub line: usize,
    pub language: Language,
    /// The imported module, header or path as written.
    pub import: String,
    /// The `import_ban` entry it hit.
    pub banned: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Relative to the workspace.
    #[serde(serialize_with = "lossy_path")]
    pub file: PathBuf,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScanReport {
    pub files_scanned: usize,
    /// Sorted by file, then line; the first [`MAX_LISTED`].
    pub violations: Vec<Violation>,
    /// Sorted by file; the first [`MAX_LISTED`].
    pub skipped: Vec<Skipped>,
    /// Violations found past [`MAX_LISTED`], counted only.
    pub violations_omitted: usize,
    /// Skipped entries past [`MAX_LISTED`], counted only.
    pub skipped_omitted: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("import scan: {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("import scan: {0} is not a directory")]
    NotADirectory(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ScanError + '_ {
    move |source| ScanError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A workspace may hold file names that are not UTF-8; the report must
/// still serialize.
fn lossy_path<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// How many violations [`ScanReport::summary`] names.
const SUMMARY_NAMES: usize = 3;

impl ScanReport {
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// One line: the count and the first few violations as
    /// `file:line import`.
    pub fn summary(&self) -> String {
        let files = plural(self.files_scanned, "file");
        let skipped = match self.skipped.len() + self.skipped_omitted {
            0 => String::new(),
            n => format!(" ({n} skipped)"),
        };
        if self.violations.is_empty() {
            return format!("import scan: no banned imports in {files}{skipped}");
        }
        let named: Vec<String> = self
            .violations
            .iter()
            .take(SUMMARY_NAMES)
            .map(|v| format!("{}:{} {}", v.file.to_string_lossy(), v.line, v.import))
            .collect();
        let total = self.violations.len() + self.violations_omitted;
        let more = match total.saturating_sub(SUMMARY_NAMES) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        format!(
            "import scan: {} in {files}{skipped}: {}{more}",
            plural(total, "banned import"),
            named.join(", ")
        )
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The banned imports in one file's text: `(line, import, banned)`, sorted
/// by line, without duplicates; at most [`MAX_HITS_PER_FILE`].
pub fn scan_source(
    lang: Language,
    text: &str,
    import_ban: &[String],
) -> Vec<(usize, String, String)> {
    if import_ban.iter().all(|b| b.trim().is_empty()) {
        return Vec::new();
    }
    let mut hits = match lang {
        Language::Python => python::scan(text, import_ban),
        Language::JavaScript => js::scan(text, import_ban),
        Language::Go => go::scan(text, import_ban),
        Language::C => c::scan(text, import_ban),
        Language::Rust => rust::scan(text, import_ban),
    };
    for hit in &mut hits {
        hit.1 = lex::clip(std::mem::take(&mut hit.1));
    }
    hits.sort();
    hits.dedup();
    hits.truncate(MAX_HITS_PER_FILE);
    hits
}

/// Scans every source file under `root` for imports of `import_ban`
/// entries. Symbolic links are not followed (they are reported as skipped,
/// as are [`EXCLUDED_DIRS`] and files over [`MAX_FILE_BYTES`]). Files that
/// are not UTF-8 are read lossily. Only `root` itself may be a symlink.
///
/// Fails on an I/O error inside the tree rather than leave a file unread:
/// a file the scan cannot read is not a clean file.
pub fn scan_workspace(root: &Path, import_ban: &[String]) -> Result<ScanReport, ScanError> {
    if !fs::metadata(root).map_err(io_err(root))?.is_dir() {
        return Err(ScanError::NotADirectory(root.to_path_buf()));
    }
    let mut report = ScanReport::default();
    // Depth first, each directory in name order, so files come in path
    // order and the report lists the first entries by path. An explicit
    // stack: no recursion, so no depth limit.
    let mut stack = vec![(PathBuf::new(), sorted_entries(root)?)];
    while let Some((rel_dir, entries)) = stack.last_mut() {
        let Some(entry) = entries.pop() else {
            stack.pop();
            continue;
        };
        let name = entry.file_name();
        let rel = rel_dir.join(&name);
        let path = entry.path();
        // The entry's own type: symlinks are not followed.
        let ft = entry.file_type().map_err(io_err(&path))?;
        if ft.is_symlink() {
            report.skip(&rel, "symbolic link (not followed)".into());
        } else if ft.is_dir() {
            if EXCLUDED_DIRS.iter().any(|d| name == *d) {
                report.skip(&rel, "excluded directory".into());
            } else {
                let sub = sorted_entries(&path)?;
                stack.push((rel, sub));
            }
        } else if let Some(lang) = Language::from_path(&rel) {
            if ft.is_file() {
                scan_file(&path, &rel, Some(lang), import_ban, &mut report)?;
            } else {
                report.skip(&rel, "not a regular file".into());
            }
        } else if ft.is_file() && Path::new(&name).extension().is_none() {
            // Maybe a script with a `#!` line.
            scan_file(&path, &rel, None, import_ban, &mut report)?;
        }
    }
    // Already in order; sorting again costs little and makes it certain.
    report.violations.sort_by(|a, b| {
        (&a.file, a.line, &a.import, &a.banned).cmp(&(&b.file, b.line, &b.import, &b.banned))
    });
    report.skipped.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(report)
}

/// A directory's entries, last name first (they are popped).
fn sorted_entries(dir: &Path) -> Result<Vec<fs::DirEntry>, ScanError> {
    let mut entries = fs::read_dir(dir)
        .and_then(|it| it.collect::<io::Result<Vec<_>>>())
        .map_err(io_err(dir))?;
    entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
    Ok(entries)
}

impl ScanReport {
    fn skip(&mut self, file: &Path, reason: String) {
        if self.skipped.len() < MAX_LISTED {
            self.skipped.push(Skipped {
                file: file.to_path_buf(),
                reason,
            });
        } else {
            self.skipped_omitted += 1;
        }
    }
}

/// Reads and scans one file. `lang` None: sniff a `#!` line, and leave the
/// file alone (uncounted) when it names no scanned language.
fn scan_file(
    path: &Path,
    rel: &Path,
    lang: Option<Language>,
    import_ban: &[String],
    report: &mut ScanReport,
) -> Result<(), ScanError> {
    // O_NOFOLLOW: the entry was a regular file when listed; should it have
    // become a symlink since, fail rather than read through it. O_NONBLOCK:
    // never hang on a FIFO swapped in.
    let mut file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(io_err(path))?;
    let meta = file.metadata().map_err(io_err(path))?;
    if !meta.is_file() {
        if lang.is_some() {
            report.skip(rel, "not a regular file".into());
        }
        return Ok(());
    }
    let mut bytes = Vec::new();
    let lang = match lang {
        Some(l) => l,
        None => {
            (&mut file)
                .take(256)
                .read_to_end(&mut bytes)
                .map_err(io_err(path))?;
            match Language::from_shebang(&bytes) {
                Some(l) => l,
                None => return Ok(()),
            }
        }
    };
    if meta.len() > MAX_FILE_BYTES {
        let reason = format!("larger than {MAX_FILE_BYTES} bytes ({} bytes)", meta.len());
        report.skip(rel, reason);
        return Ok(());
    }
    // Bounded even if the file grows after the size check.
    let limit = MAX_FILE_BYTES + 1 - bytes.len() as u64;
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(io_err(path))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        report.skip(rel, format!("larger than {MAX_FILE_BYTES} bytes"));
        return Ok(());
    }
    let text = String::from_utf8_lossy(&bytes);
    report.files_scanned += 1;
    for (line, import, banned) in scan_source(lang, &text, import_ban) {
        if report.violations.len() >= MAX_LISTED {
            report.violations_omitted += 1;
            continue;
        }
        report.violations.push(Violation {
            file: rel.to_path_buf(),
            line,
            language: lang,
            import,
            banned,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A scratch directory removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("cbrun-scan-{tag}-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
            let p = self.0.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn bans(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn where_(r: &ScanReport) -> Vec<(String, usize, Language, String)> {
        r.violations
            .iter()
            .map(|v| {
                (
                    v.file.to_string_lossy().into_owned(),
                    v.line,
                    v.language,
                    v.import.clone(),
                )
            })
            .collect()
    }

    fn skipped(r: &ScanReport) -> Vec<(String, String)> {
        r.skipped
            .iter()
            .map(|s| (s.file.to_string_lossy().into_owned(), s.reason.clone()))
            .collect()
    }

    #[test]
    fn scans_every_language_and_sorts() {
        let w = Scratch::new("langs");
        w.write("z.py", "import os\nimport semver\n");
        w.write("src/app.ts", "import lp from 'left-pad';\n");
        w.write("a/main.go", "package main\nimport \"os/exec\"\n");
        w.write("a/b.c", "\n\n#include <zlib.h>\n");
        w.write("a/lib.rs", "use semver::Version;\n");
        w.write("README.md", "import semver\n");
        w.write("a/x.PY", "import semver\n");
        let r = scan_workspace(&w.0, &bans(&["semver", "left-pad", "os/exec", "zlib"])).unwrap();
        let s = |x: &str| x.to_string();
        assert_eq!(
            where_(&r),
            [
                (s("a/b.c"), 3, Language::C, s("zlib.h")),
                (s("a/lib.rs"), 1, Language::Rust, s("semver::Version")),
                (s("a/main.go"), 2, Language::Go, s("os/exec")),
                (s("a/x.PY"), 1, Language::Python, s("semver")),
                (s("src/app.ts"), 1, Language::JavaScript, s("left-pad")),
                (s("z.py"), 2, Language::Python, s("semver")),
            ]
        );
        assert_eq!(r.files_scanned, 6);
        assert!(r.skipped.is_empty());
        assert_eq!(r.violations[0].banned, "zlib");
    }

    #[test]
    fn clean_workspace() {
        let w = Scratch::new("clean");
        w.write("pkg/__init__.py", "from . import semver\n# import semver\n");
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        assert!(r.is_clean());
        assert_eq!(r.files_scanned, 1);
        assert_eq!(r.summary(), "import scan: no banned imports in 1 file");
    }

    #[test]
    fn excluded_dirs_are_not_entered() {
        let w = Scratch::new("excluded");
        for d in EXCLUDED_DIRS {
            w.write(&format!("{d}/m.py"), "import semver\n");
        }
        w.write("sub/node_modules/x/index.js", "require('semver')\n");
        w.write("sub/ok.py", "x = 1\n");
        // A file named like an excluded directory is still scanned.
        w.write("venv.py", "import semver\n");
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        assert_eq!(r.files_scanned, 2);
        assert_eq!(where_(&r).len(), 1);
        assert_eq!(r.violations[0].file, Path::new("venv.py"));
        let mut want: Vec<(String, String)> = EXCLUDED_DIRS
            .iter()
            .map(|d| (d.to_string(), "excluded directory".to_string()))
            .collect();
        want.push(("sub/node_modules".into(), "excluded directory".into()));
        want.sort();
        assert_eq!(skipped(&r), want);
    }

    #[test]
    fn symlinks_are_skipped_and_reported() {
        let w = Scratch::new("links");
        let outside = Scratch::new("outside");
        outside.write("evil.py", "import semver\n");
        w.write("real.py", "import semver\n");
        symlink(outside.0.join("evil.py"), w.0.join("link.py")).unwrap();
        symlink(&outside.0, w.0.join("linkdir")).unwrap();
        symlink("nowhere", w.0.join("dangling.py")).unwrap();
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        assert_eq!(r.files_scanned, 1);
        assert_eq!(where_(&r).len(), 1);
        assert_eq!(r.violations[0].file, Path::new("real.py"));
        let reason = "symbolic link (not followed)".to_string();
        assert_eq!(
            skipped(&r),
            [
                ("dangling.py".into(), reason.clone()),
                ("link.py".into(), reason.clone()),
                ("linkdir".into(), reason)
            ]
        );
    }

    #[test]
    fn large_files_are_skipped_with_the_reason() {
        let w = Scratch::new("large");
        let mut big = b"import semver\n".to_vec();
        big.resize(MAX_FILE_BYTES as usize + 1, b'\n');
        w.write("big.py", &big);
        let mut at_limit = b"import semver\n".to_vec();
        at_limit.resize(MAX_FILE_BYTES as usize, b'#');
        w.write("limit.py", &at_limit);
        // Big files in no scanned language are not worth a mention.
        w.write("data.bin", vec![0u8; MAX_FILE_BYTES as usize + 1]);
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        assert_eq!(r.files_scanned, 1);
        assert_eq!(r.violations[0].file, Path::new("limit.py"));
        assert_eq!(
            skipped(&r),
            [(
                "big.py".into(),
                format!("larger than 4194304 bytes ({} bytes)", MAX_FILE_BYTES + 1)
            )]
        );
    }

    #[test]
    fn non_utf8_files_are_read_lossily() {
        let w = Scratch::new("lossy");
        w.write("m.py", b"s = '\xff\xfe'\nimport semver\n");
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        assert_eq!(where_(&r)[0].1, 2);
    }

    #[test]
    fn non_utf8_file_names_serialize() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let w = Scratch::new("names");
        let name = OsStr::from_bytes(b"bad\xff.py");
        fs::write(w.0.join(name), "import semver\n").unwrap();
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["violations"][0]["file"], "bad\u{fffd}.py");
        assert_eq!(json["violations"][0]["language"], "python");
    }

    #[test]
    fn shebang_scripts_without_extension() {
        let w = Scratch::new("shebang");
        w.write("bin/tool", "#!/usr/bin/env python3\nimport semver\n");
        w.write(
            "bin/run",
            "#!/usr/bin/env -S node --no-warnings\nrequire('semver')\n",
        );
        w.write("bin/sh", "#!/bin/sh\nimport semver\n");
        w.write("Makefile", "import semver\n");
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        let s = |x: &str| x.to_string();
        assert_eq!(
            where_(&r),
            [
                (s("bin/run"), 2, Language::JavaScript, s("semver")),
                (s("bin/tool"), 2, Language::Python, s("semver")),
            ]
        );
        assert_eq!(r.files_scanned, 2);
    }

    #[test]
    fn fifo_with_source_extension_is_skipped() {
        let w = Scratch::new("fifo");
        let p = w.0.join("pipe.py");
        let c = std::ffi::CString::new(p.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        assert_eq!(
            skipped(&r),
            [("pipe.py".into(), "not a regular file".into())]
        );
        assert_eq!(r.files_scanned, 0);
    }

    #[test]
    fn missing_or_file_root_is_an_error() {
        let w = Scratch::new("root");
        let err = scan_workspace(&w.0.join("nope"), &bans(&["x"])).unwrap_err();
        assert!(matches!(err, ScanError::Io { .. }));
        assert!(err.to_string().contains("nope"));
        w.write("f.py", "");
        let err = scan_workspace(&w.0.join("f.py"), &bans(&["x"])).unwrap_err();
        assert!(matches!(err, ScanError::NotADirectory(_)));
    }

    #[test]
    fn unreadable_file_is_an_error_not_a_pass() {
        use std::os::unix::fs::PermissionsExt;
        let w = Scratch::new("unreadable");
        w.write("secret.py", "import semver\n");
        let p = w.0.join("secret.py");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o000)).unwrap();
        // Root reads it anyway; anyone else must get an error.
        let res = scan_workspace(&w.0, &bans(&["semver"]));
        if nix_is_root() {
            assert_eq!(res.unwrap().violations.len(), 1);
        } else {
            assert!(matches!(res, Err(ScanError::Io { .. })));
        }
    }

    fn nix_is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn summary_names_the_first_violations() {
        let v = |file: &str, line, import: &str| Violation {
            file: file.into(),
            line,
            language: Language::Python,
            import: import.into(),
            banned: "semver".into(),
        };
        let mut r = ScanReport {
            files_scanned: 10,
            violations: vec![v("a.py", 1, "semver"), v("b.py", 7, "semver.x")],
            skipped: vec![Skipped {
                file: ".git".into(),
                reason: "excluded directory".into(),
            }],
            ..Default::default()
        };
        assert_eq!(
            r.summary(),
            "import scan: 2 banned imports in 10 files (1 skipped): a.py:1 semver, b.py:7 semver.x"
        );
        r.violations.push(v("c.py", 2, "semver"));
        r.violations.push(v("d.py", 3, "semver"));
        r.violations.push(v("e.py", 4, "semver"));
        assert_eq!(
            r.summary(),
            "import scan: 5 banned imports in 10 files (1 skipped): a.py:1 semver, b.py:7 semver.x, c.py:2 semver and 2 more"
        );
        // Counted-only entries count too.
        r.violations_omitted = 10;
        r.skipped_omitted = 2;
        assert!(r
            .summary()
            .starts_with("import scan: 15 banned imports in 10 files (3 skipped): a.py:1"));
        assert!(r.summary().ends_with("c.py:2 semver and 12 more"));
    }

    #[test]
    fn hits_per_file_are_bounded() {
        let src = "import semver\n".repeat(MAX_HITS_PER_FILE + 5);
        let hits = scan_source(Language::Python, &src, &bans(&["semver"]));
        assert_eq!(hits.len(), MAX_HITS_PER_FILE);
        assert_eq!(hits[0].0, 1);
        assert_eq!(hits[MAX_HITS_PER_FILE - 1].0, MAX_HITS_PER_FILE);
    }

    #[test]
    fn report_lists_the_first_entries_by_path_and_counts_the_rest() {
        let w = Scratch::new("many");
        // 11 files of 1000 hits: the last 1000 are counted, not listed.
        let src = "import semver\n".repeat(MAX_HITS_PER_FILE);
        for i in 0..11 {
            w.write(&format!("d{}/m{i:02}.py", i % 3), &src);
        }
        let r = scan_workspace(&w.0, &bans(&["semver"])).unwrap();
        assert_eq!(r.violations.len(), MAX_LISTED);
        assert_eq!(r.violations_omitted, 1000);
        // The omitted ones are the last by path: d2/m08.py.
        let last = r.violations.last().unwrap();
        assert_eq!(last.file, Path::new("d2/m05.py"));
        assert_eq!(last.line, MAX_HITS_PER_FILE);
        assert!(!r
            .violations
            .iter()
            .any(|v| v.file == Path::new("d2/m08.py")));
    }

    #[test]
    fn scan_source_sorts_and_dedups() {
        let src = "import semver\nimport semver, semver\nimport os\n";
        assert_eq!(
            scan_source(Language::Python, src, &bans(&["semver"])),
            [
                (1, "semver".to_string(), "semver".to_string()),
                (2, "semver".to_string(), "semver".to_string())
            ]
        );
        assert!(scan_source(Language::Python, src, &[]).is_empty());
    }

    #[test]
    fn languages_by_extension() {
        let l = |p: &str| Language::from_path(Path::new(p));
        assert_eq!(l("a.pyi"), Some(Language::Python));
        assert_eq!(l("a.d.ts"), Some(Language::JavaScript));
        assert_eq!(l("a.cts"), Some(Language::JavaScript));
        assert_eq!(l("a.hxx"), Some(Language::C));
        assert_eq!(l("a.ino"), Some(Language::C));
        assert_eq!(l("a.rs"), Some(Language::Rust));
        assert_eq!(l("a.md"), None);
        assert_eq!(l("py"), None);
        assert_eq!(
            serde_json::to_value(Language::JavaScript).unwrap(),
            "javascript"
        );
    }
}
