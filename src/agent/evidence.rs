//! What an agent's run left behind, read after it ended: its token usage
//! and cost, infrastructure signals, and its session transcripts.
//!
//! Everything here is read from files the sandbox wrote (the agent logs
//! cbrun captured, the home) or from cbrun's own connection log, through
//! the trial folder's [`Dir`](crate::sys::dir::Dir)s, capped, never
//! following a link.

use serde::Serialize;

use super::signals::{self, Signals};
use super::spec::AgentSpec;
use super::transcripts;
use crate::net::log::ConnRecord;
use crate::trial::layout::{read_sandbox_log, TrialDir};
use crate::usage::{price, Cost, PriceTable, Usage};

/// Bytes of the connection log read (it is cbrun's own, but the sandbox
/// decides how much goes into it).
pub const MAX_NET_LOG: u64 = 64 << 20;

/// The facts of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Evidence {
    pub usage: Option<Usage>,
    pub cost: Option<Cost>,
    pub signals: Signals,
    /// Relative to the trial folder (`home/...`).
    pub transcripts: Vec<String>,
    /// The transcript search hit one of its bounds.
    pub transcripts_truncated: bool,
}

impl Evidence {
    /// Whether the model answered at all: some output tokens were counted.
    pub fn model_reached(&self) -> bool {
        self.usage
            .as_ref()
            .and_then(|u| u.total.output)
            .is_some_and(|o| o > 0)
    }
}

/// What [`gather`] needs to know about the run.
pub struct RunInfo<'a> {
    pub spec: &'a AgentSpec,
    /// The agent logs in `logs/cbrun/` that exist (`agent.log`, then the
    /// fix attempt's).
    pub logs: &'a [&'a str],
    /// Where the agent's part of the connection log starts (install and
    /// setup came before); `None` without egress.
    pub net_from: Option<u64>,
    /// `*_BASE_URL` variables the agent got.
    pub base_urls: &'a [(String, String)],
    /// The trial's model, for a run whose output names none.
    pub model: Option<&'a str>,
    /// `None`: no cost is computed.
    pub pricing: Option<&'a PriceTable>,
}

pub fn gather(dir: &TrialDir, run: &RunInfo<'_>) -> Evidence {
    let mut ev = Evidence::default();
    let spec = run.spec;
    for name in run.logs {
        let rel = format!("logs/cbrun/{name}");
        if !dir.has(&rel) {
            continue;
        }
        let (text, _) = read_sandbox_log(dir, &rel);
        if let Some(f) = spec.usage_format {
            let u = f.parse(&text, &rel);
            match &mut ev.usage {
                Some(all) => all.merge(u),
                None => ev.usage = Some(u),
            }
        }
        ev.signals
            .merge(signals::from_agent_log(&text, spec.usage_format));
    }
    if let (Some(u), Some(table)) = (&ev.usage, run.pricing) {
        let model = run.model.map(|m| spec.model_for_agent(m));
        ev.cost = Some(price(u, model, table));
    }
    if let Some(from) = run.net_from {
        let hosts = signals::model_hosts(&spec.api_hosts, run.base_urls);
        let recs = network_records(dir, from);
        ev.signals.merge(signals::from_network(&recs, &hosts));
    }
    if !spec.transcripts.is_empty() {
        if let Ok(home) = dir.root_dir().open_dir("home") {
            let (found, cut) = transcripts::find(&home.sandbox_writable(), &spec.transcripts);
            ev.transcripts = found
                .iter()
                .map(|p| format!("home/{}", p.display()))
                .collect();
            ev.transcripts_truncated = cut;
        }
    }
    ev
}

/// The connection log's records from byte `from` on (a torn last line
/// is skipped).
fn network_records(dir: &TrialDir, from: u64) -> Vec<ConnRecord> {
    let Ok(d) = dir.cbrun_dir() else {
        return Vec::new();
    };
    let Ok(c) = d.read_capped("network.jsonl", from.saturating_add(MAX_NET_LOG)) else {
        return Vec::new();
    };
    let start = usize::try_from(from)
        .unwrap_or(usize::MAX)
        .min(c.bytes.len());
    String::from_utf8_lossy(&c.bytes[start..])
        .lines()
        .filter_map(|l| serde_json::from_str::<ConnRecord>(l).ok())
        .collect()
}

/// The size of the connection log now: where the next phase's records
/// start.
pub fn network_mark(dir: &TrialDir) -> u64 {
    dir.cbrun_dir()
        .ok()
        .and_then(|d| d.entry("network.jsonl").ok().flatten())
        .map(|st| st.st_size.max(0) as u64)
        .unwrap_or(0)
}
