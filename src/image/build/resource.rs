//! A case's resources (`source/env/resources.json`): fetched once (or taken
//! from `--resource-cache`), checked against their sha256, and unpacked
//! under their destination in the build's upper layer with the layer rules
//! (no escapes), before each attempt of the install command.

use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::digest::Digest;
use super::super::unpack::{apply_layer, decompress, OwnerMode, UnpackOptions};
use super::{BuildError, ResourcePlan};
use crate::sandbox::idmap::MappingSource;

/// Fetches (or takes from `cache`, else keeps in `scratch`) one resource
/// and checks its sha256; returns the local file.
pub(super) fn fetch_resource(
    r: &ResourcePlan,
    cache: Option<&Path>,
    scratch: &Path,
) -> Result<PathBuf, BuildError> {
    let rerr = |why: String| BuildError::Resource {
        id: r.id.clone(),
        why,
    };
    let want = Digest::parse(&format!("sha256:{}", r.sha256.to_ascii_lowercase()))
        .map_err(|e| rerr(e.to_string()))?;
    let cached = cache.map(|c| c.join(want.hex()));
    let path = match &cached {
        Some(p) if p.is_file() => p.clone(),
        _ => {
            let dir = cache
                .map(Path::to_path_buf)
                .unwrap_or_else(|| scratch.to_path_buf());
            fs::create_dir_all(&dir).map_err(|e| rerr(format!("{}: {e}", dir.display())))?;
            let tmp = dir.join(format!(".{}.part{}", want.hex(), std::process::id()));
            download(&r.url, &tmp).map_err(|e| rerr(format!("{}: {e}", r.url)))?;
            let dst = dir.join(want.hex());
            fs::rename(&tmp, &dst).map_err(|e| rerr(e.to_string()))?;
            dst
        }
    };
    let got = Digest::of_reader(fs::File::open(&path).map_err(|e| rerr(e.to_string()))?)
        .map_err(|e| rerr(e.to_string()))?;
    if got != want {
        let _ = fs::remove_file(&path);
        return Err(rerr(format!("sha256 mismatch: expected {want}, got {got}")));
    }
    Ok(path)
}

/// Unpacks (a tarball) or places (anything else) the fetched resource
/// `path` under its destination in the new layer.
pub(super) fn place_resource(
    r: &ResourcePlan,
    path: &Path,
    upper: &Path,
    mapping: &MappingSource,
) -> Result<(), BuildError> {
    let rerr = |why: String| BuildError::Resource {
        id: r.id.clone(),
        why,
    };
    let dest = upper.join(r.dest.strip_prefix("/").unwrap_or(&r.dest));
    fs::create_dir_all(&dest).map_err(|e| rerr(format!("{}: {e}", dest.display())))?;
    let f = fs::File::open(path).map_err(|e| rerr(e.to_string()))?;
    let owner = match mapping {
        MappingSource::RootRange { start, .. } => OwnerMode::Preserve {
            uid_shift: *start,
            gid_shift: *start,
        },
        _ => OwnerMode::Caller,
    };
    // Tarballs (plain, gzip, zstd) unpack with the layer rules (no escapes);
    // anything else is placed as a file named after the URL.
    let mut r2 = BufReader::new(f);
    let looks_tar = {
        let mut probe = decompress(BufReader::new(
            fs::File::open(path).map_err(|e| rerr(e.to_string()))?,
        ))
        .map_err(|e| rerr(e.to_string()))?;
        let mut head = [0u8; 512];
        let n = read_full(&mut probe, &mut head);
        n == 512 && &head[257..262] == b"ustar"
    };
    if looks_tar {
        let d = decompress(r2).map_err(|e| rerr(e.to_string()))?;
        apply_layer(
            &dest,
            d,
            &UnpackOptions {
                owner,
                ..UnpackOptions::default()
            },
        )
        .map_err(|e| rerr(format!("unpacking: {}", crate::error::Chain(&e))))?;
    } else {
        let name = r
            .url
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty() && !n.contains(".."))
            .unwrap_or("resource");
        let mut out =
            fs::File::create(dest.join(name)).map_err(|e| rerr(format!("{name}: {e}")))?;
        io::copy(&mut r2, &mut out).map_err(|e| rerr(e.to_string()))?;
    }
    Ok(())
}

fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    n
}

fn download(url: &str, to: &Path) -> io::Result<()> {
    if let Some(p) = url.strip_prefix("file://") {
        fs::copy(p, to)?;
        return Ok(());
    }
    let resp = ureq::get(url)
        .timeout(Duration::from_secs(600))
        .call()
        .map_err(io::Error::other)?;
    let mut f = fs::File::create(to)?;
    io::copy(&mut resp.into_reader(), &mut f)?;
    f.sync_all()
}
