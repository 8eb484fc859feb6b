//! `cbrun image export NAME --format oci-dir|oci-archive --output PATH`:
//! write an image of the store as an OCI image layout (`oci-layout`,
//! `index.json` naming the one manifest with its tag in
//! `org.opencontainers.image.ref.name`, `blobs/sha256/...`), as a directory
//! or as a tar. Readable by `skopeo` (`oci:DIR:TAG`, `oci-archive:FILE:TAG`)
//! and `umoci` (`--image DIR:TAG`).
//!
//! Output is written next to its final place under a temp name and renamed
//! into place, so a failed export leaves nothing behind. The archive is
//! deterministic: the same image gives the same bytes (entries in a fixed
//! order, mtime 0, uid/gid 0, modes 0644/0755, no user names).

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;

use super::digest::Digest;
use super::layout;
use super::store::{remove_tree, Store, StoreError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExportFormat {
    OciDir,
    OciArchive,
}

impl fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExportFormat::OciDir => "oci-dir",
            ExportFormat::OciArchive => "oci-archive",
        })
    }
}

impl FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "oci-dir" | "oci" => Ok(ExportFormat::OciDir),
            "oci-archive" => Ok(ExportFormat::OciArchive),
            _ => Err(format!("format {s:?}: expected oci-dir or oci-archive")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub format: ExportFormat,
    /// Replace an existing output (a file, or a directory that is an OCI
    /// layout or empty; anything else is refused even so).
    pub force: bool,
    /// The `org.opencontainers.image.ref.name` to record (default: the tag;
    /// none for an image named by digest only).
    pub ref_name: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    pub output: PathBuf,
    pub format: ExportFormat,
    pub manifest_digest: Digest,
    pub ref_name: Option<String>,
    pub blobs: usize,
    /// Bytes of blobs written.
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("export to {}: {msg}", path.display())]
    Output { path: PathBuf, msg: String },
    #[error("export {image}")]
    Store { image: String, source: StoreError },
}

