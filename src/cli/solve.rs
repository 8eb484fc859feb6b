//! `cbrun solve CASE --agent SPEC`: only the solve phase (agent, submission
//! check, import scan) into a trial folder. Its options are also `trial`'s.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use cbrun::agent::builtin::{self, AgentRef};
use cbrun::agent::cache::InstallCache;
use cbrun::agent::render::needs_model;
use cbrun::net::policy::EgressPolicy;
use cbrun::sandbox::run::HostView;
use cbrun::trial;
use cbrun::trial::layout::TrialDir;
use cbrun::trial::solve::{
    run_solve, AgentRunOptions, Egress, SolveOptions, DEFAULT_SOLVE_BUDGET, DEFAULT_STALL,
};
use cbrun::usage::PriceTable;

use super::exit::ExitStatus;
use super::limits::{LimitArgs, Root};
use super::{load_case, secs};

#[derive(Args, Clone)]
pub struct SolveArgs {
    /// The case folder.
    pub case: PathBuf,
    /// `replay:DIR`, `none`, a spec file (.toml/.json) or a shipped spec name
    /// (codex, claude-code, opencode, cursor).
    #[arg(long, value_name = "SPEC")]
    agent: String,
    /// Model name handed to the agent.
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// Solve budget in seconds.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SOLVE_BUDGET.as_secs_f64())]
    solve_timeout: f64,
    /// Stop the agent after this many seconds with no output and no change under /app.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_STALL.as_secs_f64())]
    stall_timeout: f64,
    /// `none` (loopback only) or `allowlist` (egress through cbrun's proxy to --allow hosts).
    #[arg(long, default_value = "none", value_name = "none|allowlist")]
    net: String,
    /// A host the agent may reach with --net allowlist (`*.example.com`, `api.x.com:443`, `*`).
    #[arg(long = "allow", value_name = "HOST[:PORT]")]
    allow: Vec<String>,
    /// Let package registries through (PyPI, npm, crates.io, ...).
    #[arg(long)]
    allow_registries: bool,
    /// Resolve HOST to IP in the proxy instead of DNS.
    #[arg(long = "resolve", value_name = "HOST=IP")]
    resolve: Vec<String>,
    /// Set a variable in the agent's sandboxes (its name is recorded, not its value).
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// Forward a variable from cbrun's environment to the agent's sandboxes, when set.
    #[arg(long = "env-pass", value_name = "NAME")]
    env_pass: Vec<String>,
    /// Install this version of the agent's CLI instead of its spec's pin (`latest` is not cached).
    #[arg(long, value_name = "VERSION")]
    agent_version: Option<String>,
    /// Price table for cost_usd (default: $CBRUN_PRICING, else the built-in table).
    #[arg(long, value_name = "FILE")]
    pricing: Option<PathBuf>,
    /// Install the agent afresh: neither use nor fill the install cache.
    #[arg(long)]
    fresh_install: bool,
    /// Extra CA certificates (PEM) the agent's sandboxes trust, or `system` for the host's bundle (repeatable).
    #[arg(long, value_name = "FILE|system")]
    ca_bundle: Vec<cbrun::image::ca::CaSource>,
    /// The trial folder (must not exist); default ./cbrun-trials/<case>-<time>-<pid>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// A variable name for `--env`/`--env-pass`: a spec's rules.
fn env_name(flag: &str, name: &str) -> Result<()> {
    cbrun::agent::spec::check_env_name(name).map_err(|why| anyhow::anyhow!("{flag} {why}"))
}

/// `--env`, `--env-pass`, `--agent-version`, `--pricing`, the install cache.
fn agent_run_options(a: &SolveArgs, agent: &AgentRef) -> Result<AgentRunOptions> {
    let mut env = Vec::new();
    for kv in &a.env {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--env {kv}: expected K=V"))?;
        env_name("--env", k)?;
        if v.contains('\0') {
            bail!("--env {k}: the value holds a NUL byte");
        }
        env.push((k.to_owned(), v.to_owned()));
    }
    for n in &a.env_pass {
        env_name("--env-pass", n)?;
    }
    if let Some(v) = &a.agent_version {
        cbrun::agent::spec::check_version(v)
            .map_err(|why| anyhow::anyhow!("--agent-version {why}"))?;
    }
    let is_spec = matches!(agent, AgentRef::Spec(..));
    let pricing = if is_spec {
        Some(PriceTable::resolve(a.pricing.as_deref())?)
    } else {
        None
    };
    let install_cache = if is_spec && !a.fresh_install {
        match InstallCache::default_location() {
            Ok(c) => Some(c),
            Err(e) => {
                super::messages::warning(format_args!("agent installs are not cached: {e}"));
                None
            }
        }
    } else {
        None
    };
    Ok(AgentRunOptions {
        env,
        env_pass: a.env_pass.clone(),
        version: a.agent_version.clone(),
        pricing,
        install_cache,
    })
}

/// The solve phase's options from the command line, checked.
pub fn solve_options(a: &SolveArgs, root: &Root) -> Result<SolveOptions> {
    let mut agent = builtin::resolve(&a.agent)?;
    if let AgentRef::Replay(d) = &agent {
        let d =
            std::fs::canonicalize(d).with_context(|| format!("--agent replay:{}", d.display()))?;
        agent = AgentRef::Replay(d);
    }
    if let AgentRef::Spec(spec, _) = &agent {
        if a.model.is_none() && needs_model(spec) {
            bail!(
                "--agent {}: its command passes a model ({{model_quoted}}): give --model",
                a.agent
            );
        }
    }
    let agent_run = agent_run_options(a, &agent)?;
    let egress = match a.net.as_str() {
        "none" => {
            if !a.allow.is_empty() || a.allow_registries || !a.resolve.is_empty() {
                bail!("--allow, --allow-registries and --resolve need --net allowlist");
            }
            Egress::None
        }
        "allowlist" => {
            let p = EgressPolicy::parse(&a.allow, a.allow_registries, &a.resolve)?;
            // A loopback entry the proxy's own address would shadow is
            // refused before anything runs.
            cbrun::trial::egress::forwards(&p).map_err(anyhow::Error::msg)?;
            Egress::Allowlist(p)
        }
        other => bail!("--net: {other:?}: expected `none` or `allowlist`"),
    };
    Ok(SolveOptions {
        agent,
        model: a.model.clone(),
        budget: secs("--solve-timeout", a.solve_timeout)?,
        stall: secs("--stall-timeout", a.stall_timeout)?,
        egress,
        limits: a.limits.limits()?,
        rootfs: root.rootfs.clone(),
        image_env: root.env.clone(),
        agent_run,
        ca: cbrun::image::ca::CaBundle::load_all(&a.ca_bundle)?,
    })
}

/// `cbrun solve`: the solve options, and how to print.
#[derive(Args, Clone)]
pub struct SolveCommand {
    #[command(flatten)]
    solve: SolveArgs,
    /// Print only the solve report, as JSON, on stdout.
    #[arg(long)]
    json: bool,
}

pub fn exec(cmd: SolveCommand) -> Result<ExitStatus> {
    if cmd.json {
        super::messages::json_mode("solve");
    }
    let a = cmd.solve;
    let case = load_case(&a.case)?;
    let host = HostView::detect();
    let root = a.limits.root(&host)?;
    let opts = solve_options(&a, &root)?;
    for w in cbrun::trial::solve::solve_warnings(&opts) {
        super::messages::warning(w);
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| trial::default_out(case.id.as_str()));
    let dir = TrialDir::create(&out).with_context(|| format!("--out {}", out.display()))?;
    let report = run_solve(&case, &dir, &opts, &host);
    dir.remove_scratch();
    cbrun::fsutil::write_json_atomic(&dir.logs_cbrun().join("solve.json"), &report)?;
    if cmd.json {
        super::messages::json_result("solve", &report)?;
    } else {
        let end = serde_json::to_value(report.end).context("solve end")?;
        super::messages::status(format_args!(
            "solve: {}{}",
            end.as_str().unwrap_or("?"),
            report
                .error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
        println!("workspace {}", dir.workspace().display());
        println!("report {}", dir.logs_cbrun().join("solve.json").display());
    }
    Ok(ExitStatus::Success)
}
