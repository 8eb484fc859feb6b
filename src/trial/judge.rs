//! The judge: a fresh sandbox with no network, a copy of the workspace at
//! `/app`, the hidden tests read-only at `/tests/final`, a non-root user,
//! the image's environment only. Its output goes to the trial folder and
//! never back to the agent.
//!
//! The results come from cbrun's result channel (`judge::channel`), two
//! pipes into the sandbox whose far ends cbrun holds; the log is kept for
//! people, read capped, and decides only for runners cbrun has no reporter
//! for (`judge::verdict`). Nothing the sandbox can write is read back as a
//! result: `/logs/verifier` inside is a scratch folder nobody reads.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::case::Case;
use crate::fsutil::{write_atomic, write_json_atomic};
use crate::guard;
use crate::judge::channel::{Channel, ChannelReport};
use crate::judge::parse::{self, Counts, Framework, TestResult};
use crate::judge::verdict::{self, Evidence, Source};
use crate::sandbox::config::RootfsSource;
use crate::sandbox::run::{self, HostView};
use crate::trial::copy::{self, CopyLimits, CopyReport};
use crate::trial::layout::{self, TrialDir};
use crate::trial::phase::{self, bind, set_env, PhaseLimits, NONROOT};
use crate::trial::stage::JudgeInputs;
use crate::trial::view::{self, ScanReport, ViewKind, ViewPolicy};

/// Where the hidden tests appear inside the judge.
pub const TESTS_ROOT: &str = "/tests/final";

#[derive(Debug, Clone)]
pub struct JudgeOptions {
    pub rootfs: RootfsSource,
    /// The image's `Env`, when the rootfs is an image.
    pub image_env: Vec<(String, String)>,
    /// Replaces the case's budget (`--judge-timeout`).
    pub timeout: Option<Duration>,
    pub limits: PhaseLimits,
    pub copy_limits: CopyLimits,
    /// Overlay or copy (`CBRUN_JUDGE_VIEW=copy` forces the copy).
    pub view: ViewPolicy,
    /// What the judged code may write on an overlay (its tmpfs size).
    pub upper_bytes: u64,
}

impl Default for JudgeOptions {
    fn default() -> Self {
        JudgeOptions {
            rootfs: RootfsSource::Host,
            image_env: Vec::new(),
            timeout: None,
            limits: PhaseLimits::default(),
            copy_limits: CopyLimits::default(),
            view: ViewPolicy::from_env(),
            upper_bytes: 2 << 30,
        }
    }
}

/// `final_report.json`: everything the judge found.
#[derive(Debug, Clone, Serialize)]
pub struct JudgeReport {
    pub case_id: String,
    pub reward: u8,
    pub reason: String,
    /// Why the judge could not produce a verdict from the tests, if so.
    pub judge_error: Option<String>,
    /// The error lies with cbrun or the host, not the submission.
    pub infrastructure: bool,
    pub entrypoint: &'static str,
    pub command: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// cbrun was asked to stop while the tests ran.
    pub interrupted: bool,
    pub timeout_sec: f64,
    pub seconds: f64,
    pub framework: Option<Framework>,
    pub counts: Option<Counts>,
    pub expected_count: Option<u64>,
    pub failed_tests: Vec<String>,
    pub tests: Vec<TestResult>,
    /// The judged code tampered with the test run (reward 0).
    pub judge_tampered: bool,
    /// What gave it away, one line each.
    pub tamper_findings: Vec<String>,
    /// Where the counted results came from: `channel` or `log`.
    pub results_source: Option<Source>,
    /// What the log said, for people; never counted for a Python suite.
    pub log_counts: Option<Counts>,
    /// The result channel's sessions (one per reporting test process).
    pub channel: Option<ChannelReport>,
    pub judge_ban_hits: Vec<String>,
    /// `overlay` (the stored workspace under a tmpfs layer) or `copy`.
    pub workspace_view: Option<ViewKind>,
    /// Why the copy when the overlay was tried.
    pub workspace_view_note: Option<String>,
    /// The walk before an overlay.
    pub workspace_scan: Option<ScanReport>,
    pub workspace_copy: Option<CopyReport>,
    pub limits: Option<crate::sandbox::outcome::Limits>,
    pub warnings: Vec<String>,
    /// Banned modules found in the root and hidden from the tests' run.
    pub masked_imports: Vec<guard::probe::MaskedImport>,
}

