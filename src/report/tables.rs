//! The report's tables as data, computed from the loaded trials: what the
//! paper's tables hold (2: per configuration; 6: per case and
//! configuration; 7: by language; 8: hidden tests passed by failing
//! submissions), the repeat statistics it could not show, and one row per
//! trial. Renderers turn these into text; JSON and CSV serialise them.
//!
//! Which trials each number is over:
//!
//! - pass rates, solved cases, submissions and times: the valid trials
//!   (see [`super::outcome`]);
//! - mean time to submission: valid trials that submitted and whose
//!   record has the time (older records do not; they are counted as
//!   `unknown`, never as 0);
//! - cost and tokens: every trial with a record, valid or not (the money
//!   was spent either way); a trial without `cost_usd` is *unpriced*, and
//!   a sum over none is `null` ("n/a"), never 0.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::load::{Loaded, Trial};
use super::outcome::{Excluded, Failure, Outcome};
use super::record::{SubmitTime, Tokens};
use super::stats;

/// One trial, with the table's view of its record.
#[derive(Debug, Clone, Serialize)]
pub struct TrialRow {
    pub run_id: Option<String>,
    pub case: String,
    pub language: Option<String>,
    pub config: String,
    pub repeat: u32,
    /// `pass`, `fail`, `not_submitted`, `rejected`, `agent_error`,
    /// `infrastructure`, `interrupted`, `running`, `pending`, `unreadable`.
    pub status: &'static str,
    /// Counted in pass rates.
    pub valid: bool,
    pub reward: Option<u8>,
    pub submitted: Option<bool>,
    pub tests_passed: Option<u64>,
    pub tests_total: Option<u64>,
    pub time_to_submit_s: Option<f64>,
    pub setup_s: Option<f64>,
    pub solve_s: Option<f64>,
    pub judge_s: Option<f64>,
    pub cost_usd: Option<f64>,
    pub cost_source: Option<String>,
    pub tokens: Option<Tokens>,
    pub earlier_attempts: u32,
    #[serde(serialize_with = "super::load::quoted")]
    pub path: PathBuf,
}

/// Trials left out of pass rates, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExcludedCounts {
    pub infrastructure: usize,
    pub interrupted: usize,
    pub running: usize,
    pub pending: usize,
    pub unreadable: usize,
}

impl ExcludedCounts {
    fn add(&mut self, e: Excluded) {
        match e {
            Excluded::Infrastructure => self.infrastructure += 1,
            Excluded::Interrupted => self.interrupted += 1,
            Excluded::Running => self.running += 1,
            Excluded::Pending => self.pending += 1,
            Excluded::Unreadable => self.unreadable += 1,
        }
    }

    /// Trials that ended without a usable verdict (not the ones yet to run).
    pub fn invalid(&self) -> usize {
        self.infrastructure + self.interrupted + self.unreadable
    }
}

/// A sum of costs that knows what it does not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CostSum {
    /// Sum over the priced trials; `None` when none is priced.
    pub total_usd: Option<f64>,
    pub priced: usize,
    pub unpriced: usize,
}

impl CostSum {
    fn add(&mut self, cost: Option<f64>) {
        match cost {
            Some(c) => {
                self.total_usd = Some(self.total_usd.unwrap_or(0.0) + c);
                self.priced += 1;
            }
            None => self.unpriced += 1,
        }
    }
}

/// Token sums over the trials that reported usage; a kind no trial
/// reported stays `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TokenSum {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    pub cache_write: Option<u64>,
    pub reasoning: Option<u64>,
    pub reported: usize,
    pub unreported: usize,
}

impl TokenSum {
    fn add(&mut self, t: Option<&Tokens>) {
        let Some(t) = t else {
            self.unreported += 1;
            return;
        };
        self.reported += 1;
        let add = |sum: &mut Option<u64>, x: Option<u64>| {
            if let Some(x) = x {
                *sum = Some(sum.unwrap_or(0).saturating_add(x));
            }
        };
        add(&mut self.input, t.input);
        add(&mut self.output, t.output);
        add(&mut self.cache_read, t.cache_read);
        add(&mut self.cache_write, t.cache_write);
        add(&mut self.reasoning, t.reasoning);
    }
}

