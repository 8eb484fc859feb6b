//! `cbrun image build`: an agent image from a case (its recipe's base image
//! plus `install_command`, and its resources) or from a standalone recipe
//! file.
//!
//! As the published runner does, only `install_command` runs:
//! `build_command` is the agent's job (there is no upstream tree to
//! compile) and is never replayed. The command runs in a build sandbox on
//! the base image's overlay, as `bash -o pipefail -lc` (`/bin/sh -c` where
//! the image has no bash), with host networking (in the report), root
//! inside the user namespace holding the capabilities package managers
//! need ([`CapabilitySet::package_manager`]; every other sandbox has
//! none), the case's `source/env` read-only at `/env-assets` when it is
//! not empty, and, when asked, extra CA certificates (see [`super::ca`]).
//! A failed attempt is retried on a fresh layer, up to
//! [`BuildOptions::attempts`] in all, [`BuildOptions::retry_delay`] apart
//! (the published runner: 3 attempts, 15 s apart, on any non-zero exit).
//!
//! apt drops to `_apt` for downloads. As real root the sandbox maps 65536
//! ids, `_apt` among them, and the capabilities let apt switch to it. A
//! rootless build maps one id only (cbrun enters a user namespace of its
//! own), where `_apt` cannot exist: there the build-only setting
//! `APT::Sandbox::User "root"` keeps apt as root. That setting, and any
//! CA bundle standing in for the image's store, are taken out of the layer
//! before it is captured (`seed`).
//!
//! The overlay's upper directory is exactly what changed; it is turned into
//! one layer (whiteouts for deletions) on top of the base (`layer`). Results
//! are cached by (base manifest, install command, environment, resources,
//! `source/env` contents, registry variables passed through).
//!
//! Every build writes a record (the report, as JSON) next to its log in
//! the store's `logs/`; a built image's config carries the same facts as
//! `io.cbrun.build.*` labels.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::ca::{self, CaBundle, CaUse};
use super::digest::Digest;
use super::store::{remove_tree, ImageRef, Store, StoreError};
use super::unpacked::{use_image, UnpackedError};
use crate::case::Case;
use crate::sandbox::config::{
    BindMount, CapabilitySet, EnvVar, NetworkPolicy, RootfsSource, SandboxConfig, Stdio,
};
use crate::sandbox::idmap::MappingSource;
use crate::sandbox::run::{self, HostView};
use crate::sys::dir::Dir;
use crate::trial::stage::Stage;

mod layer;
mod resource;
mod seed;

/// Shipped base-image mapping (`rootfs/base-images.toml`).
pub const DEFAULT_BASE_MAP: &str = include_str!("../../rootfs/base-images.toml");

/// Where a case's `source/env` appears during the install.
pub const ENV_ASSETS: &str = "/env-assets";

/// Host variables the published runner passes into its install container
/// (registry mirrors). Passed the same way when set; the image keeps none.
pub const REGISTRY_ENV: &[&str] = &[
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "NPM_CONFIG_REGISTRY",
    "npm_config_registry",
    "MAVEN_OPTS",
    "PNPM_HOME",
];

