//! Reading run folders: every trial they hold or plan, each with its
//! record or the reason it has none.
//!
//! What is read, in order of authority:
//!
//! 1. `trials/<case>/<config>/<repeat>/trial.json`: the records. The
//!    folder's place gives the trial's identity; a record that names
//!    another case, configuration or repeat is used where it sits, with a
//!    warning. `<repeat>.claim` beside a folder is a worker owning it (a
//!    claim naming this host and a dead pid is stale and ignored);
//!    `<repeat>.attempt<K>/` are earlier attempts, only counted.
//! 2. `plan.toml`: the trials the run means to run; those with no record
//!    yet are pending. Optional.
//! 3. `results.jsonl`, only when there is no `trials/` folder (a run
//!    copied without its trial folders): the last line per trial wins; a
//!    cut last line (a run still writing) is skipped.
//!
//! A folder with `trial.json` at its top is read as one trial (what
//! `cbrun trial --out` writes), its identity from its record.
//!
//! Everything under a run folder is read through [`Dir`]: no symlink is
//! followed, FIFOs are never waited on, records are read up to
//! [`RECORD_CAP`] and directories up to [`LISTING_CAP`] entries. What
//! cannot be read is a [`Problem`] (the path and why) and the trial shows
//! as unreadable; nothing stops the report. The folder may be written
//! while it is read: `trial.json` is replaced atomically, so a record is
//! the old one or the new one.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::fsutil::quote_path;
use crate::sys::dir::{Dir, DirError, Kind};

use super::outcome::{Excluded, Outcome};
use super::plan::{self, Plan, PlanConfig};
use super::record::Record;

/// The largest `trial.json` read.
pub const RECORD_CAP: u64 = 4 << 20;
/// The largest `plan.toml` read.
pub const PLAN_CAP: u64 = 4 << 20;
/// The largest `results.jsonl` read.
pub const RESULTS_CAP: u64 = 512 << 20;
/// The most entries read from one directory.
pub const LISTING_CAP: usize = 100_000;
const CLAIM_CAP: u64 = 4096;

/// Something in a run folder the report could not use.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    #[serde(serialize_with = "quoted")]
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", quote_path(&self.path), self.message)
    }
}

/// A path in JSON: as messages quote it (invalid UTF-8 as `\xff`, control
/// characters escaped), since JSON strings cannot hold arbitrary bytes.
pub fn quoted<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&quote_path(p))
}

/// Why a folder given to the report cannot be reported on at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: not a run folder (no plan.toml, trials/, results.jsonl or trial.json)", quote_path(.0))]
    NotARun(PathBuf),
    /// The message rewords the cause (see [`why`]), so it is no source.
    #[error("{}: {}", quote_path(.path), why(.err))]
    Open { path: PathBuf, err: DirError },
}

/// How a folder was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FolderKind {
    /// A run folder with `trials/`.
    Run,
    /// A run folder with only `results.jsonl` (and maybe `plan.toml`).
    Results,
    /// One trial folder.
    Trial,
}

/// One folder the report read.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunInfo {
    #[serde(serialize_with = "quoted")]
    pub dir: PathBuf,
    pub kind: FolderKind,
    pub run_id: Option<String>,
    pub created_at: Option<String>,
    /// From the plan; `None` without one.
    pub repeats: Option<u32>,
    pub planned: usize,
    pub recorded: usize,
}

/// A trial's record, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Recorded(Box<Record>),
    /// No record yet, a worker's claim beside it.
    Running,
    /// Planned, no record (and no live claim).
    Pending,
    /// The record could not be used; the problem list says why.
    Unreadable,
}

#[derive(Debug, Clone)]
pub struct Trial {
    /// Index into [`Loaded::runs`].
    pub run: usize,
    pub case: String,
    pub config: String,
    pub repeat: u32,
    /// The trial folder (or the results file it came from).
    pub path: PathBuf,
    pub state: State,
    /// A live claim sits beside the folder.
    pub claimed: bool,
    /// Earlier attempts kept as `<repeat>.attempt<K>/`.
    pub earlier_attempts: u32,
}