/// A mean over the trials whose value is known, with how many were not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct MeanTime {
    pub mean_s: Option<f64>,
    pub known: usize,
    pub unknown: usize,
}

/// Table 2: one row per configuration.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigRow {
    pub config: String,
    pub agent: Option<String>,
    pub model: Option<String>,
    /// Cases this configuration has trials for (of any state).
    pub cases: usize,
    /// Cases with at least one passing trial.
    pub solved: usize,
    pub trials: usize,
    pub valid: usize,
    pub passed: usize,
    /// passed / valid.
    pub pass_rate: Option<f64>,
    /// Wilson 95% interval of the pass rate.
    pub pass_rate_ci: Option<[f64; 2]>,
    /// Valid trials that submitted.
    pub submitted: usize,
    pub time_to_submit: MeanTime,
    pub cost: CostSum,
    pub tokens: TokenSum,
    pub excluded: ExcludedCounts,
}

/// One repeat's result in a table 6 cell.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatResult {
    pub run_id: Option<String>,
    pub repeat: u32,
    pub status: &'static str,
    pub tests_passed: Option<u64>,
    pub tests_total: Option<u64>,
}

/// Table 6: one row per case and configuration.
#[derive(Debug, Clone, Serialize)]
pub struct CaseConfigRow {
    pub case: String,
    pub language: Option<String>,
    pub config: String,
    /// The paper's cell: `Pass`, `passed/total`, or what happened, one per
    /// repeat, joined by `, `.
    pub result: String,
    pub repeats: Vec<RepeatResult>,
    pub valid: usize,
    pub passed: usize,
    /// Mean over valid submitted repeats with a known time.
    pub time_to_submit: MeanTime,
    pub cost: CostSum,
}

/// Table 7: one row per language and configuration.
#[derive(Debug, Clone, Serialize)]
pub struct LanguageRow {
    pub language: String,
    pub config: String,
    pub cases: usize,
    pub solved: usize,
    pub valid: usize,
    pub passed: usize,
    pub pass_rate: Option<f64>,
}

/// Table 8, per configuration: failing submissions the judge ran, and the
/// hidden tests they passed.
#[derive(Debug, Clone, Serialize)]
pub struct PartialRow {
    pub config: String,
    /// Valid trials the judge ran that did not pass.
    pub failing: usize,
    /// Of those, ones with test counts and at least one test.
    pub with_counts: usize,
    pub tests_passed: u64,
    pub tests_total: u64,
    /// tests_passed / tests_total.
    pub share: Option<f64>,
    /// The mean of each submission's passed/total.
    pub mean_share: Option<f64>,
}

/// Table 8, per failing submission.
#[derive(Debug, Clone, Serialize)]
pub struct PartialSubmission {
    pub case: String,
    pub config: String,
    pub run_id: Option<String>,
    pub repeat: u32,
    pub tests_passed: u64,
    pub tests_total: u64,
    pub share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Table8 {
    pub by_config: Vec<PartialRow>,
    pub submissions: Vec<PartialSubmission>,
}

/// A case's valid repeats and passes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub valid: u64,
    pub passed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseTally {
    pub case: String,
    #[serde(flatten)]
    pub tally: Tally,
}

/// pass@k and pass^k of one configuration at one k, averaged over the
/// cases with at least k valid repeats.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatRow {
    pub config: String,
    pub k: u64,
    pub cases: usize,
    pub pass_at_k: Option<f64>,
    pub pass_at_k_ci: Option<[f64; 2]>,
    pub pass_hat_k: Option<f64>,
    pub pass_hat_k_ci: Option<[f64; 2]>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RepeatStats {
    pub config: String,
    pub per_case: Vec<CaseTally>,
    pub rows: Vec<RepeatRow>,
}

/// A trial with the catalogue's facts about it.
pub struct View<'a> {
    pub trial: &'a Trial,
    pub outcome: Outcome,
    pub run_id: Option<&'a str>,
    pub language: Option<&'a str>,
}

