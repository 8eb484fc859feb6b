//! Delegating cgroups (`cbrun admin delegate-cgroups --user NAME
//! [--undo]`): the one root step that lets an unprivileged user's sandboxes
//! get enforced cgroup limits.
//!
//! The user gets `cbrun/u<UID>` (see [`base_for_uid`]) in every hierarchy
//! cbrun uses, owned by them, under a root-owned `cbrun`. The aggregate
//! limit files of `u<UID>` stay root's, so a user can only subdivide what
//! root handed out.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::host::cgroup::{
    base_for_uid, CgroupHost, Delegation, Layout, V1Hierarchy, LIMIT_CONTROLLERS,
};
use crate::host::userns::is_real_root;

/// Directory under each hierarchy root that holds everything cbrun creates.
const TOP: &str = "cbrun";

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("must run as real root (uid 0 outside any user namespace): this changes host cgroup ownership")]
    NotRoot,
    #[error("no such user in /etc/passwd: {0}")]
    NoSuchUser(String),
    #[error("looking up user {user}")]
    Lookup {
        user: String,
        #[source]
        source: nix::Error,
    },
    #[error("refusing to delegate to root: root's sandboxes use /cbrun directly")]
    RootTarget,
    #[error("cannot read the cgroup layout")]
    Detect(#[source] io::Error),
    #[error("no cgroup filesystem is mounted under /sys/fs/cgroup")]
    NoCgroups,
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("child cgroups still exist (running or leftover sandboxes?); remove them first: {}", join_paths(.0))]
    ChildrenRemain(Vec<PathBuf>),
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> AdminError + '_ {
    move |source| AdminError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One line of what [`delegate`] did or found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A change made, or a state found (`created ...`, `already delegated: ...`).
    Done(String),
    /// Worth knowing; changes nothing.
    Note(String),
    /// Something that should work here does not (a controller not offered).
    Warning(String),
}

/// What `cbrun admin delegate-cgroups` was asked to do.
#[derive(Debug, Clone)]
pub struct DelegateOptions {
    /// User name or numeric uid.
    pub user: String,
    /// Remove the user's cgroup directories instead.
    pub undo: bool,
}

/// Delegate (or with `undo`, remove) `cbrun/u<UID>` for the user in every
/// hierarchy, appending each step to `log` (the steps taken before a
/// failure included). Idempotent. Returns the user's directories that now
/// exist (or, for undo, that were removed).
pub fn delegate(opts: &DelegateOptions, log: &mut Vec<Step>) -> Result<Vec<PathBuf>, AdminError> {
    apply(&opts.user, opts.undo, log)
}

/// [`delegate`] without the log.
pub fn delegate_cgroups(user: &str, undo: bool) -> Result<Vec<PathBuf>, AdminError> {
    apply(user, undo, &mut Vec::new())
}

/// A resolved target user.
struct Target {
    name: String,
    uid: u32,
    gid: u32,
}

fn resolve(user: &str) -> Result<Target, AdminError> {
    let lookup_err = |source| AdminError::Lookup {
        user: user.to_owned(),
        source,
    };
    let mut found = nix::unistd::User::from_name(user).map_err(lookup_err)?;
    if found.is_none() {
        if let Ok(uid) = user.parse::<u32>() {
            found = nix::unistd::User::from_uid(uid.into()).map_err(lookup_err)?;
        }
    }
    let u = found.ok_or_else(|| AdminError::NoSuchUser(user.to_owned()))?;
    Ok(Target {
        name: u.name,
        uid: u.uid.as_raw(),
        gid: u.gid.as_raw(),
    })
}

