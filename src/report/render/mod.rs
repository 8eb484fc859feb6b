//! Output formats. The terminal, Markdown and HTML show the same cells
//! ([`grids`], with numbers worded by [`cells`]); JSON is the report as
//! data; CSV is one table's rows as data (numbers as numbers, unknowns as
//! `n/a`).
//!
//! Every name in a report (case ids, configuration names, models) comes
//! from files a run wrote and is escaped for the format: control and
//! invisible characters are written as `\u{..}` in text, Markdown's and
//! HTML's special characters are escaped, CSV fields are quoted and
//! guarded against spreadsheet formulas.

pub mod cells;
pub mod csv;
pub mod grids;
pub mod html;
pub mod json;
pub mod md;
pub mod term;

use super::Report;

/// One of the report's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Table 2: per configuration.
    Summary,
    /// Table 6: per case and configuration.
    Cases,
    /// Table 7: by language.
    Languages,
    /// Table 8: hidden tests passed by failing submissions.
    Partial,
    /// pass@k and pass^k.
    Repeats,
    /// `--baseline`.
    Compare,
    /// One row per trial.
    Trials,
}

/// What the terminal, Markdown and HTML show when no table is chosen.
pub const DEFAULT_SECTIONS: &[Section] = &[
    Section::Summary,
    Section::Cases,
    Section::Languages,
    Section::Partial,
    Section::Repeats,
    Section::Compare,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Term,
    Md,
    Csv,
    Json,
}

/// The report in `format`; `only` picks one table (for CSV the default is
/// the trials).
pub fn render(r: &Report, format: Format, only: Option<Section>) -> Result<String, RenderError> {
    let sections: Vec<Section> = match only {
        Some(s) => vec![s],
        None => DEFAULT_SECTIONS.to_vec(),
    };
    Ok(match format {
        Format::Term => term::render(&grids::grids(r, &sections)),
        Format::Md => md::render(r, &grids::grids(r, &sections)),
        Format::Csv => csv::render(r, only.unwrap_or(Section::Trials))?,
        Format::Json => json::render(r, only)?,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("serialising the report")]
    Json(#[from] serde_json::Error),
    #[error("drawing a chart: {0}")]
    Chart(String),
}
