//! The static post-submission import scan: which files of a submitted
//! workspace import a module the case bans (`import_ban[]` of
//! `source/denylist.json`), and which *are* one.
//!
//! - [`scan_dir()`] / [`scan_workspace()`]: walks a workspace and scans
//!   every source file (`walk`).
//! - [`scan_source()`]: scans one file's text.
//!
//! Each language has a small hand-written lexer (comments and string
//! literals never count, only code: `lex`, `clike`, `pylex`) and a parser
//! that reads the import forms of that language and matches them its own
//! way: `python`, `js` (JavaScript and TypeScript), `go`, `c` (C and C++),
//! `rust`. Every ban entry is tried against every language.
//!
//! **Everything under `/app` is the agent's code**, wherever it sits: no
//! directory is skipped, `.venv`, `site-packages`, `node_modules`,
//! `vendor`, `.git` and build output included. Two kinds of violation:
//!
//! - an *import*: an import statement (or literal dynamic import) of a
//!   banned module in any source file anywhere in the tree;
//! - a *module*: a file or directory *named* like a banned top-level
//!   module where the language's resolver would find it under that name
//!   (`modname`). For Python that is a directory Python can put on
//!   `sys.path`: the workspace root, `src/`, every `site-packages` and
//!   `dist-packages`, and every directory without an `__init__.py` (a
//!   regular package's members are importable only under the package's
//!   name, so `pip/_vendor/packaging` is `pip._vendor.packaging` and not a
//!   hit, while setuptools' `_vendor/` without `__init__.py`, which
//!   setuptools does put on `sys.path`, is). There `semver.py`, `semver.pyc`,
//!   `semver.cpython-311-x86_64-linux-gnu.so`, a `semver/` directory holding
//!   an `__init__.py` or any Python file, and a symlink named `semver` or
//!   `semver.py` are modules named `semver`. Only ban entries that are plain
//!   identifiers (`-` read as `_`) are matched this way; a dotted entry such
//!   as `a.b` is matched by imports only. For JavaScript, a
//!   `node_modules/<entry>` (or `node_modules/@scope/<name>`) entry of any
//!   kind is the installed package (and `node_modules` is not taken for a
//!   Python path). Go's `vendor/` and Rust's vendored
//!   crates are matched by their imports only (a vendored copy nothing
//!   imports is inert there).
//!
//! The false positives this accepts: a dependency in `.venv` that imports
//! a banned module (even optionally) makes a hit, because the import is in
//! the workspace and would run in the judge; the agent gets its one fix
//! attempt with the file named.
//!
//! The walk holds one directory descriptor per level and opens every entry
//! relative to its parent with `O_NOFOLLOW` (files also `O_NONBLOCK`, and
//! only regular files are read): a link swapped in is never followed, a
//! FIFO never waited on. The input is untrusted, so every nesting, length
//! and count has a bound: deeper than [`MAX_DEPTH`] levels or more than
//! [`MAX_ENTRIES`] entries is refused as the agent's doing; a file is read
//! up to [`MAX_FILE_BYTES`] and the whole scan up to [`MAX_TOTAL_BYTES`],
//! with every cut noted in the report (`partial`, `stopped_at_bytes`); no
//! file can overflow the stack, take long, or make the report huge.

mod c;
mod clike;
mod go;
mod js;
mod lex;
mod modname;
mod pylex;
mod python;
mod rust;
mod walk;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};

use crate::fsutil::{quote_path, quote_text};
use crate::sys::dir::{blame_for, Blame, Dir, DirError};

/// Bytes of one file that are read and scanned; the rest of a longer file
/// is not (and the report says so).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Bytes read over the whole scan: the judge's default copy cap, so a
/// workspace the judge would accept is scanned whole. Files past it are
/// listed as not scanned.
pub const MAX_TOTAL_BYTES: u64 = 2 << 30;

/// Directory levels below the root the walk enters (one descriptor each);
/// deeper is refused as the agent's doing.
pub const MAX_DEPTH: usize = 256;

/// Entries of any kind the walk looks at; more is refused.
pub const MAX_ENTRIES: u64 = 1_000_000;

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

/// What made a violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// An import statement of a banned module, at `line`.
    Import,
    /// A file or directory named like a banned module where it would be
    /// imported under that name (`line` is 0).
    Module,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Relative to the workspace.
    #[serde(serialize_with = "lossy_path")]
    pub file: PathBuf,
    /// 1-based; 0 for a module.
    pub line: usize,
    pub language: Language,
    /// The imported module, header or path as written (or the module's
    /// name, for a module).
    pub import: String,
    /// The `import_ban` entry it hit.
    pub banned: String,
    pub kind: ViolationKind,
}