impl JudgeReport {
    fn new(case: &Case, entrypoint: &'static str, command: String, timeout: Duration) -> Self {
        JudgeReport {
            case_id: case.id.as_str().to_owned(),
            reward: 0,
            reason: String::new(),
            judge_error: None,
            infrastructure: false,
            entrypoint,
            command,
            exit_code: None,
            signal: None,
            timed_out: false,
            interrupted: false,
            timeout_sec: timeout.as_secs_f64(),
            seconds: 0.0,
            framework: None,
            counts: None,
            expected_count: case.test_manifest.expected_count(),
            failed_tests: Vec::new(),
            tests: Vec::new(),
            judge_tampered: false,
            tamper_findings: Vec::new(),
            results_source: None,
            log_counts: None,
            channel: None,
            judge_ban_hits: Vec::new(),
            workspace_view: None,
            workspace_view_note: None,
            workspace_scan: None,
            workspace_copy: None,
            limits: None,
            warnings: Vec::new(),
            masked_imports: Vec::new(),
        }
    }

    fn error(&mut self, why: String, infrastructure: bool) {
        self.reason = why.clone();
        self.judge_error = Some(why);
        self.infrastructure = infrastructure;
        self.reward = 0;
    }

    fn tampered(&mut self, findings: Vec<String>) {
        self.reason = format!("judge tampered: {}", findings.join("; "));
        self.judge_tampered = true;
        self.tamper_findings = findings;
        self.reward = 0;
    }
}

/// Judges `workspace` (a host folder, seen through an overlay or copied,
/// never bound itself) and writes the
/// verifier files into `dir`. Never fails: every problem becomes a reward 0
/// with a `judge_error`.
pub fn run_judge(
    case: &Case,
    workspace: &Path,
    dir: &TrialDir,
    opts: &JudgeOptions,
    host: &HostView,
) -> JudgeReport {
    let started = Instant::now();
    let timeout = opts.timeout.unwrap_or_else(|| case.judge_timeout());
    let (entrypoint, argv, command) = entry_point(case);
    let mut report = JudgeReport::new(case, entrypoint, command, timeout);
    if let Some(why) = case.judge_unsupported() {
        report.error(why, true);
        return finish(report, dir, started);
    }
    // Made fresh through the trial's own descriptor: whatever a
    // previous run left at the name is replaced, never written through.
    if let Err(e) = dir
        .verifier_dir()
        .and_then(|d| d.write_replace("final_tests.log", b"", 0o644))
    {
        report.error(format!("judge log: {e}"), true);
        return finish(report, dir, started);
    }
    let work_name = format!("judge-{}", std::process::id());
    let work = dir.scratch().join(&work_name);
    dir.remove_scratch_entry(&work_name);
    let judged = judge_in(
        case,
        workspace,
        dir,
        &work,
        argv,
        opts,
        host,
        timeout,
        &mut report,
    );
    // The judged code wrote in there: removed as entries, at any depth.
    dir.remove_scratch_entry(&work_name);
    if let Err(e) = judged {
        report.error(e.0, e.1);
    }
    finish(report, dir, started)
}

/// (message, is infrastructure)
struct Failure(String, bool);

