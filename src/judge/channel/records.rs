//! The records cbrun's reporter writes to the result channel, and what the
//! host concludes from them.
//!
//! One record per line, at most [`MAX_LINE`] bytes (the reporter keeps each
//! under the pipe's atomic-write size, so records of concurrent writers do
//! not interleave):
//!
//! ```text
//! <hex HMAC-SHA256 of JSON> <JSON>        an authenticated record
//! alarm <JSON>                            the reporter saw tampering
//! ```
//!
//! Every authenticated record carries `k` (its session's key id), `n` (its
//! sequence number in that session, from 0) and `t` (its type):
//!
//! | `t` | fields | meaning |
//! |---|---|---|
//! | `hello` | `pid`, `argv`, `py` | a test process claimed a token (always `n` 0) |
//! | `inv` | `run`, `runner`, `total`, `ids` | the collected tests of run `run`, in chunks, before its first test |
//! | `test` | `run`, `id`, `o`, `why` | one test's outcome (`passed`, `failed`, `error`, `skipped`) |
//! | `end` | `run`, `runner`, `tests_run`, `ok` | the runner's own count and verdict when the run ended |
//! | `tamper` | `what` | the reporter's integrity check failed |
//! | `exit` | `findings`, `via` | the process is exiting (`exit`, or `os._exit(N)`); its last integrity check |
//!
//! Alarms need no key: they can only lower the reward. Anything else that
//! fails to parse, names an unknown key, fails its MAC, skips or repeats a
//! sequence number, or follows a session's `exit` is tampering.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use super::mac::Mac;
use crate::judge::parse::{Counts, TestOutcome, TestResult};

/// The longest line the host accepts.
pub const MAX_LINE: usize = 8192;
/// How many findings of one kind are kept (the rest are counted).
const MAX_FINDINGS: usize = 20;
/// Longest text kept from a record (ids, reasons).
const MAX_TEXT: usize = 1200;

/// One run of a runner inside a session (a top-level unittest suite, a
/// pytest session).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    pub runner: String,
    /// Collected tests, as announced.
    pub total: u64,
    #[serde(skip)]
    pub inventory: Vec<String>,
    #[serde(skip)]
    pub results: Vec<TestResult>,
    /// The runner's own count of tests run, from its `end` record.
    pub tests_run: Option<u64>,
    /// The runner's own verdict on the run, from its `end` record.
    pub ok: Option<bool>,
    pub ended: bool,
}

/// One reporter session: one test process.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionSummary {
    pub key_id: String,
    pub pid: Option<i64>,
    pub argv: Vec<String>,
    pub python: Option<String>,
    pub runs: Vec<RunSummary>,
    /// Its `exit` record arrived.
    pub exited: bool,
    /// How the process left, from that record (`exit`, `os._exit(0)`).
    pub exit_via: Option<String>,
    pub records: u64,
}

/// What the channel said.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChannelReport {
    pub sessions: Vec<SessionSummary>,
    /// Evidence of tampering, one line each.
    pub tampered: Vec<String>,
    pub bytes: u64,
}

impl ChannelReport {
    /// At least one session said hello with a valid MAC.
    pub fn connected(&self) -> bool {
        !self.sessions.is_empty()
    }
}

/// The session keys the host handed out, by key id.
pub struct Keys {
    by_id: HashMap<String, Mac>,
}

impl Keys {
    pub fn new(keys: &[[u8; 32]]) -> Keys {
        Keys {
            by_id: keys
                .iter()
                .map(|k| (super::mac::key_id(k), Mac::new(k)))
                .collect(),
        }
    }
}

/// Findings, deduplicated and capped.
#[derive(Default)]
struct Findings {
    list: Vec<String>,
    more: usize,
}

impl Findings {
    fn push(&mut self, s: String) {
        if self.list.contains(&s) {
            return;
        }
        if self.list.len() < MAX_FINDINGS {
            self.list.push(s);
        } else {
            self.more += 1;
        }
    }
    fn done(mut self) -> Vec<String> {
        if self.more > 0 {
            self.list.push(format!("... and {} more", self.more));
        }
        self.list
    }
}

fn text(v: &Value) -> Option<String> {
    let s = v.as_str()?;
    Some(clip(s))
}

