//! `cbrun run CASE... --agent SPEC [--agent SPEC]...` (or `--plan FILE`):
//! a benchmark run, every case x configuration x repeat, in parallel on
//! this host, into a run folder that `--resume` can always complete.
//! `cbrun run --worker DIR --task N` is one trial of such a folder (what
//! the local scheduler spawns, and what a cluster job runs).
//!
//! Exit status:
//!
//! - 0: every trial of the plan was evaluated (whatever the rewards): each
//!   trial's record has the status `cbrun trial` exits 0 for;
//! - 1: some trial is incomplete (error, never finished) or failed for
//!   infrastructure;
//! - 2: usage: a bad flag, plan file or case; an `--out` that holds
//!   another plan; nothing ran;
//! - 130: interrupted (SIGINT, SIGTERM or SIGHUP); `--resume` completes it.
//!
//! A worker exits with its trial's status (as `cbrun trial` does), 0 when
//! the trial's outcome already stood or another worker holds it.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use clap::Args;

use cbrun::image::unpacked::ImageUse;
use cbrun::run::folder::RunFolder;
use cbrun::run::plan::{self, ConfigSpec, PlanFile, PlanRequest, ResolvedPlan};
use cbrun::run::progress;
use cbrun::run::resume;
use cbrun::run::schedule::HostResources;
use cbrun::run::state::{self, RecordView, TrialState};
use cbrun::run::summary;
use cbrun::run::supervise::{supervise, SuperviseOptions};
use cbrun::run::worker::{run_worker, WorkerEnd, WorkerError, WorkerOptions};
use cbrun::sandbox::rootfs::HOST_SYSTEM_DIRS;
use cbrun::sandbox::run::HostView;
use cbrun::trial::record::TrialRecord;

use super::exit::ExitStatus;
use super::messages;
use super::trial::status_of;

/// Flags that define configurations (not with --plan or --resume).
const CONFIG_FLAGS: [&str; 22] = [
    "agents",
    "model",
    "solve_timeout",
    "stall_timeout",
    "judge_timeout",
    "net",
    "allow",
    "allow_registries",
    "resolve",
    "memory",
    "pids",
    "cpus",
    "require_limits",
    "rootfs",
    "image",
    "repeats",
    "env",
    "env_pass",
    "agent_version",
    "pricing",
    "fresh_install",
    "ca_bundle",
];

