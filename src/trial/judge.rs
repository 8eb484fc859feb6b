//! The judge: a fresh sandbox with no network, a copy of the workspace at
//! `/app`, the hidden tests read-only at `/tests/final`, a non-root user,
//! the image's environment only. Its output goes to the trial folder and
//! never back to the agent.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::case::Case;
use crate::fsutil::{write_atomic, write_json_atomic};
use crate::guard;
use crate::judge::parse::{self, Counts, Framework, Parsed, TestResult};
use crate::judge::reward::{gate, GateInput};
use crate::sandbox::config::RootfsSource;
use crate::sandbox::run::{self, HostView};
use crate::trial::copy::{self, CopyLimits, CopyReport};
use crate::trial::layout::TrialDir;
use crate::trial::phase::{self, bind, set_env, PhaseLimits, NONROOT};
use crate::trial::stage::JudgeInputs;

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
}

impl Default for JudgeOptions {
    fn default() -> Self {
        JudgeOptions {
            rootfs: RootfsSource::Host,
            image_env: Vec::new(),
            timeout: None,
            limits: PhaseLimits::default(),
            copy_limits: CopyLimits::default(),
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
    /// Parsed from a JUnit XML file the runner wrote, not from the log.
    pub from_junit: bool,
    pub judge_ban_hits: Vec<String>,
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
            from_junit: false,
            judge_ban_hits: Vec::new(),
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
}

/// Judges `workspace` (a host folder, copied, never mounted) and writes the
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
    let log = dir.verifier().join("final_tests.log");
    if let Err(e) = fs::write(&log, b"") {
        report.error(format!("cannot write {}: {e}", log.display()), true);
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
    let owner = phase::sandbox_owner(host, Some(NONROOT));

    // The copy: the submission's own fault when it cannot be made.
    let app = work.join("app");
    match copy::copy_workspace_owned(workspace, &app, &opts.copy_limits, owner) {
        Ok(c) => report.workspace_copy = Some(c),
        Err(e) => return Err(Failure(format!("workspace copy refused: {e}"), false)),
    }
    let shadows = guard::shadow::shadowed_test_tools(&app, &report.command);
    if !shadows.is_empty() {
        return Err(Failure(
            format!(
                "the workspace shadows the test runner: {}",
                shadows.join("; ")
            ),
            false,
        ));
    }
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
        .map_err(|e| infra("judge hooks", &e))?;

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
        // pytest also reports every test's outcome (-rA) and writes JUnit
        // XML where the judge reads it.
        if k == "PYTEST_ADDOPTS" {
            let v = format!("{v} -rA --junitxml=/logs/verifier/pytest-junit.xml");
            set_env(&mut cfg, k, &v);
        } else {
            set_env(&mut cfg, k, v);
        }
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

    let outcome = run::run(&cfg, host).map_err(|e| {
        let code = e.exit_code();
        // A missing interpreter inside is the environment's fault too.
        Failure(format!("judge sandbox: {e} (exit {code})"), true)
    })?;
    let _ = write_json_atomic(&dir.logs_cbrun().join("judge.outcome.json"), &outcome);
    report.exit_code = outcome.exit_code;
    report.signal = outcome.signal;
    report.timed_out = outcome.timed_out;
    report.limits = Some(outcome.limits.clone());
    report.warnings.extend(outcome.warnings.iter().cloned());

    // The judged code wrote the log (and may have made it a sparse
    // terabyte): its ends only.
    let text = crate::trial::layout::read_sandbox_log(dir, "logs/verifier/final_tests.log");
    report.judge_ban_hits = text
        .lines()
        .filter(|l| l.contains("[cbrun judge-ban]"))
        .map(|l| l.trim().to_owned())
        .take(50)
        .collect();
    let parsed = junit_results(&runner_out)
        .or_else(|| parse::parse_log(&text, Some(case.test_manifest.framework_label.as_str())));
    if let Some(p) = &parsed {
        report.framework = Some(p.framework.clone());
        report.counts = Some(p.counts.clone());
        report.failed_tests = p.failed_ids();
        report.tests = p.tests.clone();
    }
    report.from_junit = parsed
        .as_ref()
        .map(|p| p.framework == Framework::Junit)
        .unwrap_or(false);
    if outcome.interrupted {
        report.interrupted = true;
        report.error("interrupted while the tests ran".into(), true);
        return Ok(());
    }
    if outcome.timed_out {
        report.error(
            format!(
                "the tests did not finish within {:.0} s",
                timeout.as_secs_f64()
            ),
            false,
        );
        return Ok(());
    }
    let verdict = gate(&GateInput {
        parsed: parsed.as_ref(),
        exit_code: outcome.exit_code,
        timed_out: outcome.timed_out,
        expected_count: report.expected_count,
    });
    report.reward = verdict.reward;
    report.reason = verdict.reason;
    if parsed.is_none() {
        report.judge_error = Some("no test results could be parsed from the output".into());
    }
    Ok(())
}

/// Results from JUnit XML files the runner wrote, when any parse (the
/// judged code could write there too: regular files only, capped).
fn junit_results(dir: &Path) -> Option<Parsed> {
    let mut merged: Option<Parsed> = None;
    for text in crate::trial::layout::sandbox_xml_files(dir) {
        let Ok(p) = parse::parse_junit(&text) else {
            continue;
        };
        merged = Some(match merged {
            None => p,
            Some(mut m) => {
                m.counts.add(&p.counts);
                m.tests.extend(p.tests);
                m
            }
        });
    }
    merged
}

/// `run_acceptance.sh` when the case has one, else the expanded template.
fn entry_point(case: &Case) -> (&'static str, Vec<String>, String) {
    if case.acceptance_script.is_some() {
        let script = format!("{TESTS_ROOT}/tests/run_acceptance.sh");
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
