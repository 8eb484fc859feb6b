//! `trial.json`: the record a benchmark author puts in a table. It is
//! written first as `interrupted` (so a cbrun that dies mid-trial leaves
//! an honest record) and replaced atomically at the end.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::trial::layout::TrialDir;

pub const RECORD_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalStatus {
    Completed,
    Timeout,
    Error,
    NotSubmitted,
    /// cbrun was stopped (signal) or died before the trial ended.
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The submission (or its absence) earned the 0.
    Implementation,
    /// cbrun, the host or the agent's installation failed; the 0 says
    /// nothing about the agent's work.
    Infrastructure,
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
        }
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
