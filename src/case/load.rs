//! A checked case folder as typed data, for the trial runner and the judge.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::check::inspect;
use super::problem::Problem;
use super::schema::{
    CaseId, Denylist, Expect, JudgeProfile, Manifest, Recipe, Resources, TestManifest,
};

/// The documents the agent sees.
#[derive(Debug, Clone)]
pub struct PublicDocs {
    pub full_prd: PathBuf,
    pub interface_contract: PathBuf,
    pub hardware_requirements: Option<PathBuf>,
}

/// `controls/<name>/`: a workspace and its expected result.
#[derive(Debug, Clone)]
pub struct Control {
    pub name: String,
    pub app_dir: PathBuf,
    pub expect: Expect,
}

/// A case folder that passed [`check`](super::check) without errors.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: CaseId,
    /// The case folder, canonicalised.
    pub dir: PathBuf,
    pub public: PublicDocs,
    pub manifest: Manifest,
    pub recipe: Recipe,
    /// The case's denylist, or [`Denylist::none`] when it has none.
    pub denylist: Denylist,
    /// Whether `source/denylist.json` exists.
    pub has_denylist: bool,
    pub test_manifest: TestManifest,
    pub resources: Option<Resources>,
    pub controls: Vec<Control>,
    /// `milestones/final/`: what the judge mounts at `/tests/final`.
    pub final_dir: PathBuf,
    /// `milestones/final/tests/run_acceptance.sh`, when present.
    pub acceptance_script: Option<PathBuf>,
    /// Where that script is relative to `milestones/final/` (and so to
    /// `/tests/final` in the judge).
    pub acceptance_entry: Option<&'static str>,
    /// Warnings found while checking.
    pub warnings: Vec<Problem>,
}

impl Case {
    /// The judge budget (see [`Manifest::judge_timeout`]).
    pub fn judge_timeout(&self) -> Duration {
        self.manifest.judge_timeout(&self.test_manifest)
    }

    /// Why cbrun's judge cannot judge this case as its author meant, if so:
    /// the `cow` judge profile, or `judge_substrates`, need a btrfs scratch
    /// filesystem (CAP_SYS_ADMIN and loop devices in the judge) that a
    /// cbrun sandbox never has. The trial runner should refuse before the
    /// solve phase, as the published runner's readiness check does, rather
    /// than judge with the standard profile and blame the submission.
    pub fn judge_unsupported(&self) -> Option<String> {
        if self.manifest.runner.profile() == JudgeProfile::Cow {
            return Some(format!(
                "{}: runner.judge_profile \"cow\" needs a btrfs scratch filesystem at \
                 /cbrun-cow (CAP_SYS_ADMIN and loop devices in the judge), which cbrun cannot provide",
                super::layout::MANIFEST
            ));
        }
        let subs = self.test_manifest.judge_substrates();
        if !subs.is_empty() {
            return Some(format!(
                "{}: judge_substrates: cbrun's judge provides none of {}",
                super::layout::TEST_MANIFEST,
                subs.join(", ")
            ));
        }
        None
    }

    /// The judge's test command with the hidden tests at `tests_root`:
    /// the test manifest's template, else the runner's, else the frozen
    /// `test_command`.
    pub fn judge_command(&self, tests_root: &str) -> String {
        let tm = &self.test_manifest;
        let template = [
            &tm.test_command_template,
            &self.manifest.runner.test_command_template,
        ]
        .into_iter()
        .find(|t| !t.trim().is_empty());
        match template {
            Some(t) => tm.expand_command(t, tests_root),
            None => tm.test_command.clone(),
        }
    }
}

/// Why a case folder cannot be loaded. Displays as one line naming the
/// first error's file and field.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("{}", summary(.errors))]
    Invalid {
        /// Every error found (at least one).
        errors: Vec<Problem>,
    },
}

fn summary(errors: &[Problem]) -> String {
    match errors {
        [] => "invalid case".to_string(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} (and {} more errors)", rest.len()),
    }
}

/// Loads a case folder; fails on the first [`check`](super::check) error.
pub fn load(case_dir: &Path) -> Result<Case, CaseError> {
    let ins = inspect(case_dir);
    match ins.case {
        Some(case) => Ok(case),
        None => Err(CaseError::Invalid {
            errors: ins.problems.into_iter().filter(Problem::is_error).collect(),
        }),
    }
}
