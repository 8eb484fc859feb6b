//! A resolved configuration, turned back into what a worker runs: its
//! agent (the spec's hash checked), its root, its trial options.

use std::path::PathBuf;

use crate::agent::builtin::{self, AgentRef};
use crate::agent::cache::InstallCache;
use crate::image::store::Store;
use crate::image::unpacked::{use_image, ImageUse};
use crate::net::policy::EgressPolicy;
use crate::sandbox::config::{ByteSize, Cpus, RootfsSource};
use crate::sandbox::run::HostView;
use crate::trial::judge::JudgeOptions;
use crate::trial::phase::PhaseLimits;
use crate::trial::solve::{AgentRunOptions, Egress, SolveOptions};
use crate::trial::TrialOptions;
use crate::usage::PriceTable;

use super::{agent_run, err, ConfigEntry, PlanError};

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
        let agent_run = self.agent_run(&agent)?;
        let ca = agent_run::load_ca(&self.ca_bundle).map_err(|(f, e)| at(&f, &e))?;
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
                ca,
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

impl ConfigEntry {
    /// `env`, `env_pass`, `agent_version`, the price table (the pinned
    /// one, else `$CBRUN_PRICING`, else the built-in one) and the install
    /// cache (none with `fresh_install`); replays and `none` get nothing.
    fn agent_run(&self, agent: &AgentRef) -> Result<AgentRunOptions, PlanError> {
        let at = |field: &str, e: &dyn std::fmt::Display| {
            err(format!("config {}: {field}: {e}", self.name))
        };
        if !matches!(agent, AgentRef::Spec(..)) {
            return Ok(AgentRunOptions::default());
        }
        let pricing = match &self.pricing {
            Some(p) => agent_run::load_pricing(p).map_err(|e| at("pricing", &e))?,
            None => PriceTable::resolve(None).map_err(|e| at("pricing", &e))?,
        };
        Ok(AgentRunOptions {
            env: self
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            env_pass: self.env_pass.clone(),
            version: self.agent_version.clone(),
            pricing: Some(pricing),
            install_cache: if self.fresh_install {
                None
            } else {
                InstallCache::default_location().ok()
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
pub(super) fn open_image(name: &str, host: &HostView) -> Result<ImageUse, String> {
    let store = Store::open(Store::default_root().map_err(|e| crate::error::chain(&e))?)
        .map_err(|e| crate::error::chain(&e))?;
    use_image(&store, name, &host.mapping, None).map_err(|e| crate::error::chain(&e))
}

pub(super) fn positive_secs(v: f64) -> Option<std::time::Duration> {
    (v.is_finite() && v > 0.0 && v <= 1e7).then(|| std::time::Duration::from_secs_f64(v))
}
