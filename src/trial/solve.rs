//! The solve phase: the agent in its sandbox, the submission check, the
//! import scan and its one fix attempt.
//!
//! What the agent sees: `/app` (the trial's workspace folder), the public
//! documents read-only under `/environment`, `/logs/agent`, its home. The
//! case's `source/`, `milestones/` and `controls/` are never mounted.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::unistd::Pid;
use serde::Serialize;

use crate::agent::builtin::{self, AgentRef};
use crate::agent::cache::{self as agent_cache, CacheKey, InstallCache};
use crate::agent::evidence::{self, Evidence};
use crate::agent::instruction::{render_instruction, InstructionFacts};
use crate::agent::render::{render_command, RenderInputs};
use crate::agent::spec::{AgentSpec, RunAs};
use crate::case::Case;
use crate::fsutil::quote_text;
use crate::guard;
use crate::net::policy::EgressPolicy;
use crate::sandbox::config::{Identity, RootfsSource, SandboxConfig};
use crate::sandbox::outcome::Outcome;
use crate::sandbox::run::{self, HostView, RunHooks};
use crate::scan::{self, ScanReport};
use crate::sys::dir::{Blame, Dir, DirError};
use crate::trial::copy::{self, CopyLimits, Ownership};
use crate::trial::egress::{self, ProxyChild};
use crate::trial::layout::TrialDir;
use crate::trial::phase::{self, bind, set_env, PhaseLimits, NONROOT, SANDBOX_PATH};
use crate::trial::record::TrialPhase;
use crate::trial::stage::SolveInputs;
use crate::trial::submit::{self, Submission};
use crate::trial::watchdog::Watchdog;
use crate::trial::{NoTrialHooks, TrialHooks};

pub const DEFAULT_SOLVE_BUDGET: Duration = Duration::from_secs(7200);
pub const DEFAULT_STALL: Duration = Duration::from_secs(1800);

/// The solve sandbox's network.
#[derive(Debug, Clone)]
pub enum Egress {
    /// Only loopback.
    None,
    /// Through cbrun's proxy, to the listed hosts only.
    Allowlist(EgressPolicy),
}

#[derive(Debug, Clone)]
pub struct SolveOptions {
    pub agent: AgentRef,
    pub model: Option<String>,
    pub budget: Duration,
    pub stall: Duration,
    pub egress: Egress,
    pub limits: PhaseLimits,
    pub rootfs: RootfsSource,
    /// The image's `Env`, when the rootfs is an image.
    pub image_env: Vec<(String, String)>,
    /// Extra CA certificates the agent's sandboxes trust (`--ca-bundle`).
    pub ca: Option<crate::image::ca::CaBundle>,
    /// What spec agents get besides their spec.
    pub agent_run: AgentRunOptions,
}

/// Options for spec agents that come from the command line, not the spec.
#[derive(Debug, Clone, Default)]
pub struct AgentRunOptions {
    /// `--env K=V`: set in every agent sandbox (names are recorded).
    pub env: Vec<(String, String)>,
    /// `--env-pass NAME`: forwarded from cbrun's environment when set.
    pub env_pass: Vec<String>,
    /// `--agent-version`: replaces the spec's `version` pin.
    pub version: Option<String>,
    /// Prices for `cost_usd`; `None`: no cost is computed.
    pub pricing: Option<crate::usage::PriceTable>,
    /// Where installs are cached; `None`: every trial installs afresh.
    pub install_cache: Option<InstallCache>,
}

impl AgentRunOptions {
    /// What a spec agent of a run gets without flags: the price table
    /// (`CBRUN_PRICING`, else the shipped one) and the shared install cache;
    /// nothing for replays and `none`. Why either is missing is returned.
    pub fn defaults_for(agent: &AgentRef) -> Result<AgentRunOptions, String> {
        if !matches!(agent, AgentRef::Spec(..)) {
            return Ok(AgentRunOptions::default());
        }
        let pricing = crate::usage::PriceTable::resolve(None).map_err(|e| e.to_string())?;
        Ok(AgentRunOptions {
            pricing: Some(pricing),
            install_cache: InstallCache::default_location().ok(),
            ..AgentRunOptions::default()
        })
    }
}

/// The version a spec agent installs: `--agent-version`, else its pin.
pub fn effective_version<'a>(spec: &'a AgentSpec, opts: &'a AgentRunOptions) -> Option<&'a str> {
    opts.version.as_deref().or(spec.version.as_deref())
}

/// The warning for a pin replaced by a moving version.
pub fn version_warning(spec: &AgentSpec, opts: &AgentRunOptions) -> Option<String> {
    let pin = spec.version.as_deref()?;
    let v = opts.version.as_deref()?;
    (!agent_cache::pinned(v) && agent_cache::pinned(pin)).then(|| {
        format!(
            "agent {}: its version pin {pin} is overridden with `{v}`: the install is not reproducible, is not cached, and npm may resolve `{v}` to an older release on this node",
            spec.name
        )
    })
}

