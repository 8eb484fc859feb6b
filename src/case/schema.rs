//! Serde types for the JSON files of a case (see the shared CASE-FORMAT.md).
//!
//! Fields the format marks optional default; documented fields cbrun does
//! not need default too (the checker warns when they are absent). Unknown
//! fields are kept in `extra` so records can carry them on.

use std::fmt;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const MANIFEST_SCHEMA: u64 = 3;
pub const RECIPE_SCHEMA: u64 = 1;
pub const DENYLIST_SCHEMA: u64 = 1;
pub const TEST_MANIFEST_SCHEMA: u64 = 3;
/// Upper bound of `runner.environment_checks[].timeout_sec`.
pub const MAX_ENV_CHECK_TIMEOUT_SEC: u64 = 300;

pub type Extra = Map<String, Value>;

// ------------------------------------------------------------ newtypes

macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident, $check:path) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(s: String) -> Result<Self, String> {
                $check(&s).map(|()| $name(s))
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_newtype!(
    /// A case identifier such as `case001`: 1-128 of `[A-Za-z0-9._-]`,
    /// not starting with `.` or `-` (it names folders and records).
    CaseId,
    check_case_id
);
string_newtype!(
    /// A relative path with no `..` component (`.` is allowed).
    RelPath,
    check_rel_path
);
string_newtype!(
    /// An absolute path with no `..` component.
    AbsPath,
    check_abs_path
);
string_newtype!(
    /// A SHA-256 digest: 64 hexadecimal digits.
    Sha256,
    check_sha256
);

fn check_case_id(s: &str) -> Result<(), String> {
    let ok_chars = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if s.is_empty() || s.len() > 128 || !ok_chars || s.starts_with(['.', '-']) {
        return Err(format!(
            "not a valid case id {s:?} (1-128 of A-Z a-z 0-9 . _ -, not starting with . or -)"
        ));
    }
    Ok(())
}

fn check_rel_path(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("empty path".into());
    }
    if s.contains('\0') {
        return Err(format!("path {s:?} contains a NUL byte"));
    }
    for c in Path::new(s).components() {
        match c {
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("path {s:?} must be relative"))
            }
            Component::ParentDir => return Err(format!("path {s:?} must not contain `..`")),
            Component::CurDir | Component::Normal(_) => {}
        }
    }
    Ok(())
}

fn check_abs_path(s: &str) -> Result<(), String> {
    if !s.starts_with('/') {
        return Err(format!("path {s:?} must be absolute"));
    }
    if s.contains('\0') || Path::new(s).components().any(|c| c == Component::ParentDir) {
        return Err(format!("path {s:?} must not contain `..` or NUL"));
    }
    Ok(())
}

fn check_sha256(s: &str) -> Result<(), String> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("not a sha256 digest (64 hex digits): {s:?}"));
    }
    Ok(())
}

/// A control's expected reward: 0 or 1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub enum Reward {
    #[default]
    Zero,
    One,
}

impl TryFrom<u64> for Reward {
    type Error = String;
    fn try_from(v: u64) -> Result<Self, String> {
        match v {
            0 => Ok(Reward::Zero),
            1 => Ok(Reward::One),
            n => Err(format!("reward must be 0 or 1, found {n}")),
        }
    }
}

impl From<Reward> for u64 {
    fn from(r: Reward) -> u64 {
        match r {
            Reward::Zero => 0,
            Reward::One => 1,
        }
    }
}

