//! `cbrun report`: every cell of every table checked against run folders
//! built here with known rewards, times, costs, test counts and repeats
//! (in the shapes of the run-folder contract); pass@k and pass^k against
//! hand-computed values; the baseline comparison; partial, concurrently
//! written and hostile run folders; hostile names in every format; the
//! HTML page rendered in headless Chromium (screenshot pixels and the DOM's
//! marks); a record written by a real `cbrun trial`.
//!
//! Needs no sandbox but for `a_real_trial_record_is_reported` (root, as CI
//! runs) and Chromium for the HTML tests (Debian package `chromium`; in CI
//! its absence is a failure).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const CBRUN: &str = env!("CARGO_BIN_EXE_cbrun");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report");
const REPO: &str = env!("CARGO_MANIFEST_DIR");

// ---------------------------------------------------------------- helpers

/// A temporary folder, removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "cbrun-report-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `cbrun ARGS`, killed after 60 s (a report that hangs is a failure).
fn cbrun(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut child = Command::new(CBRUN)
        .args(args.iter().map(|a| a.as_ref()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "cbrun {:?} hung; stderr: {}",
                args.iter().map(|a| a.as_ref().to_owned()).collect::<Vec<_>>(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: Output) -> Output {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    o
}

fn report_json(dirs: &[&Path], extra: &[&str]) -> (Value, String) {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"report"];
    for d in dirs {
        args.push(d);
    }
    args.push(&"--format");
    args.push(&"json");
    for e in extra {
        args.push(e);
    }
    let o = ok(cbrun(&args));
    (serde_json::from_slice(&o.stdout).unwrap(), stderr(&o))
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

#[track_caller]
fn assert_close(a: &Value, b: f64) {
    assert!(close(a, b), "{a} != {b}");
}

// ---------------------------------------------------- the run-folder writer

/// One trial as the run contract lays it out.
#[derive(Clone)]
struct T {
    case: &'static str,
    config: &'static str,
    repeat: u32,
    reward: u8,
    terminal: &'static str,
    pipeline: Option<&'static str>,
    class: Option<&'static str>,
    tests: Option<(u64, u64)>,
    /// `None`: the field is null (never submitted).
    tts: Option<f64>,
    cost: Option<f64>,
    tokens: Option<(u64, u64)>,
    judge_error: Option<&'static str>,
    denylist: Option<&'static str>,
}

fn pass(case: &'static str, config: &'static str, repeat: u32, n: u64, tts: f64) -> T {
    T {
        case,
        config,
        repeat,
        reward: 1,
        terminal: "completed",
        pipeline: Some("evaluated"),
        class: None,
        tests: Some((n, n)),
        tts: Some(tts),
        cost: None,
        tokens: None,
        judge_error: None,
        denylist: None,
    }
}

fn fail(
    case: &'static str,
    config: &'static str,
    repeat: u32,
    passed: u64,
    n: u64,
    tts: f64,
) -> T {
    T {
        reward: 0,
        tests: Some((passed, n)),
        class: Some("implementation"),
        ..pass(case, config, repeat, n, tts)
    }
}

fn not_submitted(case: &'static str, config: &'static str, repeat: u32) -> T {
    T {
        reward: 0,
        terminal: "not_submitted",
        pipeline: Some("not_submitted"),
        class: Some("implementation"),
        tests: None,
        tts: None,
        ..pass(case, config, repeat, 0, 0.0)
    }
}

impl T {
    fn cost(mut self, c: f64) -> T {
        self.cost = Some(c);
        self
    }
    fn tokens(mut self, i: u64, o: u64) -> T {
        self.tokens = Some((i, o));
        self
    }

    fn record(&self, run_id: &str) -> Value {
        let submitted = self.tts.is_some();
        json!({
            "schema_version": 1,
            "run_id": run_id,
            "case_id": self.case,
            "config": self.config,
            "repeat": self.repeat,
            "attempt": 1,
            "agent_spec_name": format!("agent-{}", self.config),
            "model": format!("model-{}", self.config),
            "reward": self.reward,
            "terminal_status": self.terminal,
            "pipeline_status": self.pipeline,
            "failure_class": self.class,
            "judge_error": self.judge_error,
            "denylist_violation": self.denylist,
            "test_count": self.tests.map(|t| t.1),
            "passed": self.tests.map(|t| t.0),
            "failed": self.tests.map(|t| t.1 - t.0),
            "errors": self.tests.map(|_| 0),
            "skipped": self.tests.map(|_| 0),
            "submission": if submitted { json!({"state": "submitted"}) }
                          else { json!({"state": "not_submitted", "detail": "no submit file"}) },
            "setup_seconds": 5.0,
            "solve_seconds": self.tts.unwrap_or(7200.0) + 10.0,
            "judge_seconds": 2.0,
            "time_to_submit_seconds": self.tts,
            "cost_usd": self.cost,
            "cost_source": self.cost.map(|_| "pricing-table:2026-11-01"),
            "token_usage": self.tokens.map(|(i, o)| json!({
                "input": i, "output": o, "cache_read": null, "cache_write": null, "reasoning": null
            })),
            "started_at": "2026-12-01T23:00:00Z",
            "finished_at": "2026-12-01T23:30:00Z",
        })
    }
}

struct Run {
    dir: PathBuf,
    id: String,
}

impl Run {
    /// `plan.toml` with `cases` (id, language) x `configs` x `repeats`.
    fn new(dir: &Path, id: &str, repeats: u32, cases: &[(&str, &str)], configs: &[&str]) -> Run {
        fs::create_dir_all(dir.join("trials")).unwrap();
        let mut plan = format!(
            "run_id = \"{id}\"\ncreated_at = \"2026-12-01T23:00:00Z\"\nrepeats = {repeats}\n"
        );
        for (c, lang) in cases {
            plan.push_str(&format!(
                "[[case]]\nid = \"{c}\"\npath = \"/cases/{c}\"\nsha256 = \"00\"\nlanguage = \"{lang}\"\n"
            ));
        }
        for k in configs {
            plan.push_str(&format!(
                "[[config]]\nname = \"{k}\"\nagent = \"agent-{k}\"\nmodel = \"model-{k}\"\nsolve_timeout = 7200.0\nmemory = \"8G\"\npids = 4096\nnet = \"none\"\nallow = []\nallow_registries = false\n"
            ));
        }
        fs::write(dir.join("plan.toml"), plan).unwrap();
        Run {
            dir: dir.to_owned(),
            id: id.to_owned(),
        }
    }

    fn trial_dir(&self, case: &str, config: &str, repeat: u32) -> PathBuf {
        self.dir
            .join("trials")
            .join(case)
            .join(config)
            .join(repeat.to_string())
    }

    /// The trial folder with its record, and its line in results.jsonl.
    fn put(&self, t: &T) {
        let d = self.trial_dir(t.case, t.config, t.repeat);
        fs::create_dir_all(d.join("logs/agent")).unwrap();
        let rec = t.record(&self.id);
        fs::write(d.join("trial.json"), serde_json::to_vec_pretty(&rec).unwrap()).unwrap();
        let line = json!({
            "run_id": self.id, "case": t.case, "config": t.config, "repeat": t.repeat,
            "attempt": 1, "trial_dir": format!("trials/{}/{}/{}", t.case, t.config, t.repeat),
            "record": rec,
        });
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("results.jsonl"))
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    fn put_raw(&self, case: &str, config: &str, repeat: u32, record: &Value) {
        let d = self.trial_dir(case, config, repeat);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("trial.json"), serde_json::to_vec(record).unwrap()).unwrap();
    }

    fn claim(&self, case: &str, config: &str, repeat: u32, host: &str, pid: u32) {
        let p = self
            .dir
            .join("trials")
            .join(case)
            .join(config)
            .join(format!("{repeat}.claim"));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(
            p,
            json!({"host": host, "pid": pid, "job": "local", "time": "2026-12-01T23:00:00Z"})
                .to_string(),
        )
        .unwrap();
    }
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

/// An `interrupted` record: what every trial's record says until it ends.
fn interrupted(case: &'static str, config: &'static str, repeat: u32) -> T {
    T {
        reward: 0,
        terminal: "interrupted",
        pipeline: None,
        class: None,
        tests: None,
        tts: None,
        ..pass(case, config, repeat, 0, 0.0)
    }
}

/// Run A: two configurations, four cases in three languages, three
/// repeats, every kind of outcome. The numbers the tests expect are worked
/// out by hand from this list (see each test).
fn run_a(root: &Path) -> Run {
    let run = Run::new(
        &root.join("runA"),
        "runA",
        3,
        &[("c1", "Python"), ("c2", "Python"), ("c3", "Go"), ("c4", "Rust")],
        &["alpha", "beta"],
    );
    let trials = [
        // alpha
        pass("c1", "alpha", 1, 10, 100.0).cost(1.00).tokens(1000, 100),
        pass("c1", "alpha", 2, 10, 200.0).cost(1.50).tokens(1000, 100),
        fail("c1", "alpha", 3, 7, 10, 300.0).cost(2.00).tokens(1000, 100),
        fail("c2", "alpha", 1, 4, 8, 400.0).cost(0.50),
        not_submitted("c2", "alpha", 2).cost(0.25),
        pass("c2", "alpha", 3, 8, 600.0).cost(0.75),
        not_submitted("c3", "alpha", 1),
        T {
            terminal: "error",
            pipeline: Some("error"),
            class: Some("infrastructure"),
            ..not_submitted("c3", "alpha", 2)
        },
        T {
            pipeline: Some("rejected"),
            tts: Some(50.0),
            tests: None,
            denylist: Some("app/x.py: import banned"),
            ..fail("c3", "alpha", 3, 0, 0, 50.0)
        }
        .cost(0.10),
        pass("c4", "alpha", 1, 5, 1000.0).cost(3.00),
        pass("c4", "alpha", 2, 5, 2000.0).cost(3.00),
        pass("c4", "alpha", 3, 5, 3000.0).cost(3.00),
        // beta (a run still going: one pending, one running)
        pass("c1", "beta", 1, 10, 50.0),
        pass("c1", "beta", 2, 10, 70.0),
        fail("c2", "beta", 1, 6, 8, 100.0),
        interrupted("c2", "beta", 2),
        interrupted("c2", "beta", 3),
        pass("c3", "beta", 1, 3, 30.0),
        pass("c3", "beta", 3, 3, 90.0),
        T {
            terminal: "error",
            pipeline: Some("error"),
            class: Some("implementation"),
            ..not_submitted("c4", "beta", 1)
        },
        fail("c4", "beta", 2, 0, 5, 500.0),
        T {
            tests: None,
            judge_error: Some("no test results in the log"),
            ..fail("c4", "beta", 3, 0, 0, 400.0)
        },
    ];
    for t in &trials {
        run.put(t);
    }
    // c2/beta/3 is owned by a live worker (this test process).
    run.claim("c2", "beta", 3, &hostname(), std::process::id());
    // c3/beta/2: a record that is not a record.
    let mut bad = pass("c3", "beta", 2, 3, 60.0).record("runA");
    bad["reward"] = json!(2);
    run.put_raw("c3", "beta", 2, &bad);
    // c1/beta/3: no folder yet (pending).
    run
}

// ------------------------------------------------------ parsing the output

/// Markdown tables by their `## title`: header row first.
fn md_tables(text: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut out = BTreeMap::new();
    let mut title = None;
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("## ") {
            title = Some(md_unescape(t));
            out.insert(md_unescape(t), Vec::new());
        } else if line.starts_with('|') && !line.starts_with("|---") {
            let row = md_cells(line);
            if row.iter().all(|c| c.starts_with("---")) {
                continue;
            }
            out.get_mut(title.as_ref().unwrap()).unwrap().push(row);
        }
    }
    out
}

/// Cells of a Markdown row, split at unescaped pipes.
fn md_cells(line: &str) -> Vec<String> {
    let inner = line.trim().strip_prefix('|').unwrap().strip_suffix('|').unwrap();
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push('\\');
                cur.push(chars.next().unwrap());
            }
            '|' => cells.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    cells.push(cur);
    cells.iter().map(|c| md_unescape(c.trim())).collect()
}

fn md_unescape(s: &str) -> String {
    let s = s.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.push(chars.next().unwrap());
        } else {
            out.push(c);
        }
    }
    out
}

