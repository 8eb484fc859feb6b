//! Runs a case's `runner.environment_checks` the way a trial would meet
//! them: each `solve` check in a solve-like sandbox (root inside, an empty
//! `/app`, the public documents under `/environment`, no hidden tests) and
//! each `judge` check in a judge-like one (uid 1000, an empty `/app`, the
//! hidden tests read-only at `/tests/final`); `both` runs in both. No
//! network in either. Every check gets its own fresh sandbox and its own
//! timeout, and runs as `bash -o pipefail -lc COMMAND`, as the published
//! runner runs it.
//!
//! Before the case's own checks, each phase runs cbrun's baseline: in the
//! solve sandbox the hidden tests are absent, `/app` is empty and the
//! public documents are readable; in the judge sandbox the hidden tests are
//! present; in both, `python3` can import pytest when the judge command
//! uses it (the published baseline checks the same).

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::load::Case;
use super::schema::{EnvironmentCheck, Phase};
use crate::sandbox::config::{Identity, RootfsSource, SandboxConfig};
use crate::sandbox::run::{self, HostView};
use crate::trial::phase::{self, bind, set_env, PhaseLimits, NONROOT};

/// Where the hidden tests appear in the judge.
const TESTS_ROOT: &str = "/tests/final";
/// How much of a check's output is kept.
const OUTPUT_TAIL_BYTES: u64 = 4000;
/// The baseline's own budget.
const BASELINE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which trial sandbox a check runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxPhase {
    Solve,
    Judge,
}

impl SandboxPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxPhase::Solve => "solve",
            SandboxPhase::Judge => "judge",
        }
    }

    fn runs(self, p: Phase) -> bool {
        match self {
            SandboxPhase::Solve => p.in_solve(),
            SandboxPhase::Judge => p.in_judge(),
        }
    }
}

/// The root filesystem the checks run on, and what keeps an image's
/// unpacked root in use while they run.
pub struct CheckRoot {
    pub rootfs: RootfsSource,
    /// The image's `Env`, when the root is an image.
    pub env: Vec<(String, String)>,
    _image: Option<crate::image::unpacked::ImageUse>,
}

impl CheckRoot {
    /// `--rootfs host|DIR`, or `--image NAME` from the store.
    pub fn open(
        rootfs: RootfsSource,
        image: Option<&str>,
        host: &HostView,
    ) -> Result<CheckRoot, EnvCheckError> {
        let Some(name) = image else {
            return Ok(CheckRoot {
                rootfs,
                env: Vec::new(),
                _image: None,
            });
        };
        let image_err = |e: &(dyn std::error::Error + 'static)| EnvCheckError::Image {
            name: name.to_owned(),
            why: crate::error::chain(e),
        };
        let root = crate::image::store::Store::default_root().map_err(|e| image_err(&e))?;
        let store = crate::image::store::Store::open(root).map_err(|e| image_err(&e))?;
        let u = crate::image::unpacked::use_image(&store, name, &host.mapping, None)
            .map_err(|e| image_err(&e))?;
        Ok(CheckRoot {
            rootfs: RootfsSource::Image(u.root.clone()),
            env: u.env.clone(),
            _image: Some(u),
        })
    }
}

pub struct EnvCheckOptions {
    pub root: CheckRoot,
    pub limits: PhaseLimits,
    /// Where the scratch folder (empty workspaces, logs) is made; it is
    /// removed afterwards.
    pub scratch_parent: PathBuf,
}

