//! `cbrun report`: the paper's tables (and what a single run could not
//! show) from any run folders, in the terminal, Markdown, CSV, JSON or one
//! self-contained HTML page.
//!
//! - [`load`]: reading run folders (hostile ones included) into trials;
//!   [`record`] and [`plan`] read their files;
//! - [`outcome`]: which trials a pass rate is over (the rule);
//! - [`tables`]: tables 2, 6, 7 and 8, repeats, one row per trial;
//! - [`stats`]: Wilson intervals, pass@k and pass^k, the bootstrap, the
//!   sign test; [`compare`]: `--baseline`;
//! - [`render`]: the output formats; [`chart`]: the HTML page's charts.

pub mod chart;
pub mod compare;
pub mod load;
pub mod outcome;
pub mod plan;
pub mod record;
pub mod render;
pub mod stats;
pub mod tables;

use std::path::PathBuf;

use serde::Serialize;

pub use load::{LoadError, Loaded, Problem, RunInfo};

/// The rule, as the report states it.
pub const RULE: &str = "pass rates are over valid trials: those with a readable record that is \
neither interrupted nor an infrastructure failure; not submitted, rejected and agent errors count \
as failures; infrastructure failures, interrupted, running, pending and unreadable trials are \
counted in their own columns and left out";

/// How intervals are computed, as the report states it.
pub const INTERVALS: &str = "pass rate: Wilson 95% over trials; pass@k, pass^k and baseline \
differences: percentile bootstrap 95% over cases (2000 resamples, fixed seed); baseline: exact \
two-sided sign test over changed cases";

/// What `cbrun report` was asked for.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub runs: Vec<PathBuf>,
    pub baseline: Option<Vec<PathBuf>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseInfo {
    pub id: String,
    pub language: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConfigInfo {
    pub name: String,
    pub agent: Option<String>,
    pub model: Option<String>,
    pub spec_sha256: Option<String>,
}

/// The whole report; `--format json` prints it as it is.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `cbrun-report/1`.
    pub format: &'static str,
    pub rule: &'static str,
    pub intervals: &'static str,
    pub runs: Vec<RunInfo>,
    pub cases: Vec<CaseInfo>,
    pub configs: Vec<ConfigInfo>,
    pub table2: Vec<tables::ConfigRow>,
    pub table6: Vec<tables::CaseConfigRow>,
    pub table7: Vec<tables::LanguageRow>,
    pub table8: tables::Table8,
    pub repeats: Vec<tables::RepeatStats>,
    pub comparison: Option<compare::Comparison>,
    pub trials: Vec<tables::TrialRow>,
    /// Trials with a record but no `cost_usd`.
    pub unpriced_trials: usize,
    /// What could not be read (records, plans, entries), baseline included.
    pub problems: Vec<Problem>,
}

pub const FORMAT: &str = "cbrun-report/1";

/// Reads the folders and computes every table.
pub fn build(opts: &ReportOptions) -> Result<Report, LoadError> {
    let cur = load::load(&opts.runs)?;
    let base = match &opts.baseline {
        Some(dirs) => Some(load::load(dirs)?),
        None => None,
    };
    Ok(from_loaded(&cur, base.as_ref()))
}

/// Every table from loaded trials (and a baseline).
pub fn from_loaded(cur: &Loaded, base: Option<&Loaded>) -> Report {
    let views = tables::views(cur);
    let trials = tables::trial_rows(&views);
    let comparison = base.map(|b| {
        let bv = tables::views(b);
        compare::compare(cur, &views, b, &bv)
    });
    let mut problems = cur.problems.clone();
    if let Some(b) = base {
        problems.extend(b.problems.iter().cloned());
    }
    Report {
        format: FORMAT,
        rule: RULE,
        intervals: INTERVALS,
        runs: cur.runs.clone(),
        cases: cur
            .cases
            .iter()
            .map(|(id, language)| CaseInfo {
                id: id.clone(),
                language: language.clone(),
            })
            .collect(),
        configs: cur
            .configs
            .iter()
            .map(|(name, def)| ConfigInfo {
                name: name.clone(),
                agent: def.as_ref().and_then(|d| d.agent.clone()),
                model: def.as_ref().and_then(|d| d.model.clone()),
                spec_sha256: def.as_ref().and_then(|d| d.spec_sha256.clone()),
            })
            .collect(),
        table2: tables::table2(cur, &views),
        table6: tables::table6(cur, &views),
        table7: tables::table7(cur, &views),
        table8: tables::table8(cur, &views),
        repeats: tables::repeats(cur, &views),
        comparison,
        unpriced_trials: trials
            .iter()
            .filter(|t| t.reward.is_some() && t.cost_usd.is_none())
            .count(),
        trials,
        problems,
    }
}