/// How the solve phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SolveEnd {
    Submitted,
    NotSubmitted,
    Timeout,
    Interrupted,
    Error,
}

#[derive(Debug, Clone, Serialize)]
pub struct SolveReport {
    pub end: SolveEnd,
    pub submission: Submission,
    pub agent_exit_code: Option<i32>,
    pub stalled: bool,
    /// The agent's own run(s): everything but `setup_seconds`.
    pub seconds: f64,
    /// The agent's install and setup scripts and its version probe.
    pub setup_seconds: f64,
    /// From the agent's start (after install and setup) to the first
    /// moment the submit marker held the valid line.
    pub time_to_submit_seconds: Option<f64>,
    /// The step the solve was in when it ended (where an error or an
    /// interruption stopped it).
    pub phase: TrialPhase,
    /// What went wrong when `end` is `error`.
    pub error: Option<String>,
    /// The error lies with cbrun, the host or the agent's installation.
    pub infrastructure: bool,
    pub scan: Option<ScanReport>,
    /// The first scan's violations, when a fix attempt followed.
    pub first_scan: Option<ScanReport>,
    pub denylist_violation: Option<String>,
    pub denylist_fix_attempts: u32,
    /// Names of forwarded variables (never their values).
    pub env_keys: Vec<String>,
    pub limits: Option<crate::sandbox::outcome::Limits>,
    pub warnings: Vec<String>,
    pub cli_version: Option<String>,
    /// `Some` for a cacheable spec: whether its install came from the cache.
    pub install_cached: Option<bool>,
    /// Usage, cost, infrastructure signals and transcripts of a spec agent.
    pub evidence: Option<Evidence>,
    /// Where the agent's records in the connection log start.
    #[serde(skip)]
    net_from: Option<u64>,
    /// The agent's `*_BASE_URL` variables (model hosts), never recorded:
    /// a URL may carry credentials.
    #[serde(skip)]
    base_urls: Vec<(String, String)>,
    /// Banned modules found in the root and hidden from the agent.
    pub masked_imports: Vec<guard::probe::MaskedImport>,
}

impl SolveReport {
    fn new() -> Self {
        SolveReport {
            end: SolveEnd::NotSubmitted,
            submission: Submission::NotSubmitted("the agent has not run".into()),
            agent_exit_code: None,
            stalled: false,
            seconds: 0.0,
            setup_seconds: 0.0,
            time_to_submit_seconds: None,
            phase: TrialPhase::Solve,
            error: None,
            infrastructure: false,
            scan: None,
            first_scan: None,
            denylist_violation: None,
            denylist_fix_attempts: 0,
            env_keys: Vec::new(),
            limits: None,
            warnings: Vec::new(),
            cli_version: None,
            install_cached: None,
            evidence: None,
            net_from: None,
            base_urls: Vec::new(),
            masked_imports: Vec::new(),
        }
    }

    fn fail(&mut self, why: String, infrastructure: bool) {
        self.end = SolveEnd::Error;
        self.error = Some(why);
        self.infrastructure = infrastructure;
    }
}

/// Runs the solve phase into `dir`. Never fails: problems end up in the
/// report with `end = error`.
pub fn run_solve(case: &Case, dir: &TrialDir, opts: &SolveOptions, host: &HostView) -> SolveReport {
    run_solve_with(case, dir, opts, host, &mut NoTrialHooks)
}

/// [`run_solve`], telling `hooks` each step as it begins and stopping as
/// interrupted, before its next sandbox, when they ask.
pub fn run_solve_with(
    case: &Case,
    dir: &TrialDir,
    opts: &SolveOptions,
    host: &HostView,
    hooks: &mut dyn TrialHooks,
) -> SolveReport {
    let started = Instant::now();
    let mut report = SolveReport::new();
    report.phase = first_phase(&opts.agent);
    // `replay:@NAME` names this case's own control.
    let agent = match builtin::for_case(&opts.agent, case) {
        Ok(a) => a,
        Err(e) => {
            report.fail(e.to_string(), true);
            return report;
        }
    };
    // The registry index enforces the case's install ban.
    let egress = opts.egress.with_install_ban(&case.denylist.install_ban);
    let opts = &SolveOptions {
        agent,
        egress,
        ..opts.clone()
    };
    report.warnings.extend(solve_warnings(opts));
    let owner = match &opts.agent {
        AgentRef::Spec(spec, _) => phase::sandbox_owner(host, identity(spec)),
        _ => None,
    };
    if let Err(e) = prepare_dirs(dir, owner, matches!(opts.agent, AgentRef::Replay(_))) {
        report.fail(format!("preparing the trial folder: {e}"), true);
        return report;
    }
    let deadline = started + opts.budget;
    // Copies of the public documents (and the guard's files) in a neutral
    // place: the sandbox's mountinfo shows no case path.
    let inputs = match &opts.agent {
        AgentRef::Spec(..) => Some(SolveInputs::prepare(case, &dir.scratch())),
        _ => None,
    };
    if let Some(i) = &inputs {
        report.warnings.extend(i.warnings.iter().cloned());
    }
    let mut run = Run {
        case,
        dir,
        opts,
        host,
        inputs: inputs.as_ref(),
        deadline,
        hooks,
    };
    run.attempt(None, &mut report);
    if report.end == SolveEnd::Submitted {
        scan_and_maybe_fix(&mut run, &mut report);
    }
    if let AgentRef::Spec(spec, _) = &opts.agent {
        gather_evidence(&run, spec, &mut report);
    }
    report.seconds = (started.elapsed().as_secs_f64() - report.setup_seconds).max(0.0);
    report
}