/// Terminal tables by title: header row first, notes left out. Cells are
/// split at runs of two or more spaces (no cell holds two).
fn term_tables(text: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut out = BTreeMap::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines();
        let Some(title) = lines.next() else { continue };
        let mut rows = Vec::new();
        for (i, l) in lines.enumerate() {
            if i == 1 || l.starts_with("  ") {
                continue; // the rule under the header; notes
            }
            rows.push(split2(l));
        }
        out.insert(title.to_owned(), rows);
    }
    out
}

fn split2(l: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut spaces = 0;
    for c in l.trim().chars() {
        if c == ' ' {
            spaces += 1;
            continue;
        }
        if spaces >= 2 {
            cells.push(std::mem::take(&mut cur));
        } else if spaces == 1 {
            cur.push(' ');
        }
        spaces = 0;
        cur.push(c);
    }
    cells.push(cur);
    cells
}

fn rows(v: &[&[&str]]) -> Vec<Vec<String>> {
    v.iter()
        .map(|r| r.iter().map(|c| c.to_string()).collect())
        .collect()
}

// ------------------------------------------------- what run A must give

const T2: &str = "Table 2: per configuration";
const T6: &str = "Table 6: per case and configuration";
const T7: &str = "Table 7: by language";
const T8: &str = "Table 8: hidden tests passed by failing submissions";
const T8D: &str = "Table 8 (detail): each failing submission";
const TR: &str = "Repeats: pass@k and pass^k";

