//! The plan of a run: which cases, which configurations (an agent and its
//! options, under a name), how many repeats.
//!
//! A plan comes from a plan file (`--plan FILE`, TOML, see [`PlanFile`]) or
//! from the command line, as a [`PlanRequest`]; [`resolve`] checks it
//! (every case loads, every agent resolves, every `replay:@NAME` exists in
//! every case, every option parses) and fixes what it depends on: each
//! case's content hash, each spec's hash, each image's digest. The result,
//! a [`ResolvedPlan`], is what `plan.toml` in the run folder holds; a run
//! folder takes one plan only ([`ResolvedPlan::differs_from`]).
//!
//! Trials are numbered `0..total` with the repeat outermost, then the
//! case, then the configuration: a run stopped half-way has every
//! case and configuration about equally often.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::agent::builtin::{self, AgentRef};
use crate::case::Case;
use crate::image::store::Store;
use crate::image::unpacked::{use_image, ImageUse};
use crate::net::policy::EgressPolicy;
use crate::sandbox::config::{ByteSize, Cpus, RootfsSource};
use crate::sandbox::run::HostView;
use crate::trial::clock;
use crate::trial::judge::JudgeOptions;
use crate::trial::phase::PhaseLimits;
use crate::trial::provenance;
use crate::trial::solve::{
    AgentRunOptions, Egress, SolveOptions, DEFAULT_SOLVE_BUDGET, DEFAULT_STALL,
};
use crate::trial::TrialOptions;

/// The resolved plan's name in the run folder.
pub const PLAN_FILE: &str = "plan.toml";

/// A bad plan: one line naming the file (or flag) and the field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

fn err(msg: impl Into<String>) -> PlanError {
    PlanError(msg.into())
}

/// A plan file as written by hand:
///
/// ```toml
/// cases = ["cases/case00*"]     # paths or globs, relative to this file
/// all = ["more-cases"]          # every case folder inside these folders
/// repeats = 2
/// [[config]]
/// name = "ref"
/// agent = "replay:@reference"
/// [[config]]
/// name = "codex-small"
/// agent = "codex"
/// model = "openai/some-model"
/// solve_timeout = 3600
/// memory = "4G"
/// [slurm]                      # only for --backend slurm
/// partition = "short"
/// ```
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    #[serde(default)]
    pub cases: Vec<String>,
    #[serde(default)]
    pub all: Vec<String>,
    pub repeats: Option<u32>,
    #[serde(default, rename = "config")]
    pub configs: Vec<ConfigSpec>,
    /// `[slurm]`: how `--backend slurm` submits (see [`super::slurm`]).
    pub slurm: Option<super::slurm::SlurmOptions>,
}

/// One configuration as given; what is left out takes `cbrun trial`'s
/// defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSpec {
    /// Required in a plan file; derived from the agent on the command line.
    pub name: Option<String>,
    pub agent: String,
    pub model: Option<String>,
    pub solve_timeout: Option<f64>,
    pub stall_timeout: Option<f64>,
    pub judge_timeout: Option<f64>,
    pub memory: Option<String>,
    pub pids: Option<u64>,
    pub cpus: Option<f64>,
    pub require_limits: Option<bool>,
    pub net: Option<String>,
    pub allow: Option<Vec<String>>,
    pub allow_registries: Option<bool>,
    pub resolve: Option<Vec<String>>,
    pub image: Option<String>,
    pub rootfs: Option<String>,
}

/// A plan before it is checked.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// Where the plan came from, for messages: the plan file, or `command line`.
    pub origin: String,
    pub cases: Vec<PathBuf>,
    pub repeats: u32,
    pub configs: Vec<ConfigSpec>,
    /// The plan file's `[slurm]` table, when it has one.
    pub slurm: Option<super::slurm::SlurmOptions>,
}

