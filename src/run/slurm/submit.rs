//! Submission: `slurm/options.toml` (how the run is submitted),
//! `slurm/tasks.json` (the array's indices and their trials, written
//! before `sbatch` runs), `slurm/array.sbatch` (the batch script),
//! `slurm/logs/` (the tasks' output), then `sbatch --parsable` with a
//! clean environment, and `slurm/job.json` with the job id it printed
//! (each submission is also a line of `slurm/jobs.jsonl`).
//!
//! The environment `sbatch` gets (and, through its default
//! `--export=ALL`, the job) is `PATH`, `SLURM_CONF` and `CBRUN_HOME` when
//! set, and the variables the plan's agent specs and configurations
//! (`env_pass`) pass through (their API keys): not the caller's `HOME`,
//! `XDG_*` or `CBRUN_STATE_DIR`, which would put node state on the
//! submitter's (shared) folders.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::agent::builtin::AgentRef;
use crate::sys::dir::Dir;
use crate::trial::clock;

use super::super::folder::RunFolder;
use super::super::plan::ResolvedPlan;
use super::options::SlurmOptions;
use super::resources::{self, TaskResources};
use super::script::{self, ScriptInput};
use super::SLURM_DIR;

pub const OPTIONS_FILE: &str = "options.toml";
pub const TASKS_FILE: &str = "tasks.json";
pub const SCRIPT_FILE: &str = "array.sbatch";
pub const JOB_FILE: &str = "job.json";
pub const JOBS_LOG: &str = "jobs.jsonl";

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The run, its options or the folder's path cannot be submitted.
    #[error("{0}")]
    Usage(String),
    /// Writing the folder, or sbatch, failed.
    #[error("{0}")]
    Failed(String),
}

/// One array task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayTask {
    pub index: usize,
    pub trial: String,
}

/// `slurm/tasks.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TasksFile {
    pub run_id: String,
    pub array: String,
    pub tasks: Vec<ArrayTask>,
    pub written_at: String,
}

/// `slurm/job.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobFile {
    pub job_id: String,
    pub array: String,
    pub tasks: usize,
    pub submitted_at: String,
}

/// A written, not yet submitted, array.
#[derive(Debug)]
pub struct Prepared {
    pub script: PathBuf,
    pub array: String,
    pub tasks: usize,
    pub resources: TaskResources,
}

fn slurm_dir(folder: &RunFolder) -> Result<Dir, SubmitError> {
    let d = folder
        .dir()
        .ensure_dir(SLURM_DIR, 0o755)
        .map_err(|e| SubmitError::Failed(format!("{}/{SLURM_DIR}: {e}", folder.root.display())))?;
    d.ensure_dir("logs", 0o755).map_err(|e| {
        SubmitError::Failed(format!("{}/{SLURM_DIR}/logs: {e}", folder.root.display()))
    })?;
    Ok(d)
}

fn write(
    d: &Dir,
    folder: &RunFolder,
    name: &str,
    bytes: &[u8],
    mode: u32,
) -> Result<(), SubmitError> {
    d.write_replace(name, bytes, mode).map_err(|e| {
        SubmitError::Failed(format!("{}/{SLURM_DIR}/{name}: {e}", folder.root.display()))
    })
}

/// The options of the folder's earlier submission, when there was one.
pub fn stored_options(folder: &RunFolder) -> Result<Option<SlurmOptions>, SubmitError> {
    let rel = format!("{SLURM_DIR}/{OPTIONS_FILE}");
    match folder.dir().entry(&rel) {
        Ok(Some(_)) => {}
        _ => return Ok(None),
    }
    let shown = folder.root.join(&rel).display().to_string();
    let c = folder
        .dir()
        .read_capped(&rel, 1 << 20)
        .map_err(|e| SubmitError::Usage(format!("{shown}: {e}")))?;
    toml::from_str(&c.text_lossy())
        .map(Some)
        .map_err(|e| SubmitError::Usage(format!("{shown}: {}", e.message().trim())))
}

/// The job of the folder's latest submission.
pub fn read_job(folder: &RunFolder) -> Option<JobFile> {
    let c = folder
        .dir()
        .read_capped(format!("{SLURM_DIR}/{JOB_FILE}"), 1 << 20)
        .ok()?;
    serde_json::from_slice(&c.bytes).ok()
}

