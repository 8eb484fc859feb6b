//! Shared helpers for cbrun's integration tests.
//!
//! Every test drives the real `cbrun` binary as one of three users:
//!
//! - [`Who::Root`]: real root (sandbox ids map to host uids 0x70000000+);
//! - [`Who::Delegated`]: `nobody` (65534), with cgroups delegated by
//!   `cbrun admin delegate-cgroups --user nobody` (done once, idempotent,
//!   left in place);
//! - [`Who::Undelegated`]: uid 65533, no passwd entry, no delegation: limits
//!   are not enforced and must be reported as such.
//!
//! Unprivileged runs use a copy of the binary in a fresh world-readable
//! directory under /tmp, started through `setpriv ... env -i`.
//!
//! A [`Ctx`] is one test's world: its temp dir (the "run folder"), a
//! snapshot of the host taken before the test (run dirs, per-sandbox
//! cgroups, processes, mounts) to find leftovers against, and a lock that
//! serialises tests inside one test binary. Dropping it kills and removes
//! whatever the test left behind (after the test had its chance to assert
//! that nothing was left), and removes the temp dir.
//!
//! Only std and serde_json are used.

#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub const CBRUN: &str = env!("CARGO_BIN_EXE_cbrun");
/// tests/fixtures in the source tree.
pub const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
/// Python inside the sandbox (the host's /usr is visible read-only).
pub const PY: &str = "/usr/bin/python3";
/// First host uid of real root's sandboxes, and how many ids they map.
pub const ROOT_RANGE_START: u32 = 0x7000_0000;
pub const ROOT_RANGE_LEN: u32 = 65536;
/// A variable set in the test process (and so in cbrun's environment)
/// that must not leak into a sandbox unless passed with `--env-pass`.
pub const CANARY_KEY: &str = "CBRUN_IT_CANARY";
pub const CANARY_VALUE: &str = "host-secret-7f3a9c21";
/// The user that gets delegated cgroups.
pub const DELEGATED_USER: &str = "nobody";
/// How long one cbrun invocation may take before the test gives up on it.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);

/// Which host user runs cbrun.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Root,
    Delegated,
    Undelegated,
}

impl Who {
    pub fn uid(self) -> u32 {
        match self {
            Who::Root => 0,
            Who::Delegated => 65534,
            Who::Undelegated => 65533,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Who::Root => "root",
            Who::Delegated => "nobody (65534, delegated cgroups)",
            Who::Undelegated => "uid 65533 (no passwd entry, no delegation)",
        }
    }

    /// Whether this user's sandboxes get a cgroup (and so enforced limits).
    pub fn has_cgroup(self) -> bool {
        self != Who::Undelegated
    }

    /// Host uids the sandbox's processes may run as.
    pub fn sandbox_host_uids(self) -> std::ops::Range<u32> {
        match self {
            Who::Root => ROOT_RANGE_START..ROOT_RANGE_START + ROOT_RANGE_LEN,
            other => other.uid()..other.uid() + 1,
        }
    }

    /// cbrun's state root for this user as the tests start it (no
    /// CBRUN_STATE_DIR, no XDG_RUNTIME_DIR).
    pub fn state_root(self) -> PathBuf {
        let uid = self.uid();
        if uid == 0 && is_tmpfs(Path::new("/run")) {
            return PathBuf::from("/run/cbrun");
        }
        if is_tmpfs(Path::new("/dev/shm")) {
            return PathBuf::from(format!("/dev/shm/cbrun-{uid}"));
        }
        PathBuf::from(format!("/tmp/cbrun-{uid}"))
    }

    pub fn runs_dir(self) -> PathBuf {
        self.state_root().join("runs")
    }

    /// The directories per-sandbox cgroups of this user are made in, one
    /// per limit hierarchy.
    pub fn cgroup_bases(self) -> Vec<PathBuf> {
        limit_hierarchies()
            .into_iter()
            .map(|h| match self {
                Who::Root => h.join("cbrun"),
                other => h.join("cbrun").join(format!("u{}", other.uid())),
            })
            .collect()
    }

