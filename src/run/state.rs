//! Where one trial of a run stands, read from its folder, and what to do
//! with it next: nothing (its outcome stands), run it (first attempt, or
//! again after an interruption or an infrastructure failure, the earlier
//! attempt set aside as `<repeat>.attempt<K>/`), or give up (retries used).
//!
//! An outcome stands when the record is final and neither interrupted nor
//! an infrastructure failure: evaluated, not submitted, rejected, or an
//! error the agent caused. Such a trial is never run again.

use std::ffi::CString;
use std::os::fd::AsFd;

use serde::Deserialize;

use crate::sys::at;
use crate::sys::dir::Dir;
use crate::trial::record::{FailureClass, PipelineStatus, TerminalStatus};

/// The fields of `trial.json` a run needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RecordView {
    pub terminal_status: TerminalStatus,
    pub failure_class: Option<FailureClass>,
    pub reward: u8,
    pub pipeline_status: Option<PipelineStatus>,
    pub finished_at: Option<String>,
    pub started_at: Option<String>,
    pub attempt: Option<u32>,
    pub error: Option<String>,
    pub judge_error: Option<String>,
}

impl RecordView {
    pub fn interrupted(&self) -> bool {
        self.terminal_status == TerminalStatus::Interrupted
    }

    pub fn infrastructure(&self) -> bool {
        self.failure_class == Some(FailureClass::Infrastructure)
    }

    /// See the module docs.
    pub fn stands(&self) -> bool {
        !self.interrupted() && !self.infrastructure()
    }

    /// The wall time of the attempt, from its timestamps.
    pub fn wall_seconds(&self) -> Option<f64> {
        Some(
            parse_rfc3339(self.finished_at.as_deref()?)?
                - parse_rfc3339(self.started_at.as_deref()?)?,
        )
    }
}

/// One trial folder.
#[derive(Debug, Clone, PartialEq)]
pub enum TrialState {
    /// No folder.
    Missing,
    /// A folder whose record never got its final write (its cbrun died),
    /// or with no record at all.
    Unfinished {
        attempt: Option<u32>,
    },
    Finished(RecordView),
}

/// The record of the trial folder `rel` below `dir`.
pub fn read_state(dir: &Dir, rel: &str) -> TrialState {
    match dir.entry(rel) {
        Ok(Some(_)) => {}
        _ => return TrialState::Missing,
    }
    let view = dir
        .read_capped(format!("{rel}/trial.json"), 64 << 20)
        .ok()
        .filter(|c| !c.truncated())
        .and_then(|c| serde_json::from_slice::<RecordView>(&c.bytes).ok());
    match view {
        Some(v) if v.finished_at.is_some() => TrialState::Finished(v),
        Some(v) => TrialState::Unfinished { attempt: v.attempt },
        None => TrialState::Unfinished { attempt: None },
    }
}

/// What to do with a trial.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Its outcome stands.
    Done(RecordView),
    /// It failed for infrastructure more often than retries allow.
    Exhausted(RecordView),
    /// Run attempt `attempt`, first setting the folder of attempt
    /// `set_aside` aside, when there is one.
    Run {
        attempt: u32,
        set_aside: Option<u32>,
    },
}

/// The earlier attempts of `repeat` in its configuration folder `dir`:
/// their numbers, and how many failed for infrastructure.
fn earlier(dir: &Dir, repeat: u32) -> (Vec<u32>, u32) {
    let prefix = format!("{repeat}.attempt");
    let names = dir.names(1_000_000).map(|(n, _)| n).unwrap_or_default();
    let mut nums = Vec::new();
    let mut infra = 0;
    for n in names {
        let Some(k) = std::str::from_utf8(n.as_bytes())
            .ok()
            .and_then(|s| s.strip_prefix(&prefix))
            .and_then(|k| k.parse::<u32>().ok())
        else {
            continue;
        };
        nums.push(k);
        if let TrialState::Finished(v) = read_state(dir, &format!("{repeat}.attempt{k}")) {
            if v.infrastructure() && !v.interrupted() {
                infra += 1;
            }
        }
    }
    nums.sort_unstable();
    (nums, infra)
}

/// What to do with trial `repeat` in its configuration folder `dir`
/// (`None`: the folder does not exist yet), allowing `retry_infra` reruns
/// of infrastructure failures.
pub fn next(dir: Option<&Dir>, repeat: u32, retry_infra: u32) -> Next {
    let Some(dir) = dir else {
        return Next::Run {
            attempt: 1,
            set_aside: None,
        };
    };
    let (old, old_infra) = earlier(dir, repeat);
    let last_old = old.last().copied().unwrap_or(0);
    let rerun = |cur: Option<u32>| {
        let cur = cur.unwrap_or(last_old + 1).max(last_old + 1);
        Next::Run {
            attempt: cur + 1,
            set_aside: Some(cur),
        }
    };
    match read_state(dir, &repeat.to_string()) {
        TrialState::Missing => Next::Run {
            attempt: last_old + 1,
            set_aside: None,
        },
        TrialState::Unfinished { attempt } => rerun(attempt),
        TrialState::Finished(v) if v.stands() => Next::Done(v),
        TrialState::Finished(v) if v.interrupted() => rerun(v.attempt),
        TrialState::Finished(v) => {
            if old_infra < retry_infra {
                rerun(v.attempt)
            } else {
                Next::Exhausted(v)
            }
        }
    }
}