#[derive(Args)]
pub struct RunArgs {
    /// Case folders, or glob patterns (quoted, for cbrun to expand).
    #[arg(value_name = "CASE", conflicts_with_all = ["plan", "resume"])]
    pub(super) cases: Vec<String>,
    /// Every case folder directly inside DIR (repeatable).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["plan", "resume"])]
    pub(super) all: Vec<PathBuf>,
    /// A plan file (TOML): cases, repeats and named configurations.
    #[arg(long, value_name = "FILE", conflicts_with_all = CONFIG_FLAGS)]
    pub(super) plan: Option<PathBuf>,
    /// A configuration: `[NAME=]SPEC`, SPEC as for `cbrun trial --agent`, or
    /// `replay:@NAME` (each case's control NAME). Repeatable.
    #[arg(long = "agent", value_name = "[NAME=]SPEC")]
    pub(super) agents: Vec<String>,
    /// Model name handed to every --agent.
    #[arg(long, value_name = "M")]
    pub(super) model: Option<String>,
    /// Trials of each case and configuration (default 1).
    #[arg(long, value_name = "N")]
    pub(super) repeats: Option<u32>,
    /// Solve budget in seconds (default 7200).
    #[arg(long, value_name = "S")]
    pub(super) solve_timeout: Option<f64>,
    /// Stall watchdog in seconds (default 1800).
    #[arg(long, value_name = "S")]
    pub(super) stall_timeout: Option<f64>,
    /// Judge budget in seconds (replaces the case's).
    #[arg(long, value_name = "S")]
    pub(super) judge_timeout: Option<f64>,
    /// `none` or `allowlist`, as for `cbrun trial`.
    #[arg(long, value_name = "none|allowlist")]
    pub(super) net: Option<String>,
    /// A host the agent may reach with --net allowlist.
    #[arg(long = "allow", value_name = "HOST[:PORT]")]
    pub(super) allow: Vec<String>,
    /// Let package registries through.
    #[arg(long)]
    pub(super) allow_registries: bool,
    /// Resolve HOST to IP in the proxy instead of DNS.
    #[arg(long = "resolve", value_name = "HOST=IP")]
    pub(super) resolve: Vec<String>,
    /// Memory limit per sandbox (default 8G); also what the scheduler
    /// counts per running trial.
    #[arg(long, value_name = "SIZE")]
    pub(super) memory: Option<String>,
    /// Maximum processes/threads per sandbox (default 4096).
    #[arg(long, value_name = "N")]
    pub(super) pids: Option<u64>,
    /// CPU quota per sandbox, in CPUs.
    #[arg(long, value_name = "N")]
    pub(super) cpus: Option<f64>,
    /// Refuse to run a trial whose limits cannot be enforced.
    #[arg(long)]
    pub(super) require_limits: bool,
    /// Root filesystem of the sandboxes: `host` or a directory.
    #[arg(long, value_name = "host|DIR", conflicts_with = "image")]
    pub(super) rootfs: Option<String>,
    /// Run the sandboxes on this image from the store.
    #[arg(long, value_name = "NAME[:TAG]")]
    pub(super) image: Option<String>,
    /// Set a variable in every agent's sandboxes; the value is written to
    /// the run's plan.toml (pass secrets with --env-pass).
    #[arg(long = "env", value_name = "K=V")]
    pub(super) env: Vec<String>,
    /// Forward a variable from cbrun's environment to every agent's
    /// sandboxes, when set (only its name is written).
    #[arg(long = "env-pass", value_name = "NAME")]
    pub(super) env_pass: Vec<String>,
    /// Install this version of each spec agent's CLI instead of its pin.
    #[arg(long, value_name = "VERSION")]
    pub(super) agent_version: Option<String>,
    /// Price table for cost_usd (default: $CBRUN_PRICING, else the built-in table).
    #[arg(long, value_name = "FILE")]
    pub(super) pricing: Option<PathBuf>,
    /// Install the agents afresh: neither use nor fill the install cache.
    #[arg(long)]
    pub(super) fresh_install: bool,
    /// Extra CA certificates (PEM) the agents' sandboxes trust, or
    /// `system` for the host's bundle (repeatable).
    #[arg(long, value_name = "FILE|system")]
    pub(super) ca_bundle: Vec<String>,
    /// Trials at once (default: one per CPU, as many as memory allows).
    #[arg(long, value_name = "N")]
    pub(super) jobs: Option<usize>,
    /// Pin each slot's worker (and its sandboxes) to N CPUs of its own.
    #[arg(long, value_name = "N")]
    pub(super) cpuset_per_slot: Option<usize>,
    /// The run folder (default ./cbrun-runs/<run id>); the same plan again
    /// continues in it, another plan is refused.
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub(super) out: Option<PathBuf>,
    /// Complete the run in DIR: skip what is evaluated, rerun what was
    /// interrupted or failed for infrastructure.
    #[arg(long, value_name = "DIR", conflicts_with_all = CONFIG_FLAGS)]
    pub(super) resume: Option<PathBuf>,
    /// Reruns of a trial that failed for infrastructure (earlier attempts
    /// are kept).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub(super) retry_infra: u32,
    /// Print nothing (the run folder has everything).
    #[arg(long)]
    pub(super) quiet: bool,
    /// Where the trials run: `local` (this host) or `slurm` (one job array
    /// on a shared run folder; see docs/slurm.md).
    #[arg(long, value_name = "local|slurm", default_value = "local")]
    pub(super) backend: String,
    /// With --backend slurm: write DIR/slurm/array.sbatch and print the
    /// array size, without submitting.
    #[arg(long, conflicts_with = "status")]
    pub(super) emit_sbatch: bool,
    /// With --backend slurm: wait until the job array is done, showing
    /// progress, and exit as a local run does.
    #[arg(long)]
    pub(super) wait: bool,
    /// The progress of the run in DIR (from the folder, and squeue for a
    /// Slurm run); changes nothing.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["plan", "resume", "out", "worker", "cases", "all"])]
    pub(super) status: Option<PathBuf>,
    /// Slurm partition (`--backend slurm`; also `[slurm] partition` in a plan).
    #[arg(long, value_name = "NAME")]
    pub(super) partition: Option<String>,
    /// Slurm account.
    #[arg(long, value_name = "NAME")]
    pub(super) account: Option<String>,
    /// Slurm QOS.
    #[arg(long, value_name = "NAME")]
    pub(super) qos: Option<String>,
    /// Slurm node constraint (features).
    #[arg(long, value_name = "EXPR")]
    pub(super) constraint: Option<String>,
    /// A raw sbatch option for the batch script (repeatable): `--sbatch-arg=--gres=gpu:1`.
    #[arg(long = "sbatch-arg", value_name = "OPTION", allow_hyphen_values = true)]
    pub(super) sbatch_args: Vec<String>,
    /// Worker mode: run one trial of the run folder DIR (with --task).
    #[arg(long, value_name = "DIR", requires = "task", hide = true)]
    pub(super) worker: Option<PathBuf>,
    /// Worker mode: the trial's number in the plan (0-based).
    #[arg(long, value_name = "N", requires = "worker", hide = true)]
    pub(super) task: Option<usize>,
    /// Worker mode: the scheduler's job id, recorded in the claim.
    #[arg(long, value_name = "ID", requires = "worker", hide = true)]
    pub(super) job_id: Option<String>,
    /// Worker mode: leave summary.json to the supervisor.
    #[arg(long, requires = "worker", hide = true)]
    pub(super) no_summary: bool,
    /// Worker mode: the supervisor to tell of each phase (SIGUSR1).
    #[arg(long, value_name = "PID", requires = "worker", hide = true)]
    pub(super) notify: Option<i32>,
}