/// The published runner's retry policy.
pub const DEFAULT_ATTEMPTS: u32 = 3;
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{file}: {field}: {why}")]
    Input {
        file: String,
        field: String,
        why: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Unpacked(#[from] UnpackedError),
    #[error("resource {id}: {why}")]
    Resource { id: String, why: String },
    #[error("build sandbox: {0}")]
    Sandbox(String),
    #[error("the install command failed ({status}) after {attempts} attempt(s); log: {log}")]
    Failed {
        status: String,
        attempts: u32,
        log: PathBuf,
    },
    #[error("capturing the layer: {path}")]
    Layer {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A standalone recipe (TOML): an image not tied to a case.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeFile {
    /// An image in the store (after base-map lookup).
    pub base: String,
    #[serde(default)]
    pub install_command: String,
    /// Accepted for the published shape; never run (the agent's job).
    #[serde(default)]
    pub build_command: String,
    /// `KEY=VALUE` set during the build and in the image.
    #[serde(default)]
    pub env: Vec<String>,
    /// Name for the result (default `cbrun-recipe/<file stem>`).
    #[serde(default)]
    pub name: Option<String>,
}

/// What to build, from a case or a recipe file.
#[derive(Debug, Clone)]
pub struct BuildPlan {
    pub base: String,
    pub install_command: String,
    /// Recorded, never run.
    pub build_command: String,
    pub env: Vec<(String, String)>,
    pub resources: Vec<ResourcePlan>,
    /// The case's `source/env`, when it holds anything.
    pub env_assets: Option<PathBuf>,
    /// Repository name of the result; the tag is the cache key.
    pub name: String,
    pub origin: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResourcePlan {
    pub id: String,
    pub url: String,
    pub sha256: String,
    /// Absolute path inside the image.
    pub dest: PathBuf,
}

#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Replaces the base from the plan/map.
    pub base_override: Option<String>,
    pub base_map: BTreeMap<String, String>,
    pub resource_cache: Option<PathBuf>,
    /// Wall-clock limit of each attempt.
    pub timeout: Duration,
    /// Build even when a cached result exists.
    pub no_cache: bool,
    /// Attempts in all (at least 1).
    pub attempts: u32,
    pub retry_delay: Duration,
    /// Extra trust for the build sandbox.
    pub ca: Option<CaBundle>,
    /// Host variables set during the install ([`REGISTRY_ENV`], as set).
    pub pass_env: Vec<(String, String)>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            base_override: None,
            base_map: BTreeMap::new(),
            resource_cache: None,
            timeout: Duration::from_secs(3600),
            no_cache: false,
            attempts: DEFAULT_ATTEMPTS,
            retry_delay: DEFAULT_RETRY_DELAY,
            ca: None,
            pass_env: Vec::new(),
        }
    }
}

/// The registry variables of [`REGISTRY_ENV`] set (and not empty) here.
pub fn registry_env_from_host() -> Vec<(String, String)> {
    REGISTRY_ENV
        .iter()
        .filter_map(|k| {
            let v = std::env::var(k).ok()?;
            let v = v.trim();
            (!v.is_empty()).then(|| (k.to_string(), v.to_owned()))
        })
        .collect()
}

/// One run of the install command.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    pub attempt: u32,
    /// `ok`, `exit N`, `signal N`, `timed out`, `interrupted`.
    pub status: String,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    pub image: String,
    pub manifest_digest: Digest,
    pub base: String,
    pub base_manifest: Digest,
    pub cache_hit: bool,
    pub seconds: f64,
    pub layer_bytes: u64,
    pub layer_entries: u64,
    pub whiteouts: u64,
    /// Always `host` for builds (installers need the network).
    pub network: &'static str,
    /// The command run: `install_command` only.
    pub ran: &'static str,
    /// How it was run (`bash -o pipefail -lc` or `/bin/sh -c`).
    pub shell: String,
    pub attempts: Vec<Attempt>,
    pub max_attempts: u32,
    pub retry_delay_sec: f64,
    /// What root held inside the build sandbox.
    pub capabilities: CapabilitySet,
    /// Who apt downloads as: `_apt`, or `root` (single-id mapping).
    pub apt_sandbox_user: &'static str,
    /// Whether the case's `source/env` was at `/env-assets`.
    pub env_assets: bool,
    /// Registry variables passed through, by name.
    pub pass_env: Vec<String>,
    pub ca_bundle: Option<CaUse>,
    pub warnings: Vec<String>,
    pub log: Option<PathBuf>,
    /// This report, as written next to the log.
    pub record: Option<PathBuf>,
}

pub fn parse_base_map(text: &str, file: &str) -> Result<BTreeMap<String, String>, BuildError> {
    toml::from_str(text).map_err(|e| BuildError::Input {
        file: file.to_owned(),
        field: "(toml)".into(),
        why: e.message().to_owned(),
    })
}

/// The plan for a case: recipe base, the install command (the manifest's
/// runner wins; the lock fills a blank, as the published runner merges
/// them), its resources and `source/env`.
pub fn plan_for_case(case: &Case) -> BuildPlan {
    let mut resources = Vec::new();
    if let Some(r) = &case.resources {
        for res in &r.resources {
            let mut dest = PathBuf::from(
                res.destination
                    .as_ref()
                    .map(|d| d.as_str())
                    .unwrap_or(r.destination.as_str()),
            );
            if let Some(d) = &res.directory {
                dest = dest.join(d.as_str());
            }
            resources.push(ResourcePlan {
                id: res.id.clone(),
                url: res.url.clone(),
                sha256: res.sha256.as_str().to_owned(),
                dest,
            });
        }
    }
    let pick = |manifest: &str, lock: &str| {
        if manifest.trim().is_empty() {
            lock.to_owned()
        } else {
            manifest.to_owned()
        }
    };
    let env_dir = case.dir.join("source/env");
    let env_assets = fs::read_dir(&env_dir)
        .ok()
        .and_then(|mut d| d.next())
        .map(|_| env_dir);
    BuildPlan {
        base: case.recipe.base_image.clone(),
        install_command: pick(
            &case.manifest.runner.install_command,
            &case.recipe.runner.install_command,
        ),
        build_command: pick(
            &case.manifest.runner.build_command,
            &case.recipe.runner.build_command,
        ),
        env: Vec::new(),
        resources,
        env_assets,
        name: format!("cbrun-case/{}", case.id.as_str()),
        origin: format!("case {}", case.dir.display()),
    }
}