/// Moves the trial folder `repeat` of `dir` to `<repeat>.attempt<K>`
/// (another free name if that one is taken); returns the new name.
pub fn set_aside(dir: &Dir, repeat: u32, k: u32) -> std::io::Result<String> {
    let from = CString::new(repeat.to_string()).map_err(std::io::Error::other)?;
    for extra in 0..100u32 {
        let name = if extra == 0 {
            format!("{repeat}.attempt{k}")
        } else {
            format!("{repeat}.attempt{k}.{extra}")
        };
        if matches!(dir.entry(&name), Ok(Some(_))) {
            continue;
        }
        let to = CString::new(name.clone()).map_err(std::io::Error::other)?;
        return at::rename_at(dir.as_fd(), &from, dir.as_fd(), &to).map(|()| name);
    }
    Err(std::io::Error::other(format!(
        "no free name for attempt {k} of repeat {repeat}"
    )))
}

/// Seconds since the epoch of an RFC 3339 UTC time as cbrun writes it
/// (`2026-11-30T05:09:09.123Z`).
pub fn parse_rfc3339(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' || !s.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm) = (num(11..13)?, num(14..16)?);
    let secs: f64 = s.get(17..s.len() - 1)?.parse().ok()?;
    // Days from the civil date (the inverse of clock's conversion).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60) as f64 + secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::{Duration, UNIX_EPOCH};

    fn record(status: &str, class: Option<&str>, attempt: u32, finished: bool) -> String {
        serde_json::json!({
            "terminal_status": status,
            "failure_class": class,
            "reward": 0,
            "pipeline_status": "error",
            "finished_at": finished.then_some("2026-12-01T00:00:01.000Z"),
            "started_at": "2026-12-01T00:00:00.000Z",
            "attempt": attempt,
        })
        .to_string()
    }

    #[test]
    fn what_comes_next() {
        let p = std::env::temp_dir().join(format!("cbrun-state-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        let d = Dir::open(&p).unwrap();
        let put = |name: &str, rec: Option<String>| {
            fs::create_dir_all(p.join(name)).unwrap();
            if let Some(r) = rec {
                fs::write(p.join(name).join("trial.json"), r).unwrap();
            }
        };
        assert_eq!(
            next(None, 1, 1),
            Next::Run {
                attempt: 1,
                set_aside: None
            }
        );
        assert_eq!(
            next(Some(&d), 1, 1),
            Next::Run {
                attempt: 1,
                set_aside: None
            }
        );
        // Killed mid-trial (the first record never replaced).
        put("1", Some(record("interrupted", None, 1, false)));
        assert_eq!(
            next(Some(&d), 1, 0),
            Next::Run {
                attempt: 2,
                set_aside: Some(1)
            }
        );
        // A folder without a record at all.
        put("2", None);
        assert_eq!(
            next(Some(&d), 2, 0),
            Next::Run {
                attempt: 2,
                set_aside: Some(1)
            }
        );
        // Evaluated: stands, whatever the retries.
        fs::write(
            p.join("1/trial.json"),
            record("completed", Some("implementation"), 1, true),
        )
        .unwrap();
        assert!(matches!(next(Some(&d), 1, 5), Next::Done(_)));
        // An error the agent caused stands too.
        fs::write(
            p.join("1/trial.json"),
            record("error", Some("implementation"), 1, true),
        )
        .unwrap();
        assert!(matches!(next(Some(&d), 1, 5), Next::Done(_)));
        // Interrupted: always again.
        fs::write(
            p.join("1/trial.json"),
            record("interrupted", Some("infrastructure"), 1, true),
        )
        .unwrap();
        assert_eq!(
            next(Some(&d), 1, 0),
            Next::Run {
                attempt: 2,
                set_aside: Some(1)
            }
        );
        // Infrastructure: as often as allowed, counting earlier attempts.
        fs::write(
            p.join("1/trial.json"),
            record("error", Some("infrastructure"), 1, true),
        )
        .unwrap();
        assert!(matches!(next(Some(&d), 1, 0), Next::Exhausted(_)));
        assert_eq!(
            next(Some(&d), 1, 1),
            Next::Run {
                attempt: 2,
                set_aside: Some(1)
            }
        );
        assert_eq!(set_aside(&d, 1, 1).unwrap(), "1.attempt1");
        put("1", Some(record("error", Some("infrastructure"), 2, true)));
        assert!(matches!(next(Some(&d), 1, 1), Next::Exhausted(_)));
        assert_eq!(
            next(Some(&d), 1, 2),
            Next::Run {
                attempt: 3,
                set_aside: Some(2)
            }
        );
        // An interrupted earlier attempt does not use up a retry.
        fs::write(
            p.join("1.attempt1/trial.json"),
            record("interrupted", Some("infrastructure"), 1, true),
        )
        .unwrap();
        assert_eq!(
            next(Some(&d), 1, 1),
            Next::Run {
                attempt: 3,
                set_aside: Some(2)
            }
        );
        fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn rfc3339_round_trips_with_the_clock() {
        let t = UNIX_EPOCH + Duration::from_millis(1_796_015_349_123);
        let s = crate::trial::clock::rfc3339(t);
        assert!((parse_rfc3339(&s).unwrap() - 1_796_015_349.123).abs() < 1e-6);
        let leap = crate::trial::clock::rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400));
        assert_eq!(parse_rfc3339(&leap), Some(951_782_400.0));
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
