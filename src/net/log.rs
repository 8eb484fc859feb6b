//! The proxy's connection log: one JSON line per connection attempt.
//!
//! Each record is written with a single `write` on an `O_APPEND` file, with
//! no userspace buffering, so a killed proxy loses only the connections
//! still open and leaves at worst one truncated final line, which
//! [`summarize`] skips.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// What happened to a connection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogDecision {
    /// The policy allowed it and the upstream connection was made.
    Allowed,
    /// The policy refused it (403).
    Denied,
    /// Allowed by policy but failed (502), or the request itself was bad.
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnRecord {
    /// When the request was read, in ms since the proxy started.
    pub at_ms: u64,
    /// `CONNECT`, `GET`, ...; empty when no request line could be read.
    pub method: String,
    /// Empty when no target could be read.
    pub host: String,
    pub port: u16,
    pub decision: LogDecision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes sent from the sandbox to the upstream.
    pub bytes_up: u64,
    /// Bytes sent from the upstream to the sandbox.
    pub bytes_down: u64,
    /// For a request the registry index answered: the path asked for
    /// (`host`/`port` are then the upstream registry's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_path: Option<String>,
}

/// Shared handle to the log file; cheap to clone into connection threads.
#[derive(Clone)]
pub struct ConnLog {
    file: Option<Arc<Mutex<File>>>,
    warned: Arc<AtomicBool>,
}

impl ConnLog {
    /// Opens (creating if needed) `path` for appending.
    pub fn open(path: &Path) -> io::Result<ConnLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(ConnLog {
            file: Some(Arc::new(Mutex::new(file))),
            warned: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The descriptor the log writes to, if it writes at all.
    pub fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        let file = self.file.as_ref()?;
        let guard = file.lock().ok()?;
        Some(guard.as_raw_fd())
    }

    /// A log that records nothing.
    pub fn disabled() -> ConnLog {
        ConnLog {
            file: None,
            warned: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Appends one record. The proxy keeps serving if the log cannot be
    /// written (a full disk should not cut the agent off), so failures are
    /// reported once on stderr rather than returned: the log is written in
    /// the egress proxy's own process (`trial::egress`), a fork of cbrun
    /// that serves until it is told to stop and whose stderr, inherited
    /// from cbrun, is its only way to tell the user.
    pub fn record(&self, rec: &ConnRecord) {
        if let Err(e) = self.try_record(rec) {
            if !self.warned.swap(true, Ordering::Relaxed) {
                eprintln!("cbrun: egress proxy: cannot write the connection log: {e}");
            }
        }
    }

    fn try_record(&self, rec: &ConnRecord) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let mut line = serde_json::to_vec(rec).map_err(io::Error::other)?;
        line.push(b'\n');
        // A poisoned lock only means another thread panicked mid-write; the
        // file itself is still usable.
        let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
        f.write_all(&line)
    }
}

/// Count of records sharing one host, port and decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCount {
    pub host: String,
    pub port: u16,
    pub decision: LogDecision,
    pub count: u64,
}

/// What a connection log says, for the trial record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetSummary {
    pub total: u64,
    pub allowed: u64,
    pub denied: u64,
    pub errors: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Most frequent first; ties by host, port, decision.
    pub hosts: Vec<HostCount>,
    /// Connections to (host, port, decision) keys past the first
    /// [`MAX_SUMMARY_HOSTS`]: the sandbox names the hosts, so their number
    /// is its to choose, and the summary stays bounded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hosts_left_out: u64,
}

