//! What this host lets cbrun do for this user, and therefore which
//! isolation guarantees a sandbox started now would have: the probes and
//! the report of `cbrun doctor [--json]` (printed by the command line).

use std::fmt::Write as _;

use serde::Serialize;

use crate::host::cgroup::{CgroupHost, Delegation, Layout, LIMIT_CONTROLLERS};
use crate::host::idmap::{self, IdMapInfo, MappingKind};
use crate::host::userns::UsernsSupport;
use crate::host::{probe, userns};

/// `cbrun doctor`'s exit status when no sandbox can be started here.
pub const EXIT_IMPOSSIBLE: i32 = 2;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub user: UserInfo,
    /// `uname -r`.
    pub kernel: Option<String>,
    pub userns: UsernsSupport,
    pub idmap: IdMapInfo,
    pub cgroup: CgroupInfo,
    pub overlay_in_userns: Check,
    pub seccomp: Check,
    pub network_namespace: Check,
    pub cgroup_namespace: Check,
    /// User namespaces work, or we are real root.
    pub sandbox_possible: bool,
    pub guarantees: Vec<Guarantee>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UserInfo {
    pub uid: u32,
    pub gid: u32,
    pub name: Option<String>,
    /// uid 0 in the initial user namespace.
    pub real_root: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CgroupInfo {
    pub host: Option<CgroupHost>,
    /// Why the layout could not be read.
    pub error: Option<String>,
    pub delegation: Option<Delegation>,
}

/// Outcome of one probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub ok: bool,
    pub error: Option<String>,
}

