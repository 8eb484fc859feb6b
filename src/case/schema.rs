//! Serde types for the JSON files of a case (see the shared CASE-FORMAT.md).
//!
//! The published cases are looser than the format document (see
//! `docs/case-format.md`): fields cbrun does not need default when absent,
//! informational blocks that fail to parse are kept raw ([`Lenient`]), and
//! unknown fields are kept in `extra`, so a document read and written back
//! keeps everything it held.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const MANIFEST_SCHEMA: u64 = 3;
/// Recipe versions read: 1 (frozen_at, source_image, repo) and 2 (resolved
/// package pins, `public`).
pub const RECIPE_SCHEMAS: &[u64] = &[1, 2];
pub const DENYLIST_SCHEMA: u64 = 1;
pub const TEST_MANIFEST_SCHEMA: u64 = 3;
/// Upper bound of `runner.environment_checks[].timeout_sec`.
pub const MAX_ENV_CHECK_TIMEOUT_SEC: f64 = 300.0;
/// `runner.environment_checks[].timeout_sec` when absent.
pub const DEFAULT_ENV_CHECK_TIMEOUT_SEC: f64 = 30.0;

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

/// A control's expected reward: 0 or 1 (`0.0`/`1.0`, the published
/// judge's own spelling, are read too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RewardNumber", into = "u64")]
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

/// What a reward is written as.
#[derive(Deserialize)]
#[serde(untagged)]
enum RewardNumber {
    Int(u64),
    Float(f64),
    Other(Value),
}

impl TryFrom<RewardNumber> for Reward {
    type Error = String;
    fn try_from(v: RewardNumber) -> Result<Self, String> {
        match v {
            RewardNumber::Int(n) => Reward::try_from(n),
            RewardNumber::Float(0.0) => Ok(Reward::Zero),
            RewardNumber::Float(1.0) => Ok(Reward::One),
            RewardNumber::Float(f) => Err(format!("reward must be 0 or 1, found {f}")),
            RewardNumber::Other(v) => Err(format!("reward must be 0 or 1, found {v}")),
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

impl Default for Phase {
    /// The published runner's default.
    fn default() -> Self {
        Phase::Both
    }
}

fn dot() -> RelPath {
    RelPath(".".into())
}

fn is_false(b: &bool) -> bool {
    !*b
}

// ------------------------------------------------------------ lenient values

/// An informational block nothing in a trial depends on (`init_metadata`,
/// `hardware_requirements`, the recipe's `source_image`...): parsed when it
/// has the documented shape, else kept as it was (the checker warns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Lenient<T> {
    Typed(T),
    Raw(Value),
}

impl<T> Lenient<T> {
    /// The parsed block, when it had the documented shape.
    pub fn typed(&self) -> Option<&T> {
        match self {
            Lenient::Typed(t) => Some(t),
            Lenient::Raw(_) => None,
        }
    }
}

/// `init_metadata.tech_stack`: a string in every published manifest, a
/// list in drafts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TechStack {
    Text(String),
    List(Vec<String>),
}

impl Default for TechStack {
    fn default() -> Self {
        TechStack::Text(String::new())
    }
}

impl TechStack {
    /// Each entry of the list, or the one text.
    pub fn items(&self) -> Vec<&str> {
        match self {
            TechStack::Text(t) if t.is_empty() => Vec::new(),
            TechStack::Text(t) => vec![t.as_str()],
            TechStack::List(l) => l.iter().map(String::as_str).collect(),
        }
    }
}

/// `runner.judge_bans`: a list, or (as the published runner also reads it)
/// one comma-separated string, written back in the form it was read in.
/// Either way each name must be known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JudgeBans(pub Vec<JudgeBan>, Option<String>);

impl JudgeBans {
    pub fn iter(&self) -> std::slice::Iter<'_, JudgeBan> {
        self.0.iter()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> IntoIterator for &'a JudgeBans {
    type Item = &'a JudgeBan;
    type IntoIter = std::slice::Iter<'a, JudgeBan>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl From<Vec<JudgeBan>> for JudgeBans {
    fn from(v: Vec<JudgeBan>) -> Self {
        JudgeBans(v, None)
    }
}

impl Serialize for JudgeBans {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.1 {
            Some(text) => text.serialize(s),
            None => self.0.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for JudgeBans {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<Value>),
            Text(String),
        }
        let (names, text): (Vec<Value>, _) = match Form::deserialize(d)? {
            Form::List(l) => (l, None),
            Form::Text(t) => (
                t.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(|n| Value::String(n.to_owned()))
                    .collect(),
                Some(t),
            ),
        };
        let bans = names
            .into_iter()
            .map(|n| JudgeBan::deserialize(n).map_err(D::Error::custom))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(JudgeBans(bans, text))
    }
}