impl Trial {
    pub fn outcome(&self) -> Outcome {
        match &self.state {
            State::Recorded(r) => Outcome::of(r, self.claimed),
            State::Running => Outcome::Excluded(Excluded::Running),
            State::Pending => Outcome::Excluded(Excluded::Pending),
            State::Unreadable => Outcome::Excluded(Excluded::Unreadable),
        }
    }

    pub fn record(&self) -> Option<&Record> {
        match &self.state {
            State::Recorded(r) => Some(r),
            _ => None,
        }
    }
}

/// Everything read from the folders of one side of a report.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub runs: Vec<RunInfo>,
    pub trials: Vec<Trial>,
    pub problems: Vec<Problem>,
    /// Cases in plan order (then the rest by name), with their language.
    pub cases: Vec<(String, Option<String>)>,
    /// Configurations in plan order (then the rest by name), with what
    /// the plan says defines them.
    pub configs: Vec<(String, Option<PlanConfig>)>,
}

/// Reads `dirs` (the caller's paths, trusted to exist as given).
pub fn load(dirs: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut out = Loaded::default();
    let mut seen_dirs = BTreeSet::new();
    let mut seen_ids: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut plans = Vec::new();
    for dir in dirs {
        let canon = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        if !seen_dirs.insert(canon) {
            out.problems.push(Problem {
                path: dir.clone(),
                message: "given twice; read once".into(),
            });
            continue;
        }
        let mut folder = read_folder(dir)?;
        if let Some(id) = &folder.info.run_id {
            if let Some(first) = seen_ids.get(id) {
                out.problems.push(Problem {
                    path: dir.clone(),
                    message: format!(
                        "run {id:?} was already read from {}; this copy is skipped",
                        quote_path(first)
                    ),
                });
                out.problems.append(&mut folder.problems);
                continue;
            }
            seen_ids.insert(id.clone(), dir.clone());
        }
        let run = out.runs.len();
        for t in &mut folder.trials {
            t.run = run;
        }
        out.runs.push(folder.info);
        out.trials.append(&mut folder.trials);
        out.problems.append(&mut folder.problems);
        plans.push((dir.clone(), folder.plan));
    }
    merge_catalogue(&mut out, &plans);
    Ok(out)
}

/// One folder's trials before they are pooled.
struct Folder {
    info: RunInfo,
    plan: Option<Plan>,
    trials: Vec<Trial>,
    problems: Vec<Problem>,
}

fn read_folder(path: &Path) -> Result<Folder, LoadError> {
    let dir = Dir::open(path).map_err(|err| LoadError::Open {
        path: path.to_owned(),
        err,
    })?;
    let has = |name: &str| matches!(dir.entry(name), Ok(Some(_)));
    let mut f = Folder {
        info: RunInfo {
            dir: path.to_owned(),
            kind: FolderKind::Run,
            run_id: None,
            created_at: None,
            repeats: None,
            planned: 0,
            recorded: 0,
        },
        plan: None,
        trials: Vec::new(),
        problems: Vec::new(),
    };
    if !has("plan.toml") && !has("trials") && !has("results.jsonl") {
        if has("trial.json") {
            f.info.kind = FolderKind::Trial;
            read_single_trial(&dir, &mut f);
            return Ok(f);
        }
        return Err(LoadError::NotARun(path.to_owned()));
    }
    if has("plan.toml") {
        match read_text(&dir, "plan.toml", PLAN_CAP).and_then(|t| plan::parse(&t)) {
            Ok(p) => f.plan = Some(p),
            Err(e) => f.problems.push(Problem {
                path: dir.shown("plan.toml"),
                message: format!("{e}; read without a plan"),
            }),
        }
    }
    if let Some(p) = &f.plan {
        f.info.run_id = p.run_id.clone();
        f.info.created_at = p.created_at.clone();
        f.info.repeats = Some(p.repeats);
        f.info.planned = p.cases.len() * p.configs.len() * p.repeats as usize;
    }
    if has("trials") {
        match dir.open_dir("trials") {
            Ok(trials) => walk_trials(&trials, &mut f),
            Err(e) => f.problems.push(Problem {
                path: dir.shown("trials"),
                message: why(&e),
            }),
        }
    } else if has("results.jsonl") {
        f.info.kind = FolderKind::Results;
        read_results(&dir, &mut f);
    }
    add_pending(&dir, &mut f);
    f.info.recorded = f
        .trials
        .iter()
        .filter(|t| matches!(t.state, State::Recorded(_)))
        .count();
    for t in &f.trials {
        if let Some(r) = t.record() {
            check_run_id(&f.info, r, &t.path, &mut f.problems);
        }
    }
    Ok(f)
}

