//! Can the current user create user namespaces? Answered by trying, in a
//! forked child, exactly what a sandbox does first.

use std::fs;

use nix::sched::{unshare, CloneFlags};
use nix::unistd::{getegid, geteuid, setresgid, setresuid, Gid, Uid};

use crate::host::probe::{run_in_child, write_single_id_maps};

const MAX_USER_NAMESPACES: &str = "user/max_user_namespaces";
/// Debian/Ubuntu's out-of-tree switch for unprivileged user namespaces.
const UNPRIVILEGED_CLONE: &str = "kernel/unprivileged_userns_clone";
/// Ubuntu 23.10+: unprivileged namespaces are created but stripped of caps.
const APPARMOR_RESTRICT: &str = "kernel/apparmor_restrict_unprivileged_userns";
/// Test hook: a directory standing in for `/proc/sys`. The probe then
/// also behaves as a kernel with those settings would (it fails the step
/// they would fail) instead of trying, so that the doctor's wording can be
/// tested on hosts where the settings cannot be changed. Only `doctor`
/// reads it; sandboxes never do.
pub const FAKE_PROC_SYS_ENV: &str = "CBRUN_TEST_PROC_SYS";

/// Exit codes of the probe child, one per step, so the parent can tell
/// "could not create" from "created but powerless".
const STEP_UNSHARE: i32 = 10;
const STEP_MAPS: i32 = 11;
const STEP_CAPS: i32 = 12;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UsernsSupport {
    /// A user namespace was created, ids mapped, and its capabilities used.
    pub available: bool,
    /// `user.max_user_namespaces`; 0 disables user namespaces.
    pub max_user_namespaces: Option<u64>,
    /// Debian's `kernel.unprivileged_userns_clone`, if the kernel has it.
    pub unprivileged_clone_sysctl: Option<bool>,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 23.10+).
    pub apparmor_restricted: Option<bool>,
    /// What failed and how to fix it, when not available.
    pub error: Option<String>,
}

/// Try to create a user namespace the way a sandbox will.
pub fn probe() -> UsernsSupport {
    let fake = std::env::var_os(FAKE_PROC_SYS_ENV).filter(|v| !v.is_empty());
    let root = fake
        .clone()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/proc/sys".into());
    let max_user_namespaces = read_u64(&root.join(MAX_USER_NAMESPACES));
    let unprivileged_clone_sysctl = read_u64(&root.join(UNPRIVILEGED_CLONE)).map(|v| v != 0);
    let apparmor_restricted = read_u64(&root.join(APPARMOR_RESTRICT)).map(|v| v != 0);
    let (uid, gid) = (geteuid().as_raw(), getegid().as_raw());
    let tried = match fake {
        Some(_) => as_the_kernel_would(
            uid,
            max_user_namespaces,
            unprivileged_clone_sysctl,
            apparmor_restricted,
        ),
        None => run_in_child(move || try_userns(uid, gid)).map_err(|e| (e.code, e.reason)),
    };
    let error = tried.err().map(|(code, reason)| {
        explain(
            code,
            &reason,
            uid,
            max_user_namespaces,
            unprivileged_clone_sysctl,
            apparmor_restricted,
        )
    });
    UsernsSupport {
        available: error.is_none(),
        max_user_namespaces,
        unprivileged_clone_sysctl,
        apparmor_restricted,
        error,
    }
}

/// The step a kernel with these settings fails (see [`FAKE_PROC_SYS_ENV`]).
fn as_the_kernel_would(
    uid: u32,
    max: Option<u64>,
    clone_sysctl: Option<bool>,
    apparmor: Option<bool>,
) -> Result<(), (Option<i32>, String)> {
    if max == Some(0) {
        return Err((
            Some(STEP_UNSHARE),
            "unshare(CLONE_NEWUSER): ENOSPC: No space left on device".into(),
        ));
    }
    if uid != 0 && clone_sysctl == Some(false) {
        return Err((
            Some(STEP_UNSHARE),
            "unshare(CLONE_NEWUSER): EPERM: Operation not permitted".into(),
        ));
    }
    if uid != 0 && apparmor == Some(true) {
        return Err((
            Some(STEP_CAPS),
            "setresgid(0) inside the namespace: EPERM: Operation not permitted".into(),
        ));
    }
    Ok(())
}

/// True for uid 0 of the initial user namespace, i.e. not "root" inside
/// somebody else's container, whose power ends at that container's mapping.
pub fn is_real_root() -> bool {
    geteuid().is_root()
        && fs::read_to_string("/proc/self/uid_map")
            .map(|m| is_identity_map(&m))
            .unwrap_or(false)
}

/// The initial namespace's map is the whole 32-bit range onto itself.
fn is_identity_map(map: &str) -> bool {
    let fields: Vec<&str> = map.split_whitespace().collect();
    fields == ["0", "0", "4294967295"]
}

