//! `cbrun judge CASE --workspace DIR`: judge a stored workspace (copied,
//! never mounted) against the case's hidden tests. Its judge options are
//! also `trial`'s and `validate`'s.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use cbrun::sandbox::run::HostView;
use cbrun::trial;
use cbrun::trial::judge::{run_judge, JudgeOptions};
use cbrun::trial::layout::TrialDir;

use super::exit::ExitStatus;
use super::limits::{LimitArgs, Root};
use super::{load_case, messages, secs};

#[derive(Args, Clone)]
pub struct JudgeArgs {
    /// The case folder.
    case: PathBuf,
    /// The workspace to judge (copied, never mounted).
    #[arg(long, value_name = "DIR")]
    workspace: PathBuf,
    /// Where the verifier files go (default ./cbrun-judge/<case>-<time>-<pid>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Judge budget in seconds (replaces the case's).
    #[arg(long, value_name = "S")]
    judge_timeout: Option<f64>,
    /// Print the judge's report as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The judge phase's options from the command line, checked.
pub fn judge_options(l: &LimitArgs, root: &Root, timeout: Option<f64>) -> Result<JudgeOptions> {
    Ok(JudgeOptions {
        rootfs: root.rootfs.clone(),
        image_env: root.env.clone(),
        timeout: timeout.map(|t| secs("--judge-timeout", t)).transpose()?,
        limits: l.limits()?,
        ..JudgeOptions::default()
    })
}

pub fn exec(a: JudgeArgs) -> Result<ExitStatus> {
    if a.json {
        messages::json_mode("judge");
    }
    let case = load_case(&a.case)?;
    let host = HostView::detect();
    let root = a.limits.root(&host)?;
    let opts = judge_options(&a.limits, &root, a.judge_timeout)?;
    let ws = std::fs::canonicalize(&a.workspace)
        .with_context(|| format!("--workspace {}", a.workspace.display()))?;
    if !ws.is_dir() {
        bail!("--workspace {}: not a directory", ws.display());
    }
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("cbrun-judge").join(
            trial::default_out(case.id.as_str())
                .file_name()
                .unwrap_or_default(),
        )
    });
    let dir = TrialDir::open_or_create(&out).with_context(|| format!("--out {}", out.display()))?;
    let report = run_judge(&case, &ws, &dir, &opts, &host);
    dir.remove_scratch();
    if a.json {
        messages::json_result("judge", &report)?;
    } else {
        messages::status(format_args!("judge: {}", report.reason));
        println!("reward {}", report.reward);
        println!(
            "report {}",
            dir.verifier().join("final_report.json").display()
        );
    }
    Ok(ExitStatus::Success)
}
