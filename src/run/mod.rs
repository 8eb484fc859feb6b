//! `cbrun run`: benchmark runs. A plan (cases x configurations x repeats)
//! becomes a run folder of ordinary trial folders, run in parallel on one
//! host by worker processes, resumable after any interruption.
//!
//! - [`plan`]: the plan file, the command line's plan, `plan.toml`.
//! - [`folder`]: the run folder's layout, `results.jsonl`.
//! - [`claim`]: NFS-safe claims on trials, and breaking stale ones.
//! - [`state`]: where a trial stands and what to do with it next.
//! - [`worker`]: `cbrun run --worker DIR --task N`, one trial.
//! - [`schedule`]: slots, memory and CPU sets.
//! - [`supervise`]: the local supervisor of the workers.
//! - [`resume`]: what is left to do in a folder.
//! - [`summary`]: the summary file.
//! - [`slurm`]: `--backend slurm`: the run as one Slurm job array.
//! - [`progress`]: the display.

pub mod claim;
pub mod folder;
pub mod plan;
pub mod progress;
pub mod resume;
pub mod schedule;
pub mod slurm;
pub mod state;
pub mod summary;
pub mod supervise;
pub mod worker;
