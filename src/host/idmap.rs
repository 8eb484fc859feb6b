//! Which uid/gid mapping cbrun can give a sandbox's user namespace.
//!
//! - an unprivileged user with subordinate ranges (/etc/subuid, /etc/subgid)
//!   and working `newuidmap`/`newgidmap` gets those ranges;
//! - any other unprivileged user gets a single id (itself as the sandbox's 0);
//! - real root maps the sandbox onto an unprivileged host range, so that
//!   "root" inside a sandbox is never host root.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::unistd::{getegid, geteuid, AccessFlags, Uid, User};

pub const SUBUID_FILE: &str = "/etc/subuid";
pub const SUBGID_FILE: &str = "/etc/subgid";

/// Host uid/gid where root's sandboxes start when /etc/subuid has no `root`
/// entry: 0x7000_0000. It lies above systemd's per-container range
/// (524288..=1879048191, used by nspawn's automatic private users), below
/// 2^31 (ids that look negative confuse some tools) and below systemd's
/// reserved top-of-range blocks, and is 64K-aligned like those ranges.
pub const DEFAULT_ROOT_RANGE_START: u32 = 0x7000_0000;
/// One conventional 16-bit id space: enough for any distro image.
pub const DEFAULT_ROOT_RANGE_LEN: u32 = 65536;

/// Directories searched for the shadow-utils id-mapping helpers.
const HELPER_DIRS: &[&str] = &["/usr/bin", "/bin"];

/// Capability numbers from linux/capability.h.
const CAP_SETGID: u32 = 6;
const CAP_SETUID: u32 = 7;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MappingKind {
    /// Only the caller's own uid/gid, mapped to one id inside.
    SingleId,
    /// Subordinate ranges as `(host_start, count)`, written via
    /// newuidmap/newgidmap.
    Ranges {
        uid_ranges: Vec<(u32, u32)>,
        gid_ranges: Vec<(u32, u32)>,
    },
    /// Real root: sandbox ids `0..len` map to host ids
    /// `host_start..host_start+len` (uids and gids alike); never host root.
    RootRange { host_start: u32, len: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IdMapInfo {
    pub uid: u32,
    pub gid: u32,
    pub user: Option<String>,
    pub kind: MappingKind,
    /// Set only when the helper exists and can actually map (setuid root or
    /// the needed file capability, on a mount that honours them).
    pub newuidmap: Option<PathBuf>,
    pub newgidmap: Option<PathBuf>,
    /// Why a richer mapping was not chosen, or what to watch out for.
    pub notes: Vec<String>,
}

/// Work out the mapping for the current euid.
pub fn probe() -> IdMapInfo {
    let (uid, gid) = (geteuid().as_raw(), getegid().as_raw());
    let mut notes = Vec::new();
    let subuid = read_subid_file(SUBUID_FILE, &mut notes);
    let subgid = read_subid_file(SUBGID_FILE, &mut notes);
    let user = user_name(uid, !subuid.trim().is_empty());
    // Both files are keyed by login name or uid (never by gid).
    let uid_ranges = parse_subids(&subuid, user.as_deref(), uid);
    let gid_ranges = parse_subids(&subgid, user.as_deref(), uid);
    let newuidmap = find_helper("newuidmap", CAP_SETUID, &mut notes);
    let newgidmap = find_helper("newgidmap", CAP_SETGID, &mut notes);
    let who = user.clone().unwrap_or_else(|| uid.to_string());

    let kind = if uid == 0 {
        let range = root_range(&uid_ranges, &gid_ranges, &subuid, &mut notes);
        // Root inside somebody's user namespace can only hand out ids that
        // namespace has; the identity map of real root has them all.
        let own_maps = (
            fs::read_to_string("/proc/self/uid_map").unwrap_or_default(),
            fs::read_to_string("/proc/self/gid_map").unwrap_or_default(),
        );
        match range {
            MappingKind::RootRange { host_start, len }
                if !(covered_by_map(&own_maps.0, host_start, len)
                    && covered_by_map(&own_maps.1, host_start, len)) =>
            {
                notes.push(format!(
                    "root of a nested user namespace: ids {host_start}+{len} are not mapped here, so sandboxes get a single id"
                ));
                MappingKind::SingleId
            }
            other => other,
        }
    } else {
        let helpers = newuidmap.is_some() && newgidmap.is_some();
        user_mapping(&who, uid_ranges, gid_ranges, helpers, &mut notes)
    };
    IdMapInfo {
        uid,
        gid,
        user,
        kind,
        newuidmap,
        newgidmap,
        notes,
    }
}

/// An unprivileged user's mapping: ranges need both files and both helpers.
fn user_mapping(
    who: &str,
    uid_ranges: Vec<(u32, u32)>,
    gid_ranges: Vec<(u32, u32)>,
    helpers: bool,
    notes: &mut Vec<String>,
) -> MappingKind {
    if uid_ranges.is_empty() {
        notes.push(format!(
            "no {SUBUID_FILE} entry for {who}: sandboxes get a single uid"
        ));
    }
    if gid_ranges.is_empty() {
        notes.push(format!(
            "no {SUBGID_FILE} entry for {who}: sandboxes get a single gid"
        ));
    }
    let any_ranges = !uid_ranges.is_empty() || !gid_ranges.is_empty();
    if !helpers && any_ranges {
        notes.push("subordinate ranges exist but cannot be used without working newuidmap/newgidmap (Debian: apt install uidmap)".to_owned());
    }
    if helpers && !uid_ranges.is_empty() && !gid_ranges.is_empty() {
        MappingKind::Ranges {
            uid_ranges,
            gid_ranges,
        }
    } else {
        MappingKind::SingleId
    }
}

/// Ranges `(start, count)` for a user in subuid/subgid syntax
/// (`name-or-uid:start:count`, one per line, any number per user).
/// Malformed, empty or overflowing entries are skipped.
pub fn parse_subids(content: &str, name: Option<&str>, uid: u32) -> Vec<(u32, u32)> {
    let uid_str = uid.to_string();
    content
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut fields = l.split(':');
            let owner = fields.next()?;
            let start: u32 = fields.next()?.trim().parse().ok()?;
            let count: u32 = fields.next()?.trim().parse().ok()?;
            let mine = owner == uid_str || name == Some(owner);
            (mine && count > 0 && start.checked_add(count - 1).is_some()).then_some((start, count))
        })
        .collect()
}