    /// Per-sandbox cgroup dirs of this user that exist now.
    pub fn sandbox_cgroups(self) -> BTreeSet<PathBuf> {
        let mut out = BTreeSet::new();
        for base in self.cgroup_bases() {
            let Ok(rd) = fs::read_dir(&base) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("cb") && e.path().is_dir() {
                    out.insert(e.path());
                }
            }
        }
        out
    }
}

/// The hierarchies that carry cbrun's limits (memory, pids, cpu on v1; the
/// single tree on v2).
pub fn limit_hierarchies() -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let v1: Vec<PathBuf> = ["memory", "pids", "cpu"]
        .iter()
        .map(|c| root.join(c))
        .filter(|p| p.join("cgroup.procs").exists() && !p.join("cgroup.controllers").exists())
        .collect();
    if v1.is_empty() {
        vec![root.to_path_buf()]
    } else {
        v1
    }
}

/// One line of /proc/self/mountinfo, reduced to what identifies a mount.
fn mountinfo() -> Vec<(String, String, String)> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split(' ').nth(4)?.to_owned();
            let mut r = right.split(' ');
            let fstype = r.next()?.to_owned();
            let source = r.next().unwrap_or("").to_owned();
            Some((point, fstype, source))
        })
        .collect()
}

/// Whether `p` lives on a tmpfs (the innermost mount covering it).
pub fn is_tmpfs(p: &Path) -> bool {
    let mut best: Option<(usize, String)> = None;
    for (point, fstype, _) in mountinfo() {
        if p.starts_with(&point) {
            let len = Path::new(&point).components().count();
            if best.as_ref().map(|(l, _)| len >= *l).unwrap_or(true) {
                best = Some((len, fstype));
            }
        }
    }
    best.map(|(_, t)| t == "tmpfs").unwrap_or(false)
}

/// Mounts of the host (the test process's mount namespace), as a multiset.
pub fn host_mounts() -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (point, fstype, source) in mountinfo() {
        *m.entry(format!("{point} ({fstype} {source})")).or_insert(0) += 1;
    }
    m
}

/// A host process, as /proc shows it.
#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    /// real, effective, saved, fs
    pub uids: Vec<u32>,
    pub gids: Vec<u32>,
    pub state: char,
    pub argv: Vec<String>,
}

impl Proc {
    pub fn read(pid: u32) -> Option<Proc> {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| -> Option<String> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
        };
        let ids = |name: &str| -> Vec<u32> {
            field(name)
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect()
        };
        let state = field("State:")
            .and_then(|s| s.chars().next())
            .unwrap_or('?');
        let ppid = field("PPid:").and_then(|s| s.parse().ok()).unwrap_or(0);
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        Some(Proc {
            pid,
            ppid,
            uids: ids("Uid:"),
            gids: ids("Gid:"),
            state,
            argv,
        })
    }

    /// Still running (zombies and dead tasks do not count: this host's
    /// pid 1 reaps orphans lazily).
    pub fn alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }

    pub fn is_cbrun(&self) -> bool {
        self.argv
            .first()
            .map(|a| a.ends_with("/cbrun") || a == "cbrun")
            .unwrap_or(false)
    }

    /// `setpriv` or `env` on their way to exec cbrun.
    pub fn is_launcher(&self) -> bool {
        self.argv
            .first()
            .map(|a| {
                matches!(
                    Path::new(a).file_name().and_then(|n| n.to_str()),
                    Some("setpriv" | "env")
                )
            })
            .unwrap_or(false)
    }

    pub fn real_uid(&self) -> u32 {
        self.uids.first().copied().unwrap_or(u32::MAX)
    }
}

/// All host pids now.
pub fn all_pids() -> BTreeSet<u32> {
    fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

pub fn all_procs() -> Vec<Proc> {
    all_pids().into_iter().filter_map(Proc::read).collect()
}

/// Live processes one of whose arguments is exactly `marker`, other than
/// cbrun itself and the `setpriv ... env ...` that starts it.
pub fn live_procs_with_arg(marker: &str) -> Vec<Proc> {
    all_procs()
        .into_iter()
        .filter(|p| {
            p.alive() && !p.is_cbrun() && !p.is_launcher() && p.argv.iter().any(|a| a == marker)
        })
        .collect()
}

/// Poll until `f` holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Send a signal by name (`INT`, `TERM`, `KILL`, ...) to one pid.
pub fn send_signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args(["-s", sig, &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn euid() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1).and_then(|x| x.parse().ok()))
        })
        .unwrap_or(u32::MAX)
}