/// Writes the options, the task list and the batch script for the trials
/// `tasks` of `plan`.
pub fn prepare(
    folder: &RunFolder,
    plan: &ResolvedPlan,
    tasks: &[usize],
    options: &SlurmOptions,
    cbrun: &str,
    retry_infra: u32,
) -> Result<Prepared, SubmitError> {
    options
        .check()
        .map_err(|e| SubmitError::Usage(e.to_string()))?;
    let shown = folder.root.display().to_string();
    // `#SBATCH` lines are split at blanks and quotes by sbatch itself.
    if shown.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '%' || c == '\\')
    {
        return Err(SubmitError::Usage(format!(
            "{shown}: a run folder for --backend slurm needs a path without blanks, quotes, % or \\"
        )));
    }
    if cbrun.contains(['\n', '\r', '\0']) || !cbrun.starts_with('/') {
        return Err(SubmitError::Usage(format!(
            "slurm.cbrun: {cbrun:?}: must be an absolute path"
        )));
    }
    if tasks.is_empty() {
        return Err(SubmitError::Usage(format!(
            "{shown}: nothing to submit: every trial's outcome stands"
        )));
    }
    let margin = options
        .time_margin_minutes
        .unwrap_or(resources::DEFAULT_TIME_MARGIN_MIN);
    let res = resources::for_tasks(plan, tasks, margin).map_err(|e| SubmitError::Usage(e.0))?;
    let array = script::array_spec(tasks, options.parallel);
    let d = slurm_dir(folder)?;
    let opts_text = toml::to_string(options).map_err(|e| SubmitError::Failed(e.to_string()))?;
    write(&d, folder, OPTIONS_FILE, opts_text.as_bytes(), 0o644)?;
    let list = TasksFile {
        run_id: plan.run_id.clone(),
        array: array.clone(),
        tasks: tasks
            .iter()
            .filter_map(|&n| plan.task(n))
            .map(|t| ArrayTask {
                index: t.n,
                trial: t.label(),
            })
            .collect(),
        written_at: clock::rfc3339(SystemTime::now()),
    };
    let bytes = serde_json::to_vec_pretty(&list).map_err(|e| SubmitError::Failed(e.to_string()))?;
    write(&d, folder, TASKS_FILE, &bytes, 0o644)?;
    let text = script::render(&ScriptInput {
        run_id: &plan.run_id,
        folder: &folder.root,
        cbrun,
        array: &array,
        resources: &res,
        options,
        retry_infra,
    });
    write(&d, folder, SCRIPT_FILE, text.as_bytes(), 0o755)?;
    Ok(Prepared {
        script: folder.root.join(SLURM_DIR).join(SCRIPT_FILE),
        array,
        tasks: tasks.len(),
        resources: res,
    })
}

/// The environment `sbatch` runs with (see the module docs).
pub fn clean_env(plan: &ResolvedPlan) -> Vec<(String, String)> {
    let mut keys: Vec<String> = ["PATH", "SLURM_CONF", "CBRUN_HOME"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for c in &plan.configs {
        if let Ok(AgentRef::Spec(s, _)) = c.agent() {
            keys.extend(s.env_passthrough.iter().cloned());
        }
        keys.extend(c.env_pass.iter().cloned());
    }
    keys.sort();
    keys.dedup();
    let mut env: Vec<(String, String)> = keys
        .into_iter()
        .filter_map(|k| std::env::var(&k).ok().map(|v| (k, v)))
        .collect();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push((
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ));
    }
    env
}

/// Runs `sbatch --parsable SCRIPT` with `env` only; records the job.
pub fn submit(
    folder: &RunFolder,
    prepared: &Prepared,
    env: &[(String, String)],
) -> Result<JobFile, SubmitError> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .arg(&prepared.script)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(&folder.root)
        .output()
        .map_err(|e| SubmitError::Failed(format!("sbatch: {e} (is Slurm installed here?)")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(SubmitError::Failed(format!(
            "sbatch {}: {}",
            prepared.script.display(),
            err.split_whitespace().collect::<Vec<_>>().join(" ")
        )));
    }
    // `JOBID` or `JOBID;CLUSTER`.
    let id = stdout.trim().split(';').next().unwrap_or("").to_owned();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SubmitError::Failed(format!(
            "sbatch printed {:?}, not a job id",
            stdout.trim()
        )));
    }
    let job = JobFile {
        job_id: id,
        array: prepared.array.clone(),
        tasks: prepared.tasks,
        submitted_at: clock::rfc3339(SystemTime::now()),
    };
    let d = slurm_dir(folder)?;
    let bytes = serde_json::to_vec_pretty(&job).map_err(|e| SubmitError::Failed(e.to_string()))?;
    write(&d, folder, JOB_FILE, &bytes, 0o644)?;
    let mut line = serde_json::to_vec(&job).map_err(|e| SubmitError::Failed(e.to_string()))?;
    line.push(b'\n');
    if let Ok(mut f) = d.open_append(JOBS_LOG, 0o644) {
        use std::io::Write;
        let _ = f.write_all(&line);
    }
    Ok(job)
}

/// Where the batch script of `folder` is.
pub fn script_path(folder: &Path) -> PathBuf {
    folder.join(SLURM_DIR).join(SCRIPT_FILE)
}