/// `s` cut to [`MAX_TEXT`] characters, control characters replaced.
fn clip(s: &str) -> String {
    s.chars()
        .take(MAX_TEXT)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[derive(Default)]
struct State {
    summary: SessionSummary,
    next: u64,
    /// Run index in the reporter's numbering -> index in `summary.runs`.
    runs: BTreeMap<u64, usize>,
}

/// Parses and verifies the channel's bytes. `overflowed`: the host stopped
/// keeping bytes at its cap (the rest was drained and dropped).
pub fn read_channel(bytes: &[u8], overflowed: bool, keys: &Keys) -> ChannelReport {
    let mut findings = Findings::default();
    if overflowed {
        findings.push(format!(
            "the result channel was flooded (more than {} bytes)",
            bytes.len()
        ));
    }
    let mut sessions: BTreeMap<String, State> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let (complete, partial) = match bytes.iter().rposition(|b| *b == b'\n') {
        Some(i) => (&bytes[..=i], &bytes[i + 1..]),
        None => (&bytes[..0], bytes),
    };
    if !partial.is_empty() && !overflowed {
        findings.push("the result channel ends in a partial record".into());
    }
    for raw in complete.split(|b| *b == b'\n') {
        if raw.is_empty() {
            continue;
        }
        if raw.len() > MAX_LINE {
            findings.push(format!("a channel record is over {MAX_LINE} bytes"));
            continue;
        }
        let Ok(line) = std::str::from_utf8(raw) else {
            findings.push("a channel record is not UTF-8".into());
            continue;
        };
        let Some((tag, body)) = line.split_once(' ') else {
            findings.push("a channel record has no MAC".into());
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(body) else {
            findings.push("a channel record is not JSON".into());
            continue;
        };
        if tag == "alarm" {
            let why = v.get("why").and_then(text).unwrap_or_default();
            findings.push(format!("reporter alarm: {why}"));
            continue;
        }
        let Some(kid) = v.get("k").and_then(Value::as_str) else {
            findings.push("a channel record names no session key".into());
            continue;
        };
        let Some(mac) = keys.by_id.get(kid) else {
            findings.push("a channel record names a key cbrun never issued (forged)".into());
            continue;
        };
        if !mac.verify(body.as_bytes(), tag) {
            findings.push("a channel record failed its MAC (forged or altered)".into());
            continue;
        }
        let st = sessions.entry(kid.to_owned()).or_insert_with(|| {
            order.push(kid.to_owned());
            State {
                summary: SessionSummary {
                    key_id: kid.to_owned(),
                    ..Default::default()
                },
                ..Default::default()
            }
        });
        let n = v.get("n").and_then(Value::as_u64);
        if n != Some(st.next) {
            findings.push(format!(
                "session {kid}: record {} where {} was due (records dropped, replayed or reordered)",
                n.map_or("?".into(), |n| n.to_string()),
                st.next
            ));
            // Resynchronise so that one gap is reported once.
            st.next = n.unwrap_or(st.next).saturating_add(1);
        } else {
            st.next += 1;
        }
        st.summary.records += 1;
        if st.summary.exited {
            findings.push(format!("session {kid}: a record after its exit record"));
            continue;
        }
        apply(st, &v, kid, &mut findings);
    }
    let mut report = ChannelReport {
        bytes: bytes.len() as u64,
        ..Default::default()
    };
    for kid in order {
        if let Some(st) = sessions.remove(&kid) {
            if st.summary.pid.is_none() {
                findings.push(format!("session {kid}: no hello record"));
            }
            report.sessions.push(st.summary);
        }
    }
    report.tampered = findings.done();
    report
}

fn apply(st: &mut State, v: &Value, kid: &str, f: &mut Findings) {
    let kind = v.get("t").and_then(Value::as_str).unwrap_or("");
    let summary = &mut st.summary;
    if kind != "hello" && summary.pid.is_none() {
        f.push(format!("session {kid}: a {kind:?} record before its hello"));
        return;
    }
    let run_of = |v: &Value| v.get("run").and_then(Value::as_u64);
    match kind {
        "hello" => {
            if summary.pid.is_some() {
                f.push(format!("session {kid}: a second hello"));
                return;
            }
            summary.pid = Some(v.get("pid").and_then(Value::as_i64).unwrap_or(-1));
            summary.argv = v
                .get("argv")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(text).take(64).collect())
                .unwrap_or_default();
            summary.python = v.get("py").and_then(text);
        }
        "inv" => {
            let Some(run) = run_of(v) else {
                f.push(format!("session {kid}: an inventory without a run"));
                return;
            };
            let total = v.get("total").and_then(Value::as_u64).unwrap_or(0);
            let ids: Vec<String> = v
                .get("ids")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(text).collect())
                .unwrap_or_default();
            let idx = match st.runs.get(&run) {
                Some(i) => *i,
                None => {
                    summary.runs.push(RunSummary {
                        runner: v.get("runner").and_then(text).unwrap_or_default(),
                        total,
                        ..Default::default()
                    });
                    st.runs.insert(run, summary.runs.len() - 1);
                    summary.runs.len() - 1
                }
            };
            let r = &mut summary.runs[idx];
            if !r.results.is_empty() || r.ended {
                f.push(format!(
                    "session {kid}: inventory of run {run} grew after its tests started"
                ));
                return;
            }
            if r.inventory.len() as u64 + ids.len() as u64 > r.total {
                f.push(format!(
                    "session {kid}: run {run} lists more tests than it announced"
                ));
                return;
            }
            r.inventory.extend(ids);
        }
        "test" | "end" => {
            let Some(idx) = run_of(v).and_then(|r| st.runs.get(&r).copied()) else {
                f.push(format!(
                    "session {kid}: a {kind} record for a run with no inventory"
                ));
                return;
            };
            let r = &mut summary.runs[idx];
            if r.ended {
                f.push(format!(
                    "session {kid}: a {kind} record after its run ended"
                ));
                return;
            }
            if (r.inventory.len() as u64) != r.total {
                f.push(format!(
                    "session {kid}: {} of {} announced tests were listed before the run started",
                    r.inventory.len(),
                    r.total
                ));
                // Counted once: the totals now agree.
                r.total = r.inventory.len() as u64;
            }
            if kind == "end" {
                r.ended = true;
                r.tests_run = v.get("tests_run").and_then(Value::as_u64);
                r.ok = v.get("ok").and_then(Value::as_bool);
                return;
            }
            let id = v.get("id").and_then(text).unwrap_or_default();
            let outcome = match v.get("o").and_then(Value::as_str) {
                Some("passed") => TestOutcome::Passed,
                Some("failed") => TestOutcome::Failed,
                Some("skipped") => TestOutcome::Skipped,
                _ => TestOutcome::Error,
            };
            r.results.push(TestResult::new(id, outcome));
        }
        "tamper" => {
            let what = v.get("what").and_then(text).unwrap_or_default();
            f.push(what);
        }
        "exit" => {
            summary.exited = true;
            summary.exit_via = v.get("via").and_then(text);
            for w in v
                .get("findings")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(text)
            {
                f.push(w);
            }
        }
        other => f.push(format!("session {kid}: unknown record type {other:?}")),
    }
}

