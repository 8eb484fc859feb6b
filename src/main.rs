//! cbrun's command line: parse, hand off to the library, map results to
//! exit codes. Errors are one line, prefixed `cbrun: error:`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use cbrun::sandbox::config::{
    validate_env_key, BindMount, ByteSize, Cpus, EnvVar, Identity, NetworkPolicy, RootfsSource,
    SandboxConfig, Stdio,
};
use cbrun::sandbox::outcome::exit;
use cbrun::sandbox::run::{self, HostView};
use cbrun::sandbox::seccomp::SeccompMode;
use cbrun::sandbox::state;

mod image_cli;
mod trial_cli;

#[derive(Parser)]
#[command(
    name = "cbrun",
    version,
    about = "Daemonless, rootless sandbox runner for coding-agent benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run commands in sandboxes.
    #[command(subcommand)]
    Sandbox(Box<SandboxCmd>),
    /// Work with benchmark cases (the published task-package format).
    #[command(subcommand)]
    Case(CaseCmd),
    /// Say what this host lets cbrun enforce for the current user.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Manage images: import, export, pull, list, remove, unpack.
    #[command(subcommand)]
    Image(image_cli::ImageCmd),
    /// Run one trial: solve, submission check, import scan, judge, record.
    Trial(Box<trial_cli::TrialArgs>),
    /// Run only the solve phase (agent, submission, scan) into a trial folder.
    Solve(Box<trial_cli::SolveArgs>),
    /// Judge a stored workspace against a case's hidden tests.
    Judge(Box<trial_cli::JudgeArgs>),
    /// Run every control of the cases through the scan and the judge and
    /// check their expect.json.
    Validate(trial_cli::ValidateArgs),
    /// One-time host set-up steps that need real root.
    #[command(subcommand)]
    Admin(cbrun::admin::AdminCommand),
    /// Remove what runs whose cbrun died left behind (processes, cgroups, state).
    Gc {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum CaseCmd {
    /// Validate case folders: layout, every schema, cross-file rules,
    /// controls, leaks of hidden tests into public docs.
    Check {
        #[arg(required = true, value_name = "CASE")]
        cases: Vec<PathBuf>,
        /// Also run each case's environment_checks (and cbrun's baseline)
        /// in solve-like and judge-like sandboxes, as their `phase` says.
        #[arg(long)]
        run: bool,
        /// With --run: the root filesystem, `host` or a directory.
        #[arg(
            long,
            default_value = "host",
            value_name = "host|DIR",
            conflicts_with = "image"
        )]
        rootfs: RootfsSource,
        /// With --run: an image from the store (e.g. from `cbrun image build CASE`).
        #[arg(long, value_name = "NAME[:TAG]", requires = "run")]
        image: Option<String>,
    },
}

#[derive(Subcommand)]
enum SandboxCmd {
    /// Run one command in a fresh sandbox and wait for it.
    Run(RunArgs),
}

