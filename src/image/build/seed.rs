//! Files a build sandbox needs that the image must not keep: an apt
//! setting (`APT::Sandbox::User "root"` where `_apt` cannot exist, a CA
//! for apt's https method) and a CA bundle standing in for the image's own
//! system store. They are written into the upper layer before the install
//! command runs, owned and moded like the image's own files, and taken out
//! again before the layer is captured; so are the mount points the build's
//! binds (`/env-assets`, [`crate::image::ca::BUNDLE_DIR`]) left in it.
//!
//! After the install command the upper layer holds what a possibly hostile
//! recipe wrote: every look at it goes through [`Dir`] (no link followed).

use std::fs;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::BuildError;
use crate::sys::at;
use crate::sys::dir::Dir;

/// Where the build-only apt setting goes (relative to the root).
pub const APT_CONF: &str = "etc/apt/apt.conf.d/00cbrun-build-sandbox";

/// One build-only file.
#[derive(Debug)]
pub struct Seed {
    /// Relative to the root.
    pub rel: PathBuf,
    pub contents: Vec<u8>,
    /// Bytes cbrun appended to the image's own file (a CA block): taken
    /// out again wherever the install command left the file, unless it
    /// rewrote it whole.
    pub appended: Option<Vec<u8>>,
    /// The image's own file at `rel`, when it has one.
    pub original: Option<Vec<u8>>,
}

/// What [`place`] made, for [`take_out`].
#[derive(Debug, Default)]
pub struct Placed {
    seeds: Vec<Seed>,
    /// Directories made in the upper layer for the seeds, outermost first.
    dirs: Vec<PathBuf>,
}

fn lerr(path: &Path) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Layer {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes each seed into `upper`, owned and moded like the image's file
/// at that place (or its `/`), creating parents as the image has them.
pub fn place(lower: &Path, upper: &Path, seeds: Vec<Seed>) -> Result<Placed, BuildError> {
    let mut placed = Placed::default();
    for s in &seeds {
        if let Some(parent) = s.rel.parent() {
            placed.dirs.extend(mkdirs_as_lower(lower, upper, parent)?);
        }
        let dst = upper.join(&s.rel);
        fs::write(&dst, &s.contents).map_err(lerr(&dst))?;
        let like = lower.join(&s.rel);
        let m = fs::symlink_metadata(&like)
            .ok()
            .filter(|m| m.is_file())
            .map(Ok)
            .unwrap_or_else(|| fs::metadata(lower))
            .map_err(lerr(lower))?;
        std::os::unix::fs::chown(&dst, Some(m.uid()), Some(m.gid())).map_err(lerr(&dst))?;
        let mode = if m.is_file() { m.mode() & 0o777 } else { 0o644 };
        fs::set_permissions(&dst, fs::Permissions::from_mode(mode)).map_err(lerr(&dst))?;
    }
    placed.seeds = seeds;
    Ok(placed)
}

/// Takes the seeds out of `upper` after the install command: a seed left
/// as written goes; one the command changed keeps the command's bytes,
/// less what cbrun appended. Then the directories made for them go when
/// empty, and the binds' mount points (`mount_points`, names the image
/// does not have) go whatever is in them. Returns warnings.
pub fn take_out(
    lower: &Path,
    upper: &Path,
    placed: &Placed,
    mount_points: &[&str],
) -> Result<Vec<String>, BuildError> {
    let mut warnings = Vec::new();
    let dir = Dir::open(upper).map_err(|e| BuildError::Layer {
        path: upper.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    for s in &placed.seeds {
        let Some((now, st)) = read_file(&dir, &s.rel) else {
            // Removed or replaced by something other than a file: the
            // command's doing, left as it is unless it is ours to remove.
            continue;
        };
        let keep = if now == s.contents {
            None
        } else if let Some(app) = &s.appended {
            let stripped = strip(&now, app);
            if s.original.as_deref() == Some(&stripped[..]) {
                None
            } else {
                Some(stripped)
            }
        } else if s.rel == Path::new(APT_CONF) {
            warnings.push(format!(
                "/{APT_CONF} (cbrun's build-only apt setting) was changed by the install command; removed"
            ));
            None
        } else {
            Some(now)
        };
        match keep {
            None => {
                let _ = dir.remove(&s.rel);
            }
            Some(bytes) => {
                if let Err(e) = rewrite(&dir, &s.rel, &bytes, &st) {
                    warnings.push(format!("/{}: {e}", s.rel.display()));
                }
            }
        }
    }
    for d in placed.dirs.iter().rev() {
        if let Ok(rel) = d.strip_prefix(upper) {
            // Fails (and stays) when the command put something in it.
            let _ = fs::remove_dir(upper.join(rel));
        }
    }
    for m in mount_points {
        let rel = m.trim_start_matches('/');
        if fs::symlink_metadata(lower.join(rel)).is_err() {
            let _ = dir.remove(rel);
        }
    }
    Ok(warnings)
}

/// The regular file `rel` (no link followed, at most 64 MiB) and its stat.
fn read_file(dir: &Dir, rel: &Path) -> Option<(Vec<u8>, libc::stat)> {
    let (f, st) = dir.open_read(rel).ok()?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, 64 << 20), &mut bytes).ok()?;
    (bytes.len() as i64 == st.st_size).then_some((bytes, st))
}

/// Replaces `rel` with `bytes`, keeping the owner and mode `st` had.
fn rewrite(dir: &Dir, rel: &Path, bytes: &[u8], st: &libc::stat) -> Result<(), String> {
    dir.write_replace(rel, bytes, st.st_mode & 0o777)
        .map_err(|e| e.to_string())?;
    let name = rel.file_name().ok_or("no file name")?;
    let parent = match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => dir.open_dir(p).map_err(|e| e.to_string())?,
        None => dir.try_clone().map_err(|e| e.to_string())?,
    };
    let c = at::cpath(name).map_err(|e| e.to_string())?;
    at::chown_at_nofollow(parent.as_fd(), &c, st.st_uid, st.st_gid).map_err(|e| e.to_string())
}

