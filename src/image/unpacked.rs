//! An image's layers unpacked once into a shared, read-only root filesystem
//! under the store (`rootfs/<manifest hex>/`), which every sandbox of the
//! image uses as the lower layer of its overlay.
//!
//! Who owns its files depends on the sandboxes' id mapping: real root's
//! map 65536 ids onto a high host range, so the files keep the layers'
//! ids shifted there; a rootless user's map only that user, so the user
//! owns every file. An overlay can copy a lower file up (the first write
//! to it, or to a directory holding a new file) only when its owner is
//! mapped in the sandbox.
//!
//! In another user's shared store nothing is unpacked: a reader uses
//! `rootfs/<hex>.u<UID>g<GID>/` when the store's owner made one for it
//! (`cbrun image unpack NAME --for-user UID[:GID]`, real root only), with
//! every file the reader's, so the overlay behaves as in the reader's own
//! store; else the owner's own `rootfs/<hex>/`, whose files the reader's
//! sandbox does not map: readable as their modes allow, but writes to the
//! image's own files and directories fail (overlayfs cannot copy them up),
//! leaving `/tmp`, the binds and new top-level folders writable. That is
//! said as a note.

use std::fs;
use std::path::PathBuf;

use super::store::{remove_tree, Hold, ResolvedImage, Store, StoreError};
use super::unpack::{
    apply_layers, decompress, OwnerMode, UnpackError, UnpackOptions, UnpackReport,
};
use crate::sandbox::idmap::MappingSource;

#[derive(Debug, thiserror::Error)]
pub enum UnpackedError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("unpacking {image}")]
    Unpack { image: String, source: UnpackError },
    #[error("unpacking {image}: layer {index}")]
    Layer {
        image: String,
        index: usize,
        source: std::io::Error,
    },
    #[error("unpacking {image}: {path}")]
    Io {
        image: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{image} is not unpacked in the shared store {store} (read-only for you): its owner must run `cbrun image unpack {image}` (or `--for-user {uid}:{gid}` for a root of your own)")]
    NotUnpacked {
        image: String,
        store: PathBuf,
        uid: u32,
        gid: u32,
    },
    #[error("unpacking for another user needs real root")]
    ForUserNeedsRoot,
}

/// The unpacked root of an image and the hold that keeps gc off it.
pub struct Unpacked {
    pub path: PathBuf,
    /// Set when this call did the unpacking.
    pub report: Option<UnpackReport>,
    /// How the root falls short, when it does (another user's files).
    pub note: Option<String>,
    _hold: Hold,
}

/// Who owns the files of an unpacked root. Real root's sandboxes map their
/// ids onto a high host range, so files keep their ids shifted there; a
/// single-id sandbox sees every file as its own.
pub fn owner_mode(mapping: &MappingSource) -> OwnerMode {
    match mapping {
        MappingSource::RootRange { start, .. } => OwnerMode::Preserve {
            uid_shift: *start,
            gid_shift: *start,
        },
        _ => OwnerMode::Caller,
    }
}

/// Unpacks `img` unless it already is. Concurrent callers each build in
/// their own temp folder; the first rename wins and the others drop theirs.
pub fn ensure_unpacked(
    store: &Store,
    img: &ResolvedImage,
    owner: OwnerMode,
) -> Result<Unpacked, UnpackedError> {
    let hold = store.hold()?;
    let dir = store.rootfs_dir(&img.manifest_digest);
    if let super::store::Access::ReadOnly { owner } = store.access() {
        return shared_root(store, img, owner, hold);
    }
    if dir.is_dir() {
        return Ok(Unpacked {
            path: dir,
            report: None,
            note: None,
            _hold: hold,
        });
    }
    let (report, dir) = unpack_into(store, img, owner, &dir, None)?;
    Ok(Unpacked {
        path: dir,
        report: Some(report),
        note: None,
        _hold: hold,
    })
}

