//! What each array task asks Slurm for, from the trials' own limits: one
//! array has one size, so the largest over the tasks it runs.
//!
//! - `--cpus-per-task`: the configuration's `cpus`, rounded up (1 when
//!   unset: a trial's sandboxes run one after the other);
//! - `--mem`: the sandbox memory limit plus [`CBRUN_OVERHEAD_MIB`] for
//!   cbrun itself and the judge's workspace copy;
//! - `--time`: the trial's budget (the agent's install and setup budgets,
//!   the solve budget, the judge budget) plus a margin, in whole minutes.

use std::time::Duration;

use crate::agent::builtin::AgentRef;

use super::super::plan::{PlanError, ResolvedPlan};

/// MiB added to the sandbox memory limit for `--mem`.
pub const CBRUN_OVERHEAD_MIB: u64 = 512;
/// Default minutes added to a trial's budget for `--time`.
pub const DEFAULT_TIME_MARGIN_MIN: u32 = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResources {
    pub cpus: u32,
    pub mem_mib: u64,
    pub minutes: u64,
}

impl TaskResources {
    /// `--time` as Slurm writes it: `D-HH:MM:SS`.
    pub fn time_arg(&self) -> String {
        let m = self.minutes;
        format!("{}-{:02}:{:02}:00", m / 1440, (m / 60) % 24, m % 60)
    }
}

/// The resources for the tasks `tasks` of `plan`.
pub fn for_tasks(
    plan: &ResolvedPlan,
    tasks: &[usize],
    margin_min: u32,
) -> Result<TaskResources, PlanError> {
    let mut r = TaskResources {
        cpus: 1,
        mem_mib: 0,
        minutes: 1,
    };
    let mut judge_of_case: Vec<Option<Duration>> = vec![None; plan.cases.len()];
    for &n in tasks {
        let Some(t) = plan.task(n) else { continue };
        let c = &plan.configs[t.config];
        if let Some(cpus) = c.cpus {
            r.cpus = r.cpus.max(cpus.ceil().clamp(1.0, 4096.0) as u32);
        }
        r.mem_mib = r.mem_mib.max((c.memory_bytes() >> 20) + CBRUN_OVERHEAD_MIB);
        let judge = match c.judge_timeout {
            Some(s) => Duration::from_secs_f64(s),
            None => match judge_of_case[t.case] {
                Some(d) => d,
                None => {
                    let entry = &plan.cases[t.case];
                    let case = crate::case::load(&entry.path).map_err(|e| {
                        PlanError(format!("case {} ({}): {e}", entry.id, entry.path.display()))
                    })?;
                    let d = case.judge_timeout();
                    judge_of_case[t.case] = Some(d);
                    d
                }
            },
        };
        let setup = match c.agent()? {
            AgentRef::Spec(s, _) => {
                Duration::from_secs(s.install_timeout_sec + s.setup_timeout_sec + 60)
            }
            _ => Duration::ZERO,
        };
        let budget = setup + Duration::from_secs_f64(c.solve_timeout) + judge;
        let minutes = budget.as_secs().div_ceil(60) + u64::from(margin_min);
        r.minutes = r.minutes.max(minutes);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_is_written_as_slurm_reads_it() {
        let r = TaskResources {
            cpus: 1,
            mem_mib: 1,
            minutes: 2 * 1440 + 3 * 60 + 7,
        };
        assert_eq!(r.time_arg(), "2-03:07:00");
    }
}
