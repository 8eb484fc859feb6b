//! The report's tables as grids of cell text, shared by the terminal,
//! Markdown and HTML renderers so that each shows the same cells.

use super::cells::{self, NA, NONE};
use super::Section;
use crate::report::compare::Comparison;
use crate::report::tables::ExcludedCounts;
use crate::report::Report;

/// A titled table of text cells.
#[derive(Debug, Clone)]
pub struct Grid {
    pub section: Section,
    pub title: String,
    pub headers: Vec<&'static str>,
    /// Right-aligned columns (numbers), by index.
    pub right: Vec<bool>,
    pub rows: Vec<Vec<String>>,
    pub notes: Vec<String>,
}

impl Grid {
    fn new(section: Section, title: impl Into<String>, cols: &[(&'static str, bool)]) -> Grid {
        Grid {
            section,
            title: title.into(),
            headers: cols.iter().map(|c| c.0).collect(),
            right: cols.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// The grids of `sections`, in that order; a section with nothing to show
/// (no baseline, one repeat) is left out.
pub fn grids(r: &Report, sections: &[Section]) -> Vec<Grid> {
    let mut out = Vec::new();
    for s in sections {
        match s {
            Section::Summary => out.push(summary(r)),
            Section::Cases => out.push(cases(r)),
            Section::Languages => out.push(languages(r)),
            Section::Partial => out.extend(partial(r)),
            Section::Repeats => out.extend(repeats(r)),
            Section::Compare => {
                if let Some(c) = &r.comparison {
                    out.extend(compare(c));
                }
            }
            Section::Trials => out.push(trials(r)),
        }
    }
    out
}

fn invalid(e: &ExcludedCounts) -> String {
    let parts: Vec<String> = [
        (e.infrastructure, "infra"),
        (e.interrupted, "interrupted"),
        (e.unreadable, "unreadable"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join(", ")
    }
}

fn not_done(e: &ExcludedCounts) -> String {
    let parts: Vec<String> = [(e.running, "running"), (e.pending, "pending")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join(", ")
    }
}

fn summary(r: &Report) -> Grid {
    let mut g = Grid::new(
        Section::Summary,
        "Table 2: per configuration",
        &[
            ("config", false),
            ("solved", true),
            ("pass rate", true),
            ("95% CI", true),
            ("submitted", true),
            ("mean time to submit", true),
            ("total cost", true),
            ("tokens", true),
            ("invalid", true),
            ("not done", true),
        ],
    );
    for c in &r.table2 {
        g.rows.push(vec![
            c.config.clone(),
            format!("{} of {}", c.solved, c.cases),
            cells::rate(c.passed, c.valid),
            cells::ci(c.pass_rate_ci),
            format!("{}/{}", c.submitted, c.valid),
            cells::mean_time(&c.time_to_submit),
            cells::cost(&c.cost),
            cells::tokens(&c.tokens),
            invalid(&c.excluded),
            not_done(&c.excluded),
        ]);
    }
    for c in &r.configs {
        let agent = c.agent.as_deref().or_else(|| {
            r.table2
                .iter()
                .find(|t| t.config == c.name)
                .and_then(|t| t.agent.as_deref())
        });
        let model = r
            .table2
            .iter()
            .find(|t| t.config == c.name)
            .and_then(|t| t.model.as_deref());
        g.notes.push(format!(
            "{}: agent {}, model {}",
            c.name,
            agent.unwrap_or(NA),
            model.unwrap_or(NA)
        ));
    }
    g.notes.push(format!("rule: {}", crate::report::RULE));
    g.notes
        .push(format!("intervals: {}", crate::report::INTERVALS));
    if r.unpriced_trials > 0 {
        g.notes.push(format!(
            "{} trial(s) with a record have no cost_usd: costs shown are sums over priced trials only",
            r.unpriced_trials
        ));
    }
    g
}

fn cases(r: &Report) -> Grid {
    let mut g = Grid::new(
        Section::Cases,
        "Table 6: per case and configuration",
        &[
            ("case", false),
            ("language", false),
            ("config", false),
            ("result", false),
            ("passes", true),
            ("time to submit", true),
            ("cost", true),
        ],
    );
    for row in &r.table6 {
        g.rows.push(vec![
            row.case.clone(),
            row.language.clone().unwrap_or_else(|| NA.into()),
            row.config.clone(),
            row.result.clone(),
            format!("{}/{}", row.passed, row.valid),
            cells::mean_time(&row.time_to_submit),
            cells::cost(&row.cost),
        ]);
    }
    g.notes.push(
        "result: Pass, or hidden tests passed/total, or what happened, one per repeat; \
         time: mean over submitted repeats; cost: sum over repeats"
            .into(),
    );
    g
}

fn languages(r: &Report) -> Grid {
    let mut g = Grid::new(
        Section::Languages,
        "Table 7: by language",
        &[
            ("language", false),
            ("config", false),
            ("cases", true),
            ("solved", true),
            ("pass rate", true),
        ],
    );
    for row in &r.table7 {
        g.rows.push(vec![
            row.language.clone(),
            row.config.clone(),
            row.cases.to_string(),
            row.solved.to_string(),
            cells::rate(row.passed, row.valid),
        ]);
    }
    g
}

fn partial(r: &Report) -> Vec<Grid> {
    let mut g = Grid::new(
        Section::Partial,
        "Table 8: hidden tests passed by failing submissions",
        &[
            ("config", false),
            ("failing submissions", true),
            ("with test counts", true),
            ("hidden tests passed", true),
            ("mean per submission", true),
        ],
    );
    for row in &r.table8.by_config {
        g.rows.push(vec![
            row.config.clone(),
            row.failing.to_string(),
            row.with_counts.to_string(),
            if row.tests_total == 0 {
                NONE.into()
            } else {
                format!(
                    "{}/{} {}",
                    row.tests_passed,
                    row.tests_total,
                    cells::opt_pct(row.share)
                )
            },
            row.mean_share
                .map(cells::pct)
                .unwrap_or_else(|| NONE.into()),
        ]);
    }
    g.notes.push(
        "failing submissions: valid trials the judge ran that did not pass \
         (not submitted and rejected trials were never judged)"
            .into(),
    );
    let mut d = Grid::new(
        Section::Partial,
        "Table 8 (detail): each failing submission",
        &[
            ("case", false),
            ("config", false),
            ("repeat", true),
            ("tests passed", true),
            ("share", true),
        ],
    );
    for s in &r.table8.submissions {
        d.rows.push(vec![
            s.case.clone(),
            s.config.clone(),
            repeat_label(r, s.run_id.as_deref(), s.repeat),
            format!("{}/{}", s.tests_passed, s.tests_total),
            cells::pct(s.share),
        ]);
    }
    vec![g, d]
}

/// `2`, or `RUN:2` when several runs are pooled.
fn repeat_label(r: &Report, run_id: Option<&str>, repeat: u32) -> String {
    if r.runs.len() > 1 {
        format!("{}:{repeat}", run_id.unwrap_or("?"))
    } else {
        repeat.to_string()
    }
}

fn repeats(r: &Report) -> Vec<Grid> {
    let max_n = r
        .repeats
        .iter()
        .flat_map(|s| s.per_case.iter().map(|c| c.tally.valid))
        .max()
        .unwrap_or(0);
    let mut g = Grid::new(
        Section::Repeats,
        "Repeats: pass@k and pass^k",
        &[
            ("config", false),
            ("k", true),
            ("cases", true),
            ("pass@k", true),
            ("95% CI", true),
            ("pass^k", true),
            ("95% CI", true),
        ],
    );
    if max_n < 2 {
        // One repeat: pass@1 is the pass rate; nothing more to show.
        return Vec::new();
    }
    for s in &r.repeats {
        for row in &s.rows {
            g.rows.push(vec![
                row.config.clone(),
                row.k.to_string(),
                row.cases.to_string(),
                cells::opt_pct(row.pass_at_k),
                cells::ci(row.pass_at_k_ci),
                cells::opt_pct(row.pass_hat_k),
                cells::ci(row.pass_hat_k_ci),
            ]);
        }
    }
    g.notes.push(
        "unbiased estimators over each case's valid repeats (n) and passes (c), averaged \
         over the cases with at least k valid repeats; intervals: bootstrap over cases"
            .into(),
    );
    vec![g]
}

fn compare(c: &Comparison) -> Vec<Grid> {
    let mut g = Grid::new(
        Section::Compare,
        "Comparison with the baseline",
        &[
            ("config", false),
            ("baseline", false),
            ("gained", true),
            ("lost", true),
            ("unchanged", true),
            ("not comparable", true),
            ("pass rate", true),
            ("baseline rate", true),
            ("difference", true),
            ("95% CI", true),
            ("sign test p", true),
        ],
    );
    let mut d = Grid::new(
        Section::Compare,
        "Comparison: per case",
        &[
            ("config", false),
            ("case", false),
            ("passes", true),
            ("baseline passes", true),
            ("change", false),
        ],
    );
    for p in &c.pairs {
        g.rows.push(vec![
            p.config.clone(),
            p.baseline_config.clone(),
            p.gained.to_string(),
            p.lost.to_string(),
            p.unchanged.to_string(),
            p.not_comparable.to_string(),
            cells::opt_pct(p.current_rate),
            cells::opt_pct(p.baseline_rate),
            p.difference
                .map(|x| format!("{:+.1} pts", x * 100.0))
                .unwrap_or_else(|| NA.into()),
            match p.difference_ci {
                Some([a, b]) => format!("{:+.1}–{:+.1} pts", a * 100.0, b * 100.0),
                None => NA.into(),
            },
            p.sign_test_p
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| NA.into()),
        ]);
        for k in &p.cases {
            let t = |t: crate::report::tables::Tally| {
                if t.valid == 0 {
                    NONE.to_owned()
                } else {
                    format!("{}/{}", t.passed, t.valid)
                }
            };
            d.rows.push(vec![
                p.config.clone(),
                k.case.clone(),
                t(k.current),
                t(k.baseline),
                k.change.label().into(),
            ]);
        }
    }
    if !c.unpaired_current.is_empty() {
        g.notes.push(format!(
            "no baseline for: {}",
            c.unpaired_current.join(", ")
        ));
    }
    if !c.unpaired_baseline.is_empty() {
        g.notes.push(format!(
            "only in the baseline: {}",
            c.unpaired_baseline.join(", ")
        ));
    }
    g.notes.push(
        "rates: mean per-case pass rate over cases valid on both sides; \
         sign test: exact, two-sided, over gained and lost cases"
            .into(),
    );
    vec![g, d]
}

fn trials(r: &Report) -> Grid {
    let mut g = Grid::new(
        Section::Trials,
        "Trials",
        &[
            ("run", false),
            ("case", false),
            ("config", false),
            ("repeat", true),
            ("status", false),
            ("tests", true),
            ("time to submit", true),
            ("solve", true),
            ("cost", true),
            ("tokens", true),
        ],
    );
    for t in &r.trials {
        let has_record = t.reward.is_some();
        let or_na = |x: Option<f64>, f: fn(f64) -> String| {
            if !has_record {
                NONE.to_owned()
            } else {
                x.map(f).unwrap_or_else(|| NA.into())
            }
        };
        g.rows.push(vec![
            t.run_id.clone().unwrap_or_else(|| NONE.into()),
            t.case.clone(),
            t.config.clone(),
            t.repeat.to_string(),
            t.status.replace('_', " "),
            match (t.tests_passed, t.tests_total) {
                (Some(p), Some(n)) => format!("{p}/{n}"),
                _ => NONE.into(),
            },
            if has_record && t.submitted == Some(false) {
                NONE.into()
            } else {
                or_na(t.time_to_submit_s, cells::secs)
            },
            or_na(t.solve_s, cells::secs),
            or_na(t.cost_usd, cells::usd),
            match &t.tokens {
                Some(k) => format!(
                    "{} in / {} out",
                    k.input.map(cells::count).unwrap_or_else(|| NA.into()),
                    k.output.map(cells::count).unwrap_or_else(|| NA.into())
                ),
                None if has_record => NA.into(),
                None => NONE.into(),
            },
        ]);
    }
    g
}