/// The login name for `uid`: from /etc/passwd directly (cheap, and every
/// sandbox start asks), then from NSS (LDAP users on clusters) only when
/// /etc/subuid has entries a name could match.
fn user_name(uid: u32, need_nss: bool) -> Option<String> {
    let from_file = fs::read_to_string("/etc/passwd").ok().and_then(|t| {
        t.lines().find_map(|l| {
            let mut fields = l.split(':');
            let name = fields.next()?;
            let _pw = fields.next()?;
            (fields.next()?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
        })
    });
    if from_file.is_some() || !need_nss {
        return from_file;
    }
    User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
}

/// A missing file is normal (no ranges); an unreadable one is worth a note.
fn read_subid_file(path: &str, notes: &mut Vec<String>) -> String {
    match fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            notes.push(format!("cannot read {path}: {e}"));
            String::new()
        }
    }
}

/// Root's sandbox range: its /etc/subuid entry if it has a safe one, else
/// the fixed default.
fn root_range(
    uid_ranges: &[(u32, u32)],
    gid_ranges: &[(u32, u32)],
    subuid: &str,
    notes: &mut Vec<String>,
) -> MappingKind {
    // A range starting at 0 would hand the sandbox host root.
    let configured = uid_ranges.iter().copied().find(|&(start, _)| start > 0);
    if uid_ranges.iter().any(|&(start, _)| start == 0) {
        notes.push(format!(
            "ignoring root's {SUBUID_FILE} range that starts at host uid 0"
        ));
    }
    if let Some((host_start, len)) = configured {
        if len < DEFAULT_ROOT_RANGE_LEN {
            notes.push(format!("root's {SUBUID_FILE} range has only {len} ids; images using higher ids will show them as nobody"));
        }
        if !gid_ranges.is_empty() && !gid_ranges.contains(&(host_start, len)) {
            notes.push(format!("root's {SUBGID_FILE} range differs from its {SUBUID_FILE} range; gids use the subuid range {host_start}+{len}"));
        }
        return MappingKind::RootRange { host_start, len };
    }
    let (start, len) = (DEFAULT_ROOT_RANGE_START, DEFAULT_ROOT_RANGE_LEN);
    notes.push(format!(
        "no root entry in {SUBUID_FILE}: using the built-in range {start}..{} (add `root:START:COUNT` to {SUBUID_FILE} to choose another)",
        start as u64 + len as u64 - 1
    ));
    // The default is only safe while nobody else owns ids in it.
    for (owner, s, c) in subid_entries(subuid) {
        if overlaps((s, c), (start, len)) {
            notes.push(format!("WARNING: {SUBUID_FILE} gives {owner} {s}+{c}, which overlaps the default root range"));
        }
    }
    if let Ok(passwd) = fs::read_to_string("/etc/passwd") {
        for (name, id) in passwd_ids(&passwd) {
            if overlaps((id, 1), (start, len)) {
                notes.push(format!(
                    "WARNING: user {name} has uid {id}, inside the default root range"
                ));
            }
        }
    }
    MappingKind::RootRange {
        host_start: start,
        len,
    }
}