#[allow(clippy::too_many_arguments)]
fn judge_in(
    case: &Case,
    workspace: &Path,
    dir: &TrialDir,
    work: &Path,
    argv: Vec<String>,
    opts: &JudgeOptions,
    host: &HostView,
    timeout: Duration,
    report: &mut JudgeReport,
) -> Result<(), Failure> {
    let log = dir.verifier().join("final_tests.log");
    let infra = |what: &str, e: &dyn std::fmt::Display| Failure(format!("{what}: {e}"), true);
    fs::create_dir_all(work).map_err(|e| infra("judge scratch folder", &e))?;
    // The view (see `view`): the submission's own fault when the tree is
    // refused. Unmounted when dropped, at the end of this function.
    let ws_view = view::prepare(
        workspace,
        work,
        &opts.copy_limits,
        opts.upper_bytes,
        opts.view,
        host,
    )
    .map_err(|e| Failure(format!("workspace copy refused: {e}"), false))?;
    report.workspace_view = Some(ws_view.kind);
    report.workspace_view_note = ws_view.note.clone();
    report.workspace_scan = ws_view.scan.clone();
    report.workspace_copy = ws_view.copy.clone();
    let (app, owner) = (ws_view.app.clone(), ws_view.owner);
    let shadows = guard::shadow::shadowed_test_tools(&app, &report.command);
    if !shadows.is_empty() {
        report.tampered(
            shadows
                .into_iter()
                .map(|s| format!("the workspace shadows the test runner: {s}"))
                .collect(),
        );
        return Ok(());
    }
    // Scratch for runners that insist on writing under /logs/verifier;
    // never read back.
    let runner_out = work.join("runner");
    fs::create_dir(&runner_out).map_err(|e| infra("runner output folder", &e))?;
    if let Some(o) = owner {
        copy::chown_tree(&runner_out, o).map_err(|e| infra("runner output folder", &e))?;
    }
    // The hidden tests and the hooks, staged (see `stage`).
    let inputs = JudgeInputs::prepare(case, work);
    report.warnings.extend(inputs.warnings.iter().cloned());
    let hooks = inputs.hooks.clone();
    let bans: Vec<String> = case
        .manifest
        .runner
        .judge_bans
        .iter()
        .filter_map(|b| serde_json::to_value(b).ok()?.as_str().map(str::to_owned))
        .collect();
    let hook_binds = guard::prepare_judge(&hooks, &case.denylist.import_ban, &bans)
        .map_err(|e| infra("judge hooks", &crate::error::Chain(&e)))?;

    let mut cfg = phase::base_config(
        argv,
        &opts.rootfs,
        &opts.image_env,
        &opts.limits,
        timeout,
        log.clone(),
    );
    cfg.user = Some(NONROOT);
    cfg.hostname = "judge".into();
    cfg.binds.push(bind(&app, "/app", false));
    cfg.binds.push(bind(&inputs.tests, TESTS_ROOT, true));
    cfg.binds.push(bind(&runner_out, "/logs/verifier", false));
    for (src, dst) in &hook_binds.binds {
        cfg.binds.push(bind(src, &dst.to_string_lossy(), true));
    }
    for (k, v) in &hook_binds.env {
        set_env(&mut cfg, k, v);
    }
    let mut channel = Channel::open().map_err(|e| infra("result channel", &e))?;
    cfg.pass_fds = channel.take_pass_fds();
    for (k, v) in Channel::env() {
        set_env(&mut cfg, &k, &v);
    }
    phase::hide_host_paths(&mut cfg, &[&case.dir, &dir.root], &inputs.empty)
        .map_err(|e| infra("hiding host folders", &e))?;
    let probe_work = inputs.stage.as_ref().map(|s| s.path().join("probe"));
    let m = guard::probe::probe_and_mask(
        &case.denylist.import_ban,
        &opts.rootfs,
        &opts.image_env,
        host,
        &probe_work.unwrap_or(work.join("probe")),
        &cfg.binds,
    );
    if m.interrupted {
        report.interrupted = true;
        report.error("interrupted before the tests ran".into(), true);
        return Ok(());
    }
    cfg.binds.extend(m.binds);
    report.masked_imports = m.masked;
    report.warnings.extend(m.warnings);
    set_env(&mut cfg, "HOME", "/tmp");
    set_env(&mut cfg, "TMPDIR", "/tmp");
    set_env(&mut cfg, "APP_DIR", "/app");
    set_env(&mut cfg, "CI", "true");
    let wd = case.test_manifest.workdir.as_str();
    cfg.workdir = if wd == "." || wd.is_empty() {
        PathBuf::from("/app")
    } else {
        Path::new("/app").join(wd)
    };

    let outcome = run::run_with(&cfg, host, channel.hooks()).map_err(|e| {
        let code = e.exit_code();
        // A missing interpreter inside is the environment's fault too.
        Failure(
            format!("judge sandbox: {} (exit {code})", crate::error::Chain(&e)),
            true,
        )
    })?;
    // cbrun's own copies of the write ends go, so the pipe reaches EOF.
    cfg.pass_fds.clear();
    let channel = channel.finish(Duration::from_secs(3));
    let _ = write_json_atomic(&dir.logs_cbrun().join("judge.outcome.json"), &outcome);
    report.exit_code = outcome.exit_code;
    report.signal = outcome.signal;
    report.timed_out = outcome.timed_out;
    report.limits = Some(outcome.limits.clone());
    report.warnings.extend(outcome.warnings.iter().cloned());

    // The judged code wrote the log (and may have made it a sparse
    // terabyte): its ends only.
    let (text, cut) = layout::read_sandbox_log(dir, "logs/verifier/final_tests.log");
    if cut {
        report.warnings.push(format!(
            "final_tests.log is over {} MiB: only its first and last {} MiB were read",
            (layout::LOG_HEAD + layout::LOG_TAIL) >> 20,
            layout::LOG_HEAD >> 20
        ));
    }
    report.judge_ban_hits = text
        .lines()
        .filter(|l| l.contains("[cbrun judge-ban]"))
        .map(|l| l.trim().chars().take(500).collect())
        .take(50)
        .collect();
    let label = case.test_manifest.framework_label.as_str();
    let logged = parse::parse_log(&text, Some(label));
    report.log_counts = logged.as_ref().map(|p| p.counts.clone());
    if outcome.interrupted {
        report.interrupted = true;
        report.channel = Some(channel);
        report.error("interrupted while the tests ran".into(), true);
        return Ok(());
    }
    if outcome.timed_out {
        report.channel = Some(channel);
        report.error(
            format!(
                "the tests did not finish within {:.0} s",
                timeout.as_secs_f64()
            ),
            false,
        );
        return Ok(());
    }
    // The label decides; a case without a known one is a Python suite when
    // its command starts Python.
    let python_suite = match Framework::from_label(label) {
        Some(f) => matches!(f, Framework::Pytest | Framework::Unittest),
        None => guard::shadow::runs_python(&report.command),
    };
    let d = verdict::decide(&Evidence {
        channel: &channel,
        channel_expected: python_suite,
        log: logged.as_ref(),
        exit_code: outcome.exit_code,
        timed_out: outcome.timed_out,
        expected_count: report.expected_count,
    });
    report.channel = Some(channel);
    report.results_source = Some(d.source);
    if let Some(p) = &d.parsed {
        report.framework = Some(p.framework.clone());
        report.counts = Some(p.counts.clone());
        report.failed_tests = p.failed_ids();
        report.tests = p.tests.clone();
    } else {
        report.judge_error = Some(match d.source {
            Source::Channel => "no test results came through cbrun's result channel".into(),
            Source::Log => "no test results could be parsed from the output".into(),
        });
    }
    report.reward = d.reward;
    report.reason = d.reason;
    report.judge_tampered = !d.tampered.is_empty();
    report.tamper_findings = d.tampered;
    Ok(())
}

