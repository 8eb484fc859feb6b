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

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct TrialDir {
    pub root: PathBuf,
}

impl TrialDir {
    /// Creates `root` (which must not exist yet) and its sub-folders.
    pub fn create(root: &Path) -> io::Result<TrialDir> {
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)?;
        }
        fs::DirBuilder::new().mode(0o755).create(root)?;
        let root = fs::canonicalize(root)?;
        let t = TrialDir { root };
        for d in [t.logs_agent(), t.logs_cbrun(), t.verifier(), t.scratch()] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(d)?;
        }
        Ok(t)
    }

    /// A folder for a judge-only run (`cbrun judge --out`): may exist.
    pub fn open_or_create(root: &Path) -> io::Result<TrialDir> {
        fs::create_dir_all(root)?;
        let root = fs::canonicalize(root)?;
        let t = TrialDir { root };
        for d in [t.logs_cbrun(), t.verifier(), t.scratch()] {
            fs::create_dir_all(d)?;
        }
        Ok(t)
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

    /// Removes the scratch folder (judge copies can be large).
    pub fn remove_scratch(&self) {
        let _ = fs::remove_dir_all(self.scratch());
    }
}
