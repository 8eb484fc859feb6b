//! The install cache: an agent CLI installed once, reused by later trials.
//!
//! A spec with an `install_dir` (a folder of its home that `install_script`
//! fills) and a pinned `version` is cacheable. The first trial runs the
//! install as usual; cbrun then copies `home/<install_dir>` into the cache
//! (with the hostile-tree copy of [`crate::trial::copy`]: no link
//! followed, setuid bits and special files dropped, size capped) and binds
//! that copy read-only at `<home>/<install_dir>`, in that trial and every
//! later one with the same key, instead of installing again.
//!
//! The key is a hash of the spec (its hash covers the install script,
//! home, user and the pin), the effective version (`--agent-version`
//! included), the root filesystem's identity (an image's digest; for the
//! host, its `os-release` and the `node` binaries' size and time; for a
//! directory, its path and time) and the machine's architecture. A moving
//! version (`latest`, any tag not starting with a digit) is never cached.
//!
//! Where: `<data>/agents/<key>/` next to the image store (`$CBRUN_HOME`,
//! else `/var/lib/cbrun` for root, else `$XDG_DATA_HOME/cbrun` or
//! `~/.local/share/cbrun`), owned by cbrun's user: `tree/` is the copy,
//! `meta.json` says what it is. An entry is published by renaming a
//! finished temporary folder, so a killed cbrun leaves no half entry;
//! two trials installing at once both copy, and the first rename wins.
//! Nothing evicts entries: remove `<data>/agents/` to reclaim the space.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::spec::AgentSpec;
use crate::sandbox::config::RootfsSource;
use crate::trial::copy::{copy_workspace, CopyLimits};

/// Bumped when the layout of an entry changes.
const FORMAT: &str = "cbrun-agent-cache-1";

/// The cache folder: `<data>/agents`.
#[derive(Debug, Clone)]
pub struct InstallCache {
    pub root: PathBuf,
}

/// What identifies one cached install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheKey {
    /// `sha256` hex of the fields below.
    pub hex: String,
    pub agent: String,
    pub spec_hash: String,
    pub version: String,
    pub rootfs: String,
    pub arch: String,
}

/// What `meta.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub key: CacheKey,
    pub install_dir: String,
    pub created_at: String,
    pub install_seconds: f64,
    pub files: u64,
    pub bytes: u64,
}

/// Whether a version names one release (a number), not a moving tag.
pub fn pinned(version: &str) -> bool {
    version.chars().next().is_some_and(|c| c.is_ascii_digit())
}