/// Export the image `name` (`name[:tag]` or `name@sha256:...`) to `output`.
pub fn export(
    store: &Store,
    name: &str,
    output: &Path,
    opts: &ExportOptions,
) -> Result<ExportReport, ExportError> {
    let serr = |source| ExportError::Store {
        image: name.to_owned(),
        source,
    };
    let oerr = |msg: String| ExportError::Output {
        path: output.to_path_buf(),
        msg,
    };
    let _hold = store.hold().map_err(serr)?;
    let img = store.resolve(name).map_err(serr)?;
    let manifest_bytes = store
        .read_blob_verified(&img.manifest_digest)
        .map_err(serr)?;
    let media_type = layout::sniff_manifest_media_type(&manifest_bytes)
        .unwrap_or_else(|| layout::MT_OCI_MANIFEST.to_owned());
    let desc = layout::descriptor(
        &media_type,
        &img.manifest_digest,
        manifest_bytes.len() as u64,
    );
    let ref_name = opts.ref_name.clone().or_else(|| img.reference.tag.clone());
    let index = layout::index_bytes(&desc, ref_name.as_deref());

    // Blobs in a fixed order: manifest, config, layers (each once).
    let mut blobs: Vec<(Digest, u64)> =
        vec![(img.manifest_digest.clone(), manifest_bytes.len() as u64)];
    for d in std::iter::once(img.manifest.config()).chain(img.layers.iter()) {
        let digest = layout::descriptor_digest(d).map_err(|why| {
            serr(StoreError::Invalid {
                what: format!("manifest {}", img.manifest_digest),
                why,
            })
        })?;
        if !blobs.iter().any(|(b, _)| b == &digest) {
            blobs.push((digest, d.size()));
        }
    }

    // Output checks.
    let existing = output.symlink_metadata().ok();
    if let Some(m) = &existing {
        if !opts.force {
            return Err(oerr(
                "already exists; pass --force to replace it".to_owned(),
            ));
        }
        match opts.format {
            ExportFormat::OciArchive if m.is_dir() => {
                return Err(oerr("is a directory".to_owned()))
            }
            ExportFormat::OciDir if !m.is_dir() => {
                return Err(oerr("exists and is not a directory".to_owned()))
            }
            ExportFormat::OciDir => {
                let empty = fs::read_dir(output)
                    .map_err(|e| oerr(e.to_string()))?
                    .next()
                    .is_none();
                if !empty && !output.join(layout::OCI_LAYOUT_FILE).is_file() {
                    return Err(oerr(
                        "refusing to replace a directory that is not an OCI image layout"
                            .to_owned(),
                    ));
                }
            }
            _ => {}
        }
    }
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = output
        .file_name()
        .ok_or_else(|| oerr("no file name".to_owned()))?
        .to_string_lossy()
        .into_owned();
    let tmp = parent.join(format!(".{base}.cbrun-export-{}", std::process::id()));
    let _ = remove_tree(&tmp);

    let mut bytes = 0u64;
    let written = match opts.format {
        ExportFormat::OciDir => write_dir(store, &tmp, &index, &blobs, &mut bytes),
        ExportFormat::OciArchive => write_archive(store, &tmp, &index, &blobs, &mut bytes),
    };
    if let Err(e) = written {
        let _ = remove_tree(&tmp);
        return Err(match e {
            WriteError::Io(path, e) => ExportError::Output {
                path,
                msg: e.to_string(),
            },
            WriteError::Store(e) => serr(e),
        });
    }
    let placed = match (opts.format, existing.is_some()) {
        (ExportFormat::OciDir, true) => {
            let old = parent.join(format!(".{base}.cbrun-old-{}", std::process::id()));
            fs::rename(output, &old)
                .and_then(|()| fs::rename(&tmp, output))
                .and_then(|()| remove_tree(&old))
        }
        _ => fs::rename(&tmp, output),
    };
    if let Err(e) = placed {
        let _ = remove_tree(&tmp);
        return Err(oerr(format!("moving into place: {e}")));
    }
    if let Ok(d) = File::open(&parent) {
        let _ = d.sync_all();
    }
    Ok(ExportReport {
        output: output.to_path_buf(),
        format: opts.format,
        manifest_digest: img.manifest_digest,
        ref_name,
        blobs: blobs.len(),
        bytes,
    })
}

enum WriteError {
    Io(PathBuf, io::Error),
    Store(StoreError),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |e| WriteError::Io(path.to_path_buf(), e)
}

/// A store blob's reader error that is really the store's (damaged blob).
fn copy_err(path: &Path, digest: &Digest, e: io::Error) -> WriteError {
    if e.kind() == io::ErrorKind::InvalidData {
        WriteError::Store(StoreError::Invalid {
            what: format!("blob {digest}"),
            why: e.to_string(),
        })
    } else {
        WriteError::Io(path.to_path_buf(), e)
    }
}

fn write_file(path: &Path, data: &mut dyn io::Read) -> Result<u64, io::Error> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)?;
    let n = io::copy(data, &mut f)?;
    f.sync_all()?;
    Ok(n)
}

fn write_dir(
    store: &Store,
    dir: &Path,
    index: &[u8],
    blobs: &[(Digest, u64)],
    bytes: &mut u64,
) -> Result<(), WriteError> {
    let mut b = fs::DirBuilder::new();
    b.mode(0o755);
    b.create(dir).map_err(io_at(dir))?;
    let blob_dir = dir.join("blobs/sha256");
    b.recursive(true)
        .create(&blob_dir)
        .map_err(io_at(&blob_dir))?;
    let p = dir.join(layout::OCI_LAYOUT_FILE);
    write_file(&p, &mut &layout::oci_layout_bytes()[..]).map_err(io_at(&p))?;
    let p = dir.join(layout::INDEX_FILE);
    write_file(&p, &mut &index[..]).map_err(io_at(&p))?;
    for (digest, _) in blobs {
        let p = blob_dir.join(digest.hex());
        let mut r = store.open_blob(digest).map_err(WriteError::Store)?;
        *bytes += write_file(&p, &mut r).map_err(|e| copy_err(&p, digest, e))?;
    }
    Ok(())
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(size);
    h
}