pub(super) type NotStarted = (ExitStatus, anyhow::Error);

pub(super) fn usage(e: impl Into<anyhow::Error>) -> NotStarted {
    (ExitStatus::Usage, e.into())
}

pub fn exec(a: RunArgs) -> Result<ExitStatus> {
    if let Some(dir) = a.worker.clone() {
        return Ok(worker(&a, &dir));
    }
    if let Some(dir) = a.status.clone() {
        return Ok(super::run_slurm::status(&dir));
    }
    match a.backend.as_str() {
        "local" if a.wait => {
            messages::error("--wait: only with --backend slurm (a local run always waits)");
            return Ok(ExitStatus::Usage);
        }
        "local" if !a.emit_sbatch => {}
        "local" | "slurm" => return super::run_slurm::exec(&a),
        other => {
            messages::error(format_args!("--backend {other}: must be local or slurm"));
            return Ok(ExitStatus::Usage);
        }
    }
    let p = match prepare(&a) {
        Ok(p) => p,
        Err((status, e)) => {
            messages::error_chain(&e);
            return Ok(status);
        }
    };
    run(&a, p)
}

/// A folder with its plan, ready to run.
struct Prepared {
    folder: RunFolder,
    plan: ResolvedPlan,
    /// Holds the plan's images against `image gc` for the run.
    _images: Vec<ImageUse>,
    jobs: usize,
    host: HostResources,
    cpusets: Option<Vec<nix::sched::CpuSet>>,
}

fn prepare(a: &RunArgs) -> Result<Prepared, NotStarted> {
    let view = HostView::detect();
    let (folder, plan, images, _) = open_or_create(a, &view)?;
    let host = HostResources::detect();
    for c in &plan.configs {
        if c.memory_bytes() > host.memory {
            return Err(usage(anyhow!(
                "config {}: memory {} is more than this host has ({} MiB); lower it (--memory, or memory = in the plan)",
                c.name,
                c.memory,
                host.memory >> 20
            )));
        }
    }
    let jobs = match a.jobs {
        Some(0) => return Err(usage(anyhow!("--jobs 0: must be at least 1"))),
        Some(j) => j,
        None => host.default_jobs(plan.max_memory()),
    };
    let cpusets = match a.cpuset_per_slot {
        Some(n) => Some(host.cpusets(jobs, n).map_err(|e| usage(anyhow!(e)))?),
        None => None,
    };
    Ok(Prepared {
        folder,
        plan,
        _images: images,
        jobs,
        host,
        cpusets,
    })
}

/// The run folder `--resume` names, or the one the plan makes; with the
/// plan file's `[slurm]` table.
#[allow(clippy::type_complexity)]
pub(super) fn open_or_create(
    a: &RunArgs,
    view: &HostView,
) -> Result<
    (
        RunFolder,
        ResolvedPlan,
        Vec<ImageUse>,
        Option<cbrun::run::slurm::SlurmOptions>,
    ),
    NotStarted,
