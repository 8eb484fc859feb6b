//! Claims: a worker owns a trial while `<repeat>.claim` (created with
//! `O_CREAT | O_EXCL`, which NFS v3 and later do atomically; no `flock`)
//! holds its host, pid, job id and time.
//!
//! A claim is stale, and may be broken, when
//! - its host is this host and its process is gone (no such pid, or a pid
//!   that started at another time, or the host has rebooted since);
//! - its host is another one and it is older than the trial's budget plus
//!   [`MARGIN`] (nothing can tell whether a process elsewhere lives);
//! - it cannot be read and is older than [`UNREADABLE_GRACE`] (a claimer
//!   killed between creating and writing it);
//! - it names the Slurm job (array task) that now claims again: Slurm runs
//!   a job id once at a time, so the claim is that job's run before a
//!   requeue (`scontrol requeue`, a preemption, a node failure).
//!
//! Breaking is itself exclusive: the breaker creates `<repeat>.claim.break`
//! (`O_EXCL`), reads the claim again, removes it only if it is still the
//! one found stale, and removes the break file. A break file older than
//! [`UNREADABLE_GRACE`] belongs to a breaker that died and is removed.

use std::ffi::CString;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::sys::at;
use crate::sys::dir::Dir;
use crate::trial::clock;

/// Slack on top of a trial's budget before another host's claim is stale.
pub const MARGIN: Duration = Duration::from_secs(900);
/// How old an unreadable claim (or break file) must be to be stale.
pub const UNREADABLE_GRACE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimInfo {
    pub host: String,
    pub pid: i32,
    /// The process's start time in clock ticks since boot (`/proc/PID/stat`).
    pub start_ticks: Option<u64>,
    /// `/proc/sys/kernel/random/boot_id`: a reboot makes every pid new.
    pub boot_id: Option<String>,
    /// The scheduler's job (`local-<pid>`, a Slurm job), when known.
    pub job_id: Option<String>,
    pub task: usize,
    pub claimed_at: String,
    /// Seconds since the epoch.
    pub claimed_unix: u64,
    /// How long the trial may take (install, setup, solve, judge).
    pub budget_seconds: u64,
}

impl ClaimInfo {
    /// A claim by this process, now.
    pub fn mine(task: usize, job_id: Option<String>, budget: Duration) -> ClaimInfo {
        let now = SystemTime::now();
        let pid = std::process::id() as i32;
        ClaimInfo {
            host: hostname(),
            pid,
            start_ticks: start_ticks(pid),
            boot_id: boot_id(),
            job_id,
            task,
            claimed_at: clock::rfc3339(now),
            claimed_unix: unix(now),
            budget_seconds: budget.as_secs(),
        }
    }

    /// Why the claim is stale, or `None` when its owner may be alive.
    pub fn stale(&self, now: SystemTime) -> Option<String> {
        if self.host == hostname() {
            if self.boot_id.is_some() && self.boot_id != boot_id() {
                return Some("its host has rebooted since".into());
            }
            return match process_state(self.pid, self.start_ticks) {
                Liveness::Gone => Some(format!("its process {} is gone", self.pid)),
                Liveness::Reused => Some(format!("pid {} is another process now", self.pid)),
                Liveness::Alive => None,
            };
        }
        let age = unix(now).saturating_sub(self.claimed_unix);
        let limit = self.budget_seconds + MARGIN.as_secs();
        (age > limit).then(|| {
            format!(
                "it is {age} s old, more than the trial's budget and margin ({limit} s), on host {}",
                self.host
            )
        })
    }

    /// `host pid N (job J)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "host {} pid {}{} since {}",
            self.host,
            self.pid,
            self.job_id
                .as_deref()
                .map(|j| format!(" (job {j})"))
                .unwrap_or_default(),
            self.claimed_at
        )
    }
}

/// What is at a claim's name.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    None,
    Claim(ClaimInfo),
    /// Present but not a claim (empty, cut short): its age.
    Unreadable(Duration),
}

/// A claim this process holds.
pub struct Claim {
    dir: Dir,
    name: String,
    pub info: ClaimInfo,
    /// What was written: the claim is still this one while the file
    /// holds these bytes.
    bytes: Vec<u8>,
}

pub enum Acquired {
    Mine(Claim),
    /// Another worker holds it (or an unreadable claim too young to break).
    Held(Found),
}