pub fn plan_for_recipe(path: &Path) -> Result<BuildPlan, BuildError> {
    let file = path.display().to_string();
    let text = fs::read_to_string(path).map_err(|e| BuildError::Input {
        file: file.clone(),
        field: "(file)".into(),
        why: e.to_string(),
    })?;
    let r: RecipeFile = toml::from_str(&text).map_err(|e| BuildError::Input {
        file: file.clone(),
        field: e
            .span()
            .map(|s| text[..s.start].lines().count().to_string())
            .map(|l| format!("line {l}"))
            .unwrap_or_else(|| "(toml)".into()),
        why: e.message().to_owned(),
    })?;
    let mut env = Vec::new();
    for (i, kv) in r.env.iter().enumerate() {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(BuildError::Input {
                file,
                field: format!("env[{i}]"),
                why: format!("{kv:?}: expected KEY=VALUE"),
            });
        };
        env.push((k.to_owned(), v.to_owned()));
    }
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("recipe")
        .to_ascii_lowercase()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    Ok(BuildPlan {
        base: r.base,
        install_command: r.install_command,
        build_command: r.build_command,
        env,
        resources: Vec::new(),
        env_assets: None,
        name: r.name.unwrap_or(format!("cbrun-recipe/{stem}")),
        origin: format!("recipe {file}"),
    })
}

/// Who apt runs its downloads as under `mapping`: `_apt` needs more ids
/// than a single-id mapping has.
pub fn apt_sandbox_user(mapping: &MappingSource) -> &'static str {
    // Real root only: every other caller's sandbox maps onto the single id
    // of the user namespace cbrun enters (see `cgroupfs_shim`).
    match mapping {
        MappingSource::RootRange { len, .. } if *len > 100 => "_apt",
        _ => "root",
    }
}

/// Builds (or finds in the cache) the image for `plan`.
pub fn build(
    store: &Store,
    plan: &BuildPlan,
    opts: &BuildOptions,
    host: &HostView,
) -> Result<BuildReport, BuildError> {
    let started = Instant::now();
    let base = opts
        .base_override
        .clone()
        .or_else(|| opts.base_map.get(&plan.base).cloned())
        .unwrap_or_else(|| plan.base.clone());
    let base_img = store.resolve(&base).map_err(|e| BuildError::Input {
        file: plan.origin.clone(),
        field: "base image".into(),
        why: format!(
            "{base}: {} (map it in rootfs/base-images.toml or pass --base)",
            crate::error::Chain(&e)
        ),
    })?;
    let key = cache_key(&base_img.manifest_digest, plan, &opts.pass_env)?;
    let reference = ImageRef::with_tag(&plan.name, &key[..16])?;
    let mut report = BuildReport {
        image: reference.to_string(),
        manifest_digest: base_img.manifest_digest.clone(),
        base: base.clone(),
        base_manifest: base_img.manifest_digest.clone(),
        cache_hit: false,
        seconds: 0.0,
        layer_bytes: 0,
        layer_entries: 0,
        whiteouts: 0,
        network: "host",
        ran: "install_command",
        shell: String::new(),
        attempts: Vec::new(),
        max_attempts: opts.attempts.max(1),
        retry_delay_sec: opts.retry_delay.as_secs_f64(),
        capabilities: CapabilitySet::package_manager(),
        apt_sandbox_user: apt_sandbox_user(&host.mapping),
        env_assets: plan.env_assets.is_some(),
        pass_env: opts.pass_env.iter().map(|(k, _)| k.clone()).collect(),
        ca_bundle: None,
        warnings: Vec::new(),
        log: None,
        record: None,
    };
    if !plan.build_command.trim().is_empty() {
        report.warnings.push(
            "build_command is not run: building the product is the agent's job (as in the published runner)"
                .into(),
        );
    }
    if !opts.no_cache {
        if let Ok(hit) = store.resolve(&reference.to_string()) {
            report.manifest_digest = hit.manifest_digest;
            report.cache_hit = true;
            report.seconds = started.elapsed().as_secs_f64();
            return Ok(report);
        }
    }

    store.check_writable("building")?;
    let work = store.temp_path("build");
    let logs = store.root().join("logs");
    let _ = fs::create_dir_all(&logs);
    let stem = format!("build-{}-{}", plan.name.replace('/', "_"), &key[..16]);
    let log = logs.join(format!("{stem}.log"));
    let record = logs.join(format!("{stem}.json"));
    report.log = Some(log.clone());
    report.record = Some(record.clone());
    let result = build_in(store, plan, opts, host, &work, &log, &mut report).and_then(|upper| {
        let labels = labels(&report);
        layer::commit_layer(store, &base_img, &upper, plan, &labels, &reference, host)
    });
    let _ = remove_tree(&work);
    report.seconds = started.elapsed().as_secs_f64();
    if let Ok((manifest_digest, layer_bytes, layer_entries, whiteouts)) = &result {
        report.manifest_digest = manifest_digest.clone();
        report.layer_bytes = *layer_bytes;
        report.layer_entries = *layer_entries;
        report.whiteouts = *whiteouts;
    }
    // The record, failed builds included.
    if let Ok(bytes) = crate::fsutil::json_bytes(&report) {
        let _ = crate::fsutil::write_atomic(&record, &bytes);
    }
    result.map(|_| report)
}