impl Violation {
    /// `file:line import`, or `path (module name)`; names quoted, one line.
    pub fn describe(&self) -> String {
        match self.kind {
            ViolationKind::Import => format!(
                "{}:{} {}",
                quote_path(&self.file),
                self.line,
                quote_text(&self.import)
            ),
            ViolationKind::Module => format!(
                "{} (a module named {})",
                quote_path(&self.file),
                quote_text(&self.import)
            ),
        }
    }
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
    /// Entries not scanned (links, special files, files past the total
    /// cap), sorted by file; the first [`MAX_LISTED`].
    pub skipped: Vec<Skipped>,
    /// Files scanned only in part (their first [`MAX_FILE_BYTES`]).
    pub partial: Vec<Skipped>,
    /// Bytes read from files.
    pub bytes_read: u64,
    /// Set when [`MAX_TOTAL_BYTES`] was reached: later files were not read.
    pub stopped_at_bytes: Option<u64>,
    /// Violations found past [`MAX_LISTED`], counted only.
    pub violations_omitted: usize,
    /// Skipped (or partial) entries past [`MAX_LISTED`], counted only.
    pub skipped_omitted: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("import scan: {path}: {err}")]
    Io {
        path: String,
        err: io::Error,
        blame: Blame,
    },
    #[error("import scan: {0}")]
    Dir(DirError),
    #[error("import scan: {0} is not a directory")]
    NotADirectory(String),
    #[error("import scan: the workspace is nested more than {limit} levels deep (at {path}); the scan does not go deeper")]
    TooDeep { limit: usize, path: String },
    #[error("import scan: the workspace holds more than {limit} entries (limit passed at {path})")]
    TooManyEntries { limit: u64, path: String },
}

impl ScanError {
    /// Whose doing the failure is: a tree too deep or too big, an entry
    /// the scan may not read, a type swapped in are the agent's; failing
    /// to open the workspace itself, or the host failing, are not.
    pub fn blame(&self) -> Blame {
        match self {
            ScanError::Io { blame, .. } => *blame,
            ScanError::Dir(e) => e.blame(),
            ScanError::NotADirectory(_) => Blame::Host,
            ScanError::TooDeep { .. } | ScanError::TooManyEntries { .. } => Blame::Agent,
        }
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
    /// `file:line import` (names quoted: no newline, control character or
    /// backtick of a file name reaches it), and what the scan left out.
    pub fn summary(&self) -> String {
        let files = plural(self.files_scanned, "file");
        let mut notes = Vec::new();
        match self.skipped.len() + self.skipped_omitted {
            0 => {}
            n => notes.push(format!("{n} skipped")),
        }
        if !self.partial.is_empty() {
            notes.push(format!(
                "{} scanned only in their first {MAX_FILE_BYTES} bytes",
                plural(self.partial.len(), "file")
            ));
        }
        if let Some(b) = self.stopped_at_bytes {
            notes.push(format!("reading stopped after {b} bytes"));
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        if self.violations.is_empty() {
            return format!("import scan: no banned imports in {files}{notes}");
        }
        let named: Vec<String> = self
            .violations
            .iter()
            .take(SUMMARY_NAMES)
            .map(Violation::describe)
            .collect();
        let total = self.violations.len() + self.violations_omitted;
        let more = match total.saturating_sub(SUMMARY_NAMES) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        format!(
            "import scan: {} in {files}{notes}: {}{more}",
            plural(total, "banned import"),
            named.join(", ")
        )
    }

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

    fn part(&mut self, file: &Path, reason: String) {
        if self.partial.len() < MAX_LISTED {
            self.partial.push(Skipped {
                file: file.to_path_buf(),
                reason,
            });
        } else {
            self.skipped_omitted += 1;
        }
    }

    fn violation(&mut self, v: Violation) {
        if self.violations.len() >= MAX_LISTED {
            self.violations_omitted += 1;
        } else {
            self.violations.push(v);
        }
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

/// Scans every file under `root` (a path the caller chose; its last
/// component must not be a symlink). See [`scan_dir`].
pub fn scan_workspace(root: &Path, import_ban: &[String]) -> Result<ScanReport, ScanError> {
    let dir = Dir::open(root).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTDIR | libc::ELOOP) => ScanError::NotADirectory(quote_path(root)),
        _ => ScanError::Dir(e),
    })?;
    scan_dir(&dir.sandbox_writable(), import_ban)
}

/// Scans every file below the directory `root` for imports of
/// `import_ban` entries, and every entry for a module named like one (see
/// the module docs). Symbolic links are not followed (they are reported as
/// skipped, unless named like a banned module). Files that are not UTF-8
/// are read lossily.
///
/// Fails on an error inside the tree rather than leave a file unread: a
/// file the scan cannot read is not a clean file. [`ScanError::blame`]
/// says whose doing the failure is.
pub fn scan_dir(root: &Dir, import_ban: &[String]) -> Result<ScanReport, ScanError> {
    scan_dir_capped(root, import_ban, MAX_TOTAL_BYTES)
}

/// [`scan_dir`] reading at most `total_cap` bytes.
fn scan_dir_capped(
    root: &Dir,
    import_ban: &[String],
    total_cap: u64,
) -> Result<ScanReport, ScanError> {
    let mut report = walk::walk(root, import_ban, total_cap)?;
    // Already in order; sorting again costs little and makes it certain.
    report.violations.sort_by(|a, b| {
        (&a.file, a.line, &a.import, &a.banned).cmp(&(&b.file, b.line, &b.import, &b.banned))
    });
    report.skipped.sort_by(|a, b| a.file.cmp(&b.file));
    report.partial.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(report)
}

/// An error inside the tree at `rel`.
fn tree_err(rel: &Path, err: io::Error) -> ScanError {
    ScanError::Io {
        path: quote_path(rel),
        blame: blame_for(true, &err),
        err,
    }
}

#[cfg(test)]
mod tests;