/// Every table of run A, cell by cell, worked out by hand from
/// [`run_a`]. alpha: valid 11 (c3/2 is infra), passed 6, submitted 9,
/// times 100+200+300+400+600+50+1000+2000+3000 = 7650 s / 9 = 850 s,
/// cost 1+1.5+2+0.5+0.25+0.75+0.10+3*3 = $15.10 with 2 unpriced; Wilson
/// 6/11 = 28.0-78.7%. beta: valid 8 (an interrupted, a running, a pending
/// and an unreadable trial left out), passed 4, submitted 7, times
/// 50+70+100+30+90+500+400 = 1240 s / 7 = 177.1 s, nothing priced (10
/// records), Wilson 4/8 = 21.5-78.5%.
fn expected_run_a() -> BTreeMap<&'static str, Vec<Vec<String>>> {
    let mut m = BTreeMap::new();
    m.insert(
        T2,
        rows(&[
            &[
                "config",
                "solved",
                "pass rate",
                "95% CI",
                "submitted",
                "mean time to submit",
                "total cost",
                "tokens",
                "invalid",
                "not done",
            ],
            &[
                "alpha",
                "3 of 4",
                "6/11 54.5%",
                "28.0–78.7%",
                "9/11",
                "14m 10s",
                "$15.10 (+2 unpriced)",
                "3000 in / 300 out (+9 n/a)",
                "1 infra",
                "0",
            ],
            &[
                "beta",
                "2 of 4",
                "4/8 50.0%",
                "21.5–78.5%",
                "7/8",
                "2m 57s",
                "n/a (10 unpriced)",
                "n/a",
                "1 interrupted, 1 unreadable",
                "1 running, 1 pending",
            ],
        ]),
    );
    m.insert(
        T6,
        rows(&[
            &["case", "language", "config", "result", "passes", "time to submit", "cost"],
            &["c1", "Python", "alpha", "Pass, Pass, 7/10", "2/3", "3m 20s", "$4.50"],
            &["c1", "Python", "beta", "Pass, Pass, pending", "2/2", "1m 00s", "n/a (2 unpriced)"],
            &["c2", "Python", "alpha", "4/8, not submitted, Pass", "1/3", "8m 20s", "$1.50"],
            &["c2", "Python", "beta", "6/8, interrupted, running", "0/1", "1m 40s", "n/a (3 unpriced)"],
            &["c3", "Go", "alpha", "not submitted, infra, rejected", "0/2", "50.0s", "$0.10 (+2 unpriced)"],
            &["c3", "Go", "beta", "Pass, unreadable, Pass", "2/2", "1m 00s", "n/a (2 unpriced)"],
            &["c4", "Rust", "alpha", "Pass, Pass, Pass", "3/3", "33m 20s", "$9.00"],
            &["c4", "Rust", "beta", "error, 0/5, fail", "0/3", "7m 30s", "n/a (3 unpriced)"],
        ]),
    );
    m.insert(
        T7,
        rows(&[
            &["language", "config", "cases", "solved", "pass rate"],
            &["Go", "alpha", "1", "0", "0/2 0.0%"],
            &["Go", "beta", "1", "1", "2/2 100.0%"],
            &["Python", "alpha", "2", "2", "3/6 50.0%"],
            &["Python", "beta", "2", "1", "2/3 66.7%"],
            &["Rust", "alpha", "1", "1", "3/3 100.0%"],
            &["Rust", "beta", "1", "0", "0/3 0.0%"],
        ]),
    );
    m.insert(
        T8,
        rows(&[
            &[
                "config",
                "failing submissions",
                "with test counts",
                "hidden tests passed",
                "mean per submission",
            ],
            &["alpha", "2", "2", "11/18 61.1%", "60.0%"],
            &["beta", "3", "2", "6/13 46.2%", "37.5%"],
        ]),
    );
    m.insert(
        T8D,
        rows(&[
            &["case", "config", "repeat", "tests passed", "share"],
            &["c1", "alpha", "3", "7/10", "70.0%"],
            &["c2", "alpha", "1", "4/8", "50.0%"],
            &["c2", "beta", "1", "6/8", "75.0%"],
            &["c4", "beta", "2", "0/5", "0.0%"],
        ]),
    );
    m
}