fn apply(user: &str, undo: bool, log: &mut Vec<Step>) -> Result<Vec<PathBuf>, AdminError> {
    if !is_real_root() {
        return Err(AdminError::NotRoot);
    }
    let t = resolve(user)?;
    if t.uid == 0 {
        return Err(AdminError::RootTarget);
    }
    let host = CgroupHost::detect().map_err(AdminError::Detect)?;
    if host.layout == Layout::Absent {
        return Err(AdminError::NoCgroups);
    }
    if undo {
        return undo_all(&host, &t, log);
    }
    let mut dirs = Vec::new();
    match host.layout {
        Layout::Unified => {
            let root = host
                .unified
                .clone()
                .unwrap_or_else(|| crate::host::cgroup::CGROUP_ROOT.into());
            let before = log.len();
            let dir = delegate_v2(&root, &t, log)?;
            note_unchanged(&dir, before, log);
            dirs.push(dir);
        }
        _ => {
            for h in &host.v1 {
                let before = log.len();
                let dir = delegate_v1(h, &t, log)?;
                note_unchanged(&dir, before, log);
                dirs.push(dir);
            }
        }
    }
    // Root's access() passes everywhere, so this mainly confirms ownership
    // and controller availability as the user will see them.
    let d = Delegation::probe(&host, t.uid);
    if d.usable {
        log.push(Step::Done(format!(
            "{} (uid {}) can now create sandbox cgroups under {}; limit controllers: {}",
            t.name,
            t.uid,
            d.base.display(),
            d.controllers.join(" ")
        )));
    }
    for p in &d.problems {
        log.push(Step::Warning(p.clone()));
    }
    Ok(dirs)
}

/// One v1 hierarchy: root-owned `cbrun`, user-owned `cbrun/u<UID>`.
fn delegate_v1(h: &V1Hierarchy, t: &Target, log: &mut Vec<Step>) -> Result<PathBuf, AdminError> {
    let has = |c: &str| h.controllers.iter().any(|x| x == c);
    let top = h.mount.join(TOP);
    ensure_root_dir(&top, log)?;
    if has("cpuset") {
        // A cpuset cgroup with empty cpus/mems accepts no tasks; clone_children
        // makes new children copy them from their parent at creation.
        inherit_cpuset(&h.mount, &top, log)?;
        set_value(&top.join("cgroup.clone_children"), "1", log)?;
    }
    if has("memory") {
        set_use_hierarchy(&top, log)?;
    }
    let dir = top.join(user_dir(t.uid));
    make_dir(&dir, log)?;
    if has("cpuset") {
        inherit_cpuset(&top, &dir, log)?;
        set_value(&dir.join("cgroup.clone_children"), "1", log)?;
    }
    if has("memory") {
        set_use_hierarchy(&dir, log)?;
    }
    chown_all(&dir, &["", "cgroup.procs", "tasks"], t, log)?;
    Ok(dir)
}

/// cgroup2: root-owned `cbrun`, user-owned `cbrun/u<UID>`, with the limit
/// controllers enabled all the way down.
fn delegate_v2(root: &Path, t: &Target, log: &mut Vec<Step>) -> Result<PathBuf, AdminError> {
    enable_controllers(root, log)?;
    let top = root.join(TOP);
    ensure_root_dir(&top, log)?;
    enable_controllers(&top, log)?;
    let dir = top.join(user_dir(t.uid));
    make_dir(&dir, log)?;
    chown_all(
        &dir,
        &[
            "",
            "cgroup.procs",
            "cgroup.subtree_control",
            "cgroup.threads",
        ],
        t,
        log,
    )?;
    enable_controllers(&dir, log)?;
    // cgroup2 lets a user move a process only if it may write cgroup.procs
    // of the common ancestor of source and target.
    log.push(Step::Note(format!(
        "on cgroup2 {} can move only processes that already run under {} (e.g. started by root or a Delegate=yes unit there)",
        t.name,
        dir.display()
    )));
    Ok(dir)
}

/// Say so when a rerun found a hierarchy already set up (idempotence is
/// otherwise silent). The v2 migration note alone is not a change.
fn note_unchanged(dir: &Path, before: usize, log: &mut Vec<Step>) {
    if log[before..].iter().all(|l| matches!(l, Step::Note(_))) {
        log.insert(
            before,
            Step::Done(format!("already delegated: {}", dir.display())),
        );
    }
}

fn user_dir(uid: u32) -> String {
    base_for_uid(uid)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("u{uid}"))
}