/// The `io.cbrun.build.*` labels of a built image.
fn labels(r: &BuildReport) -> Vec<(String, String)> {
    let mut l = vec![
        ("io.cbrun.build.ran".to_owned(), r.ran.to_owned()),
        (
            "io.cbrun.build.attempts".to_owned(),
            format!("{}/{}", r.attempts.len(), r.max_attempts),
        ),
        (
            "io.cbrun.build.capabilities".to_owned(),
            r.capabilities
                .iter()
                .map(|c| {
                    serde_json::to_value(c)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join(","),
        ),
        (
            "io.cbrun.build.apt-sandbox-user".to_owned(),
            r.apt_sandbox_user.to_owned(),
        ),
    ];
    if let Some(c) = &r.ca_bundle {
        l.push((
            "io.cbrun.build.ca-bundle".to_owned(),
            format!(
                "{} ({} certificates; build sandbox only, not in the image)",
                c.source, c.certificates
            ),
        ));
    }
    l
}

fn cache_key(
    base: &Digest,
    plan: &BuildPlan,
    pass_env: &[(String, String)],
) -> Result<String, BuildError> {
    let assets = match &plan.env_assets {
        Some(d) => tree_digest(d)?,
        None => String::new(),
    };
    let v = serde_json::json!({
        "base": base.to_string(),
        "install": plan.install_command,
        "env": plan.env,
        "resources": plan.resources,
        "env_assets": assets,
        "registry": pass_env,
        "version": 2,
    });
    Ok(Digest::of_bytes(v.to_string().as_bytes()).hex().to_owned())
}

/// A digest of a directory's names, kinds, modes and contents (the case's
/// `source/env`), without following links.
fn tree_digest(dir: &Path) -> Result<String, BuildError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BuildError::Layer { path, source }
    };
    let mut lines = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let mut names: Vec<_> = fs::read_dir(&here)
            .map_err(err(&here))?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        for n in names {
            let r = rel.join(&n);
            let p = dir.join(&r);
            let m = fs::symlink_metadata(&p).map_err(err(&p))?;
            let mode = m.permissions().mode();
            let what = if m.is_dir() {
                stack.push(r.clone());
                "dir".to_owned()
            } else if m.file_type().is_symlink() {
                format!("link {}", fs::read_link(&p).map_err(err(&p))?.display())
            } else if m.is_file() {
                let f = fs::File::open(&p).map_err(err(&p))?;
                Digest::of_reader(f).map_err(err(&p))?.to_string()
            } else {
                "other".to_owned()
            };
            lines.push(format!("{} {mode:o} {what}", r.display()));
        }
    }
    lines.sort();
    Ok(Digest::of_bytes(lines.join("\n").as_bytes())
        .hex()
        .to_owned())
}

