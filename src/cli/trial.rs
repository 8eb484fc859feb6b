//! `cbrun trial CASE --agent SPEC`: one trial (solve, submission check,
//! import scan, judge, reward, `trial.json`).
//!
//! Exit status (also meant for the coming `cbrun run`):
//!
//! - 0: the trial was evaluated, whatever its reward: `terminal_status` is
//!   `completed`, `timeout` or `not_submitted` and `failure_class` is not
//!   `infrastructure`;
//! - 1: it is incomplete (`terminal_status` `error`) or failed for
//!   infrastructure (`failure_class` `infrastructure`): its reward says
//!   nothing about the agent;
//! - 2: usage: a bad flag or value, a broken case, an `--out` that exists,
//!   an `--image` that is not in the store; nothing ran, nothing was written;
//! - 130: interrupted (SIGINT, SIGTERM or SIGHUP to cbrun): the record says
//!   `interrupted`.

use anyhow::{Context, Result};
use clap::Args;

use cbrun::case::Case;
use cbrun::image::store::StoreError;
use cbrun::image::unpacked::UnpackedError;
use cbrun::sandbox::run::HostView;
use cbrun::trial::record::{FailureClass, TerminalStatus, TrialRecord};
use cbrun::trial::{self, TrialError, TrialOptions};

use super::exit::ExitStatus;
use super::judge::judge_options;
use super::limits::Root;
use super::load_case;
use super::messages;
use super::solve::{solve_options, SolveArgs};

#[derive(Args, Clone)]
pub struct TrialArgs {
    #[command(flatten)]
    solve: SolveArgs,
    /// Judge budget in seconds (replaces the case's).
    #[arg(long, value_name = "S")]
    judge_timeout: Option<f64>,
    /// Print the record as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// The exit status a finished trial's record calls for (see the module docs).
pub fn status_of(rec: &TrialRecord) -> ExitStatus {
    match (rec.terminal_status, rec.failure_class) {
        (TerminalStatus::Interrupted, _) => ExitStatus::Interrupted,
        (TerminalStatus::Error, _) => ExitStatus::Failure,
        (_, Some(FailureClass::Infrastructure)) => ExitStatus::Failure,
        _ => ExitStatus::Success,
    }
}

/// Why a trial did not start, with the status that says so.
type NotStarted = (ExitStatus, anyhow::Error);

fn usage(e: impl Into<anyhow::Error>) -> NotStarted {
    (ExitStatus::Usage, e.into())
}

/// An image that is not in the store (or a bad name) is the caller's
/// mistake; a store or an unpack that fails is the host's.
fn image_failure(e: anyhow::Error) -> NotStarted {
    let status = match e.downcast_ref::<UnpackedError>() {
        Some(UnpackedError::Store(StoreError::NotFound(_) | StoreError::BadReference { .. })) => {
            ExitStatus::Usage
        }
        _ => ExitStatus::Failure,
    };
    (status, e)
}

/// Everything is checked before the trial folder exists.
fn prepare(a: &TrialArgs, host: &HostView) -> Result<(Case, Root, TrialOptions), NotStarted> {
    let case = load_case(&a.solve.case).map_err(usage)?;
    let root = a.solve.limits.root(host).map_err(image_failure)?;
    let opts = TrialOptions {
        solve: solve_options(&a.solve, &root).map_err(usage)?,
        judge: judge_options(&a.solve.limits, &root, a.judge_timeout).map_err(usage)?,
    };
    Ok((case, root, opts))
}

pub fn exec(a: TrialArgs) -> Result<ExitStatus> {
    if a.json {
        messages::json_mode("trial");
    }
    let host = HostView::detect();
    // `_root` keeps an image's root from gc until the trial is over.
    let (case, _root, opts) = match prepare(&a, &host) {
        Ok(p) => p,
        Err((status, e)) => {
            messages::error_chain(&e);
            return Ok(status);
        }
    };
    for w in cbrun::trial::solve::solve_warnings(&opts.solve) {
        messages::warning(w);
    }
    let out = a
        .solve
        .out
        .clone()
        .unwrap_or_else(|| trial::default_out(case.id.as_str()));
    let (dir, rec) = match trial::run_trial(&case, &out, &opts, &host) {
        Ok(r) => r,
        Err(e @ TrialError::OutDir { .. }) => {
            messages::error_of(&e);
            return Ok(ExitStatus::Usage);
        }
    };
    let status = status_of(&rec);
    if let Err(e) = report(&a, &dir, &rec) {
        messages::error_chain(&e);
        return Ok(ExitStatus::Failure);
    }
    Ok(status)
}

/// The record on stdout (`--json`), or its one-line summary on stderr and
/// the reward and the record's path on stdout.
fn report(a: &TrialArgs, dir: &trial::layout::TrialDir, rec: &TrialRecord) -> Result<()> {
    if a.json {
        return messages::json_result("trial", rec);
    }
    let status = serde_json::to_value(rec.terminal_status).context("terminal_status")?;
    messages::status(format_args!(
        "{} · {} · {} · reward {}{}",
        rec.case_id,
        rec.agent_spec_name,
        status.as_str().unwrap_or("?"),
        rec.reward,
        rec.judge_error
            .as_deref()
            .or(rec.error.as_deref())
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    ));
    println!("reward {}", rec.reward);
    println!("record {}", dir.record().display());
    Ok(())
}