/// The tests of every run of every session, checked against their
/// inventories.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub counts: Counts,
    /// One result per collected test, in inventory order; tests that
    /// never reported are errors.
    pub tests: Vec<TestResult>,
    /// Reported tests that were never collected, or reported more often
    /// than collected: tampering.
    pub strangers: Vec<String>,
    /// Why the runs do not add up (crashes, a runner whose own count
    /// disagrees), one line each; not tampering by themselves.
    pub problems: Vec<String>,
    /// Sessions without their exit record.
    pub unfinished: Vec<String>,
    /// Runs that reached their end.
    pub runs: usize,
    pub runner: Option<String>,
}

/// Adds up the channel's runs.
pub fn tally(report: &ChannelReport) -> Tally {
    let mut totals = Tally::default();
    let mut strangers = Findings::default();
    for s in &report.sessions {
        if !s.exited {
            totals.unfinished.push(format!(
                "pid {} ({})",
                s.pid.unwrap_or(-1),
                s.argv.join(" ")
            ));
        }
        for r in &s.runs {
            if totals.runner.is_none() {
                totals.runner = Some(r.runner.clone());
            }
            // Inventory order; each collected id takes the first unused
            // result reported for it.
            let mut pending: HashMap<&str, Vec<TestOutcome>> = HashMap::new();
            for res in &r.results {
                pending
                    .entry(res.id.as_str())
                    .or_default()
                    .push(res.outcome);
            }
            for p in pending.values_mut() {
                p.reverse();
            }
            let mut missing = 0u64;
            for id in &r.inventory {
                let outcome = match pending.get_mut(id.as_str()).and_then(Vec::pop) {
                    Some(o) => o,
                    None => {
                        missing += 1;
                        TestOutcome::Error
                    }
                };
                totals.tests.push(TestResult::new(id.clone(), outcome));
            }
            for (id, left) in pending {
                if !left.is_empty() {
                    strangers.push(format!(
                        "the reporter reported {id:?}, which was not collected ({} time(s) too many)",
                        left.len()
                    ));
                }
            }
            if missing > 0 {
                totals.problems.push(format!(
                    "{missing} collected test(s) never reported a result"
                ));
            }
            if r.ended {
                totals.runs += 1;
                if let Some(n) = r.tests_run {
                    let reported = r.results.len() as u64;
                    if n != reported {
                        totals.problems.push(format!(
                            "the {} runner counted {n} tests run, the reporter saw {reported}",
                            r.runner
                        ));
                    }
                }
            } else {
                totals
                    .problems
                    .push(format!("a {} run did not finish", r.runner));
            }
        }
    }
    totals.counts = Counts::from_tests(&totals.tests);
    totals.strangers = strangers.done();
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes records like the reporter does.
    struct Writer {
        key: [u8; 32],
        n: u64,
        out: Vec<u8>,
    }

    impl Writer {
        fn new(seed: u8) -> Writer {
            Writer {
                key: [seed; 32],
                n: 0,
                out: Vec::new(),
            }
        }
        fn rec(&mut self, t: &str, mut v: Value) -> &mut Self {
            let o = v.as_object_mut().unwrap();
            o.insert("k".into(), super::super::mac::key_id(&self.key).into());
            o.insert("n".into(), self.n.into());
            o.insert("t".into(), t.into());
            self.n += 1;
            let body = serde_json::to_string(&v).unwrap();
            let tag = Mac::new(&self.key).hex(body.as_bytes());
            self.out
                .extend_from_slice(format!("{tag} {body}\n").as_bytes());
            self
        }
        fn session(&mut self, ids: &[&str], outcomes: &[&str]) -> &mut Self {
            self.rec(
                "hello",
                serde_json::json!({"pid": 7, "argv": ["python3", "run.py"], "py": "3.11"}),
            )
            .rec(
                "inv",
                serde_json::json!({"run": 0, "runner": "unittest", "total": ids.len(), "ids": ids}),
            );
            for (id, o) in ids.iter().zip(outcomes) {
                self.rec("test", serde_json::json!({"run": 0, "id": id, "o": o}));
            }
            self.rec(
                "end",
                serde_json::json!({"run": 0, "runner": "unittest", "tests_run": outcomes.len()}),
            )
            .rec("exit", serde_json::json!({"findings": []}))
        }
    }

    fn keys(seeds: &[u8]) -> Keys {
        Keys::new(&seeds.iter().map(|s| [*s; 32]).collect::<Vec<_>>())
    }

    #[test]
    fn a_clean_session_tallies() {
        let mut w = Writer::new(1);
        w.session(
            &["m.T.a", "m.T.b", "m.T.c"],
            &["passed", "failed", "passed"],
        );
        let r = read_channel(&w.out, false, &keys(&[1, 2]));
        assert!(r.tampered.is_empty(), "{:?}", r.tampered);
        assert!(r.connected());
        let t = tally(&r);
        assert_eq!(t.counts, Counts::new(2, 1, 0, 0));
        assert!(t.problems.is_empty() && t.strangers.is_empty() && t.unfinished.is_empty());
        assert_eq!(t.runs, 1);
        assert_eq!(t.tests[1], TestResult::new("m.T.b", TestOutcome::Failed));
    }

    #[test]
    fn forged_unknown_and_altered_records_are_tampering() {
        let mut w = Writer::new(1);
        w.session(&["m.T.a"], &["failed"]);
        let mut bytes = w.out.clone();
        // A record under a key cbrun never issued.
        let mut forger = Writer::new(9);
        forger.session(&["m.T.a"], &["passed"]);
        bytes.extend_from_slice(&forger.out);
        let r = read_channel(&bytes, false, &keys(&[1]));
        assert!(
            r.tampered.iter().any(|s| s.contains("never issued")),
            "{:?}",
            r.tampered
        );
        // A valid record with its JSON changed.
        let text = String::from_utf8(w.out.clone()).unwrap();
        let altered = text.replace("\"o\":\"failed\"", "\"o\":\"passed\"");
        let r = read_channel(altered.as_bytes(), false, &keys(&[1]));
        assert!(
            r.tampered.iter().any(|s| s.contains("failed its MAC")),
            "{:?}",
            r.tampered
        );
        // Garbage, a fake summary, a missing MAC.
        let r = read_channel(
            b"Ran 39 tests in 0.1s\nOK\n{\"t\":\"test\"}\n",
            false,
            &keys(&[1]),
        );
        assert!(!r.connected());
        assert!(r.tampered.len() >= 2, "{:?}", r.tampered);
    }

    #[test]
    fn dropped_replayed_and_late_records_are_tampering() {
        let mut w = Writer::new(1);
        w.session(&["a", "b"], &["passed", "passed"]);
        let text = String::from_utf8(w.out.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // Drop the record of test b (a failure the product wanted gone).
        let dropped: String = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 3)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        let r = read_channel(dropped.as_bytes(), false, &keys(&[1]));
        assert!(
            r.tampered.iter().any(|s| s.contains("was due")),
            "{:?}",
            r.tampered
        );
        // Replay a passing record.
        let replayed = format!("{text}{}\n", lines[2]);
        let r = read_channel(replayed.as_bytes(), false, &keys(&[1]));
        assert!(!r.tampered.is_empty());
        // A record after the exit record (fresh sequence number, valid MAC).
        let mut w2 = Writer::new(1);
        w2.session(&["a"], &["failed"]);
        w2.rec(
            "test",
            serde_json::json!({"run": 0, "id": "a", "o": "passed"}),
        );
        let r = read_channel(&w2.out, false, &keys(&[1]));
        assert!(
            r.tampered.iter().any(|s| s.contains("after its exit")),
            "{:?}",
            r.tampered
        );
    }

    #[test]
    fn ids_outside_the_inventory_and_missing_results() {
        let mut w = Writer::new(1);
        w.rec("hello", serde_json::json!({"pid": 1}))
            .rec(
                "inv",
                serde_json::json!({"run": 0, "runner": "unittest", "total": 2, "ids": ["a", "b"]}),
            )
            .rec(
                "test",
                serde_json::json!({"run": 0, "id": "a", "o": "passed"}),
            )
            .rec(
                "test",
                serde_json::json!({"run": 0, "id": "zzz", "o": "passed"}),
            )
            .rec(
                "end",
                serde_json::json!({"run": 0, "runner": "unittest", "tests_run": 2}),
            )
            .rec("exit", serde_json::json!({"findings": []}));
        let r = read_channel(&w.out, false, &keys(&[1]));
        assert!(r.tampered.is_empty(), "{:?}", r.tampered);
        let t = tally(&r);
        assert_eq!(t.counts, Counts::new(1, 0, 1, 0));
        assert_eq!(t.strangers.len(), 1, "{:?}", t.strangers);
        assert!(t.strangers[0].contains("zzz"));
        assert!(t.problems.iter().any(|p| p.contains("never reported")));
    }

    #[test]
    fn unfinished_sessions_runs_and_alarms() {
        let mut w = Writer::new(1);
        w.rec("hello", serde_json::json!({"pid": 1})).rec(
            "inv",
            serde_json::json!({"run": 0, "runner": "unittest", "total": 1, "ids": ["a"]}),
        );
        let mut bytes = w.out.clone();
        bytes.extend_from_slice(b"alarm {\"why\":\"no token left\"}\n");
        let r = read_channel(&bytes, false, &keys(&[1]));
        assert_eq!(
            r.tampered,
            vec!["reporter alarm: no token left".to_string()]
        );
        let t = tally(&r);
        assert_eq!(t.unfinished.len(), 1);
        assert_eq!(t.runs, 0);
        assert!(t.problems.iter().any(|p| p.contains("did not finish")));
        // A flood and a cut line.
        let r = read_channel(b"abc", true, &keys(&[1]));
        assert!(r.tampered[0].contains("flooded"));
        let r = read_channel(b"abc", false, &keys(&[1]));
        assert!(r.tampered[0].contains("partial"));
        let long = vec![b'x'; MAX_LINE + 1];
        let mut l = long.clone();
        l.push(b'\n');
        let r = read_channel(&l, false, &keys(&[1]));
        assert!(r.tampered[0].contains("over"));
    }

    #[test]
    fn inventory_that_grows_late_or_overflows() {
        let mut w = Writer::new(1);
        w.rec("hello", serde_json::json!({"pid": 1})).rec(
            "inv",
            serde_json::json!({"run": 0, "runner": "pytest", "total": 1, "ids": ["a", "b"]}),
        );
        let r = read_channel(&w.out, false, &keys(&[1]));
        assert!(
            r.tampered[0].contains("more tests than"),
            "{:?}",
            r.tampered
        );
        let mut w = Writer::new(1);
        w.rec("hello", serde_json::json!({"pid": 1}))
            .rec(
                "inv",
                serde_json::json!({"run": 0, "runner": "pytest", "total": 2, "ids": ["a"]}),
            )
            .rec(
                "test",
                serde_json::json!({"run": 0, "id": "a", "o": "passed"}),
            );
        let r = read_channel(&w.out, false, &keys(&[1]));
        assert!(r.tampered[0].contains("1 of 2"), "{:?}", r.tampered);
    }
}