/// pass@k and pass^k of run A by hand. Valid repeats (n) and passes (c):
/// alpha c1 (3,2) c2 (3,1) c3 (2,0) c4 (3,3); beta c1 (2,2) c2 (1,0)
/// c3 (2,2) c4 (3,0).
/// - alpha k=1: mean(2/3, 1/3, 0, 1) = 0.5 for both.
/// - alpha k=2: pass@2 = 1 - C(n-c,2)/C(n,2): c1 1-0 = 1, c2 1-1/3 = 2/3,
///   c3 0, c4 1: mean 2/3; pass^2 = C(c,2)/C(n,2): c1 1/3, c2 0, c3 0,
///   c4 1: mean 1/3.
/// - alpha k=3 (c3 has only 2): pass@3 1,1,1 = 1; pass^3 0,0,1 = 1/3.
/// - beta k=1: mean(1, 0, 1, 0) = 0.5; k=2 (c1, c3, c4): pass@2 = pass^2 =
///   mean(1, 1, 0) = 2/3; k=3 (c4 only): 0 and 0.
const EXPECTED_REPEATS: &[(&str, u64, usize, f64, f64)] = &[
    ("alpha", 1, 4, 0.5, 0.5),
    ("alpha", 2, 4, 2.0 / 3.0, 1.0 / 3.0),
    ("alpha", 3, 3, 1.0, 1.0 / 3.0),
    ("beta", 1, 4, 0.5, 0.5),
    ("beta", 2, 3, 2.0 / 3.0, 2.0 / 3.0),
    ("beta", 3, 1, 0.0, 0.0),
];

/// `30.6–86.3%` as (0.306, 0.863).
fn parse_ci(s: &str) -> Option<(f64, f64)> {
    let s = s.strip_suffix('%')?;
    let (a, b) = s.split_once('–')?;
    Some((a.parse::<f64>().ok()? / 100.0, b.parse::<f64>().ok()? / 100.0))
}

/// The repeat rows of a text table against [`EXPECTED_REPEATS`]; the
/// bootstrap intervals must bracket their estimate (to the printed
/// precision), lie in 0..1 and be `n/a` over a single case.
fn check_repeat_rows(table: &[Vec<String>]) {
    assert_eq!(
        table[0],
        ["config", "k", "cases", "pass@k", "95% CI", "pass^k", "95% CI"]
    );
    assert_eq!(table.len() - 1, EXPECTED_REPEATS.len(), "{table:?}");
    for (row, (config, k, cases, at, hat)) in table[1..].iter().zip(EXPECTED_REPEATS) {
        assert_eq!(row[0], *config);
        assert_eq!(row[1], k.to_string());
        assert_eq!(row[2], cases.to_string());
        assert_eq!(row[3], format!("{:.1}%", at * 100.0), "{row:?}");
        assert_eq!(row[5], format!("{:.1}%", hat * 100.0), "{row:?}");
        for (ci, point) in [(&row[4], at), (&row[6], hat)] {
            if *cases < 2 {
                assert_eq!(ci, "n/a", "{row:?}");
                continue;
            }
            let (lo, hi) = parse_ci(ci).unwrap_or_else(|| panic!("{row:?}"));
            assert!(0.0 <= lo && lo <= *point + 5e-4 && *point <= hi + 5e-4 && hi <= 1.0, "{row:?}");
        }
    }
}

