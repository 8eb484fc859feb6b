//! One sandbox's cgroup, managed by cbrun itself (libcontainer is given a
//! private scratch view, see `cgroupfs_shim`): only the hierarchies that
//! carry limits are touched (memory, pids, cpu on v1; one directory on v2).
//!
//! Every operation goes through directory file descriptors opened before
//! cbrun leaves the host's mount namespace, so the real cgroup tree stays
//! reachable after the scratch view hides it.
//!
//! Sequence: `create` -> `join_self` (cbrun moves in, so the sandbox's
//! processes are born inside; nothing needs migrating later, whatever uid
//! they end up with) -> libcontainer builds the sandbox -> `leave_self`
//! -> `apply` limits -> `readback` -> run -> `usage` -> `kill_all` ->
//! `remove`.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::config::Limits;
use super::state::RunId;
use crate::host::cgroup::{CgroupHost, Layout, LIMIT_CONTROLLERS};
use crate::sys::at;
use crate::sys::proc::PidFd;

/// Limits as the kernel reports them after they were written.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Readback {
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
    pub cpus: Option<f64>,
}

/// What the sandbox used, read just before teardown.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Usage {
    pub peak_memory_bytes: Option<u64>,
    pub oom_kills: u64,
    pub pids_limit_hits: u64,
}

/// Every run id (and so every sandbox cgroup name) starts with this.
pub const RUN_ID_PREFIX: &str = "cb";

/// Where an unprivileged cbrun waits outside its sandbox's cgroup.
pub const PARKING: &str = "parking";

/// One hierarchy cbrun uses: its controllers, the base directory sandboxes
/// are made in, and the cgroup cbrun itself sits in (to move back to).
#[derive(Debug)]
struct Hierarchy {
    controllers: Vec<String>,
    mount: PathBuf,
    base: OwnedFd,
    own: Option<OwnedFd>,
}

/// Open handles on the hierarchies, valid for the life of the process.
#[derive(Debug)]
pub struct CgroupRoots {
    v1: bool,
    /// Relative base, e.g. `/cbrun` or `/cbrun/u1000`.
    pub base: PathBuf,
    hier: Vec<Hierarchy>,
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    at::open_path(path, libc::O_RDONLY | libc::O_DIRECTORY)
        .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", path.display())))
}

fn openat(dir: &OwnedFd, name: &str, flags: i32) -> io::Result<File> {
    let cname = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
    at::open_at(dir.as_fd(), &cname, flags, 0).map(File::from)
}

fn read_at(dir: &OwnedFd, name: &str) -> Option<String> {
    // Through `take`: `File`'s own read_to_end asks for the size first (a
    // statx per file, and cgroup files report size 0 anyway).
    let mut buf = Vec::with_capacity(512);
    openat(dir, name, libc::O_RDONLY)
        .ok()?
        .take(1 << 20)
        .read_to_end(&mut buf)
        .ok()?;
    String::from_utf8(buf).ok().map(|s| s.trim().to_owned())
}

fn write_at(dir: &OwnedFd, name: &str, value: &str) -> io::Result<()> {
    openat(dir, name, libc::O_WRONLY)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| io::Error::new(e.kind(), format!("writing {value:?} to {name}: {e}")))
}

/// cbrun's own cgroup path in the hierarchy holding `ctrl` (None: v2),
/// from the text of /proc/self/cgroup.
fn own_cgroup(text: &str, ctrl: Option<&str>) -> Option<PathBuf> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let _id = f.next()?;
        let ctrls = f.next()?;
        let path = f.next()?;
        let hit = match ctrl {
            None => ctrls.is_empty(),
            Some(c) => ctrls.split(',').any(|x| x == c),
        };
        hit.then(|| PathBuf::from(path))
    })
}