// ------------------------------------------------------------ source/manifest.json

/// `source/manifest.json`, schema_version 3. Three shapes are published:
/// minimal (`case_id`, `runner`, `status`), released (plus
/// `sensitive_terms`, `init_metadata`) and full (plus the repository
/// identity and `hardware_requirements`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u64,
    pub case_id: CaseId,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub repo_slug: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub repository_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub commit: String,
    /// Upstream identity terms that must not appear in what the agent reads.
    #[serde(default)]
    pub sensitive_terms: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_metadata: Option<Lenient<InitMetadata>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_requirements: Option<Lenient<HardwareRequirements>>,
    /// Not read by the published runner; present in every published manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    pub runner: Runner,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InitMetadata {
    #[serde(default)]
    pub suggested_neutral_name: String,
    #[serde(default)]
    pub tech_stack: TechStack,
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

/// `manifest.runner`. Keys some published cases add and nothing in a
/// trial runs (`workspace_install_command`, `prepare_command`,
/// `workspace_prepare_command`, `test_command`, `docker_image`,
/// `docker_gpus`) stay in `extra`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Runner {
    #[serde(default)]
    pub schema_version: Option<u64>,
    #[serde(default)]
    pub language_label: String,
    /// Builds the environment (agent image build time, with network).
    pub install_command: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub repo_warm_command: String,
    /// May be empty (or `"true"`).
    pub build_command: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_probe_command: String,
    /// E.g. `PYTHONPATH=src python3 -m pytest {test_files}`.
    pub test_command_template: String,
    /// Relative to the workspace.
    #[serde(default = "dot")]
    pub workdir: RelPath,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_file_patterns: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_file_patterns: Vec<String>,
    #[serde(default, skip_serializing_if = "JudgeBans::is_empty")]
    pub judge_bans: JudgeBans,
    /// Absent means `standard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_profile: Option<JudgeProfile>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_checks: Vec<EnvironmentCheck>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Runner {
    /// `judge_profile`, `standard` when absent.
    pub fn profile(&self) -> JudgeProfile {
        self.judge_profile.unwrap_or(JudgeProfile::Standard)
    }
}

/// One `runner.environment_checks[]` entry: a command that must exit 0 in
/// the named phase's sandbox before a trial can be trusted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvironmentCheck {
    pub name: String,
    pub command: String,
    /// Absent means `both`.
    #[serde(default)]
    pub phase: Phase,
    /// Seconds, in (0, [`MAX_ENV_CHECK_TIMEOUT_SEC`]]; absent means
    /// [`DEFAULT_ENV_CHECK_TIMEOUT_SEC`].
    #[serde(default = "default_check_timeout")]
    pub timeout_sec: f64,
    #[serde(flatten)]
    pub extra: Extra,
}

fn default_check_timeout() -> f64 {
    DEFAULT_ENV_CHECK_TIMEOUT_SEC
}

impl EnvironmentCheck {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_sec.clamp(0.0, MAX_ENV_CHECK_TIMEOUT_SEC))
    }
}

// ------------------------------------------------------------ source/recipe.lock.json

/// `source/recipe.lock.json`, schema_version 1 or 2. Published shapes: v1
/// full (`frozen_at`, `runner.docker_image`, `source_image`, `repo`), v1
/// public (`frozen_at` (not always), `public`), v2 (`resolved`, `public`).
/// The agent image is `base_image` plus `runner.install_command`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recipe {
    pub schema_version: u64,
    pub case_id: CaseId,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub frozen_at: String,
    /// E.g. `codingbench-base/ubuntu:24.04`.
    #[serde(default)]
    pub base_image: String,
    /// Set by the published public extract (no seed repository or source image).
    #[serde(default, skip_serializing_if = "is_false")]
    pub public: bool,
    /// v2: the packages the install pinned, by ecosystem (`python`, `apt`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<Resolved>,
    pub runner: RecipeRunner,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_image: Option<Lenient<SourceImage>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<Lenient<RepoPin>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `resolved`: ecosystem -> package name -> pinned version, e.g.
/// `{"python": {"pytest": "8.4.1"}, "apt": {"curl": "8.5.0-2ubuntu10.6"}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Resolved(pub BTreeMap<String, BTreeMap<String, String>>);

