//! `cbrun validate CASE...`: every control of each case through the scan
//! and the judge, checked against its `expect.json`; a table; exit 1 on any
//! mismatch.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use cbrun::sandbox::run::HostView;
use cbrun::trial::validate;

use super::exit::ExitStatus;
use super::judge::judge_options;
use super::limits::LimitArgs;
use super::{load_case, messages};

#[derive(Args, Clone)]
pub struct ValidateArgs {
    /// Case folders (files among them, e.g. a README from `cases/*`, are skipped).
    #[arg(required = true, value_name = "CASE")]
    cases: Vec<PathBuf>,
    /// Judge budget in seconds (replaces each case's).
    #[arg(long, value_name = "S")]
    judge_timeout: Option<f64>,
    /// Keep the judge files here instead of a temporary folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the results as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

pub fn exec(a: ValidateArgs) -> Result<ExitStatus> {
    if a.json {
        messages::json_mode("validate");
    }
    let host = HostView::detect();
    let root = a.limits.root(&host)?;
    let opts = judge_options(&a.limits, &root, a.judge_timeout)?;
    let mut cases = Vec::new();
    for dir in &a.cases {
        if dir.is_file() {
            messages::warning(format_args!(
                "{}: not a case folder, skipped",
                dir.display()
            ));
            continue;
        }
        cases.push(load_case(dir)?);
    }
    let tmp;
    let work_root = match &a.out {
        Some(o) => o.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("cbrun-validate-{}", std::process::id()));
            tmp.clone()
        }
    };
    let mut results = Vec::new();
    for case in &cases {
        for control in &case.controls {
            let work = work_root.join(case.id.as_str()).join(&control.name);
            results.push(validate::validate_control(
                case, control, &work, &opts, &host,
            ));
        }
    }
    if a.out.is_none() {
        let _ = std::fs::remove_dir_all(&work_root);
    }
    if a.json {
        messages::json_result("validate", &results)?;
    } else {
        print!("{}", validate::table(&results));
    }
    let bad = results.iter().filter(|r| !r.ok).count();
    if results.is_empty() {
        messages::status("validate: no controls found");
        return Ok(ExitStatus::Failure);
    }
    if bad > 0 {
        messages::status(format_args!(
            "validate: {bad} of {} controls mismatched",
            results.len()
        ));
        return Ok(ExitStatus::Failure);
    }
    messages::status(format_args!(
        "validate: all {} controls as expected",
        results.len()
    ));
    Ok(ExitStatus::Success)
}