impl CgroupRoots {
    /// Open the hierarchies under `base`. Real root creates `base` as
    /// needed; anybody else needs it delegated.
    pub fn open(host: &CgroupHost, base: &Path, is_root: bool) -> io::Result<Self> {
        let rel = base.strip_prefix("/").unwrap_or(base);
        let mut hier: Vec<Hierarchy> = Vec::new();
        let v1 = host.uses_v1();
        let own_text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut targets: Vec<(PathBuf, Vec<String>, Option<PathBuf>)> = Vec::new();
        if v1 {
            for c in LIMIT_CONTROLLERS {
                let Some(h) = host
                    .v1
                    .iter()
                    .find(|h| h.controllers.iter().any(|x| x == c))
                else {
                    continue;
                };
                if targets.iter().any(|(m, _, _)| *m == h.mount) {
                    continue;
                }
                targets.push((
                    h.mount.clone(),
                    h.controllers.clone(),
                    own_cgroup(&own_text, Some(c)),
                ));
            }
        } else if let (Layout::Unified, Some(u)) = (host.layout, &host.unified) {
            targets.push((
                u.clone(),
                vec!["unified".into()],
                own_cgroup(&own_text, None),
            ));
        }
        for (mount, controllers, own) in targets {
            let dir = mount.join(rel);
            if is_root && !dir.exists() {
                std::fs::create_dir_all(&dir)?;
            }
            let base_fd = open_dir(&dir)?;
            let own = if is_root {
                own.and_then(|o| open_dir(&mount.join(o.strip_prefix("/").unwrap_or(&o))).ok())
            } else {
                // A user may not move itself back to where it came from (a
                // root-owned cgroup); it steps out into a parking cgroup of
                // its own delegated base instead.
                let park = dir.join(PARKING);
                match std::fs::create_dir(&park) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
                Some(open_dir(&park)?)
            };
            hier.push(Hierarchy {
                controllers,
                mount,
                base: base_fd,
                own,
            });
        }
        Ok(CgroupRoots {
            v1,
            base: base.to_path_buf(),
            hier,
        })
    }