> {
    match &a.resume {
        Some(dir) => resume_folder(dir, view).map(|(f, p, i)| (f, p, i, None)),
        None => new_folder(a, view),
    }
}

fn resume_folder(
    dir: &Path,
    view: &HostView,
) -> Result<(RunFolder, ResolvedPlan, Vec<ImageUse>), NotStarted> {
    let folder =
        RunFolder::open(dir).map_err(|e| usage(anyhow!("--resume {}: {e}", dir.display())))?;
    let plan = folder.read_plan().map_err(usage)?.ok_or_else(|| {
        usage(anyhow!(
            "--resume {}: no plan.toml: not a run folder",
            folder.root.display()
        ))
    })?;
    // What the plan depends on must still be what it was.
    for c in &plan.cases {
        let now = cbrun::trial::provenance::of_case(&c.path).map_err(usage)?;
        if now.case_sha256 != c.sha256 {
            return Err(usage(anyhow!(
                "--resume {}: case {} ({}) changed since the plan was made",
                folder.root.display(),
                c.id,
                c.path.display()
            )));
        }
    }
    let mut images = Vec::new();
    let shown = folder.root.join(plan::PLAN_FILE);
    let in_plan = |e: plan::PlanError| usage(anyhow!("{}: {e}", shown.display()));
    for c in &plan.configs {
        c.agent().map_err(in_plan)?;
        // Keeps an image's root in use, and checks its digest; the
        // options check the files the plan pinned (CA bundles, prices).
        let root = c.root(view).map_err(in_plan)?;
        c.trial_options(&root).map_err(in_plan)?;
        drop(root);
        if let Some(name) = &c.image {
            images.extend(image_use(name, view));
        }
    }
    Ok((folder, plan, images))
}

fn image_use(name: &str, view: &HostView) -> Option<ImageUse> {
    let store =
        cbrun::image::store::Store::open(cbrun::image::store::Store::default_root().ok()?).ok()?;
    cbrun::image::unpacked::use_image(&store, name, &view.mapping, None).ok()
}

#[allow(clippy::type_complexity)]
fn new_folder(
    a: &RunArgs,
    view: &HostView,
) -> Result<
    (
        RunFolder,
        ResolvedPlan,
        Vec<ImageUse>,
        Option<cbrun::run::slurm::SlurmOptions>,
    ),
    NotStarted,
> {
    let req = match &a.plan {
        Some(f) => PlanFile::load(f).map_err(usage)?,
        None => flags_request(a).map_err(usage)?,
    };
    let (mut plan, images) = plan::resolve(&req, view).map_err(usage)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("cbrun-runs").join(&plan.run_id));
    refuse_shown_to_sandboxes(&out).map_err(usage)?;
    let folder =
        RunFolder::create(&out).map_err(|e| usage(anyhow!("--out {}: {e}", out.display())))?;
    match folder.read_plan().map_err(usage)? {
        Some(old) => {
            if let Some(diff) = old.differs_from(&plan) {
                return Err(usage(anyhow!(
                    "--out {} holds another plan ({diff}); give another --out, or --resume {} to finish that one",
                    folder.root.display(),
                    folder.root.display()
                )));
            }
            // The same plan: it continues, under its own id.
            plan = old;
        }
        None => {
            if !folder.is_empty().unwrap_or(false) {
                return Err(usage(anyhow!(
                    "--out {}: exists and is not a run folder (no plan.toml); give a new or empty folder",
                    folder.root.display()
                )));
            }
            folder.write_plan(&plan).map_err(usage)?;
        }
    }
    Ok((folder, plan, images, req.slurm))
}

