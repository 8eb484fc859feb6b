//! libcontainer's cgroup handling, kept out of the way.
//!
//! libcontainer always attaches a container to cgroups: on v1 it creates a
//! directory in every mounted hierarchy (a dozen here), fails outright when
//! it cannot (a user without delegation), and on a failed build kills every
//! pid listed in them. cbrun manages the sandbox's cgroup itself
//! (`cgroups.rs`), so libcontainer gets a private view instead:
//!
//! - as real root, cbrun enters its own mount namespace, detaches the
//!   cgroup mounts there and leaves an empty tmpfs at /sys/fs/cgroup, so
//!   libcontainer finds no hierarchy and does nothing;
//! - otherwise, inside its own user namespace, cbrun lays a tmpfs over
//!   /sys/fs/cgroup (inherited mounts are locked and cannot be detached)
//!   holding just the files libcontainer writes to.
//!
//! Nothing here is visible on the host; it goes away with cbrun.

use std::fs;
use std::io;
use std::path::Path;
use std::sync::OnceLock;

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};

use crate::host::cgroup::{CgroupHost, CGROUP_ROOT};

#[derive(Debug, thiserror::Error)]
#[error("setting up a private cgroup view ({step}): {source}")]
pub struct ShimError {
    step: &'static str,
    source: io::Error,
}

fn se(step: &'static str) -> impl FnOnce(io::Error) -> ShimError {
    move |source| ShimError { step, source }
}

fn ne(step: &'static str) -> impl FnOnce(nix::Error) -> ShimError {
    move |e| ShimError {
        step,
        source: io::Error::from(e),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShimKind {
    /// Hierarchies detached: libcontainer sees none.
    Detached,
    /// Scratch files over the locked hierarchies (rootless).
    Overlay,
}

static ENTERED: OnceLock<Result<ShimKind, String>> = OnceLock::new();

/// Enter the private view once per process. Must run while cbrun is
/// single-threaded. After this, cbrun is uid 0 of its own user namespace
/// when it was not real root.
pub fn ensure(host: &CgroupHost) -> Result<ShimKind, ShimError> {
    ENTERED
        .get_or_init(|| enter(host).map_err(|e| e.to_string()))
        .clone()
        .map_err(|m| ShimError {
            step: "earlier attempt",
            source: io::Error::other(m),
        })
}

fn enter(host: &CgroupHost) -> Result<ShimKind, ShimError> {
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    let real_root = crate::host::userns::is_real_root();
    if real_root {
        unshare(CloneFlags::CLONE_NEWNS).map_err(ne("unshare mount namespace"))?;
    } else {
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
            .map_err(ne("unshare user+mount namespace"))?;
        fs::write("/proc/self/setgroups", "deny").map_err(se("setgroups deny"))?;
        fs::write("/proc/self/uid_map", format!("0 {uid} 1")).map_err(se("uid_map"))?;
        fs::write("/proc/self/gid_map", format!("0 {gid} 1")).map_err(se("gid_map"))?;
    }
    mount::<str, str, str, str>(None, "/", None, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None)
        .map_err(ne("make / private"))?;
    let kind = if real_root {
        let mut points: Vec<&Path> = host.v1.iter().map(|h| h.mount.as_path()).collect();
        if let Some(u) = &host.unified {
            points.push(u);
        }
        for p in points {
            let _ = umount2(p, MntFlags::MNT_DETACH);
        }
        // /sys/fs/cgroup itself (tmpfs on v1, cgroup2 on unified hosts).
        let _ = umount2(CGROUP_ROOT, MntFlags::MNT_DETACH);
        ShimKind::Detached
    } else {
        ShimKind::Overlay
    };
    mount::<str, str, str, str>(
        Some("cbrun-cgroup-view"),
        CGROUP_ROOT,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=755,size=1m"),
    )
    .map_err(ne("mount scratch tmpfs"))?;
    Ok(kind)
}

/// Lay out the scratch files libcontainer will touch for cgroup `rel`.
pub fn prepare_run(host: &CgroupHost, kind: ShimKind, rel: &Path) -> Result<(), ShimError> {
    if kind == ShimKind::Detached {
        return Ok(());
    }
    let rel = rel.strip_prefix("/").unwrap_or(rel);
    for h in &host.v1 {
        let cpuset = h.controllers.iter().any(|c| c == "cpuset");
        let mut dir = h.mount.clone();
        fs::create_dir_all(&dir).map_err(se("scratch cgroup dir"))?;
        // libcontainer walks cpuset from the hierarchy root down.
        if cpuset {
            fill_cpuset(&dir)?;
        }
        for c in rel.components() {
            dir.push(c);
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(se("scratch cgroup dir")(e)),
            }
            if cpuset {
                fill_cpuset(&dir)?;
            }
        }
        // libcontainer writes its intermediate's pid here and, after a
        // failed build, kills every pid it reads back: a link to /dev/null
        // takes the write and gives nothing back, so a stale (possibly
        // reused) pid can never be killed.
        let procs = dir.join("cgroup.procs");
        match std::os::unix::fs::symlink("/dev/null", &procs) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(se("scratch cgroup.procs")(e)),
        }
    }
    Ok(())
}

/// Drop the scratch files of one run (so nothing stale accumulates when
/// one process runs many sandboxes).
pub fn finish_run(host: &CgroupHost, kind: ShimKind, rel: &Path) {
    if kind == ShimKind::Detached {
        return;
    }
    let rel = rel.strip_prefix("/").unwrap_or(rel);
    for h in &host.v1 {
        let _ = fs::remove_dir_all(h.mount.join(rel));
    }
}

fn fill_cpuset(dir: &Path) -> Result<(), ShimError> {
    for f in ["cpuset.cpus", "cpuset.mems"] {
        let p = dir.join(f);
        if !p.exists() {
            fs::write(&p, "0").map_err(se("scratch cpuset"))?;
        }
    }
    Ok(())
}