/// Tests inside one binary run one at a time: they share host-wide state
/// (run dirs, cgroups, process table) that their leftover checks look at.
fn serial_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Once per test binary: check we are root, plant the canary, delegate
/// cgroups to `nobody` (idempotent; left in place).
fn setup_once() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        assert_eq!(
            euid(),
            0,
            "cbrun's integration tests must run as root: they drive cbrun as root and, via setpriv, as uids 65534 and 65533"
        );
        std::env::set_var(CANARY_KEY, CANARY_VALUE);
        let out = Command::new(CBRUN)
            .args(["admin", "delegate-cgroups", "--user", DELEGATED_USER])
            .stdin(Stdio::null())
            .output()
            .expect("running cbrun admin delegate-cgroups");
        assert!(
            out.status.success(),
            "setup: `cbrun admin delegate-cgroups --user {DELEGATED_USER}` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// What the host looked like before a test.
struct Snapshot {
    runs: BTreeSet<String>,
    cgroups: BTreeSet<PathBuf>,
    pids: BTreeSet<u32>,
    mounts: BTreeMap<String, usize>,
}

/// Names in directory `p`; empty when it does not exist.
pub fn dir_names(p: &Path) -> BTreeSet<String> {
    fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// What a finished cbrun invocation left for the test to look at.
#[derive(Debug)]
pub struct Run {
    pub args: Vec<String>,
    pub status: ExitStatus,
    /// Exit code, when cbrun exited (not killed).
    pub code: Option<i32>,
    /// The signal that killed cbrun itself, if one did.
    pub killed_by: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The `--outcome` JSON, when one was asked for and written.
    pub outcome: Option<Value>,
    pub elapsed: Duration,
}

impl Run {
    /// A one-paragraph description for assertion messages.
    pub fn show(&self) -> String {
        let tail = |s: &str| {
            let s = s.trim_end();
            if s.len() > 1500 {
                format!("...{}", &s[s.len() - 1500..])
            } else {
                s.to_owned()
            }
        };
        format!(
            "cbrun {:?}\n  -> {} after {:.2}s\n  stdout: {}\n  stderr: {}",
            self.args,
            self.status,
            self.elapsed.as_secs_f64(),
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }

    /// The outcome JSON; panics (with the run's description) when missing.
    pub fn outcome(&self) -> &Value {
        self.outcome
            .as_ref()
            .unwrap_or_else(|| panic!("no --outcome JSON was written\n{}", self.show()))
    }

    /// Outcome string field `id` (the run id).
    pub fn id(&self) -> String {
        self.outcome()["id"]
            .as_str()
            .unwrap_or_else(|| panic!("outcome has no string id\n{}", self.show()))
            .to_owned()
    }

    /// stdout parsed as one JSON value.
    /// Stdout as JSON; a command's `--json` envelope (`{"cbrun", "command",
    /// "ok": true, "result"}`) gives its `result`.
    pub fn stdout_json(&self) -> Value {
        let v = self.envelope_or_json();
        match v.get("cbrun").and(v.get("ok")).and(v.get("result")) {
            Some(result) if v["ok"] == true => result.clone(),
            _ => v,
        }
    }

    /// Stdout as JSON, as printed.
    pub fn envelope_or_json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e})\n{}", self.show()))
    }

    pub fn assert_code(&self, want: i32, attack: &str) {
        assert_eq!(
            self.code,
            Some(want),
            "{attack}: wrong exit status\n{}",
            self.show()
        );
    }
}

/// A cbrun invocation still running.
pub struct Running {
    child: Option<Child>,
    pub pid: u32,
    args: Vec<String>,
    started: Instant,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    outcome_path: Option<PathBuf>,
}