#[derive(Args)]
struct RunArgs {
    /// `host` (the host's system dirs, read-only) or a directory used read-only as /.
    #[arg(
        long,
        default_value = "host",
        value_name = "host|DIR",
        conflicts_with = "image"
    )]
    rootfs: RootfsSource,
    /// Run on an image from the store (`cbrun image ls`), with a writable
    /// layer on top that goes away with the sandbox.
    #[arg(long, value_name = "NAME[:TAG]")]
    image: Option<String>,
    /// Bind a host path into the sandbox (read-write unless :ro).
    #[arg(long = "bind", value_name = "SRC:DST[:ro]")]
    binds: Vec<BindMount>,
    /// Working directory inside the sandbox.
    #[arg(long, default_value = "/")]
    workdir: PathBuf,
    /// Set a variable inside (the environment starts empty but for PATH and HOME).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<EnvVar>,
    /// Pass a variable from cbrun's environment, if set.
    #[arg(long = "env-pass", value_name = "NAME")]
    env_pass: Vec<String>,
    /// Run as this uid:gid inside (default 0:0, mapped to an unprivileged host id).
    #[arg(long, value_name = "UID:GID")]
    user: Option<Identity>,
    #[arg(long, default_value = "cbrun")]
    hostname: String,
    /// `none`: a private network with only lo (default). `host`: the host's network, for builds.
    #[arg(long, default_value = "none", value_name = "none|host")]
    net: NetworkPolicy,
    /// Memory limit (e.g. 512M, 2G); memory+swap is capped at the same value.
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Maximum number of processes/threads.
    #[arg(long, value_name = "N")]
    pids: Option<u64>,
    /// CPU quota in CPUs (e.g. 1.5).
    #[arg(long, value_name = "N")]
    cpus: Option<Cpus>,
    /// RLIMIT_NOFILE (soft and hard).
    #[arg(long, default_value_t = 4096)]
    nofile: u64,
    /// RLIMIT_NPROC (soft and hard).
    #[arg(long, default_value_t = 4096)]
    nproc: u64,
    /// Refuse to run if a requested limit cannot be enforced.
    #[arg(long)]
    require_limits: bool,
    /// `default` or `off` (loud).
    #[arg(long, default_value = "default", value_name = "default|off")]
    seccomp: SeccompMode,
    /// Wall-clock limit; then SIGTERM, a grace period, SIGKILL of every process.
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Seconds between SIGTERM and SIGKILL on timeout or interrupt.
    #[arg(long, default_value_t = 2.0, value_name = "SECS")]
    kill_grace: f64,
    #[arg(long, value_name = "FILE")]
    stdout: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    stderr: Option<PathBuf>,
    /// Run a minimal init as pid 1 (reaps orphans, forwards signals) and the
    /// command as pid 2; for long-running commands that leave orphans.
    #[arg(long)]
    init: bool,
    /// Write the run's outcome (JSON) here.
    #[arg(long, value_name = "FILE")]
    outcome: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

