//! `summary.json`: counts over the latest attempt of every trial of the
//! run, overall and per configuration, computed from the trial records
//! themselves (not from `results.jsonl`, which a killed writer may have
//! cut short).
//!
//! - `done`: trials whose latest attempt finished (its record is final);
//!   `pending` = `total` - `done`; `running`: pending trials with a claim.
//! - `evaluated`, `not_submitted`, `rejected`, `errors`: `done` split by
//!   `pipeline_status`; `passed`: reward 1.
//! - `infrastructure`: `failure_class` infrastructure; `interrupted`:
//!   `terminal_status` interrupted (both are among `errors`).
//!
//! Several workers (on several hosts) may finish at once, each rewriting
//! the file: a writer reads the records, writes, and reads again until
//! what it wrote is what it reads, so the last write always counts every
//! trial finished before it.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;

use crate::trial::clock;
use crate::trial::record::PipelineStatus;

use super::folder::{RunFolder, SUMMARY};
use super::plan::ResolvedPlan;
use super::state::{read_state, RecordView, TrialState};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub total: u64,
    pub done: u64,
    pub evaluated: u64,
    pub passed: u64,
    pub not_submitted: u64,
    pub rejected: u64,
    pub errors: u64,
    pub infrastructure: u64,
    pub interrupted: u64,
    pub pending: u64,
    pub running: u64,
}

impl Counts {
    /// Counts one finished attempt in.
    pub fn add_finished(&mut self, v: &RecordView) {
        self.done += 1;
        match v.pipeline_status.unwrap_or(PipelineStatus::Error) {
            PipelineStatus::Evaluated => self.evaluated += 1,
            PipelineStatus::NotSubmitted => self.not_submitted += 1,
            PipelineStatus::Rejected => self.rejected += 1,
            PipelineStatus::Error => self.errors += 1,
        }
        if v.reward == 1 {
            self.passed += 1;
        }
        if v.infrastructure() {
            self.infrastructure += 1;
        }
        if v.interrupted() {
            self.interrupted += 1;
        }
    }

    fn settle(&mut self) {
        self.pending = self.total - self.done;
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub run_id: String,
    #[serde(flatten)]
    pub counts: Counts,
    pub by_config: BTreeMap<String, Counts>,
    pub updated_at: String,
}

/// Records whose outcome stands, by task: they never change again, so a
/// writer that keeps one (the supervisor) reads each record once.
#[derive(Debug, Default)]
pub struct Cache {
    stands: Vec<Option<RecordView>>,
}

/// The summary as the folder is now.
pub fn compute(folder: &RunFolder, plan: &ResolvedPlan) -> Summary {
    compute_with(folder, plan, &mut Cache::default())
}

/// [`compute`], reading only the records `cache` does not hold.
pub fn compute_with(folder: &RunFolder, plan: &ResolvedPlan, cache: &mut Cache) -> Summary {
    cache.stands.resize(plan.total(), None);
    let mut all = Counts::default();
    let mut by: BTreeMap<String, Counts> = plan
        .configs
        .iter()
        .map(|c| (c.name.clone(), Counts::default()))
        .collect();
    for task in plan.tasks() {
        let per = by.entry(task.config_name.clone()).or_default();
        all.total += 1;
        per.total += 1;
        if let Some(v) = &cache.stands[task.n] {
            all.add_finished(v);
            per.add_finished(v);
            continue;
        }
        let Some(dir) = folder.existing_config_dir(&task) else {
            continue;
        };
        match read_state(&dir, &task.repeat.to_string()) {
            TrialState::Finished(v) => {
                all.add_finished(&v);
                per.add_finished(&v);
                if v.stands() {
                    cache.stands[task.n] = Some(v);
                }
            }
            TrialState::Missing | TrialState::Unfinished { .. } => {
                if matches!(dir.entry(format!("{}.claim", task.repeat)), Ok(Some(_))) {
                    all.running += 1;
                    per.running += 1;
                }
            }
        }
    }
    all.settle();
    by.values_mut().for_each(Counts::settle);
    Summary {
        run_id: plan.run_id.clone(),
        counts: all,
        by_config: by,
        updated_at: clock::rfc3339(SystemTime::now()),
    }
}

/// Rewrites `summary.json` atomically (see the module docs for writers
/// that race); returns what it wrote last.
pub fn write(folder: &RunFolder, plan: &ResolvedPlan) -> std::io::Result<Summary> {
    write_with(folder, plan, &mut Cache::default())
}

/// [`write`] with a [`Cache`].
pub fn write_with(
    folder: &RunFolder,
    plan: &ResolvedPlan,
    cache: &mut Cache,
) -> std::io::Result<Summary> {
    let mut s = compute_with(folder, plan, cache);
    for _ in 0..20 {
        let bytes = crate::fsutil::json_bytes(&s)?;
        folder
            .dir()
            .write_replace(SUMMARY, &bytes, 0o644)
            .map_err(std::io::Error::other)?;
        let again = compute_with(folder, plan, cache);
        if again.counts == s.counts && again.by_config == s.by_config {
            return Ok(s);
        }
        s = again;
    }
    Ok(s)
}