impl Running {
    /// Whether cbrun has not exited yet.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    pub fn signal(&self, sig: &str) {
        send_signal(self.pid, sig);
    }

    /// Wait at most `limit` for cbrun to exit; past that, SIGKILL it and fail.
    pub fn wait(mut self, limit: Duration) -> Run {
        let mut child = self.child.take().expect("waited twice");
        let end = self.started + limit;
        let status = loop {
            if let Some(st) = child.try_wait().expect("try_wait on cbrun") {
                break st;
            }
            if Instant::now() >= end {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "cbrun {:?} did not return within {:?}; killed it (stderr so far: {})",
                    self.args,
                    limit,
                    fs::read_to_string(&self.stderr_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        let outcome = self.outcome_path.as_ref().and_then(|p| {
            let text = fs::read_to_string(p).ok()?;
            Some(serde_json::from_str(&text).unwrap_or_else(|e| {
                panic!("--outcome {} is not valid JSON ({e}): {text}", p.display())
            }))
        });
        Run {
            args: self.args.clone(),
            code: status.code(),
            killed_by: status.signal(),
            status,
            stdout: fs::read_to_string(&self.stdout_path).unwrap_or_default(),
            stderr: fs::read_to_string(&self.stderr_path).unwrap_or_default(),
            outcome,
            elapsed,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A test that panicked mid-run must not leave cbrun behind (its
        // sandbox dies with it).
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One test's world. See the module docs.
pub struct Ctx {
    pub who: Who,
    /// The test's temp dir on the host (the "run folder"), 0755.
    pub dir: PathBuf,
    /// A dir inside `dir` owned by the user cbrun runs as, for outputs.
    pub out: PathBuf,
    /// The cbrun binary this user runs.
    pub bin: PathBuf,
    seq: Cell<u32>,
    /// Pids of the cbrun processes this test started.
    spawned: RefCell<BTreeSet<u32>>,
    before: Snapshot,
    // Last: released after Drop cleaned up.
    _serial: MutexGuard<'static, ()>,
}

static DIR_COUNTER: AtomicU32 = AtomicU32::new(0);

impl Ctx {
    pub fn new(who: Who, name: &str) -> Ctx {
        let serial = serial_lock();
        setup_once();
        let n = DIR_COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = PathBuf::from(format!("/tmp/cbrun-it-{}-{n}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).expect("creating the test dir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let out = dir.join("out");
        fs::create_dir(&out).unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&out, Some(who.uid()), Some(who.uid())).unwrap();
        let bin = if who == Who::Root {
            PathBuf::from(CBRUN)
        } else {
            let b = dir.join("cbrun");
            fs::copy(CBRUN, &b).expect("copying cbrun");
            fs::set_permissions(&b, fs::Permissions::from_mode(0o755)).unwrap();
            b
        };
        let before = Snapshot {
            runs: dir_names(&who.runs_dir()),
            cgroups: who.sandbox_cgroups(),
            pids: all_pids(),
            mounts: host_mounts(),
        };
        Ctx {
            who,
            dir,
            out,
            bin,
            seq: Cell::new(0),
            spawned: RefCell::new(BTreeSet::new()),
            before,
            _serial: serial,
        }
    }

    fn next(&self) -> u32 {
        let n = self.seq.get();
        self.seq.set(n + 1);
        n
    }

    /// A unique `sleep` argument (a number, so `sleep` accepts it) to find
    /// the sandbox's processes on the host by.
    pub fn sleep_marker(&self) -> String {
        format!(
            "7777.{}{:03}{:03}",
            std::process::id(),
            self.next(),
            DIR_COUNTER.load(Ordering::SeqCst)
        )
    }

    /// A unique word for file names, `$0` of scripts, etc.
    pub fn marker(&self, what: &str) -> String {
        format!("cbrun-it-{what}-{}-{}", std::process::id(), self.next())
    }

    /// A path in the output dir (writable by the user cbrun runs as).
    pub fn out_file(&self, name: &str) -> PathBuf {
        self.out.join(name)
    }

    /// A world-readable copy of a fixture, in the test dir.
    pub fn fixture(&self, name: &str) -> PathBuf {
        let dst = self.dir.join(name);
        fs::copy(Path::new(FIXTURES).join(name), &dst).expect("copying fixture");
        fs::set_permissions(&dst, fs::Permissions::from_mode(0o644)).unwrap();
        dst
    }

    /// Start cbrun with raw arguments as this user. `outcome` is read back
    /// when the run is waited for.
    pub fn spawn_args(
        &self,
        args: &[String],
        env: &[(&str, &str)],
        outcome: Option<PathBuf>,
    ) -> Running {
        let n = self.next();
        let stdout_path = self.dir.join(format!("cbrun-{n}.stdout"));
        let stderr_path = self.dir.join(format!("cbrun-{n}.stderr"));
        let mut cmd = if self.who == Who::Root {
            let mut c = Command::new(&self.bin);
            c.env_remove("CBRUN_STATE_DIR")
                .env_remove("CBRUN_TIMING")
                .env_remove("XDG_RUNTIME_DIR");
            for (k, v) in env {
                c.env(k, v);
            }
            c.args(args);
            c
        } else {
            let uid = self.who.uid();
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .args([
                    "--clear-groups",
                    "--inh-caps=-all",
                    "env",
                    "-i",
                    "PATH=/usr/bin:/bin",
                    "HOME=/",
                ])
                .arg(format!("{CANARY_KEY}={CANARY_VALUE}"));
            for (k, v) in env {
                c.arg(format!("{k}={v}"));
            }
            c.arg(&self.bin).args(args);
            c
        };
        cmd.current_dir("/")
            .stdin(Stdio::null())
            .stdout(File::create(&stdout_path).unwrap())
            .stderr(File::create(&stderr_path).unwrap());
        let child = cmd.spawn().expect("spawning cbrun");
        self.spawned.borrow_mut().insert(child.id());
        Running {
            pid: child.id(),
            child: Some(child),
            args: args.to_vec(),
            started: Instant::now(),
            stdout_path,
            stderr_path,
            outcome_path: outcome,
        }
    }

    /// Start `cbrun sandbox run OPTS --outcome FILE -- CMD`.
    pub fn spawn_env(&self, opts: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> Running {
        let outcome = self.out.join(format!("outcome-{}.json", self.next()));
        let mut args: Vec<String> = vec!["sandbox".into(), "run".into()];
        args.extend(opts.iter().map(|s| s.to_string()));
        args.push("--outcome".into());
        args.push(outcome.display().to_string());
        args.push("--".into());
        args.extend(cmd.iter().map(|s| s.to_string()));
        self.spawn_args(&args, env, Some(outcome))
    }

    pub fn spawn(&self, opts: &[&str], cmd: &[&str]) -> Running {
        self.spawn_env(opts, cmd, &[])
    }

    /// Run a sandbox to completion (see [`Ctx::spawn`]).
    pub fn run(&self, opts: &[&str], cmd: &[&str]) -> Run {
        self.spawn(opts, cmd).wait(DEFAULT_DEADLINE)
    }

    pub fn run_env(&self, opts: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> Run {
        self.spawn_env(opts, cmd, env).wait(DEFAULT_DEADLINE)
    }

    /// Run cbrun with raw arguments (gc, doctor, bad input...).
    pub fn cbrun(&self, args: &[&str]) -> Run {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        self.spawn_args(&args, &[], None).wait(DEFAULT_DEADLINE)
    }

    /// Raw arguments plus an outcome file that is read back if written.
    pub fn cbrun_with_outcome(&self, args: &[&str], outcome: &Path) -> Run {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        self.spawn_args(&args, &[], Some(outcome.to_path_buf()))
            .wait(DEFAULT_DEADLINE)
    }

    /// Entries of this user's runs dir now.
    pub fn runs_now(&self) -> BTreeSet<String> {
        dir_names(&self.who.runs_dir())
    }

    /// Whether a run id may belong to this test. Run ids embed the pid of
    /// their cbrun in hex (`cb[tag-]<pid>-<nanos>`); entries that name none
    /// of this test's cbrun processes belong to somebody else using the
    /// host at the same time and are left alone.
    fn maybe_ours(&self, id: &str) -> bool {
        let spawned = self.spawned.borrow();
        id.trim_start_matches("cb")
            .split('-')
            .filter_map(|t| u32::from_str_radix(t, 16).ok())
            .any(|pid| spawned.contains(&pid))
    }

    /// Runs dir entries that appeared since the test began.
    pub fn new_runs(&self) -> Vec<String> {
        self.runs_now()
            .difference(&self.before.runs)
            .filter(|id| self.maybe_ours(id))
            .cloned()
            .collect()
    }

    pub fn new_cgroups(&self) -> Vec<PathBuf> {
        self.who
            .sandbox_cgroups()
            .difference(&self.before.cgroups)
            .filter(|p| self.maybe_ours(&p.file_name().unwrap_or_default().to_string_lossy()))
            .cloned()
            .collect()
    }

    /// Live processes started since the test began that belong to a
    /// sandbox of this user (by host uid) or are a cbrun of this test.
    pub fn new_procs(&self) -> Vec<Proc> {
        let uids = self.who.sandbox_host_uids();
        all_procs()
            .into_iter()
            .filter(|p| !self.before.pids.contains(&p.pid) && p.alive())
            .filter(|p| {
                uids.contains(&p.real_uid())
                    || p.argv
                        .first()
                        .map(|a| Path::new(a) == self.bin)
                        .unwrap_or(false)
            })
            .collect()
    }

    pub fn new_mounts(&self) -> Vec<String> {
        let now = host_mounts();
        now.iter()
            .filter(|(k, n)| **n > self.before.mounts.get(*k).copied().unwrap_or(0))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Assert nothing of this test's runs is left: run dirs, per-sandbox
    /// cgroups, processes, host mounts. Processes and cgroups get a moment
    /// to finish exiting.
    pub fn assert_clean(&self, after: &str) {
        let settled = wait_until(Duration::from_secs(2), || {
            self.new_procs().is_empty() && self.new_cgroups().is_empty()
        });
        let procs = self.new_procs();
        let cgroups = self.new_cgroups();
        let runs = self.new_runs();
        let mounts = self.new_mounts();
        assert!(
            settled && procs.is_empty() && cgroups.is_empty() && runs.is_empty() && mounts.is_empty(),
            "leftovers after {after} ({}):\n  processes: {:?}\n  cgroups: {:?}\n  run dirs in {}: {:?}\n  new host mounts: {:?}",
            self.who.label(),
            procs.iter().map(|p| (p.pid, p.real_uid(), p.argv.clone())).collect::<Vec<_>>(),
            cgroups,
            self.who.runs_dir().display(),
            runs,
            mounts
        );
    }

    /// The run with this id has no run dir and no cgroup left.
    pub fn assert_run_gone(&self, id: &str, after: &str) {
        let dir = self.who.runs_dir().join(id);
        assert!(
            !dir.exists(),
            "{after}: run dir {} is left behind",
            dir.display()
        );
        for base in self.who.cgroup_bases() {
            let cg = base.join(id);
            assert!(
                !cg.exists(),
                "{after}: cgroup {} is left behind",
                cg.display()
            );
        }
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // Best effort; never panics. Only what this test created is touched.
        for p in self.new_procs() {
            send_signal(p.pid, "KILL");
        }
        for cg in self.new_cgroups() {
            for _ in 0..50 {
                if let Ok(procs) = fs::read_to_string(cg.join("cgroup.procs")) {
                    for pid in procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
                        send_signal(pid, "KILL");
                    }
                }
                if fs::remove_dir(&cg).is_ok() || !cg.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        for r in self.new_runs() {
            let _ = fs::remove_dir_all(self.who.runs_dir().join(r));
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Parse `cbrun gc --json` output.
pub fn gc_report(run: &Run) -> Value {
    run.stdout_json()
}

/// Names of the four-per-line fields of /proc/self/status we check.
pub fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|v| v.strip_prefix(':'))
            .map(str::trim)
    })
}

/// A world-readable copy of the sample case `name` (under `cases/`) inside
/// the test's folder (the repository may sit where an unprivileged user
/// cannot read it).
pub fn sample_case(ctx: &Ctx, name: &str) -> PathBuf {
    let dst = ctx.dir.join("cases").join(name);
    if !dst.exists() {
        fs::create_dir_all(dst.parent().unwrap()).unwrap();
        let st = Command::new("cp")
            .arg("-r")
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("cases")
                    .join(name),
            )
            .arg(&dst)
            .status()
            .unwrap();
        assert!(st.success());
        let st = Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(ctx.dir.join("cases"))
            .status()
            .unwrap();
        assert!(st.success());
    }
    dst
}

/// Standard base64 with padding (for HTTP basic auth and data the tests
/// send).
pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