// ------------------------------------------------------------------ tests

#[test]
fn json_holds_every_number_of_the_records() {
    let tmp = Tmp::new("json");
    let run = run_a(tmp.path());
    let (r, err) = report_json(&[&run.dir], &[]);
    assert_eq!(r["format"], "cbrun-report/1");
    assert_eq!(r["runs"][0]["run_id"], "runA");
    assert_eq!(r["runs"][0]["planned"], 24);
    assert_eq!(r["runs"][0]["recorded"], 22, "24 planned, less 1 pending and 1 unreadable");
    assert_eq!(r["trials"].as_array().unwrap().len(), 24);
    assert_eq!(r["unpriced_trials"], 12);
    let cases: Vec<(&str, &str)> = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c["language"].as_str().unwrap()))
        .collect();
    assert_eq!(
        cases,
        [("c1", "Python"), ("c2", "Python"), ("c3", "Go"), ("c4", "Rust")]
    );

    // Table 2.
    let a = &r["table2"][0];
    assert_eq!(a["config"], "alpha");
    assert_eq!(a["agent"], "agent-alpha");
    assert_eq!(a["model"], "model-alpha");
    for (k, v) in [
        ("cases", 4),
        ("solved", 3),
        ("trials", 12),
        ("valid", 11),
        ("passed", 6),
        ("submitted", 9),
    ] {
        assert_eq!(a[k], v, "alpha {k}");
    }
    assert_close(&a["pass_rate"], 6.0 / 11.0);
    assert_close(&a["pass_rate_ci"][0], 0.280_091_537_409_322);
    assert_close(&a["pass_rate_ci"][1], 0.787_287_283_775_402);
    assert_close(&a["time_to_submit"]["mean_s"], 850.0);
    assert_eq!(a["time_to_submit"]["known"], 9);
    assert_eq!(a["time_to_submit"]["unknown"], 0);
    assert_close(&a["cost"]["total_usd"], 15.10);
    assert_eq!(a["cost"]["priced"], 10);
    assert_eq!(a["cost"]["unpriced"], 2);
    assert_eq!(
        a["tokens"],
        json!({"input": 3000, "output": 300, "cache_read": null, "cache_write": null,
               "reasoning": null, "reported": 3, "unreported": 9})
    );
    assert_eq!(
        a["excluded"],
        json!({"infrastructure": 1, "interrupted": 0, "running": 0, "pending": 0, "unreadable": 0})
    );
    let b = &r["table2"][1];
    assert_eq!(b["config"], "beta");
    for (k, v) in [
        ("cases", 4),
        ("solved", 2),
        ("trials", 12),
        ("valid", 8),
        ("passed", 4),
        ("submitted", 7),
    ] {
        assert_eq!(b[k], v, "beta {k}");
    }
    assert_close(&b["pass_rate"], 0.5);
    assert_close(&b["pass_rate_ci"][0], 0.215_216_062_213_877);
    assert_close(&b["pass_rate_ci"][1], 0.784_783_937_786_122);
    assert_close(&b["time_to_submit"]["mean_s"], 1240.0 / 7.0);
    assert_eq!(
        b["cost"],
        json!({"total_usd": null, "priced": 0, "unpriced": 10}),
        "unknown cost is null, never 0"
    );
    assert_eq!(b["tokens"]["input"], Value::Null);
    assert_eq!(b["tokens"]["unreported"], 10);
    assert_eq!(
        b["excluded"],
        json!({"infrastructure": 0, "interrupted": 1, "running": 1, "pending": 1, "unreadable": 1})
    );

    // Table 6: the cells and what they are made of.
    let t6 = r["table6"].as_array().unwrap();
    let expected = &expected_run_a()[T6];
    assert_eq!(t6.len(), expected.len() - 1);
    for (row, want) in t6.iter().zip(&expected[1..]) {
        assert_eq!(row["case"], want[0].as_str());
        assert_eq!(row["language"], want[1].as_str());
        assert_eq!(row["config"], want[2].as_str());
        assert_eq!(row["result"], want[3].as_str());
        assert_eq!(
            format!("{}/{}", row["passed"], row["valid"]),
            want[4],
            "{row}"
        );
    }
    let c1a = &t6[0];
    assert_close(&c1a["time_to_submit"]["mean_s"], 200.0);
    assert_close(&c1a["cost"]["total_usd"], 4.5);
    let statuses: Vec<&str> = c1a["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["pass", "pass", "fail"]);
    assert_eq!(c1a["repeats"][2]["tests_passed"], 7);
    assert_eq!(c1a["repeats"][2]["tests_total"], 10);
    let c3a = &t6[4];
    let statuses: Vec<&str> = c3a["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["not_submitted", "infrastructure", "rejected"]);
    assert_close(&c3a["time_to_submit"]["mean_s"], 50.0);
    assert_eq!(c3a["cost"]["unpriced"], 2);
    let c2b = &t6[3];
    let statuses: Vec<&str> = c2b["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["fail", "interrupted", "running"]);

    // Table 7.
    let t7: Vec<(String, String, u64, u64, u64, u64)> = r["table7"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["language"].as_str().unwrap().to_owned(),
                x["config"].as_str().unwrap().to_owned(),
                x["cases"].as_u64().unwrap(),
                x["solved"].as_u64().unwrap(),
                x["passed"].as_u64().unwrap(),
                x["valid"].as_u64().unwrap(),
            )
        })
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        t7,
        [
            (s("Go"), s("alpha"), 1, 0, 0, 2),
            (s("Go"), s("beta"), 1, 1, 2, 2),
            (s("Python"), s("alpha"), 2, 2, 3, 6),
            (s("Python"), s("beta"), 2, 1, 2, 3),
            (s("Rust"), s("alpha"), 1, 1, 3, 3),
            (s("Rust"), s("beta"), 1, 0, 0, 3),
        ]
    );

    // Table 8.
    let t8 = &r["table8"]["by_config"];
    assert_eq!(t8[0]["failing"], 2);
    assert_eq!(t8[0]["with_counts"], 2);
    assert_eq!(t8[0]["tests_passed"], 11);
    assert_eq!(t8[0]["tests_total"], 18);
    assert_close(&t8[0]["share"], 11.0 / 18.0);
    assert_close(&t8[0]["mean_share"], 0.6);
    assert_eq!(t8[1]["failing"], 3);
    assert_eq!(t8[1]["with_counts"], 2);
    assert_eq!(t8[1]["tests_passed"], 6);
    assert_eq!(t8[1]["tests_total"], 13);
    assert_close(&t8[1]["mean_share"], 0.375);
    let subs: Vec<(String, String, u64, u64, u64)> = r["table8"]["submissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["case"].as_str().unwrap().to_owned(),
                x["config"].as_str().unwrap().to_owned(),
                x["repeat"].as_u64().unwrap(),
                x["tests_passed"].as_u64().unwrap(),
                x["tests_total"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        subs,
        [
            (s("c1"), s("alpha"), 3, 7, 10),
            (s("c2"), s("alpha"), 1, 4, 8),
            (s("c2"), s("beta"), 1, 6, 8),
            (s("c4"), s("beta"), 2, 0, 5),
        ]
    );

    // Repeats.
    let mut got = Vec::new();
    for stats in r["repeats"].as_array().unwrap() {
        for row in stats["rows"].as_array().unwrap() {
            got.push(row.clone());
        }
    }
    assert_eq!(got.len(), EXPECTED_REPEATS.len());
    for (row, (config, k, cases, at, hat)) in got.iter().zip(EXPECTED_REPEATS) {
        assert_eq!(row["config"], *config);
        assert_eq!(row["k"], *k);
        assert_eq!(row["cases"], *cases as u64);
        assert_close(&row["pass_at_k"], *at);
        assert_close(&row["pass_hat_k"], *hat);
    }
    let alpha_cases: Vec<(String, u64, u64)> = r["repeats"][0]["per_case"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["case"].as_str().unwrap().to_owned(),
                c["valid"].as_u64().unwrap(),
                c["passed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        alpha_cases,
        [(s("c1"), 3, 2), (s("c2"), 3, 1), (s("c3"), 2, 0), (s("c4"), 3, 3)]
    );
    assert_eq!(r["repeats"][1]["rows"][2]["pass_at_k_ci"], Value::Null);

    // The trial rows.
    let t = r["trials"].as_array().unwrap();
    let pending = t.iter().find(|x| x["status"] == "pending").unwrap();
    assert_eq!((pending["case"].as_str(), pending["config"].as_str(), pending["repeat"].as_u64()), (Some("c1"), Some("beta"), Some(3)));
    assert_eq!(pending["cost_usd"], Value::Null);
    assert!(pending["path"].as_str().unwrap().ends_with("trials/c1/beta/3"));
    let first = &t[0];
    assert_eq!(first["status"], "pass");
    assert_close(&first["cost_usd"], 1.0);
    assert_eq!(first["cost_source"], "pricing-table:2026-11-01");
    assert_eq!(first["tokens"]["input"], 1000);
    assert_close(&first["setup_s"], 5.0);
    assert_close(&first["solve_s"], 110.0);

    // The one bad record: named with its path and field, and skipped.
    let problems = r["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("trials/c3/beta/2/trial.json"));
    assert!(problems[0]["message"].as_str().unwrap().starts_with("reward: 2"));
    assert!(err.contains("trials/c3/beta/2/trial.json: reward: 2"), "{err}");
}

#[test]
fn markdown_and_terminal_show_the_same_cells() {
    let tmp = Tmp::new("md");
    let run = run_a(tmp.path());
    let expected = expected_run_a();
    let md = stdout(&ok(cbrun(&[&"report", &run.dir, &"--format", &"md"])));
    let term = stdout(&ok(cbrun(&[&"report", &run.dir])));
    for (what, tables) in [("md", md_tables(&md)), ("term", term_tables(&term))] {
        for (title, want) in &expected {
            let got = tables
                .get(*title)
                .unwrap_or_else(|| panic!("{what}: no table {title:?} in {tables:?}"));
            assert_eq!(got, want, "{what}: {title}");
        }
        check_repeat_rows(&tables[TR]);
        assert!(!tables.keys().any(|t| t.starts_with("Comparison")), "{what}");
    }
    // The rule and the unpriced count are said, not implied.
    assert!(term.contains("rule: pass rates are over valid trials"));
    assert!(term.contains("12 trial(s) with a record have no cost_usd"));
    assert!(md.contains("## Problems"));
    assert!(md.contains("trials/c3/beta/2/trial.json: reward: 2"));
    // `--table` picks one.
    let only = stdout(&ok(cbrun(&[&"report", &run.dir, &"--table", &"table7"])));
    let tables = term_tables(&only);
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[T7], expected[T7]);
}

#[test]
fn csv_rows_are_data() {
    let tmp = Tmp::new("csv");
    let run = run_a(tmp.path());
    let csv = stdout(&ok(cbrun(&[&"report", &run.dir, &"--format", &"csv"])));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1 + 24, "a header and one row per trial");
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("{name} in {header:?}"));
    let row = |i: usize| lines[i].split(',').collect::<Vec<_>>();
    let first = row(1);
    assert_eq!(first[col("case")], "c1");
    assert_eq!(first[col("config")], "alpha");
    assert_eq!(first[col("status")], "pass");
    assert_eq!(first[col("cost_usd")], "1.0");
    assert_eq!(first[col("tests_total")], "10");
    assert_eq!(first[col("tokens.input")], "1000");
    // Unknowns are n/a, never 0.
    let beta_first = lines[1..]
        .iter()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|r| r[col("config")] == "beta")
        .unwrap();
    assert_eq!(beta_first[col("cost_usd")], "n/a");
    assert_eq!(beta_first[col("tokens")], "n/a");

    let csv = stdout(&ok(cbrun(&[&"report", &run.dir, &"--format", &"csv", &"--table", &"summary"])));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3);
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("{name} in {header:?}"));
    let alpha: Vec<&str> = lines[1].split(',').collect();
    let beta: Vec<&str> = lines[2].split(',').collect();
    assert_eq!(alpha[col("passed")], "6");
    assert_eq!(alpha[col("valid")], "11");
    assert!((alpha[col("pass_rate")].parse::<f64>().unwrap() - 6.0 / 11.0).abs() < 1e-12);
    assert!((alpha[col("pass_rate_ci.0")].parse::<f64>().unwrap() - 0.280_091_537_4).abs() < 1e-9);
    assert!((alpha[col("cost.total_usd")].parse::<f64>().unwrap() - 15.1).abs() < 1e-9);
    assert_eq!(alpha[col("excluded.infrastructure")], "1");
    assert_eq!(beta[col("cost.total_usd")], "n/a");
    assert_eq!(beta[col("cost.unpriced")], "10");
    assert_eq!(beta[col("excluded.running")], "1");
}

