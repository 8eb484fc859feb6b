//! `cbrun run --backend slurm` (and `--emit-sbatch`, `--wait`) and
//! `cbrun run --status DIR`: the run folder is made (or resumed) as for a
//! local run, then its pending trials go to Slurm as one job array (see
//! `cbrun::run::slurm`).
//!
//! Exit status: 0 submitted (or written, with `--emit-sbatch`); with
//! `--wait`, that of a local run (0 every trial evaluated, 1 some trial
//! incomplete or failed for infrastructure); 1 sbatch failed; 2 usage
//! (bad plan or option, a job of the run still queued or running).

use std::path::Path;
use std::time::Duration;

use anyhow::anyhow;

use cbrun::run::folder::RunFolder;
use cbrun::run::plan::ResolvedPlan;
use cbrun::run::resume;
use cbrun::run::slurm::{queue, submit, SlurmOptions};
use cbrun::run::summary::{self, Counts};
use cbrun::run::worker::read_status;
use cbrun::sandbox::run::HostView;

use super::exit::ExitStatus;
use super::messages;
use super::run::{all_evaluated, open_or_create, usage, NotStarted, RunArgs};

pub fn exec(a: &RunArgs) -> anyhow::Result<ExitStatus> {
    match submit_run(a) {
        Ok(s) => Ok(s),
        Err((status, e)) => {
            messages::error_chain(&e);
            Ok(status)
        }
    }
}

fn flag_options(a: &RunArgs) -> SlurmOptions {
    SlurmOptions {
        partition: a.partition.clone(),
        account: a.account.clone(),
        qos: a.qos.clone(),
        constraint: a.constraint.clone(),
        parallel: a.jobs.map(|j| j.min(u32::MAX as usize) as u32),
        sbatch_args: a.sbatch_args.clone(),
        ..SlurmOptions::default()
    }
}

fn submit_run(a: &RunArgs) -> Result<ExitStatus, NotStarted> {
    if a.wait && a.emit_sbatch {
        return Err(usage(anyhow!(
            "--wait: nothing to wait for with --emit-sbatch"
        )));
    }
    let view = HostView::detect();
    let (folder, plan, _images, from_plan) = open_or_create(a, &view)?;
    let base = match submit::stored_options(&folder).map_err(|e| usage(anyhow!(e)))? {
        Some(stored) => stored,
        None => from_plan.unwrap_or_default(),
    };
    let options = base.overridden_by(&flag_options(a));
    options.check().map_err(|e| usage(anyhow!(e)))?;
    if !a.emit_sbatch {
        if let Some(job) = submit::read_job(&folder) {
            match queue::squeue(&job.job_id) {
                Ok(q) if q.total() > 0 => {
                    return Err(usage(anyhow!(
                        "{}: job {} of this run still has tasks in Slurm ({}); wait for it or `scancel {}` first",
                        folder.root.display(),
                        job.job_id,
                        q.describe(),
                        job.job_id
                    )))
                }
                Ok(_) => {}
                Err(e) => return Err((ExitStatus::Failure, anyhow!(e))),
            }
        }
    }
    let pending = resume::pending(&folder, &plan, a.retry_infra);
    for h in &pending.held {
        messages::warning(format_args!("{h}: a live worker holds it; left alone"));
    }
    summary::write(&folder, &plan).map_err(|e| (ExitStatus::Failure, anyhow!(e)))?;
    if pending.queue.is_empty() {
        messages::status(format_args!(
            "{}: nothing to submit ({} of {} trials stand)",
            folder.root.display(),
            pending.done,
            plan.total()
        ));
        return Ok(ExitStatus::from_ok(all_evaluated(&folder, &plan)));
    }
    let cbrun = match &options.cbrun {
        Some(c) => c.clone(),
        None => std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .map_err(|e| (ExitStatus::Failure, anyhow!("the cbrun binary's path: {e}")))?
            .display()
            .to_string(),
    };
    if !a.emit_sbatch {
        let top = pending.queue.iter().max().copied().unwrap_or(0);
        if let Some(max) = queue::max_array_size() {
            if top >= max {
                return Err(usage(anyhow!(
                    "the plan has trials up to {top}, but this cluster's MaxArraySize is {max} (array indices are trial numbers); ask the admins to raise it, or split the plan"
                )));
            }
        }
    }
    let prepared = submit::prepare(
        &folder,
        &plan,
        &pending.queue,
        &options,
        &cbrun,
        a.retry_infra,
    )
    .map_err(|e| match e {
        submit::SubmitError::Usage(m) => usage(anyhow!(m)),
        submit::SubmitError::Failed(m) => (ExitStatus::Failure, anyhow!(m)),
    })?;
    let r = &prepared.resources;
    if a.emit_sbatch {
        println!("{}", prepared.script.display());
        println!(
            "array {} ({} tasks; each --cpus-per-task={} --mem={}M --time={})",
            prepared.array,
            prepared.tasks,
            r.cpus,
            r.mem_mib,
            r.time_arg()
        );
        messages::status(format_args!(
            "not submitted; `sbatch {}` submits it (the array's indices are the trials in {})",
            prepared.script.display(),
            folder.root.join("slurm/tasks.json").display()
        ));
        return Ok(ExitStatus::Success);
    }
    let env = submit::clean_env(&plan);
    let job =
        submit::submit(&folder, &prepared, &env).map_err(|e| (ExitStatus::Failure, anyhow!(e)))?;
    println!(
        "submitted job {}: {} array tasks ({}), each --cpus-per-task={} --mem={}M --time={}",
        job.job_id,
        prepared.tasks,
        prepared.array,
        r.cpus,
        r.mem_mib,
        r.time_arg()
    );
    if !a.wait {
        println!("progress: cbrun run --status {}", folder.root.display());
        return Ok(ExitStatus::Success);
    }
    Ok(wait(&folder, &plan, &job.job_id, a.quiet))
}