impl Claim {
    /// Takes the claim `name` in `dir`, breaking a stale one (the reason
    /// goes to `broke`).
    pub fn acquire(
        dir: &Dir,
        name: &str,
        info: ClaimInfo,
        broke: &mut Vec<String>,
    ) -> io::Result<Acquired> {
        let bytes = serde_json::to_vec_pretty(&info)?;
        for _ in 0..3 {
            match create_excl(dir, name, &bytes) {
                Ok(()) => {
                    return Ok(Acquired::Mine(Claim {
                        dir: dir.try_clone()?,
                        name: name.to_owned(),
                        info,
                        bytes,
                    }))
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(e),
            }
            let found = read(dir, name);
            let why = match &found {
                Found::None => continue,
                Found::Claim(c) if same_slurm_job(c, &info) => Some(format!(
                    "it was made by an earlier run of the same Slurm job {}",
                    c.job_id.as_deref().unwrap_or("")
                )),
                Found::Claim(c) => c.stale(SystemTime::now()),
                Found::Unreadable(age) => (*age > UNREADABLE_GRACE)
                    .then(|| format!("it is unreadable and {} s old", age.as_secs())),
            };
            let Some(why) = why else {
                return Ok(Acquired::Held(found));
            };
            if break_stale(dir, name, &found)? {
                broke.push(why);
            }
        }
        Ok(Acquired::Held(read(dir, name)))
    }

    /// Whether the claim on disk is still this one (a claim broken as
    /// stale by another host and taken again is not).
    pub fn still_mine(&self) -> bool {
        self.dir
            .read_capped(&self.name, 64 << 10)
            .is_ok_and(|c| c.bytes == self.bytes)
    }

    /// Gives the claim up (only if it is still this one).
    pub fn release(self) {
        if self.still_mine() {
            let _ = unlink(&self.dir, &self.name);
        }
    }
}

/// Whether `old` was made by the same Slurm job (array task) as `new`.
fn same_slurm_job(old: &ClaimInfo, new: &ClaimInfo) -> bool {
    match (&old.job_id, &new.job_id) {
        (Some(a), Some(b)) => a == b && crate::run::slurm::is_slurm_job(a),
        _ => false,
    }
}

/// What the claim `name` in `dir` is now.
pub fn read(dir: &Dir, name: &str) -> Found {
    let Ok((mut f, st)) = dir.open_read(name) else {
        return match dir.entry(name) {
            Ok(None) => Found::None,
            _ => Found::Unreadable(Duration::ZERO),
        };
    };
    let mut buf = Vec::new();
    let _ = (&mut f).take(64 << 10).read_to_end(&mut buf);
    match serde_json::from_slice::<ClaimInfo>(&buf) {
        Ok(c) => Found::Claim(c),
        Err(_) => {
            let mtime = UNIX_EPOCH + Duration::from_secs(st.st_mtime.max(0) as u64);
            Found::Unreadable(SystemTime::now().duration_since(mtime).unwrap_or_default())
        }
    }
}

/// Removes the stale claim `found` under the break lock; false when
/// another breaker is at it or the claim changed meanwhile.
fn break_stale(dir: &Dir, name: &str, found: &Found) -> io::Result<bool> {
    let lock = format!("{name}.break");
    if let Err(e) = create_excl(dir, &lock, b"") {
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e);
        }
        if let Found::Unreadable(age) = read(dir, &lock) {
            if age > UNREADABLE_GRACE {
                let _ = unlink(dir, &lock);
            }
        }
        return Ok(false);
    }
    let again = read(dir, name);
    let same = match (&again, found) {
        (Found::Claim(a), Found::Claim(b)) => a == b,
        (Found::Unreadable(_), Found::Unreadable(_)) => true,
        _ => false,
    };
    if same {
        unlink(dir, name)?;
    }
    unlink(dir, &lock)?;
    Ok(same)
}

fn create_excl(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<()> {
    let c = CString::new(name).map_err(io::Error::other)?;
    let fd = at::open_at(
        dir.as_fd(),
        &c,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        0o644,
    )?;
    // No fsync: the exclusive create is what makes a claim, and its
    // content reaches other NFS clients on close.
    std::fs::File::from(fd).write_all(bytes)
}

fn unlink(dir: &Dir, name: &str) -> io::Result<()> {
    let c = CString::new(name).map_err(io::Error::other)?;
    match at::unlink_at(dir.as_fd(), &c, 0) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        r => r,
    }
}

enum Liveness {
    Alive,
    Gone,
    Reused,
}

