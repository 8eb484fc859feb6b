//! `cbrun trial | solve | judge | validate`: the command-line edge of the
//! trial runner.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use cbrun::agent::builtin::{self, AgentRef};
use cbrun::case::Case;
use cbrun::net::policy::EgressPolicy;
use cbrun::sandbox::config::{ByteSize, Cpus, RootfsSource};
use cbrun::sandbox::run::HostView;
use cbrun::trial::judge::{run_judge, JudgeOptions};
use cbrun::trial::layout::TrialDir;
use cbrun::trial::phase::PhaseLimits;
use cbrun::trial::solve::{run_solve, Egress, SolveOptions, DEFAULT_SOLVE_BUDGET, DEFAULT_STALL};
use cbrun::trial::{self, validate, TrialOptions};

/// Limits shared by the solve and judge sandboxes.
#[derive(Args, Clone)]
pub struct LimitArgs {
    /// Memory limit per sandbox (e.g. 4G).
    #[arg(long, default_value = "8G", value_name = "SIZE")]
    memory: String,
    /// Maximum processes/threads per sandbox.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pids: u64,
    /// CPU quota per sandbox, in CPUs.
    #[arg(long, value_name = "N")]
    cpus: Option<Cpus>,
    /// Refuse to run when a limit cannot be enforced on this host.
    #[arg(long)]
    require_limits: bool,
    /// Root filesystem of both sandboxes: `host` or a directory.
    #[arg(
        long,
        default_value = "host",
        value_name = "host|DIR",
        conflicts_with = "image"
    )]
    rootfs: RootfsSource,
    /// Run both sandboxes on this image from the store (e.g. one made by
    /// `cbrun image build CASE`), each on its own writable layer.
    #[arg(long, value_name = "NAME[:TAG]")]
    image: Option<String>,
}

/// The root both phases run on, and what keeps an image's root alive.
struct Root {
    rootfs: RootfsSource,
    env: Vec<(String, String)>,
    _image: Option<cbrun::image::unpacked::ImageUse>,
}

impl LimitArgs {
    fn root(&self, host: &HostView) -> Result<Root> {
        match &self.image {
            None => Ok(Root {
                rootfs: self.rootfs.clone(),
                env: Vec::new(),
                _image: None,
            }),
            Some(name) => {
                let store =
                    cbrun::image::store::Store::open(cbrun::image::store::Store::default_root()?)?;
                let u = cbrun::image::unpacked::use_image(&store, name, &host.mapping, None)
                    .with_context(|| format!("--image {name}"))?;
                Ok(Root {
                    rootfs: RootfsSource::Image(u.root.clone()),
                    env: u.env.clone(),
                    _image: Some(u),
                })
            }
        }
    }

    fn limits(&self) -> Result<PhaseLimits> {
        if self.pids == 0 {
            bail!("--pids: 0: must be at least 1");
        }
        Ok(PhaseLimits {
            memory: Some(ByteSize::parse("--memory", &self.memory)?),
            pids: Some(self.pids),
            cpus: self.cpus,
            require: self.require_limits,
        })
    }
}