/// `--undo`: rmdir the user's dirs (refusing while they have children), then
/// the shared `cbrun` dirs that are left empty.
fn undo_all(
    host: &CgroupHost,
    t: &Target,
    log: &mut Vec<Step>,
) -> Result<Vec<PathBuf>, AdminError> {
    let tops = host.dirs_for(Path::new(TOP));
    let dirs: Vec<PathBuf> = tops
        .iter()
        .map(|p| p.join(user_dir(t.uid)))
        .filter(|d| d.exists())
        .collect();
    // Look everywhere before touching anything so a refusal changes nothing.
    // The parking cgroup (where the user's cbrun waits between steps) is
    // cbrun's own and goes with the delegation when empty.
    let parking = |p: &PathBuf| {
        p.file_name()
            .is_some_and(|n| n == crate::sandbox::cgroups::PARKING)
    };
    let mut children = Vec::new();
    for d in &dirs {
        children.extend(subdirs(d)?.into_iter().filter(|c| !parking(c)));
    }
    if !children.is_empty() {
        return Err(AdminError::ChildrenRemain(children));
    }
    for d in &dirs {
        let park = d.join(crate::sandbox::cgroups::PARKING);
        if park.is_dir() {
            fs::remove_dir(&park).map_err(|e| AdminError::Io {
                path: park.clone(),
                source: io::Error::new(
                    e.kind(),
                    format!("rmdir: {e} (a cbrun of this user is running?)"),
                ),
            })?;
        }
        fs::remove_dir(d).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EBUSY) {
                " (processes still in it)"
            } else {
                ""
            };
            AdminError::Io {
                path: d.clone(),
                source: io::Error::new(e.kind(), format!("rmdir: {e}{hint}")),
            }
        })?;
        log.push(Step::Done(format!("removed {}", d.display())));
    }
    if dirs.is_empty() {
        log.push(Step::Done(format!(
            "nothing to undo: no cgroups delegated to {} (uid {})",
            t.name, t.uid
        )));
    }
    for top in tops.iter().filter(|p| p.is_dir()) {
        // Other users' dirs or root's sandboxes keep the shared dir alive;
        // a sandbox racing us to create one just makes rmdir fail harmlessly.
        if subdirs(top)?.is_empty() && fs::remove_dir(top).is_ok() {
            log.push(Step::Done(format!("removed {} (now empty)", top.display())));
        }
    }
    Ok(dirs)
}

fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, AdminError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        if entry.file_type().map_err(io_err(dir))?.is_dir() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// mkdir if missing; logs only what changed.
fn make_dir(dir: &Path, log: &mut Vec<Step>) -> Result<(), AdminError> {
    match fs::create_dir(dir) {
        Ok(()) => log.push(Step::Done(format!("created {}", dir.display()))),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(dir)(e)),
    }
    let meta = fs::metadata(dir).map_err(io_err(dir))?;
    if meta.mode() & 0o7777 != 0o755 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).map_err(io_err(dir))?;
        log.push(Step::Done(format!("chmod 0755 {}", dir.display())));
    }
    Ok(())
}

/// The shared `cbrun` dir must stay root's: whoever owns it could tamper
/// with every user's delegated subtree.
fn ensure_root_dir(dir: &Path, log: &mut Vec<Step>) -> Result<(), AdminError> {
    make_dir(dir, log)?;
    let meta = fs::metadata(dir).map_err(io_err(dir))?;
    if meta.uid() != 0 || meta.gid() != 0 {
        std::os::unix::fs::chown(dir, Some(0), Some(0)).map_err(io_err(dir))?;
        log.push(Step::Done(format!(
            "chown root:root {} (was {}:{})",
            dir.display(),
            meta.uid(),
            meta.gid()
        )));
    }
    Ok(())
}

/// chown `dir` (for "") and the named files in it to the user.
fn chown_all(
    dir: &Path,
    files: &[&str],
    t: &Target,
    log: &mut Vec<Step>,
) -> Result<(), AdminError> {
    for f in files {
        let p = if f.is_empty() {
            dir.to_path_buf()
        } else {
            dir.join(f)
        };
        let meta = fs::metadata(&p).map_err(io_err(&p))?;
        if meta.uid() != t.uid || meta.gid() != t.gid {
            std::os::unix::fs::chown(&p, Some(t.uid), Some(t.gid)).map_err(io_err(&p))?;
            log.push(Step::Done(format!(
                "chown {}:{} {}",
                t.uid,
                t.gid,
                p.display()
            )));
        }
    }
    Ok(())
}