/// `now` without the first occurrence of `app`.
fn strip(now: &[u8], app: &[u8]) -> Vec<u8> {
    if app.is_empty() {
        return now.to_vec();
    }
    match now.windows(app.len()).position(|w| w == app) {
        Some(i) => {
            let mut out = now[..i].to_vec();
            out.extend_from_slice(&now[i + app.len()..]);
            out
        }
        None => now.to_vec(),
    }
}

/// Creates `rel` under the upper layer, each directory owned and moded like
/// the image's own (the overlay shows the upper directory's attributes, so
/// a directory made by cbrun would otherwise hide the image's root owner).
/// Returns the directories it made, outermost first.
pub fn mkdirs_as_lower(lower: &Path, upper: &Path, rel: &Path) -> Result<Vec<PathBuf>, BuildError> {
    let mut made = Vec::new();
    let mut cur = PathBuf::new();
    for c in rel.components() {
        cur.push(c);
        let dir = upper.join(&cur);
        if dir.is_dir() {
            continue;
        }
        fs::create_dir(&dir).map_err(lerr(&dir))?;
        made.push(dir.clone());
        let like = lower.join(&cur);
        let like = if like.is_dir() {
            like
        } else {
            lower.to_path_buf()
        };
        let m = fs::metadata(&like).map_err(lerr(&like))?;
        std::os::unix::fs::chown(&dir, Some(m.uid()), Some(m.gid())).map_err(lerr(&dir))?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(m.mode() & 0o7777))
            .map_err(lerr(&dir))?;
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_takes_out_one_block() {
        assert_eq!(strip(b"AAcbrunBB", b"cbrun"), b"AABB");
        assert_eq!(strip(b"AABB", b"cbrun"), b"AABB");
    }

    #[test]
    fn seeds_go_unless_the_command_changed_them() {
        let t = std::env::temp_dir().join(format!("cbrun-seed-{}", std::process::id()));
        let _ = fs::remove_dir_all(&t);
        let (lower, upper) = (t.join("lower"), t.join("upper"));
        fs::create_dir_all(lower.join("etc/ssl/certs")).unwrap();
        fs::create_dir_all(&upper).unwrap();
        fs::write(lower.join("etc/ssl/certs/ca-certificates.crt"), "OWN\n").unwrap();
        let seeds = vec![
            Seed {
                rel: APT_CONF.into(),
                contents: b"APT::Sandbox::User \"root\";\n".to_vec(),
                appended: None,
                original: None,
            },
            Seed {
                rel: "etc/ssl/certs/ca-certificates.crt".into(),
                contents: b"OWN\nEXTRA\n".to_vec(),
                appended: Some(b"EXTRA\n".to_vec()),
                original: Some(b"OWN\n".to_vec()),
            },
        ];
        let p = place(&lower, &upper, seeds).unwrap();
        assert!(upper.join(APT_CONF).is_file());
        // The command appends to the bundle: its line stays, cbrun's goes.
        fs::write(
            upper.join("etc/ssl/certs/ca-certificates.crt"),
            "OWN\nEXTRA\nMINE\n",
        )
        .unwrap();
        fs::create_dir_all(upper.join("env-assets")).unwrap();
        let w = take_out(&lower, &upper, &p, &["/env-assets"]).unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert!(!upper.join("etc/apt").exists(), "made directories go");
        assert!(!upper.join("env-assets").exists());
        assert_eq!(
            fs::read_to_string(upper.join("etc/ssl/certs/ca-certificates.crt")).unwrap(),
            "OWN\nMINE\n"
        );
        fs::remove_dir_all(&t).unwrap();
    }
}
