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

mod agent_run;
mod entry;
mod file;
mod resolve;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use agent_run::{CaEntry, PinnedFile};
pub use entry::Root;
use file::one_line;
pub use file::{all_cases, expand_cases, ConfigSpec, PlanFile, PlanRequest};
pub use resolve::{default_name, resolve, valid_name};

/// The resolved plan's name in the run folder.
pub const PLAN_FILE: &str = "plan.toml";

/// A bad plan: one line naming the file (or flag) and the field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

fn err(msg: impl Into<String>) -> PlanError {
    PlanError(msg.into())
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
    // The fields below are left out when unset, so a plan that does not
    // use them reads (and compares) as it did before they existed.
    /// `env`: plain values, as the plan gave them (secrets go through
    /// `env_pass`, whose values are never written).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub env: BTreeMap<String, String>,
    /// `env_pass`: names only.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub env_pass: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent_version: Option<String>,
    /// A price table in place of `$CBRUN_PRICING` or the built-in one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pricing: Option<PinnedFile>,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub fresh_install: bool,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub ca_bundle: Vec<CaEntry>,
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

/// Which `env` variables differ, by name: the values stay out of
/// messages (and so out of logs).
fn env_diff(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> String {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    let what: Vec<String> = names
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| match (a.contains_key(k), b.contains_key(k)) {
            (true, true) => format!("{k} has another value"),
            (true, false) => format!("{k} set here, unset now"),
            _ => format!("{k} unset here, set now"),
        })
        .collect();
    format!("env: {}", what.join(", "))
}

/// The first field that differs between two configurations, as `field`.
fn first_field_diff(a: &ConfigEntry, b: &ConfigEntry) -> String {
    let (ta, tb) = (toml::Value::try_from(a).ok(), toml::Value::try_from(b).ok());
    if let (Some(toml::Value::Table(ta)), Some(toml::Value::Table(tb))) = (ta, tb) {
        let mut keys: Vec<&String> = ta.keys().chain(tb.keys()).collect();
        keys.sort();
        keys.dedup();
        if let Some(k) = keys.into_iter().find(|k| ta.get(*k) != tb.get(*k)) {
            if k == "env" {
                return env_diff(&a.env, &b.env);
            }
            let show = |v: Option<&toml::Value>| v.map(|v| v.to_string()).unwrap_or("unset".into());
            return format!("{k}: {} here, {} now", show(ta.get(k)), show(tb.get(k)));
        }
    }
    "a field".into()
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
                    env: BTreeMap::new(),
                    env_pass: vec![],
                    agent_version: None,
                    pricing: None,
                    fresh_install: false,
                    ca_bundle: vec![],
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
        // A plan that sets none of the agent options is written as one
        // from before they existed, so old run folders still compare equal.
        for k in [
            "env",
            "env_pass",
            "agent_version",
            "pricing",
            "fresh_install",
            "ca_bundle",
        ] {
            assert!(!text.contains(&format!("\n{k} =")), "{k}: {text}");
        }
        let mut q = p.clone();
        q.configs[0].env.insert("A".into(), "1".into());
        q.configs[0].env_pass = vec!["KEY".into()];
        q.configs[0].fresh_install = true;
        q.configs[0].ca_bundle = vec![CaEntry {
            source: "system".into(),
            sha256: None,
        }];
        let text = q.to_toml().unwrap();
        assert_eq!(ResolvedPlan::from_toml(&text, "plan.toml").unwrap(), q);
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
}
