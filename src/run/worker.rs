//! `cbrun run --worker DIR --task N`: one trial of a run, start to end, in
//! a process of its own. The local scheduler spawns these; a cluster
//! scheduler can submit the very same command as a job array.
//!
//! The worker reads `plan.toml`, checks that the case is still the one the
//! plan hashed, claims the trial (see [`super::claim`]), decides what to do
//! with it (see [`super::state::next`]), sets an earlier unfinished or
//! failed attempt aside, runs the trial with its phases written to
//! `<repeat>.status`, appends its line to `results.jsonl`, rewrites
//! `summary.json` and gives the claim up.
//!
//! The worker gets SIGTERM when its parent dies (unless a supervisor set
//! another parent-death signal). SIGINT, SIGTERM and SIGHUP interrupt the trial: a running sandbox is
//! stopped (SIGTERM, a grace period, SIGKILL) and the record says
//! `interrupted`; one that arrives between two sandboxes stops the trial
//! before the next one starts.

use std::io;
use std::time::{Duration, SystemTime};

use crate::agent::builtin::{self, AgentRef};
use crate::sandbox::run::HostView;
use crate::sys::dir::Dir;
use crate::sys::stop;
use crate::trial::record::{RunPlace, TrialPhase, TrialRecord};
use crate::trial::{self, provenance, TrialContext, TrialHooks, TrialOptions};

use super::claim::{Acquired, Claim, ClaimInfo, Found};
use super::folder::RunFolder;
use super::plan::{PlanError, ResolvedPlan, Task};
use super::state::{self, Next, RecordView};
use super::summary;

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub task: usize,
    /// Reruns allowed for trials that failed for infrastructure.
    pub retry_infra: u32,
    /// The scheduler's job, recorded in the claim.
    pub job_id: Option<String>,
    /// Rewrite `summary.json` when done (a supervisor that writes it
    /// itself turns this off).
    pub summary: bool,
    /// A supervisor to send SIGUSR1 at each phase change (it then reads
    /// the status file at once instead of at its next tick).
    pub notify: Option<i32>,
}

/// How a worker ended.
#[derive(Debug)]
pub enum WorkerEnd {
    /// It ran the trial.
    Ran(Box<TrialRecord>),
    /// The trial's outcome already stands; nothing ran.
    AlreadyDone(RecordView),
    /// The trial failed for infrastructure as often as retries allow.
    Exhausted(RecordView),
    /// Another worker holds the claim.
    Claimed(String),
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The command line, the plan or the case is wrong: nothing ran.
    #[error("{0}")]
    Usage(String),
    /// The run folder could not be worked in.
    #[error("{0}")]
    Folder(String),
}

impl From<PlanError> for WorkerError {
    fn from(e: PlanError) -> Self {
        WorkerError::Usage(e.0)
    }
}

/// Runs one trial of the run folder `folder`. `warnings` gets what the
/// caller should say (claims broken, a claim lost).
pub fn run_worker(
    folder: &RunFolder,
    o: &WorkerOptions,
    warnings: &mut Vec<String>,
) -> Result<WorkerEnd, WorkerError> {
    // A stop-signal is caught by the handler between sandboxes, and kept
    // pending (blocked) from each step's start until its sandbox reads it.
    stop::install_stop_flag()
        .and_then(|()| stop::block_stop_signals())
        .map_err(|e| WorkerError::Folder(format!("signal handlers: {e}")))?;
    // Under Slurm the parent is slurmstepd: should it die, the trial is
    // interrupted (SIGTERM, kept pending like any stop-signal).
    if stop::die_with_parent_gently()
        .map_err(|e| WorkerError::Folder(format!("parent-death signal: {e}")))?
    {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
    }
    let shown = folder.root.display().to_string();
    let plan = folder
        .read_plan()?
        .ok_or_else(|| WorkerError::Usage(format!("{shown}: no plan.toml: not a run folder")))?;
    let task = plan.task(o.task).ok_or_else(|| {
        WorkerError::Usage(format!(
            "--task {}: the plan in {shown} has trials 0 to {}",
            o.task,
            plan.total().saturating_sub(1)
        ))
    })?;
    let entry = &plan.cases[task.case];
    let case = crate::case::load(&entry.path).map_err(|e| WorkerError::Usage(e.to_string()))?;
    let prov = provenance::of_case(&case.dir).map_err(|e| WorkerError::Usage(e.to_string()))?;
    if prov.case_sha256 != entry.sha256 {
        return Err(WorkerError::Usage(format!(
            "case {} ({}) changed since the plan was made: its files hash to {}, the plan says {}",
            entry.id,
            entry.path.display(),
            prov.case_sha256,
            entry.sha256
        )));
    }
    let config = &plan.configs[task.config];
    let host = HostView::detect();
    // The image's root stays in use (out of `image gc`'s reach) while
    // `_root` lives.
    let root = config.root(&host)?;
    let opts = config.trial_options(&root)?;

    let dir = folder
        .config_dir(&task)
        .map_err(|e| WorkerError::Folder(format!("{shown}: {e}")))?;
    let claim_name = format!("{}.claim", task.repeat);
    let info = ClaimInfo::mine(task.n, o.job_id.clone(), budget(&case, &opts));
    let claim = match Claim::acquire(&dir, &claim_name, info, warnings)
        .map_err(|e| WorkerError::Folder(format!("claiming {}: {e}", task.label())))?
    {
        Acquired::Mine(c) => c,
        Acquired::Held(found) => {
            return Ok(WorkerEnd::Claimed(match found {
                Found::Claim(c) => format!("{} is claimed by {}", task.label(), c.describe()),
                _ => format!("{} is being claimed by another worker", task.label()),
            }))
        }
    };
    let end = with_claim(
        folder, &plan, &task, &dir, &case, prov, &opts, &host, o, &claim, warnings,
    );
    let _ = std::fs::remove_file(folder.root.join(status_rel(&task)));
    claim.release();
    if o.summary {
        if let Err(e) = summary::write(folder, &plan) {
            warnings.push(format!("writing {shown}/summary.json: {e}"));
        }
    }
    end
}

