//! The run folder:
//!
//! ```text
//! DIR/plan.toml                              the resolved plan, written first
//! DIR/trials/<case>/<config>/<repeat>/       an ordinary trial folder (the latest attempt)
//! DIR/trials/<case>/<config>/<repeat>.attempt<K>/   earlier attempts, kept
//! DIR/trials/<case>/<config>/<repeat>.claim  while a worker owns the trial
//! DIR/trials/<case>/<config>/<repeat>.status the running trial's phase
//! DIR/results.jsonl                          one line per finished attempt, appended
//! DIR/summary.json                           rewritten atomically after every trial
//! DIR/logs/task-<N>.log                      a local worker's own output
//! ```
//!
//! Everything here is written by cbrun: no sandbox sees the run folder
//! (`cbrun run` refuses one under the host folders a sandbox shows), only
//! the `workspace/`, `home/` and `logs/agent/` of each trial. Files are
//! reached through the folder's descriptor.

use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::sys::dir::Dir;

use super::plan::{PlanError, ResolvedPlan, Task, PLAN_FILE};

pub const RESULTS: &str = "results.jsonl";
pub const SUMMARY: &str = "summary.json";
pub const TRIALS: &str = "trials";
pub const LOGS: &str = "logs";

pub struct RunFolder {
    /// Canonical.
    pub root: PathBuf,
    dir: Dir,
}

impl RunFolder {
    /// Opens `root`, creating it (and its parents) when missing.
    pub fn create(root: &Path) -> io::Result<RunFolder> {
        std::fs::create_dir_all(root)?;
        RunFolder::open(root)
    }

    /// Opens an existing run folder.
    pub fn open(root: &Path) -> io::Result<RunFolder> {
        let root = std::fs::canonicalize(root)?;
        let dir = Dir::open(&root).map_err(io::Error::other)?;
        Ok(RunFolder { root, dir })
    }

    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Whether the folder has no entries.
    pub fn is_empty(&self) -> io::Result<bool> {
        crate::fsutil::dir_is_empty(&self.root)
    }

    /// `plan.toml`, when the folder has one.
    pub fn read_plan(&self) -> Result<Option<ResolvedPlan>, PlanError> {
        let shown = self.root.join(PLAN_FILE).display().to_string();
        match self.dir.entry(PLAN_FILE) {
            Ok(None) => return Ok(None),
            Ok(Some(_)) => {}
            Err(e) => return Err(PlanError(e.to_string())),
        }
        let text = self
            .dir
            .read_capped(PLAN_FILE, 64 << 20)
            .map_err(|e| PlanError(e.to_string()))?;
        if text.truncated() {
            return Err(PlanError(format!("{shown}: larger than 64 MiB")));
        }
        ResolvedPlan::from_toml(&text.text_lossy(), &shown).map(Some)
    }

    /// Writes `plan.toml` (atomically: a folder has the whole plan or none).
    pub fn write_plan(&self, plan: &ResolvedPlan) -> Result<(), PlanError> {
        let text = plan.to_toml()?;
        self.dir
            .write_replace(PLAN_FILE, text.as_bytes(), 0o644)
            .map_err(|e| PlanError(e.to_string()))
    }

    /// `trials/<case>/<config>`, relative to the folder.
    pub fn config_rel(task: &Task) -> String {
        format!("{TRIALS}/{}/{}", task.case_id, task.config_name)
    }

    /// `trials/<case>/<config>/<repeat>`, relative to the folder.
    pub fn trial_rel(task: &Task) -> String {
        format!("{}/{}", Self::config_rel(task), task.repeat)
    }

    /// The trial folder's path.
    pub fn trial_path(&self, task: &Task) -> PathBuf {
        self.root.join(Self::trial_rel(task))
    }

    /// `trials/<case>/<config>/`, made when missing.
    pub fn config_dir(&self, task: &Task) -> io::Result<Dir> {
        let mut d = self
            .dir
            .ensure_dir(TRIALS, 0o755)
            .map_err(io::Error::other)?;
        for part in [task.case_id.as_str(), task.config_name.as_str()] {
            d = d.ensure_dir(part, 0o755).map_err(io::Error::other)?;
        }
        Ok(d)
    }

    /// `trials/<case>/<config>/`, when it exists.
    pub fn existing_config_dir(&self, task: &Task) -> Option<Dir> {
        self.dir.open_dir(Self::config_rel(task)).ok()
    }

    /// `logs/task-<N>.log`, opened for appending.
    pub fn task_log(&self, n: usize) -> io::Result<std::fs::File> {
        let logs = self.dir.ensure_dir(LOGS, 0o755).map_err(io::Error::other)?;
        logs.open_append(format!("task-{n}.log"), 0o644)
            .map_err(io::Error::other)
    }

    /// Appends one line to `results.jsonl`, in one write. A line cut short
    /// by a killed writer is ended first, so that it spoils only itself.
    pub fn append_result(&self, line: &serde_json::Value) -> io::Result<()> {
        let mut bytes = Vec::new();
        if let Ok((f, st)) = self.dir.open_read(RESULTS) {
            let size = st.st_size.max(0) as u64;
            let mut last = [0u8; 1];
            if size > 0 && f.read_at(&mut last, size - 1)? == 1 && last[0] != b'\n' {
                bytes.push(b'\n');
            }
        }
        serde_json::to_writer(&mut bytes, line).map_err(io::Error::other)?;
        bytes.push(b'\n');
        let mut f = self
            .dir
            .open_append(RESULTS, 0o644)
            .map_err(io::Error::other)?;
        // The records are what counts; this is their log (no fsync).
        f.write_all(&bytes)
    }

    /// The lines of `results.jsonl` that parse (a torn last line does not).
    pub fn results(&self) -> Vec<serde_json::Value> {
        let Ok(c) = self.dir.read_capped(RESULTS, 1 << 30) else {
            return Vec::new();
        };
        c.text_lossy()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_line_spoils_only_itself() {
        let d = std::env::temp_dir().join(format!("cbrun-folder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let f = RunFolder::create(&d).unwrap();
        f.append_result(&serde_json::json!({"n": 1})).unwrap();
        // A writer killed mid-line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(d.join(RESULTS))
            .unwrap()
            .write_all(b"{\"n\": 2, \"rec")
            .unwrap();
        f.append_result(&serde_json::json!({"n": 3})).unwrap();
        let got: Vec<i64> = f
            .results()
            .iter()
            .map(|v| v["n"].as_i64().unwrap())
            .collect();
        assert_eq!(got, [1, 3]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