/// The step a solve with `agent` begins with.
pub fn first_phase(agent: &AgentRef) -> TrialPhase {
    match agent {
        AgentRef::Spec(spec, _) if has_script(&spec.install_script) => TrialPhase::Install,
        AgentRef::Spec(spec, _) if has_script(&spec.setup_script) => TrialPhase::Setup,
        _ => TrialPhase::Solve,
    }
}

fn has_script(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.trim().is_empty())
}

fn gather_evidence(run: &Run, spec: &AgentSpec, report: &mut SolveReport) {
    let info = evidence::RunInfo {
        spec,
        logs: &["agent.log", "agent.fix.log"],
        net_from: report.net_from,
        base_urls: &report.base_urls,
        model: run.opts.model.as_deref(),
        pricing: run.opts.agent_run.pricing.as_ref(),
    };
    report.evidence = Some(evidence::gather(run.dir, &info));
}

/// Warnings about the options themselves: a replaced version pin, loopback
/// entries that get no forward.
pub fn solve_warnings(opts: &SolveOptions) -> Vec<String> {
    let mut w = Vec::new();
    if let AgentRef::Spec(spec, _) = &opts.agent {
        w.extend(version_warning(spec, &opts.agent_run));
    }
    if let Egress::Allowlist(p) = &opts.egress {
        if let Ok((_, fw)) = egress::forwards(p) {
            w.extend(fw);
        }
    }
    w
}

fn prepare_dirs(dir: &TrialDir, owner: Option<Ownership>, replay: bool) -> std::io::Result<()> {
    // A replayed workspace is created by its copy.
    let mut made = vec!["home"];
    if !replay {
        made.push("workspace");
    }
    for d in &made {
        dir.root_dir()
            .create_dir(d, 0o755)
            .map_err(std::io::Error::other)?;
    }
    if let Some(o) = owner {
        // Fresh and empty: nothing of the agent's is in them yet.
        for d in made.iter().chain([&"logs/agent"]) {
            copy::chown_tree(&dir.root.join(d), o).map_err(std::io::Error::other)?;
        }
    }
    Ok(())
}

/// `(message, whether cbrun or the host is to blame)` for a failure with
/// the trial folder's files.
fn dir_failure(what: &str, e: &DirError) -> (String, bool) {
    (format!("{what}: {e}"), e.blame() == Blame::Host)
}

fn identity(spec: &AgentSpec) -> Option<Identity> {
    match spec.run_as {
        RunAs::Root => None,
        RunAs::Nonroot => Some(NONROOT),
    }
}

/// What every step of one solve shares.
struct Run<'a> {
    case: &'a Case,
    dir: &'a TrialDir,
    opts: &'a SolveOptions,
    host: &'a HostView,
    /// Staged inputs, for spec agents.
    inputs: Option<&'a SolveInputs>,
    deadline: Instant,
    hooks: &'a mut dyn TrialHooks,
}

impl Run<'_> {
    /// One go of the agent (the first, or the fix attempt with `fix`).
    fn attempt(&mut self, fix: Option<&str>, report: &mut SolveReport) {
        solve_attempt(self, fix, report)
    }

    /// Step `p` begins; false (and the report says interrupted) when the
    /// hooks ask the trial to stop instead.
    fn begin(&mut self, p: TrialPhase, report: &mut SolveReport) -> bool {
        report.phase = p;
        if self.hooks.stop_requested() {
            report.end = SolveEnd::Interrupted;
            return false;
        }
        self.hooks.phase(p);
        true
    }
}