fn check_run_id(info: &RunInfo, r: &Record, path: &Path, problems: &mut Vec<Problem>) {
    if let (Some(a), Some(b)) = (&info.run_id, &r.run_id) {
        if a != b {
            problems.push(Problem {
                path: path.join("trial.json"),
                message: format!("run_id: {b:?}, but the run is {a:?}; counted in this run"),
            });
        }
    }
}

/// What went wrong with an entry, without its path (the problem has it).
fn why(e: &DirError) -> String {
    match e {
        DirError::Planted { found, wanted, .. } => {
            format!("{found}, not {wanted}; links and special files are never followed or opened")
        }
        DirError::HardLinked { links, .. } => format!("{links} hard links"),
        DirError::Io { op, err, .. } => format!("{op}: {err}"),
    }
}

fn read_text(dir: &Dir, name: &str, cap: u64) -> Result<String, String> {
    let got = dir.read_capped(name, cap).map_err(|e| why(&e))?;
    if got.truncated() {
        return Err(format!("larger than {cap} bytes"));
    }
    String::from_utf8(got.bytes).map_err(|_| "not UTF-8".to_owned())
}

/// The record in `dir` (a trial folder): `Ok(None)` when there is none.
fn read_record(dir: &Dir) -> Result<Option<Record>, String> {
    let got = match dir.read_capped("trial.json", RECORD_CAP) {
        Ok(g) => g,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(why(&e)),
    };
    if got.truncated() {
        return Err(format!(
            "{} bytes, larger than the {RECORD_CAP} a record may be",
            got.size
        ));
    }
    Record::parse(&got.bytes)
        .map(Some)
        .map_err(|e| e.to_string())
}

fn read_single_trial(dir: &Dir, f: &mut Folder) {
    let path = dir.path().to_owned();
    let (state, case, config, repeat) = match read_record(dir) {
        Ok(Some(r)) => {
            let config = r.config.clone().unwrap_or_else(|| r.agent.clone());
            let config = if config.is_empty() {
                "(unnamed)".to_owned()
            } else {
                config
            };
            f.info.run_id = r.run_id.clone();
            let (case, repeat) = (r.case_id.clone(), r.repeat.unwrap_or(1));
            (State::Recorded(Box::new(r)), case, config, repeat)
        }
        Ok(None) => {
            // Removed between the look and the read.
            f.problems.push(Problem {
                path: path.join("trial.json"),
                message: "went away while it was read; skipped".into(),
            });
            (State::Pending, "(unknown)".into(), "(unknown)".into(), 1)
        }
        Err(e) => {
            f.problems.push(Problem {
                path: path.join("trial.json"),
                message: format!("{e}; skipped"),
            });
            (State::Unreadable, "(unknown)".into(), "(unknown)".into(), 1)
        }
    };
    f.info.recorded = usize::from(matches!(state, State::Recorded(_)));
    f.trials.push(Trial {
        run: 0,
        case,
        config,
        repeat,
        path,
        state,
        claimed: false,
        earlier_attempts: 0,
    });
}