/// Run B, the baseline of run A's alpha: c1 failed (A: 2/3, gained), c2
/// passed (A: 1/3, lost), c3 failed (A: 0/2, unchanged), c4 passed (A:
/// 3/3, unchanged), c5 only here (not comparable). Rates over c1-c4:
/// A mean(2/3, 1/3, 0, 1) = 0.5, B mean(0, 1, 0, 1) = 0.5, difference 0;
/// sign test over 1 gained and 1 lost: p = 1.
fn run_b(root: &Path) -> Run {
    let run = Run::new(
        &root.join("runB"),
        "runB",
        1,
        &[("c1", "Python"), ("c2", "Python"), ("c3", "Go"), ("c4", "Rust"), ("c5", "Go")],
        &["alpha"],
    );
    for t in [
        fail("c1", "alpha", 1, 9, 10, 100.0),
        pass("c2", "alpha", 1, 8, 100.0),
        not_submitted("c3", "alpha", 1),
        pass("c4", "alpha", 1, 5, 100.0),
        pass("c5", "alpha", 1, 2, 100.0),
    ] {
        run.put(&t);
    }
    run
}

#[test]
fn baseline_comparison_case_by_case() {
    let tmp = Tmp::new("baseline");
    let a = run_a(tmp.path());
    let b = run_b(tmp.path());
    let bdir = b.dir.to_str().unwrap().to_owned();
    let (r, _) = report_json(&[&a.dir], &["--baseline", &bdir]);
    let c = &r["comparison"];
    assert_eq!(c["baseline_runs"][0]["run_id"], "runB");
    assert_eq!(c["unpaired_current"], json!(["beta"]));
    assert_eq!(c["unpaired_baseline"], json!([]));
    let p = &c["pairs"][0];
    assert_eq!(p["config"], "alpha");
    assert_eq!(p["baseline_config"], "alpha");
    assert_eq!(
        (&p["gained"], &p["lost"], &p["unchanged"], &p["not_comparable"]),
        (&json!(1), &json!(1), &json!(2), &json!(1))
    );
    assert_close(&p["current_rate"], 0.5);
    assert_close(&p["baseline_rate"], 0.5);
    assert_close(&p["difference"], 0.0);
    assert_close(&p["sign_test_p"], 1.0);
    let changes: Vec<(&str, &str, u64, u64, u64, u64)> = p["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["case"].as_str().unwrap(),
                k["change"].as_str().unwrap(),
                k["current"]["passed"].as_u64().unwrap(),
                k["current"]["valid"].as_u64().unwrap(),
                k["baseline"]["passed"].as_u64().unwrap(),
                k["baseline"]["valid"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("c1", "gained", 2, 3, 0, 1),
            ("c2", "lost", 1, 3, 1, 1),
            ("c3", "unchanged", 0, 2, 0, 1),
            ("c4", "unchanged", 3, 3, 1, 1),
            ("c5", "not_comparable", 0, 0, 1, 1),
        ]
    );

    let md = stdout(&ok(cbrun(&[&"report", &a.dir, &"--baseline", &b.dir, &"--format", &"md", &"--table", &"compare"])));
    let t = md_tables(&md);
    assert_eq!(
        t["Comparison with the baseline"],
        rows(&[
            &["config", "baseline", "gained", "lost", "unchanged", "not comparable", "pass rate", "baseline rate", "difference", "95% CI", "sign test p"],
            &["alpha", "alpha", "1", "1", "2", "1", "50.0%", "50.0%", "+0.0 pts", t["Comparison with the baseline"][1][9].as_str(), "1.000"],
        ])
    );
    assert_eq!(
        t["Comparison: per case"],
        rows(&[
            &["config", "case", "passes", "baseline passes", "change"],
            &["alpha", "c1", "2/3", "0/1", "gained"],
            &["alpha", "c2", "1/3", "1/1", "lost"],
            &["alpha", "c3", "0/2", "0/1", "unchanged"],
            &["alpha", "c4", "3/3", "1/1", "unchanged"],
            &["alpha", "c5", "-", "1/1", "not comparable"],
        ])
    );
    assert!(md.contains("no baseline for: beta"));
}