impl PlanFile {
    /// Reads and parses `path`; case patterns are taken relative to its folder.
    pub fn load(path: &Path) -> Result<PlanRequest, PlanError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("{origin}: {e}")))?;
        let file: PlanFile = toml::from_str(&text).map_err(|e| {
            let at = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                    format!(" (line {line})")
                })
                .unwrap_or_default();
            err(format!("{origin}{at}: {}", one_line(e.message())))
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut cases = expand_cases(&file.cases, base, &origin)?;
        for d in &file.all {
            cases.extend(all_cases(&base.join(d), &format!("{origin}: all"))?);
        }
        if file.configs.is_empty() {
            return Err(err(format!(
                "{origin}: config: no [[config]] table (a configuration names an agent)"
            )));
        }
        for (i, c) in file.configs.iter().enumerate() {
            if c.name.is_none() {
                return Err(err(format!(
                    "{origin}: config {}: name: missing (every [[config]] has a name)",
                    i + 1
                )));
            }
        }
        Ok(PlanRequest {
            origin,
            cases,
            repeats: file.repeats.unwrap_or(1),
            configs: file.configs,
            slurm: file.slurm,
        })
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Case folders from paths or glob patterns (relative to `base`), in the
/// order given, each pattern's matches sorted.
pub fn expand_cases(
    patterns: &[String],
    base: &Path,
    origin: &str,
) -> Result<Vec<PathBuf>, PlanError> {
    let mut out = Vec::new();
    for p in patterns {
        let full = if Path::new(p).is_absolute() {
            PathBuf::from(p)
        } else {
            base.join(p)
        };
        let has_glob = p.contains(['*', '?', '[']);
        if !has_glob {
            out.push(full);
            continue;
        }
        let pattern = full.to_string_lossy().into_owned();
        let mut hits: Vec<PathBuf> = glob::glob(&pattern)
            .map_err(|e| err(format!("{origin}: cases: {p:?}: {e}")))?
            .filter_map(Result::ok)
            .filter(|h| h.is_dir())
            .collect();
        if hits.is_empty() {
            return Err(err(format!("{origin}: cases: {p:?} matches no folder")));
        }
        hits.sort();
        out.extend(hits);
    }
    Ok(out)
}

/// Every case folder directly inside `dir` (a folder with
/// `source/manifest.json`), sorted by name.
pub fn all_cases(dir: &Path, origin: &str) -> Result<Vec<PathBuf>, PlanError> {
    let rd = std::fs::read_dir(dir).map_err(|e| err(format!("{origin} {}: {e}", dir.display())))?;
    let mut out: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(crate::case::layout::MANIFEST).is_file())
        .collect();
    out.sort();
    if out.is_empty() {
        return Err(err(format!(
            "{origin} {}: no case folders inside (a case has source/manifest.json)",
            dir.display()
        )));
    }
    Ok(out)
}

/// `plan.toml`: the plan as it was checked, and what it depends on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedPlan {
    /// Stable for the life of the run folder.
    pub run_id: String,
    pub created_at: String,
    pub cbrun_version: String,
    pub repeats: u32,
    #[serde(rename = "case")]
    pub cases: Vec<CaseEntry>,
    #[serde(rename = "config")]
    pub configs: Vec<ConfigEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseEntry {
    pub id: String,
    /// Absolute.
    pub path: PathBuf,
    /// [`provenance::case_hash`] over the files a trial uses.
    pub sha256: String,
    /// `runner.language_label`.
    pub language: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigEntry {
    pub name: String,
    /// As resolved: a shipped name, an absolute spec path, `replay:@NAME`,
    /// `replay:/abs/dir` or `none`.
    pub agent: String,
    /// The spec's hash (absent for replay and none).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub spec_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<String>,
    pub solve_timeout: f64,
    pub stall_timeout: f64,
    /// Replaces the case's judge budget when given.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub judge_timeout: Option<f64>,
    pub memory: String,
    pub pids: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpus: Option<f64>,
    pub require_limits: bool,
    pub net: String,
    pub allow: Vec<String>,
    pub allow_registries: bool,
    pub resolve: Vec<String>,
    /// An image from the store, as named; `image_id` pins its digest.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub image_id: Option<String>,
    /// `host` or an absolute directory, when no image is used.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rootfs: Option<String>,
}

/// One trial of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// 0-based: `cbrun run --worker DIR --task N`, a Slurm array index.
    pub n: usize,
    pub case: usize,
    pub config: usize,
    /// 1-based.
    pub repeat: u32,
    pub case_id: String,
    pub config_name: String,
}