/// The plan the command line describes.
fn flags_request(a: &RunArgs) -> Result<PlanRequest> {
    let mut cases = plan::expand_cases(&a.cases, Path::new("."), "CASE")?;
    for d in &a.all {
        cases.extend(plan::all_cases(d, "--all")?);
    }
    if cases.is_empty() {
        return Err(anyhow!(
            "no cases: give CASE folders, --all DIR, or --plan FILE"
        ));
    }
    if a.agents.is_empty() {
        return Err(anyhow!(
            "--agent: none given (one configuration per --agent [NAME=]SPEC)"
        ));
    }
    let mut env = std::collections::BTreeMap::new();
    for kv in &a.env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--env {kv}: expected K=V"))?;
        env.insert(k.to_owned(), v.to_owned());
    }
    let configs = a
        .agents
        .iter()
        .map(|arg| {
            let (name, agent) = split_name(arg);
            ConfigSpec {
                name,
                agent,
                model: a.model.clone(),
                solve_timeout: a.solve_timeout,
                stall_timeout: a.stall_timeout,
                judge_timeout: a.judge_timeout,
                memory: a.memory.clone(),
                pids: a.pids,
                cpus: a.cpus,
                require_limits: Some(a.require_limits),
                net: a.net.clone(),
                allow: Some(a.allow.clone()),
                allow_registries: Some(a.allow_registries),
                resolve: Some(a.resolve.clone()),
                image: a.image.clone(),
                rootfs: a.rootfs.clone(),
                env: Some(env.clone()),
                env_pass: Some(a.env_pass.clone()),
                agent_version: a.agent_version.clone(),
                pricing: a.pricing.clone(),
                fresh_install: Some(a.fresh_install),
                ca_bundle: Some(a.ca_bundle.clone()),
            }
        })
        .collect();
    Ok(PlanRequest {
        origin: "command line".into(),
        cases,
        repeats: a.repeats.unwrap_or(1),
        configs,
        base: PathBuf::from("."),
        slurm: None,
    })
}

/// `NAME=SPEC` names a configuration; a plain SPEC is named after its agent.
fn split_name(arg: &str) -> (Option<String>, String) {
    match arg.split_once('=') {
        Some((name, spec)) if plan::valid_name(name) && !name.contains(':') => {
            (Some(name.to_owned()), spec.to_owned())
        }
        _ => (None, arg.to_owned()),
    }
}

/// A run folder must not lie where a `--rootfs host` sandbox sees host
/// folders (`/usr`, `/etc`, `/opt`, ...): other trials' workspaces and
/// results would be in view.
fn refuse_shown_to_sandboxes(out: &Path) -> Result<()> {
    let abs = std::path::absolute(out)?;
    // The nearest existing ancestor, resolved (links included).
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(parent) = existing.parent() else {
            break;
        };
        rest.push(existing.file_name().unwrap_or_default().to_owned());
        existing = parent;
    }
    let mut real = std::fs::canonicalize(existing)?;
    for r in rest.iter().rev() {
        real.push(r);
    }
    let top = real
        .components()
        .nth(1)
        .and_then(|c| c.as_os_str().to_str().map(str::to_owned));
    if let Some(t) = top.filter(|t| HOST_SYSTEM_DIRS.contains(&t.as_str())) {
        return Err(anyhow!(
            "--out {}: inside /{t}, which sandboxes see; choose a folder elsewhere",
            real.display()
        ));
    }
    Ok(())
}

fn run(a: &RunArgs, p: Prepared) -> Result<ExitStatus> {
    let Prepared {
        folder,
        plan,
        jobs,
        host,
        cpusets,
        ..
    } = p;
    let pending = resume::pending(&folder, &plan, a.retry_infra);
    let style = progress::style_for_stderr(a.quiet);
    let quiet = style == progress::Style::Quiet;
    if !quiet {
        for h in &pending.held {
            messages::warning(format_args!("{h}: a live worker holds it; left alone"));
        }
        let fit = host.memory / plan.max_memory().max(1);
        if jobs as u64 > fit {
            messages::warning(format_args!(
                "--jobs {jobs}: at most {fit} trials of {} fit in this host's {} MiB; the others wait",
                plan.configs
                    .iter()
                    .max_by_key(|c| c.memory_bytes())
                    .map(|c| c.memory.as_str())
                    .unwrap_or("?"),
                host.memory >> 20
            ));
        }
    }
    let before = summary::write(&folder, &plan)?;
    let mut obs = progress::display(style);
    obs.begin(
        plan.total() as u64,
        &before.counts,
        pending.queue.len(),
        jobs,
    );
    let opts = SuperviseOptions {
        exe: std::env::current_exe()?,
        jobs,
        memory_budget: host.memory,
        cpusets,
        retry_infra: a.retry_infra,
        tick: std::time::Duration::from_millis(if style == progress::Style::Live {
            100
        } else {
            200
        }),
    };
    let sup = supervise(&folder, &plan, &pending.queue, &opts, obs.as_mut())?;
    drop(obs);
    let status = if sup.interrupted {
        ExitStatus::Interrupted
    } else {
        ExitStatus::from_ok(all_evaluated(&folder, &plan))
    };
    if !quiet {
        let s = summary::compute(&folder, &plan);
        super::run_slurm::print_line(&folder, &s.counts);
        println!("summary {}", folder.root.join("summary.json").display());
        if sup.interrupted {
            messages::status(format_args!(
                "interrupted; `cbrun run --resume {}` completes the run",
                folder.root.display()
            ));
        }
    }
    Ok(status)
}