/// Two single-configuration runs with different names are paired; six
/// cases all gained give the exact sign test p = 2 * 2^-6 = 0.03125 and a
/// difference of +100 points.
#[test]
fn baseline_pairs_lone_configurations_and_tests_the_sign() {
    let tmp = Tmp::new("sign");
    let cases: Vec<(&str, &str)> = ["d1", "d2", "d3", "d4", "d5", "d6"]
        .iter()
        .map(|c| (*c, "Python"))
        .collect();
    let now = Run::new(&tmp.path().join("now"), "now", 1, &cases, &["new"]);
    let then = Run::new(&tmp.path().join("then"), "then", 1, &cases, &["old"]);
    for (c, _) in &cases {
        now.put(&pass(c, "new", 1, 4, 10.0));
        then.put(&fail(c, "old", 1, 1, 4, 10.0));
    }
    let then_dir = then.dir.to_str().unwrap().to_owned();
    let (r, _) = report_json(&[&now.dir], &["--baseline", &then_dir]);
    let p = &r["comparison"]["pairs"][0];
    assert_eq!((p["config"].as_str(), p["baseline_config"].as_str()), (Some("new"), Some("old")));
    assert_eq!(p["gained"], 6);
    assert_eq!(p["lost"], 0);
    assert_close(&p["sign_test_p"], 0.03125);
    assert_close(&p["difference"], 1.0);
    assert_eq!(p["difference_ci"], json!([1.0, 1.0]));
    let term = stdout(&ok(cbrun(&[&"report", &now.dir, &"--baseline", &then.dir, &"--table", &"compare"])));
    let t = term_tables(&term);
    assert_eq!(
        t["Comparison with the baseline"][1],
        ["new", "old", "6", "0", "0", "0", "100.0%", "0.0%", "+100.0 pts", "+100.0–+100.0 pts", "0.031"]
    );
}

