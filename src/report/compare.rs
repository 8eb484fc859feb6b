//! `--baseline`: this run against another, case by case.
//!
//! Configurations are paired by name; when no name is shared and each side
//! has exactly one configuration, those two are paired. For each case with
//! valid trials on both sides, its pass rate (passes over valid repeats;
//! 0 or 1 with one repeat) is compared: higher now is *gained*, lower is
//! *lost*, equal is *unchanged*. Cases without valid trials on one side
//! are *not comparable* and listed as such.
//!
//! The test: the exact two-sided sign test over the changed cases. Cases
//! are the paired units (each side ran the same case), the outcome per
//! case is at best binary or a small fraction, and nothing is assumed
//! about its distribution, so a count of which way each case moved is
//! what the data supports; with one repeat per case this is exactly
//! McNemar's test. The mean difference of per-case rates gets a bootstrap
//! interval over the comparable cases.

use serde::Serialize;

use super::load::{Loaded, RunInfo};
use super::stats;
use super::tables::{tallies, Tally, View};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Gained,
    Lost,
    Unchanged,
    NotComparable,
}

impl Change {
    pub fn label(self) -> &'static str {
        match self {
            Change::Gained => "gained",
            Change::Lost => "lost",
            Change::Unchanged => "unchanged",
            Change::NotComparable => "not comparable",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseChange {
    pub case: String,
    pub current: Tally,
    pub baseline: Tally,
    pub change: Change,
}

#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    pub config: String,
    pub baseline_config: String,
    pub gained: usize,
    pub lost: usize,
    pub unchanged: usize,
    pub not_comparable: usize,
    /// Mean per-case pass rate over the comparable cases.
    pub current_rate: Option<f64>,
    pub baseline_rate: Option<f64>,
    /// current_rate - baseline_rate.
    pub difference: Option<f64>,
    /// Bootstrap 95% interval of the difference, over cases.
    pub difference_ci: Option<[f64; 2]>,
    /// Exact two-sided sign test over gained and lost cases.
    pub sign_test_p: Option<f64>,
    pub cases: Vec<CaseChange>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub baseline_runs: Vec<RunInfo>,
    pub pairs: Vec<Pair>,
    /// Configurations with no partner on the other side.
    pub unpaired_current: Vec<String>,
    pub unpaired_baseline: Vec<String>,
}

fn rate(t: Tally) -> f64 {
    t.passed as f64 / t.valid as f64
}

pub fn compare(cur: &Loaded, cur_views: &[View], base: &Loaded, base_views: &[View]) -> Comparison {
    let names = |l: &Loaded| l.configs.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    let (mine, theirs) = (names(cur), names(base));
    let mut pairs: Vec<(String, String)> = mine
        .iter()
        .filter(|n| theirs.contains(n))
        .map(|n| (n.clone(), n.clone()))
        .collect();
    if pairs.is_empty() && mine.len() == 1 && theirs.len() == 1 {
        pairs.push((mine[0].clone(), theirs[0].clone()));
    }
    let unpaired_current = mine
        .iter()
        .filter(|n| !pairs.iter().any(|(a, _)| a == *n))
        .cloned()
        .collect();
    let unpaired_baseline = theirs
        .iter()
        .filter(|n| !pairs.iter().any(|(_, b)| b == *n))
        .cloned()
        .collect();
    let pairs = pairs
        .into_iter()
        .map(|(a, b)| pair(cur, cur_views, &a, base, base_views, &b))
        .collect();
    Comparison {
        baseline_runs: base.runs.clone(),
        pairs,
        unpaired_current,
        unpaired_baseline,
    }
}

fn pair(
    cur: &Loaded,
    cur_views: &[View],
    config: &str,
    base: &Loaded,
    base_views: &[View],
    baseline_config: &str,
) -> Pair {
    let now = tallies(cur_views, config);
    let then = tallies(base_views, baseline_config);
    // Cases in this run's order, then the baseline's.
    let mut order: Vec<&str> = cur.cases.iter().map(|(c, _)| c.as_str()).collect();
    for (c, _) in &base.cases {
        if !order.contains(&c.as_str()) {
            order.push(c);
        }
    }
    let find = |ts: &[super::tables::CaseTally], c: &str| {
        ts.iter()
            .find(|t| t.case == c)
            .map(|t| t.tally)
            .unwrap_or_default()
    };
    let mut cases = Vec::new();
    let (mut diffs, mut now_rates, mut then_rates) = (Vec::new(), Vec::new(), Vec::new());
    for c in order {
        let (a, b) = (find(&now, c), find(&then, c));
        if !has_case(&now, c) && !has_case(&then, c) {
            continue;
        }
        let change = if a.valid == 0 || b.valid == 0 {
            Change::NotComparable
        } else {
            let (x, y) = (rate(a), rate(b));
            now_rates.push(x);
            then_rates.push(y);
            diffs.push(x - y);
            // Exact: rates are ratios of small integers; compare crosswise.
            match (a.passed * b.valid).cmp(&(b.passed * a.valid)) {
                std::cmp::Ordering::Greater => Change::Gained,
                std::cmp::Ordering::Less => Change::Lost,
                std::cmp::Ordering::Equal => Change::Unchanged,
            }
        };
        cases.push(CaseChange {
            case: c.to_owned(),
            current: a,
            baseline: b,
            change,
        });
    }
    let count = |ch: Change| cases.iter().filter(|c| c.change == ch).count();
    let (gained, lost) = (count(Change::Gained), count(Change::Lost));
    let current_rate = stats::mean(&now_rates);
    let baseline_rate = stats::mean(&then_rates);
    Pair {
        config: config.to_owned(),
        baseline_config: baseline_config.to_owned(),
        gained,
        lost,
        unchanged: count(Change::Unchanged),
        not_comparable: count(Change::NotComparable),
        current_rate,
        baseline_rate,
        difference: current_rate.zip(baseline_rate).map(|(a, b)| a - b),
        difference_ci: stats::bootstrap_ci(&diffs).map(|(a, b)| [a, b]),
        sign_test_p: stats::sign_test(gained as u64, lost as u64),
        cases,
    }
}

fn has_case(ts: &[super::tables::CaseTally], c: &str) -> bool {
    ts.iter().any(|t| t.case == c)
}
