//! Case packages: the on-disk format of a benchmark task ("case"), read and
//! validated before anything runs it.
//!
//! - [`schema`]: serde types for every JSON file of a case.
//! - [`check()`]: every problem found in a case folder, as `file: field: reason`.
//! - [`load()`]: a checked case as a typed [`Case`], for the trial runner.
//! - [`command`]: what the judge needs from a case (command expansion, timeout).
//! - [`envcheck`]: runs a case's `environment_checks` in solve-like and
//!   judge-like sandboxes (`cbrun case check --run`).
//!
//! The variants of the published format that are read are described in
//! `docs/case-format.md`.

pub mod command;
pub mod envcheck;
mod fields;
mod files;
mod parse;
pub mod problem;
pub mod schema;

mod check;
mod leaks;
mod load;
mod release;
mod terms;

pub use check::check;
pub use command::shell_quote;
pub use load::{load, Case, CaseError, Control, PublicDocs};
pub use problem::{Problem, Severity};
pub use schema::{
    AbsPath, CaseId, Denylist, Ecosystem, EnvironmentCheck, ExecutionGroups, Expect, JudgeBan,
    JudgeBans, JudgeProfile, Lenient, Manifest, Phase, Recipe, RelPath, Resolved, Resources,
    Reward, Sha256, Status, TechStack, TestManifest,
};

/// Paths inside a case folder, relative to it.
pub mod layout {
    pub const FULL_PRD: &str = "public/Full_PRD.md";
    pub const INTERFACE_CONTRACT: &str = "public/Interface_Contract.md";
    pub const HARDWARE_REQUIREMENTS: &str = "public/Hardware_Requirements.md";
    pub const PUBLIC_DIR: &str = "public";
    pub const MANIFEST: &str = "source/manifest.json";
    pub const RECIPE: &str = "source/recipe.lock.json";
    pub const RESOURCES: &str = "source/env/resources.json";
    pub const DENYLIST: &str = "source/denylist.json";
    /// Hidden tests: `test_files[]`/`support_files[]` are relative to this.
    pub const FINAL_DIR: &str = "milestones/final";
    pub const TEST_MANIFEST: &str = "milestones/final/test_manifest.json";
    pub const TESTS_DIR: &str = "milestones/final/tests";
    /// When present, the entry point of the hidden suite: where the
    /// published runner looks (`/tests/final/run_acceptance.sh`), then
    /// where cbrun's own sample cases have it.
    pub const ACCEPTANCE_SCRIPTS: [&str; 2] = [
        "milestones/final/run_acceptance.sh",
        "milestones/final/tests/run_acceptance.sh",
    ];
    /// The second of [`ACCEPTANCE_SCRIPTS`], named in messages.
    pub const ACCEPTANCE_SCRIPT: &str = "milestones/final/tests/run_acceptance.sh";
    pub const CONTROLS_DIR: &str = "controls";
    /// Marker planted in hidden tests; it must never reach `public/`.
    pub const CANARY: &str = "CBRUN-CANARY";
}