/// Runs the install command until it succeeds or the attempts run out;
/// returns the upper directory holding the successful attempt's changes.
fn build_in(
    store: &Store,
    plan: &BuildPlan,
    opts: &BuildOptions,
    host: &HostView,
    work: &Path,
    log: &Path,
    report: &mut BuildReport,
) -> Result<PathBuf, BuildError> {
    let lerr = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BuildError::Layer { path, source }
    };
    fs::create_dir_all(work).map_err(lerr(work))?;
    let _ = fs::remove_file(log);
    // Resources are fetched (and checked) once, placed on every attempt.
    let fetched = plan
        .resources
        .iter()
        .map(|r| resource::fetch_resource(r, opts.resource_cache.as_deref(), work))
        .collect::<Result<Vec<_>, _>>()?;
    // Bind sources the sandbox's root can reach (the store's tmp/ is
    // cbrun's alone): a stage under the state root, as trials use.
    let stage = Stage::new().map_err(|e| BuildError::Sandbox(format!("staging directory: {e}")))?;
    let assets = match &plan.env_assets {
        None => None,
        Some(d) => Some(match stage.tree(d, "env") {
            Ok(Some(p)) => p,
            Ok(None) => {
                report.warnings.push(format!(
                    "{} exceeds the staging caps: bound from the case folder",
                    d.display()
                ));
                d.clone()
            }
            Err(e) => return Err(BuildError::Sandbox(format!("staging {}: {e}", d.display()))),
        }),
    };
    let base = &report.base.clone();
    let max = opts.attempts.max(1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let attempt_dir = work.join(format!("attempt-{attempt}"));
        let upper = attempt_dir.join("upper");
        fs::create_dir_all(&upper).map_err(lerr(&upper))?;
        let u = use_image(store, base, &host.mapping, Some(upper.clone()))?;
        let lower = u.root.lower.clone();
        for (r, path) in plan.resources.iter().zip(&fetched) {
            let rel = r.dest.strip_prefix("/").unwrap_or(&r.dest);
            seed::mkdirs_as_lower(&lower, &upper, rel)?;
            resource::place_resource(r, path, &upper, &host.mapping)?;
        }
        let (seeds, ca_use) = seeds_for(&lower, opts, report.apt_sandbox_user);
        report.ca_bundle = ca_use;
        let placed = seed::place(&lower, &upper, seeds)?;
        let (cfg, shell) = build_config(plan, opts, &u, assets.as_deref(), stage.path(), log)?;
        report.shell = shell;
        note(
            log,
            &format!(
                "cbrun: build: attempt {attempt}/{max}: install_command ({}; build_command is the agent's and is not run)",
                report.shell
            ),
        );
        let t0 = Instant::now();
        let out = run::run(&cfg, host).map_err(|e| BuildError::Sandbox(crate::error::chain(&e)))?;
        drop(u);
        let status = if out.interrupted {
            "interrupted".to_owned()
        } else if out.timed_out {
            "timed out".to_owned()
        } else if out.exit_code == Some(0) {
            "ok".to_owned()
        } else if let Some(c) = out.exit_code {
            format!("exit {c}")
        } else {
            format!("signal {}", out.signal.unwrap_or(0))
        };
        report.attempts.push(Attempt {
            attempt,
            status: status.clone(),
            seconds: t0.elapsed().as_secs_f64(),
        });
        if status == "ok" {
            let mounts: Vec<&str> = [ENV_ASSETS, ca::BUNDLE_DIR].into();
            let w = seed::take_out(&lower, &upper, &placed, &mounts)?;
            report.warnings.extend(w);
            if attempt > 1 {
                report.warnings.push(format!(
                    "the install command succeeded on attempt {attempt} of {max}"
                ));
            }
            return Ok(upper);
        }
        let _ = remove_tree(&attempt_dir);
        // A timeout or an interrupt is not retried: another attempt would
        // take as long, or was not wanted.
        if attempt >= max || out.timed_out || out.interrupted {
            note(
                log,
                &format!("cbrun: build: attempt {attempt}/{max} failed ({status}); giving up"),
            );
            return Err(BuildError::Failed {
                status,
                attempts: attempt,
                log: log.to_path_buf(),
            });
        }
        note(
            log,
            &format!(
                "cbrun: build: attempt {attempt}/{max} failed ({status}); retrying on a fresh layer in {:.0} s",
                opts.retry_delay.as_secs_f64()
            ),
        );
        std::thread::sleep(opts.retry_delay);
    }
}

