//! An image's layers unpacked once into a shared, read-only root filesystem
//! under the store (`rootfs/<manifest hex>/`), which every sandbox of the
//! image uses as the lower layer of its overlay.

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
    #[error("unpacking {image}: {source}")]
    Unpack { image: String, source: UnpackError },
    #[error("unpacking {image}: layer {index}: {source}")]
    Layer {
        image: String,
        index: usize,
        source: std::io::Error,
    },
    #[error("unpacking {image}: {path}: {source}")]
    Io {
        image: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The unpacked root of an image and the hold that keeps gc off it.
pub struct Unpacked {
    pub path: PathBuf,
    /// Set when this call did the unpacking.
    pub report: Option<UnpackReport>,
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
    if dir.is_dir() {
        return Ok(Unpacked {
            path: dir,
            report: None,
            _hold: hold,
        });
    }
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
    Ok(Unpacked {
        path: dir,
        report: Some(report),
        _hold: hold,
    })
}

/// What a sandbox needs from an image: its root and its config's defaults.
pub struct ImageUse {
    pub root: crate::sandbox::config::ImageRoot,
    /// `Env` of the image config, in order.
    pub env: Vec<(String, String)>,
    pub workdir: Option<PathBuf>,
    pub unpacked: Unpacked,
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
