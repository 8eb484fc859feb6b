//! Trials end to end: solve sandbox, submission, import scan, judge
//! sandbox, reward and record.

pub mod clock;
pub mod copy;
pub mod egress;
pub mod judge;
pub mod layout;
pub mod phase;
pub mod provenance;
pub mod record;
pub mod solve;
pub mod stage;
pub mod submit;
pub mod validate;
pub mod view;
pub mod watchdog;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::agent::builtin::AgentRef;
use crate::case::Case;
use crate::sandbox::config::RootfsSource;
use crate::sandbox::run::HostView;
use judge::{run_judge, JudgeOptions, JudgeReport};
use layout::TrialDir;
use record::{FailureClass, PipelineStatus, RunPlace, TerminalStatus, TrialPhase, TrialRecord};
use solve::{run_solve_with, Egress, SolveEnd, SolveOptions, SolveReport};

#[derive(Debug, Clone)]
pub struct TrialOptions {
    pub solve: SolveOptions,
    pub judge: JudgeOptions,
}

#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    #[error("--out {path}")]
    OutDir {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The folder a trial goes to when `--out` is not given.
pub fn default_out(case_id: &str) -> PathBuf {
    PathBuf::from("cbrun-trials").join(format!(
        "{case_id}-{}-{}",
        clock::compact(SystemTime::now()),
        std::process::id()
    ))
}

/// Agent name and spec hash for the record.
pub fn agent_identity(agent: &AgentRef) -> (String, Option<String>) {
    match agent {
        AgentRef::Spec(spec, _) => (spec.name.clone(), Some(spec.hash())),
        AgentRef::Replay(dir) => (format!("replay:{}", dir.display()), None),
        AgentRef::ReplayControl(name) => (format!("replay:@{name}"), None),
        AgentRef::None => ("none".into(), None),
    }
}

/// What a caller may do around one trial (`cbrun run`'s worker shows the
/// step in its progress and stops on a signal between sandboxes).
pub trait TrialHooks {
    /// Step `p` begins.
    fn phase(&mut self, _p: TrialPhase) {}
    /// Asked before each sandbox starts: true ends the trial there as
    /// interrupted. (A sandbox already running is stopped by the signal
    /// itself: see [`crate::sandbox::run`].)
    fn stop_requested(&mut self) -> bool {
        false
    }
}

/// No hooks.
pub struct NoTrialHooks;
impl TrialHooks for NoTrialHooks {}

/// Runs one trial into `out` (which must not exist).
pub fn run_trial(
    case: &Case,
    out: &Path,
    opts: &TrialOptions,
    host: &HostView,
) -> Result<(TrialDir, TrialRecord), TrialError> {
    run_trial_with(
        case,
        out,
        opts,
        host,
        TrialContext::default(),
        &mut NoTrialHooks,
    )
}

/// What a caller knows about a trial before it runs.
#[derive(Debug, Clone, Default)]
pub struct TrialContext {
    /// The run, configuration, repeat and attempt (`cbrun run`).
    pub place: Option<RunPlace>,
    /// The case's provenance, when the caller hashed it already (it is
    /// hashed here otherwise).
    pub provenance: Option<provenance::Provenance>,
}

/// [`run_trial`] as part of a run (`ctx` goes into the record), with hooks.
pub fn run_trial_with(
    case: &Case,
    out: &Path,
    opts: &TrialOptions,
    host: &HostView,
    ctx: TrialContext,
    hooks: &mut dyn TrialHooks,
) -> Result<(TrialDir, TrialRecord), TrialError> {
    let dir = TrialDir::create(out).map_err(|source| TrialError::OutDir {
        path: out.to_path_buf(),
        source,
    })?;
    let agent = crate::agent::builtin::for_case(&opts.solve.agent, case)
        .unwrap_or_else(|_| opts.solve.agent.clone());
    let (name, hash) = agent_identity(&agent);
    let mut rec = TrialRecord::start(
        case.id.as_str(),
        &name,
        hash,
        opts.solve.model.clone(),
        clock::rfc3339(SystemTime::now()),
    );
    if let Some(p) = &ctx.place {
        rec.place(p);
    }
    rec.language = Some(case.manifest.runner.language_label.clone());
    rec.failed_phase = Some(solve::first_phase(&agent));
    match ctx
        .provenance
        .map(Ok)
        .unwrap_or_else(|| provenance::of_case(&case.dir))
    {
        Ok(p) => rec.provenance = Some(p),
        Err(e) => rec.warnings.push(format!("provenance of the case: {e}")),
    }
    let rootfs_id = match &opts.solve.rootfs {
        RootfsSource::Host => serde_json::json!({"rootfs": "host"}),
        RootfsSource::Dir(d) => serde_json::json!({"rootfs": d}),
        RootfsSource::Image(i) => serde_json::json!({"image": i.label}),
    };
    rec.images.insert("solve", rootfs_id.clone());
    rec.images.insert("judge", rootfs_id);
    rec.network = match &opts.solve.egress {
        Egress::None => serde_json::json!({"policy": "none"}),
        Egress::Allowlist(p) => serde_json::json!({"policy": "allowlist", "rules": p}),
    };
    save(&dir, &rec);
    // A case cbrun's judge cannot judge as its author meant is refused
    // before the agent spends its budget (as the published runner's
    // readiness check does), and the refusal is the host's, not the agent's.
    if let Some(why) = case.judge_unsupported() {
        finish_refused(&mut rec, &dir, &why);
        save(&dir, &rec);
        return Ok((dir, rec));
    }

    let solved = run_solve_with(case, &dir, &opts.solve, host, hooks);
    fill_solve(&mut rec, &solved);
    let mut stopped_before_judge = false;
    let judged = match solved.end {
        SolveEnd::Submitted if solved.denylist_violation.is_none() => {
            if hooks.stop_requested() {
                stopped_before_judge = true;
                None
            } else {
                rec.failed_phase = Some(TrialPhase::Judge);
                save(&dir, &rec);
                hooks.phase(TrialPhase::Judge);
                Some(run_judge(case, &dir.workspace(), &dir, &opts.judge, host))
            }
        }
        _ => None,
    };
    hooks.phase(TrialPhase::Record);
    if stopped_before_judge {
        finish_interrupted(&mut rec, &dir, TrialPhase::Judge);
    } else {
        finish(&mut rec, &dir, &solved, judged.as_ref(), &opts.solve.egress);
    }
    dir.remove_scratch();
    save(&dir, &rec);
    Ok((dir, rec))
}

/// A trial stopped by its hooks between two steps, before `phase`.
fn finish_interrupted(rec: &mut TrialRecord, dir: &TrialDir, phase: TrialPhase) {
    rec.terminal_status = TerminalStatus::Interrupted;
    rec.failure_class = Some(FailureClass::Infrastructure);
    rec.pipeline_status = PipelineStatus::Error;
    rec.failed_phase = Some(phase);
    rec.finished_at = Some(clock::rfc3339(SystemTime::now()));
    let _ = dir.write("logs/verifier/reward.txt", b"0\n");
    let _ = dir.write_json(
        "logs/verifier/reward.json",
        &serde_json::json!({"reward": 0, "reason": "interrupted", "judge_error": null}),
    );
    link_files(rec, dir);
}

/// A trial refused before its solve phase: an infrastructure error.
fn finish_refused(rec: &mut TrialRecord, dir: &TrialDir, why: &str) {
    rec.terminal_status = TerminalStatus::Error;
    rec.failure_class = Some(FailureClass::Infrastructure);
    rec.pipeline_status = PipelineStatus::Error;
    rec.failed_phase = Some(TrialPhase::Setup);
    rec.error = Some(why.to_owned());
    rec.finished_at = Some(clock::rfc3339(SystemTime::now()));
    let _ = dir.write("logs/verifier/reward.txt", b"0\n");
    let _ = dir.write_json(
        "logs/verifier/reward.json",
        &serde_json::json!({"reward": 0, "reason": "refused", "judge_error": why}),
    );
    link_files(rec, dir);
}

/// Where the trial stands in the pipeline (see [`PipelineStatus`]), and
/// where it stopped when it was not evaluated.
fn pipeline(s: &SolveReport, j: Option<&JudgeReport>) -> (PipelineStatus, Option<TrialPhase>) {
    use PipelineStatus::*;
    match (s.end, j) {
        (SolveEnd::Error | SolveEnd::Interrupted, _) => (Error, Some(s.phase)),
        (SolveEnd::Timeout | SolveEnd::NotSubmitted, _) => (NotSubmitted, Some(s.phase)),
        // The banned import survived the fix attempt.
        (SolveEnd::Submitted, None) => (Rejected, Some(s.phase)),
        (SolveEnd::Submitted, Some(j)) if j.interrupted || j.infrastructure => {
            (Error, Some(TrialPhase::Judge))
        }
        // Refused before any test ran, and not for the host's sake: the
        // copy of the workspace, or a workspace shadowing the runner.
        (SolveEnd::Submitted, Some(j))
            if j.judge_error.is_some() && j.exit_code.is_none() && !j.timed_out =>
        {
            (Rejected, Some(TrialPhase::Judge))
        }
        (SolveEnd::Submitted, Some(_)) => (Evaluated, None),
    }
}

fn save(dir: &TrialDir, rec: &TrialRecord) {
    if let Err(e) = rec.save(dir) {
        crate::notice::warning(format_args!("writing {}: {e}", dir.record().display()));
    }
}

fn fill_solve(rec: &mut TrialRecord, s: &SolveReport) {
    rec.cli_version = s.cli_version.clone();
    rec.agent_exit_code = s.agent_exit_code;
    rec.solve_seconds = s.seconds;
    rec.setup_seconds = s.setup_seconds;
    rec.time_to_submit_seconds = s.time_to_submit_seconds;
    rec.stalled = s.stalled;
    rec.submission = serde_json::to_value(&s.submission).ok();
    rec.denylist_violation = s.denylist_violation.clone();
    rec.denylist_fix_attempts = s.denylist_fix_attempts;
    rec.env_keys = s.env_keys.clone();
    rec.masked_imports = s.masked_imports.clone();
    rec.warnings.extend(s.warnings.iter().cloned());
    fill_agent_evidence(rec, s);
    if let Some(l) = &s.limits {
        rec.limits
            .insert("solve", serde_json::to_value(l).unwrap_or_default());
    }
}

/// Setup time, install cache, usage and cost, signals, transcripts.
fn fill_agent_evidence(rec: &mut TrialRecord, s: &SolveReport) {
    rec.setup_seconds = s.setup_seconds;
    rec.install_cached = s.install_cached;
    let Some(ev) = &s.evidence else { return };
    if let Some(u) = &ev.usage {
        rec.token_usage = Some(u.total);
        rec.cli_cost_usd = u.cli_cost_usd;
        rec.usage = Some(serde_json::json!({
            "format": u.format,
            "complete": u.complete,
            "by_model": u.by_model,
            "sources": u.sources,
        }));
    }
    if let Some(c) = &ev.cost {
        rec.cost_usd = c.cost_usd;
        rec.cost_source = c.cost_source.clone();
        rec.unpriced_models = c.unpriced_models.clone();
    }
    rec.infra_signals = ev.signals.clone();
    rec.transcripts = ev.transcripts.clone();
}

/// A run without a submission whose model API failed is the
/// infrastructure's failure, not the agent's.
fn api_failure(s: &SolveReport) -> Option<String> {
    let ev = s.evidence.as_ref()?;
    ev.signals
        .invalidating(ev.model_reached())
        .map(|sig| format!("infra:{}", sig.name()))
}

fn finish(
    rec: &mut TrialRecord,
    dir: &TrialDir,
    s: &SolveReport,
    j: Option<&JudgeReport>,
    egress: &Egress,
) {
    use FailureClass::*;
    use TerminalStatus::*;
    let (status, class) = match (s.end, j) {
        (SolveEnd::Error, _) => {
            rec.error = s.error.clone();
            (
                Error,
                if s.infrastructure {
                    Infrastructure
                } else {
                    Implementation
                },
            )
        }
        (SolveEnd::Interrupted, _) => (Interrupted, Infrastructure),
        (SolveEnd::Timeout | SolveEnd::NotSubmitted, _) if api_failure(s).is_some() => {
            rec.run_valid = false;
            rec.invalid_reason = api_failure(s);
            let status = if s.end == SolveEnd::Timeout {
                Timeout
            } else {
                NotSubmitted
            };
            (status, Infrastructure)
        }
        (SolveEnd::Timeout, _) => (Timeout, Implementation),
        (SolveEnd::NotSubmitted, _) => (NotSubmitted, Implementation),
        (SolveEnd::Submitted, None) => (Completed, Implementation),
        (SolveEnd::Submitted, Some(j)) if j.interrupted => (Interrupted, Infrastructure),
        (SolveEnd::Submitted, Some(j)) => {
            rec.reward = j.reward;
            rec.judge_error = j.judge_error.clone();
            rec.judge_tampered = j.judge_tampered;
            rec.tamper_findings = j.tamper_findings.clone();
            rec.judge_exit_code = j.exit_code;
            rec.judge_seconds = j.seconds;
            rec.failed_tests = j.failed_tests.clone();
            if let Some(c) = &j.counts {
                rec.test_count = Some(c.total);
                rec.passed = Some(c.passed);
                rec.failed = Some(c.failed);
                rec.errors = Some(c.errors);
                rec.skipped = Some(c.skipped);
            }
            if let Some(l) = &j.limits {
                rec.limits
                    .insert("judge", serde_json::to_value(l).unwrap_or_default());
            }
            rec.warnings.extend(j.warnings.iter().cloned());
            for m in &j.masked_imports {
                if !rec.masked_imports.contains(m) {
                    rec.masked_imports.push(m.clone());
                }
            }
            (
                Completed,
                if j.infrastructure {
                    Infrastructure
                } else {
                    Implementation
                },
            )
        }
    };
    rec.terminal_status = status;
    rec.failure_class = (rec.reward == 0).then_some(class);
    (rec.pipeline_status, rec.failed_phase) = pipeline(s, j);
    if j.is_none() {
        // No judge ran: the verifier files still say why the reward is 0.
        let reason = match status {
            Completed => format!(
                "import of a banned module after the fix attempt: {}",
                rec.denylist_violation.clone().unwrap_or_default()
            ),
            NotSubmitted => "not submitted".to_owned(),
            Timeout => "the solve budget ran out".to_owned(),
            Interrupted => "interrupted".to_owned(),
            Error => format!("error: {}", rec.error.clone().unwrap_or_default()),
        };
        let reason = match &rec.invalid_reason {
            Some(why) => format!("{reason} ({why}: the model API failed)"),
            None => reason,
        };
        let _ = dir.write("logs/verifier/reward.txt", b"0\n");
        let _ = dir.write_json(
            "logs/verifier/reward.json",
            &serde_json::json!({"reward": 0, "reason": reason, "judge_error": null}),
        );
    }
    if let Egress::Allowlist(_) = egress {
        if let Ok(sum) = crate::net::log::summarize(&dir.network_log()) {
            if let Some(obj) = rec.network.as_object_mut() {
                obj.insert(
                    "connections".into(),
                    serde_json::to_value(sum).unwrap_or_default(),
                );
            }
        }
    }
    rec.finished_at = Some(clock::rfc3339(SystemTime::now()));
    link_files(rec, dir);
}

/// Points the record at the trial's files that exist.
fn link_files(rec: &mut TrialRecord, dir: &TrialDir) {
    for (key, rel) in [
        ("workspace", "workspace"),
        ("agent_log", "logs/cbrun/agent.log"),
        ("agent_fix_log", "logs/cbrun/agent.fix.log"),
        ("agent_dir", "logs/agent"),
        ("install_log", "logs/cbrun/install.log"),
        ("setup_log", "logs/cbrun/setup.log"),
        ("scan", "logs/cbrun/scan.json"),
        ("network_log", "logs/cbrun/network.jsonl"),
        ("judge_log", "logs/verifier/final_tests.log"),
        ("reward", "logs/verifier/reward.txt"),
        ("reward_json", "logs/verifier/reward.json"),
        ("final_report", "logs/verifier/final_report.json"),
        ("install_outcome", "logs/cbrun/install.outcome.json"),
    ] {
        rec.link(dir, key, rel);
    }
    if let Some(t) = rec.transcripts.first().cloned() {
        rec.files.insert("transcript", t);
    }
    // One line per distinct warning (every sandbox of a trial reports the
    // same host limits).
    let mut seen = std::collections::BTreeSet::new();
    rec.warnings.retain(|w| seen.insert(w.clone()));
}
