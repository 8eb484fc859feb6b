//! Where a trial's files live. One folder per trial; every path the record
//! points to is inside it.
//!
//! ```text
//! <trial>/trial.json            the record (written first as "interrupted")
//! <trial>/workspace/            the agent's /app, kept as the snapshot
//! <trial>/home/                 the agent's home
//! <trial>/logs/agent/           the agent's /logs/agent (submit marker, its logs)
//! <trial>/logs/cbrun/           what cbrun saw: outputs, outcomes, network log, scan
//! <trial>/logs/verifier/        reward.txt reward.json final_report.json final_tests.log
//! <trial>/.scratch/             judge copy and generated scripts; removed at the end
//! ```
//!
//! `workspace/`, `home/` and `logs/agent/` are bound read-write into the
//! solve sandbox, and `.scratch/judge-*/` into the judge: anything in them
//! may be a planted symlink, FIFO, directory or hard link. cbrun reaches
//! them only through [`Dir`]s opened from the trial root's descriptor
//! (marked sandbox-writable, so failures the agent caused are blamed on
//! it). `trial.json`, `logs/cbrun/` and `logs/verifier/` are written by
//! cbrun alone (the sandboxes' output files there are opened by cbrun and
//! handed over as descriptors; no sandbox sees the folders).

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::sys::dir::{Dir, DirError};

#[derive(Debug)]
pub struct TrialDir {
    pub root: PathBuf,
    /// The trial root, opened once; everything below goes through it.
    dir: Dir,
}

/// Folders cbrun makes in every trial folder.
const MADE: &[&str] = &[
    "logs",
    "logs/agent",
    "logs/cbrun",
    "logs/verifier",
    ".scratch",
];

impl TrialDir {
    /// Creates `root` (which must not exist yet) and its sub-folders.
    pub fn create(root: &Path) -> io::Result<TrialDir> {
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)?;
        }
        fs::DirBuilder::new().mode(0o755).create(root)?;
        let root = fs::canonicalize(root)?;
        let dir = Dir::open(&root).map_err(io::Error::other)?;
        for d in MADE {
            dir.create_dir(d, 0o755).map_err(io::Error::other)?;
        }
        Ok(TrialDir { root, dir })
    }

    /// A folder for a judge-only run (`cbrun judge --out`): may exist.
    pub fn open_or_create(root: &Path) -> io::Result<TrialDir> {
        fs::create_dir_all(root)?;
        let root = fs::canonicalize(root)?;
        let dir = Dir::open(&root).map_err(io::Error::other)?;
        for d in ["logs", "logs/cbrun", "logs/verifier", ".scratch"] {
            dir.ensure_dir(d, 0o755).map_err(io::Error::other)?;
        }
        Ok(TrialDir { root, dir })
    }

    pub fn record(&self) -> PathBuf {
        self.root.join("trial.json")
    }
    pub fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }
    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }
    pub fn logs_agent(&self) -> PathBuf {
        self.root.join("logs/agent")
    }
    pub fn submit_marker(&self) -> PathBuf {
        self.logs_agent().join("submit")
    }
    pub fn logs_cbrun(&self) -> PathBuf {
        self.root.join("logs/cbrun")
    }
    pub fn verifier(&self) -> PathBuf {
        self.root.join("logs/verifier")
    }
    pub fn scratch(&self) -> PathBuf {
        self.root.join(".scratch")
    }
    pub fn network_log(&self) -> PathBuf {
        self.logs_cbrun().join("network.jsonl")
    }

    /// The trial root's descriptor.
    pub fn root_dir(&self) -> &Dir {
        &self.dir
    }

    /// `logs/agent/`, which the agent writes.
    pub fn agent_dir(&self) -> Result<Dir, DirError> {
        self.sandbox_dir("logs/agent")
    }

    /// `workspace/`, the agent's `/app`.
    pub fn workspace_dir(&self) -> Result<Dir, DirError> {
        self.sandbox_dir("workspace")
    }

    /// A folder bound into a sandbox. The sandbox cannot replace it (it is
    /// a mount point there) but can change its mode, so failing to open it
    /// may be its doing.
    fn sandbox_dir(&self, rel: &str) -> Result<Dir, DirError> {
        match self.dir.open_dir(rel) {
            Ok(d) => Ok(d.sandbox_writable()),
            Err(DirError::Io { op, path, err, .. }) => Err(DirError::Io {
                op,
                path,
                blame: crate::sys::dir::blame_for(true, &err),
                err,
            }),
            Err(e) => Err(e),
        }
    }

    /// `logs/cbrun/`: cbrun's own.
    pub fn cbrun_dir(&self) -> Result<Dir, DirError> {
        self.dir.open_dir("logs/cbrun")
    }

    /// `logs/verifier/`: cbrun's own.
    pub fn verifier_dir(&self) -> Result<Dir, DirError> {
        self.dir.open_dir("logs/verifier")
    }

    /// `.scratch/`: cbrun's; what it makes inside for a sandbox to write
    /// is opened as sandbox-writable by whoever makes it.
    pub fn scratch_dir(&self) -> Result<Dir, DirError> {
        self.dir.open_dir(".scratch")
    }

    /// Replaces `rel` (relative to the trial root) atomically.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), DirError> {
        self.dir.write_replace(rel, bytes, 0o644)
    }

    /// [`TrialDir::write`] of pretty JSON.
    pub fn write_json<T: serde::Serialize + ?Sized>(&self, rel: &str, value: &T) -> io::Result<()> {
        let bytes = crate::fsutil::json_bytes(value)?;
        self.write(rel, &bytes).map_err(io::Error::other)
    }

    /// Whether `rel` exists (the entry itself; links are not followed).
    pub fn has(&self, rel: &str) -> bool {
        matches!(self.dir.entry(rel), Ok(Some(_)))
    }

    /// Removes the scratch folder (judge copies can be large, and deep).
    pub fn remove_scratch(&self) {
        let _ = self.dir.remove(".scratch");
    }

    /// Removes `.scratch/<name>` whatever a sandbox left in it (links are
    /// removed, not followed; any depth).
    pub fn remove_scratch_entry(&self, name: &str) {
        if let Ok(s) = self.scratch_dir() {
            let _ = s.remove(name);
        }
    }
}