/// Write `value` to a cgroup file unless it already holds it.
fn set_value(file: &Path, value: &str, log: &mut Vec<Step>) -> Result<(), AdminError> {
    let cur = fs::read_to_string(file).map_err(io_err(file))?;
    if cur.trim() != value {
        fs::write(file, value).map_err(io_err(file))?;
        log.push(Step::Done(format!("set {} = {value}", file.display())));
    }
    Ok(())
}

/// Copy cpuset.cpus/mems from `parent` into `dir` where `dir`'s are empty.
fn inherit_cpuset(parent: &Path, dir: &Path, log: &mut Vec<Step>) -> Result<(), AdminError> {
    for f in ["cpuset.cpus", "cpuset.mems"] {
        let src = parent.join(f);
        let dst = dir.join(f);
        let cur = fs::read_to_string(&dst).map_err(io_err(&dst))?;
        if cur.trim().is_empty() {
            let val = fs::read_to_string(&src).map_err(io_err(&src))?;
            fs::write(&dst, val.trim()).map_err(io_err(&dst))?;
            log.push(Step::Done(format!(
                "set {} = {}",
                dst.display(),
                val.trim()
            )));
        }
    }
    Ok(())
}

/// Hierarchical accounting, so a sandbox's limit also counts against the
/// user's. Already the only mode on newer kernels (file gone or fixed at 1);
/// EBUSY means children exist and the value can no longer change.
fn set_use_hierarchy(dir: &Path, log: &mut Vec<Step>) -> Result<(), AdminError> {
    let file = dir.join("memory.use_hierarchy");
    match fs::read_to_string(&file) {
        Ok(v) if v.trim() == "1" => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        _ => {}
    }
    match fs::write(&file, "1") {
        Ok(()) => log.push(Step::Done(format!("set {} = 1", file.display()))),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::ENOENT)) => {
            log.push(Step::Done(format!(
                "left {} unchanged: {e}",
                file.display()
            )));
        }
        Err(e) => return Err(io_err(&file)(e)),
    }
    Ok(())
}

/// Enable the limit controllers in `dir/cgroup.subtree_control`, each on its
/// own so that one refusal (say cpu, blocked by realtime tasks) does not
/// cost the others; refusals are logged, not fatal.
fn enable_controllers(dir: &Path, log: &mut Vec<Step>) -> Result<(), AdminError> {
    let avail_file = dir.join("cgroup.controllers");
    let avail = fs::read_to_string(&avail_file).map_err(io_err(&avail_file))?;
    let ctl = dir.join("cgroup.subtree_control");
    let enabled = fs::read_to_string(&ctl).map_err(io_err(&ctl))?;
    for c in LIMIT_CONTROLLERS {
        if enabled.split_whitespace().any(|e| e == *c) {
            continue;
        }
        if !avail.split_whitespace().any(|e| e == *c) {
            log.push(Step::Warning(format!(
                "controller {c} is not offered in {}",
                avail_file.display()
            )));
            continue;
        }
        match fs::write(&ctl, format!("+{c}")) {
            Ok(()) => log.push(Step::Done(format!("enabled +{c} in {}", ctl.display()))),
            Err(e) => log.push(Step::Warning(format!(
                "could not enable +{c} in {}: {e}",
                ctl.display()
            ))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_dirs_match_the_cgroup_base() {
        assert_eq!(user_dir(1000), "u1000");
        assert_eq!(
            Path::new(TOP).join(user_dir(7)),
            base_for_uid(7).strip_prefix("/").unwrap()
        );
    }

    #[test]
    fn refusal_lists_children() {
        let e = AdminError::ChildrenRemain(vec![PathBuf::from("/a/x"), PathBuf::from("/a/y")]);
        assert!(e.to_string().ends_with("/a/x, /a/y"), "{e}");
    }

    #[test]
    fn unknown_user_is_refused() {
        if !is_real_root() {
            assert!(matches!(
                delegate_cgroups("root", false),
                Err(AdminError::NotRoot)
            ));
            return;
        }
        assert!(matches!(
            delegate_cgroups("no-such-user-cbrun-test", false),
            Err(AdminError::NoSuchUser(_))
        ));
        assert!(matches!(
            delegate_cgroups("root", false),
            Err(AdminError::RootTarget)
        ));
    }
}