fn process_state(pid: i32, ticks: Option<u64>) -> Liveness {
    if pid <= 0 {
        return Liveness::Gone;
    }
    // EPERM means it exists (another user's).
    if let Err(nix::errno::Errno::ESRCH) =
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
    {
        return Liveness::Gone;
    }
    match (ticks, start_ticks(pid)) {
        (Some(a), Some(b)) if a != b => Liveness::Reused,
        // A zombie (or a process that just exited) has no stat to speak of.
        (_, None) => Liveness::Gone,
        _ => Liveness::Alive,
    }
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks
/// since boot; `None` for a process that is gone or a zombie.
pub fn start_ticks(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split
    // after its last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state).
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(22 - 3)?.parse().ok()
}

fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> (std::path::PathBuf, Dir) {
        let d = std::env::temp_dir().join(format!("cbrun-claim-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let dir = Dir::open(&d).unwrap();
        (d, dir)
    }

    fn budget() -> Duration {
        Duration::from_secs(100)
    }

    #[test]
    fn one_claim_at_a_time_and_released_by_its_owner() {
        let (p, d) = scratch("one");
        let mut broke = Vec::new();
        let Acquired::Mine(c) = Claim::acquire(
            &d,
            "1.claim",
            ClaimInfo::mine(0, None, budget()),
            &mut broke,
        )
        .unwrap() else {
            panic!("first claim");
        };
        // This process is alive: a second claimer is refused.
        match Claim::acquire(
            &d,
            "1.claim",
            ClaimInfo::mine(0, None, budget()),
            &mut broke,
        )
        .unwrap()
        {
            Acquired::Held(Found::Claim(i)) => assert_eq!(i, c.info),
            _ => panic!("a live claim was taken"),
        }
        assert!(broke.is_empty());
        assert!(c.still_mine());
        c.release();
        assert_eq!(read(&d, "1.claim"), Found::None);
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn stale_claims_are_broken() {
        let (p, d) = scratch("stale");
        // A dead process on this host.
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let dead = child.id() as i32;
        child.wait().unwrap();
        let mut info = ClaimInfo::mine(0, Some("old".into()), budget());
        info.pid = dead;
        create_excl(&d, "2.claim", &serde_json::to_vec(&info).unwrap()).unwrap();
        assert!(info.stale(SystemTime::now()).unwrap().contains("is gone"));
        let mut broke = Vec::new();
        assert!(matches!(
            Claim::acquire(
                &d,
                "2.claim",
                ClaimInfo::mine(0, None, budget()),
                &mut broke
            )
            .unwrap(),
            Acquired::Mine(_)
        ));
        assert_eq!(broke.len(), 1, "{broke:?}");
        // A live pid that started at another time: reused.
        let mut reused = ClaimInfo::mine(0, None, budget());
        reused.start_ticks = reused.start_ticks.map(|t| t + 1);
        assert!(reused
            .stale(SystemTime::now())
            .unwrap()
            .contains("another process"));
        // Another host: stale only past the budget and the margin.
        let mut far = ClaimInfo::mine(0, None, budget());
        far.host = "elsewhere".into();
        assert_eq!(far.stale(SystemTime::now()), None);
        let later = SystemTime::now() + budget() + MARGIN + Duration::from_secs(5);
        assert!(far.stale(later).unwrap().contains("on host elsewhere"));
        // An unreadable claim is left alone while it is young.
        create_excl(&d, "3.claim", b"").unwrap();
        match Claim::acquire(
            &d,
            "3.claim",
            ClaimInfo::mine(0, None, budget()),
            &mut broke,
        )
        .unwrap()
        {
            Acquired::Held(Found::Unreadable(_)) => {}
            _ => panic!("a young unreadable claim was broken"),
        }
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn a_requeued_slurm_job_breaks_its_own_claim_only() {
        let (p, d) = scratch("requeue");
        // This process is alive: only the job id can make it stale.
        let mut old = ClaimInfo::mine(0, Some("slurm-7_3".into()), budget());
        old.host = "node-elsewhere".into();
        create_excl(&d, "1.claim", &serde_json::to_vec(&old).unwrap()).unwrap();
        let mut broke = Vec::new();
        let other = ClaimInfo::mine(0, Some("slurm-7_4".into()), budget());
        assert!(matches!(
            Claim::acquire(&d, "1.claim", other, &mut broke).unwrap(),
            Acquired::Held(_)
        ));
        let again = ClaimInfo::mine(0, Some("slurm-7_3".into()), budget());
        assert!(matches!(
            Claim::acquire(&d, "1.claim", again, &mut broke).unwrap(),
            Acquired::Mine(_)
        ));
        assert!(broke[0].contains("same Slurm job slurm-7_3"), "{broke:?}");
        // Local job ids never count as the same job.
        let mut local = ClaimInfo::mine(0, Some("local-1".into()), budget());
        local.host = "node-elsewhere".into();
        create_excl(&d, "2.claim", &serde_json::to_vec(&local).unwrap()).unwrap();
        let mine = ClaimInfo::mine(0, Some("local-1".into()), budget());
        assert!(matches!(
            Claim::acquire(&d, "2.claim", mine, &mut broke).unwrap(),
            Acquired::Held(_)
        ));
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn start_ticks_reads_past_odd_command_names() {
        assert!(start_ticks(std::process::id() as i32).is_some());
        assert_eq!(start_ticks(-1), None);
    }
}