/// Entry names of `dir` as strings; names that are not UTF-8 or not
/// usable as an id are problems. A cut listing is a problem too.
fn listing(dir: &Dir, problems: &mut Vec<Problem>) -> Vec<String> {
    let (names, more) = match dir.names(LISTING_CAP) {
        Ok(n) => n,
        Err(e) => {
            problems.push(Problem {
                path: dir.path().to_owned(),
                message: why(&e),
            });
            return Vec::new();
        }
    };
    if more {
        problems.push(Problem {
            path: dir.path().to_owned(),
            message: format!("more than {LISTING_CAP} entries; the rest were not read"),
        });
    }
    let mut out = Vec::new();
    for n in names {
        match name_of(&n) {
            Ok(s) if s.starts_with('.') => {}
            Ok(s) => out.push(s),
            Err(why) => problems.push(Problem {
                path: dir.shown(std::ffi::OsStr::from_bytes(n.to_bytes())),
                message: format!("{why}; skipped"),
            }),
        }
    }
    out.sort_by(|a, b| natural(a, b));
    out
}

fn name_of(n: &CString) -> Result<String, String> {
    let s = std::str::from_utf8(n.to_bytes()).map_err(|_| "name is not UTF-8".to_owned())?;
    plan::folder_name(s).map_err(|e| format!("name: {e}"))?;
    Ok(s.to_owned())
}

/// Opens `name` below `dir` as a directory; anything else there (a
/// symlink, a file) is a problem.
fn subdir(dir: &Dir, name: &str, problems: &mut Vec<Problem>) -> Option<Dir> {
    match dir.open_dir(name) {
        Ok(d) => Some(d),
        Err(e) => {
            problems.push(Problem {
                path: dir.shown(name),
                message: format!("{}; skipped", why(&e)),
            });
            None
        }
    }
}

fn is_dir(dir: &Dir, name: &str) -> bool {
    matches!(dir.entry(name), Ok(Some(st)) if Kind::of(&st) == Kind::Dir)
}

fn walk_trials(trials: &Dir, f: &mut Folder) {
    for case in listing(trials, &mut f.problems) {
        let Some(case_dir) = subdir(trials, &case, &mut f.problems) else {
            continue;
        };
        for config in listing(&case_dir, &mut f.problems) {
            let Some(config_dir) = subdir(&case_dir, &config, &mut f.problems) else {
                continue;
            };
            walk_config(&config_dir, &case, &config, f);
        }
    }
}

/// What a name in `trials/<case>/<config>/` is.
enum Entry {
    Repeat(u32),
    Claim(u32),
    Attempt(u32),
}

fn parse_entry(name: &str) -> Option<Entry> {
    let repeat = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && !s.starts_with('0'))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    if let Some(n) = repeat(name) {
        return Some(Entry::Repeat(n));
    }
    if let Some(r) = name.strip_suffix(".claim") {
        return repeat(r).map(Entry::Claim);
    }
    let (r, k) = name.split_once(".attempt")?;
    repeat(k)?;
    repeat(r).map(Entry::Attempt)
}