/// `run_acceptance.sh` when the case has one, else the expanded template.
fn entry_point(case: &Case) -> (&'static str, Vec<String>, String) {
    if let Some(rel) = case.acceptance_entry {
        let script = format!("{TESTS_ROOT}/{rel}");
        let argv = vec!["bash".to_owned(), script.clone()];
        ("run_acceptance.sh", argv, format!("bash {script}"))
    } else {
        let cmd = case.judge_command(TESTS_ROOT);
        let argv = vec!["/bin/sh".to_owned(), "-c".to_owned(), cmd.clone()];
        ("test_command_template", argv, cmd)
    }
}

/// Writes reward.txt, reward.json and final_report.json.
fn finish(mut report: JudgeReport, dir: &TrialDir, started: Instant) -> JudgeReport {
    report.seconds = started.elapsed().as_secs_f64();
    let v = dir.verifier();
    let _ = write_atomic(
        &v.join("reward.txt"),
        format!("{}\n", report.reward).as_bytes(),
    );
    let _ = write_json_atomic(
        &v.join("reward.json"),
        &serde_json::json!({
            "reward": report.reward,
            "reason": report.reason,
            "judge_error": report.judge_error,
        }),
    );
    let _ = write_json_atomic(&v.join("final_report.json"), &report);
    report
}