/// What the worker does once the trial is its own.
#[allow(clippy::too_many_arguments)]
fn with_claim(
    folder: &RunFolder,
    plan: &ResolvedPlan,
    task: &Task,
    dir: &Dir,
    case: &crate::case::Case,
    prov: provenance::Provenance,
    opts: &TrialOptions,
    host: &HostView,
    o: &WorkerOptions,
    claim: &Claim,
    warnings: &mut Vec<String>,
) -> Result<WorkerEnd, WorkerError> {
    let attempt = match state::next(Some(dir), task.repeat, o.retry_infra) {
        Next::Done(v) => return Ok(WorkerEnd::AlreadyDone(v)),
        Next::Exhausted(v) => return Ok(WorkerEnd::Exhausted(v)),
        Next::Run { attempt, set_aside } => {
            if let Some(k) = set_aside {
                state::set_aside(dir, task.repeat, k).map_err(|e| {
                    WorkerError::Folder(format!(
                        "setting attempt {k} of {} aside: {e}",
                        task.label()
                    ))
                })?;
            }
            attempt
        }
    };
    let place = RunPlace {
        run_id: plan.run_id.clone(),
        config: task.config_name.clone(),
        repeat: task.repeat,
        attempt,
    };
    let mut hooks = WorkerHooks {
        path: folder.root.join(status_rel(task)),
        task: task.n,
        attempt,
        notify: o.notify,
    };
    hooks.write(first_phase(opts, case));
    let out = folder.trial_path(task);
    let ctx = TrialContext {
        place: Some(place),
        provenance: Some(prov),
    };
    let (_, rec) = trial::run_trial_with(case, &out, opts, host, ctx, &mut hooks)
        .map_err(|e| WorkerError::Folder(crate::error::chain(&e)))?;
    if !claim.still_mine() {
        // Broken as stale by another host while this one was slow: the
        // trial folder is now the other worker's business.
        warnings.push(format!(
            "{}: the claim was taken over while the trial ran; its result is not added to results.jsonl",
            task.label()
        ));
        return Ok(WorkerEnd::Ran(Box::new(rec)));
    }
    let line = serde_json::json!({
        "run_id": plan.run_id,
        "case": task.case_id,
        "config": task.config_name,
        "repeat": task.repeat,
        "attempt": attempt,
        "trial_dir": RunFolder::trial_rel(task),
        "record": rec,
    });
    if let Err(e) = folder.append_result(&line) {
        warnings.push(format!("appending to results.jsonl: {e}"));
    }
    Ok(WorkerEnd::Ran(Box::new(rec)))
}

fn first_phase(opts: &TrialOptions, case: &crate::case::Case) -> TrialPhase {
    let agent = builtin::for_case(&opts.solve.agent, case).unwrap_or(AgentRef::None);
    trial::solve::first_phase(&agent)
}

/// How long a trial may take: the agent's install and setup budgets, its
/// version probe, the solve budget, and the judge's.
fn budget(case: &crate::case::Case, opts: &TrialOptions) -> Duration {
    let setup = match &opts.solve.agent {
        AgentRef::Spec(s, _) => {
            Duration::from_secs(s.install_timeout_sec + s.setup_timeout_sec + 60)
        }
        _ => Duration::ZERO,
    };
    let judge = opts.judge.timeout.unwrap_or_else(|| case.judge_timeout());
    setup + opts.solve.budget + judge
}

/// `trials/<case>/<config>/<repeat>.status`, relative to the run folder.
pub fn status_rel(task: &Task) -> String {
    format!("{}.status", RunFolder::trial_rel(task))
}

/// What `<repeat>.status` says.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Status {
    pub task: usize,
    pub attempt: u32,
    pub phase: String,
    pub pid: u32,
    pub since_unix: f64,
}

/// Reads a running trial's status file (written by cbrun only).
pub fn read_status(folder: &RunFolder, task: &Task) -> Option<Status> {
    let c = folder.dir().read_capped(status_rel(task), 4096).ok()?;
    serde_json::from_slice(&c.bytes).ok()
}

struct WorkerHooks {
    path: std::path::PathBuf,
    task: usize,
    attempt: u32,
    notify: Option<i32>,
}

impl WorkerHooks {
    /// The status file, replaced (no sync: it only feeds a display).
    fn write(&self, p: TrialPhase) {
        let s = Status {
            task: self.task,
            attempt: self.attempt,
            phase: p.as_str().into(),
            pid: std::process::id(),
            since_unix: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        };
        let tmp = self
            .path
            .with_extension(format!("status.{}", std::process::id()));
        let written = serde_json::to_vec(&s)
            .map_err(io::Error::other)
            .and_then(|b| std::fs::write(&tmp, b))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        if let Some(pid) = self.notify {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGUSR1,
            );
        }
    }
}

impl TrialHooks for WorkerHooks {
    fn phase(&mut self, p: TrialPhase) {
        self.write(p);
    }
    fn stop_requested(&mut self) -> bool {
        // Blocked again (the last sandbox run unblocked them): from here to
        // the next sandbox, a signal waits for it instead of being missed.
        let _ = stop::block_stop_signals();
        stop::stop_signal().is_some() || stop::stop_pending()
    }
}