impl Task {
    /// `case001/ref/1`.
    pub fn label(&self) -> String {
        format!("{}/{}/{}", self.case_id, self.config_name, self.repeat)
    }
}

impl ResolvedPlan {
    pub fn total(&self) -> usize {
        self.repeats as usize * self.cases.len() * self.configs.len()
    }

    /// Trial `n` (see the module docs for the order).
    pub fn task(&self, n: usize) -> Option<Task> {
        if n >= self.total() {
            return None;
        }
        let k = self.configs.len();
        let c = self.cases.len();
        let config = n % k;
        let case = (n / k) % c;
        let repeat = (n / (k * c)) as u32 + 1;
        Some(Task {
            n,
            case,
            config,
            repeat,
            case_id: self.cases[case].id.clone(),
            config_name: self.configs[config].name.clone(),
        })
    }

    pub fn tasks(&self) -> impl Iterator<Item = Task> + '_ {
        (0..self.total()).filter_map(|n| self.task(n))
    }

    pub fn to_toml(&self) -> Result<String, PlanError> {
        let body = toml::to_string(self).map_err(|e| err(format!("{PLAN_FILE}: {e}")))?;
        Ok(format!(
            "# cbrun run: the resolved plan of this run folder (written once; `cbrun run --resume` reads it)\n{body}"
        ))
    }

    pub fn from_toml(text: &str, origin: &str) -> Result<ResolvedPlan, PlanError> {
        let plan: ResolvedPlan = toml::from_str(text)
            .map_err(|e| err(format!("{origin}: {}", one_line(e.message()))))?;
        if plan.cases.is_empty() || plan.configs.is_empty() || plan.repeats == 0 {
            return Err(err(format!(
                "{origin}: a plan needs cases, configs and repeats"
            )));
        }
        Ok(plan)
    }

    /// How `self` (the folder's plan) differs from `other` in what the
    /// trials are, ignoring the run's id and times; `None` when they are
    /// the same plan.
    pub fn differs_from(&self, other: &ResolvedPlan) -> Option<String> {
        if self.repeats != other.repeats {
            return Some(format!(
                "repeats {} here, {} now",
                self.repeats, other.repeats
            ));
        }
        let ids = |p: &ResolvedPlan| p.cases.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
        if ids(self) != ids(other) {
            return Some(format!(
                "cases {} here, {} now",
                ids(self).join(","),
                ids(other).join(",")
            ));
        }
        for (a, b) in self.cases.iter().zip(&other.cases) {
            if a.path != b.path {
                return Some(format!(
                    "case {} is {} here, {} now",
                    a.id,
                    a.path.display(),
                    b.path.display()
                ));
            }
            if a.sha256 != b.sha256 {
                return Some(format!("case {} changed since the plan was made", a.id));
            }
        }
        let names = |p: &ResolvedPlan| p.configs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        if names(self) != names(other) {
            return Some(format!(
                "configs {} here, {} now",
                names(self).join(","),
                names(other).join(",")
            ));
        }
        for (a, b) in self.configs.iter().zip(&other.configs) {
            if a != b {
                return Some(format!(
                    "config {} differs ({})",
                    a.name,
                    first_field_diff(a, b)
                ));
            }
        }
        None
    }

    /// The largest memory limit of any configuration, in bytes.
    pub fn max_memory(&self) -> u64 {
        self.configs
            .iter()
            .map(|c| c.memory_bytes())
            .max()
            .unwrap_or(0)
    }
}