/// Runs in the probe child: create, map, then use the namespace's caps.
fn try_userns(uid: u32, gid: u32) -> Result<(), (i32, String)> {
    unshare(CloneFlags::CLONE_NEWUSER)
        .map_err(|e| (STEP_UNSHARE, format!("unshare(CLONE_NEWUSER): {e}")))?;
    write_single_id_maps(uid, gid).map_err(|m| (STEP_MAPS, m))?;
    // Becoming root in the namespace and creating the namespaces a sandbox
    // needs both use the capabilities the kernel grants a namespace's
    // creator; an LSM restriction shows up here rather than at unshare.
    setresgid(Gid::from_raw(0), Gid::from_raw(0), Gid::from_raw(0))
        .map_err(|e| (STEP_CAPS, format!("setresgid(0) inside the namespace: {e}")))?;
    setresuid(Uid::from_raw(0), Uid::from_raw(0), Uid::from_raw(0))
        .map_err(|e| (STEP_CAPS, format!("setresuid(0) inside the namespace: {e}")))?;
    let inner = CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWPID;
    unshare(inner).map_err(|e| {
        (
            STEP_CAPS,
            format!("unshare(mount|uts|ipc|pid) inside the user namespace: {e}"),
        )
    })
}

/// Turn a failed step into a sentence that names the cause and the fix.
fn explain(
    code: Option<i32>,
    reason: &str,
    uid: u32,
    max: Option<u64>,
    clone_sysctl: Option<bool>,
    apparmor: Option<bool>,
) -> String {
    match code {
        Some(STEP_UNSHARE) => {
            if max == Some(0) {
                format!("{reason}: user namespaces are disabled on this host (user.max_user_namespaces=0); cbrun cannot isolate anything without them and does not fall back. The administrator's fix, as root: sysctl -w user.max_user_namespaces=15000, and to keep it: echo user.max_user_namespaces=15000 > /etc/sysctl.d/90-userns.conf")
            } else if clone_sysctl == Some(false) && uid != 0 {
                format!("{reason}: unprivileged user namespaces are disabled on this host (kernel.unprivileged_userns_clone=0); cbrun cannot isolate anything without them and does not fall back. The administrator's fix, as root: sysctl -w kernel.unprivileged_userns_clone=1, and to keep it: echo kernel.unprivileged_userns_clone=1 > /etc/sysctl.d/90-userns.conf")
            } else if reason.contains("ENOSPC") {
                format!("{reason}: the user.max_user_namespaces limit ({}) is used up", max.unwrap_or(0))
            } else if reason.contains("EINVAL") {
                format!("{reason}: kernel built without user namespace support")
            } else if reason.contains("EPERM") {
                format!("{reason}: refused by policy (a seccomp filter or LSM of an outer container/sandbox?)")
            } else {
                reason.to_owned()
            }
        }
        Some(STEP_MAPS | STEP_CAPS) if apparmor == Some(true) && uid != 0 => format!(
            "AppArmor restricts unprivileged user namespaces on this host (kernel.apparmor_restrict_unprivileged_userns=1): \
             unshare works but the namespace gets no capabilities ({reason}); cbrun does not fall back. The administrator's fix: \
             an AppArmor profile for the cbrun binary with the `userns,` rule (/etc/apparmor.d/cbrun, then apparmor_parser -r), \
             or as root: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
        ),
        Some(STEP_MAPS) => format!("user namespace created but its id map could not be written: {reason}"),
        Some(STEP_CAPS) => format!("user namespace created but its capabilities are withheld (an LSM?): {reason}"),
        _ => reason.to_owned(),
    }
}

fn read_u64(path: &std::path::Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_map_means_initial_namespace() {
        assert!(is_identity_map("         0          0 4294967295\n"));
        assert!(!is_identity_map("         0       1000          1\n"));
        assert!(!is_identity_map(""));
    }

    #[test]
    fn apparmor_restriction_is_named() {
        let why = explain(
            Some(STEP_MAPS),
            "write uid_map: EPERM",
            1000,
            Some(100),
            None,
            Some(true),
        );
        assert!(why.contains("AppArmor"), "{why}");
        assert!(why.contains("userns,"), "{why}");
    }

    #[test]
    fn disabled_sysctls_are_named() {
        let why = explain(
            Some(STEP_UNSHARE),
            "unshare: EPERM",
            1000,
            Some(100),
            Some(false),
            None,
        );
        assert!(why.contains("kernel.unprivileged_userns_clone=1"), "{why}");
        let why = explain(
            Some(STEP_UNSHARE),
            "unshare: ENOSPC",
            1000,
            Some(0),
            None,
            None,
        );
        assert!(why.contains("max_user_namespaces=0"), "{why}");
    }

    #[test]
    fn probe_agrees_with_itself() {
        let s = probe();
        assert_eq!(s.available, s.error.is_none(), "{s:?}");
    }
}