/// Is every id in `start..start+len` mapped in a /proc/<pid>/[ug]id_map
/// (`inside outside count` lines)?
fn covered_by_map(map: &str, start: u32, len: u32) -> bool {
    let spans: Vec<(u64, u64)> = map
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let inside: u64 = fields.next()?.parse().ok()?;
            let _outside = fields.next()?;
            let count: u64 = fields.next()?.parse().ok()?;
            Some((inside, inside + count))
        })
        .collect();
    let (mut cur, end) = (u64::from(start), u64::from(start) + u64::from(len));
    while cur < end {
        match spans.iter().find(|&&(a, b)| a <= cur && cur < b) {
            Some(&(_, b)) => cur = b,
            None => return false,
        }
    }
    true
}

fn subid_entries(content: &str) -> impl Iterator<Item = (String, u32, u32)> + '_ {
    content.lines().filter_map(|l| {
        let mut fields = l.trim().split(':');
        let owner = fields.next()?.to_owned();
        let start = fields.next()?.trim().parse().ok()?;
        let count = fields.next()?.trim().parse().ok()?;
        Some((owner, start, count))
    })
}

fn passwd_ids(passwd: &str) -> impl Iterator<Item = (String, u32)> + '_ {
    passwd.lines().filter_map(|l| {
        let mut fields = l.split(':');
        let name = fields.next()?.to_owned();
        let id = fields.nth(1)?.parse().ok()?;
        Some((name, id))
    })
}

fn overlaps(a: (u32, u32), b: (u32, u32)) -> bool {
    let end = |(s, c): (u32, u32)| s as u64 + c as u64;
    (a.0 as u64) < end(b) && (b.0 as u64) < end(a)
}

/// Find `name` in [`HELPER_DIRS`] and return it only if it can do its job:
/// executable by us and either setuid root or carrying `cap` as a permitted
/// file capability, on a mount without `nosuid` (which voids both).
fn find_helper(name: &str, cap: u32, notes: &mut Vec<String>) -> Option<PathBuf> {
    let Some((path, meta)) = HELPER_DIRS
        .iter()
        .map(|d| Path::new(d).join(name))
        .find_map(|p| {
            let m = fs::metadata(&p).ok().filter(|m| m.is_file())?;
            Some((p, m))
        })
    else {
        notes.push(format!(
            "{name} not found in /usr/bin or /bin (Debian: apt install uidmap)"
        ));
        return None;
    };
    if nix::unistd::access(&path, AccessFlags::X_OK).is_err() {
        notes.push(format!("{} is not executable by this user", path.display()));
        return None;
    }
    let setuid_root = meta.uid() == 0 && meta.mode() & libc::S_ISUID != 0;
    let has_cap = file_caps_permit(&path, cap);
    if !setuid_root && !has_cap {
        notes.push(format!(
            "{} is neither setuid root nor has the needed file capability (reinstall the uidmap package; inside a user namespace, its owner may just be unmapped)",
            path.display()
        ));
        return None;
    }
    if on_nosuid_mount(&path) {
        notes.push(format!(
            "{} is on a nosuid mount, which voids its privileges",
            path.display()
        ));
        return None;
    }
    Some(path)
}

/// Does the `security.capability` xattr of `path` grant `cap` as permitted?
fn file_caps_permit(path: &Path, cap: u32) -> bool {
    // vfs_cap_data v2/v3: magic_etc, then {permitted, inheritable} x2, then rootid (v3).
    let mut buf = [0u8; 24];
    let len = crate::sys::xattr::get(
        path,
        "security.capability",
        &mut buf,
        crate::sys::xattr::Follow::Yes,
    )
    .unwrap_or(0);
    if len < 8 {
        return false;
    }
    let word = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
    // Caps 0..31 live in the first permitted word (offset 4).
    cap < 32 && word(4) & (1 << cap) != 0
}