/// Distinct (host, port, decision) keys a summary counts one by one.
pub const MAX_SUMMARY_HOSTS: usize = 1000;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Reads a connection log back. A final line without its newline is the
/// remains of a killed writer and is skipped; any other unreadable line is
/// an error.
pub fn summarize(path: &Path) -> io::Result<NetSummary> {
    let mut reader = BufReader::new(File::open(path)?);
    let mut sum = NetSummary::default();
    let mut counts: BTreeMap<(String, u16, LogDecision), u64> = BTreeMap::new();
    let mut line = String::new();
    let mut lineno = 0u64;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        lineno += 1;
        let Some(text) = line.strip_suffix('\n') else {
            break;
        };
        if text.trim().is_empty() {
            continue;
        }
        let rec: ConnRecord = serde_json::from_str(text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} line {lineno}: {e}", path.display()),
            )
        })?;
        sum.total += 1;
        match rec.decision {
            LogDecision::Allowed => sum.allowed += 1,
            LogDecision::Denied => sum.denied += 1,
            LogDecision::Error => sum.errors += 1,
        }
        sum.bytes_up += rec.bytes_up;
        sum.bytes_down += rec.bytes_down;
        let key = (rec.host, rec.port, rec.decision);
        if counts.len() < MAX_SUMMARY_HOSTS || counts.contains_key(&key) {
            *counts.entry(key).or_default() += 1;
        } else {
            sum.hosts_left_out += 1;
        }
    }
    sum.hosts = counts
        .into_iter()
        .map(|((host, port, decision), count)| HostCount {
            host,
            port,
            decision,
            count,
        })
        .collect();
    // Stable sort keeps the map's (host, port, decision) order among ties.
    sum.hosts.sort_by_key(|h| std::cmp::Reverse(h.count));
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(host: &str, port: u16, decision: LogDecision, up: u64) -> ConnRecord {
        ConnRecord {
            at_ms: 1,
            method: "CONNECT".into(),
            host: host.into(),
            port,
            decision,
            reason: (decision != LogDecision::Allowed).then(|| "why".into()),
            bytes_up: up,
            bytes_down: 2 * up,
            index_path: None,
        }
    }

    fn temp_path(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("cbrun-netlog-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    #[test]
    fn round_trip_and_summary() {
        let path = temp_path("summary.jsonl");
        let log = ConnLog::open(&path).unwrap();
        log.record(&rec("a.test", 443, LogDecision::Allowed, 10));
        log.record(&rec("a.test", 443, LogDecision::Allowed, 5));
        log.record(&rec("github.com", 443, LogDecision::Denied, 0));
        log.record(&rec("b.test", 80, LogDecision::Error, 0));
        drop(log);
        // Reopening appends rather than truncating.
        ConnLog::open(&path)
            .unwrap()
            .record(&rec("b.test", 80, LogDecision::Error, 0));

        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 5);
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["decision"], "allowed");
        assert!(first.get("reason").is_none());

        let s = summarize(&path).unwrap();
        assert_eq!((s.total, s.allowed, s.denied, s.errors), (5, 2, 1, 2));
        assert_eq!((s.bytes_up, s.bytes_down), (15, 30));
        let hosts: Vec<_> = s
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.port, h.decision, h.count))
            .collect();
        assert_eq!(
            hosts,
            vec![
                ("a.test", 443, LogDecision::Allowed, 2),
                ("b.test", 80, LogDecision::Error, 2),
                ("github.com", 443, LogDecision::Denied, 1),
            ]
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn truncated_tail_is_skipped_but_garbage_is_not() {
        let path = temp_path("tail.jsonl");
        let good = serde_json::to_string(&rec("a.test", 1, LogDecision::Allowed, 1)).unwrap();
        std::fs::write(&path, format!("{good}\n{}", &good[..10])).unwrap();
        assert_eq!(summarize(&path).unwrap().total, 1);
        std::fs::write(&path, format!("{good}\nnot json\n{good}\n")).unwrap();
        let err = summarize(&path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("line 2"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn distinct_hosts_are_bounded() {
        let path = temp_path("many.jsonl");
        let mut text = String::new();
        for i in 0..MAX_SUMMARY_HOSTS + 50 {
            let r = rec(&format!("h{i}.test"), 443, LogDecision::Denied, 0);
            text.push_str(&serde_json::to_string(&r).unwrap());
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        let sum = summarize(&path).unwrap();
        assert_eq!(sum.total, (MAX_SUMMARY_HOSTS + 50) as u64);
        assert_eq!(sum.hosts.len(), MAX_SUMMARY_HOSTS);
        assert_eq!(sum.hosts_left_out, 50);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn disabled_log_is_silent() {
        ConnLog::disabled().record(&rec("a.test", 1, LogDecision::Allowed, 1));
    }
}
