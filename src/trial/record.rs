//! `trial.json`: the record a benchmark author puts in a table. It is
//! written first as `interrupted` (so a cbrun that dies mid-trial leaves
//! an honest record) and replaced atomically at the end.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::trial::layout::TrialDir;
use crate::trial::provenance::Provenance;

pub const RECORD_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalStatus {
    Completed,
    Timeout,
    Error,
    NotSubmitted,
    /// cbrun was stopped (signal) or died before the trial ended.
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The submission (or its absence) earned the 0.
    Implementation,
    /// cbrun, the host or the agent's installation failed; the 0 says
    /// nothing about the agent's work.
    Infrastructure,
}

/// Where a trial stands in the pipeline, for tables: did its work get a
/// verdict, and if not, why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PipelineStatus {
    /// The judge gave a verdict (reward 0 or 1).
    Evaluated,
    /// No valid submit marker (a solve timeout without one included).
    NotSubmitted,
    /// Submitted but refused for the rules before or by the judge (a
    /// banned import after the fix attempt, a workspace the judge would
    /// not copy or that shadows the test runner).
    Rejected,
    /// No verdict: infrastructure, interruption, or an error the agent
    /// caused that stopped the trial.
    Error,
}

/// The steps of a trial, in order; `failed_phase` names where a trial that
/// was not evaluated stopped, and a run's progress shows the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialPhase {
    Install,
    Setup,
    Solve,
    Scan,
    Fix,
    Judge,
    Record,
}