/// A reader's root in another user's shared store (see the module docs).
fn shared_root(
    store: &Store,
    img: &ResolvedImage,
    owner: u32,
    hold: Hold,
) -> Result<Unpacked, UnpackedError> {
    let (uid, gid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let mine = store.rootfs_dir_for(&img.manifest_digest, uid, gid);
    if mine.is_dir() {
        return Ok(Unpacked {
            path: mine,
            report: None,
            note: None,
            _hold: hold,
        });
    }
    let theirs = store.rootfs_dir(&img.manifest_digest);
    if theirs.is_dir() {
        return Ok(Unpacked {
            path: theirs,
            report: None,
            note: Some(format!(
                "{}: the shared store's own root (its files belong to uid {owner}'s sandboxes): \
                 readable, but the image's own files and folders cannot be changed; \
                 `cbrun image unpack {} --for-user {uid}:{gid}` by the store's owner gives you a root of your own",
                img.reference, img.reference
            )),
            _hold: hold,
        });
    }
    Err(UnpackedError::NotUnpacked {
        image: img.reference.to_string(),
        store: store.root().to_path_buf(),
        uid,
        gid,
    })
}

/// Unpacks `img` (as the store's owner, real root) into
/// `rootfs/<hex>.u<UID>g<GID>/` for a user whose sandboxes map only
/// `uid:gid`: unpacked as for a single-id mapping, then every entry given
/// to that user (links not followed), before it takes its name.
pub fn unpack_for_user(
    store: &Store,
    img: &ResolvedImage,
    uid: u32,
    gid: u32,
) -> Result<Unpacked, UnpackedError> {
    if !crate::host::userns::is_real_root() {
        return Err(UnpackedError::ForUserNeedsRoot);
    }
    store.check_writable("unpacking")?;
    let hold = store.hold()?;
    let dir = store.rootfs_dir_for(&img.manifest_digest, uid, gid);
    if dir.is_dir() {
        return Ok(Unpacked {
            path: dir,
            report: None,
            note: None,
            _hold: hold,
        });
    }
    let (report, dir) = unpack_into(store, img, OwnerMode::Caller, &dir, Some((uid, gid)))?;
    Ok(Unpacked {
        path: dir,
        report: Some(report),
        note: None,
        _hold: hold,
    })
}

/// Gives every entry under `dir` (and `dir`) to `uid:gid`, following no
/// link: the tree was just made by this process in the store's `tmp/`.
fn chown_tree(dir: &std::path::Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid))?;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            std::os::unix::fs::lchown(&p, Some(uid), Some(gid))?;
            if e.file_type()?.is_dir() {
                stack.push(p);
            }
        }
    }
    Ok(())
}

/// Unpacks into a temp folder (given to `chown` when set) and renames it to
/// `dir`. Concurrent callers each build their own; the first rename wins.
fn unpack_into(
    store: &Store,
    img: &ResolvedImage,
    owner: OwnerMode,
    dir: &std::path::Path,
    chown: Option<(u32, u32)>,
) -> Result<(UnpackReport, PathBuf), UnpackedError> {
    let dir = dir.to_path_buf();
    let name = img.reference.to_string();
    let tmp = store.temp_path("rootfs");
    let io = |path: &PathBuf| {
        let image = name.clone();
        let path = path.clone();
        move |source| UnpackedError::Io {
            image,
            path,
            source,
        }
    };
    fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    // `/` belongs to the image's root too, also when no layer names `./`.
    if let OwnerMode::Preserve {
        uid_shift,
        gid_shift,
    } = owner
    {
        std::os::unix::fs::chown(&tmp, Some(uid_shift), Some(gid_shift)).map_err(io(&tmp))?;
    }
    let result = (|| {
        let mut readers = Vec::with_capacity(img.layers.len());
        for (i, layer) in img.layers.iter().enumerate() {
            let digest =
                super::layout::descriptor_digest(layer).map_err(|why| UnpackedError::Layer {
                    image: name.clone(),
                    index: i + 1,
                    source: std::io::Error::other(why),
                })?;
            let blob = store.open_blob(&digest)?;
            let r = decompress(blob).map_err(|source| UnpackedError::Layer {
                image: name.clone(),
                index: i + 1,
                source,
            })?;
            readers.push(r);
        }
        let opts = UnpackOptions {
            owner,
            ..UnpackOptions::default()
        };
        apply_layers(&tmp, readers, &opts).map_err(|source| UnpackedError::Unpack {
            image: name.clone(),
            source,
        })
    })();
    let result = result.and_then(|r| match chown {
        Some((uid, gid)) => chown_tree(&tmp, uid, gid).map(|()| r).map_err(io(&tmp)),
        None => Ok(r),
    });
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = remove_tree(&tmp);
            return Err(e);
        }
    };
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).map_err(io(&dir))?;
    }
    if let Err(e) = fs::rename(&tmp, &dir) {
        let _ = remove_tree(&tmp);
        if !dir.is_dir() {
            return Err(io(&dir)(e));
        }
    }
    Ok((report, dir))
}

/// What a sandbox needs from an image: its root and its config's defaults.
pub struct ImageUse {
    pub root: crate::sandbox::config::ImageRoot,
    /// `Env` of the image config, in order.
    pub env: Vec<(String, String)>,
    pub workdir: Option<PathBuf>,
    pub unpacked: Unpacked,
}

impl ImageUse {
    /// How the root falls short, when it does (see [`Unpacked::note`]).
    pub fn note(&self) -> Option<&str> {
        self.unpacked.note.as_deref()
    }
}

/// Resolves `name` in `store`, unpacks it if needed, and returns the root a
/// sandbox runs on (with a fresh writable layer unless `upper` is given).
pub fn use_image(
    store: &Store,
    name: &str,
    mapping: &MappingSource,
    upper: Option<PathBuf>,
) -> Result<ImageUse, UnpackedError> {
    let img = store.resolve(name)?;
    let unpacked = ensure_unpacked(store, &img, owner_mode(mapping))?;
    let cfg = img.config.config().clone().unwrap_or_default();
    let env = cfg
        .env()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect();
    let workdir = cfg
        .working_dir()
        .clone()
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from);
    Ok(ImageUse {
        root: crate::sandbox::config::ImageRoot {
            lower: unpacked.path.clone(),
            upper,
            label: format!("{}@{}", img.reference, img.manifest_digest),
        },
        env,
        workdir,
        unpacked,
    })
}