fn solve_attempt(run: &mut Run, fix: Option<&str>, report: &mut SolveReport) {
    let (dir, opts) = (run.dir, run.opts);
    let note = |text: String| {
        use std::io::Write;
        if let Ok(mut f) = dir
            .cbrun_dir()
            .and_then(|d| d.open_append("agent.log", 0o644))
        {
            let _ = writeln!(f, "{text}");
        }
    };
    match &opts.agent {
        AgentRef::None => {
            if !run.begin(phase_of(fix), report) {
                return;
            }
            note("cbrun: agent `none`: did nothing and did not submit".into())
        }
        AgentRef::ReplayControl(name) => {
            // run_solve_with resolves it first.
            report.fail(
                format!("replay:@{name}: not resolved against the case"),
                true,
            );
            return;
        }
        AgentRef::Replay(src) => {
            if !run.begin(phase_of(fix), report) {
                return;
            }
            let started = Instant::now();
            note(match fix {
                None => format!(
                    "cbrun: replay: copying {} into /app and submitting",
                    src.display()
                ),
                Some(_) => {
                    "cbrun: replay: fix attempt; a stored workspace cannot change, resubmitting"
                        .into()
                }
            });
            // The oracle: a stored workspace, copied in from outside. A fix
            // attempt changes nothing (a stored workspace cannot learn).
            if fix.is_none() {
                if let Err(e) = copy::copy_workspace(src, &dir.workspace(), &CopyLimits::default())
                {
                    report.fail(format!("replay {}: {e}", src.display()), true);
                    return;
                }
            }
            if let Err(e) = dir.agent_dir().and_then(|d| submit::write_marker(&d)) {
                let (why, infra) = dir_failure("writing the submit marker", &e);
                report.fail(why, infra);
                return;
            }
            if report.time_to_submit_seconds.is_none() {
                report.time_to_submit_seconds = Some(started.elapsed().as_secs_f64());
            }
        }
        AgentRef::Spec(spec, _) => {
            if let Err((why, infra)) = run_agent(run, spec, fix, report) {
                report.fail(why, infra);
                return;
            }
            if matches!(report.end, SolveEnd::Timeout | SolveEnd::Interrupted) {
                return;
            }
        }
    }
    report.submission = match dir.agent_dir() {
        Ok(d) => submit::check(&d),
        Err(e) => Submission::NotSubmitted(format!("logs/agent cannot be opened: {e}")),
    };
    report.end = if report.submission.is_submitted() {
        SolveEnd::Submitted
    } else {
        SolveEnd::NotSubmitted
    };
}

/// The step an attempt of the agent is: the first go, or the fix attempt.
fn phase_of(fix: Option<&str>) -> TrialPhase {
    if fix.is_some() {
        TrialPhase::Fix
    } else {
        TrialPhase::Solve
    }
}

fn scan_and_maybe_fix(run: &mut Run, report: &mut SolveReport) {
    let (case, dir) = (run.case, run.dir);
    let bans = &case.denylist.import_ban;
    if !run.begin(TrialPhase::Scan, report) {
        return;
    }
    let Some(first) = scan(dir, bans, report) else {
        return;
    };
    let _ = dir.write_json("logs/cbrun/scan.json", &first);
    if first.violations.is_empty() {
        report.scan = Some(first);
        return;
    }
    // One fix attempt, told only what was found, never how tests fare.
    let message = first.summary();
    report.first_scan = Some(first);
    report.denylist_fix_attempts = 1;
    // The old marker must go: left in place, it would submit the fix
    // attempt on the agent's behalf.
    if let Err(e) = dir.agent_dir().and_then(|d| submit::remove_marker(&d)) {
        let (why, infra) = dir_failure("removing the submit marker before the fix attempt", &e);
        report.fail(why, infra);
        return;
    }
    run.attempt(Some(&message), report);
    if report.end != SolveEnd::Submitted {
        return;
    }
    // The fix attempt's own scan: a violation here ends it in `fix`.
    report.phase = TrialPhase::Fix;
    if let Some(second) = scan(dir, bans, report) {
        let _ = dir.write_json("logs/cbrun/scan.fix.json", &second);
        if !second.violations.is_empty() {
            report.denylist_violation = Some(second.summary());
        }
        report.scan = Some(second);
    }
}

/// The import scan of the workspace; a failure ends the solve, blamed on
/// whoever caused it (a tree too deep or unreadable is the agent's).
fn scan(dir: &TrialDir, bans: &[String], report: &mut SolveReport) -> Option<ScanReport> {
    let scanned = dir
        .workspace_dir()
        .map_err(scan::ScanError::Dir)
        .and_then(|w| scan::scan_dir(&w, bans));
    match scanned {
        Ok(s) => Some(s),
        Err(e) => {
            report.fail(e.to_string(), e.blame() == Blame::Host);
            None
        }
    }
}