pub fn views(l: &Loaded) -> Vec<View<'_>> {
    let lang: BTreeMap<&str, Option<&str>> = l
        .cases
        .iter()
        .map(|(c, lang)| (c.as_str(), lang.as_deref()))
        .collect();
    let case_pos: BTreeMap<&str, usize> = l
        .cases
        .iter()
        .enumerate()
        .map(|(i, (c, _))| (c.as_str(), i))
        .collect();
    let config_pos: BTreeMap<&str, usize> = l
        .configs
        .iter()
        .enumerate()
        .map(|(i, (c, _))| (c.as_str(), i))
        .collect();
    let mut v: Vec<View> = l
        .trials
        .iter()
        .map(|t| View {
            trial: t,
            outcome: t.outcome(),
            run_id: l.runs[t.run].run_id.as_deref(),
            language: lang.get(t.case.as_str()).copied().flatten(),
        })
        .collect();
    v.sort_by_key(|x| {
        (
            case_pos.get(x.trial.case.as_str()).copied(),
            config_pos.get(x.trial.config.as_str()).copied(),
            x.trial.run,
            x.trial.repeat,
        )
    });
    v
}

pub fn status_key(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "pass",
        Outcome::Failed(Failure::Judged) => "fail",
        Outcome::Failed(Failure::NotSubmitted) => "not_submitted",
        Outcome::Failed(Failure::Rejected) => "rejected",
        Outcome::Failed(Failure::AgentError) => "agent_error",
        Outcome::Excluded(Excluded::Infrastructure) => "infrastructure",
        Outcome::Excluded(Excluded::Interrupted) => "interrupted",
        Outcome::Excluded(Excluded::Running) => "running",
        Outcome::Excluded(Excluded::Pending) => "pending",
        Outcome::Excluded(Excluded::Unreadable) => "unreadable",
    }
}

/// The time to submission of a valid trial that submitted, when known.
fn submit_time(v: &View) -> Option<Option<f64>> {
    let r = v.trial.record()?;
    if !v.outcome.is_valid() || !r.was_submitted() {
        return None;
    }
    Some(match r.time_to_submit {
        SubmitTime::At(s) => Some(s),
        SubmitTime::Unknown | SubmitTime::Never => None,
    })
}

fn mean_time<'a>(vs: impl Iterator<Item = &'a View<'a>>) -> MeanTime {
    let mut times = Vec::new();
    let mut unknown = 0;
    for v in vs {
        match submit_time(v) {
            Some(Some(t)) => times.push(t),
            Some(None) => unknown += 1,
            None => {}
        }
    }
    MeanTime {
        mean_s: stats::mean(&times),
        known: times.len(),
        unknown,
    }
}

fn cost<'a>(vs: impl Iterator<Item = &'a View<'a>>) -> CostSum {
    let mut c = CostSum::default();
    for v in vs {
        if let Some(r) = v.trial.record() {
            c.add(r.cost_usd);
        }
    }
    c
}

pub fn trial_rows(vs: &[View]) -> Vec<TrialRow> {
    vs.iter()
        .map(|v| {
            let r = v.trial.record();
            TrialRow {
                run_id: v.run_id.map(str::to_owned),
                case: v.trial.case.clone(),
                language: v.language.map(str::to_owned),
                config: v.trial.config.clone(),
                repeat: v.trial.repeat,
                status: status_key(v.outcome),
                valid: v.outcome.is_valid(),
                reward: r.map(|r| r.reward),
                submitted: r.map(|r| r.was_submitted()),
                tests_passed: r.and_then(|r| r.tests).map(|t| t.passed),
                tests_total: r.and_then(|r| r.tests).map(|t| t.total),
                time_to_submit_s: r.and_then(|r| match r.time_to_submit {
                    SubmitTime::At(s) => Some(s),
                    _ => None,
                }),
                setup_s: r.and_then(|r| r.setup_seconds),
                solve_s: r.and_then(|r| r.solve_seconds),
                judge_s: r.and_then(|r| r.judge_seconds),
                cost_usd: r.and_then(|r| r.cost_usd),
                cost_source: r.and_then(|r| r.cost_source.clone()),
                tokens: r.and_then(|r| r.tokens),
                earlier_attempts: v.trial.earlier_attempts,
                path: v.trial.path.clone(),
            }
        })
        .collect()
}