fn secs(what: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v <= 0.0 || v > 1e7 {
        anyhow::bail!("{what}: {v:?}: must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(v))
}

fn to_config(a: RunArgs) -> Result<(SandboxConfig, Option<PathBuf>)> {
    let mut cfg = SandboxConfig::new(a.command);
    cfg.rootfs = a.rootfs;
    cfg.binds = a.binds;
    if !a.workdir.is_absolute() {
        anyhow::bail!("--workdir: {:?}: must be an absolute path", a.workdir);
    }
    cfg.workdir = a.workdir;
    cfg.env = a.env;
    for name in a.env_pass {
        validate_env_key("--env-pass", &name)?;
        if let Ok(value) = std::env::var(&name) {
            cfg.env.push(EnvVar { key: name, value });
        }
    }
    cfg.user = a.user;
    if a.hostname.is_empty() || a.hostname.len() > 64 {
        anyhow::bail!("--hostname: {:?}: must be 1 to 64 characters", a.hostname);
    }
    cfg.hostname = a.hostname;
    cfg.network = a.net;
    cfg.limits.memory = a
        .memory
        .as_deref()
        .map(|m| ByteSize::parse("--memory", m))
        .transpose()?;
    if a.pids == Some(0) {
        anyhow::bail!("--pids: 0: must be at least 1");
    }
    cfg.limits.pids = a.pids;
    cfg.limits.cpus = a.cpus;
    if a.nofile < 16 || a.nproc < 1 {
        anyhow::bail!("--nofile must be at least 16 and --nproc at least 1");
    }
    cfg.limits.nofile = a.nofile;
    cfg.limits.nproc = a.nproc;
    cfg.require_limits = a.require_limits;
    cfg.seccomp = a.seccomp;
    cfg.timeout = a.timeout.map(|t| secs("--timeout", t)).transpose()?;
    cfg.kill_grace = secs("--kill-grace", a.kill_grace)?;
    cfg.stdout = a.stdout.map(Stdio::File).unwrap_or(Stdio::Inherit);
    cfg.stderr = a.stderr.map(Stdio::File).unwrap_or(Stdio::Inherit);
    cfg.init = a.init;
    Ok((cfg, a.outcome))
}

/// Write `value` to `path` atomically (temp file + rename).
fn write_json_atomic(path: &std::path::Path, value: &serde_json::Value) -> Result<()> {
    cbrun::fsutil::write_json_atomic(path, value)
        .with_context(|| format!("--outcome {}", path.display()))
}

fn sandbox_run(a: RunArgs) -> Result<i32> {
    let outcome_path = a.outcome.clone();
    if let Some(p) = &outcome_path {
        // Fail before running anything if the outcome cannot be written.
        let dir = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            anyhow::bail!(
                "--outcome {}: directory {} does not exist",
                p.display(),
                dir.display()
            );
        }
    }
    let image = a.image.clone();
    let workdir_given = a.workdir != std::path::Path::new("/");
    let cfg = match to_config(a) {
        Ok((cfg, _)) => cfg,
        Err(e) => {
            if let Some(p) = &outcome_path {
                let v = serde_json::json!({ "error": format!("{e:#}"), "cbrun_exit": exit::CBRUN_ERROR });
                write_json_atomic(p, &v)?;
            }
            return Err(e);
        }
    };
    let t = std::time::Instant::now();
    let host = HostView::detect();
    if std::env::var_os("CBRUN_TIMING").is_some() {
        eprintln!(
            "cbrun: timing: host view: {:.2} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    let mut cfg = cfg;
    // Keeps the image's root from gc until the sandbox is gone.
    let _image_use = match image {
        Some(name) => {
            let store =
                cbrun::image::store::Store::open(cbrun::image::store::Store::default_root()?)?;
            let u = cbrun::image::unpacked::use_image(&store, &name, &host.mapping, None)
                .with_context(|| format!("--image {name}"))?;
            cfg.rootfs = RootfsSource::Image(u.root.clone());
            let mut env: Vec<EnvVar> = u
                .env
                .iter()
                .filter(|(k, _)| !cfg.env.iter().any(|e| &e.key == k))
                .map(|(k, v)| EnvVar {
                    key: k.clone(),
                    value: v.clone(),
                })
                .collect();
            env.append(&mut cfg.env);
            cfg.env = env;
            if !workdir_given {
                if let Some(w) = &u.workdir {
                    cfg.workdir = w.clone();
                }
            }
            Some(u)
        }
        None => None,
    };
    match run::run(&cfg, &host) {
        Ok(outcome) => {
            if let Some(p) = &outcome_path {
                write_json_atomic(p, &serde_json::to_value(&outcome)?)?;
            }
            if outcome.timed_out {
                eprintln!(
                    "cbrun: timed out after {:.1}s; sandbox killed",
                    cfg.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0)
                );
            }
            if outcome.oom_killed {
                eprintln!("cbrun: the sandbox ran out of memory and was OOM-killed");
            }
            Ok(outcome.cbrun_exit)
        }
        Err(e) => {
            let code = e.exit_code();
            if let Some(p) = &outcome_path {
                let v = serde_json::json!({ "error": e.to_string(), "cbrun_exit": code });
                write_json_atomic(p, &v)?;
            }
            eprintln!("cbrun: error: {e}");
            Ok(code)
        }
    }
}

/// One line per problem (`file: field: reason`); with `run`, one line per
/// environment check; exit 1 on any error or failed check.
fn case_check(cases: &[PathBuf], run: Option<(RootfsSource, Option<String>)>) -> Result<i32> {
    use cbrun::case::envcheck;
    let mut runner = None;
    if let Some((rootfs, image)) = run {
        let host = HostView::detect();
        let root = envcheck::CheckRoot::open(rootfs, image.as_deref(), &host)?;
        runner = Some((envcheck::EnvCheckOptions::new(root), host));
    }
    let mut errors = 0;
    for dir in cases {
        // `cbrun case check cases/*` also matches files such as README.md.
        if dir.is_file() {
            eprintln!("warning: {}: not a case folder, skipped", dir.display());
            continue;
        }
        let problems = cbrun::case::check(dir);
        for p in &problems {
            let kind = if p.is_error() { "error" } else { "warning" };
            eprintln!("{kind}: {p}");
        }
        let n = problems.iter().filter(|p| p.is_error()).count();
        errors += n;
        if n == 0 {
            println!("ok: {}", dir.display());
        }
        let (Some((opts, host)), 0) = (&runner, n) else {
            continue;
        };
        let case = cbrun::case::load(dir)?;
        for r in envcheck::run_checks(&case, opts, host)? {
            let name = if r.builtin {
                format!("{} (cbrun)", r.name)
            } else {
                r.name.clone()
            };
            let at = format!("{}: {}: {name}", dir.display(), r.phase.as_str());
            if r.passed {
                println!("pass: {at} ({:.2} s)", r.seconds);
            } else {
                errors += 1;
                let last = r.output.lines().rev().find(|l| !l.trim().is_empty());
                let last = last.map(|l| format!(": {}", l.trim())).unwrap_or_default();
                println!("FAIL: {at}: {}{last}", r.failure());
            }
        }
    }
    Ok(if errors == 0 { 0 } else { 1 })
}

fn gc(json: bool) -> Result<i32> {
    let host = HostView::detect();
    let mut report = state::gc(&host.state_root, host.roots.as_deref(), true);
    state::gc_scaffolds(&host.state_root, &mut report);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "cbrun gc: removed {} dead run(s), killed {} process(es), removed {} cgroup dir(s); {} run(s) live",
            report.removed_runs.len(),
            report.killed_processes,
            report.removed_cgroups,
            report.live_runs
        );
        for e in &report.errors {
            eprintln!("cbrun gc: {e}");
        }
    }
    Ok(if report.errors.is_empty() { 0 } else { 1 })
}