/// A line of cbrun's own in the build log.
fn note(log: &Path, line: &str) {
    if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(log) {
        let _ = writeln!(f, "{line}");
    }
}

/// The build-only files: the apt setting (where `_apt` cannot exist, or
/// for a CA), and the CA bundle standing in for the image's store.
fn seeds_for(
    lower: &Path,
    opts: &BuildOptions,
    apt_user: &str,
) -> (Vec<seed::Seed>, Option<CaUse>) {
    let mut seeds = Vec::new();
    let mut apt = String::new();
    if apt_user == "root" {
        apt.push_str("APT::Sandbox::User \"root\";\n");
    }
    let mut ca_use = None;
    if let Some(ca) = &opts.ca {
        apt.push_str(&format!(
            "Acquire::https::CaInfo \"{}\";\n",
            ca::BUNDLE_MOUNT
        ));
        let own = ca::root_bundle(lower);
        if let Some(own) = &own {
            seeds.push(seed::Seed {
                rel: ca::SYSTEM_STORE.into(),
                contents: ca.combined(Some(own)),
                appended: Some(ca.appended()),
                original: Some(own.clone()),
            });
        }
        ca_use = Some(ca.usage(own.is_some()));
    }
    if !apt.is_empty() {
        seeds.push(seed::Seed {
            rel: seed::APT_CONF.into(),
            contents: apt.into_bytes(),
            appended: None,
            original: None,
        });
    }
    (seeds, ca_use)
}

/// The build sandbox for one attempt.
fn build_config(
    plan: &BuildPlan,
    opts: &BuildOptions,
    u: &super::unpacked::ImageUse,
    assets: Option<&Path>,
    stage: &Path,
    log: &Path,
) -> Result<(SandboxConfig, String), BuildError> {
    let lower = &u.root.lower;
    let has_bash = Dir::open(lower)
        .map(|d| {
            ["usr/bin/bash", "bin/bash"]
                .iter()
                .any(|p| d.entry(p).ok().flatten().is_some())
        })
        .unwrap_or(false);
    let install = if plan.install_command.trim().is_empty() {
        "true".to_owned()
    } else {
        plan.install_command.clone()
    };
    let (command, shell) = if has_bash {
        (
            vec![
                "bash".into(),
                "-o".into(),
                "pipefail".into(),
                "-lc".into(),
                install,
            ],
            "bash -o pipefail -lc".to_owned(),
        )
    } else {
        (
            vec!["/bin/sh".into(), "-c".into(), install],
            "/bin/sh -c".to_owned(),
        )
    };
    let mut cfg = SandboxConfig::new(command);
    cfg.rootfs = RootfsSource::Image(u.root.clone());
    cfg.network = NetworkPolicy::Host;
    cfg.timeout = Some(opts.timeout);
    cfg.init = true;
    cfg.hostname = "build".into();
    cfg.caps = CapabilitySet::package_manager();
    cfg.stdout = Stdio::Append(log.to_path_buf());
    cfg.stderr = Stdio::Append(log.to_path_buf());
    if let Some(assets) = assets {
        cfg.binds.push(BindMount {
            src: assets.to_path_buf(),
            dst: PathBuf::from(ENV_ASSETS),
            readonly: true,
        });
    }
    let mut env: Vec<(String, String)> = u.env.clone();
    env.extend(plan.env.iter().cloned());
    env.extend(opts.pass_env.iter().cloned());
    if let Some(ca) = &opts.ca {
        let file = stage.join("ca-certificates.crt");
        let own = ca::root_bundle(lower);
        fs::write(&file, ca.combined(own.as_deref())).map_err(|source| BuildError::Layer {
            path: file.clone(),
            source,
        })?;
        cfg.binds.push(BindMount {
            src: file,
            dst: PathBuf::from(ca::BUNDLE_MOUNT),
            readonly: true,
        });
        env.extend(ca::env());
    }
    for (k, v) in [("DEBIAN_FRONTEND", "noninteractive"), ("HOME", "/root")] {
        if !env.iter().any(|(e, _)| e == k) {
            env.push((k.into(), v.into()));
        }
    }
    let mut vars: Vec<EnvVar> = Vec::new();
    for (k, v) in env {
        vars.retain(|e| e.key != k);
        vars.push(EnvVar { key: k, value: v });
    }
    cfg.env = vars;
    Ok((cfg, shell))
}
