//! `cbrun sandbox run [OPTIONS] -- CMD [ARGS...]`: one command in a fresh
//! sandbox. Its exit status is the command's own, or one of the codes the
//! README documents (124 timeout, 125 cbrun's error, 126/127, 128+N).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use cbrun::image::store::Store;
use cbrun::image::unpacked::{use_image, ImageUse};
use cbrun::sandbox::config::{
    validate_env_key, BindMount, ByteSize, Cpus, EnvVar, Identity, NetworkPolicy, RootfsSource,
    SandboxConfig, Stdio,
};
use cbrun::sandbox::outcome::exit;
use cbrun::sandbox::run::{self, HostView};
use cbrun::sandbox::seccomp::SeccompMode;

use super::exit::ExitStatus;
use super::{messages, secs, timing};

#[derive(Subcommand)]
pub enum SandboxCommand {
    /// Run one command in a fresh sandbox and wait for it.
    Run(RunArgs),
}

#[derive(Args)]
pub struct RunArgs {
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
    /// Hostname inside the sandbox (1 to 64 characters).
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
    /// Write the command's stdout to FILE instead of passing it through.
    #[arg(long, value_name = "FILE")]
    stdout: Option<PathBuf>,
    /// Write the command's stderr to FILE instead of passing it through.
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

pub fn exec(cmd: SandboxCommand) -> Result<ExitStatus> {
    match cmd {
        SandboxCommand::Run(a) => run(a),
    }
}

/// `cbrun sandbox run ...` parsed on its own: building the whole command
/// tree (every subcommand's arguments) costs more than a sandbox's own
/// set-up steps. Anything but a clean parse (help, errors) goes to the full
/// parser, so messages and help stay the full tree's.
#[derive(Parser)]
#[command(name = "cbrun sandbox run", no_binary_name = true)]
struct RunOnly {
    #[command(flatten)]
    args: RunArgs,
}

/// The arguments of `cbrun sandbox run ...` when that is the command line
/// and it parses; `None` sends it to the full parser.
pub fn fast_path(argv: &[std::ffi::OsString]) -> Option<RunArgs> {
    let mut rest = argv.iter().skip(1);
    if rest.next()? != "sandbox" || rest.next()? != "run" {
        return None;
    }
    RunOnly::try_parse_from(rest).ok().map(|p| p.args)
}

fn to_config(a: RunArgs) -> Result<SandboxConfig> {
    let mut cfg = SandboxConfig::new(a.command);
    cfg.rootfs = a.rootfs;
    cfg.binds = a.binds;
    if !a.workdir.is_absolute() {
        bail!("--workdir: {:?}: must be an absolute path", a.workdir);
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
        bail!("--hostname: {:?}: must be 1 to 64 characters", a.hostname);
    }
    cfg.hostname = a.hostname;
    cfg.network = a.net;
    cfg.limits.memory = a
        .memory
        .as_deref()
        .map(|m| ByteSize::parse("--memory", m))
        .transpose()?;
    if a.pids == Some(0) {
        bail!("--pids: 0: must be at least 1");
    }
    cfg.limits.pids = a.pids;
    cfg.limits.cpus = a.cpus;
    if a.nofile < 16 || a.nproc < 1 {
        bail!("--nofile must be at least 16 and --nproc at least 1");
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
    Ok(cfg)
}

/// Write the outcome `value` to `path` atomically (temp file + rename).
fn write_outcome(path: &Path, value: &serde_json::Value) -> Result<()> {
    cbrun::fsutil::write_json_atomic(path, value)
        .with_context(|| format!("--outcome {}", path.display()))
}

/// Fail before running anything if the outcome cannot be written.
fn check_outcome_dir(path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        bail!(
            "--outcome {}: directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Put the image's root under `cfg`, with its environment under the
/// command line's and its working directory unless `--workdir` was given.
fn apply_image(
    cfg: &mut SandboxConfig,
    name: &str,
    workdir_given: bool,
    host: &HostView,
) -> Result<ImageUse> {
    let store = Store::open(Store::default_root()?)?;
    let u =
        use_image(&store, name, &host.mapping, None).with_context(|| format!("--image {name}"))?;
    if let Some(n) = u.note() {
        messages::warning(n);
    }
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
    Ok(u)
}

pub fn run(a: RunArgs) -> Result<ExitStatus> {
    let outcome_path = a.outcome.clone();
    if let Some(p) = &outcome_path {
        check_outcome_dir(p)?;
    }
    let image = a.image.clone();
    let workdir_given = a.workdir != Path::new("/");
    let mut cfg = match to_config(a) {
        Ok(cfg) => cfg,
        Err(e) => {
            if let Some(p) = &outcome_path {
                let v = serde_json::json!({ "error": messages::one_line(e.as_ref()), "cbrun_exit": exit::CBRUN_ERROR });
                write_outcome(p, &v)?;
            }
            return Err(e);
        }
    };
    let t = Instant::now();
    let host = HostView::detect();
    timing("host view", t);
    // Keeps the image's root from gc until the sandbox is gone.
    let _image_use = image
        .map(|name| apply_image(&mut cfg, &name, workdir_given, &host))
        .transpose()?;
    match run::run(&cfg, &host) {
        Ok(outcome) => {
            if let Some(p) = &outcome_path {
                write_outcome(p, &serde_json::to_value(&outcome)?)?;
            }
            if outcome.timed_out {
                messages::status(format_args!(
                    "timed out after {:.1}s; sandbox killed",
                    cfg.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0)
                ));
            }
            if outcome.oom_killed {
                messages::status("the sandbox ran out of memory and was OOM-killed");
            }
            Ok(ExitStatus::code(outcome.cbrun_exit))
        }
        Err(e) => {
            let code = e.exit_code();
            if let Some(p) = &outcome_path {
                let v = serde_json::json!({ "error": messages::one_line(&e), "cbrun_exit": code });
                write_outcome(p, &v)?;
            }
            messages::error_of(&e);
            Ok(ExitStatus::code(code))
        }
    }
}
