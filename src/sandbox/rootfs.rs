//! The sandbox's `/`: either a scaffold of mount points over which the
//! host's system directories are bound read-only, or a given directory.
//! Mount points are made here, from outside, because the sandbox's mapped
//! root may not be allowed to create them.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::config::{BindMount, RootfsSource};

/// Host top-level entries a `--rootfs host` sandbox sees (read-only).
/// Never /home, /root, /tmp, /var, /srv, /mnt, /media, /run, /work.
pub const HOST_SYSTEM_DIRS: &[&str] = &[
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt",
];

/// Mount points every sandbox needs.
const BASE_DIRS: &[&str] = &["proc", "dev", "sys", "tmp"];

#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    #[error("--rootfs {0}: no such directory")]
    Missing(PathBuf),
    #[error("--rootfs {dir}: mount point {point} is missing and cannot be created: {source}")]
    MountPoint {
        dir: PathBuf,
        point: String,
        source: io::Error,
    },
    #[error("--bind {src}: source does not exist")]
    BindSource { src: PathBuf },
    #[error("rootfs scaffold {path}: {source}")]
    Scaffold { path: PathBuf, source: io::Error },
}

/// A prepared root, plus the host directories to bind into it.
#[derive(Debug)]
pub struct PreparedRoot {
    pub path: PathBuf,
    /// (host path, path inside) bound read-only.
    pub system_binds: Vec<(PathBuf, PathBuf)>,
    /// User binds with their sources made absolute.
    pub binds: Vec<BindMount>,
}

impl PreparedRoot {
    /// Where a path inside the sandbox lives on the host, as far as the
    /// mounts tell (the last bind covering it wins, as in the mount table).
    pub fn host_path_of(&self, inside: &Path) -> PathBuf {
        for b in self.binds.iter().rev() {
            if let Ok(rest) = inside.strip_prefix(&b.dst) {
                return b.src.join(rest);
            }
        }
        for (host, dst) in &self.system_binds {
            if let Ok(rest) = inside.strip_prefix(dst) {
                return host.join(rest);
            }
        }
        self.path.join(inside.strip_prefix("/").unwrap_or(inside))
    }
}

pub fn prepare(
    source: &RootfsSource,
    scaffolds: &Path,
    binds: &[BindMount],
) -> Result<PreparedRoot, RootfsError> {
    let mut resolved = Vec::with_capacity(binds.len());
    for b in binds {
        let src =
            fs::canonicalize(&b.src).map_err(|_| RootfsError::BindSource { src: b.src.clone() })?;
        resolved.push(BindMount {
            src,
            dst: b.dst.clone(),
            readonly: b.readonly,
        });
    }
    match source {
        RootfsSource::Host => host_scaffold(scaffolds, resolved),
        RootfsSource::Dir(dir) => {
            let dir = fs::canonicalize(dir).map_err(|_| RootfsError::Missing(dir.clone()))?;
            if !dir.is_dir() {
                return Err(RootfsError::Missing(dir));
            }
            for p in BASE_DIRS {
                let point = dir.join(p);
                if !point.exists() {
                    fs::create_dir(&point).map_err(|source| RootfsError::MountPoint {
                        dir: dir.clone(),
                        point: format!("/{p}"),
                        source,
                    })?;
                }
            }
            for b in &resolved {
                make_mount_point(&dir, b).map_err(|source| RootfsError::MountPoint {
                    dir: dir.clone(),
                    point: b.dst.display().to_string(),
                    source,
                })?;
            }
            Ok(PreparedRoot {
                path: dir,
                system_binds: Vec::new(),
                binds: resolved,
            })
        }
    }
}