/// The first field that differs between two configurations, as `field`.
fn first_field_diff(a: &ConfigEntry, b: &ConfigEntry) -> String {
    let (ta, tb) = (toml::Value::try_from(a).ok(), toml::Value::try_from(b).ok());
    if let (Some(toml::Value::Table(ta)), Some(toml::Value::Table(tb))) = (ta, tb) {
        let mut keys: Vec<&String> = ta.keys().chain(tb.keys()).collect();
        keys.sort();
        keys.dedup();
        if let Some(k) = keys.into_iter().find(|k| ta.get(*k) != tb.get(*k)) {
            let show = |v: Option<&toml::Value>| v.map(|v| v.to_string()).unwrap_or("unset".into());
            return format!("{k}: {} here, {} now", show(ta.get(k)), show(tb.get(k)));
        }
    }
    "a field".into()
}

impl ConfigEntry {
    /// The memory limit of each sandbox of a trial (solve and judge run one
    /// after the other, so a trial needs one such amount at a time).
    pub fn memory_bytes(&self) -> u64 {
        ByteSize::parse("memory", &self.memory)
            .map(|b| b.0)
            .unwrap_or(8 << 30)
    }

    /// The agent again, as the worker uses it: a spec must still have the
    /// hash the plan recorded.
    pub fn agent(&self) -> Result<AgentRef, PlanError> {
        let agent = builtin::resolve(&self.agent)
            .map_err(|e| err(format!("config {}: agent: {e}", self.name)))?;
        if let AgentRef::Spec(spec, _) = &agent {
            if Some(spec.hash()) != self.spec_sha256 {
                return Err(err(format!(
                    "config {}: agent {}: the spec changed since the plan was made",
                    self.name, self.agent
                )));
            }
        }
        Ok(agent)
    }

    /// The root both sandboxes run on; an image's use lasts as long as
    /// the returned value.
    pub fn root(&self, host: &HostView) -> Result<Root, PlanError> {
        match &self.image {
            Some(name) => {
                let u = open_image(name, host)
                    .map_err(|e| err(format!("config {}: image: {e}", self.name)))?;
                if self
                    .image_id
                    .as_deref()
                    .is_some_and(|id| id != u.root.label)
                {
                    return Err(err(format!(
                        "config {}: image {name} is {} now, {} when the plan was made",
                        self.name,
                        u.root.label,
                        self.image_id.as_deref().unwrap_or("")
                    )));
                }
                Ok(Root {
                    rootfs: RootfsSource::Image(u.root.clone()),
                    env: u.env.clone(),
                    _image: Some(u),
                })
            }
            None => Ok(Root {
                rootfs: match self.rootfs.as_deref() {
                    None | Some("host") => RootfsSource::Host,
                    Some(d) => RootfsSource::Dir(PathBuf::from(d)),
                },
                env: Vec::new(),
                _image: None,
            }),
        }
    }

    /// The trial options of this configuration, on `root`.
    pub fn trial_options(&self, root: &Root) -> Result<TrialOptions, PlanError> {
        let at = |field: &str, e: &dyn std::fmt::Display| {
            err(format!("config {}: {field}: {e}", self.name))
        };
        let limits = PhaseLimits {
            memory: Some(ByteSize::parse("memory", &self.memory).map_err(|e| at("memory", &e))?),
            pids: Some(self.pids),
            cpus: self.cpus.map(Cpus),
            require: self.require_limits,
        };
        let egress = match self.net.as_str() {
            "none" => Egress::None,
            _ => Egress::Allowlist(
                EgressPolicy::parse(&self.allow, self.allow_registries, &self.resolve)
                    .map_err(|e| at("allow", &e))?,
            ),
        };
        let secs = |field: &str, v: f64| {
            positive_secs(v)
                .ok_or_else(|| at(field, &format!("{v}: must be a positive number of seconds")))
        };
        let agent = self.agent()?;
        let agent_run = AgentRunOptions::defaults_for(&agent)
            .map_err(|e| err(format!("config {}: {e}", self.name)))?;
        Ok(TrialOptions {
            solve: SolveOptions {
                agent,
                agent_run,
                model: self.model.clone(),
                budget: secs("solve_timeout", self.solve_timeout)?,
                stall: secs("stall_timeout", self.stall_timeout)?,
                egress,
                limits: limits.clone(),
                rootfs: root.rootfs.clone(),
                image_env: root.env.clone(),
                // A run's extra trust comes from the host's environment
                // (SSL_CERT_FILE and friends, passed by the specs).
                ca: None,
            },
            judge: JudgeOptions {
                rootfs: root.rootfs.clone(),
                image_env: root.env.clone(),
                timeout: self
                    .judge_timeout
                    .map(|t| secs("judge_timeout", t))
                    .transpose()?,
                limits,
                ..JudgeOptions::default()
            },
        })
    }
}