fn walk_config(dir: &Dir, case: &str, config: &str, f: &mut Folder) {
    let mut repeats = BTreeSet::new();
    let mut claims = BTreeSet::new();
    let mut attempts: BTreeMap<u32, u32> = BTreeMap::new();
    for name in listing(dir, &mut f.problems) {
        match parse_entry(&name) {
            Some(Entry::Repeat(n)) => {
                repeats.insert(n);
            }
            Some(Entry::Claim(n)) => {
                if claim_is_live(dir, &name) {
                    claims.insert(n);
                }
            }
            Some(Entry::Attempt(n)) if is_dir(dir, &name) => {
                *attempts.entry(n).or_default() += 1;
            }
            _ => f.problems.push(Problem {
                path: dir.shown(&name),
                message: "not a repeat folder, claim or earlier attempt; skipped".into(),
            }),
        }
    }
    // A claim with no folder yet is a trial being set up.
    for &n in repeats.union(&claims) {
        let path = dir.shown(n.to_string());
        let claimed = claims.contains(&n);
        let state = if !repeats.contains(&n) {
            State::Running
        } else {
            match dir.open_dir(n.to_string()) {
                Err(e) => {
                    f.problems.push(Problem {
                        path: path.clone(),
                        message: format!("{}; skipped", why(&e)),
                    });
                    State::Unreadable
                }
                Ok(d) => match read_record(&d) {
                    Ok(Some(r)) => {
                        identity_check(&r, case, config, n, &path, &mut f.problems);
                        State::Recorded(Box::new(r))
                    }
                    Ok(None) if claimed => State::Running,
                    Ok(None) => State::Pending,
                    Err(e) => {
                        f.problems.push(Problem {
                            path: path.join("trial.json"),
                            message: format!("{e}; skipped"),
                        });
                        State::Unreadable
                    }
                },
            }
        };
        f.trials.push(Trial {
            run: 0,
            case: case.to_owned(),
            config: config.to_owned(),
            repeat: n,
            path,
            state,
            claimed,
            earlier_attempts: attempts.get(&n).copied().unwrap_or(0),
        });
    }
}

fn identity_check(
    r: &Record,
    case: &str,
    config: &str,
    repeat: u32,
    path: &Path,
    problems: &mut Vec<Problem>,
) {
    let mut differ = Vec::new();
    if r.case_id != case {
        differ.push(format!("case_id {:?}", r.case_id));
    }
    if r.config.as_deref().is_some_and(|c| c != config) {
        differ.push(format!("config {:?}", r.config.as_deref().unwrap_or("")));
    }
    if r.repeat.is_some_and(|x| x != repeat) {
        differ.push(format!("repeat {}", r.repeat.unwrap_or(0)));
    }
    if !differ.is_empty() {
        problems.push(Problem {
            path: path.join("trial.json"),
            message: format!(
                "the record says {}; counted where it sits ({case}/{config}/{repeat})",
                differ.join(", ")
            ),
        });
    }
}

/// A claim is live unless it names this host and a pid that is gone.
/// Claims from other hosts cannot be checked from here and count as live.
fn claim_is_live(dir: &Dir, name: &str) -> bool {
    let Ok(text) = read_text(dir, name, CLAIM_CAP) else {
        return true;
    };
    let (host, pid) = claim_fields(&text);
    let (Some(host), Some(pid)) = (host, pid) else {
        return true;
    };
    let here = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok());
    if here.as_deref() != Some(host.as_str()) {
        return true;
    }
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// `host` and `pid` of a claim: a JSON object, or `key=value` /
/// `key: value` lines.
fn claim_fields(text: &str) -> (Option<String>, Option<u64>) {
    if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(text) {
        return (
            o.get("host").and_then(|v| v.as_str()).map(str::to_owned),
            o.get("pid").and_then(|v| v.as_u64()),
        );
    }
    let (mut host, mut pid) = (None, None);
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=').or_else(|| line.split_once(':')) else {
            continue;
        };
        match k.trim() {
            "host" => host = Some(v.trim().to_owned()),
            "pid" => pid = v.trim().parse().ok(),
            _ => {}
        }
    }
    (host, pid)
}