impl From<Result<(), String>> for Check {
    fn from(r: Result<(), String>) -> Self {
        match r {
            Ok(()) => Check {
                ok: true,
                error: None,
            },
            Err(e) => Check {
                ok: false,
                error: Some(e),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    Enforced,
    NotEnforced,
}

#[derive(Debug, Clone, Serialize)]
pub struct Guarantee {
    pub name: &'static str,
    pub status: Enforcement,
    /// One line: what makes it hold, or what is missing and the fix.
    pub why: String,
}

/// Run every probe. Forks a few short-lived children; changes nothing.
pub fn collect() -> Report {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let name = nix::unistd::User::from_uid(uid.into())
        .ok()
        .flatten()
        .map(|u| u.name);
    let user = UserInfo {
        uid,
        gid,
        name,
        real_root: userns::is_real_root(),
    };
    let cgroup = match CgroupHost::detect() {
        Ok(host) => CgroupInfo {
            delegation: Some(Delegation::probe(&host, uid)),
            host: Some(host),
            error: None,
        },
        Err(e) => CgroupInfo {
            host: None,
            error: Some(format!("read /proc/self/mountinfo: {e}")),
            delegation: None,
        },
    };
    let userns = userns::probe();
    let mut report = Report {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_owned()),
        sandbox_possible: userns.available || user.real_root,
        user,
        userns,
        idmap: idmap::probe(),
        cgroup,
        overlay_in_userns: probe::overlay_in_userns().into(),
        seccomp: probe::seccomp_filters().into(),
        network_namespace: probe::network_namespace().into(),
        cgroup_namespace: probe::cgroup_namespace().into(),
        guarantees: Vec::new(),
    };
    report.guarantees = guarantees(&report);
    report
}

fn ok(status: Enforcement) -> bool {
    status == Enforcement::Enforced
}

fn from_bool(b: bool) -> Enforcement {
    if b {
        Enforcement::Enforced
    } else {
        Enforcement::NotEnforced
    }
}

fn who(r: &Report) -> String {
    r.user
        .name
        .clone()
        .unwrap_or_else(|| r.user.uid.to_string())
}

/// Short description of the id mapping, for text and for the `--user` line.
fn mapping_summary(m: &IdMapInfo) -> String {
    match &m.kind {
        MappingKind::SingleId => format!("single id: sandbox uid/gid 0 = host {}/{}", m.uid, m.gid),
        MappingKind::Ranges {
            uid_ranges,
            gid_ranges,
        } => {
            let ids = |r: &[(u32, u32)]| r.iter().map(|&(_, c)| u64::from(c)).sum::<u64>();
            format!(
                "subordinate ranges via newuidmap/newgidmap: {} uids, {} gids besides your own",
                ids(uid_ranges),
                ids(gid_ranges)
            )
        }
        MappingKind::RootRange { host_start, len } => format!(
            "root range: sandbox ids 0..{} = host {}..{} (unprivileged)",
            len.saturating_sub(1),
            host_start,
            *host_start as u64 + *len as u64 - 1
        ),
    }
}

/// The fix for missing delegation, worded for this host's layout.
fn delegate_fix(r: &Report) -> String {
    let name = who(r);
    let what = match r.cgroup.host.as_ref().map(|h| h.layout) {
        Some(Layout::Unified) => format!(
            "creates /sys/fs/cgroup/cbrun/u{} owned by you with +memory +pids +cpu enabled",
            r.user.uid
        ),
        _ => format!(
            "creates cbrun/u{} owned by you in every v1 hierarchy",
            r.user.uid
        ),
    };
    format!("as root: cbrun admin delegate-cgroups --user {name} ({what})")
}

fn limit_guarantee(r: &Report, name: &'static str, controller: &str) -> Guarantee {
    let not = |why: String| Guarantee {
        name,
        status: Enforcement::NotEnforced,
        why,
    };
    let (Some(host), Some(d)) = (&r.cgroup.host, &r.cgroup.delegation) else {
        return not(format!(
            "cgroup layout unknown: {}",
            r.cgroup.error.as_deref().unwrap_or("not probed")
        ));
    };
    if host.layout == Layout::Absent {
        return not("no cgroup filesystem is mounted under /sys/fs/cgroup".to_owned());
    }
    let has_ctrl = d.controllers.iter().any(|c| c == controller);
    if d.usable && has_ctrl {
        let place = match host.layout {
            Layout::Unified => format!("cgroup2 {}", d.base.display()),
            _ => format!(
                "v1 {}{}",
                host.v1_mount(controller)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                d.base.display()
            ),
        };
        return Guarantee {
            name,
            status: Enforcement::Enforced,
            why: format!("{controller} controller usable under {place}"),
        };
    }
    if !d.usable {
        // Controller problems are reported separately; the blocker is the base.
        let base_problems: Vec<&String> = d
            .problems
            .iter()
            .filter(|p| !p.contains("controller"))
            .collect();
        let blocker = if !base_problems.is_empty()
            && base_problems.iter().all(|p| p.contains("not delegated"))
        {
            format!(
                "{} is not delegated to {} in {} hierarch{}",
                d.base.display(),
                who(r),
                base_problems.len(),
                if base_problems.len() == 1 { "y" } else { "ies" }
            )
        } else {
            match base_problems.as_slice() {
                [] => "cgroup base not usable".to_owned(),
                [one] => (*one).clone(),
                [first, rest @ ..] => format!("{first} (+{} more)", rest.len()),
            }
        };
        if r.user.uid == 0 {
            return not(format!(
                "{blocker}; cbrun needs a writable /sys/fs/cgroup (not a read-only mount)"
            ));
        }
        return not(format!("{blocker}; fix {}", delegate_fix(r)));
    }
    let fix = match host.layout {
        Layout::Unified => format!(
            "enable it: rerun `cbrun admin delegate-cgroups --user {}` as root, or echo +{controller} into the parents' cgroup.subtree_control",
            who(r)
        ),
        _ => format!("mount the {controller} v1 hierarchy under /sys/fs/cgroup/{controller}"),
    };
    not(format!("{controller} controller not available; {fix}"))
}

/// Derive what a sandbox started now would actually enforce.
pub fn guarantees(r: &Report) -> Vec<Guarantee> {
    let can_ns = r.userns.available || r.user.real_root;
    let userns_err = r.userns.error.clone().unwrap_or_default();
    let mut g = Vec::new();

    g.push(Guarantee {
        name: "user namespace",
        status: from_bool(r.userns.available),
        why: if r.userns.available {
            mapping_summary(&r.idmap)
        } else {
            userns_err.clone()
        },
    });

    let ns_ok = can_ns && r.network_namespace.ok && r.cgroup_namespace.ok;
    g.push(Guarantee {
        name: "mount/pid/ipc/uts/net/cgroup namespaces",
        status: from_bool(ns_ok),
        why: if ns_ok {
            "all six created in the probes".to_owned()
        } else if !can_ns {
            format!("needs a user namespace: {userns_err}")
        } else if let Some(e) = &r.network_namespace.error {
            format!("network namespace: {e}")
        } else {
            format!(
                "cgroup namespace: {}",
                r.cgroup_namespace.error.as_deref().unwrap_or("failed")
            )
        },
    });

    g.push(Guarantee {
        name: "loopback-only network",
        status: from_bool(can_ns && r.network_namespace.ok),
        why: match (&r.network_namespace.error, can_ns) {
            (None, true) => {
                "new netns has only lo (brought up in the probe), no route out".to_owned()
            }
            (Some(e), _) => format!("network namespace unavailable: {e}"),
            (None, false) => format!("needs a user namespace: {userns_err}"),
        },
    });

    g.push(Guarantee {
        name: "seccomp filter",
        status: from_bool(r.seccomp.ok),
        why: match &r.seccomp.error {
            None => "SECCOMP_SET_MODE_FILTER accepted a filter in the probe".to_owned(),
            Some(e) => e.clone(),
        },
    });

    // Dropping capabilities and no_new_privs need no privilege; the seccomp
    // probe already set no_new_privs for real.
    let nnp_failed = r
        .seccomp
        .error
        .as_deref()
        .is_some_and(|e| e.contains("NO_NEW_PRIVS"));
    g.push(Guarantee {
        name: "capabilities dropped + no_new_privs",
        status: from_bool(can_ns && !nnp_failed),
        why: if nnp_failed {
            r.seccomp.error.clone().unwrap_or_default()
        } else if can_ns {
            "capset and prctl(PR_SET_NO_NEW_PRIVS) need no privilege (no_new_privs set in the seccomp probe)".to_owned()
        } else {
            format!("no sandbox possible: {userns_err}")
        },
    });

    for (name, ctrl) in [
        ("memory limit", "memory"),
        ("pids limit", "pids"),
        ("cpu limit", "cpu"),
    ] {
        debug_assert!(LIMIT_CONTROLLERS.contains(&ctrl));
        g.push(limit_guarantee(r, name, ctrl));
    }

    g.push(Guarantee {
        name: "rlimits",
        status: from_bool(r.sandbox_possible),
        why: if r.sandbox_possible {
            "setrlimit may always lower limits".to_owned()
        } else {
            format!("no sandbox possible: {userns_err}")
        },
    });

    g.push(Guarantee {
        name: "non-root uid inside (--user)",
        status: from_bool(r.userns.available),
        why: if !r.userns.available {
            format!("needs a user namespace: {userns_err}")
        } else {
            match &r.idmap.kind {
                MappingKind::SingleId => {
                    "single-id mapping: the requested uid is mapped to you; other ids show as nobody".to_owned()
                }
                // cbrun runs libcontainer inside a user namespace of its own
                // when not root, where only one id exists.
                MappingKind::Ranges { .. } => "ranges found, but sandboxes map one id: the requested uid is mapped to you (nested user namespace); other ids show as nobody".to_owned(),
                MappingKind::RootRange { len, .. } => format!("any uid below {len}, all unprivileged on the host"),
            }
        },
    });

    g.push(Guarantee {
        name: "overlayfs writable layer",
        status: from_bool(r.overlay_in_userns.ok),
        why: match &r.overlay_in_userns.error {
            None => {
                "overlay(userxattr) on tmpfs mounted and written in a user namespace".to_owned()
            }
            Some(e) => e.clone(),
        },
    });
    g
}

/// Marker column: ok, warn (degraded), FAIL (no sandbox).
fn marker(good: bool, fatal: bool) -> &'static str {
    match (good, fatal) {
        (true, _) => "ok",
        (false, true) => "FAIL",
        (false, false) => "warn",
    }
}

/// Group `"<dir>: <why>"` problems by reason so eight hierarchies that all
/// lack delegation take one line, not eight. Order of first appearance.
fn group_problems(problems: &[String]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for p in problems {
        let (dir, why) = match p.split_once(": ") {
            Some((d, w)) if d.starts_with('/') => (Some(d.to_owned()), w.to_owned()),
            _ => (None, p.clone()),
        };
        match groups.iter_mut().find(|(w, _)| *w == why) {
            Some((_, dirs)) => dirs.extend(dir),
            None => groups.push((why, dir.into_iter().collect())),
        }
    }
    groups
}

/// The human-readable report; one line per item.
pub fn render_text(r: &Report) -> String {
    let mut s = String::from("cbrun doctor\n");
    let mut line = |mark: &str, item: &str, text: &str| {
        let _ = writeln!(s, "  {mark:<5} {item:<40} {text}");
    };
    let who = who(r);
    let root = if r.user.real_root {
        "real root"
    } else if r.user.uid == 0 {
        "root inside a user namespace (not host root)"
    } else {
        "unprivileged"
    };
    line(
        "ok",
        "user",
        &format!("{who} (uid {}, gid {}), {root}", r.user.uid, r.user.gid),
    );
    line(
        marker(r.kernel.is_some(), false),
        "kernel",
        r.kernel
            .as_deref()
            .unwrap_or("unknown (/proc/sys/kernel/osrelease unreadable)"),
    );

    let mut sysctls = Vec::new();
    if let Some(m) = r.userns.max_user_namespaces {
        sysctls.push(format!("user.max_user_namespaces={m}"));
    }
    if let Some(c) = r.userns.unprivileged_clone_sysctl {
        sysctls.push(format!("kernel.unprivileged_userns_clone={}", u8::from(c)));
    }
    if let Some(a) = r.userns.apparmor_restricted {
        sysctls.push(format!(
            "kernel.apparmor_restrict_unprivileged_userns={}",
            u8::from(a)
        ));
    }
    let userns_text = match &r.userns.error {
        None => format!("available ({})", sysctls.join(", ")),
        Some(e) => e.clone(),
    };
    line(
        marker(r.userns.available, !r.user.real_root),
        "user namespaces",
        &userns_text,
    );
    line("ok", "id mapping", &mapping_summary(&r.idmap));
    for note in &r.idmap.notes {
        line("", "", &format!("note: {note}"));
    }

    match (&r.cgroup.host, &r.cgroup.delegation) {
        (Some(h), Some(d)) => {
            let mut layout = format!("{:?}", h.layout).to_lowercase();
            if !h.v1.is_empty() {
                let ctrls: Vec<String> = h.v1.iter().map(|v| v.controllers.join(",")).collect();
                let _ = write!(layout, "; v1: {}", ctrls.join(" "));
            }
            if let Some(u) = &h.unified {
                let ctrls = h.v2_controllers();
                let _ = write!(
                    layout,
                    "; cgroup2 at {} (controllers: {})",
                    u.display(),
                    if ctrls.is_empty() {
                        "none".to_owned()
                    } else {
                        ctrls.join(" ")
                    }
                );
            }
            line(
                marker(h.layout != Layout::Absent, false),
                "cgroup layout",
                &layout,
            );
            let deleg = if d.usable {
                format!(
                    "{} usable; limit controllers: {}",
                    d.base.display(),
                    d.controllers.join(" ")
                )
            } else {
                format!("{} not usable", d.base.display())
            };
            line(marker(d.usable, false), "cgroup base", &deleg);
            for (why, dirs) in group_problems(&d.problems) {
                let more = match dirs.len() {
                    0 | 1 => String::new(),
                    n => format!(" and {} more", n - 1),
                };
                match dirs.first() {
                    Some(first) => line("", "", &format!("problem: {first}{more}: {why}")),
                    None => line("", "", &format!("problem: {why}")),
                }
            }
        }
        _ => line(
            "warn",
            "cgroup layout",
            r.cgroup.error.as_deref().unwrap_or("unknown"),
        ),
    }

    let checks = [
        (
            "overlayfs in user namespace",
            &r.overlay_in_userns,
            "mounted and written",
        ),
        (
            "seccomp filters",
            &r.seccomp,
            "no_new_privs set, filter installed",
        ),
        (
            "network namespace",
            &r.network_namespace,
            "created, only lo, no route out",
        ),
        (
            "cgroup namespace",
            &r.cgroup_namespace,
            "created, host cgroup paths hidden",
        ),
    ];
    for (item, c, good) in checks {
        line(
            marker(c.ok, false),
            item,
            c.error.as_deref().unwrap_or(good),
        );
    }

    let _ = writeln!(s, "\nguarantees for a sandbox started now");
    let mut line = |mark: &str, item: &str, status: &str, why: &str| {
        let _ = writeln!(s, "  {mark:<5} {item:<40} {status:<13} {why}");
    };
    for g in &r.guarantees {
        let status = if ok(g.status) {
            "enforced"
        } else {
            "not-enforced"
        };
        let fatal = g.name == "user namespace" && !r.sandbox_possible;
        line(marker(ok(g.status), fatal), g.name, status, &g.why);
    }

    let verdict = if r.sandbox_possible {
        "\nresult: sandboxes can run here\n".to_owned()
    } else {
        format!(
            "\nresult: NO sandbox possible (user namespaces unavailable and not real root); exit {EXIT_IMPOSSIBLE}\n"
        )
    };
    s.push_str(&verdict);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn report(uid: u32, usable: bool, layout: Layout) -> Report {
        let host = CgroupHost {
            layout,
            v1: Vec::new(),
            unified: Some(PathBuf::from("/sys/fs/cgroup")),
        };
        let delegation = Delegation {
            base: crate::host::cgroup::base_for_uid(uid),
            usable,
            controllers: if usable {
                vec!["memory".into(), "pids".into()]
            } else {
                Vec::new()
            },
            problems: if usable {
                vec!["cgroup2 controller cpu is not enabled for /sys/fs/cgroup/cbrun/u1000".into()]
            } else {
                vec!["/sys/fs/cgroup/cbrun/u1000: not delegated".into()]
            },
        };
        let mut r = Report {
            user: UserInfo {
                uid,
                gid: uid,
                name: Some("alice".into()),
                real_root: uid == 0,
            },
            kernel: Some("6.1.0".into()),
            userns: UsernsSupport {
                available: true,
                max_user_namespaces: Some(100),
                unprivileged_clone_sysctl: None,
                apparmor_restricted: None,
                error: None,
            },
            idmap: IdMapInfo {
                uid,
                gid: uid,
                user: Some("alice".into()),
                kind: MappingKind::SingleId,
                newuidmap: None,
                newgidmap: None,
                notes: Vec::new(),
            },
            cgroup: CgroupInfo {
                host: Some(host),
                error: None,
                delegation: Some(delegation),
            },
            overlay_in_userns: Ok(()).into(),
            seccomp: Ok(()).into(),
            network_namespace: Ok(()).into(),
            cgroup_namespace: Ok(()).into(),
            sandbox_possible: true,
            guarantees: Vec::new(),
        };
        r.guarantees = guarantees(&r);
        r
    }

    fn status(r: &Report, name: &str) -> (Enforcement, String) {
        let g = r
            .guarantees
            .iter()
            .find(|g| g.name == name)
            .expect("guarantee present");
        (g.status, g.why.clone())
    }

    #[test]
    fn undelegated_user_gets_the_fix() {
        let r = report(1000, false, Layout::Unified);
        let (st, why) = status(&r, "memory limit");
        assert_eq!(st, Enforcement::NotEnforced);
        assert!(
            why.contains("cbrun admin delegate-cgroups --user alice"),
            "{why}"
        );
        assert_eq!(status(&r, "user namespace").0, Enforcement::Enforced);
    }

    #[test]
    fn delegated_user_gets_limits_per_controller() {
        let r = report(1000, true, Layout::Unified);
        assert_eq!(status(&r, "memory limit").0, Enforcement::Enforced);
        assert_eq!(status(&r, "pids limit").0, Enforcement::Enforced);
        let (st, why) = status(&r, "cpu limit");
        assert_eq!(st, Enforcement::NotEnforced);
        assert!(why.contains("cpu controller not available"), "{why}");
    }

    #[test]
    fn problems_group_by_reason() {
        let g = group_problems(&[
            "/a/cbrun/u1: not delegated".to_owned(),
            "/b/cbrun/u1: not delegated".to_owned(),
            "v1 controller cpu is not mounted".to_owned(),
        ]);
        assert_eq!(g.len(), 2);
        assert_eq!(
            g[0].1,
            vec!["/a/cbrun/u1".to_owned(), "/b/cbrun/u1".to_owned()]
        );
        assert!(g[1].1.is_empty());
    }

    #[test]
    fn text_and_json_render() {
        let r = report(1000, false, Layout::Unified);
        let text = render_text(&r);
        assert!(text.contains("not-enforced"), "{text}");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["guarantees"][0]["status"], "enforced");
        assert_eq!(v["idmap"]["kind"]["type"], "single_id");
    }
}
