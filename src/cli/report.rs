//! `cbrun report RUN_DIR...`: the paper's tables from run folders, with
//! repeat statistics, a baseline comparison and an HTML page.
//!
//! Exit status: 0 when the report was made (records that could not be
//! read are warnings, and shown as unreadable in the tables); 125 when a
//! folder cannot be read at all, is not a run folder, or the options do
//! not fit together.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use cbrun::report::render::{self, Format, Section};
use cbrun::report::{self, ReportOptions};

use super::exit::ExitStatus;
use super::messages;

#[derive(Args, Clone)]
pub struct ReportArgs {
    /// Run folders (`cbrun run --out`) or trial folders; trials of one
    /// configuration name are pooled across them.
    #[arg(required = true, value_name = "RUN_DIR")]
    runs: Vec<PathBuf>,
    /// Compare with this run, case by case (repeat the flag to pool several folders).
    #[arg(long, value_name = "RUN_DIR")]
    baseline: Vec<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = FormatArg::Term)]
    format: FormatArg,
    /// Only this table (CSV prints one table; its default is `trials`).
    #[arg(long, value_enum, value_name = "TABLE")]
    table: Option<TableArg>,
    /// Also write the report as one self-contained HTML page (tables and charts) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// Aligned columns.
    Term,
    /// Markdown tables.
    Md,
    /// One table as CSV.
    Csv,
    /// The whole report as JSON.
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum TableArg {
    /// Table 2: per configuration.
    #[value(alias = "table2")]
    Summary,
    /// Table 6: per case and configuration.
    #[value(alias = "table6")]
    Cases,
    /// Table 7: by language.
    #[value(alias = "table7")]
    Languages,
    /// Table 8: hidden tests passed by failing submissions.
    #[value(alias = "table8")]
    Partial,
    /// pass@k and pass^k over repeats.
    Repeats,
    /// The comparison with --baseline.
    Compare,
    /// One row per trial.
    Trials,
}

impl From<TableArg> for Section {
    fn from(t: TableArg) -> Section {
        match t {
            TableArg::Summary => Section::Summary,
            TableArg::Cases => Section::Cases,
            TableArg::Languages => Section::Languages,
            TableArg::Partial => Section::Partial,
            TableArg::Repeats => Section::Repeats,
            TableArg::Compare => Section::Compare,
            TableArg::Trials => Section::Trials,
        }
    }
}

/// Problems beyond this many are counted, not listed, on stderr (the
/// Markdown, JSON and HTML reports list them all).
const SHOWN_PROBLEMS: usize = 50;

pub fn exec(a: ReportArgs) -> Result<ExitStatus> {
    if matches!(a.table, Some(TableArg::Compare)) && a.baseline.is_empty() {
        bail!("--table compare: needs --baseline RUN_DIR");
    }
    let opts = ReportOptions {
        runs: a.runs.clone(),
        baseline: (!a.baseline.is_empty()).then(|| a.baseline.clone()),
    };
    let r = report::build(&opts)?;
    for p in r.problems.iter().take(SHOWN_PROBLEMS) {
        messages::warning(cbrun::fsutil::escape_controls(&p.to_string()));
    }
    if r.problems.len() > SHOWN_PROBLEMS {
        messages::warning(format_args!(
            "{} more problems (all are listed in the JSON, Markdown and HTML reports)",
            r.problems.len() - SHOWN_PROBLEMS
        ));
    }
    let format = match a.format {
        FormatArg::Term => Format::Term,
        FormatArg::Md => Format::Md,
        FormatArg::Csv => Format::Csv,
        FormatArg::Json => Format::Json,
    };
    let text = render::render(&r, format, a.table.map(Section::from))?;
    if let Some(path) = &a.html {
        let page = render::html::render(&r)?;
        cbrun::fsutil::write_atomic(path, page.as_bytes())
            .with_context(|| format!("--html {}", cbrun::fsutil::quote_path(path)))?;
        messages::status(format_args!(
            "report: wrote {}",
            cbrun::fsutil::quote_path(path)
        ));
    }
    use std::io::Write;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitStatus::Success)
}
