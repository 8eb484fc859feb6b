//! The plan file as written by hand, and the case lists it (or the
//! command line) names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{err, PlanError};

/// A plan file as written by hand:
///
/// ```toml
/// cases = ["cases/case00*"]     # paths or globs, relative to this file
/// all = ["more-cases"]          # every case folder inside these folders
/// repeats = 2
/// [defaults]                   # every config's, unless it sets the field itself
/// env_pass = ["OPENAI_API_KEY"]
/// [[config]]
/// name = "ref"
/// agent = "replay:@reference"
/// [[config]]
/// name = "codex-small"
/// agent = "codex"
/// model = "openai/some-model"
/// solve_timeout = 3600
/// memory = "4G"
/// env = { OPENAI_BASE_URL = "http://127.0.0.1:8080/v1" }
/// ca_bundle = ["system", "corp-ca.pem"]
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
    /// `[defaults]`: options of every configuration that does not set
    /// them itself (no `name`, no `agent`).
    pub defaults: Option<ConfigSpec>,
    #[serde(default, rename = "config")]
    pub configs: Vec<ConfigSpec>,
    /// `[slurm]`: how `--backend slurm` submits (see [`super::slurm`]).
    pub slurm: Option<crate::run::slurm::SlurmOptions>,
}

/// One configuration as given; what is left out takes `cbrun trial`'s
/// defaults. Every option is one of `cbrun trial`'s flags, named alike
/// (`--env-pass` is `env_pass`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSpec {
    /// Required in a plan file; derived from the agent on the command line.
    pub name: Option<String>,
    /// Required (empty only in `[defaults]`, where it is refused).
    #[serde(default)]
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
    /// Set in the agent's sandboxes. The values are written to the run
    /// folder's `plan.toml`; secrets belong in `env_pass`.
    pub env: Option<BTreeMap<String, String>>,
    /// Forwarded from cbrun's environment, when set, at each trial's
    /// start; only the names are written anywhere.
    pub env_pass: Option<Vec<String>>,
    pub agent_version: Option<String>,
    /// A price table file (relative to the plan file).
    pub pricing: Option<PathBuf>,
    pub fresh_install: Option<bool>,
    /// `system` or PEM files (relative to the plan file).
    pub ca_bundle: Option<Vec<String>>,
}

impl ConfigSpec {
    /// This configuration with every option it leaves out taken from
    /// `d`: a field given here replaces `d`'s whole (lists and `env`
    /// included).
    pub fn over(self, d: &ConfigSpec) -> ConfigSpec {
        macro_rules! or {
            ($($f:ident),*) => { ConfigSpec { name: self.name, agent: self.agent, $($f: self.$f.or_else(|| d.$f.clone())),* } };
        }
        or!(
            model,
            solve_timeout,
            stall_timeout,
            judge_timeout,
            memory,
            pids,
            cpus,
            require_limits,
            net,
            allow,
            allow_registries,
            resolve,
            image,
            rootfs,
            env,
            env_pass,
            agent_version,
            pricing,
            fresh_install,
            ca_bundle
        )
    }
}

/// A plan before it is checked.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// Where the plan came from, for messages: the plan file, or `command line`.
    pub origin: String,
    pub cases: Vec<PathBuf>,
    pub repeats: u32,
    pub configs: Vec<ConfigSpec>,
    /// What relative option paths (`pricing`, `ca_bundle`) are relative
    /// to: the plan file's folder, or the working directory.
    pub base: PathBuf,
    /// The plan file's `[slurm]` table, when it has one.
    pub slurm: Option<crate::run::slurm::SlurmOptions>,
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
        let defaults = file.defaults.unwrap_or_default();
        if defaults.name.is_some() || !defaults.agent.is_empty() {
            return Err(err(format!(
                "{origin}: defaults: {}: not in [defaults] (each [[config]] has its own)",
                if defaults.name.is_some() {
                    "name"
                } else {
                    "agent"
                }
            )));
        }
        let mut configs = Vec::new();
        for (i, c) in file.configs.into_iter().enumerate() {
            let Some(name) = c.name.clone() else {
                return Err(err(format!(
                    "{origin}: config {}: name: missing (every [[config]] has a name)",
                    i + 1
                )));
            };
            if c.agent.is_empty() {
                return Err(err(format!(
                    "{origin}: config {name}: agent: missing (a configuration names an agent)"
                )));
            }
            configs.push(c.over(&defaults));
        }
        Ok(PlanRequest {
            origin,
            cases,
            repeats: file.repeats.unwrap_or(1),
            configs,
            base: base.to_path_buf(),
            slurm: file.slurm,
        })
    }
}

pub(super) fn one_line(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
