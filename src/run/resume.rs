//! What is left to do in a run folder: every trial whose outcome does not
//! stand yet (never run, killed mid-way, interrupted, failed for
//! infrastructure with retries left), unless a live worker holds its claim.
//! A fresh run and `--resume` both start from this list.

use std::time::SystemTime;

use super::claim::{self, Found};
use super::folder::RunFolder;
use super::plan::ResolvedPlan;
use super::state::{self, Next};

#[derive(Debug, Default)]
pub struct Pending {
    /// Trials to run, in plan order.
    pub queue: Vec<usize>,
    /// Trials a live worker holds (`label: who`).
    pub held: Vec<String>,
    /// Trials whose outcome stands.
    pub done: usize,
    /// Trials that failed for infrastructure as often as retries allow.
    pub exhausted: usize,
}

pub fn pending(folder: &RunFolder, plan: &ResolvedPlan, retry_infra: u32) -> Pending {
    let mut p = Pending::default();
    let now = SystemTime::now();
    for task in plan.tasks() {
        let dir = folder.existing_config_dir(&task);
        if let Some(d) = &dir {
            if let Found::Claim(c) = claim::read(d, &format!("{}.claim", task.repeat)) {
                if c.stale(now).is_none() {
                    p.held.push(format!("{}: {}", task.label(), c.describe()));
                    continue;
                }
            }
        }
        match state::next(dir.as_ref(), task.repeat, retry_infra) {
            Next::Done(_) => p.done += 1,
            Next::Exhausted(_) => p.exhausted += 1,
            Next::Run { .. } => p.queue.push(task.n),
        }
    }
    p
}