/// The root a configuration's sandboxes run on (see [`ConfigEntry::root`]).
pub struct Root {
    pub rootfs: RootfsSource,
    pub env: Vec<(String, String)>,
    _image: Option<ImageUse>,
}

/// An image from the default store, unpacked if needed; the error as text.
fn open_image(name: &str, host: &HostView) -> Result<ImageUse, String> {
    let store = Store::open(Store::default_root().map_err(|e| crate::error::chain(&e))?)
        .map_err(|e| crate::error::chain(&e))?;
    use_image(&store, name, &host.mapping, None).map_err(|e| crate::error::chain(&e))
}

fn positive_secs(v: f64) -> Option<std::time::Duration> {
    (v.is_finite() && v > 0.0 && v <= 1e7).then(|| std::time::Duration::from_secs_f64(v))
}

/// A configuration or control name: it names folders.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with(['.', '-'])
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A name for a configuration given by its agent alone (`--agent SPEC`).
pub fn default_name(agent: &str) -> String {
    let base = if let Some(name) = agent.strip_prefix("replay:@") {
        name.to_owned()
    } else if let Some(dir) = agent.strip_prefix("replay:") {
        let p = Path::new(dir);
        let last = p.file_name().map(|n| n.to_string_lossy().into_owned());
        match last.as_deref() {
            // controls/NAME/app: the control's name.
            Some("app") => p
                .parent()
                .and_then(|q| q.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "replay".into()),
            Some(n) => n.to_owned(),
            None => "replay".into(),
        }
    } else {
        let p = Path::new(agent);
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| agent.to_owned())
    };
    let clean: String = base
        .trim_start_matches(['.', '-'])
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if clean.is_empty() {
        "agent".into()
    } else {
        clean
    }
}

/// Checks `req` and fixes what it depends on. The images the plan names
/// are opened (and so held against `image gc`) for as long as the
/// returned uses live.
pub fn resolve(
    req: &PlanRequest,
    host: &HostView,
) -> Result<(ResolvedPlan, Vec<ImageUse>), PlanError> {
    let origin = &req.origin;
    if req.cases.is_empty() {
        return Err(err(format!("{origin}: cases: none given")));
    }
    if req.repeats == 0 || req.repeats > 100_000 {
        return Err(err(format!(
            "{origin}: repeats: {}: must be 1 to 100000",
            req.repeats
        )));
    }
    let mut cases: Vec<(Case, CaseEntry)> = Vec::new();
    for path in &req.cases {
        let case = crate::case::load(path).map_err(|e| err(e.to_string()))?;
        if let Some((_, other)) = cases.iter().find(|(c, _)| c.id == case.id) {
            return Err(err(format!(
                "{origin}: cases: {} and {} are both case {}",
                other.path.display(),
                case.dir.display(),
                case.id
            )));
        }
        let prov = provenance::of_case(&case.dir).map_err(|e| err(e.to_string()))?;
        let entry = CaseEntry {
            id: case.id.as_str().to_owned(),
            path: case.dir.clone(),
            sha256: prov.case_sha256,
            language: case.manifest.runner.language_label.clone(),
        };
        cases.push((case, entry));
    }
    let mut configs = Vec::new();
    let mut images = Vec::new();
    for (i, spec) in req.configs.iter().enumerate() {
        let (entry, image) = resolve_config(spec, i, &cases, origin, host)?;
        if configs.iter().any(|c: &ConfigEntry| c.name == entry.name) {
            return Err(err(format!(
                "{origin}: config {}: name: used twice (name them: --agent NAME=SPEC, or name = in the plan)",
                entry.name
            )));
        }
        images.extend(image);
        configs.push(entry);
    }
    if configs.is_empty() {
        return Err(err(format!("{origin}: config: none given (--agent SPEC)")));
    }
    let now = SystemTime::now();
    Ok((
        ResolvedPlan {
            run_id: new_run_id(now),
            created_at: clock::rfc3339(now),
            cbrun_version: env!("CARGO_PKG_VERSION").into(),
            repeats: req.repeats,
            cases: cases.into_iter().map(|(_, e)| e).collect(),
            configs,
        },
        images,
    ))
}

