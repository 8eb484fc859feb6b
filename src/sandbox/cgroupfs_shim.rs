//! libcontainer's cgroup handling, kept out of the way.
//!
//! libcontainer always attaches a container to cgroups: on v1 it creates a
//! directory in every mounted hierarchy (a dozen here, each found through a
//! fresh procfs handle and a full mountinfo parse), fails outright when it
//! cannot (a user without delegation), and on a failed build kills every
//! pid listed in them. cbrun manages the sandbox's cgroup itself
//! (`cgroups.rs`), so libcontainer gets a private view instead, in a mount
//! namespace of cbrun's own (as real root a plain one, otherwise inside a
//! user namespace of its own):
//!
//! - where the host has a cgroup2 tree (unified or hybrid), a read-only bind
//!   of it over /sys/fs/cgroup, with /dev/null bound over its `cgroup.procs`
//!   (and `cgroup.kill`). libcontainer then takes its cheap v2 path, is given
//!   the tree's root as the container's cgroup, "joins" it by writing a pid
//!   to /dev/null, and after a failed build kills whatever /dev/null lists:
//!   nothing. Nothing to do per run;
//! - otherwise, as real root, the cgroup mounts are detached and an empty
//!   tmpfs is left at /sys/fs/cgroup, so libcontainer finds no hierarchy;
//! - otherwise (rootless, v1 only) a tmpfs over /sys/fs/cgroup (inherited
//!   mounts are locked and cannot be detached) holds per run just the files
//!   libcontainer writes to.
//!
//! Nothing here is visible on the host; it goes away with cbrun.

use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::statvfs::{statvfs, FsFlags};

use crate::host::cgroup::{CgroupHost, CGROUP_ROOT};

#[derive(Debug, thiserror::Error)]
#[error("setting up a private cgroup view ({step})")]
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

/// What libcontainer sees at /sys/fs/cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The host's cgroup2 tree, read-only, its process lists /dev/null.
    Cgroup2,
    /// Hierarchies detached: libcontainer sees none (real root, v1 only).
    Detached,
    /// Scratch files over the locked hierarchies (rootless, v1 only).
    Scratch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShimKind {
    pub view: View,
    /// cbrun entered a user namespace of its own (it was not real root) and
    /// is now its uid 0.
    pub own_userns: bool,
}

impl ShimKind {
    /// The cgroups path libcontainer is given for run `id`.
    pub fn libcontainer_path(&self, id: &str) -> PathBuf {
        match self.view {
            // The root of the bound tree exists, so libcontainer creates
            // nothing and only writes to the /dev/null over cgroup.procs.
            View::Cgroup2 => PathBuf::from("/"),
            View::Detached | View::Scratch => PathBuf::from("/cbrun").join(id),
        }
    }
}

