//! `cbrun run --backend slurm`: the run folder is made as for a local run,
//! then Slurm runs its pending trials as one job array, each array task
//! being `exec cbrun run --worker DIR --task $SLURM_ARRAY_TASK_ID`. The
//! array's indices are the plan's trial numbers, so `--resume` submits a
//! sparse array (`--array=3,7-9%K`) of what is not evaluated yet. Slurm
//! does the scheduling; cbrun only writes the batch script and submits it.
//!
//! - [`options`]: the `[slurm]` table of a plan and the flags.
//! - [`resources`]: `--cpus-per-task`, `--mem` and `--time` from the limits.
//! - [`script`]: the batch script and the array's index list.
//! - [`submit`]: `slurm/tasks.json`, `slurm/job.json` and `sbatch` itself.
//! - [`queue`]: what `squeue` says about the run's job.

pub mod options;
pub mod queue;
pub mod resources;
pub mod script;
pub mod submit;

pub use options::SlurmOptions;

/// The folder of the run folder that holds the Slurm files.
pub const SLURM_DIR: &str = "slurm";

/// `SLURM_ARRAY_JOB_ID`/`SLURM_ARRAY_TASK_ID` (else `SLURM_JOB_ID`) as the
/// job id cbrun records in claims: `slurm-<array>_<task>`.
pub fn job_id_from_env(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let var = |k: &str| var(k).filter(|v| !v.is_empty());
    match (var("SLURM_ARRAY_JOB_ID"), var("SLURM_ARRAY_TASK_ID")) {
        (Some(j), Some(t)) => Some(format!("slurm-{j}_{t}")),
        _ => var("SLURM_JOB_ID").map(|j| format!("slurm-{j}")),
    }
}

/// Whether a claim's job id names a Slurm job (a requeued one runs under
/// the same id, and only once at a time).
pub fn is_slurm_job(id: &str) -> bool {
    id.starts_with("slurm-")
}
