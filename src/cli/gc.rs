//! `cbrun gc [--json]`: remove what runs whose cbrun was killed left behind
//! (processes, cgroups, state); exit 1 when something could not be removed.

use anyhow::Result;
use clap::Args;

use cbrun::sandbox::run::HostView;
use cbrun::sandbox::state;

use super::exit::ExitStatus;
use super::messages;

#[derive(Args)]
pub struct GcArgs {
    /// Print the report as JSON instead of a summary line.
    #[arg(long)]
    json: bool,
}

pub fn exec(a: GcArgs) -> Result<ExitStatus> {
    if a.json {
        messages::json_mode("gc");
    }
    let host = HostView::detect();
    let mut report = state::gc(&host.state_root, host.roots.as_deref(), true);
    state::gc_scaffolds(&host.state_root, &mut report);
    if a.json {
        messages::json_result("gc", &report)?;
    } else {
        println!(
            "cbrun gc: removed {} dead run(s), killed {} process(es), removed {} cgroup dir(s); {} run(s) live",
            report.removed_runs.len(),
            report.killed_processes,
            report.removed_cgroups,
            report.live_runs
        );
        for e in &report.errors {
            messages::error(format_args!("gc: {e}"));
        }
    }
    Ok(ExitStatus::from_ok(report.errors.is_empty()))
}
