//! What the host's cgroup filesystem looks like, and which part of it the
//! current user may use for per-sandbox cgroups.
//!
//! cbrun never writes outside one base directory per hierarchy:
//! `/cbrun` when running as real root, `/cbrun/u<UID>` for a user that root
//! delegated it to (`cbrun admin delegate-cgroups`).

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Root of the cgroup filesystem tree.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// v1 controllers that libcontainer attaches every container to when their
/// hierarchy is mounted. A base must be writable in all mounted ones, or
/// libcontainer's build fails.
pub const V1_CONTROLLERS: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "devices",
    "hugetlb",
    "memory",
    "pids",
    "perf_event",
    "blkio",
    "net_prio",
    "net_cls",
    "freezer",
];

/// The controllers whose limits cbrun enforces.
pub const LIMIT_CONTROLLERS: &[&str] = &["memory", "pids", "cpu"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// cgroup2 only, mounted at /sys/fs/cgroup.
    Unified,
    /// v1 controllers plus a controller-less (or nearly) cgroup2 at
    /// /sys/fs/cgroup/unified.
    Hybrid,
    /// v1 only.
    Legacy,
    /// No cgroup filesystem mounted at all.
    Absent,
}

/// One mounted v1 hierarchy.
#[derive(Debug, Clone, serde::Serialize)]
pub struct V1Hierarchy {
    pub mount: PathBuf,
    pub controllers: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CgroupHost {
    pub layout: Layout,
    /// v1 hierarchies that libcontainer will use (named ones like
    /// `name=systemd` are left out).
    pub v1: Vec<V1Hierarchy>,
    /// Mount point of the cgroup2 tree, if any.
    pub unified: Option<PathBuf>,
}

impl CgroupHost {
    /// Read the layout from /proc/self/mountinfo.
    pub fn detect() -> io::Result<Self> {
        let info = fs::read_to_string("/proc/self/mountinfo")?;
        Ok(Self::from_mountinfo(&info))
    }

    pub fn from_mountinfo(info: &str) -> Self {
        let mut v1 = Vec::new();
        let mut unified = None;
        for line in info.lines() {
            // Fields: id parent maj:min root mountpoint opts [optional...] - fstype source superopts
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let mount = match left.split(' ').nth(4) {
                Some(m) => PathBuf::from(unescape_mountinfo(m)),
                None => continue,
            };
            let mut r = right.split(' ');
            let fstype = r.next().unwrap_or("");
            let _source = r.next();
            let superopts = r.next().unwrap_or("");
            match fstype {
                "cgroup2" if mount.starts_with(CGROUP_ROOT) => {
                    unified.get_or_insert(mount);
                }
                "cgroup" if mount.starts_with(CGROUP_ROOT) => {
                    let controllers: Vec<String> = superopts
                        .split(',')
                        .filter(|o| V1_CONTROLLERS.contains(o))
                        .map(str::to_owned)
                        .collect();
                    if !controllers.is_empty() && !v1.iter().any(|h: &V1Hierarchy| h.mount == mount)
                    {
                        v1.push(V1Hierarchy { mount, controllers });
                    }
                }
                _ => {}
            }
        }
        let layout = match (&unified, v1.is_empty()) {
            (Some(u), true) if u == Path::new(CGROUP_ROOT) => Layout::Unified,
            (Some(_), true) => Layout::Unified,
            (Some(_), false) => Layout::Hybrid,
            (None, false) => Layout::Legacy,
            (None, true) => Layout::Absent,
        };
        CgroupHost {
            layout,
            v1,
            unified,
        }
    }

    /// True when the limits live in v1 hierarchies (legacy or hybrid).
    pub fn uses_v1(&self) -> bool {
        matches!(self.layout, Layout::Legacy | Layout::Hybrid)
    }

    /// The v1 hierarchy mount holding `controller`.
    pub fn v1_mount(&self, controller: &str) -> Option<&Path> {
        self.v1
            .iter()
            .find(|h| h.controllers.iter().any(|c| c == controller))
            .map(|h| h.mount.as_path())
    }