    /// Make a fresh cgroup named `name` in every hierarchy carrying one of
    /// `controllers` (v1; a cgroup2 tree has one hierarchy for all). A v1
    /// cgroup costs a directory of control files to make and remove, so
    /// hierarchies no limit needs are left out.
    pub fn create(&self, name: &RunId, controllers: &[&str]) -> io::Result<SandboxCgroup> {
        let mut dirs = Vec::new();
        let cname = CString::new(name.as_str())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
        for (index, hierarchy) in self.hier.iter().enumerate() {
            if self.v1
                && !hierarchy
                    .controllers
                    .iter()
                    .any(|c| controllers.contains(&c.as_str()))
            {
                continue;
            }
            if let Err(e) = at::mkdir_at(hierarchy.base.as_fd(), &cname, 0o755) {
                let cg = SandboxCgroup {
                    v1: self.v1,
                    name: name.to_string(),
                    dirs,
                };
                let _ = cg.remove(self);
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "creating cgroup {}: {e}",
                        hierarchy.mount.join(self.rel()).join(name).display()
                    ),
                ));
            }
            let fd = openat(&hierarchy.base, name, libc::O_RDONLY | libc::O_DIRECTORY)?;
            dirs.push((index, OwnedFd::from(fd)));
        }
        Ok(SandboxCgroup {
            v1: self.v1,
            name: name.to_string(),
            dirs,
        })
    }

    /// Reopen an existing cgroup (for gc); missing hierarchies are skipped.
    /// Only a [`RunId`] names one: a single path component under the base,
    /// never `..` or an absolute path, which `openat` would follow out of it.
    pub fn existing(&self, name: &RunId) -> SandboxCgroup {
        let dirs = self
            .hier
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                openat(
                    &h.base,
                    name,
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                )
                .ok()
                .map(|f| (i, OwnedFd::from(f)))
            })
            .collect();
        SandboxCgroup {
            v1: self.v1,
            name: name.to_string(),
            dirs,
        }
    }

    /// Names of the sandbox cgroups present under the base, in any
    /// hierarchy (for gc to find those whose run is gone).
    pub fn sandbox_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for h in &self.hier {
            // Through the descriptor: the path may be hidden from this
            // process's mount namespace.
            let Ok(rd) = std::fs::read_dir(format!("/proc/self/fd/{}", h.base.as_raw_fd())) else {
                continue;
            };
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with(RUN_ID_PREFIX)
                    && e.file_type().map(|t| t.is_dir()).unwrap_or(false)
                {
                    names.push(n);
                }
            }
        }
        names.sort();
        names.dedup();
        names
    }

    fn rel(&self) -> &Path {
        self.base.strip_prefix("/").unwrap_or(&self.base)
    }

    /// Controllers the opened hierarchies carry.
    pub fn controllers(&self) -> Vec<String> {
        if self.v1 {
            self.hier
                .iter()
                .flat_map(|h| h.controllers.iter().cloned())
                .collect()
        } else {
            self.hier
                .first()
                .and_then(|h| read_at(&h.base, "cgroup.subtree_control"))
                .map(|s| s.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default()
        }
    }

    /// Move cbrun back out of the sandbox's cgroup: to where it came from
    /// (root) or to the parking cgroup (a delegated user).
    pub fn leave_self(&self) -> io::Result<()> {
        let me = std::process::id().to_string();
        for h in &self.hier {
            if let Some(own) = &h.own {
                write_at(own, "cgroup.procs", &me)?;
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct SandboxCgroup {
    v1: bool,
    pub name: String,
    /// (index into roots.hier, directory fd)
    dirs: Vec<(usize, OwnedFd)>,
}

impl SandboxCgroup {
    /// Whether any of its directories is still there.
    pub fn exists(&self) -> bool {
        !self.dirs.is_empty()
    }

    /// Move cbrun itself in; children it forks from now on are born inside.
    pub fn join_self(&self) -> io::Result<()> {
        let me = std::process::id().to_string();
        for (_, d) in &self.dirs {
            write_at(d, "cgroup.procs", &me)?;
        }
        Ok(())
    }

    fn dir(&self, roots: &CgroupRoots, ctrl: &str) -> Option<&OwnedFd> {
        self.dirs
            .iter()
            .find(|(i, _)| !self.v1 || roots.hier[*i].controllers.iter().any(|c| c == ctrl))
            .map(|(_, d)| d)
    }

    /// Write the requested limits. Memory is capped with swap included.
    pub fn apply(&self, roots: &CgroupRoots, l: &Limits) -> io::Result<()> {
        if let Some(m) = l.memory {
            let d = self
                .dir(roots, "memory")
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no memory controller"))?;
            if self.v1 {
                write_at(d, "memory.limit_in_bytes", &m.0.to_string())?;
                // Absent when swap accounting is off; then there is no swap to cap.
                let _ = write_at(d, "memory.memsw.limit_in_bytes", &m.0.to_string());
            } else {
                write_at(d, "memory.max", &m.0.to_string())?;
                let _ = write_at(d, "memory.swap.max", "0");
            }
        }
        if let Some(p) = l.pids {
            let d = self
                .dir(roots, "pids")
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no pids controller"))?;
            write_at(d, "pids.max", &p.to_string())?;
        }
        if let Some(c) = l.cpus {
            let d = self
                .dir(roots, "cpu")
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no cpu controller"))?;
            let period: u64 = 100_000;
            let quota = (c.0 * period as f64).round() as u64;
            if self.v1 {
                write_at(d, "cpu.cfs_period_us", &period.to_string())?;
                write_at(d, "cpu.cfs_quota_us", &quota.to_string())?;
            } else {
                write_at(d, "cpu.max", &format!("{quota} {period}"))?;
            }
        }
        Ok(())
    }

    fn read(&self, roots: &CgroupRoots, ctrl: &str, file: &str) -> Option<String> {
        read_at(self.dir(roots, ctrl)?, file)
    }

    pub fn readback(&self, roots: &CgroupRoots) -> Readback {
        let memory_bytes = if self.v1 {
            // v1 reports "no limit" as a huge page-rounded number.
            self.read(roots, "memory", "memory.limit_in_bytes")
                .and_then(|s| s.parse::<u64>().ok())
                .filter(|v| *v < (1u64 << 62))
        } else {
            self.read(roots, "memory", "memory.max")
                .and_then(|s| s.parse().ok())
        };
        let pids = self
            .read(roots, "pids", "pids.max")
            .and_then(|s| s.parse().ok());
        let cpus = if self.v1 {
            let q: Option<i64> = self
                .read(roots, "cpu", "cpu.cfs_quota_us")
                .and_then(|s| s.parse().ok());
            let p: Option<i64> = self
                .read(roots, "cpu", "cpu.cfs_period_us")
                .and_then(|s| s.parse().ok());
            match (q, p) {
                (Some(q), Some(p)) if q > 0 && p > 0 => Some(q as f64 / p as f64),
                _ => None,
            }
        } else {
            self.read(roots, "cpu", "cpu.max").and_then(|s| {
                let mut it = s.split_whitespace();
                let q: f64 = it.next()?.parse().ok()?;
                let p: f64 = it.next()?.parse().ok()?;
                Some(q / p)
            })
        };
        Readback {
            memory_bytes,
            pids,
            cpus,
        }
    }

    pub fn usage(&self, roots: &CgroupRoots) -> Usage {
        let peak_memory_bytes = if self.v1 {
            self.read(roots, "memory", "memory.max_usage_in_bytes")
        } else {
            self.read(roots, "memory", "memory.peak")
        }
        .and_then(|s| s.parse().ok());
        let oom_kills = if self.v1 {
            self.read(roots, "memory", "memory.oom_control")
        } else {
            self.read(roots, "memory", "memory.events")
        }
        .and_then(|s| keyed(&s, "oom_kill"))
        .unwrap_or(0);
        let pids_limit_hits = self
            .read(roots, "pids", "pids.events")
            .and_then(|s| keyed(&s, "max"))
            .unwrap_or(0);
        Usage {
            peak_memory_bytes,
            oom_kills,
            pids_limit_hits,
        }
    }

    /// Host pids of every process in the cgroup.
    pub fn procs(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = Vec::new();
        for (_, d) in &self.dirs {
            if let Some(s) = read_at(d, "cgroup.procs") {
                pids.extend(s.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Send `sig` to every process in the cgroup; returns how many.
    ///
    /// A pid read from `cgroup.procs` may exit and be reused by a process
    /// outside before the signal is sent. So each is pinned with a pidfd,
    /// the list is read again, and only pids still listed are signalled,
    /// through their pidfd: a pidfd opened before the second read that
    /// still names a live process names the one listed. Pids are pinned a
    /// batch at a time, so a fork bomb cannot exhaust cbrun's descriptors.
    pub fn signal_all(&self, sig: nix::sys::signal::Signal) -> usize {
        const BATCH: usize = 256;
        let me = std::process::id() as i32;
        let pids: Vec<i32> = self.procs().into_iter().filter(|p| *p != me).collect();
        let mut sent = 0;
        for batch in pids.chunks(BATCH) {
            let mut pinned: Vec<(i32, PidFd)> = Vec::with_capacity(batch.len());
            let mut unpinned: Vec<i32> = Vec::new();
            for &p in batch {
                match PidFd::open(p) {
                    Ok(fd) => pinned.push((p, fd)),
                    // No pidfds (before Linux 5.3) or no descriptor left:
                    // plain kill, racy as it always was.
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::ENOSYS | libc::EMFILE | libc::ENFILE)
                        ) =>
                    {
                        unpinned.push(p)
                    }
                    // Gone already.
                    Err(_) => {}
                }
            }
            if pinned.is_empty() && unpinned.is_empty() {
                continue;
            }
            let still = self.procs();
            sent += pinned
                .iter()
                .filter(|(p, _)| still.binary_search(p).is_ok())
                .filter(|(_, fd)| fd.signal(sig).is_ok())
                .count();
            sent += unpinned
                .iter()
                .filter(|p| still.binary_search(p).is_ok())
                .filter(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(**p), sig).is_ok())
                .count();
        }
        sent
    }

    /// SIGKILL everything until the cgroup is empty (bounded).
    pub fn kill_all(&self) -> usize {
        let mut total = 0;
        for round in 0..100 {
            let n = self.signal_all(nix::sys::signal::SIGKILL);
            total += n;
            if n == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(if round < 5 { 1 } else { 10 }));
        }
        total
    }

    /// rmdir in every hierarchy; returns how many were removed. A cgroup
    /// whose killed tasks are still exiting answers EBUSY for a moment.
    pub fn remove(&self, roots: &CgroupRoots) -> io::Result<usize> {
        let cname = CString::new(self.name.as_str())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL"))?;
        let mut removed = 0;
        for (index, _) in &self.dirs {
            let hierarchy = &roots.hier[*index];
            let mut tries = 0;
            loop {
                let Err(e) = at::unlink_at(hierarchy.base.as_fd(), &cname, libc::AT_REMOVEDIR)
                else {
                    removed += 1;
                    break;
                };
                match e.raw_os_error() {
                    Some(libc::ENOENT) => break,
                    Some(libc::EBUSY) if tries < 300 => {
                        tries += 1;
                        if tries % 10 == 0 {
                            self.kill_all();
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    _ => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!(
                                "removing cgroup {}: {e}",
                                hierarchy.mount.join(roots.rel()).join(&self.name).display()
                            ),
                        ))
                    }
                }
            }
        }
        Ok(removed)
    }
}

/// Value of `key N` in a flat-keyed cgroup file.
fn keyed(s: &str, key: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next()? == key).then(|| it.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_values() {
        let oc = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed(oc, "oom_kill"), Some(3));
        assert_eq!(keyed("max 0\n", "max"), Some(0));
        assert_eq!(keyed("low 1\n", "max"), None);
    }
}