/// The root filesystem's identity, as far as it decides what an install
/// produces.
pub fn rootfs_identity(rootfs: &RootfsSource) -> String {
    match rootfs {
        RootfsSource::Image(i) => format!("image:{}", i.label),
        RootfsSource::Dir(d) => {
            let canon = fs::canonicalize(d).unwrap_or_else(|_| d.clone());
            let t = fs::metadata(&canon).map(|m| m.mtime()).unwrap_or(0);
            format!("dir:{}@{t}", canon.display())
        }
        RootfsSource::Host => {
            let mut h = Sha256::new();
            h.update(fs::read("/etc/os-release").unwrap_or_default());
            for node in ["/usr/bin/node", "/usr/local/bin/node", "/bin/node"] {
                if let Ok(m) = fs::metadata(node) {
                    h.update(format!("{node}:{}:{}\n", m.len(), m.mtime()).as_bytes());
                }
            }
            format!("host:{}", &hex(&h.finalize())[..16])
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl CacheKey {
    pub fn new(spec: &AgentSpec, version: &str, rootfs: &RootfsSource) -> CacheKey {
        let rootfs = rootfs_identity(rootfs);
        let arch = std::env::consts::ARCH.to_owned();
        let spec_hash = spec.hash();
        let text = format!(
            "{FORMAT}\n{}\n{spec_hash}\n{version}\n{rootfs}\n{arch}\n",
            spec.name
        );
        CacheKey {
            hex: hex(&Sha256::digest(text.as_bytes())),
            agent: spec.name.clone(),
            spec_hash,
            version: version.to_owned(),
            rootfs,
            arch,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("agent install cache {path}: {err}")]
    Io { path: PathBuf, err: io::Error },
    #[error("agent install cache: copying the install: {0}")]
    Copy(String),
}

fn ioe(path: &Path) -> impl FnOnce(io::Error) -> CacheError + '_ {
    move |err| CacheError::Io {
        path: path.to_path_buf(),
        err,
    }
}

impl InstallCache {
    /// The cache next to the default image store.
    pub fn default_location() -> Result<InstallCache, String> {
        let data =
            crate::image::store::Store::default_root().map_err(|e| crate::error::chain(&e))?;
        Ok(InstallCache {
            root: data.join("agents"),
        })
    }

    pub fn at(root: impl Into<PathBuf>) -> InstallCache {
        InstallCache { root: root.into() }
    }

    fn entry(&self, key: &CacheKey) -> PathBuf {
        self.root.join(&key.hex)
    }

    /// The cached tree for `key`, when there is a complete entry.
    pub fn lookup(&self, key: &CacheKey) -> Option<PathBuf> {
        let e = self.entry(key);
        let meta: Meta = serde_json::from_slice(&fs::read(e.join("meta.json")).ok()?).ok()?;
        if meta.key != *key {
            return None;
        }
        let tree = e.join("tree");
        let m = fs::symlink_metadata(&tree).ok()?;
        m.is_dir().then_some(tree)
    }

    /// Copies `src` (a sandbox-written folder) in as the entry for `key`
    /// and returns its tree. When another cbrun published the same key
    /// first, that entry is returned and this copy discarded.
    pub fn store(
        &self,
        key: &CacheKey,
        src: &Path,
        install_dir: &str,
        install_seconds: f64,
    ) -> Result<PathBuf, CacheError> {
        if let Some(t) = self.lookup(key) {
            return Ok(t);
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&self.root)
            .map_err(ioe(&self.root))?;
        let own = fs::metadata(&self.root).map_err(ioe(&self.root))?;
        if own.uid() != nix::unistd::geteuid().as_raw() {
            return Err(CacheError::Io {
                path: self.root.clone(),
                err: io::Error::other("is not owned by this user"),
            });
        }
        // Plain paths are safe here: the cache root is this user's own (checked
        // above) and no sandbox can write it (entries are bound read-only);
        // the sandbox-written install is read only through the hostile-tree copy.
        let tmp = self
            .root
            .join(format!(".tmp-{}-{}", std::process::id(), &key.hex[..16]));
        let _ = fs::remove_dir_all(&tmp);
        fs::DirBuilder::new()
            .mode(0o755)
            .create(&tmp)
            .map_err(ioe(&tmp))?;
        let result = (|| {
            let report = copy_workspace(src, &tmp.join("tree"), &CopyLimits::default())
                .map_err(|e| CacheError::Copy(e.to_string()))?;
            let meta = Meta {
                key: key.clone(),
                install_dir: install_dir.to_owned(),
                created_at: crate::trial::clock::rfc3339(std::time::SystemTime::now()),
                install_seconds,
                files: report.files,
                bytes: report.bytes,
            };
            let bytes =
                serde_json::to_vec_pretty(&meta).map_err(|e| CacheError::Copy(e.to_string()))?;
            let m = tmp.join("meta.json");
            fs::write(&m, bytes).map_err(ioe(&m))?;
            let entry = self.entry(key);
            match fs::rename(&tmp, &entry) {
                Ok(()) => Ok(()),
                // Someone else published this key first.
                Err(_) if self.lookup(key).is_some() => Ok(()),
                Err(e) => Err(CacheError::Io {
                    path: entry,
                    err: e,
                }),
            }
        })();
        let _ = fs::remove_dir_all(&tmp);
        result?;
        self.lookup(key).ok_or_else(|| CacheError::Io {
            path: self.entry(key),
            err: io::Error::other("entry missing right after it was published"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::spec::{parse, Format};

    fn spec(extra: &str) -> AgentSpec {
        parse(
            &format!("name = \"a\"\ncommand = \"x\"\ninstall_script = \"i\"\ninstall_dir = \".cli\"\n{extra}"),
            Format::Toml,
            "a.toml",
        )
        .unwrap()
    }

    #[test]
    fn pins_and_keys() {
        assert!(pinned("2.1.197"));
        assert!(!pinned("latest"));
        assert!(!pinned("next"));
        assert!(!pinned(""));
        let s = spec("version = \"1.0.0\"");
        let a = CacheKey::new(&s, "1.0.0", &RootfsSource::Host);
        assert_eq!(a, CacheKey::new(&s, "1.0.0", &RootfsSource::Host), "stable");
        assert_ne!(a.hex, CacheKey::new(&s, "1.0.1", &RootfsSource::Host).hex);
        assert_ne!(
            a.hex,
            CacheKey::new(&spec("version = \"1.0.1\""), "1.0.0", &RootfsSource::Host).hex
        );
        let d = std::env::temp_dir();
        assert_ne!(a.hex, CacheKey::new(&s, "1.0.0", &RootfsSource::Dir(d)).hex);
        assert!(a.rootfs.starts_with("host:"));
    }

    #[test]
    fn store_copies_without_following_links_and_lookup_finds_it() {
        let d = std::env::temp_dir().join(format!("cbrun-agent-cache-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        let src = d.join("home/.cli");
        fs::create_dir_all(src.join("bin")).unwrap();
        fs::write(src.join("bin/tool"), "#!/bin/sh\n").unwrap();
        fs::write(d.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(d.join("secret"), src.join("bin/link")).unwrap();
        std::os::unix::fs::symlink("tool", src.join("bin/rel")).unwrap();
        let cache = InstallCache::at(d.join("data/agents"));
        let s = spec("version = \"1.0.0\"");
        let key = CacheKey::new(&s, "1.0.0", &RootfsSource::Host);
        assert!(cache.lookup(&key).is_none());
        let tree = cache.store(&key, &src, ".cli", 1.5).unwrap();
        assert_eq!(
            fs::read_to_string(tree.join("bin/tool")).unwrap(),
            "#!/bin/sh\n"
        );
        // Links are copied as links, never followed.
        assert_eq!(
            fs::read_link(tree.join("bin/link")).unwrap(),
            d.join("secret")
        );
        assert!(fs::symlink_metadata(tree.join("bin/link"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(cache.lookup(&key), Some(tree.clone()));
        // A second store of the same key keeps the first entry.
        fs::write(src.join("bin/tool"), "changed").unwrap();
        assert_eq!(cache.store(&key, &src, ".cli", 1.0).unwrap(), tree);
        assert_eq!(
            fs::read_to_string(tree.join("bin/tool")).unwrap(),
            "#!/bin/sh\n"
        );
        // No temporary folder is left.
        let left: Vec<_> = fs::read_dir(&cache.root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
        // A meta.json for another key is not a hit.
        let other = CacheKey::new(&s, "1.0.1", &RootfsSource::Host);
        fs::create_dir_all(cache.root.join(&other.hex)).unwrap();
        fs::copy(
            cache.root.join(&key.hex).join("meta.json"),
            cache.root.join(&other.hex).join("meta.json"),
        )
        .unwrap();
        assert!(cache.lookup(&other).is_none());
        // A source that is a link is refused.
        let link = d.join("home/.linkdir");
        std::os::unix::fs::symlink(&src, &link).unwrap();
        let k3 = CacheKey::new(&s, "9.9.9", &RootfsSource::Host);
        assert!(cache.store(&k3, &link, ".cli", 1.0).is_err());
        assert!(cache.lookup(&k3).is_none());
        fs::remove_dir_all(&d).unwrap();
    }
}