impl EnvCheckOptions {
    pub fn new(root: CheckRoot) -> Self {
        EnvCheckOptions {
            root,
            limits: PhaseLimits::default(),
            scratch_parent: std::env::temp_dir(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EnvCheckError {
    #[error("--image {name}: {why}")]
    Image { name: String, why: String },
    #[error("scratch folder {}", path.display())]
    Scratch {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One check's result in one phase.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub phase: SandboxPhase,
    pub name: String,
    /// cbrun's own check (the baseline, the judge profile) rather than the case's.
    pub builtin: bool,
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub timeout_sec: f64,
    pub seconds: f64,
    /// The last bytes the command printed (both streams), lossily decoded.
    pub output: String,
    /// Why the check could not run or could not pass, beyond its exit status.
    pub error: Option<String>,
}

impl CheckResult {
    fn new(phase: SandboxPhase, name: &str, builtin: bool, timeout: Duration) -> Self {
        CheckResult {
            phase,
            name: name.to_owned(),
            builtin,
            passed: false,
            exit_code: None,
            signal: None,
            timed_out: false,
            timeout_sec: timeout.as_secs_f64(),
            seconds: 0.0,
            output: String::new(),
            error: None,
        }
    }

    /// Why it failed, in a few words (empty when it passed).
    pub fn failure(&self) -> String {
        if self.passed {
            return String::new();
        }
        if let Some(e) = &self.error {
            return e.clone();
        }
        if self.timed_out {
            return format!("timed out after {} s", self.timeout_sec);
        }
        match (self.exit_code, self.signal) {
            (_, Some(s)) => format!("killed by signal {s}"),
            (Some(c), None) => format!("exit {c}"),
            (None, None) => "no exit status".to_owned(),
        }
    }
}

/// Runs the baseline and every environment check of `case`, solve phase
/// first. Each result says whether it passed; only a scratch folder that
/// cannot be made is an error.
pub fn run_checks(
    case: &Case,
    opts: &EnvCheckOptions,
    host: &HostView,
) -> Result<Vec<CheckResult>, EnvCheckError> {
    let scratch = Scratch::create(&opts.scratch_parent)?;
    let mut out = Vec::new();
    for phase in [SandboxPhase::Solve, SandboxPhase::Judge] {
        let base = baseline(case, phase);
        out.push(run_one(
            case,
            phase,
            "baseline",
            true,
            &base,
            BASELINE_TIMEOUT,
            opts,
            host,
            &scratch,
        ));
        if phase == SandboxPhase::Judge {
            if let Some(why) = case.judge_unsupported() {
                let mut r = CheckResult::new(phase, "judge_profile", true, Duration::ZERO);
                r.error = Some(why);
                out.push(r);
            }
        }
        let checks: Vec<&EnvironmentCheck> = case
            .manifest
            .runner
            .environment_checks
            .iter()
            .filter(|c| phase.runs(c.phase))
            .collect();
        for c in checks {
            out.push(run_one(
                case,
                phase,
                &c.name,
                false,
                &c.command,
                c.timeout(),
                opts,
                host,
                &scratch,
            ));
        }
    }
    Ok(out)
}

/// cbrun's baseline for `phase`, as a shell script.
fn baseline(case: &Case, phase: SandboxPhase) -> String {
    let fail = |what: &str| format!("{{ echo 'baseline: {what}' >&2; exit 1; }}");
    let mut lines = Vec::new();
    match phase {
        SandboxPhase::Solve => {
            lines.push(format!(
                "test ! -e {TESTS_ROOT} || {}",
                fail("the hidden tests are visible")
            ));
            lines.push(format!(
                "test -z \"$(ls -A /app)\" || {}",
                fail("/app is not empty")
            ));
            for doc in [
                "/environment/prd/Full_PRD.md",
                "/environment/Interface_Contract.md",
            ] {
                lines.push(format!(
                    "test -r {doc} || {}",
                    fail(&format!("{doc} unreadable"))
                ));
            }
        }
        SandboxPhase::Judge => {
            lines.push(format!(
                "test -r {TESTS_ROOT}/test_manifest.json || {}",
                fail("the hidden tests are not at /tests/final")
            ));
        }
    }
    if mentions_pytest(&case.judge_command(TESTS_ROOT)) {
        lines.push(format!(
            "python3 -c 'import pytest' || {}",
            fail("the judge command runs pytest and python3 cannot import it")
        ));
    }
    lines.push("echo baseline ok".to_owned());
    lines.join("\n")
}

/// Whether `pytest` appears as a word of the command.
fn mentions_pytest(cmd: &str) -> bool {
    cmd.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == "pytest")
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    case: &Case,
    phase: SandboxPhase,
    name: &str,
    builtin: bool,
    command: &str,
    timeout: Duration,
    opts: &EnvCheckOptions,
    host: &HostView,
    scratch: &Scratch,
) -> CheckResult {
    let mut r = CheckResult::new(phase, name, builtin, timeout);
    let started = Instant::now();
    let dir = match scratch.next() {
        Ok(d) => d,
        Err(e) => {
            r.error = Some(format!("scratch folder: {e}"));
            return r;
        }
    };
    let log = dir.join("output.log");
    let cfg = match config(case, phase, command, timeout, &dir, &log, opts, host) {
        Ok(c) => c,
        Err(e) => {
            r.error = Some(e);
            return r;
        }
    };
    match run::run(&cfg, host) {
        Ok(o) => {
            r.exit_code = o.exit_code;
            r.signal = o.signal;
            r.timed_out = o.timed_out;
            r.passed = o.exit_code == Some(0) && !o.timed_out && o.signal.is_none();
            if o.interrupted {
                r.passed = false;
                r.error = Some("interrupted".to_owned());
            }
        }
        Err(e) => {
            // A root without bash lands here (command not found).
            r.error = Some(format!(
                "{} sandbox: {}",
                phase.as_str(),
                crate::error::Chain(&e)
            ));
        }
    }
    r.seconds = started.elapsed().as_secs_f64();
    r.output = tail(&log);
    let _ = fs::remove_dir_all(&dir);
    r
}

/// The sandbox of one check.
#[allow(clippy::too_many_arguments)]
fn config(
    case: &Case,
    phase: SandboxPhase,
    command: &str,
    timeout: Duration,
    dir: &Path,
    log: &Path,
    opts: &EnvCheckOptions,
    host: &HostView,
) -> Result<SandboxConfig, String> {
    let argv = ["bash", "-o", "pipefail", "-lc", command]
        .map(str::to_owned)
        .to_vec();
    fs::write(log, b"").map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cfg = phase::base_config(
        argv,
        &opts.root.rootfs,
        &opts.root.env,
        &opts.limits,
        timeout,
        log.to_path_buf(),
    );
    let user: Option<Identity> = match phase {
        SandboxPhase::Solve => None,
        SandboxPhase::Judge => Some(NONROOT),
    };
    cfg.user = user;
    cfg.hostname = phase.as_str().to_owned();
    cfg.workdir = PathBuf::from("/app");
    let app = dir.join("app");
    make_dir(&app, 0o755)?;
    if let Some(o) = phase::sandbox_owner(host, user) {
        std::os::unix::fs::chown(&app, Some(o.uid), Some(o.gid))
            .map_err(|e| format!("{}: {e}", app.display()))?;
    }
    cfg.binds.push(bind(&app, "/app", false));
    match phase {
        SandboxPhase::Solve => {
            cfg.binds.push(bind(
                &case.public.full_prd,
                "/environment/prd/Full_PRD.md",
                true,
            ));
            cfg.binds.push(bind(
                &case.public.interface_contract,
                "/environment/Interface_Contract.md",
                true,
            ));
            if let Some(hw) = &case.public.hardware_requirements {
                cfg.binds
                    .push(bind(hw, "/environment/Hardware_Requirements.md", true));
            }
        }
        SandboxPhase::Judge => {
            cfg.binds.push(bind(&case.final_dir, TESTS_ROOT, true));
            set_env(&mut cfg, "APP_DIR", "/app");
            set_env(&mut cfg, "CI", "true");
        }
    }
    set_env(&mut cfg, "HOME", "/tmp");
    set_env(&mut cfg, "TMPDIR", "/tmp");
    let empty = dir.join("empty");
    phase::hide_host_paths(&mut cfg, &[&case.dir, dir], &empty)
        .map_err(|e| format!("hiding host folders: {e}"))?;
    Ok(cfg)
}

fn make_dir(p: &Path, mode: u32) -> Result<(), String> {
    fs::DirBuilder::new()
        .mode(mode)
        .create(p)
        .and_then(|()| fs::set_permissions(p, fs::Permissions::from_mode(mode)))
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// The last [`OUTPUT_TAIL_BYTES`] of `log`, with control characters other
/// than newline and tab replaced (the output is the sandbox's, not ours).
fn tail(log: &Path) -> String {
    let Ok(mut f) = fs::File::open(log) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(OUTPUT_TAIL_BYTES)));
    let mut buf = Vec::new();
    let _ = f.take(OUTPUT_TAIL_BYTES).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf)
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

/// A private folder for one `run_checks`, removed on drop.
struct Scratch {
    root: PathBuf,
    n: AtomicU32,
}

static SCRATCH_SEQ: AtomicU32 = AtomicU32::new(0);

impl Scratch {
    fn create(parent: &Path) -> Result<Scratch, EnvCheckError> {
        let root = parent.join(format!(
            "cbrun-envcheck-{}-{}",
            std::process::id(),
            SCRATCH_SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        // `create` refuses an existing entry, a planted symlink included.
        // 0711: the sandbox users reach their own folders inside by path.
        fs::DirBuilder::new()
            .mode(0o711)
            .create(&root)
            .and_then(|()| fs::set_permissions(&root, fs::Permissions::from_mode(0o711)))
            .map_err(|source| EnvCheckError::Scratch {
                path: root.clone(),
                source,
            })?;
        Ok(Scratch {
            root,
            n: AtomicU32::new(0),
        })
    }

    /// A fresh sub-folder for one check.
    fn next(&self) -> Result<PathBuf, String> {
        let p = self
            .root
            .join(self.n.fetch_add(1, Ordering::SeqCst).to_string());
        make_dir(&p, 0o711)?;
        Ok(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_detection() {
        assert!(mentions_pytest(
            "PYTHONPATH=src python3 -m pytest /tests/final/tests/a.py"
        ));
        assert!(mentions_pytest("pytest -q"));
        assert!(!mentions_pytest(
            "python3 /tests/final/tests/run_pytests_like.py"
        ));
        assert!(!mentions_pytest("node --test x.js"));
    }

    #[test]
    fn tail_keeps_the_end_and_strips_controls() {
        let dir = std::env::temp_dir().join(format!("cbrun-envcheck-tail-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        let p = dir.join("log");
        let mut body = "x".repeat(10_000);
        body.push_str("\x1b[31mend\n");
        fs::write(&p, &body).unwrap();
        let t = tail(&p);
        assert_eq!(t.len(), 4000 + 2, "{}", t.len()); // U+FFFD is 3 bytes
        assert!(t.ends_with("\u{fffd}[31mend\n"));
        assert_eq!(tail(&dir.join("missing")), "");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn failure_text() {
        let mut r = CheckResult::new(SandboxPhase::Judge, "x", false, Duration::from_secs(2));
        r.exit_code = Some(3);
        assert_eq!(r.failure(), "exit 3");
        r.timed_out = true;
        assert_eq!(r.failure(), "timed out after 2 s");
        r.passed = true;
        assert_eq!(r.failure(), "");
    }
}