/// The lines of `results.jsonl`, the last per trial kept.
fn read_results(dir: &Dir, f: &mut Folder) {
    let path = dir.shown("results.jsonl");
    let got = match dir.read_capped("results.jsonl", RESULTS_CAP) {
        Ok(g) => g,
        Err(e) => {
            f.problems.push(Problem {
                path,
                message: why(&e),
            });
            return;
        }
    };
    if got.truncated() {
        f.problems.push(Problem {
            path: path.clone(),
            message: format!("larger than {RESULTS_CAP} bytes; the rest was not read"),
        });
    }
    let bytes = &got.bytes;
    let complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let mut latest: BTreeMap<(String, String, u32), (u32, Record)> = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let last = i + 1 == lines.len();
        match result_line(line) {
            Ok((case, config, repeat, attempt, rec)) => {
                let key = (case, config, repeat);
                if latest.get(&key).is_none_or(|(a, _)| attempt >= *a) {
                    latest.insert(key, (attempt, rec));
                }
            }
            Err(_) if last && !complete => f.problems.push(Problem {
                path: path.clone(),
                message: format!("line {}: cut short (still being written?); skipped", i + 1),
            }),
            Err(e) => f.problems.push(Problem {
                path: path.clone(),
                message: format!("line {}: {e}; skipped", i + 1),
            }),
        }
    }
    for ((case, config, repeat), (_, rec)) in latest {
        f.trials.push(Trial {
            run: 0,
            case,
            config,
            repeat,
            path: path.clone(),
            state: State::Recorded(Box::new(rec)),
            claimed: false,
            earlier_attempts: 0,
        });
    }
}

type ResultLine = (String, String, u32, u32, Record);

fn result_line(line: &[u8]) -> Result<ResultLine, String> {
    if line.len() as u64 > RECORD_CAP {
        return Err(format!("longer than {RECORD_CAP} bytes"));
    }
    let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    let o = v.as_object().ok_or("not a JSON object")?;
    let text = |k: &str| -> Result<String, String> {
        let s = o
            .get(k)
            .and_then(|x| x.as_str())
            .ok_or_else(|| format!("{k}: missing or not a string"))?;
        plan::folder_name(s).map_err(|e| format!("{k}: {e}"))?;
        Ok(s.to_owned())
    };
    let index = |k: &str, default: Option<u32>| -> Result<u32, String> {
        match o.get(k).and_then(|x| x.as_u64()) {
            Some(n) if n >= 1 && n <= u32::MAX as u64 => Ok(n as u32),
            None if default.is_some() && o.get(k).is_none_or(|x| x.is_null()) => {
                Ok(default.unwrap_or(1))
            }
            _ => Err(format!("{k}: not a number 1 or more")),
        }
    };
    let rec = Record::from_value(o.get("record").ok_or("record: missing")?)
        .map_err(|e| format!("record.{e}"))?;
    Ok((
        text("case")?,
        text("config")?,
        index("repeat", None)?,
        index("attempt", Some(1))?,
        rec,
    ))
}

/// Planned trials with no folder and no claim are pending.
fn add_pending(dir: &Dir, f: &mut Folder) {
    let Some(p) = &f.plan else { return };
    let have: BTreeSet<(String, String, u32)> = f
        .trials
        .iter()
        .map(|t| (t.case.clone(), t.config.clone(), t.repeat))
        .collect();
    for c in &p.cases {
        for k in &p.configs {
            for r in 1..=p.repeats {
                if !have.contains(&(c.id.clone(), k.name.clone(), r)) {
                    f.trials.push(Trial {
                        run: 0,
                        case: c.id.clone(),
                        config: k.name.clone(),
                        repeat: r,
                        path: dir.shown(format!("trials/{}/{}/{r}", c.id, k.name)),
                        state: State::Pending,
                        claimed: false,
                        earlier_attempts: 0,
                    });
                }
            }
        }
    }
}

