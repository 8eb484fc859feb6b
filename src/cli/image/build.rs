//! `cbrun image build CASE|RECIPE.toml`: the agent image of a case (its
//! recipe's base, resources and install command in a build sandbox;
//! never its build command), cached.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use cbrun::image::build::{self, BuildOptions};
use cbrun::image::ca::{CaBundle, CaSource};
use cbrun::sandbox::run::HostView;

use super::{store, ExitStatus};
use crate::cli::messages;

#[derive(clap::Args)]
pub struct Args {
    /// A case folder or a recipe file.
    source: PathBuf,
    /// Use this base image instead of the recipe's (after mapping).
    #[arg(long, value_name = "NAME[:TAG]")]
    base: Option<String>,
    /// Base-image mapping (TOML: published name = local image); default rootfs/base-images.toml.
    #[arg(long, value_name = "FILE")]
    base_map: Option<PathBuf>,
    /// Where resources are looked up (by sha256) and downloaded to.
    #[arg(long, value_name = "DIR")]
    resource_cache: Option<PathBuf>,
    /// Wall-clock limit of the build sandbox.
    #[arg(long, default_value_t = 3600.0, value_name = "SECS")]
    timeout: f64,
    /// Build even when a cached image matches.
    #[arg(long)]
    no_cache: bool,
    /// Attempts of the install command in all (a failed one is retried on a fresh layer).
    #[arg(long, default_value_t = build::DEFAULT_ATTEMPTS, value_name = "N")]
    attempts: u32,
    /// Seconds between attempts.
    #[arg(long, default_value_t = build::DEFAULT_RETRY_DELAY.as_secs_f64(), value_name = "SECS")]
    retry_delay: f64,
    /// Extra CA certificates (PEM) the build sandbox trusts, or `system` for the host's bundle (repeatable).
    #[arg(long, value_name = "FILE|system")]
    ca_bundle: Vec<CaSource>,
    /// Print the build report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    if a.json {
        messages::json_mode("image build");
    }
    if !a.timeout.is_finite() || a.timeout <= 0.0 {
        bail!(
            "--timeout: {}: must be a positive number of seconds",
            a.timeout
        );
    }
    if a.attempts == 0 {
        bail!("--attempts: 0: must be at least 1");
    }
    if !a.retry_delay.is_finite() || a.retry_delay < 0.0 {
        bail!(
            "--retry-delay: {}: must be zero or a positive number of seconds",
            a.retry_delay
        );
    }
    let ca = CaBundle::load_all(&a.ca_bundle)?;
    let plan = if a.source.is_dir() {
        let case = cbrun::case::load(&a.source)?;
        build::plan_for_case(&case)
    } else {
        build::plan_for_recipe(&a.source)?
    };
    let map = match &a.base_map {
        Some(p) => build::parse_base_map(
            &std::fs::read_to_string(p).with_context(|| format!("--base-map {}", p.display()))?,
            &p.display().to_string(),
        )?,
        None => build::parse_base_map(build::DEFAULT_BASE_MAP, "rootfs/base-images.toml")?,
    };
    let s = store()?;
    let host = HostView::detect();
    messages::status("build: network: host (a build sandbox shares the host's network)");
    let r = build::build(
        &s,
        &plan,
        &BuildOptions {
            base_override: a.base,
            base_map: map,
            resource_cache: a.resource_cache,
            timeout: Duration::from_secs_f64(a.timeout),
            no_cache: a.no_cache,
            attempts: a.attempts,
            retry_delay: Duration::from_secs_f64(a.retry_delay),
            ca,
            pass_env: build::registry_env_from_host(),
        },
        &host,
    )?;
    for w in &r.warnings {
        messages::warning(w);
    }
    for t in r.attempts.iter().filter(|t| t.status != "ok") {
        messages::warning(format_args!(
            "build: attempt {}/{} failed ({}), retried",
            t.attempt, r.max_attempts, t.status
        ));
    }
    if let Some(c) = &r.ca_bundle {
        messages::status(format_args!("build: {}", c.describe("build sandbox")));
    }
    if a.json {
        messages::json_result("image build", &r)?;
        return Ok(ExitStatus::Success);
    }
    messages::status(format_args!(
        "build: {} in {:.2} s{}",
        if r.cache_hit { "cache hit" } else { "built" },
        r.seconds,
        r.log
            .as_ref()
            .map(|l| format!("; log {}", l.display()))
            .unwrap_or_default()
    ));
    println!("{} {}", r.image, r.manifest_digest);
    Ok(ExitStatus::Success)
}