#[test]
fn several_run_folders_are_pooled_once_each() {
    let tmp = Tmp::new("pool");
    let a = run_a(tmp.path());
    // Another run of alpha on c1: one more repeat, a fail.
    let more = Run::new(&tmp.path().join("more"), "more", 1, &[("c1", "Python")], &["alpha"]);
    more.put(&fail("c1", "alpha", 1, 3, 10, 100.0).cost(1.0));
    // A copy of run A (same run_id) is skipped, and a folder given twice is read once.
    let copy = tmp.path().join("copyA");
    let st = Command::new("cp").arg("-a").arg(&a.dir).arg(&copy).status().unwrap();
    assert!(st.success());
    let (r, err) = report_json(&[&a.dir, &more.dir, &copy, &a.dir], &[]);
    assert_eq!(r["runs"].as_array().unwrap().len(), 2);
    let alpha = &r["table2"][0];
    assert_eq!(alpha["valid"], 12);
    assert_eq!(alpha["passed"], 6);
    assert_close(&alpha["cost"]["total_usd"], 16.10);
    let c1 = &r["repeats"][0]["per_case"][0];
    assert_eq!((c1["valid"].as_u64(), c1["passed"].as_u64()), (Some(4), Some(2)));
    // pass@2 of c1 with n=4, c=2: 1 - C(2,2)/C(4,2) = 5/6.
    let k2 = &r["repeats"][0]["rows"][1];
    assert_close(&k2["pass_at_k"], (5.0 / 6.0 + 2.0 / 3.0 + 0.0 + 1.0) / 4.0);
    assert!(err.contains("was already read from"), "{err}");
    assert!(err.contains("given twice"), "{err}");
    // Pooled repeats are labelled with their run in table 8's detail.
    let term = stdout(&ok(cbrun(&[&"report", &a.dir, &more.dir, &"--table", &"partial"])));
    assert!(term_tables(&term)[T8D].contains(&vec![
        "c1".to_string(),
        "alpha".into(),
        "more:1".into(),
        "3/10".into(),
        "30.0%".into()
    ]));
}
