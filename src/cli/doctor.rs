//! `cbrun doctor [--json]`: what this host lets cbrun enforce for the
//! current user (the probes and the report are [`cbrun::doctor`]'s).

use std::io::Write;

use anyhow::Result;
use clap::Args;

use super::exit::ExitStatus;
use super::messages;

#[derive(Args)]
pub struct DoctorArgs {
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Probe, print, and exit 0 when a sandbox can run here, 2 otherwise.
pub fn exec(a: DoctorArgs) -> Result<ExitStatus> {
    if a.json {
        messages::json_mode("doctor");
    }
    let report = cbrun::doctor::collect();
    let mut out = std::io::stdout().lock();
    if a.json {
        drop(out);
        messages::json_result("doctor", &report)?;
        return Ok(if report.sandbox_possible {
            ExitStatus::Success
        } else {
            ExitStatus::NoSandbox
        });
    } else {
        out.write_all(cbrun::doctor::render_text(&report).as_bytes())?;
    }
    out.flush()?;
    Ok(if report.sandbox_possible {
        ExitStatus::Success
    } else {
        ExitStatus::NoSandbox
    })
}