/// Bytes of a sandbox-written log that are read, from its start and from
/// its end (its middle is left out, with a line saying so).
pub const LOG_HEAD: u64 = 32 << 20;
pub const LOG_TAIL: u64 = 32 << 20;

/// A log a sandbox wrote (through the descriptor cbrun gave it) as text:
/// its first [`LOG_HEAD`] and last [`LOG_TAIL`] bytes, never more, so a
/// log truncated to a sparse terabyte costs what its ends cost. Empty when
/// it cannot be read. The flag says its middle was left out.
pub fn read_sandbox_log(dir: &TrialDir, rel: &str) -> (String, bool) {
    dir.root_dir()
        .read_head_tail(rel, LOG_HEAD, LOG_TAIL)
        .map(|c| (c.text_lossy(), c.truncated()))
        .unwrap_or_default()
}

/// Bytes of one JUnit XML file that are read; a longer one is not parsed.
pub const MAX_XML: u64 = 64 << 20;
/// XML files read from one folder.
pub const MAX_XML_FILES: usize = 64;

/// The text of the `*.xml` regular files in `dir` (a folder a sandbox
/// wrote), by name: links, FIFOs and directories are left alone, files over
/// [`MAX_XML`] too.
pub fn sandbox_xml_files(dir: &Path) -> Vec<String> {
    let Ok(d) = Dir::open(dir).map(Dir::sandbox_writable) else {
        return Vec::new();
    };
    let Ok((mut names, _)) = d.names(100_000) else {
        return Vec::new();
    };
    names.sort();
    names
        .into_iter()
        .filter(|n| n.to_bytes().ends_with(b".xml"))
        .take(MAX_XML_FILES)
        .filter_map(|n| {
            let name = std::ffi::OsStr::from_bytes(n.to_bytes());
            let c = d.read_capped(name, MAX_XML).ok()?;
            (!c.truncated()).then(|| c.text_lossy())
        })
        .collect()
}