    /// Controllers the cgroup2 tree offers at its root.
    pub fn v2_controllers(&self) -> Vec<String> {
        let Some(u) = &self.unified else {
            return Vec::new();
        };
        fs::read_to_string(u.join("cgroup.controllers"))
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Directories (one per hierarchy cbrun uses) that make up `rel`.
    pub fn dirs_for(&self, rel: &Path) -> Vec<PathBuf> {
        let rel = rel.strip_prefix("/").unwrap_or(rel);
        if self.uses_v1() {
            self.v1.iter().map(|h| h.mount.join(rel)).collect()
        } else if let Some(u) = &self.unified {
            vec![u.join(rel)]
        } else {
            Vec::new()
        }
    }
}

/// `/cbrun` for real root, `/cbrun/u<UID>` for everybody else.
pub fn base_for_uid(uid: u32) -> PathBuf {
    if uid == 0 {
        PathBuf::from("/cbrun")
    } else {
        PathBuf::from(format!("/cbrun/u{uid}"))
    }
}

/// Whether the current user can create per-sandbox cgroups under its base,
/// and if not, why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Delegation {
    /// Base path relative to each hierarchy root.
    pub base: PathBuf,
    /// True when every hierarchy libcontainer will touch accepts a new
    /// child cgroup under `base`.
    pub usable: bool,
    /// Limit controllers that are available under `base`.
    pub controllers: Vec<String>,
    /// Hierarchies or controllers that block use, with the reason.
    pub problems: Vec<String>,
}

impl Delegation {
    pub fn probe(host: &CgroupHost, uid: u32) -> Self {
        let base = base_for_uid(uid);
        let mut problems = Vec::new();
        let mut controllers = Vec::new();
        match host.layout {
            Layout::Absent => problems.push("no cgroup filesystem is mounted".to_owned()),
            Layout::Legacy | Layout::Hybrid => {
                // Only the hierarchies a limit lives in: cbrun makes no
                // cgroup in the others.
                let used = host.v1.iter().filter(|h| {
                    h.controllers
                        .iter()
                        .any(|c| LIMIT_CONTROLLERS.contains(&c.as_str()))
                });
                for h in used {
                    let dir = h.mount.join(base.strip_prefix("/").unwrap_or(&base));
                    if let Err(why) = writable_base(&dir, uid) {
                        problems.push(format!("{}: {why}", dir.display()));
                    }
                }
                for c in LIMIT_CONTROLLERS {
                    if host.v1_mount(c).is_some() {
                        controllers.push((*c).to_owned());
                    } else {
                        problems.push(format!("v1 controller {c} is not mounted"));
                    }
                }
            }
            Layout::Unified => {
                let root = host.unified.clone().unwrap_or_else(|| CGROUP_ROOT.into());
                let dir = root.join(base.strip_prefix("/").unwrap_or(&base));
                if let Err(why) = writable_base(&dir, uid) {
                    problems.push(format!("{}: {why}", dir.display()));
                }
                let enabled = if dir.exists() {
                    fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default()
                } else {
                    // root creates it on demand; the parent says what it may enable
                    String::from_iter(host.v2_controllers().iter().map(|c| format!("{c} ")))
                };
                for c in LIMIT_CONTROLLERS {
                    if enabled.split_whitespace().any(|e| e == *c) {
                        controllers.push((*c).to_owned());
                    } else {
                        problems.push(format!(
                            "cgroup2 controller {c} is not enabled for {}",
                            dir.display()
                        ));
                    }
                }
            }
        }
        let usable = !matches!(host.layout, Layout::Absent)
            && problems.iter().all(|p| p.contains("controller"));
        Delegation {
            base,
            usable,
            controllers,
            problems,
        }
    }
}

/// Root may create the base on demand; anybody else needs it to exist and be
/// owned (delegated) by them.
fn writable_base(dir: &Path, uid: u32) -> Result<(), String> {
    if uid == 0 {
        // Root can create it; check the parent hierarchy is writable (not a
        // read-only bind of /sys/fs/cgroup in a container).
        let mut probe = dir.to_path_buf();
        while !probe.exists() {
            if !probe.pop() {
                return Err("hierarchy root missing".into());
            }
        }
        return if nix::unistd::access(&probe, nix::unistd::AccessFlags::W_OK).is_ok() {
            Ok(())
        } else {
            Err("not writable (read-only cgroup mount?)".into())
        };
    }
    match fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err("not delegated (run `cbrun admin delegate-cgroups --user <name>` as root)".into())
        }
        Err(e) => Err(e.to_string()),
        Ok(m) if m.uid() != uid => Err(format!("owned by uid {}, not {uid}", m.uid())),
        Ok(_) => {
            if nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok() {
                Ok(())
            } else {
                Err("not writable".into())
            }
        }
    }
}

/// Undo mountinfo's octal escapes (`\040` for a space, ...).
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            if let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("x"), 8)
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
30 1 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
33 30 0:29 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
34 30 0:30 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
35 30 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn hybrid_layout_is_detected() {
        let h = CgroupHost::from_mountinfo(HYBRID);
        assert_eq!(h.layout, Layout::Hybrid);
        assert_eq!(h.v1.len(), 3, "named hierarchies are skipped: {:?}", h.v1);
        assert_eq!(
            h.v1_mount("memory"),
            Some(Path::new("/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            h.unified.as_deref(),
            Some(Path::new("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            h.dirs_for(Path::new("/cbrun/x")),
            vec![
                PathBuf::from("/sys/fs/cgroup/cpu/cbrun/x"),
                PathBuf::from("/sys/fs/cgroup/memory/cbrun/x"),
                PathBuf::from("/sys/fs/cgroup/pids/cbrun/x"),
            ]
        );
    }

    #[test]
    fn unified_and_absent_layouts() {
        let u = CgroupHost::from_mountinfo(
            "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        assert_eq!(u.layout, Layout::Unified);
        let a = CgroupHost::from_mountinfo("22 1 0:5 / / rw - ext4 /dev/vda rw\n");
        assert_eq!(a.layout, Layout::Absent);
    }

    #[test]
    fn bases_are_per_user() {
        assert_eq!(base_for_uid(0), PathBuf::from("/cbrun"));
        assert_eq!(base_for_uid(1000), PathBuf::from("/cbrun/u1000"));
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo("/a\\040b"), "/a b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
    }
}