fn on_nosuid_mount(path: &Path) -> bool {
    nix::sys::statvfs::statvfs(path)
        .map(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_NOSUID))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBUID: &str = "\
# comment
alice:100000:65536
1001:200000:1000
alice:300000:10
bob:400000:65536
broken:line
alice:1:0
alice:4294967295:2
";

    #[test]
    fn ranges_by_name_or_uid() {
        assert_eq!(
            parse_subids(SUBUID, Some("alice"), 1000),
            vec![(100000, 65536), (300000, 10)]
        );
        assert_eq!(
            parse_subids(SUBUID, Some("carol"), 1001),
            vec![(200000, 1000)]
        );
        assert_eq!(parse_subids(SUBUID, None, 1001), vec![(200000, 1000)]);
        assert!(parse_subids(SUBUID, Some("nobody"), 65534).is_empty());
        assert!(parse_subids("", Some("alice"), 1000).is_empty());
    }

    #[test]
    fn root_uses_its_entry_or_the_default() {
        let mut notes = Vec::new();
        assert_eq!(
            root_range(&[(500000, 65536)], &[(500000, 65536)], "", &mut notes),
            MappingKind::RootRange {
                host_start: 500000,
                len: 65536
            }
        );
        assert!(notes.is_empty(), "{notes:?}");
        let mut notes = Vec::new();
        assert_eq!(
            root_range(&[(0, 65536)], &[], "root:0:65536\n", &mut notes),
            MappingKind::RootRange {
                host_start: DEFAULT_ROOT_RANGE_START,
                len: DEFAULT_ROOT_RANGE_LEN
            }
        );
        assert!(
            notes.iter().any(|n| n.contains("starts at host uid 0")),
            "{notes:?}"
        );
    }

    #[test]
    fn users_get_ranges_only_with_both_files_and_helpers() {
        let r = vec![(100000, 65536)];
        let mut notes = Vec::new();
        assert_eq!(
            user_mapping("alice", r.clone(), r.clone(), true, &mut notes),
            MappingKind::Ranges {
                uid_ranges: r.clone(),
                gid_ranges: r.clone()
            }
        );
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            user_mapping("alice", r.clone(), r.clone(), false, &mut notes),
            MappingKind::SingleId
        );
        assert!(notes.iter().any(|n| n.contains("uidmap")), "{notes:?}");
        let mut notes = Vec::new();
        assert_eq!(
            user_mapping("alice", r.clone(), Vec::new(), true, &mut notes),
            MappingKind::SingleId
        );
        assert!(notes.iter().any(|n| n.contains("/etc/subgid")), "{notes:?}");
    }

    #[test]
    fn default_range_overlap_is_flagged() {
        let mut notes = Vec::new();
        let subuid = format!("eve:{}:10\n", DEFAULT_ROOT_RANGE_START + 5);
        root_range(&[], &[], &subuid, &mut notes);
        assert!(
            notes
                .iter()
                .any(|n| n.contains("WARNING") && n.contains("eve")),
            "{notes:?}"
        );
    }

    #[test]
    fn file_caps_are_read_from_the_xattr() {
        // Setting file caps needs root and libcap's setcap; skip elsewhere.
        let setcap = Path::new("/usr/sbin/setcap");
        if !geteuid().is_root() || !setcap.exists() {
            return;
        }
        let file = std::env::temp_dir().join(format!("cbrun-caps-test-{}", std::process::id()));
        fs::write(&file, "").unwrap();
        let st = std::process::Command::new(setcap)
            .arg("cap_setuid+ep")
            .arg(&file)
            .status()
            .unwrap();
        let (uid_cap, gid_cap) = (
            file_caps_permit(&file, CAP_SETUID),
            file_caps_permit(&file, CAP_SETGID),
        );
        fs::remove_file(&file).unwrap();
        if st.success() {
            assert!(uid_cap && !gid_cap);
        }
    }

    #[test]
    fn map_coverage() {
        let initial = "         0          0 4294967295\n";
        assert!(covered_by_map(
            initial,
            DEFAULT_ROOT_RANGE_START,
            DEFAULT_ROOT_RANGE_LEN
        ));
        let split = "0 1000 1\n1 100000 65536\n";
        assert!(covered_by_map(split, 0, 65537));
        assert!(!covered_by_map(split, 1, 65537));
        assert!(!covered_by_map("0 65534 1\n", DEFAULT_ROOT_RANGE_START, 1));
        assert!(!covered_by_map("", 5, 1));
    }

    #[test]
    fn overlap_math() {
        assert!(overlaps((10, 5), (14, 1)));
        assert!(!overlaps((10, 5), (15, 1)));
        assert!(overlaps((u32::MAX, 1), (u32::MAX - 1, 2)));
    }

    #[test]
    fn serializes_with_a_type_tag() {
        let v = serde_json::to_value(MappingKind::RootRange {
            host_start: 1,
            len: 2,
        })
        .unwrap();
        assert_eq!(v["type"], "root_range");
        assert_eq!(
            serde_json::to_value(MappingKind::SingleId).unwrap()["type"],
            "single_id"
        );
    }
}