/// The agent's install and setup scripts, then its command.
fn run_agent(
    run: &mut Run,
    spec: &AgentSpec,
    fix: Option<&str>,
    report: &mut SolveReport,
) -> Result<(), (String, bool)> {
    let (case, dir, opts, host, deadline) = (run.case, run.dir, run.opts, run.host, run.deadline);
    let inputs = run
        .inputs
        .ok_or_else(|| ("a spec agent's inputs were not staged".to_owned(), true))?;
    let home = spec.home.clone();
    let instruction = render_instruction(&InstructionFacts {
        has_build_step: !case.manifest.runner.build_command.trim().is_empty(),
        build_command: Some(case.manifest.runner.build_command.clone())
            .filter(|b| !b.trim().is_empty()),
        language_label: case.manifest.runner.language_label.clone(),
        has_hardware_requirements: case.public.hardware_requirements.is_some(),
        fix_attempt: fix.map(str::to_owned),
    });
    // Replaced, never written through: the agent may have left a link,
    // FIFO or hard link at the name.
    dir.agent_dir()
        .and_then(|d| d.write_replace("instruction.md", instruction.as_bytes(), 0o644))
        .map_err(|e| dir_failure("writing the instruction", &e))?;
    let command = render_command(
        spec,
        &RenderInputs {
            instruction: &instruction,
            instruction_file: "/logs/agent/instruction.md",
            model: opts.model.as_deref(),
            log: "/logs/agent/agent.log",
            workdir: "/app",
            home: &home,
        },
    )
    .map_err(|e| (e.to_string(), true))?;

    let mut base = solve_config(case, dir, opts, spec, inputs, report)
        .map_err(|e| (format!("solve sandbox: {e}"), true))?;
    // The root's import probe took a stop-signal: the agent does not start.
    if report.end == SolveEnd::Interrupted {
        return Ok(());
    }

    if fix.is_none() {
        let setup_started = Instant::now();
        let setup = run_setup(run, spec, &mut base, &home, report);
        report.setup_seconds += setup_started.elapsed().as_secs_f64();
        setup?;
        if report.end == SolveEnd::Interrupted {
            return Ok(());
        }
        report.net_from =
            matches!(opts.egress, Egress::Allowlist(_)).then(|| evidence::network_mark(dir));
    }
    if !run.begin(phase_of(fix), report) {
        return Ok(());
    }

    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        report.end = SolveEnd::Timeout;
        return Ok(());
    }
    let out_log = dir.logs_cbrun().join(if fix.is_some() {
        "agent.fix.log"
    } else {
        "agent.log"
    });
    let mut cfg = base;
    cfg.command = vec!["/bin/sh".into(), "-c".into(), command];
    cfg.timeout = Some(remaining);
    cfg.stdout = crate::sandbox::config::Stdio::Append(out_log.clone());
    cfg.stderr = crate::sandbox::config::Stdio::Append(out_log.clone());
    let watchdog = Watchdog::new(
        vec![dir.workspace(), dir.logs_agent(), out_log.clone()],
        opts.stall,
    );
    // The first moment the marker holds the line, seen from the run loop.
    let marker = match (fix, report.time_to_submit_seconds) {
        (None, None) => dir.agent_dir().ok().map(SubmitWatch::new),
        _ => None,
    };
    let agent_started = Instant::now();
    let (out, seen) = run_phase(&cfg, host, &opts.egress, dir, Some(watchdog), marker)
        .map_err(|e| (format!("agent sandbox: {e}"), true))?;
    if fix.is_none() && report.time_to_submit_seconds.is_none() {
        // Written just before the agent exited, between two looks: its
        // end is the first moment cbrun can vouch for.
        report.time_to_submit_seconds = seen.or_else(|| {
            dir.agent_dir()
                .ok()
                .filter(|d| submit::check(d).is_submitted())
                .map(|_| agent_started.elapsed().as_secs_f64())
        });
    }
    let name = if fix.is_some() {
        "agent.fix.outcome.json"
    } else {
        "agent.outcome.json"
    };
    let _ = dir.write_json(&format!("logs/cbrun/{name}"), &out);
    report.agent_exit_code = out.exit_code;
    report.limits = Some(out.limits.clone());
    report.warnings.extend(out.warnings.iter().cloned());
    if out.interrupted {
        report.end = SolveEnd::Interrupted;
    } else if out.timed_out || out.stalled {
        report.stalled = out.stalled;
        report.end = SolveEnd::Timeout;
    }
    Ok(())
}

