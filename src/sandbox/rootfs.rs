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
    #[error("--rootfs {dir}: mount point {point} is missing and cannot be created")]
    MountPoint {
        dir: PathBuf,
        point: String,
        source: io::Error,
    },
    #[error("--bind {src}: source does not exist")]
    BindSource { src: PathBuf },
    #[error("rootfs scaffold {path}")]
    Scaffold { path: PathBuf, source: io::Error },
    #[error("image rootfs {path}: {why}")]
    Image { path: PathBuf, why: String },
}

/// A prepared root, plus the host directories to bind into it.
#[derive(Debug)]
pub struct PreparedRoot {
    pub path: PathBuf,
    /// (host path, path inside) bound read-only.
    pub system_binds: Vec<(PathBuf, PathBuf)>,
    /// User binds with their sources made absolute.
    pub binds: Vec<BindMount>,
    /// `/` is writable (an image's overlay).
    pub writable: bool,
    /// Unmounted when the root is dropped.
    pub overlay: Option<Overlay>,
    /// Set when an image could not get its writable layer.
    pub note: Option<String>,
}

/// An overlay mounted in cbrun's private mount namespace (it goes away
/// with cbrun in any case); unmounted on drop.
#[derive(Debug)]
pub struct Overlay {
    pub merged: PathBuf,
    /// The work directory, which the kernel leaves unreadable.
    work: PathBuf,
}

impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.merged, nix::mount::MntFlags::MNT_DETACH);
        // overlayfs leaves work/work with mode 000: open it for removal.
        let inner = self.work.join("work");
        let _ = fs::set_permissions(&inner, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    }
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
    run_dir: &Path,
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
        RootfsSource::Image(img) => image_root(img, run_dir, resolved),
        RootfsSource::Dir(dir) => {
            let dir = fs::canonicalize(dir).map_err(|_| RootfsError::Missing(dir.clone()))?;
            if !dir.is_dir() {
                return Err(RootfsError::Missing(dir));
            }
            // DIR is read-only and never written, not even for mount
            // points: they go to an overlay's upper layer in the run
            // directory, and the merged `/` is mounted read-only.
            let scaffold = super::config::ImageRoot {
                lower: dir.clone(),
                upper: None,
                label: dir.display().to_string(),
            };
            if let Ok(mut root) = image_root(&scaffold, run_dir, resolved.clone()) {
                if root.overlay.is_some() {
                    root.writable = false;
                    return Ok(root);
                }
            }
            // No overlayfs: DIR must hold every mount point already.
            let missing = |point: String| {
                RootfsError::MountPoint {
                dir: dir.clone(),
                point,
                source: io::Error::other(
                    "cbrun never writes into a --rootfs directory, and overlayfs is not available here to add it",
                ),
            }
            };
            for p in BASE_DIRS {
                if fs::symlink_metadata(dir.join(p)).is_err() {
                    return Err(missing(format!("/{p}")));
                }
            }
            for b in &resolved {
                let rel = b.dst.strip_prefix("/").unwrap_or(&b.dst);
                if fs::symlink_metadata(dir.join(rel)).is_err() {
                    return Err(missing(b.dst.display().to_string()));
                }
            }
            Ok(PreparedRoot {
                path: dir,
                system_binds: Vec::new(),
                binds: resolved,
                writable: false,
                overlay: None,
                note: None,
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
            let empty = crate::fsutil::dir_is_empty(&host).unwrap_or(false);
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
            writable: false,
            overlay: None,
            note: None,
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
        writable: false,
        overlay: None,
        note: None,
    })
}