/// Whether every trial's latest record has the status `cbrun trial`
/// exits 0 for.
pub(super) fn all_evaluated(folder: &RunFolder, plan: &ResolvedPlan) -> bool {
    plan.tasks().all(|t| {
        let Some(dir) = folder.existing_config_dir(&t) else {
            return false;
        };
        match state::read_state(&dir, &t.repeat.to_string()) {
            TrialState::Finished(v) => view_status(&v) == ExitStatus::Success,
            _ => false,
        }
    })
}

/// [`status_of`] for a record read back from disk.
fn view_status(v: &RecordView) -> ExitStatus {
    let mut rec = TrialRecord::start("", "", None, None, String::new());
    rec.terminal_status = v.terminal_status;
    rec.failure_class = v.failure_class;
    status_of(&rec)
}

/// `cbrun run --worker DIR --task N`.
fn worker(a: &RunArgs, dir: &Path) -> ExitStatus {
    let Some(task) = a.task else {
        messages::error("--worker needs --task N");
        return ExitStatus::Usage;
    };
    let folder = match RunFolder::open(dir) {
        Ok(f) => f,
        Err(e) => {
            messages::error(format_args!("--worker {}: {e}", dir.display()));
            return ExitStatus::Usage;
        }
    };
    let o = WorkerOptions {
        task,
        retry_infra: a.retry_infra,
        job_id: a.job_id.clone().or_else(cluster_job_id),
        summary: !a.no_summary,
        notify: a.notify,
    };
    let mut warnings = Vec::new();
    let end = run_worker(&folder, &o, &mut warnings);
    for w in &warnings {
        messages::warning(w);
    }
    match end {
        Ok(WorkerEnd::Ran(rec)) => {
            messages::status(format_args!(
                "task {task}: {} · {} · {:?} · reward {}",
                rec.case_id,
                rec.config.as_deref().unwrap_or(""),
                rec.pipeline_status,
                rec.reward
            ));
            status_of(&rec)
        }
        Ok(WorkerEnd::AlreadyDone(v)) => {
            messages::status(format_args!("task {task}: its outcome already stands"));
            view_status(&v)
        }
        Ok(WorkerEnd::Exhausted(_)) => {
            messages::status(format_args!(
                "task {task}: failed for infrastructure as often as --retry-infra {} allows",
                a.retry_infra
            ));
            ExitStatus::Failure
        }
        Ok(WorkerEnd::Claimed(msg)) => {
            messages::status(format_args!("task {task}: {msg}; left alone"));
            ExitStatus::Success
        }
        Err(WorkerError::Usage(m)) => {
            messages::error(m);
            ExitStatus::Usage
        }
        Err(WorkerError::Folder(m)) => {
            messages::error(m);
            ExitStatus::Failure
        }
    }
}

/// Slurm's job (and array task), when the worker runs as one.
fn cluster_job_id() -> Option<String> {
    cbrun::run::slurm::job_id_from_env(|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_before_specs() {
        assert_eq!(
            split_name("ref=replay:@reference"),
            (Some("ref".into()), "replay:@reference".into())
        );
        assert_eq!(
            split_name("replay:@reference"),
            (None, "replay:@reference".into())
        );
        assert_eq!(split_name("./a=b.toml"), (None, "./a=b.toml".into()));
    }

    #[test]
    fn run_folders_under_host_system_folders_are_refused() {
        let e = refuse_shown_to_sandboxes(Path::new("/opt/cbrun-test-run/x")).unwrap_err();
        assert!(
            e.to_string().contains("inside /opt, which sandboxes see"),
            "{e}"
        );
        assert!(refuse_shown_to_sandboxes(Path::new("/tmp/cbrun-test-run")).is_ok());
    }
}