/// The agent's install and setup scripts, each in its own sandbox, and its
/// version probe.
fn run_setup(
    run: &mut Run,
    spec: &AgentSpec,
    base: &mut SandboxConfig,
    home: &str,
    report: &mut SolveReport,
) -> Result<(), (String, bool)> {
    let (dir, opts, host) = (run.dir, run.opts, run.host);
    // A pinned install found in the cache is bound read-only instead of run.
    let cache = cache_plan(opts, spec);
    if let Some((c, key, install_dir)) = &cache {
        report.install_cached = Some(false);
        if let Some(tree) = c.lookup(key) {
            mount_cached(dir, base, home, install_dir, &tree)
                .map_err(|e| (format!("agent install cache: {e}"), true))?;
            report.install_cached = Some(true);
        }
    }
    for (what, phase, script, secs) in [
        (
            "install",
            TrialPhase::Install,
            &spec.install_script,
            spec.install_timeout_sec,
        ),
        (
            "setup",
            TrialPhase::Setup,
            &spec.setup_script,
            spec.setup_timeout_sec,
        ),
    ] {
        let Some(script) = script.as_deref().filter(|s| !s.trim().is_empty()) else {
            continue;
        };
        if what == "install" && report.install_cached == Some(true) {
            let key = cache.as_ref().map(|(_, k, _)| k.hex.as_str()).unwrap_or("");
            let _ = dir.write(
                "logs/cbrun/install.log",
                format!("cbrun: install: cached ({key}); the install script did not run\n")
                    .as_bytes(),
            );
            continue;
        }
        if !run.begin(phase, report) {
            return Ok(());
        }
        let step_started = Instant::now();
        let log = dir.logs_cbrun().join(format!("{what}.log"));
        let mut cfg = base.clone();
        cfg.command = vec!["/bin/sh".into(), "-c".into(), script.to_owned()];
        cfg.timeout = Some(Duration::from_secs(secs));
        cfg.stdout = crate::sandbox::config::Stdio::Append(log.clone());
        cfg.stderr = crate::sandbox::config::Stdio::Append(log.clone());
        let (out, _) = run_phase(&cfg, host, &opts.egress, dir, None, None)
            .map_err(|e| (format!("agent {what} script: {e}"), true))?;
        let _ = dir.write_json(&format!("logs/cbrun/{what}.outcome.json"), &out);
        if out.interrupted {
            report.end = SolveEnd::Interrupted;
            return Ok(());
        }
        if out.timed_out || out.exit_code != Some(0) {
            return Err((
                format!(
                    "agent {what} script failed ({}); see {}",
                    describe_end(&out),
                    log.display()
                ),
                true,
            ));
        }
        if what == "install" {
            if let Some((c, key, install_dir)) = &cache {
                let secs = step_started.elapsed().as_secs_f64();
                let stored = c
                    .store(key, &dir.home().join(install_dir), install_dir, secs)
                    .map_err(|e| e.to_string())
                    .and_then(|tree| mount_cached(dir, base, home, install_dir, &tree));
                if let Err(e) = stored {
                    report.warnings.push(format!(
                        "agent {}: the install was not cached ({e}); the next trial installs again",
                        spec.name
                    ));
                }
            }
        }
    }
    if let Some(v) = spec
        .version_command
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        if run.hooks.stop_requested() {
            report.end = SolveEnd::Interrupted;
            return Ok(());
        }
        let log = dir.logs_cbrun().join("version.log");
        let mut cfg = base.clone();
        cfg.command = vec!["/bin/sh".into(), "-c".into(), v.to_owned()];
        cfg.timeout = Some(Duration::from_secs(60));
        cfg.stdout = crate::sandbox::config::Stdio::File(log.clone());
        cfg.stderr = crate::sandbox::config::Stdio::Append(dir.logs_cbrun().join("version.err"));
        if let Ok((o, _)) = run_phase(&cfg, host, &Egress::None, dir, None, None) {
            if o.exit_code == Some(0) {
                report.cli_version = first_line(dir, "version.log");
            }
        }
    }
    Ok(())
}

/// The first line of a sandbox-written log in `logs/cbrun/`, read no
/// further than 4 KiB (the sandbox may have made it a sparse terabyte),
/// quoted and cut to 200 characters: it goes into the record.
fn first_line(dir: &TrialDir, name: &str) -> Option<String> {
    let text = dir
        .cbrun_dir()
        .ok()?
        .read_capped(name, 4096)
        .ok()?
        .text_lossy();
    let line = text.lines().next()?.trim();
    let mut q = quote_text(line);
    if q.len() > 200 {
        let mut end = 200;
        while !q.is_char_boundary(end) {
            end -= 1;
        }
        q.truncate(end);
        q.push_str("...");
    }
    Some(q).filter(|q| !q.is_empty())
}

fn describe_end(o: &Outcome) -> String {
    if o.timed_out {
        "timed out".into()
    } else if let Some(c) = o.exit_code {
        format!("exit {c}")
    } else if let Some(s) = o.signal {
        format!("signal {s}")
    } else {
        "no status".into()
    }
}

/// The cache and key for a spec whose install can be cached: it has an
/// `install_dir` and a pinned version, and caching is on.
fn cache_plan(opts: &SolveOptions, spec: &AgentSpec) -> Option<(InstallCache, CacheKey, String)> {
    let cache = opts.agent_run.install_cache.clone()?;
    let install_dir = spec.install_dir.clone()?;
    let version = effective_version(spec, &opts.agent_run)?;
    if !agent_cache::pinned(version) {
        return None;
    }
    let key = CacheKey::new(spec, version, &opts.rootfs);
    Some((cache, key, install_dir))
}