/// Cases and configurations of all runs: plan order first, then the rest
/// by name; languages from the plans, else from the records; different
/// definitions of one configuration name are warned about.
fn merge_catalogue(out: &mut Loaded, plans: &[(PathBuf, Option<Plan>)]) {
    let mut languages: BTreeMap<String, (String, PathBuf)> = BTreeMap::new();
    let mut configs: BTreeMap<String, (PlanConfig, PathBuf)> = BTreeMap::new();
    let mut case_order: Vec<String> = Vec::new();
    let mut config_order: Vec<String> = Vec::new();
    for (dir, plan) in plans {
        let Some(p) = plan else { continue };
        for c in &p.cases {
            if !case_order.contains(&c.id) {
                case_order.push(c.id.clone());
            }
            let Some(lang) = &c.language else { continue };
            match languages.get(&c.id) {
                Some((l, first)) if l != lang => out.problems.push(Problem {
                    path: dir.join("plan.toml"),
                    message: format!(
                        "case {:?} is {lang:?} here and {l:?} in {}; {l:?} is used",
                        c.id,
                        quote_path(first)
                    ),
                }),
                Some(_) => {}
                None => {
                    languages.insert(c.id.clone(), (lang.clone(), dir.clone()));
                }
            }
        }
        for k in &p.configs {
            if !config_order.contains(&k.name) {
                config_order.push(k.name.clone());
            }
            match configs.get(&k.name) {
                Some((first, at)) if first != k => out.problems.push(Problem {
                    path: dir.join("plan.toml"),
                    message: format!(
                        "configuration {:?} differs from the one of that name in {} (agent, model or spec); their trials are pooled",
                        k.name,
                        quote_path(at)
                    ),
                }),
                Some(_) => {}
                None => {
                    configs.insert(k.name.clone(), (k.clone(), dir.clone()));
                }
            }
        }
    }
    let mut rest_cases = BTreeSet::new();
    let mut rest_configs = BTreeSet::new();
    for t in &out.trials {
        if !case_order.contains(&t.case) {
            rest_cases.insert(t.case.clone());
        }
        if !config_order.contains(&t.config) {
            rest_configs.insert(t.config.clone());
        }
    }
    let mut rest_cases: Vec<String> = rest_cases.into_iter().collect();
    rest_cases.sort_by(|a, b| natural(a, b));
    case_order.extend(rest_cases);
    config_order.extend(rest_configs);
    out.cases = case_order
        .into_iter()
        .map(|c| {
            let lang = languages.get(&c).map(|(l, _)| l.clone()).or_else(|| {
                out.trials
                    .iter()
                    .filter(|t| t.case == c)
                    .find_map(|t| t.record().and_then(|r| r.language.clone()))
            });
            (c, lang)
        })
        .collect();
    out.configs = config_order
        .into_iter()
        .map(|k| {
            let def = configs.get(&k).map(|(c, _)| c.clone());
            (k, def)
        })
        .collect();
}

/// Names with numbers in them in numeric order (`case2` before `case10`).
pub fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (x, y) = (split(a), split(b));
    for (p, q) in x.iter().zip(&y) {
        let ord = match (p, q) {
            ((true, m), (true, n)) => {
                let (m, n) = (m.trim_start_matches('0'), n.trim_start_matches('0'));
                m.len().cmp(&n.len()).then(m.cmp(n))
            }
            ((_, m), (_, n)) => m.cmp(n),
        };
        if ord.is_ne() {
            return ord;
        }
    }
    x.len().cmp(&y.len()).then(a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        assert!(matches!(parse_entry("3"), Some(Entry::Repeat(3))));
        assert!(matches!(parse_entry("3.claim"), Some(Entry::Claim(3))));
        assert!(matches!(parse_entry("2.attempt1"), Some(Entry::Attempt(2))));
        for bad in ["0", "03", "x", "3.claimx", "2.attempt", "-1", "1.attempt0"] {
            assert!(parse_entry(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["case10", "case2", "case1", "b", "a"];
        v.sort_by(|a, b| natural(a, b));
        assert_eq!(v, ["a", "b", "case1", "case2", "case10"]);
    }

    #[test]
    fn claim_formats() {
        assert_eq!(
            claim_fields(r#"{"host": "h", "pid": 12}"#),
            (Some("h".into()), Some(12))
        );
        assert_eq!(
            claim_fields("host=h\npid=12\njob=3\n"),
            (Some("h".into()), Some(12))
        );
        assert_eq!(claim_fields("garbage"), (None, None));
    }
}