/// Valid repeats and passes of each case of `config`, cases in order.
pub fn tallies(vs: &[View], config: &str) -> Vec<CaseTally> {
    let mut out: Vec<CaseTally> = Vec::new();
    for v in vs.iter().filter(|v| v.trial.config == config) {
        let i = match out.iter().position(|c| c.case == v.trial.case) {
            Some(i) => i,
            None => {
                out.push(CaseTally {
                    case: v.trial.case.clone(),
                    tally: Tally::default(),
                });
                out.len() - 1
            }
        };
        if v.outcome.is_valid() {
            out[i].tally.valid += 1;
            out[i].tally.passed += u64::from(v.outcome.passed());
        }
    }
    out
}

pub fn table2(l: &Loaded, vs: &[View]) -> Vec<ConfigRow> {
    l.configs
        .iter()
        .map(|(name, def)| {
            let mine: Vec<&View> = vs.iter().filter(|v| &v.trial.config == name).collect();
            let tallies = tallies(vs, name);
            let valid = mine.iter().filter(|v| v.outcome.is_valid()).count();
            let passed = mine.iter().filter(|v| v.outcome.passed()).count();
            let mut excluded = ExcludedCounts::default();
            let mut tokens = TokenSum::default();
            for v in &mine {
                if let Outcome::Excluded(e) = v.outcome {
                    excluded.add(e);
                }
                if let Some(r) = v.trial.record() {
                    tokens.add(r.tokens.as_ref());
                }
            }
            let first = mine.iter().find_map(|v| v.trial.record());
            ConfigRow {
                config: name.clone(),
                agent: def
                    .as_ref()
                    .and_then(|d| d.agent.clone())
                    .or_else(|| first.map(|r| r.agent.clone()).filter(|a| !a.is_empty())),
                model: def
                    .as_ref()
                    .and_then(|d| d.model.clone())
                    .or_else(|| first.and_then(|r| r.model.clone())),
                cases: tallies.len(),
                solved: tallies.iter().filter(|c| c.tally.passed > 0).count(),
                trials: mine.len(),
                valid,
                passed,
                pass_rate: (valid > 0).then(|| passed as f64 / valid as f64),
                pass_rate_ci: stats::wilson(passed as u64, valid as u64, stats::Z95)
                    .map(|(a, b)| [a, b]),
                submitted: mine
                    .iter()
                    .filter(|v| {
                        v.outcome.is_valid() && v.trial.record().is_some_and(|r| r.was_submitted())
                    })
                    .count(),
                time_to_submit: mean_time(mine.iter().copied()),
                cost: cost(mine.iter().copied()),
                tokens,
                excluded,
            }
        })
        .collect()
}

/// The paper's cell for one trial.
pub fn cell(v: &View) -> String {
    match v.outcome {
        Outcome::Passed => "Pass".into(),
        Outcome::Failed(Failure::Judged) => match v.trial.record().and_then(|r| r.tests) {
            Some(t) => format!("{}/{}", t.passed, t.total),
            None => "fail".into(),
        },
        Outcome::Failed(f) => f.label().into(),
        Outcome::Excluded(e) => e.label().into(),
    }
}

pub fn table6(l: &Loaded, vs: &[View]) -> Vec<CaseConfigRow> {
    let mut out = Vec::new();
    for (case, language) in &l.cases {
        for (config, _) in &l.configs {
            let mine: Vec<&View> = vs
                .iter()
                .filter(|v| &v.trial.case == case && &v.trial.config == config)
                .collect();
            if mine.is_empty() {
                continue;
            }
            out.push(CaseConfigRow {
                case: case.clone(),
                language: language.clone(),
                config: config.clone(),
                result: mine.iter().map(|v| cell(v)).collect::<Vec<_>>().join(", "),
                repeats: mine
                    .iter()
                    .map(|v| RepeatResult {
                        run_id: v.run_id.map(str::to_owned),
                        repeat: v.trial.repeat,
                        status: status_key(v.outcome),
                        tests_passed: v.trial.record().and_then(|r| r.tests).map(|t| t.passed),
                        tests_total: v.trial.record().and_then(|r| r.tests).map(|t| t.total),
                    })
                    .collect(),
                valid: mine.iter().filter(|v| v.outcome.is_valid()).count(),
                passed: mine.iter().filter(|v| v.outcome.passed()).count(),
                time_to_submit: mean_time(mine.iter().copied()),
                cost: cost(mine.iter().copied()),
            });
        }
    }
    out
}

/// The label for cases without a language.
pub const NO_LANGUAGE: &str = "(unknown)";