// ------------------------------------------------------------ enums

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Draft,
    Released,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ecosystem {
    Pip,
    Conda,
    Source,
    Npm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeBan {
    Socket,
    Subprocess,
    Network,
    FilesystemOutsideWorkspace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeProfile {
    Standard,
    Cow,
}

/// When an environment check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Solve,
    Judge,
    Both,
}

impl Phase {
    pub fn in_solve(self) -> bool {
        matches!(self, Phase::Solve | Phase::Both)
    }
    pub fn in_judge(self) -> bool {
        matches!(self, Phase::Judge | Phase::Both)
    }
}

fn dot() -> RelPath {
    RelPath(".".into())
}

// ------------------------------------------------------------ source/manifest.json

/// `source/manifest.json`, schema_version 3.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u64,
    pub case_id: CaseId,
    #[serde(default)]
    pub repo_slug: String,
    #[serde(default)]
    pub repository_url: String,
    #[serde(default)]
    pub commit: String,
    #[serde(default)]
    pub sensitive_terms: Vec<String>,
    #[serde(default)]
    pub init_metadata: Option<InitMetadata>,
    #[serde(default)]
    pub hardware_requirements: Option<HardwareRequirements>,
    pub status: Status,
    pub runner: Runner,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InitMetadata {
    #[serde(default)]
    pub suggested_neutral_name: String,
    #[serde(default)]
    pub tech_stack: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HardwareRequirements {
    #[serde(default)]
    pub schema_version: Option<u64>,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub profiles: Vec<HardwareProfile>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HardwareProfile {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub mandatory: bool,
    #[serde(default)]
    pub platforms: Vec<String>,
    #[serde(default)]
    pub required_platforms: Vec<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub probes: Vec<String>,
    #[serde(default)]
    pub setup_notes: String,
    #[serde(default)]
    pub build_notes: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `manifest.runner`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Runner {
    #[serde(default)]
    pub schema_version: Option<u64>,
    #[serde(default)]
    pub language_label: String,
    /// Builds the environment (agent image build time, with network).
    pub install_command: String,
    #[serde(default)]
    pub repo_warm_command: String,
    /// May be empty.
    pub build_command: String,
    #[serde(default)]
    pub env_probe_command: String,
    /// E.g. `PYTHONPATH=src python3 -m pytest {test_files}`.
    pub test_command_template: String,
    /// Relative to the workspace.
    #[serde(default = "dot")]
    pub workdir: RelPath,
    #[serde(default)]
    pub test_file_patterns: Vec<String>,
    #[serde(default)]
    pub source_file_patterns: Vec<String>,
    #[serde(default)]
    pub judge_bans: Vec<JudgeBan>,
    #[serde(default)]
    pub judge_profile: Option<JudgeProfile>,
    #[serde(default)]
    pub environment_checks: Vec<EnvironmentCheck>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvironmentCheck {
    pub name: String,
    pub command: String,
    pub phase: Phase,
    /// At most [`MAX_ENV_CHECK_TIMEOUT_SEC`].
    pub timeout_sec: u64,
    #[serde(flatten)]
    pub extra: Extra,
}

// ------------------------------------------------------------ source/recipe.lock.json

/// `source/recipe.lock.json`, schema_version 1.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recipe {
    pub schema_version: u64,
    pub case_id: CaseId,
    #[serde(default)]
    pub frozen_at: String,
    /// E.g. `codingbench-base/ubuntu:24.04`.
    #[serde(default)]
    pub base_image: String,
    pub runner: RecipeRunner,
    #[serde(default)]
    pub source_image: Option<SourceImage>,
    #[serde(default)]
    pub repo: Option<RepoPin>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecipeRunner {
    #[serde(default)]
    pub docker_image: String,
    pub install_command: String,
    pub build_command: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SourceImage {
    #[serde(default)]
    pub tag: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub digest: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RepoPin {
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub commit: String,
    #[serde(default)]
    pub tree_sha256: String,
    #[serde(default)]
    pub container_path: String,
    #[serde(flatten)]
    pub extra: Extra,
}

// ------------------------------------------------------------ source/env/resources.json

/// `source/env/resources.json` (optional, no schema_version).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Resources {
    #[serde(default)]
    pub source_revision: String,
    /// Where resources are unpacked in the agent image, e.g. `/opt/models`.
    pub destination: AbsPath,
    pub resources: Vec<Resource>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Resource {
    pub id: String,
    pub url: String,
    pub sha256: Sha256,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub unpacked_size: Option<u64>,
    /// Under the destination.
    #[serde(default)]
    pub directory: Option<RelPath>,
    /// Per-resource override of the top-level destination.
    #[serde(default)]
    pub destination: Option<AbsPath>,
    #[serde(default)]
    pub license: Option<Value>,
    #[serde(default)]
    pub source: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

// ------------------------------------------------------------ source/denylist.json

/// `source/denylist.json`, schema_version 1.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Denylist {
    pub schema_version: u64,
    pub case_id: CaseId,
    pub ecosystem: Ecosystem,
    /// Package names the package-manager shims refuse.
    #[serde(default)]
    pub install_ban: Vec<String>,
    /// Module/import names the post-submission scan and the judge refuse.
    #[serde(default)]
    pub import_ban: Vec<String>,
    #[serde(default)]
    pub notes: String,
    #[serde(flatten)]
    pub extra: Extra,
}

// ------------------------------------------------------------ milestones/final/test_manifest.json

/// `milestones/final/test_manifest.json`, schema_version 3.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestManifest {
    pub schema_version: u64,
    #[serde(default)]
    pub step: String,
    /// Relative to `milestones/final/`.
    pub test_files: Vec<RelPath>,
    #[serde(default)]
    pub support_files: Vec<RelPath>,
    #[serde(default)]
    pub test_command: String,
    #[serde(default)]
    pub test_command_template: String,
    #[serde(default = "dot")]
    pub workdir: RelPath,
    #[serde(default)]
    pub execution_groups: Vec<ExecutionGroup>,
    #[serde(default)]
    pub execution_policy: Option<ExecutionPolicy>,
    #[serde(default)]
    pub suite_wall_seconds: Option<f64>,
    #[serde(default)]
    pub judge_timeout_sec: Option<f64>,
    #[serde(default)]
    pub suite_wall_measured_on: Option<MeasuredOn>,
    #[serde(default)]
    pub expected_test_count: Option<u64>,
    #[serde(default)]
    pub test_count: Option<u64>,
    #[serde(default)]
    pub framework_label: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl TestManifest {
    /// The frozen test count, if any (`expected_test_count`, else `test_count`).
    pub fn expected_count(&self) -> Option<u64> {
        self.expected_test_count.or(self.test_count)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutionGroup {
    #[serde(default)]
    pub feature_ids: Vec<String>,
    pub test_files: Vec<RelPath>,
    #[serde(default)]
    pub test_command: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExecutionPolicy {
    #[serde(default)]
    pub schema_version: Option<u64>,
    /// Only `"none"` is valid.
    #[serde(default)]
    pub network: Option<String>,
    #[serde(default)]
    pub product_immutable: Option<bool>,
    #[serde(default)]
    pub build_owner: String,
    #[serde(default)]
    pub entrypoint: String,
    #[serde(default)]
    pub run_dependencies: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MeasuredOn {
    #[serde(default)]
    pub arch: String,
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub date: String,
    #[serde(flatten)]
    pub extra: Extra,
}

// ------------------------------------------------------------ controls/<name>/expect.json

/// `controls/<name>/expect.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Expect {
    /// A missing reward means 0.
    #[serde(default)]
    pub reward: Reward,
    #[serde(default)]
    pub note: String,
    /// Test ids or id suffixes that must show as FAILED (not ERROR).
    #[serde(default)]
    pub must_fail_tests: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn newtypes_validate() {
        assert!(CaseId::try_from("case001".to_string()).is_ok());
        assert!(CaseId::try_from("../x".to_string()).is_err());
        assert!(CaseId::try_from(String::new()).is_err());
        assert!(RelPath::try_from("tests/a.py".to_string()).is_ok());
        assert!(RelPath::try_from(".".to_string()).is_ok());
        assert!(RelPath::try_from("/etc/passwd".to_string()).is_err());
        assert!(RelPath::try_from("tests/../../x".to_string()).is_err());
        assert!(AbsPath::try_from("/opt/models".to_string()).is_ok());
        assert!(AbsPath::try_from("opt".to_string()).is_err());
        assert!(Sha256::try_from("ab".repeat(32)).is_ok());
        assert!(Sha256::try_from("zz".repeat(32)).is_err());
    }

    #[test]
    fn expect_defaults_and_reward() {
        let e: Expect = serde_json::from_value(json!({"note": "x", "other": 1})).unwrap();
        assert_eq!(e.reward, Reward::Zero);
        assert!(e.must_fail_tests.is_empty());
        assert_eq!(e.extra["other"], json!(1));
        let err = serde_json::from_value::<Expect>(json!({"reward": 2})).unwrap_err();
        assert!(err.to_string().contains("reward must be 0 or 1"), "{err}");
        let e: Expect = serde_json::from_value(json!({"reward": 1})).unwrap();
        assert_eq!(serde_json::to_value(&e).unwrap()["reward"], json!(1));
    }

    #[test]
    fn enums_parse() {
        let b: Vec<JudgeBan> =
            serde_json::from_value(json!(["socket", "filesystem_outside_workspace"])).unwrap();
        assert_eq!(b, [JudgeBan::Socket, JudgeBan::FilesystemOutsideWorkspace]);
        assert!(serde_json::from_value::<Ecosystem>(json!("pipx")).is_err());
        assert!(Phase::Both.in_judge() && !Phase::Solve.in_judge());
    }
}