/// The error and its causes on one line, each cause once: many error types
/// already quote their cause in their own message.
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let t = cause.to_string();
        if !msg.contains(&t) {
            msg.push_str(": ");
            msg.push_str(&t);
        }
    }
    msg.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

fn main() -> ExitCode {
    let started = std::time::Instant::now();
    let code = real_main();
    if std::env::var_os("CBRUN_TIMING").is_some() {
        eprintln!(
            "cbrun: timing: main: {:.2} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    code
}

/// `cbrun sandbox run ...` parsed on its own: building the whole command
/// tree (every subcommand's arguments) costs more than a sandbox's own
/// set-up steps. Anything but a clean parse (help, errors) goes to the full
/// parser, so messages and help stay the full tree's.
#[derive(Parser)]
#[command(name = "cbrun sandbox run", no_binary_name = true)]
struct SandboxRunOnly {
    #[command(flatten)]
    args: RunArgs,
}

fn sandbox_run_fast_path() -> Option<RunArgs> {
    let mut argv = std::env::args_os().skip(1);
    if argv.next()? != "sandbox" || argv.next()? != "run" {
        return None;
    }
    SandboxRunOnly::try_parse_from(argv).ok().map(|p| p.args)
}

fn real_main() -> ExitCode {
    if let Some(a) = sandbox_run_fast_path() {
        return finish(sandbox_run(a));
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // One line, like every other cbrun error; `--help` has the rest.
            let text = e.render().to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("cbrun: error: {first}");
            return ExitCode::from(exit::CBRUN_ERROR as u8);
        }
    };
    let r = match cli.cmd {
        Cmd::Sandbox(c) => match *c {
            SandboxCmd::Run(a) => sandbox_run(a),
        },
        Cmd::Gc { json } => gc(json),
        Cmd::Image(c) => image_cli::run(c),
        Cmd::Trial(a) => trial_cli::trial(*a),
        Cmd::Solve(a) => trial_cli::solve(*a),
        Cmd::Judge(a) => trial_cli::judge(*a),
        Cmd::Validate(a) => trial_cli::validate(a),
        Cmd::Case(CaseCmd::Check {
            cases,
            run,
            rootfs,
            image,
        }) => case_check(&cases, run.then_some((rootfs, image))),
        Cmd::Doctor { json } => cbrun::doctor::run(json).map_err(Into::into),
        Cmd::Admin(a) => cbrun::admin::run(a).map_err(Into::into),
    };
    finish(r)
}

/// The process's exit status for a command's result.
fn finish(r: Result<i32>) -> ExitCode {
    match r {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("cbrun: error: {}", one_line(&e));
            ExitCode::from(exit::CBRUN_ERROR as u8)
        }
    }
}