#[derive(Args, Clone)]
pub struct SolveArgs {
    /// The case folder.
    case: PathBuf,
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
    /// The trial folder (must not exist); default ./cbrun-trials/<case>-<time>-<pid>.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Args, Clone)]
pub struct TrialArgs {
    #[command(flatten)]
    solve: SolveArgs,
    /// Judge budget in seconds (replaces the case's).
    #[arg(long, value_name = "S")]
    judge_timeout: Option<f64>,
    /// Print the record as JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Clone)]
pub struct JudgeArgs {
    case: PathBuf,
    /// The workspace to judge (copied, never mounted).
    #[arg(long, value_name = "DIR")]
    workspace: PathBuf,
    /// Where the verifier files go (default ./cbrun-judge/<case>-<time>-<pid>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[arg(long, value_name = "S")]
    judge_timeout: Option<f64>,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Args, Clone)]
pub struct ValidateArgs {
    #[arg(required = true, value_name = "CASE")]
    cases: Vec<PathBuf>,
    #[arg(long, value_name = "S")]
    judge_timeout: Option<f64>,
    /// Keep the judge files here instead of a temporary folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

fn secs(what: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v <= 0.0 || v > 1e7 {
        bail!("{what}: {v:?}: must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(v))
}

fn load_case(dir: &Path) -> Result<Case> {
    Ok(cbrun::case::load(dir)?)
}

fn solve_options(a: &SolveArgs, root: &Root) -> Result<SolveOptions> {
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
    })
}

fn judge_options(l: &LimitArgs, root: &Root, timeout: Option<f64>) -> Result<JudgeOptions> {
    Ok(JudgeOptions {
        rootfs: root.rootfs.clone(),
        image_env: root.env.clone(),
        timeout: timeout.map(|t| secs("--judge-timeout", t)).transpose()?,
        limits: l.limits()?,
        ..JudgeOptions::default()
    })
}

pub fn trial(a: TrialArgs) -> Result<i32> {
    // Everything is checked before the trial folder exists.
    let case = load_case(&a.solve.case)?;
    let host = HostView::detect();
    let root = a.solve.limits.root(&host)?;
    let opts = TrialOptions {
        solve: solve_options(&a.solve, &root)?,
        judge: judge_options(&a.solve.limits, &root, a.judge_timeout)?,
    };
    let out = a
        .solve
        .out
        .clone()
        .unwrap_or_else(|| trial::default_out(case.id.as_str()));
    let (dir, rec) = trial::run_trial(&case, &out, &opts, &host)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rec)?);
    } else {
        eprintln!(
            "cbrun: {} · {} · {} · reward {}{}",
            rec.case_id,
            rec.agent_spec_name,
            serde_json::to_value(rec.terminal_status)?
                .as_str()
                .unwrap_or("?"),
            rec.reward,
            rec.judge_error
                .as_deref()
                .or(rec.error.as_deref())
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
        println!("reward {}", rec.reward);
        println!("record {}", dir.record().display());
    }
    Ok(0)
}

pub fn solve(a: SolveArgs) -> Result<i32> {
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
    Ok(0)
}

pub fn judge(a: JudgeArgs) -> Result<i32> {
    let case = load_case(&a.case)?;
    let host = HostView::detect();
    let root = a.limits.root(&host)?;
    let opts = judge_options(&a.limits, &root, a.judge_timeout)?;
    let ws = std::fs::canonicalize(&a.workspace)
        .with_context(|| format!("--workspace {}", a.workspace.display()))?;
    if !ws.is_dir() {
        bail!("--workspace {}: not a directory", ws.display());
    }
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("cbrun-judge").join(
            trial::default_out(case.id.as_str())
                .file_name()
                .unwrap_or_default(),
        )
    });
    let dir = TrialDir::open_or_create(&out).with_context(|| format!("--out {}", out.display()))?;
    let report = run_judge(&case, &ws, &dir, &opts, &host);
    dir.remove_scratch();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        eprintln!("cbrun: judge: {}", report.reason);
        println!("reward {}", report.reward);
        println!(
            "report {}",
            dir.verifier().join("final_report.json").display()
        );
    }
    Ok(0)
}

pub fn validate(a: ValidateArgs) -> Result<i32> {
    let host = HostView::detect();
    let root = a.limits.root(&host)?;
    let opts = judge_options(&a.limits, &root, a.judge_timeout)?;
    let mut cases = Vec::new();
    for dir in &a.cases {
        if dir.is_file() {
            eprintln!("warning: {}: not a case folder, skipped", dir.display());
            continue;
        }
        cases.push(load_case(dir)?);
    }
    let tmp;
    let root = match &a.out {
        Some(o) => o.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("cbrun-validate-{}", std::process::id()));
            tmp.clone()
        }
    };
    let mut results = Vec::new();
    for case in &cases {
        for control in &case.controls {
            let work = root.join(case.id.as_str()).join(&control.name);
            results.push(validate::validate_control(
                case, control, &work, &opts, &host,
            ));
        }
    }
    if a.out.is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", validate::table(&results));
    }
    let bad = results.iter().filter(|r| !r.ok).count();
    if results.is_empty() {
        eprintln!("cbrun: validate: no controls found");
        return Ok(1);
    }
    if bad > 0 {
        eprintln!(
            "cbrun: validate: {bad} of {} controls mismatched",
            results.len()
        );
        return Ok(1);
    }
    eprintln!(
        "cbrun: validate: all {} controls as expected",
        results.len()
    );
    Ok(0)
}
