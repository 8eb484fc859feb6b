//! `cbrun solve CASE --agent SPEC`: only the solve phase (agent, submission
//! check, import scan) into a trial folder. Its options are also `trial`'s.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use cbrun::agent::builtin::{self, AgentRef};
use cbrun::net::policy::EgressPolicy;
use cbrun::sandbox::run::HostView;
use cbrun::trial;
use cbrun::trial::layout::TrialDir;
use cbrun::trial::solve::{run_solve, Egress, SolveOptions, DEFAULT_SOLVE_BUDGET, DEFAULT_STALL};

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
    /// Extra CA certificates (PEM) the agent's sandboxes trust, or `system` for the host's bundle (repeatable).
    #[arg(long, value_name = "FILE|system")]
    ca_bundle: Vec<cbrun::image::ca::CaSource>,
    /// The trial folder (must not exist); default ./cbrun-trials/<case>-<time>-<pid>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// The solve phase's options from the command line, checked.
pub fn solve_options(a: &SolveArgs, root: &Root) -> Result<SolveOptions> {
    let mut agent = builtin::resolve(&a.agent)?;
    if let AgentRef::Replay(d) = &agent {
        let d =
            std::fs::canonicalize(d).with_context(|| format!("--agent replay:{}", d.display()))?;
        agent = AgentRef::Replay(d);
    }
    let egress = match a.net.as_str() {
        "none" => {
            if !a.allow.is_empty() || a.allow_registries || !a.resolve.is_empty() {
                bail!("--allow, --allow-registries and --resolve need --net allowlist");
            }
            Egress::None
        }
        "allowlist" => Egress::Allowlist(EgressPolicy::parse(
            &a.allow,
            a.allow_registries,
            &a.resolve,
        )?),
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
        ca: cbrun::image::ca::CaBundle::load_all(&a.ca_bundle)?,
    })
}

pub fn exec(a: SolveArgs) -> Result<ExitStatus> {
    let case = load_case(&a.case)?;
    let host = HostView::detect();
    let root = a.limits.root(&host)?;
    let opts = solve_options(&a, &root)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| trial::default_out(case.id.as_str()));
    let dir = TrialDir::create(&out).with_context(|| format!("--out {}", out.display()))?;
    let report = run_solve(&case, &dir, &opts, &host);
    dir.remove_scratch();
    cbrun::fsutil::write_json_atomic(&dir.logs_cbrun().join("solve.json"), &report)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    println!("workspace {}", dir.workspace().display());
    Ok(ExitStatus::Success)
}