/// Binds the cached `tree` read-only at `<home>/<install_dir>`, replacing
/// whatever the install left there in this trial's home.
fn mount_cached(
    dir: &TrialDir,
    base: &mut SandboxConfig,
    home: &str,
    install_dir: &str,
    tree: &std::path::Path,
) -> Result<(), String> {
    let home_dir = dir
        .root_dir()
        .open_dir("home")
        .map_err(|e| e.to_string())?
        .sandbox_writable();
    // The install's own copy is in the cache now; an empty folder is the
    // mount point.
    home_dir.remove(install_dir).map_err(|e| e.to_string())?;
    let mut at = PathBuf::new();
    for part in install_dir.split('/') {
        at.push(part);
        home_dir.ensure_dir(&at, 0o755).map_err(|e| e.to_string())?;
    }
    let dst = format!("{}/{install_dir}", home.trim_end_matches('/'));
    base.binds.retain(|b| b.dst != std::path::Path::new(&dst));
    base.binds.push(bind(tree, &dst, true));
    Ok(())
}

/// The solve sandbox every agent step shares.
fn solve_config(
    case: &Case,
    dir: &TrialDir,
    opts: &SolveOptions,
    spec: &AgentSpec,
    inputs: &SolveInputs,
    report: &mut SolveReport,
) -> Result<SandboxConfig, String> {
    let home = spec.home.clone();
    let mut cfg = phase::base_config(
        Vec::new(),
        &opts.rootfs,
        &opts.image_env,
        &opts.limits,
        opts.budget,
        dir.logs_cbrun().join("agent.log"),
    );
    cfg.user = identity(spec);
    cfg.hostname = "solve".into();
    cfg.workdir = PathBuf::from("/app");
    cfg.binds.push(bind(dir.workspace(), "/app", false));
    cfg.binds.push(bind(dir.logs_agent(), "/logs/agent", false));
    cfg.binds.push(bind(dir.home(), &home, false));
    // Staged copies (see `stage`): no case path in the sandbox's mountinfo.
    cfg.binds
        .push(bind(&inputs.full_prd, "/environment/prd/Full_PRD.md", true));
    cfg.binds.push(bind(
        &inputs.interface_contract,
        "/environment/Interface_Contract.md",
        true,
    ));
    if let Some(hw) = &inputs.hardware_requirements {
        cfg.binds
            .push(bind(hw, "/environment/Hardware_Requirements.md", true));
    }
    // Package-manager shims over the real tools' own paths.
    let root_on_host = opts.rootfs.host_root();
    let ecosystem = serde_json::to_value(case.denylist.ecosystem)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let shims = guard::prepare_solve(
        &inputs.shims,
        &root_on_host,
        guard::pkgshim::DEFAULT_SEARCH_DIRS,
        &ecosystem,
        &case.denylist.install_ban,
    )
    .map_err(|e| crate::error::chain(&e))?;
    for (src, dst) in shims.binds {
        cfg.binds.push(bind(src, &dst.to_string_lossy(), true));
    }
    for (k, v) in shims.env {
        set_env(&mut cfg, &k, &v);
    }
    set_env(&mut cfg, "HOME", &home);
    set_env(
        &mut cfg,
        "PATH",
        &format!(
            "{home}/.local/bin:{home}/bin:{}",
            opts.image_env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_str())
                .unwrap_or(SANDBOX_PATH)
        ),
    );
    set_env(&mut cfg, "USER", "agent");
    set_env(&mut cfg, "TMPDIR", "/tmp");
    for (k, v) in &spec.env {
        set_env(&mut cfg, k, v);
    }
    report.env_keys.clear();
    for k in &spec.env_passthrough {
        if let Ok(v) = std::env::var(k) {
            set_env(&mut cfg, k, &v);
            report.env_keys.push(k.clone());
        }
    }
    let extra = &opts.agent_run;
    for (k, v) in &extra.env {
        set_env(&mut cfg, k, v);
        report.env_keys.push(k.clone());
    }
    for k in &extra.env_pass {
        if let Ok(v) = std::env::var(k) {
            set_env(&mut cfg, k, &v);
            report.env_keys.push(k.clone());
        }
    }
    if let Some(v) = effective_version(spec, extra) {
        set_env(&mut cfg, "CBRUN_AGENT_VERSION", v);
    }
    report.env_keys.sort();
    report.env_keys.dedup();
    report.base_urls = cfg
        .env
        .iter()
        .filter(|e| e.key.ends_with("_BASE_URL"))
        .map(|e| (e.key.clone(), e.value.clone()))
        .collect();
    // The stages folder too: it holds other runs' staged hidden tests, in
    // case the state root lies under a system folder the sandbox shows.
    let stages = inputs.stage.as_ref().and_then(|s| s.path().parent());
    let mut hidden = vec![case.dir.as_path(), dir.root.as_path()];
    hidden.extend(stages);
    phase::hide_host_paths(&mut cfg, &hidden, &inputs.empty)
        .map_err(|e| format!("hiding host folders: {e}"))?;
    if let Egress::Allowlist(_) = &opts.egress {
        for (k, v) in egress::proxy_env() {
            set_env(&mut cfg, k, &v);
        }
    }
    let work = inputs.stage.as_ref().map(|s| s.path().join("probe"));
    let m = guard::probe::probe_and_mask(
        &case.denylist.import_ban,
        &opts.rootfs,
        &opts.image_env,
        &HostView::detect(),
        &work.unwrap_or(dir.scratch().join("probe")),
        &cfg.binds,
    );
    if m.interrupted {
        report.end = SolveEnd::Interrupted;
    }
    cfg.binds.extend(m.binds);
    report.masked_imports = m.masked;
    let mut warnings = m.warnings;
    if let Some(ca) = &opts.ca {
        let at = inputs.stage.as_ref().map(|s| s.path().to_path_buf());
        let t = crate::image::ca::sandbox_trust(ca, &root_on_host, &at.unwrap_or(dir.scratch()))
            .map_err(|e| format!("--ca-bundle: {e}"))?;
        t.binds
            .iter()
            .for_each(|(s, d)| cfg.binds.push(bind(s, &d.to_string_lossy(), true)));
        t.env.iter().for_each(|(k, v)| set_env(&mut cfg, k, v));
        warnings.push(t.usage.describe("solve sandbox"));
    }
    // Once per trial, though a fix attempt builds this again.
    warnings.retain(|w| !report.warnings.contains(w));
    report.warnings.extend(warnings);
    Ok(cfg)
}

