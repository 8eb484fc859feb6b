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

use crate::agent::builtin::AgentRef;
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
use crate::sys::dir::{Blame, DirError};
use crate::trial::copy::{self, CopyLimits, Ownership};
use crate::trial::egress::{self, ProxyChild};
use crate::trial::layout::TrialDir;
use crate::trial::phase::{self, bind, set_env, PhaseLimits, NONROOT, SANDBOX_PATH};
use crate::trial::stage::SolveInputs;
use crate::trial::submit::{self, Submission};
use crate::trial::watchdog::Watchdog;

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
    pub seconds: f64,
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
    // The registry index enforces the case's install ban.
    let egress = opts.egress.with_install_ban(&case.denylist.install_ban);
    let opts = &SolveOptions {
        egress,
        ..opts.clone()
    };
    let started = Instant::now();
    let mut report = SolveReport::new();
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
    let run = Run {
        case,
        dir,
        opts,
        host,
        inputs: inputs.as_ref(),
        deadline,
    };
    run.attempt(None, &mut report);
    if report.end == SolveEnd::Submitted {
        scan_and_maybe_fix(&run, &mut report);
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
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
#[derive(Clone, Copy)]
struct Run<'a> {
    case: &'a Case,
    dir: &'a TrialDir,
    opts: &'a SolveOptions,
    host: &'a HostView,
    /// Staged inputs, for spec agents.
    inputs: Option<&'a SolveInputs>,
    deadline: Instant,
}

impl Run<'_> {
    /// One go of the agent (the first, or the fix attempt with `fix`).
    fn attempt(&self, fix: Option<&str>, report: &mut SolveReport) {
        solve_attempt(self, fix, report)
    }
}

fn solve_attempt(run: &Run, fix: Option<&str>, report: &mut SolveReport) {
    let Run { dir, opts, .. } = *run;
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
        AgentRef::None => note("cbrun: agent `none`: did nothing and did not submit".into()),
        AgentRef::Replay(src) => {
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

fn scan_and_maybe_fix(run: &Run, report: &mut SolveReport) {
    let Run { case, dir, .. } = *run;
    let bans = &case.denylist.import_ban;
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
    run: &Run,
    spec: &AgentSpec,
    fix: Option<&str>,
    report: &mut SolveReport,
) -> Result<(), (String, bool)> {
    let Run {
        case,
        dir,
        opts,
        host,
        deadline,
        ..
    } = *run;
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
    .map_err(|e| (format!("agent {}: {e}", spec.name), true))?;

    let base = solve_config(case, dir, opts, spec, inputs, report)
        .map_err(|e| (format!("solve sandbox: {e}"), true))?;

    if fix.is_none() {
        for (what, script, secs) in [
            ("install", &spec.install_script, spec.install_timeout_sec),
            ("setup", &spec.setup_script, spec.setup_timeout_sec),
        ] {
            let Some(script) = script.as_deref().filter(|s| !s.trim().is_empty()) else {
                continue;
            };
            let log = dir.logs_cbrun().join(format!("{what}.log"));
            let mut cfg = base.clone();
            cfg.command = vec!["/bin/sh".into(), "-c".into(), script.to_owned()];
            cfg.timeout = Some(Duration::from_secs(secs));
            cfg.stdout = crate::sandbox::config::Stdio::Append(log.clone());
            cfg.stderr = crate::sandbox::config::Stdio::Append(log.clone());
            let out = run_phase(&cfg, host, &opts.egress, dir, None)
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
        }
        if let Some(v) = spec
            .version_command
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            let log = dir.logs_cbrun().join("version.log");
            let mut cfg = base.clone();
            cfg.command = vec!["/bin/sh".into(), "-c".into(), v.to_owned()];
            cfg.timeout = Some(Duration::from_secs(60));
            cfg.stdout = crate::sandbox::config::Stdio::File(log.clone());
            cfg.stderr =
                crate::sandbox::config::Stdio::Append(dir.logs_cbrun().join("version.err"));
            if let Ok(o) = run_phase(&cfg, host, &Egress::None, dir, None) {
                if o.exit_code == Some(0) {
                    report.cli_version = first_line(dir, "version.log");
                }
            }
        }
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
    let out = run_phase(&cfg, host, &opts.egress, dir, Some(watchdog))
        .map_err(|e| (format!("agent sandbox: {e}"), true))?;
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
    .map_err(|e| e.to_string())?;
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

/// Runs one solve sandbox with the proxy and watchdog it needs.
fn run_phase(
    cfg: &SandboxConfig,
    host: &HostView,
    egress: &Egress,
    dir: &TrialDir,
    watchdog: Option<Watchdog>,
) -> Result<Outcome, String> {
    let mut hooks = SolveHooks {
        egress: match egress {
            Egress::Allowlist(p) => Some(p),
            Egress::None => None,
        },
        log: dir.network_log(),
        proxy: None,
        watchdog,
    };
    let out = run::run_with(cfg, host, &mut hooks).map_err(|e| e.to_string());
    drop(hooks.proxy.take());
    out
}

struct SolveHooks<'a> {
    egress: Option<&'a EgressPolicy>,
    log: PathBuf,
    proxy: Option<ProxyChild>,
    watchdog: Option<Watchdog>,
}

impl RunHooks for SolveHooks<'_> {
    fn created(&mut self, init: Pid) -> Result<(), String> {
        if let Some(p) = self.egress {
            self.proxy = Some(egress::start(init, p, &self.log)?);
        }
        Ok(())
    }
    fn watch_interval(&self) -> Option<Duration> {
        self.watchdog.as_ref().map(Watchdog::interval)
    }
    fn stalled(&mut self) -> bool {
        self.watchdog
            .as_mut()
            .map(Watchdog::stalled)
            .unwrap_or(false)
    }
}