fn resolve_config(
    spec: &ConfigSpec,
    index: usize,
    cases: &[(Case, CaseEntry)],
    origin: &str,
    host: &HostView,
) -> Result<(ConfigEntry, Option<ImageUse>), PlanError> {
    let name = spec
        .name
        .clone()
        .unwrap_or_else(|| default_name(&spec.agent));
    let shown = format!(
        "{origin}: config {}",
        if spec.name.is_some() {
            name.clone()
        } else {
            (index + 1).to_string()
        }
    );
    if !valid_name(&name) {
        return Err(err(format!(
            "{shown}: name: {name:?}: 1-64 of A-Z a-z 0-9 . _ -, not starting with . or -"
        )));
    }
    let at = |field: &str, e: &dyn std::fmt::Display| {
        err(format!("{origin}: config {name}: {field}: {e}"))
    };
    let mut agent_arg = spec.agent.clone();
    let agent = builtin::resolve(&spec.agent).map_err(|e| at("agent", &e))?;
    let mut spec_sha256 = None;
    match &agent {
        AgentRef::ReplayControl(control) => {
            for (case, _) in cases {
                if !case.controls.iter().any(|c| &c.name == control) {
                    return Err(at(
                        "agent",
                        &format!(
                            "replay:@{control}: case {} has no control {control}",
                            case.id
                        ),
                    ));
                }
            }
        }
        AgentRef::Replay(dir) => {
            let abs = std::fs::canonicalize(dir).map_err(|e| at("agent", &e))?;
            agent_arg = format!("replay:{}", abs.display());
        }
        AgentRef::Spec(s, src) => {
            spec_sha256 = Some(s.hash());
            if let builtin::SpecSource::File(p) = src {
                let abs = std::fs::canonicalize(p).map_err(|e| at("agent", &e))?;
                agent_arg = abs.display().to_string();
            }
        }
        AgentRef::None => {}
    }
    let memory = spec.memory.clone().unwrap_or_else(|| "8G".into());
    ByteSize::parse("memory", &memory).map_err(|e| at("memory", &e))?;
    let pids = spec.pids.unwrap_or(4096);
    if pids == 0 {
        return Err(at("pids", &"0: must be at least 1"));
    }
    if let Some(c) = spec.cpus {
        c.to_string().parse::<Cpus>().map_err(|e| at("cpus", &e))?;
    }
    let net = spec.net.clone().unwrap_or_else(|| "none".into());
    let allow = spec.allow.clone().unwrap_or_default();
    let allow_registries = spec.allow_registries.unwrap_or(false);
    let resolve = spec.resolve.clone().unwrap_or_default();
    match net.as_str() {
        "none" => {
            if !allow.is_empty() || allow_registries || !resolve.is_empty() {
                return Err(at(
                    "net",
                    &"allow, allow_registries and resolve need net = \"allowlist\"",
                ));
            }
        }
        "allowlist" => {
            EgressPolicy::parse(&allow, allow_registries, &resolve).map_err(|e| at("allow", &e))?;
        }
        other => return Err(at("net", &format!("{other:?}: expected none or allowlist"))),
    }
    for (field, v) in [
        ("solve_timeout", spec.solve_timeout),
        ("stall_timeout", spec.stall_timeout),
        ("judge_timeout", spec.judge_timeout),
    ] {
        if let Some(v) = v {
            if positive_secs(v).is_none() {
                return Err(at(
                    field,
                    &format!("{v}: must be a positive number of seconds"),
                ));
            }
        }
    }
    if spec.image.is_some() && spec.rootfs.is_some() {
        return Err(at("image", &"not with rootfs (an image is the root)"));
    }
    let rootfs = match spec.rootfs.as_deref() {
        None if spec.image.is_some() => None,
        None | Some("host") => Some("host".to_owned()),
        Some(d) => {
            let abs = std::fs::canonicalize(d).map_err(|e| at("rootfs", &e))?;
            if !abs.is_dir() {
                return Err(at("rootfs", &format!("{}: not a directory", abs.display())));
            }
            Some(abs.display().to_string())
        }
    };
    let (image_id, image) = match &spec.image {
        Some(n) => {
            let u = open_image(n, host).map_err(|e| at("image", &e))?;
            (Some(u.root.label.clone()), Some(u))
        }
        None => (None, None),
    };
    Ok((
        ConfigEntry {
            name,
            agent: agent_arg,
            spec_sha256,
            model: spec.model.clone(),
            solve_timeout: spec
                .solve_timeout
                .unwrap_or(DEFAULT_SOLVE_BUDGET.as_secs_f64()),
            stall_timeout: spec.stall_timeout.unwrap_or(DEFAULT_STALL.as_secs_f64()),
            judge_timeout: spec.judge_timeout,
            memory,
            pids,
            cpus: spec.cpus,
            require_limits: spec.require_limits.unwrap_or(false),
            net,
            allow,
            allow_registries,
            resolve,
            image: spec.image.clone(),
            image_id,
            rootfs,
        },
        image,
    ))
}