impl Resolved {
    /// The pins of one ecosystem (empty when it has none).
    pub fn pins(&self, ecosystem: &str) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .get(ecosystem)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
    pub fn python(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pins("python")
    }
    pub fn apt(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pins("apt")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecipeRunner {
    #[serde(default, skip_serializing_if = "String::is_empty")]
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

/// `source/denylist.json`, schema_version 1. Optional: the published
/// runner treats it as private, and many published cases come without one
/// (then nothing is banned).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Denylist {
    pub schema_version: u64,
    pub case_id: CaseId,
    /// Required in a denylist file; `None` only for [`Denylist::none`].
    pub ecosystem: Option<Ecosystem>,
    /// Package names the package-manager shims refuse.
    #[serde(default)]
    pub install_ban: Vec<String>,
    /// Import tokens the post-submission scan and the judge refuse: module
    /// roots (`tomli`), a root with a slash (`tomli/`), a C++ namespace
    /// (`ada::`), headers and sources (`ada.h`), npm names (`@scope/x`).
    #[serde(default)]
    pub import_ban: Vec<String>,
    #[serde(default)]
    pub notes: String,
    /// Import roots a runtime provides without an install (Node's
    /// `process.versions.ada`...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_equivalents: Vec<RuntimeEquivalent>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Denylist {
    /// What a case without `source/denylist.json` bans: nothing.
    pub fn none(case_id: CaseId) -> Denylist {
        Denylist {
            schema_version: DENYLIST_SCHEMA,
            case_id,
            ecosystem: None,
            install_ban: Vec::new(),
            import_ban: Vec::new(),
            notes: String::new(),
            runtime_equivalents: Vec::new(),
            extra: Extra::new(),
        }
    }
}

/// One `runtime_equivalents[]` entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RuntimeEquivalent {
    #[serde(default)]
    pub import_root: String,
    /// `python3`, `node` or `system` in the published cases.
    #[serde(default)]
    pub runtime: String,
    #[serde(default)]
    pub evidence: String,
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
    /// Relative to `milestones/final/`. Published suites list their helper
    /// modules (`_harness.py`, `conftest.py`, `F01_helpers.py`) here too.
    pub test_files: Vec<RelPath>,
    /// Files (or directories) the tests need, relative to `milestones/final/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub support_files: Vec<RelPath>,
    /// The template expanded with the relative `test_files` (the published
    /// judge's command).
    #[serde(default)]
    pub test_command: String,
    #[serde(default)]
    pub test_command_template: String,
    #[serde(default = "dot")]
    pub workdir: RelPath,
    #[serde(default, skip_serializing_if = "ExecutionGroups::is_empty")]
    pub execution_groups: ExecutionGroups,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_policy: Option<Lenient<ExecutionPolicy>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_wall_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_timeout_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_wall_measured_on: Option<Lenient<MeasuredOn>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_test_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_count: Option<u64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub framework_label: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl TestManifest {
    /// The frozen test count, if any (`expected_test_count`, else `test_count`).
    pub fn expected_count(&self) -> Option<u64> {
        self.expected_test_count.or(self.test_count)
    }

    /// `judge_substrates` (published, newer line): judge-side facilities
    /// the hidden tests need, e.g. `cow_fs`.
    pub fn judge_substrates(&self) -> Vec<String> {
        match self.extra.get("judge_substrates") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_owned()],
            _ => Vec::new(),
        }
    }
}

/// `execution_groups`: a list of groups, or (newer published cases) a map
/// from feature id to its files, where `"F00"` may be empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExecutionGroups {
    List(Vec<ExecutionGroup>),
    ByFeature(BTreeMap<String, Vec<RelPath>>),
}

impl Default for ExecutionGroups {
    fn default() -> Self {
        ExecutionGroups::List(Vec::new())
    }
}

impl ExecutionGroups {
    pub fn is_empty(&self) -> bool {
        match self {
            ExecutionGroups::List(l) => l.is_empty(),
            ExecutionGroups::ByFeature(m) => m.is_empty(),
        }
    }

    /// Every group as (path of its file list in the document, feature
    /// ids, files).
    pub fn groups(&self) -> Vec<(String, Vec<&str>, &[RelPath])> {
        match self {
            ExecutionGroups::List(l) => l
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let ids = g.feature_ids.iter().map(String::as_str).collect();
                    (
                        format!("execution_groups[{i}].test_files"),
                        ids,
                        g.test_files.as_slice(),
                    )
                })
                .collect(),
            ExecutionGroups::ByFeature(m) => m
                .iter()
                .map(|(id, files)| {
                    (
                        format!("execution_groups.{id}"),
                        vec![id.as_str()],
                        files.as_slice(),
                    )
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// `controls/<name>/expect.json`. Published controls carry `reward` and
/// `note` only.
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