/// A `--rootfs host` root is a scaffold of empty mount points and links.
/// It is shared by every run with the same mount layout and kept under the
/// state root: removing a directory that served as a mount point in a
/// sandbox that just died costs an RCU grace period per entry, so a
/// per-run scaffold would double the cost of a short run. It holds nothing
/// but empty directories, empty files and symlinks; `cbrun gc` removes it.
fn host_scaffold(scaffolds: &Path, binds: Vec<BindMount>) -> Result<PreparedRoot, RootfsError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RootfsError::Scaffold { path, source }
    };
    // What the scaffold contains decides its name.
    let mut layout: Vec<String> = Vec::new();
    let mut system_binds = Vec::new();
    let mut links = Vec::new();
    let mut empties = Vec::new();
    for name in HOST_SYSTEM_DIRS {
        let host = Path::new("/").join(name);
        let Ok(meta) = fs::symlink_metadata(&host) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&host).map_err(err(&host))?;
            layout.push(format!("L {name} {}", target.display()));
            links.push((name, target));
        } else if meta.is_dir() {
            // An empty host dir (often /opt) is an empty dir in the
            // scaffold: same view, one mount fewer.
            let empty = fs::read_dir(&host)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if empty {
                layout.push(format!("E {name}"));
                empties.push(name);
            } else {
                layout.push(format!("D {name}"));
                system_binds.push((host, Path::new("/").join(name)));
            }
        }
    }
    for b in &binds {
        layout.push(format!("B {} {}", b.dst.display(), b.src.is_dir()));
    }
    let key = fnv1a(layout.join("\n").as_bytes());
    let path = scaffolds.join(format!("{key:016x}"));
    if path.is_dir() {
        return Ok(PreparedRoot {
            path,
            system_binds,
            binds,
        });
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(scaffolds)
        .map_err(err(scaffolds))?;
    let tmp = scaffolds.join(format!(".tmp-{}-{key:016x}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::DirBuilder::new()
        .mode(0o755)
        .create(&tmp)
        .map_err(err(&tmp))?;
    for (name, target) in &links {
        std::os::unix::fs::symlink(target, tmp.join(name)).map_err(err(&tmp.join(name)))?;
    }
    for (_, inside) in &system_binds {
        let d = tmp.join(inside.strip_prefix("/").unwrap_or(inside));
        fs::DirBuilder::new()
            .mode(0o755)
            .create(&d)
            .map_err(err(&d))?;
    }
    for p in BASE_DIRS.iter().chain(empties.iter().copied()) {
        let d = tmp.join(p);
        fs::DirBuilder::new()
            .mode(0o755)
            .create(&d)
            .map_err(err(&d))?;
    }
    for b in &binds {
        make_mount_point(&tmp, b)
            .map_err(err(&tmp.join(b.dst.strip_prefix("/").unwrap_or(&b.dst))))?;
    }
    // Publish atomically; a concurrent run may have won the race.
    if let Err(e) = fs::rename(&tmp, &path) {
        let _ = fs::remove_dir_all(&tmp);
        if !path.is_dir() {
            return Err(err(&path)(e));
        }
    }
    Ok(PreparedRoot {
        path,
        system_binds,
        binds,
    })
}

/// 64-bit FNV-1a: stable short names (scaffold layouts, state-root tags).
pub(crate) fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Create the mount point for `b` under `root` if it is not there: a
/// directory, or an empty file for a file source. Points that fall inside a
/// host system dir must already exist there (those are bound read-only).
fn make_mount_point(root: &Path, b: &BindMount) -> io::Result<()> {
    let rel = b.dst.strip_prefix("/").unwrap_or(&b.dst);
    let point = root.join(rel);
    if fs::symlink_metadata(&point).is_ok() {
        return Ok(());
    }
    // Only create under directories that are part of the scaffold itself.
    if let Some(first) = rel.components().next() {
        let top = first.as_os_str().to_string_lossy();
        if HOST_SYSTEM_DIRS.contains(&top.as_ref()) && root.join(first).is_dir() {
            let host_has = Path::new("/").join(rel).exists();
            if host_has {
                return Ok(()); // visible through the system bind
            }
        }
    }
    if let Some(parent) = point.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)?;
    }
    if b.src.is_dir() {
        fs::DirBuilder::new().mode(0o755).create(&point)
    } else {
        fs::File::create(&point).map(|_| ())
    }
}