/// Runs one solve sandbox with the proxy and watchdog it needs; with
/// `marker`, also when (in seconds from the start) the submit marker was
/// first seen holding the line.
fn run_phase(
    cfg: &SandboxConfig,
    host: &HostView,
    egress: &Egress,
    dir: &TrialDir,
    watchdog: Option<Watchdog>,
    marker: Option<SubmitWatch>,
) -> Result<(Outcome, Option<f64>), String> {
    let mut hooks = SolveHooks {
        egress: match egress {
            Egress::Allowlist(p) => Some(p),
            Egress::None => None,
        },
        log: dir.network_log(),
        proxy: None,
        next_stall_check: watchdog.as_ref().map(|w| Instant::now() + w.interval()),
        watchdog,
        marker,
    };
    let out = run::run_with(cfg, host, &mut hooks).map_err(|e| crate::error::chain(&e));
    drop(hooks.proxy.take());
    Ok((out?, hooks.marker.and_then(|m| m.seen)))
}

/// How often the submit marker is looked at while the agent runs: one
/// descriptor-relative open and a read of at most 20 bytes.
const MARKER_POLL: Duration = Duration::from_millis(250);

/// Watches the agent's submit marker from the run loop.
struct SubmitWatch {
    agent_dir: Dir,
    started: Instant,
    seen: Option<f64>,
}

impl SubmitWatch {
    fn new(agent_dir: Dir) -> Self {
        SubmitWatch {
            agent_dir,
            started: Instant::now(),
            seen: None,
        }
    }

    fn look(&mut self) {
        if self.seen.is_none() && submit::check(&self.agent_dir).is_submitted() {
            self.seen = Some(self.started.elapsed().as_secs_f64());
        }
    }
}

struct SolveHooks<'a> {
    egress: Option<&'a EgressPolicy>,
    log: PathBuf,
    proxy: Option<ProxyChild>,
    watchdog: Option<Watchdog>,
    /// The watchdog fingerprints whole trees: it keeps its own pace when
    /// the marker is looked at more often.
    next_stall_check: Option<Instant>,
    marker: Option<SubmitWatch>,
}

impl RunHooks for SolveHooks<'_> {
    fn created(&mut self, init: Pid) -> Result<(), String> {
        if let Some(p) = self.egress {
            self.proxy = Some(egress::start(init, p, &self.log)?);
        }
        Ok(())
    }
    fn watch_interval(&self) -> Option<Duration> {
        let stall = self.watchdog.as_ref().map(Watchdog::interval);
        match (&self.marker, stall) {
            (Some(m), Some(s)) if m.seen.is_none() => Some(s.min(MARKER_POLL)),
            (Some(m), None) if m.seen.is_none() => Some(MARKER_POLL),
            _ => stall,
        }
    }
    fn stalled(&mut self) -> bool {
        if let Some(m) = self.marker.as_mut() {
            m.look();
        }
        let (Some(w), Some(at)) = (self.watchdog.as_mut(), self.next_stall_check) else {
            return false;
        };
        let now = Instant::now();
        if now < at {
            return false;
        }
        self.next_stall_check = Some(now + w.interval());
        w.stalled()
    }
}