/// The outcome of the one attempt: the failed step and its cause.
static ENTERED: OnceLock<Result<ShimKind, (&'static str, io::ErrorKind, String)>> = OnceLock::new();

/// Enter the private view once per process. Must run while cbrun is
/// single-threaded. After this, cbrun is uid 0 of its own user namespace
/// when it was not real root. A failure is remembered and repeated as is.
pub fn ensure(host: &CgroupHost) -> Result<ShimKind, ShimError> {
    ENTERED
        .get_or_init(|| enter(host).map_err(|e| (e.step, e.source.kind(), e.source.to_string())))
        .clone()
        .map_err(|(step, kind, msg)| ShimError {
            step,
            source: io::Error::new(kind, msg),
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
    let own_userns = !real_root;
    // Any failure of the cgroup2 view falls back to the tmpfs views, which
    // work everywhere (only slower).
    if let Some(tree) = &host.unified {
        if cgroup2_view(tree, real_root).is_ok() {
            return Ok(ShimKind {
                view: View::Cgroup2,
                own_userns,
            });
        }
    }
    let view = if real_root {
        let mut points: Vec<&Path> = host.v1.iter().map(|h| h.mount.as_path()).collect();
        if let Some(u) = &host.unified {
            points.push(u);
        }
        for p in points {
            let _ = umount2(p, MntFlags::MNT_DETACH);
        }
        // /sys/fs/cgroup itself (tmpfs on v1, cgroup2 on unified hosts).
        let _ = umount2(CGROUP_ROOT, MntFlags::MNT_DETACH);
        View::Detached
    } else {
        View::Scratch
    };
    mount::<str, str, str, str>(
        Some("cbrun-cgroup-view"),
        CGROUP_ROOT,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=755,size=1m"),
    )
    .map_err(ne("mount scratch tmpfs"))?;
    Ok(ShimKind { view, own_userns })
}

/// Bind the cgroup2 tree mounted at `tree` read-only over /sys/fs/cgroup,
/// with /dev/null over the files libcontainer writes pids to or reads pids
/// (to kill) from. Undone on failure.
///
/// With `replace` (real root, whose mounts are not locked) everything at
/// /sys/fs/cgroup goes first: the v1 hierarchies would otherwise be copied
/// into, and torn down with, every sandbox's mount namespace and cbrun's.
fn cgroup2_view(tree: &Path, replace: bool) -> Result<(), ShimError> {
    // A remount may not drop flags the inherited mount has locked (nosuid,
    // nodev, noexec, the atime mode): carry them all over.
    let st = statvfs(tree).map_err(ne("statvfs cgroup2 tree"))?;
    let mut keep = MsFlags::empty();
    for (f, m) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        // ST_RELATIME (0x1000; nix names it for glibc only).
        (FsFlags::from_bits_retain(0x1000), MsFlags::MS_RELATIME),
    ] {
        if st.flags().contains(f) {
            keep |= m;
        }
    }
    if !(replace && replace_with_clone(tree)) {
        mount::<Path, str, str, str>(Some(tree), CGROUP_ROOT, None, MsFlags::MS_BIND, None)
            .map_err(ne("bind cgroup2 tree"))?;
    }
    let rest = (|| {
        mount::<str, str, str, str>(
            None,
            CGROUP_ROOT,
            None,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | keep,
            None,
        )
        .map_err(ne("cgroup2 tree read-only"))?;
        // cgroup.procs must be there (libcontainer writes to it);
        // cgroup.kill only exists below a tree's root.
        for (f, required) in [("cgroup.procs", true), ("cgroup.kill", false)] {
            let p = Path::new(CGROUP_ROOT).join(f);
            if p.exists() {
                mount::<str, Path, str, str>(Some("/dev/null"), &p, None, MsFlags::MS_BIND, None)
                    .map_err(ne("/dev/null over a cgroup2 file"))?;
            } else if required {
                return Err(se("cgroup2 tree")(io::Error::other("no cgroup.procs")));
            }
        }
        Ok(())
    })();
    if rest.is_err() {
        // Takes the /dev/null binds on top of it along.
        let _ = umount2(CGROUP_ROOT, MntFlags::MNT_DETACH);
    }
    rest
}

/// Lay out the scratch files libcontainer will touch for cgroup `rel`.
pub fn prepare_run(host: &CgroupHost, kind: ShimKind, rel: &Path) -> Result<(), ShimError> {
    if kind.view != View::Scratch {
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
    if kind.view != View::Scratch {
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

/// Detach /sys/fs/cgroup with everything under it and put a clone of the
/// cgroup2 mount at `tree` in its place. False (and nothing changed, or
/// only the detach done) when the kernel lacks the new mount API.
fn replace_with_clone(tree: &Path) -> bool {
    let Ok(fd) = crate::sys::mount::clone_tree_at(tree) else {
        return false;
    };
    // One detach of the whole subtree: one RCU grace period, not one per
    // hierarchy.
    let _ = umount2(CGROUP_ROOT, MntFlags::MNT_DETACH);
    crate::sys::mount::attach_at(fd.as_fd(), Path::new(CGROUP_ROOT)).is_ok()
}