fn write_archive(
    store: &Store,
    path: &Path,
    index: &[u8],
    blobs: &[(Digest, u64)],
    bytes: &mut u64,
) -> Result<(), WriteError> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .map_err(io_at(path))?;
    let mut tb = tar::Builder::new(BufWriter::with_capacity(256 << 10, f));
    let layout_bytes = layout::oci_layout_bytes();
    let put = |tb: &mut tar::Builder<BufWriter<File>>, name: &str, kind, mode, data: &[u8]| {
        let mut h = header(kind, mode, data.len() as u64);
        tb.append_data(&mut h, name, data).map_err(io_at(path))
    };
    put(
        &mut tb,
        layout::OCI_LAYOUT_FILE,
        tar::EntryType::Regular,
        0o644,
        &layout_bytes,
    )?;
    put(
        &mut tb,
        layout::INDEX_FILE,
        tar::EntryType::Regular,
        0o644,
        index,
    )?;
    put(&mut tb, "blobs/", tar::EntryType::Directory, 0o755, b"")?;
    put(
        &mut tb,
        "blobs/sha256/",
        tar::EntryType::Directory,
        0o755,
        b"",
    )?;
    for (digest, _) in blobs {
        let r = store.open_blob(digest).map_err(WriteError::Store)?;
        let size = r.size();
        let mut h = header(tar::EntryType::Regular, 0o644, size);
        tb.append_data(&mut h, layout::blob_path(digest), r)
            .map_err(|e| copy_err(path, digest, e))?;
        *bytes += size;
    }
    let w = tb.into_inner().map_err(io_at(path))?;
    let f = w
        .into_inner()
        .map_err(|e| WriteError::Io(path.to_path_buf(), e.into_error()))?;
    f.sync_all().map_err(io_at(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::import::tests::{host_arch, layer_tar, Fixture};
    use crate::image::import::{import, ImportOptions};
    use crate::image::store::tests::TempDir;
    use std::process::Command;

    fn opts(format: ExportFormat) -> ExportOptions {
        ExportOptions {
            format,
            force: false,
            ref_name: None,
        }
    }

    /// A store with one two-layer image `demo:v1` imported from an OCI layout.
    fn setup(tag: &str) -> (TempDir, Store, Digest) {
        let t = TempDir::new(tag);
        let store = Store::open(t.path().join("store")).unwrap();
        let mut fx = Fixture::default();
        let layers = [
            layer_tar(&[
                ("etc/greeting", b"hello\n"),
                ("bin/tool", b"#!/bin/sh\necho hi\n"),
            ]),
            layer_tar(&[("etc/second", b"2\n")]),
        ];
        let d = fx.image(&host_arch(), &layers, true);
        fx.add(d, Some("v1"), None);
        fx.write_dir(&t.path().join("src"));
        let r = import(
            &store,
            &t.path().join("src"),
            "demo:v1",
            &ImportOptions::default(),
        )
        .unwrap();
        (t, store, r.manifest_digest)
    }

    fn tool(name: &str) -> bool {
        let found = Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            crate::testing::missing(name);
        }
        found
    }

    fn run(cmd: &mut Command) -> String {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// skopeo with its state kept in `dir` (it runs as any user).
    fn skopeo(dir: &Path) -> Command {
        let mut c = Command::new("skopeo");
        c.env("HOME", dir)
            .env("TMPDIR", dir)
            .env("XDG_RUNTIME_DIR", dir)
            .arg("--insecure-policy");
        c
    }

    #[test]
    fn export_round_trips_through_our_import() {
        let (t, store, md) = setup("exp-rt");
        let dir = t.path().join("out-dir");
        let rep = export(&store, "demo:v1", &dir, &opts(ExportFormat::OciDir)).unwrap();
        assert_eq!((rep.blobs, rep.ref_name.as_deref()), (4, Some("v1")));
        assert_eq!(
            fs::read(dir.join("oci-layout")).unwrap(),
            br#"{"imageLayoutVersion":"1.0.0"}"#
        );
        let index: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("index.json")).unwrap()).unwrap();
        assert_eq!(
            index["manifests"][0]["annotations"][layout::ANNOTATION_REF_NAME],
            "v1"
        );
        assert_eq!(index["manifests"][0]["digest"], md.to_string());
        let ar = t.path().join("out.tar");
        export(&store, "demo:v1", &ar, &opts(ExportFormat::OciArchive)).unwrap();
        for (src, name) in [(&dir, "back:dir"), (&ar, "back:tar")] {
            let r = import(&store, src, name, &ImportOptions::default()).unwrap();
            assert_eq!(r.manifest_digest, md, "{name}");
        }
        // by digest: no ref name unless given
        let by_digest = t.path().join("by-digest.tar");
        let rep = export(
            &store,
            &format!("demo@{md}"),
            &by_digest,
            &opts(ExportFormat::OciArchive),
        )
        .unwrap();
        assert_eq!(rep.ref_name, None);
        // nothing left next to the outputs
        let names: Vec<String> = fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn archives_are_deterministic_and_outputs_are_protected() {
        let (t, store, _) = setup("exp-det");
        let a = t.path().join("a.tar");
        let b = t.path().join("b.tar");
        export(&store, "demo:v1", &a, &opts(ExportFormat::OciArchive)).unwrap();
        export(&store, "demo:v1", &b, &opts(ExportFormat::OciArchive)).unwrap();
        assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap());
        let e = export(&store, "demo:v1", &a, &opts(ExportFormat::OciArchive)).unwrap_err();
        let e = crate::error::chain(&e);
        assert!(e.contains("already exists; pass --force"), "{e}");
        let force = |f| ExportOptions {
            force: true,
            ..opts(f)
        };
        fs::write(&a, b"old").unwrap();
        export(&store, "demo:v1", &a, &force(ExportFormat::OciArchive)).unwrap();
        assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap());
        // --force replaces an OCI layout or an empty directory, nothing else
        let d = t.path().join("d");
        fs::create_dir(&d).unwrap();
        export(&store, "demo:v1", &d, &force(ExportFormat::OciDir)).unwrap();
        export(&store, "demo:v1", &d, &force(ExportFormat::OciDir)).unwrap();
        assert!(d.join("index.json").is_file());
        let precious = t.path().join("home");
        fs::create_dir(&precious).unwrap();
        fs::write(precious.join("thesis.tex"), b"x").unwrap();
        let e = export(&store, "demo:v1", &precious, &force(ExportFormat::OciDir)).unwrap_err();
        let e = crate::error::chain(&e);
        assert!(e.contains("not an OCI image layout"), "{e}");
        assert!(precious.join("thesis.tex").exists());
        let e = export(
            &store,
            "demo:v1",
            &precious,
            &force(ExportFormat::OciArchive),
        )
        .unwrap_err();
        let e = crate::error::chain(&e);
        assert!(e.contains("is a directory"), "{e}");
        let e = export(
            &store,
            "nope:1",
            &t.path().join("n"),
            &opts(ExportFormat::OciDir),
        )
        .unwrap_err();
        let e = crate::error::chain(&e);
        assert_eq!(e, "export nope:1: image nope:1 is not in the store");
        assert!("zip".parse::<ExportFormat>().is_err());
        assert_eq!(
            "oci-archive".parse::<ExportFormat>().unwrap(),
            ExportFormat::OciArchive
        );
    }

    #[test]
    fn a_damaged_blob_fails_the_export_and_leaves_nothing() {
        let (t, store, _) = setup("exp-damage");
        let img = store.resolve("demo:v1").unwrap();
        let layer = layout::descriptor_digest(&img.layers[1]).unwrap();
        let p = store.blob_path(&layer);
        let mut bytes = fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&p, &bytes).unwrap();
        let out = t.path().join("x.tar");
        let e = export(&store, "demo:v1", &out, &opts(ExportFormat::OciArchive)).unwrap_err();
        let e = crate::error::chain(&e);
        assert!(e.contains("damaged"), "{e}");
        assert!(!out.exists());
        let hidden = fs::read_dir(t.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count();
        assert_eq!(hidden, 0);
    }

    #[test]
    fn skopeo_reads_our_exports_and_writes_what_we_import() {
        if !tool("skopeo") {
            return;
        }
        let (t, store, md) = setup("exp-skopeo");
        let ar = t.path().join("ours.tar");
        export(&store, "demo:v1", &ar, &opts(ExportFormat::OciArchive)).unwrap();
        let y = t.path().join("y");
        run(skopeo(t.path())
            .args(["copy", "--quiet"])
            .arg(format!("oci-archive:{}:v1", ar.display()))
            .arg(format!("oci:{}:v1", y.display())));
        let r = import(&store, &y, "via-skopeo:v1", &ImportOptions::default()).unwrap();
        assert_eq!(
            r.manifest_digest, md,
            "skopeo oci-archive -> oci keeps the manifest"
        );
        let inspect = run(skopeo(t.path())
            .arg("inspect")
            .arg(format!("oci:{}", t.path().join("y").display())));
        assert!(inspect.contains(&md.to_string()), "{inspect}");
        // docker-archive written by skopeo (layers decompressed by it)
        let dar = t.path().join("d.tar");
        run(skopeo(t.path())
            .args(["copy", "--quiet"])
            .arg(format!("oci:{}:v1", y.display()))
            .arg(format!("docker-archive:{}:demo:v1", dar.display())));
        let o = ImportOptions {
            select: Some("demo:v1".into()),
            ..ImportOptions::default()
        };
        let r = import(&store, &dar, "from-docker:v1", &o).unwrap();
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let a = store.resolve("demo:v1").unwrap();
        let b = store.resolve("from-docker:v1").unwrap();
        assert_eq!(a.config.rootfs().diff_ids(), b.config.rootfs().diff_ids());
        // skopeo stores uncompressed layers: their digests are the diff_ids
        let got: Vec<String> = b.layers.iter().map(|l| l.digest().to_string()).collect();
        assert_eq!(&got, a.config.rootfs().diff_ids());
        // and the exported docker import is readable by skopeo again
        let out = t.path().join("again");
        export(&store, "from-docker:v1", &out, &opts(ExportFormat::OciDir)).unwrap();
        run(skopeo(t.path())
            .arg("inspect")
            .arg(format!("oci:{}:v1", out.display())));
    }

    #[test]
    fn umoci_unpacks_our_exports_and_builds_what_we_import() {
        if !tool("umoci") {
            return;
        }
        let (t, store, _) = setup("exp-umoci");
        let dir = t.path().join("layout");
        export(&store, "demo:v1", &dir, &opts(ExportFormat::OciDir)).unwrap();
        let bundle = t.path().join("bundle");
        run(Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:v1", dir.display()))
            .arg(&bundle));
        assert_eq!(
            fs::read(bundle.join("rootfs/etc/greeting")).unwrap(),
            b"hello\n"
        );
        assert_eq!(fs::read(bundle.join("rootfs/etc/second")).unwrap(), b"2\n");
        // an image made by umoci imports
        let src = t.path().join("umoci-src");
        let payload = t.path().join("payload");
        fs::write(&payload, b"from umoci\n").unwrap();
        run(Command::new("umoci").args(["init", "--layout"]).arg(&src));
        run(Command::new("umoci")
            .args(["new", "--image"])
            .arg(format!("{}:t", src.display())));
        let mut insert = Command::new("umoci");
        insert.arg("insert");
        if !nix::unistd::geteuid().is_root() {
            insert.arg("--rootless");
        }
        run(insert
            .arg("--image")
            .arg(format!("{}:t", src.display()))
            .arg(&payload)
            .arg("/payload"));
        let r = import(&store, &src, "from-umoci", &ImportOptions::default()).unwrap();
        assert_eq!(r.layers, 1);
        let out = t.path().join("umoci-out");
        export(&store, "from-umoci", &out, &opts(ExportFormat::OciDir)).unwrap();
        let b2 = t.path().join("bundle2");
        run(Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", out.display()))
            .arg(&b2));
        assert_eq!(
            fs::read(b2.join("rootfs/payload")).unwrap(),
            b"from umoci\n"
        );
    }
}