/// `20261201T230000Z-ab12cd`: the time and six hex digits of a hash of
/// the time, the pid and the host.
fn new_run_id(now: SystemTime) -> String {
    let nanos = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let host = nix::unistd::gethostname().unwrap_or_default();
    let mut h = Sha256::new();
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(host.as_encoded_bytes());
    let d = h.finalize();
    format!(
        "{}-{:02x}{:02x}{:02x}",
        clock::compact(now),
        d[0],
        d[1],
        d[2]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(cases: &[&str], configs: &[&str], repeats: u32) -> ResolvedPlan {
        ResolvedPlan {
            run_id: "r".into(),
            created_at: "t".into(),
            cbrun_version: "v".into(),
            repeats,
            cases: cases
                .iter()
                .map(|c| CaseEntry {
                    id: c.to_string(),
                    path: PathBuf::from(format!("/cases/{c}")),
                    sha256: "0".repeat(64),
                    language: "Python".into(),
                })
                .collect(),
            configs: configs
                .iter()
                .map(|n| ConfigEntry {
                    name: n.to_string(),
                    agent: "none".into(),
                    spec_sha256: None,
                    model: None,
                    solve_timeout: 7200.0,
                    stall_timeout: 1800.0,
                    judge_timeout: None,
                    memory: "8G".into(),
                    pids: 4096,
                    cpus: None,
                    require_limits: false,
                    net: "none".into(),
                    allow: vec![],
                    allow_registries: false,
                    resolve: vec![],
                    image: None,
                    image_id: None,
                    rootfs: Some("host".into()),
                })
                .collect(),
        }
    }

    #[test]
    fn tasks_cover_the_matrix_once_with_the_repeat_outermost() {
        let p = plan(&["a", "b", "c"], &["x", "y"], 2);
        assert_eq!(p.total(), 12);
        let labels: Vec<String> = p.tasks().map(|t| t.label()).collect();
        assert_eq!(&labels[..4], ["a/x/1", "a/y/1", "b/x/1", "b/y/1"]);
        assert_eq!(labels[6], "a/x/2");
        let mut sorted = labels.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 12);
        assert!(p.task(12).is_none());
    }

    #[test]
    fn the_plan_round_trips_through_toml() {
        let mut p = plan(&["a"], &["x"], 3);
        p.configs[0].model = Some("m".into());
        p.configs[0].allow = vec!["api.example.com".into()];
        let text = p.to_toml().unwrap();
        assert!(
            text.contains("[[case]]") && text.contains("[[config]]"),
            "{text}"
        );
        assert_eq!(ResolvedPlan::from_toml(&text, "plan.toml").unwrap(), p);
    }

    #[test]
    fn a_different_plan_names_its_first_difference() {
        let a = plan(&["a", "b"], &["x"], 2);
        let mut b = a.clone();
        b.run_id = "other".into();
        b.created_at = "later".into();
        assert_eq!(a.differs_from(&b), None);
        b.repeats = 3;
        assert_eq!(a.differs_from(&b).unwrap(), "repeats 2 here, 3 now");
        let mut b = a.clone();
        b.cases[1].sha256 = "1".repeat(64);
        assert_eq!(
            a.differs_from(&b).unwrap(),
            "case b changed since the plan was made"
        );
        let mut b = a.clone();
        b.configs[0].memory = "4G".into();
        assert_eq!(
            a.differs_from(&b).unwrap(),
            "config x differs (memory: \"8G\" here, \"4G\" now)"
        );
    }

    #[test]
    fn names_are_derived_from_agents_and_must_name_folders() {
        assert_eq!(default_name("replay:@reference"), "reference");
        assert_eq!(default_name("replay:/c/case001/controls/stub/app"), "stub");
        assert_eq!(default_name("replay:/x/my ws"), "my-ws");
        assert_eq!(default_name("codex"), "codex");
        assert_eq!(default_name("/specs/mine.toml"), "mine");
        assert_eq!(default_name("none"), "none");
        for bad in ["", ".x", "-x", "a/b", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(valid_name("ref-1.2_b"));
    }

    #[test]
    fn a_plan_file_is_checked_field_by_field() {
        let d = std::env::temp_dir().join(format!("cbrun-planfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("cs/c1/source")).unwrap();
        std::fs::write(d.join("cs/c1/source/manifest.json"), "{}").unwrap();
        let f = d.join("p.toml");
        std::fs::write(&f, "cases = [\"cs/*\"]\nrepeats = 2\n[[config]]\nname = \"a\"\nagent = \"none\"\nsolve_timeout = 60\n").unwrap();
        let r = PlanFile::load(&f).unwrap();
        assert_eq!(r.cases, [d.join("cs/c1")]);
        assert_eq!(r.repeats, 2);
        assert_eq!(r.configs[0].solve_timeout, Some(60.0));
        std::fs::write(
            &f,
            "cases = [\"cs/*\"]\n[[config]]\nname = \"a\"\nagent = \"none\"\nmemroy = \"1G\"\n",
        )
        .unwrap();
        let e = PlanFile::load(&f).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{} (line 5): unknown field `memroy`", f.display())),
            "{e}"
        );
        assert!(!e.contains('\n'));
        std::fs::write(
            &f,
            "cases = [\"nothing*\"]\n[[config]]\nname = \"a\"\nagent = \"none\"\n",
        )
        .unwrap();
        let e = PlanFile::load(&f).unwrap_err().to_string();
        assert!(e.contains("cases: \"nothing*\" matches no folder"), "{e}");
        std::fs::write(&f, "cases = [\"cs/c1\"]\n[[config]]\nagent = \"none\"\n").unwrap();
        let e = PlanFile::load(&f).unwrap_err().to_string();
        assert!(
            e.ends_with("config 1: name: missing (every [[config]] has a name)"),
            "{e}"
        );
        let all = all_cases(&d.join("cs"), "--all").unwrap();
        assert_eq!(all, [d.join("cs/c1")]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
