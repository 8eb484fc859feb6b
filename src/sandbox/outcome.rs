//! The record of one sandbox run: how the command ended, what it used, and
//! which isolation and limits were really in force.

use std::path::PathBuf;

use serde::Serialize;

use super::cgroups::Readback;
use super::config::NetworkPolicy;
use super::idmap::IdPlan;
use super::seccomp::SeccompMode;

/// cbrun's exit codes besides the command's own (documented in the README).
pub mod exit {
    /// The command ran past `--timeout` and was killed.
    pub const TIMEOUT: i32 = 124;
    /// cbrun itself failed: bad input, setup error, a limit that
    /// `--require-limits` demanded but the host cannot enforce.
    pub const CBRUN_ERROR: i32 = 125;
    /// The command exists but could not be executed.
    pub const NOT_EXECUTABLE: i32 = 126;
    /// The command was not found inside the sandbox.
    pub const NOT_FOUND: i32 = 127;
}

#[derive(Debug, Clone, Serialize)]
pub struct LimitState {
    /// What was asked for (None: nothing asked).
    pub requested: Option<serde_json::Value>,
    /// What the kernel reports now, read back after creation.
    pub enforced: Option<serde_json::Value>,
    /// "cgroup v1", "cgroup v2", "rlimit", or "none".
    pub via: String,
    /// Why it is not enforced, when it is not.
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    pub cgroup: Option<PathBuf>,
    pub memory: LimitState,
    pub pids: LimitState,
    pub cpus: LimitState,
    pub nofile: u64,
    pub nproc: u64,
    pub core: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Isolation {
    pub namespaces: Vec<&'static str>,
    pub network: NetworkPolicy,
    pub loopback_up: bool,
    pub rootfs: String,
    pub root_readonly: bool,
    pub seccomp: SeccompMode,
    pub seccomp_rules: Vec<String>,
    pub capabilities: &'static str,
    pub no_new_privs: bool,
    pub id_mapping: IdPlan,
    pub dies_with_cbrun: bool,
    /// cbrun's reaping init is pid 1 and the command pid 2 (`--init`).
    pub init: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub id: String,
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// cbrun was asked to stop (SIGINT/SIGTERM/SIGHUP) and killed the sandbox.
    pub interrupted: bool,
    /// A caller's watchdog found the sandbox stalled and cbrun killed it.
    pub stalled: bool,
    pub oom_killed: bool,
    pub pids_limit_hit: bool,
    pub wall_ms: u64,
    pub setup_ms: u64,
    pub peak_memory_bytes: Option<u64>,
    pub isolation: Isolation,
    pub limits: Limits,
    pub warnings: Vec<String>,
    /// The status cbrun exits with.
    pub cbrun_exit: i32,
}

impl Limits {
    pub fn from_readback(
        cgroup: Option<PathBuf>,
        via: &str,
        req: &super::config::Limits,
        rb: Option<&Readback>,
        why_not: Option<&str>,
        nofile: u64,
        nproc: u64,
    ) -> Self {
        let state = |requested: Option<serde_json::Value>, enforced: Option<serde_json::Value>| {
            let note = match (&requested, &enforced) {
                (Some(_), None) => {
                    Some(why_not.unwrap_or("the kernel did not report it").to_owned())
                }
                _ => None,
            };
            LimitState {
                via: if enforced.is_some() {
                    via.to_owned()
                } else {
                    "none".to_owned()
                },
                requested,
                enforced,
                note,
            }
        };
        let j = |v: Option<u64>| v.map(serde_json::Value::from);
        let jf = |v: Option<f64>| v.map(serde_json::Value::from);
        Limits {
            cgroup,
            memory: state(
                j(req.memory.map(|m| m.0)),
                rb.and_then(|r| j(r.memory_bytes)),
            ),
            pids: state(j(req.pids), rb.and_then(|r| j(r.pids))),
            cpus: state(jf(req.cpus.map(|c| c.0)), rb.and_then(|r| jf(r.cpus))),
            nofile,
            nproc,
            core: 0,
        }
    }

    /// Requested limits that are not in force, as one line each.
    pub fn missing(&self) -> Vec<String> {
        [
            ("memory", &self.memory),
            ("pids", &self.pids),
            ("cpus", &self.cpus),
        ]
        .iter()
        .filter(|(_, s)| s.requested.is_some() && s.enforced.is_none())
        .map(|(n, s)| {
            format!(
                "{n} limit not enforced: {}",
                s.note.as_deref().unwrap_or("unknown")
            )
        })
        .collect()
    }
}