pub fn table7(l: &Loaded, vs: &[View]) -> Vec<LanguageRow> {
    let mut languages: Vec<String> = l
        .cases
        .iter()
        .map(|(_, lang)| lang.clone().unwrap_or_else(|| NO_LANGUAGE.into()))
        .collect();
    languages.sort();
    languages.dedup();
    let mut out = Vec::new();
    for lang in &languages {
        for (config, _) in &l.configs {
            let mine: Vec<&View> = vs
                .iter()
                .filter(|v| &v.trial.config == config && v.language.unwrap_or(NO_LANGUAGE) == lang)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let mut per_case: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
            for v in &mine {
                let e = per_case.entry(v.trial.case.as_str()).or_default();
                e.0 += usize::from(v.outcome.is_valid());
                e.1 += usize::from(v.outcome.passed());
            }
            let valid = mine.iter().filter(|v| v.outcome.is_valid()).count();
            let passed = mine.iter().filter(|v| v.outcome.passed()).count();
            out.push(LanguageRow {
                language: lang.clone(),
                config: config.clone(),
                cases: per_case.len(),
                solved: per_case.values().filter(|(_, p)| *p > 0).count(),
                valid,
                passed,
                pass_rate: (valid > 0).then(|| passed as f64 / valid as f64),
            });
        }
    }
    out
}

pub fn table8(l: &Loaded, vs: &[View]) -> Table8 {
    let mut by_config = Vec::new();
    let mut submissions = Vec::new();
    for (config, _) in &l.configs {
        let failing: Vec<&View> = vs
            .iter()
            .filter(|v| {
                &v.trial.config == config
                    && v.outcome == Outcome::Failed(Failure::Judged)
                    && v.trial.record().is_some_and(|r| r.was_judged())
            })
            .collect();
        let mut shares = Vec::new();
        let (mut passed, mut total) = (0u64, 0u64);
        for v in &failing {
            let Some(t) = v
                .trial
                .record()
                .and_then(|r| r.tests)
                .filter(|t| t.total > 0)
            else {
                continue;
            };
            passed += t.passed;
            total += t.total;
            let share = t.passed as f64 / t.total as f64;
            shares.push(share);
            submissions.push(PartialSubmission {
                case: v.trial.case.clone(),
                config: config.clone(),
                run_id: v.run_id.map(str::to_owned),
                repeat: v.trial.repeat,
                tests_passed: t.passed,
                tests_total: t.total,
                share,
            });
        }
        by_config.push(PartialRow {
            config: config.clone(),
            failing: failing.len(),
            with_counts: shares.len(),
            tests_passed: passed,
            tests_total: total,
            share: (total > 0).then(|| passed as f64 / total as f64),
            mean_share: stats::mean(&shares),
        });
    }
    Table8 {
        by_config,
        submissions,
    }
}

pub fn repeats(l: &Loaded, vs: &[View]) -> Vec<RepeatStats> {
    l.configs
        .iter()
        .map(|(config, _)| {
            let per_case = tallies(vs, config);
            let max_n = per_case.iter().map(|c| c.tally.valid).max().unwrap_or(0);
            let rows = (1..=max_n)
                .map(|k| {
                    let usable: Vec<Tally> = per_case
                        .iter()
                        .map(|c| c.tally)
                        .filter(|t| t.valid >= k)
                        .collect();
                    let at: Vec<f64> = usable
                        .iter()
                        .filter_map(|t| stats::pass_at_k(t.valid, t.passed, k))
                        .collect();
                    let hat: Vec<f64> = usable
                        .iter()
                        .filter_map(|t| stats::pass_hat_k(t.valid, t.passed, k))
                        .collect();
                    RepeatRow {
                        config: config.clone(),
                        k,
                        cases: usable.len(),
                        pass_at_k: stats::mean(&at),
                        pass_at_k_ci: stats::bootstrap_ci(&at).map(|(a, b)| [a, b]),
                        pass_hat_k: stats::mean(&hat),
                        pass_hat_k_ci: stats::bootstrap_ci(&hat).map(|(a, b)| [a, b]),
                    }
                })
                .collect();
            RepeatStats {
                config: config.clone(),
                per_case,
                rows,
            }
        })
        .collect()
}