impl TrialPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            TrialPhase::Install => "install",
            TrialPhase::Setup => "setup",
            TrialPhase::Solve => "solve",
            TrialPhase::Scan => "scan",
            TrialPhase::Fix => "fix",
            TrialPhase::Judge => "judge",
            TrialPhase::Record => "record",
        }
    }

    pub fn parse(s: &str) -> Option<TrialPhase> {
        use TrialPhase::*;
        [Install, Setup, Solve, Scan, Fix, Judge, Record]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

/// Which run, configuration, repeat and attempt a trial belongs to, when
/// `cbrun run` ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPlace {
    pub run_id: String,
    pub config: String,
    /// 1-based.
    pub repeat: u32,
    /// 1-based (infrastructure retries and reruns of interrupted trials).
    pub attempt: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrialRecord {
    pub schema_version: u32,
    pub case_id: String,
    pub agent_spec_name: String,
    pub agent_spec_hash: Option<String>,
    pub model: Option<String>,
    pub cli_version: Option<String>,
    pub reward: u8,
    pub terminal_status: TerminalStatus,
    pub judge_error: Option<String>,
    /// The judged code tampered with the test run (the reward is 0).
    pub judge_tampered: bool,
    /// What gave the tampering away, one line each.
    pub tamper_findings: Vec<String>,
    pub error: Option<String>,
    pub failure_class: Option<FailureClass>,
    pub agent_exit_code: Option<i32>,
    pub judge_exit_code: Option<i32>,
    pub solve_seconds: f64,
    pub judge_seconds: f64,
    pub stalled: bool,
    pub submission: Option<serde_json::Value>,
    pub test_count: Option<u64>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub errors: Option<u64>,
    pub skipped: Option<u64>,
    pub failed_tests: Vec<String>,
    pub denylist_violation: Option<String>,
    pub denylist_fix_attempts: u32,
    pub env_keys: Vec<String>,
    /// Banned modules found in the root and hidden (solve, then judge).
    pub masked_imports: Vec<crate::guard::probe::MaskedImport>,
    /// Root filesystem / image identity per phase.
    pub images: BTreeMap<&'static str, serde_json::Value>,
    /// Limits as read back from the kernel, per phase.
    pub limits: BTreeMap<&'static str, serde_json::Value>,
    pub network: serde_json::Value,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub host: String,
    pub cbrun_version: &'static str,
    /// Files of this trial, relative to the trial folder; each exists.
    pub files: BTreeMap<&'static str, String>,
    pub warnings: Vec<String>,
    /// The run's id, when `cbrun run` ran this trial.
    pub run_id: Option<String>,
    /// The run's configuration name.
    pub config: Option<String>,
    /// 1-based repeat index within the run.
    pub repeat: Option<u32>,
    /// 1-based attempt (earlier attempts are kept beside this one).
    pub attempt: Option<u32>,
    /// The case's `runner.language_label`.
    pub language: Option<String>,
    /// The agent's install and setup scripts and its version probe; not
    /// part of `solve_seconds`.
    pub setup_seconds: f64,
    /// From the agent's start (after install and setup) to the first
    /// moment the submit marker held the valid line; null when it never did.
    pub time_to_submit_seconds: Option<f64>,
    pub pipeline_status: PipelineStatus,
    /// Where a trial that was not evaluated stopped.
    pub failed_phase: Option<TrialPhase>,
    /// SHA-256 of every case file used (public, source, hidden tests).
    pub provenance: Option<Provenance>,
    /// For a cacheable agent install: whether it came from the cache.
    pub install_cached: Option<bool>,
    /// What the agent's CLI reported (see [`crate::usage`]); null when it
    /// reports none.
    pub token_usage: Option<crate::usage::Tokens>,
    /// By the price table; null when a model has no price.
    pub cost_usd: Option<f64>,
    /// `pricing-table:<date>`, or null.
    pub cost_source: Option<String>,
    /// The CLI's own estimate, when it prints one.
    pub cli_cost_usd: Option<f64>,
    pub unpriced_models: Vec<String>,
    /// Usage per model, its format, the logs read, whether each ended
    /// with the CLI's summary.
    pub usage: Option<serde_json::Value>,
    /// Signs that the model API failed (see [`crate::agent::signals`]).
    pub infra_signals: crate::agent::signals::Signals,
    /// False when the 0 says nothing about the agent: it did not submit
    /// and the model API failed.
    pub run_valid: bool,
    /// `infra:<signal>` when `run_valid` is false.
    pub invalid_reason: Option<String>,
    /// The agent's session transcripts, relative to the trial folder.
    pub transcripts: Vec<String>,
}

impl TrialRecord {
    pub fn start(
        case_id: &str,
        agent_name: &str,
        agent_hash: Option<String>,
        model: Option<String>,
        started_at: String,
    ) -> Self {
        TrialRecord {
            schema_version: RECORD_SCHEMA_VERSION,
            case_id: case_id.to_owned(),
            agent_spec_name: agent_name.to_owned(),
            agent_spec_hash: agent_hash,
            model,
            cli_version: None,
            reward: 0,
            terminal_status: TerminalStatus::Interrupted,
            judge_error: None,
            judge_tampered: false,
            tamper_findings: Vec::new(),
            error: None,
            failure_class: None,
            agent_exit_code: None,
            judge_exit_code: None,
            solve_seconds: 0.0,
            judge_seconds: 0.0,
            stalled: false,
            submission: None,
            test_count: None,
            passed: None,
            failed: None,
            errors: None,
            skipped: None,
            failed_tests: Vec::new(),
            denylist_violation: None,
            denylist_fix_attempts: 0,
            env_keys: Vec::new(),
            masked_imports: Vec::new(),
            images: BTreeMap::new(),
            limits: BTreeMap::new(),
            network: serde_json::json!({"policy": "none"}),
            started_at,
            finished_at: None,
            host: hostname(),
            cbrun_version: env!("CARGO_PKG_VERSION"),
            files: BTreeMap::new(),
            warnings: Vec::new(),
            run_id: None,
            config: None,
            repeat: None,
            attempt: None,
            language: None,
            setup_seconds: 0.0,
            time_to_submit_seconds: None,
            // Until the trial ends, it is an error that stopped at its
            // first phase: what a killed cbrun leaves.
            pipeline_status: PipelineStatus::Error,
            failed_phase: Some(TrialPhase::Solve),
            provenance: None,
            install_cached: None,
            token_usage: None,
            cost_usd: None,
            cost_source: None,
            cli_cost_usd: None,
            unpriced_models: Vec::new(),
            usage: None,
            infra_signals: Default::default(),
            run_valid: true,
            invalid_reason: None,
            transcripts: Vec::new(),
        }
    }

    /// Marks the record as part of a run.
    pub fn place(&mut self, p: &RunPlace) {
        self.run_id = Some(p.run_id.clone());
        self.config = Some(p.config.clone());
        self.repeat = Some(p.repeat);
        self.attempt = Some(p.attempt);
    }

    /// Points the record at `rel` (relative to the trial folder) when it
    /// exists (as an entry of its own: a link is not followed).
    pub fn link(&mut self, dir: &TrialDir, key: &'static str, rel: &str) {
        if dir.has(rel) {
            self.files.insert(key, rel.to_owned());
        } else {
            self.files.remove(key);
        }
    }

    /// Replaces `trial.json` in `dir` atomically.
    pub fn save(&self, dir: &TrialDir) -> std::io::Result<()> {
        dir.write_json("trial.json", self)
    }
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}