/// An image's root: its shared rootfs as the lower layer of an overlay
/// whose upper layer takes the sandbox's writes (no copy of the rootfs).
/// Inside a user namespace the overlay keeps its metadata in `user.*`
/// xattrs (`userxattr`). Where overlayfs is not available the image's
/// rootfs is used read-only, with tmpfs /tmp and the binds writable.
fn image_root(
    img: &super::config::ImageRoot,
    run_dir: &Path,
    binds: Vec<BindMount>,
) -> Result<PreparedRoot, RootfsError> {
    let ierr = |why: String| RootfsError::Image {
        path: img.lower.clone(),
        why,
    };
    if !img.lower.is_dir() {
        return Err(ierr("not unpacked (no such directory)".into()));
    }
    let upper = img.upper.clone().unwrap_or_else(|| run_dir.join("upper"));
    // overlayfs wants the work directory on the upper directory's filesystem.
    let work = match &img.upper {
        Some(u) => u.with_file_name(format!(
            "{}.work",
            u.file_name().and_then(|n| n.to_str()).unwrap_or("upper")
        )),
        None => run_dir.join("work"),
    };
    let merged = run_dir.join("merged");
    for d in [&upper, &work, &merged] {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(d)
            .map_err(|e| ierr(format!("{}: {e}", d.display())))?;
    }
    // The merged `/` takes the upper directory's owner and mode: make them
    // the image's own, or the sandbox's root could not write to `/`.
    if let Ok(m) = fs::metadata(&img.lower) {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        std::os::unix::fs::chown(&upper, Some(m.uid()), Some(m.gid()))
            // Another user's shared root (its owner is not mapped here):
            // `/` stays ours, which is the sandbox's root anyway.
            .or_else(|e| match e.raw_os_error() {
                Some(libc::EINVAL | libc::EPERM) if in_userns_caller() => Ok(()),
                _ => Err(e),
            })
            .and_then(|()| {
                fs::set_permissions(&upper, fs::Permissions::from_mode(m.mode() & 0o7777))
            })
            .map_err(|e| ierr(format!("{}: {e}", upper.display())))?;
    }
    let bad = |p: &Path| p.to_str().map(|s| s.contains([',', ':'])).unwrap_or(true);
    if [&img.lower, &upper, &work].iter().any(|p| bad(p)) {
        return Err(ierr(
            "paths with ',' or ':' cannot be overlay layers".into(),
        ));
    }
    let base = format!(
        "lowerdir={},upperdir={},workdir={}",
        img.lower.display(),
        upper.display(),
        work.display()
    );
    // Real root writes trusted.* xattrs; in a user namespace only user.*.
    let in_userns = !crate::host::userns::is_real_root();
    let attempts: Vec<String> = if in_userns {
        vec![format!("{base},userxattr")]
    } else {
        vec![base.clone(), format!("{base},userxattr")]
    };
    let mut last = String::new();
    for opts in &attempts {
        match nix::mount::mount(
            Some("overlay"),
            &merged,
            Some("overlay"),
            nix::mount::MsFlags::MS_NODEV,
            Some(opts.as_str()),
        ) {
            Ok(()) => {
                let overlay = Overlay {
                    merged: merged.clone(),
                    work: work.clone(),
                };
                for b in &binds {
                    make_mount_point(&merged, b)
                        .map_err(|e| ierr(format!("mount point {}: {e}", b.dst.display())))?;
                }
                for p in BASE_DIRS {
                    let d = merged.join(p);
                    if !d.exists() {
                        fs::create_dir(&d).map_err(|e| ierr(format!("/{p}: {e}")))?;
                    }
                }
                return Ok(PreparedRoot {
                    path: merged,
                    system_binds: Vec::new(),
                    binds,
                    writable: true,
                    overlay: Some(overlay),
                    note: None,
                });
            }
            Err(e) => last = e.to_string(),
        }
    }
    if img.upper.is_some() {
        // A build needs the layer it asked for.
        return Err(ierr(format!("overlayfs is not available here ({last})")));
    }
    for b in &binds {
        if fs::symlink_metadata(img.lower.join(b.dst.strip_prefix("/").unwrap_or(&b.dst))).is_err()
        {
            return Err(ierr(format!(
                "overlayfs is not available here ({last}) and the image has no mount point {}",
                b.dst.display()
            )));
        }
    }
    Ok(PreparedRoot {
        path: img.lower.clone(),
        system_binds: Vec::new(),
        binds,
        writable: false,
        overlay: None,
        note: Some(format!(
            "no overlayfs ({last}): the image's root is read-only; /tmp and binds are writable"
        )),
    })
}

/// Not real root: cbrun maps only its caller's ids.
fn in_userns_caller() -> bool {
    !crate::host::userns::is_real_root()
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