/// Polls the folder and squeue until the job has left the queue.
fn wait(folder: &RunFolder, plan: &ResolvedPlan, job: &str, quiet: bool) -> ExitStatus {
    let mut last: Option<Counts> = None;
    let mut failures = 0;
    loop {
        let q = match queue::squeue(job) {
            Ok(q) => {
                failures = 0;
                q
            }
            Err(e) => {
                failures += 1;
                if failures > 30 {
                    messages::error(format_args!("{e}; giving up waiting"));
                    return ExitStatus::Failure;
                }
                std::thread::sleep(Duration::from_secs(2));
                continue;
            }
        };
        let s = summary::compute(folder, plan);
        if !quiet && last.as_ref() != Some(&s.counts) {
            messages::status(format_args!(
                "job {job}: {} · {}/{} done, {} passed, {} running",
                q.describe(),
                s.counts.done,
                s.counts.total,
                s.counts.passed,
                s.counts.running
            ));
            last = Some(s.counts.clone());
        }
        if q.total() == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let s = summary::write(folder, plan).unwrap_or_else(|_| summary::compute(folder, plan));
    if !quiet {
        print_line(folder, &s.counts);
    }
    ExitStatus::from_ok(all_evaluated(folder, plan))
}

/// The line a run ends with (local, or a Slurm array waited for).
pub(super) fn print_line(folder: &RunFolder, c: &Counts) {
    println!(
        "run {}: {} of {} trials done: {} evaluated ({} passed), {} not submitted, {} rejected, {} errors ({} infrastructure, {} interrupted)",
        folder.root.display(),
        c.done,
        c.total,
        c.evaluated,
        c.passed,
        c.not_submitted,
        c.rejected,
        c.errors,
        c.infrastructure,
        c.interrupted
    );
}

/// `cbrun run --status DIR`.
pub fn status(dir: &Path) -> ExitStatus {
    let folder = match RunFolder::open(dir) {
        Ok(f) => f,
        Err(e) => {
            messages::error(format_args!("--status {}: {e}", dir.display()));
            return ExitStatus::Usage;
        }
    };
    let plan = match folder.read_plan() {
        Ok(Some(p)) => p,
        Ok(None) => {
            messages::error(format_args!(
                "--status {}: no plan.toml: not a run folder",
                folder.root.display()
            ));
            return ExitStatus::Usage;
        }
        Err(e) => {
            messages::error(e);
            return ExitStatus::Usage;
        }
    };
    let s = summary::compute(&folder, &plan);
    print_line(&folder, &s.counts);
    for (name, c) in &s.by_config {
        println!(
            "  config {name}: {}/{} done, {} passed, {} running",
            c.done, c.total, c.passed, c.running
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    for t in plan.tasks() {
        if let Some(st) = read_status(&folder, &t) {
            let secs = (now - st.since_unix).max(0.0) as u64;
            println!(
                "  running {}: {} for {}:{:02} (task {}, attempt {})",
                t.label(),
                st.phase,
                secs / 60,
                secs % 60,
                t.n,
                st.attempt
            );
        }
    }
    if let Some(job) = submit::read_job(&folder) {
        match queue::squeue(&job.job_id) {
            Ok(q) => println!(
                "slurm job {} (array {}, submitted {}): {}",
                job.job_id,
                job.array,
                job.submitted_at,
                q.describe()
            ),
            Err(e) => messages::warning(format_args!("slurm job {}: {e}", job.job_id)),
        }
    }
    ExitStatus::Success
}
