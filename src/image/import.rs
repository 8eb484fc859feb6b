//! `cbrun image import PATH --tag NAME`: bring an image into the store from
//! an OCI image-layout directory, an oci-archive, a docker-archive (`docker
//! save`), or a plain root filesystem (directory or tarball).
//!
//! Archives are never extracted: their tar headers are indexed once and
//! members are read in place (compressed archives are first decompressed
//! into one temp file in the store's `tmp/`). Every blob is hashed on its way
//! into the store and checked against the digest that names it; the
//! reference is written last, so a failed import leaves no reference (blobs
//! that made it in are unreferenced, and `gc` removes them).

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex};
use serde::{Deserialize, Serialize};

use super::digest::Digest;
use super::layout::{self, Compression, ManifestKind, MAX_JSON_SIZE};
use super::platform::{self, ChoiceError, Platform};
use super::store::{BlobWriter, ImageRef, Store, StoreError};

/// Most entries an image archive may have (a rootfs tarball is not limited).
const MAX_ARCHIVE_ENTRIES: usize = 1_000_000;
/// Most symlink/hardlink hops followed inside an archive.
const MAX_LINK_HOPS: usize = 16;
/// Most levels of nested indexes followed.
const MAX_INDEX_DEPTH: usize = 4;
/// `PATH` of images made from a plain root filesystem.
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// A directory in the OCI image layout (`oci-layout`, `index.json`, `blobs/`).
    OciDir,
    /// A tar of an OCI image layout.
    OciArchive,
    /// What `docker save` writes (`manifest.json` with `Config`, `Layers`).
    DockerArchive,
    /// A tarball (plain, gzip or zstd) of a root filesystem: one layer.
    RootfsTar,
    /// A directory holding a root filesystem: one layer.
    RootfsDir,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::OciDir => "oci-dir",
            Format::OciArchive => "oci-archive",
            Format::DockerArchive => "docker-archive",
            Format::RootfsTar => "rootfs-tar",
            Format::RootfsDir => "rootfs-dir",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Ok(match s {
            "oci-dir" | "oci" => Format::OciDir,
            "oci-archive" => Format::OciArchive,
            "docker-archive" => Format::DockerArchive,
            "rootfs-tar" => Format::RootfsTar,
            "rootfs-dir" => Format::RootfsDir,
            _ => {
                return Err(format!(
                    "format {s:?}: expected oci-dir, oci-archive, docker-archive, rootfs-tar or rootfs-dir"
                ))
            }
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The platform to pick from a multi-platform index, and the platform an
    /// image must be for (default: the host's). For a plain root filesystem,
    /// the platform recorded in the generated config.
    pub platform: Option<Platform>,
    /// Skip format detection.
    pub format: Option<Format>,
    /// Which image of a layout or archive holding several: an OCI
    /// `org.opencontainers.image.ref.name` annotation or a docker `RepoTags`
    /// entry.
    pub select: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub reference: String,
    pub format: Format,
    pub manifest_digest: Digest,
    pub config_digest: Digest,
    pub platform: String,
    pub layers: usize,
    /// Config plus layers as stored.
    pub size: u64,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The input is malformed, hostile or unsupported.
    #[error("{src}: {msg}")]
    Input { src: String, msg: String },
    /// The store failed (disk, locking, a blob that does not match).
    #[error("{src}: {source}")]
    Store { src: String, source: StoreError },
    /// The target name is not a valid `name[:tag]`.
    #[error(transparent)]
    Name(StoreError),
}

/// Error context: `docker-archive /path/x.tar`.
struct Ctx {
    src: String,
}

impl Ctx {
    fn bad(&self, msg: impl Into<String>) -> ImportError {
        ImportError::Input {
            src: self.src.clone(),
            msg: msg.into(),
        }
    }
    fn store(&self, field: &str) -> impl FnOnce(StoreError) -> ImportError + '_ {
        let field = field.to_owned();
        move |e| match e {
            StoreError::DigestMismatch {
                expected, actual, ..
            } if !field.is_empty() => self.bad(format!(
                "{field}: content digest mismatch: expected {expected}, content is {actual}"
            )),
            other if field.is_empty() => ImportError::Store {
                src: self.src.clone(),
                source: other,
            },
            other => ImportError::Store {
                src: format!("{}: {field}", self.src),
                source: other,
            },
        }
    }
}

/// Import the image at `path` into `store` as `name` (`name[:tag]`, tag
/// `latest` by default).
pub fn import(
    store: &Store,
    path: &Path,
    name: &str,
    opts: &ImportOptions,
) -> Result<ImportReport, ImportError> {
    let target = ImageRef::parse(name).map_err(ImportError::Name)?;
    if target.digest.is_some() {
        return Err(ImportError::Name(StoreError::BadReference {
            input: name.to_owned(),
            why: "an imported image is named name[:tag], not by digest".to_owned(),
        }));
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let ctx0 = Ctx {
        src: format!("import {}", path.display()),
    };
    let _hold = store.hold().map_err(ctx0.store(""))?;
    let meta = fs::metadata(path).map_err(|e| ctx0.bad(e.to_string()))?;
    let wanted = opts.platform.clone().unwrap_or_else(Platform::host);

    if meta.is_dir() {
        let format = match opts.format {
            Some(f @ (Format::OciDir | Format::RootfsDir)) => f,
            Some(f) => return Err(ctx0.bad(format!("is a directory, not a {f}"))),
            None if path
                .join(layout::OCI_LAYOUT_FILE)
                .symlink_metadata()
                .is_ok() =>
            {
                Format::OciDir
            }
            None => Format::RootfsDir,
        };
        let ctx = Ctx {
            src: format!("{format} {}", path.display()),
        };
        let mut imp = Importer {
            store,
            ctx: &ctx,
            target: &target,
            source_note: format!("import {format} {}", abs.display()),
            format,
            warnings: Vec::new(),
        };
        return match format {
            Format::OciDir => imp.oci(&Source::Dir(path.to_path_buf()), opts, &wanted),
            _ => imp.rootfs_dir(path, &wanted),
        };
    }
    if !meta.is_file() {
        return Err(ctx0.bad("not a regular file or directory"));
    }
    if opts.format == Some(Format::OciDir) || opts.format == Some(Format::RootfsDir) {
        return Err(ctx0.bad(format!("is a file, not a {}", opts.format.expect("some"))));
    }

    // Sniff compression; a compressed input is decompressed once into tmp/.
    let mut file = File::open(path).map_err(|e| ctx0.bad(e.to_string()))?;
    let mut head = [0u8; 6];
    let n = read_full(&mut file, &mut head).map_err(|e| ctx0.bad(e.to_string()))?;
    let compression = Compression::detect(&head[..n]);
    // Decompressed straight into a blob writer: if the input turns out to be
    // a rootfs tarball, that temp file becomes its layer without a copy.
    let mut decompressed: Option<BlobWriter> = None;
    let tar_file = match compression {
        Compression::None => File::open(path).map_err(|e| ctx0.bad(e.to_string()))?,
        Compression::Other(kind) => {
            return Err(ctx0.bad(format!(
                "{kind}-compressed input is not supported (gzip and zstd are)"
            )))
        }
        Compression::Gzip | Compression::Zstd => {
            let src = File::open(path).map_err(|e| ctx0.bad(e.to_string()))?;
            let mut dec: Box<dyn Read> = match compression {
                Compression::Gzip => {
                    Box::new(flate2::read::MultiGzDecoder::new(io::BufReader::new(src)))
                }
                _ => Box::new(
                    zstd::stream::read::Decoder::new(src)
                        .map_err(|e| ctx0.bad(format!("zstd: {e}")))?,
                ),
            };
            let mut w = store.blob_writer().map_err(ctx0.store(""))?;
            io::copy(&mut dec, &mut w).map_err(|e| ctx0.bad(format!("decompressing: {e}")))?;
            w.flush()
                .map_err(|e| ctx0.bad(format!("decompressing: {e}")))?;
            let f = File::open(w.temp_path()).map_err(|e| ctx0.bad(e.to_string()))?;
            decompressed = Some(w);
            f
        }
    };
    let scan = TarIndex::scan(tar_file).map_err(|e| ctx0.bad(e))?;
    let format = match opts.format {
        Some(f) => f,
        None if scan.has_top(layout::OCI_LAYOUT_FILE) && scan.has_top(layout::INDEX_FILE) => {
            Format::OciArchive
        }
        None if scan.has_top("manifest.json") => Format::DockerArchive,
        None => Format::RootfsTar,
    };
    let ctx = Ctx {
        src: format!("{format} {}", path.display()),
    };
    let mut imp = Importer {
        store,
        ctx: &ctx,
        target: &target,
        source_note: format!("import {format} {}", abs.display()),
        format,
        warnings: Vec::new(),
    };
    match format {
        Format::RootfsTar => imp.rootfs_tar(scan, decompressed, &wanted),
        Format::OciArchive | Format::DockerArchive => {
            if let Some((name, why)) = scan.bad.first() {
                return Err(ctx.bad(format!("entry {name:?}: {why}")));
            }
            if scan.entries > MAX_ARCHIVE_ENTRIES {
                return Err(ctx.bad(format!(
                    "{} entries is more than an image archive has",
                    scan.entries
                )));
            }
            let src = Source::Tar(scan);
            if format == Format::OciArchive {
                imp.oci(&src, opts, &wanted)
            } else {
                imp.docker(&src, opts, &wanted)
            }
        }
        Format::OciDir | Format::RootfsDir => unreachable!("checked above"),
    }
}

/// A docker tag without Docker Hub's implied parts: `docker.io/library/a:1`
/// and `a` (→ `a:latest`) compare equal to `a:1` / `a:latest`.
fn docker_short_tag(t: &str) -> String {
    let t = t
        .strip_prefix("docker.io/library/")
        .or_else(|| t.strip_prefix("docker.io/"))
        .unwrap_or(t);
    let last = t.rsplit('/').next().unwrap_or(t);
    if last.contains(':') {
        t.to_owned()
    } else {
        format!("{t}:latest")
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

// ---------------------------------------------------------------------------
// Archive members and directories

/// `s` with control and non-ASCII characters as `?`, at most 200 of them
/// (tar errors quote raw header bytes).
fn printable(s: &str) -> String {
    s.chars()
        .take(200)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Normalize a member name: no leading `/`, no `..`, `.` and empty parts dropped.
fn normalize_member(name: &str) -> Result<String, &'static str> {
    if name.starts_with('/') {
        return Err("absolute path");
    }
    let mut parts = Vec::new();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err("path leaves the archive"),
            c => parts.push(c),
        }
    }
    Ok(parts.join("/"))
}

/// Resolve `target` relative to directory `base` lexically, refusing to
/// leave the archive root.
fn resolve_relative(base: &str, target: &str) -> Result<String, &'static str> {
    if target.starts_with('/') {
        return Err("absolute path");
    }
    let mut parts: Vec<&str> = base.split('/').filter(|c| !c.is_empty()).collect();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("path leaves the archive");
                }
            }
            c => parts.push(c),
        }
    }
    Ok(parts.join("/"))
}

fn parent_of(name: &str) -> &str {
    name.rfind('/').map(|i| &name[..i]).unwrap_or("")
}

#[derive(Debug, Clone)]
enum Member {
    File { offset: u64, size: u64 },
    Symlink(String),
    Hardlink(String),
    Dir,
    Other(&'static str),
}

/// The headers of a tar file, indexed by normalized name (members up to 3
/// levels deep: all an image archive uses).
struct TarIndex {
    file: File,
    members: HashMap<String, Member>,
    /// Entries an image archive must not have: (raw name, why).
    bad: Vec<(String, String)>,
    entries: usize,
}

impl TarIndex {
    fn scan(file: File) -> Result<TarIndex, String> {
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        let mut members = HashMap::new();
        let mut bad = Vec::new();
        let mut entries = 0usize;
        {
            let mut ar = tar::Archive::new(&file);
            let iter = ar
                .entries_with_seek()
                .map_err(|e| format!("not a tar archive: {e}"))?;
            for e in iter {
                let e = e.map_err(|e| {
                    if entries == 0 {
                        "not a tar archive (plain, gzip or zstd)".to_owned()
                    } else {
                        format!(
                            "corrupt tar after {entries} entries: {}",
                            printable(&e.to_string())
                        )
                    }
                })?;
                entries += 1;
                let raw = String::from_utf8_lossy(&e.path_bytes()).into_owned();
                let name = match normalize_member(&raw) {
                    Ok(n) => n,
                    Err(why) => {
                        if bad.len() < 16 {
                            bad.push((printable(&raw), why.to_owned()));
                        }
                        continue;
                    }
                };
                // Deeper members are not image-archive files; past the cap the
                // input is no image archive either (and memory stays bounded).
                if name.is_empty()
                    || name.split('/').count() > 3
                    || members.len() >= MAX_ARCHIVE_ENTRIES
                {
                    continue;
                }
                let ty = e.header().entry_type();
                let size = e.size();
                let offset = e.raw_file_position();
                let link = e
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let member = match ty {
                    tar::EntryType::Regular | tar::EntryType::Continuous => {
                        if offset.checked_add(size).is_none_or(|end| end > len) {
                            return Err(format!(
                                "entry {:?}: size {size} runs past the end of the file",
                                printable(&raw)
                            ));
                        }
                        Member::File { offset, size }
                    }
                    tar::EntryType::Symlink => Member::Symlink(link),
                    tar::EntryType::Link => match normalize_member(&link) {
                        Ok(t) => Member::Hardlink(t),
                        Err(why) => {
                            bad.push((
                                printable(&raw),
                                format!("hard link to {:?}: {why}", printable(&link)),
                            ));
                            continue;
                        }
                    },
                    tar::EntryType::Directory => Member::Dir,
                    tar::EntryType::GNUSparse => Member::Other("sparse file"),
                    tar::EntryType::Char | tar::EntryType::Block => Member::Other("device"),
                    tar::EntryType::Fifo => Member::Other("fifo"),
                    _ => Member::Other("special entry"),
                };
                if !matches!(member, Member::Dir) {
                    if let Some(prev) = members.insert(name.clone(), member) {
                        if !matches!(prev, Member::Dir) && bad.len() < 16 {
                            bad.push((printable(&raw), "appears twice".to_owned()));
                        }
                    }
                } else {
                    members.entry(name).or_insert(Member::Dir);
                }
            }
        }
        Ok(TarIndex {
            file,
            members,
            bad,
            entries,
        })
    }

    fn has_top(&self, name: &str) -> bool {
        matches!(self.members.get(name), Some(Member::File { .. }))
    }

    /// Offset and size of the regular file `name` denotes, following links.
    fn lookup(&self, name: &str) -> Result<(u64, u64), String> {
        let mut cur = name.to_owned();
        for _ in 0..MAX_LINK_HOPS {
            match self.members.get(&cur) {
                None => return Err(format!("{cur:?}: not in the archive")),
                Some(Member::File { offset, size }) => return Ok((*offset, *size)),
                Some(Member::Dir) => return Err(format!("{cur:?}: is a directory")),
                Some(Member::Other(kind)) => {
                    return Err(format!("{cur:?}: is a {kind}, not a regular file"))
                }
                Some(Member::Hardlink(t)) => cur = t.clone(),
                Some(Member::Symlink(t)) => {
                    cur = resolve_relative(parent_of(&cur), t)
                        .map_err(|why| format!("{cur:?}: symlink to {t:?}: {why}"))?;
                }
            }
        }
        Err(format!("{name:?}: too many levels of links"))
    }
}

/// Where an OCI layout or docker archive is read from.
enum Source {
    Dir(PathBuf),
    Tar(TarIndex),
}

struct MemberReader<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for MemberReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.pos).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "archive member is truncated",
            ));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Source {
    /// A reader of the member or file `name` (normalized), and its size.
    fn open(&self, name: &str) -> Result<(Box<dyn Read + '_>, u64), String> {
        match self {
            Source::Tar(t) => {
                let (offset, size) = t.lookup(name)?;
                Ok((
                    Box::new(MemberReader {
                        file: &t.file,
                        pos: offset,
                        end: offset + size,
                    }),
                    size,
                ))
            }
            Source::Dir(root) => {
                // No symlinks anywhere on the way: the layout is read as is.
                let mut p = root.clone();
                for c in name.split('/') {
                    p.push(c);
                    match p.symlink_metadata() {
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            return Err(format!("{name:?}: not in the layout"))
                        }
                        Err(e) => return Err(format!("{name:?}: {e}")),
                        Ok(m) if m.file_type().is_symlink() => {
                            return Err(format!("{name:?}: is a symlink"))
                        }
                        Ok(_) => {}
                    }
                }
                let f = fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&p)
                    .map_err(|e| format!("{name:?}: {e}"))?;
                let m = f.metadata().map_err(|e| format!("{name:?}: {e}"))?;
                if !m.is_file() {
                    return Err(format!("{name:?}: not a regular file"));
                }
                Ok((Box::new(f), m.len()))
            }
        }
    }

    /// A whole (JSON) member, at most [`MAX_JSON_SIZE`] bytes.
    fn read_small(&self, name: &str) -> Result<Vec<u8>, String> {
        let (r, size) = self.open(name)?;
        if size > MAX_JSON_SIZE {
            return Err(format!(
                "{name:?}: {size} bytes is over the {MAX_JSON_SIZE} byte limit for JSON"
            ));
        }
        let mut buf = Vec::with_capacity(size as usize);
        r.take(MAX_JSON_SIZE + 1)
            .read_to_end(&mut buf)
            .map_err(|e| format!("{name:?}: {e}"))?;
        Ok(buf)
    }
}

// ---------------------------------------------------------------------------
// The importer

struct Importer<'a> {
    store: &'a Store,
    ctx: &'a Ctx,
    target: &'a ImageRef,
    source_note: String,
    format: Format,
    warnings: Vec<String>,
}

/// One image manifest an index offers.
struct Candidate {
    /// Where it was found, for messages: `index.json: manifests[1]`.
    field: String,
    desc: Descriptor,
    ref_name: Option<String>,
    platform: Option<Platform>,
}

impl Importer<'_> {
    /// A small blob of an OCI layout, checked against its descriptor.
    fn read_blob(
        &self,
        src: &Source,
        desc: &Descriptor,
        field: &str,
    ) -> Result<(Digest, Vec<u8>), ImportError> {
        let digest =
            layout::descriptor_digest(desc).map_err(|e| self.ctx.bad(format!("{field}: {e}")))?;
        if desc.size() > MAX_JSON_SIZE {
            return Err(self.ctx.bad(format!(
                "{field}: size {} is over the {MAX_JSON_SIZE} byte limit for JSON",
                desc.size()
            )));
        }
        let bytes = src
            .read_small(&layout::blob_path(&digest))
            .map_err(|e| self.ctx.bad(format!("{field}: {e}")))?;
        let actual = Digest::of_bytes(&bytes);
        if actual != digest {
            return Err(self.ctx.bad(format!(
                "{field}: content digest mismatch: expected {digest}, content is {actual}"
            )));
        }
        if bytes.len() as u64 != desc.size() {
            return Err(self.ctx.bad(format!(
                "{field}: size mismatch: the descriptor says {}, the blob has {} bytes",
                desc.size(),
                bytes.len()
            )));
        }
        Ok((digest, bytes))
    }

    fn collect(
        &self,
        src: &Source,
        index: &ImageIndex,
        field: &str,
        ref_name: Option<&str>,
        depth: usize,
        out: &mut Vec<Candidate>,
    ) -> Result<(), ImportError> {
        for (i, d) in index.manifests().iter().enumerate() {
            let f = format!("{field}: manifests[{i}]");
            let own_ref = d
                .annotations()
                .as_ref()
                .and_then(|a| a.get(layout::ANNOTATION_REF_NAME))
                .map(String::as_str);
            let r = if depth == 0 { own_ref } else { ref_name };
            match layout::manifest_kind(d.media_type().as_ref()) {
                Some(ManifestKind::Image) => out.push(Candidate {
                    field: f,
                    desc: d.clone(),
                    ref_name: r.map(str::to_owned),
                    platform: d.platform().as_ref().map(Platform::from),
                }),
                Some(ManifestKind::Index) => {
                    if depth >= MAX_INDEX_DEPTH {
                        return Err(self.ctx.bad(format!(
                            "{f}: indexes nested more than {MAX_INDEX_DEPTH} deep"
                        )));
                    }
                    let (digest, bytes) = self.read_blob(src, d, &f)?;
                    let nested = layout::parse_index(&bytes)
                        .map_err(|e| self.ctx.bad(format!("{f}: {e}")))?;
                    self.collect(src, &nested, &format!("{f} ({digest})"), r, depth + 1, out)?;
                }
                None => {} // artifacts and other content: not images
            }
        }
        Ok(())
    }

    fn oci(
        &mut self,
        src: &Source,
        opts: &ImportOptions,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        let ctx = self.ctx;
        let marker = src
            .read_small(layout::OCI_LAYOUT_FILE)
            .map_err(|e| ctx.bad(format!("{}: {e}", layout::OCI_LAYOUT_FILE)))?;
        layout::check_oci_layout(&marker)
            .map_err(|e| ctx.bad(format!("{}: {e}", layout::OCI_LAYOUT_FILE)))?;
        let index_bytes = src
            .read_small(layout::INDEX_FILE)
            .map_err(|e| ctx.bad(format!("{}: {e}", layout::INDEX_FILE)))?;
        let index = layout::parse_index(&index_bytes)
            .map_err(|e| ctx.bad(format!("{}: {e}", layout::INDEX_FILE)))?;
        let mut cands = Vec::new();
        self.collect(src, &index, layout::INDEX_FILE, None, 0, &mut cands)?;
        if cands.is_empty() {
            return Err(ctx.bad("index.json: manifests: no image manifest"));
        }
        let ref_names = |cs: &[Candidate]| {
            let names: BTreeSet<&str> = cs.iter().filter_map(|c| c.ref_name.as_deref()).collect();
            names.into_iter().collect::<Vec<_>>().join(", ")
        };
        if let Some(sel) = &opts.select {
            let all = ref_names(&cands);
            cands.retain(|c| c.ref_name.as_deref() == Some(sel.as_str()));
            if cands.is_empty() {
                return Err(ctx.bad(format!(
                    "index.json: no image named {sel:?} (ref names: {})",
                    if all.is_empty() { "none" } else { &all }
                )));
            }
        }
        // Platforms not given in the index come from the configs.
        for c in cands.iter_mut().filter(|c| c.platform.is_none()) {
            let (_, m) = self.read_blob(src, &c.desc, &c.field)?;
            let manifest =
                layout::parse_manifest(&m).map_err(|e| ctx.bad(format!("{}: {e}", c.field)))?;
            let (_, cfg) =
                self.read_blob(src, manifest.config(), &format!("{}: config", c.field))?;
            let config = layout::parse_config(&cfg)
                .map_err(|e| ctx.bad(format!("{}: config: {e}", c.field)))?;
            c.platform = Some(Platform::from(&config));
        }
        let platforms: Vec<Platform> = cands
            .iter()
            .map(|c| c.platform.clone().expect("filled"))
            .collect();
        let chosen = match platform::choose(&platforms, wanted) {
            Ok(i) => &cands[i],
            Err(ChoiceError::NoMatch) => {
                return Err(ctx.bad(format!(
                    "index.json: no image for {wanted} (available: {}); pick one with --platform",
                    platform::list(&platforms)
                )))
            }
            Err(ChoiceError::Ambiguous) => {
                let names = ref_names(&cands);
                return Err(ctx.bad(format!(
                    "index.json: several images for {wanted} (ref names: {}); choose one with --ref",
                    if names.is_empty() { "none" } else { &names }
                )));
            }
        };
        let field = chosen.field.clone();
        let (_, manifest_bytes) = self.read_blob(src, &chosen.desc, &field)?;
        let manifest = layout::parse_manifest(&manifest_bytes)
            .map_err(|e| ctx.bad(format!("{field}: {e}")))?;
        let (config_digest, config_bytes) =
            self.read_blob(src, manifest.config(), &format!("{field}: config"))?;
        let config = layout::parse_config(&config_bytes)
            .map_err(|e| ctx.bad(format!("{field}: config: {e}")))?;
        let mut size = config_bytes.len() as u64;
        for (i, l) in manifest.layers().iter().enumerate() {
            let lf = format!("{field}: layers[{i}]");
            let digest = layout::descriptor_digest(l).map_err(|e| ctx.bad(format!("{lf}: {e}")))?;
            let name = layout::blob_path(&digest);
            let (reader, member_size) = src.open(&name).map_err(|e| {
                if l.urls().as_ref().is_some_and(|u| !u.is_empty()) {
                    ctx.bad(format!("{lf}: {e} (foreign layers are not downloaded)"))
                } else {
                    ctx.bad(format!("{lf}: {e}"))
                }
            })?;
            if member_size != l.size() {
                return Err(ctx.bad(format!(
                    "{lf}: size mismatch: the descriptor says {}, {name} has {member_size} bytes",
                    l.size()
                )));
            }
            let (_, n) = self
                .store
                .put_blob(reader, Some(&digest))
                .map_err(ctx.store(&lf))?;
            if n != l.size() {
                return Err(ctx.bad(format!(
                    "{lf}: size mismatch: the descriptor says {}, the blob has {n}",
                    l.size()
                )));
            }
            size += n;
        }
        self.store
            .put_blob(&config_bytes[..], Some(&config_digest))
            .map_err(ctx.store("config"))?;
        self.finish(
            &manifest_bytes,
            config_digest,
            &config,
            manifest.layers().len(),
            size,
        )
    }

    fn finish(
        &mut self,
        manifest_bytes: &[u8],
        config_digest: Digest,
        config: &ImageConfiguration,
        layers: usize,
        size: u64,
    ) -> Result<ImportReport, ImportError> {
        let manifest_digest = self
            .store
            .commit_image(self.target, manifest_bytes, &self.source_note)
            .map_err(self.ctx.store(""))?;
        Ok(ImportReport {
            reference: self.target.to_string(),
            format: self.format,
            manifest_digest,
            config_digest,
            platform: Platform::from(config).to_string(),
            layers,
            size,
            warnings: std::mem::take(&mut self.warnings),
        })
    }

    fn check_platform(
        &self,
        config: &ImageConfiguration,
        wanted: &Platform,
    ) -> Result<(), ImportError> {
        let have = Platform::from(config);
        if have.fitness_for(wanted).is_none() {
            return Err(self.ctx.bad(format!(
                "the image is for {have}, not {wanted}; pass --platform {have} to import it anyway"
            )));
        }
        Ok(())
    }

    fn docker(
        &mut self,
        src: &Source,
        opts: &ImportOptions,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Entry {
            config: String,
            #[serde(default)]
            repo_tags: Option<Vec<String>>,
            layers: Vec<String>,
        }
        let ctx = self.ctx;
        let bytes = src
            .read_small("manifest.json")
            .map_err(|e| ctx.bad(format!("manifest.json: {e}")))?;
        let entries: Vec<Entry> = serde_json::from_slice(&bytes)
            .map_err(|e| ctx.bad(format!("manifest.json: not a docker-archive manifest: {e}")))?;
        let tags_of = |es: &[&Entry]| {
            let t: BTreeSet<&str> = es
                .iter()
                .flat_map(|e| e.repo_tags.iter().flatten().map(String::as_str))
                .collect();
            if t.is_empty() {
                "none".to_owned()
            } else {
                t.into_iter().collect::<Vec<_>>().join(", ")
            }
        };
        let all: Vec<&Entry> = entries.iter().collect();
        let (i, entry) = match &opts.select {
            Some(sel) => {
                let want = docker_short_tag(sel);
                entries
                    .iter()
                    .enumerate()
                    .find(|(_, e)| {
                        e.repo_tags
                            .iter()
                            .flatten()
                            .any(|t| docker_short_tag(t) == want)
                    })
                    .ok_or_else(|| {
                        ctx.bad(format!(
                            "manifest.json: no image tagged {sel:?} (RepoTags: {})",
                            tags_of(&all)
                        ))
                    })?
            }
            None if entries.len() == 1 => (0, &entries[0]),
            None if entries.is_empty() => return Err(ctx.bad("manifest.json: no images")),
            None => {
                return Err(ctx.bad(format!(
                    "manifest.json: {} images (RepoTags: {}); choose one with --ref",
                    entries.len(),
                    tags_of(&all)
                )))
            }
        };
        let member = |field: &str, p: &str| -> Result<(String, Option<Digest>), ImportError> {
            let name = resolve_relative("", p)
                .map_err(|why| ctx.bad(format!("manifest.json: {field}: {p:?}: {why}")))?;
            // `blobs/sha256/<hex>` (Docker 25+) and `<hex>.json` (older
            // configs) name their digest; `<id>/layer.tar` does not.
            let expected = layout::digest_of_blob_path(&name).or_else(|| {
                name.strip_suffix(".json")
                    .filter(|h| !h.contains('/'))
                    .and_then(|h| Digest::parse(&format!("sha256:{h}")).ok())
            });
            Ok((name, expected))
        };
        // `Layers[1]` for the usual one-image archive, `[2].Layers[1]` otherwise.
        let at = if entries.len() == 1 {
            String::new()
        } else {
            format!("[{i}].")
        };
        let cfield = format!("{at}Config");
        let (cname, cexpected) = member(&cfield, &entry.config)?;
        let config_bytes = src
            .read_small(&cname)
            .map_err(|e| ctx.bad(format!("manifest.json: {cfield}: {e}")))?;
        let config_digest = Digest::of_bytes(&config_bytes);
        if let Some(exp) = &cexpected {
            if exp != &config_digest {
                return Err(ctx.bad(format!(
                    "manifest.json: {cfield}: {cname:?}: content digest mismatch: expected {exp}, content is {config_digest}"
                )));
            }
        }
        let config = layout::parse_config(&config_bytes)
            .map_err(|e| ctx.bad(format!("manifest.json: {cfield}: {cname:?}: {e}")))?;
        self.check_platform(&config, wanted)?;
        let diff_ids = config.rootfs().diff_ids().clone();
        if diff_ids.len() != entry.layers.len() {
            self.warnings.push(format!(
                "config lists {} diff_ids for {} layers",
                diff_ids.len(),
                entry.layers.len()
            ));
        }
        let mut layers = Vec::new();
        let mut size = config_bytes.len() as u64;
        for (j, p) in entry.layers.iter().enumerate() {
            let lfield = format!("{at}Layers[{j}]");
            let (name, expected) = member(&lfield, p)?;
            let (mut reader, _) = src
                .open(&name)
                .map_err(|e| ctx.bad(format!("manifest.json: {lfield}: {e}")))?;
            let mut head = [0u8; 6];
            let n = read_full(&mut reader, &mut head)
                .map_err(|e| ctx.bad(format!("manifest.json: {lfield}: {name:?}: {e}")))?;
            let compression = Compression::detect(&head[..n]);
            let media_type = compression.layer_media_type().ok_or_else(|| {
                ctx.bad(format!("manifest.json: {lfield}: {name:?}: {compression:?}-compressed layers are not supported"))
            })?;
            let full = (&head[..n]).chain(reader);
            let (digest, len) = self
                .store
                .put_blob(full, expected.as_ref())
                .map_err(ctx.store(&format!("manifest.json: {lfield}: {name:?}")))?;
            if compression == Compression::None {
                if let Some(id) = diff_ids.get(j) {
                    if *id != digest.to_string() {
                        self.warnings.push(format!(
                            "{lfield}: content is {digest}, the config's rootfs.diff_ids[{j}] says {id}"
                        ));
                    }
                }
            }
            size += len;
            layers.push(layout::descriptor(media_type, &digest, len));
        }
        let manifest = ManifestOut {
            schema_version: 2,
            media_type: layout::MT_OCI_MANIFEST,
            config: layout::descriptor(
                layout::MT_OCI_CONFIG,
                &config_digest,
                config_bytes.len() as u64,
            ),
            layers,
        };
        let manifest_bytes = serde_json::to_vec(&manifest).expect("serializable");
        self.store
            .put_blob(&config_bytes[..], Some(&config_digest))
            .map_err(ctx.store("config"))?;
        let n = manifest.layers.len();
        self.finish(&manifest_bytes, config_digest, &config, n, size)
    }

    fn rootfs_tar(
        &mut self,
        scan: TarIndex,
        decompressed: Option<BlobWriter>,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        if scan.entries == 0 {
            return Err(self.ctx.bad("the tarball has no entries"));
        }
        let (digest, size) = match decompressed {
            Some(w) => w.finish(None),
            None => {
                let mut file = scan.file;
                io::Seek::seek(&mut file, io::SeekFrom::Start(0))
                    .map_err(|e| self.ctx.bad(e.to_string()))?;
                self.store.put_blob(file, None)
            }
        }
        .map_err(self.ctx.store("layer"))?;
        self.single_layer(digest, size, wanted, "rootfs tarball")
    }

    fn rootfs_dir(&mut self, dir: &Path, wanted: &Platform) -> Result<ImportReport, ImportError> {
        let owner = if nix::unistd::geteuid().is_root() {
            Ownership::AsOnDisk
        } else {
            Ownership::Root
        };
        let mut w = self.store.blob_writer().map_err(self.ctx.store("layer"))?;
        let skip = fs::metadata(self.store.root())
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let warnings = tar_directory(dir, &mut w, owner, skip).map_err(|e| self.ctx.bad(e))?;
        self.warnings.extend(warnings);
        let (digest, size) = w.finish(None).map_err(self.ctx.store("layer"))?;
        self.single_layer(digest, size, wanted, "root filesystem directory")
    }

    fn single_layer(
        &mut self,
        layer: Digest,
        size: u64,
        wanted: &Platform,
        what: &str,
    ) -> Result<ImportReport, ImportError> {
        let config_bytes = generated_config(&layer, wanted, what);
        let config = layout::parse_config(&config_bytes).expect("generated config parses");
        let (config_digest, config_size) = self
            .store
            .put_blob(&config_bytes[..], None)
            .map_err(self.ctx.store("config"))?;
        let manifest = ManifestOut {
            schema_version: 2,
            media_type: layout::MT_OCI_MANIFEST,
            config: layout::descriptor(layout::MT_OCI_CONFIG, &config_digest, config_size),
            layers: vec![layout::descriptor(layout::MT_OCI_LAYER, &layer, size)],
        };
        let manifest_bytes = serde_json::to_vec(&manifest).expect("serializable");
        self.finish(
            &manifest_bytes,
            config_digest,
            &config,
            1,
            size + config_size,
        )
    }
}

/// An image manifest as cbrun writes it (field order fixed, compact JSON).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestOut {
    schema_version: u32,
    media_type: &'static str,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

/// The config of a one-layer image made from a plain root filesystem: no
/// timestamp, so the same content always gives the same digests.
fn generated_config(layer: &Digest, platform: &Platform, what: &str) -> Vec<u8> {
    #[derive(Serialize)]
    struct Cfg<'a> {
        architecture: &'a str,
        os: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        variant: Option<&'a str>,
        config: Exec,
        rootfs: RootFs,
        history: [History; 1],
    }
    #[derive(Serialize)]
    struct Exec {
        #[serde(rename = "Env")]
        env: [&'static str; 1],
    }
    #[derive(Serialize)]
    struct RootFs {
        #[serde(rename = "type")]
        typ: &'static str,
        diff_ids: [String; 1],
    }
    #[derive(Serialize)]
    struct History {
        created_by: String,
    }
    serde_json::to_vec(&Cfg {
        architecture: &platform.architecture,
        os: &platform.os,
        variant: platform.variant.as_deref(),
        config: Exec {
            env: [DEFAULT_PATH],
        },
        rootfs: RootFs {
            typ: "layers",
            diff_ids: [layer.to_string()],
        },
        history: [History {
            created_by: format!("cbrun image import ({what})"),
        }],
    })
    .expect("serializable")
}

// ---------------------------------------------------------------------------
// Directory → tar

/// Owners recorded for a directory import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// uid/gid as on disk (imports as root).
    AsOnDisk,
    /// Everything 0:0 (rootless imports: the files belong to the caller).
    Root,
}

/// Write `dir` as a tar to `out`, deterministically: entries in byte order
/// of their names, depth first, a directory before its contents; modes and
/// mtimes as on disk, uid/gid per `owner`, no user/group names, no atime,
/// no xattrs. Hard links within the tree become link entries. Sockets are
/// skipped (returned as warnings). `skip` (dev, ino) is never descended into.
pub fn tar_directory(
    dir: &Path,
    out: &mut impl Write,
    owner: Ownership,
    skip: Option<(u64, u64)>,
) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    let mut b = tar::Builder::new(out);
    let mut seen: HashMap<(u64, u64), PathBuf> = HashMap::new();
    // Stack of (relative path, absolute path) to visit, reversed order.
    let mut stack: Vec<PathBuf> = children_sorted(dir, Path::new(""))?;
    stack.reverse();
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        let m = abs
            .symlink_metadata()
            .map_err(|e| format!("{}: {e}", abs.display()))?;
        let ft = m.file_type();
        let mut h = tar::Header::new_gnu();
        h.set_mode(m.mode() & 0o7777);
        let (uid, gid) = match owner {
            Ownership::AsOnDisk => (m.uid() as u64, m.gid() as u64),
            Ownership::Root => (0, 0),
        };
        h.set_uid(uid);
        h.set_gid(gid);
        h.set_mtime(m.mtime().max(0) as u64);
        h.set_size(0);
        let err = |e: io::Error| format!("{}: {e}", abs.display());
        if ft.is_dir() {
            if skip == Some((m.dev(), m.ino())) {
                warnings.push(format!(
                    "{}: skipped (the image store itself)",
                    rel.display()
                ));
                continue;
            }
            h.set_entry_type(tar::EntryType::Directory);
            let mut name = rel.as_os_str().to_owned();
            name.push("/");
            b.append_data(&mut h, Path::new(&name), io::empty())
                .map_err(err)?;
            let kids = children_sorted(dir, &rel)?;
            stack.extend(kids.into_iter().rev());
        } else if ft.is_symlink() {
            let target = fs::read_link(&abs).map_err(err)?;
            h.set_entry_type(tar::EntryType::Symlink);
            b.append_link(&mut h, &rel, &target).map_err(err)?;
        } else if ft.is_file() {
            if m.nlink() > 1 {
                if let Some(first) = seen.get(&(m.dev(), m.ino())) {
                    h.set_entry_type(tar::EntryType::Link);
                    b.append_link(&mut h, &rel, first).map_err(err)?;
                    continue;
                }
                seen.insert((m.dev(), m.ino()), rel.clone());
            }
            let f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&abs)
                .map_err(err)?;
            let size = f.metadata().map_err(err)?.len();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(size);
            b.append_data(
                &mut h,
                &rel,
                ExactReader {
                    inner: f,
                    left: size,
                },
            )
            .map_err(err)?;
        } else if ft.is_char_device() || ft.is_block_device() {
            h.set_entry_type(if ft.is_char_device() {
                tar::EntryType::Char
            } else {
                tar::EntryType::Block
            });
            let rdev = m.rdev();
            h.set_device_major(libc::major(rdev)).map_err(err)?;
            h.set_device_minor(libc::minor(rdev)).map_err(err)?;
            b.append_data(&mut h, &rel, io::empty()).map_err(err)?;
        } else if ft.is_fifo() {
            h.set_entry_type(tar::EntryType::Fifo);
            b.append_data(&mut h, &rel, io::empty()).map_err(err)?;
        } else {
            warnings.push(format!("{}: socket skipped", rel.display()));
        }
    }
    b.finish().map_err(|e| format!("writing the layer: {e}"))?;
    Ok(warnings)
}

fn children_sorted(root: &Path, rel: &Path) -> Result<Vec<PathBuf>, String> {
    let abs = root.join(rel);
    let mut names: Vec<std::ffi::OsString> = fs::read_dir(&abs)
        .map_err(|e| format!("{}: {e}", abs.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", abs.display()))?;
    names.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
    Ok(names.into_iter().map(|n| rel.join(n)).collect())
}

/// Exactly `left` bytes of a file that must not shrink while being read.
struct ExactReader {
    inner: File,
    left: u64,
}

impl Read for ExactReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = self.left.min(buf.len() as u64) as usize;
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being read",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::image::layout::{
        MT_OCI_CONFIG, MT_OCI_INDEX, MT_OCI_LAYER, MT_OCI_LAYER_GZIP, MT_OCI_MANIFEST,
    };
    use crate::image::store::tests::TempDir;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    /// A tar of (name, content) regular files.
    pub(crate) fn layer_tar(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_ustar();
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
            h.set_mtime(1_700_000_000);
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// An OCI image layout built by hand.
    #[derive(Default)]
    pub(crate) struct Fixture {
        pub blobs: BTreeMap<Digest, Vec<u8>>,
        pub manifests: Vec<Value>,
    }

    impl Fixture {
        pub(crate) fn blob(&mut self, bytes: Vec<u8>) -> (Digest, u64) {
            let d = Digest::of_bytes(&bytes);
            let n = bytes.len() as u64;
            self.blobs.insert(d.clone(), bytes);
            (d, n)
        }

        /// An image for `arch` (`amd64`, `arm/v7`) with the given layers
        /// (gzip'd when `gz`); returns the manifest descriptor.
        pub(crate) fn image(&mut self, arch: &str, layers: &[Vec<u8>], gz: bool) -> Value {
            let (a, v) = arch
                .split_once('/')
                .map(|(a, v)| (a, Some(v)))
                .unwrap_or((arch, None));
            let diff_ids: Vec<String> = layers
                .iter()
                .map(|l| Digest::of_bytes(l).to_string())
                .collect();
            let mut cfg = json!({"architecture": a, "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids},
                                 "config": {"Cmd": ["/bin/sh"]}});
            if let Some(v) = v {
                cfg["variant"] = json!(v);
            }
            let (cd, cn) = self.blob(serde_json::to_vec(&cfg).unwrap());
            let ls: Vec<Value> = layers
                .iter()
                .map(|l| {
                    let (bytes, mt) = if gz {
                        (gzip(l), MT_OCI_LAYER_GZIP)
                    } else {
                        (l.clone(), MT_OCI_LAYER)
                    };
                    let (d, n) = self.blob(bytes);
                    json!({"mediaType": mt, "digest": d.to_string(), "size": n})
                })
                .collect();
            let m = json!({"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
                "config": {"mediaType": MT_OCI_CONFIG, "digest": cd.to_string(), "size": cn}, "layers": ls});
            let (md, mn) = self.blob(serde_json::to_vec(&m).unwrap());
            json!({"mediaType": MT_OCI_MANIFEST, "digest": md.to_string(), "size": mn})
        }

        pub(crate) fn add(
            &mut self,
            mut desc: Value,
            ref_name: Option<&str>,
            platform: Option<&str>,
        ) {
            if let Some(r) = ref_name {
                desc["annotations"] = json!({ layout::ANNOTATION_REF_NAME: r });
            }
            if let Some(p) = platform {
                let parts: Vec<&str> = p.split('/').collect();
                desc["platform"] = json!({"os": parts[0], "architecture": parts[1]});
                if parts.len() == 3 {
                    desc["platform"]["variant"] = json!(parts[2]);
                }
            }
            self.manifests.push(desc);
        }

        /// An index blob over `descs` (for nesting); returns its descriptor.
        pub(crate) fn index_blob(&mut self, descs: Vec<Value>) -> Value {
            let (d, n) = self.blob(
                serde_json::to_vec(
                    &json!({"schemaVersion": 2, "mediaType": MT_OCI_INDEX, "manifests": descs}),
                )
                .unwrap(),
            );
            json!({"mediaType": MT_OCI_INDEX, "digest": d.to_string(), "size": n})
        }

        fn files(&self) -> Vec<(String, Vec<u8>)> {
            let mut v = vec![
                ("oci-layout".to_owned(), layout::oci_layout_bytes()),
                (
                    "index.json".to_owned(),
                    serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": self.manifests}))
                        .unwrap(),
                ),
            ];
            for (d, b) in &self.blobs {
                v.push((layout::blob_path(d), b.clone()));
            }
            v
        }

        pub(crate) fn write_dir(&self, dir: &Path) {
            fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
            for (name, bytes) in self.files() {
                fs::write(dir.join(name), bytes).unwrap();
            }
        }

        pub(crate) fn tar(&self) -> Vec<u8> {
            let files = self.files();
            let refs: Vec<(&str, &[u8])> = files
                .iter()
                .map(|(n, b)| (n.as_str(), b.as_slice()))
                .collect();
            layer_tar(&refs)
        }

        pub(crate) fn manifest_digest(desc: &Value) -> Digest {
            Digest::parse(desc["digest"].as_str().unwrap()).unwrap()
        }
    }

    pub(crate) fn host_arch() -> String {
        let h = Platform::host();
        match h.variant {
            Some(v) => format!("{}/{v}", h.architecture),
            None => h.architecture,
        }
    }

    fn other_arch() -> &'static str {
        if Platform::host().architecture == "s390x" {
            "riscv64"
        } else {
            "s390x"
        }
    }

    fn opts() -> ImportOptions {
        ImportOptions::default()
    }

    fn err(r: Result<ImportReport, ImportError>) -> String {
        let e = r.unwrap_err().to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        e
    }

    fn assert_no_refs(store: &Store) {
        assert!(store.list().unwrap().is_empty());
        assert_eq!(
            fs::read_dir(store.tmp_dir()).unwrap().count(),
            0,
            "tmp/ left over"
        );
    }

    fn setup(tag: &str) -> (TempDir, Store) {
        let t = TempDir::new(tag);
        let store = Store::open(t.path().join("store")).unwrap();
        (t, store)
    }

    #[test]
    fn oci_dir_and_archives_import_to_the_same_digest() {
        let (t, store) = setup("imp-oci");
        let mut fx = Fixture::default();
        let layers = [
            layer_tar(&[("etc/hello", b"hi")]),
            layer_tar(&[("bin/x", b"x")]),
        ];
        let desc = fx.image(&host_arch(), &layers, true);
        let want = Fixture::manifest_digest(&desc);
        fx.add(desc, Some("v1"), None);
        let dir = t.path().join("layout");
        fx.write_dir(&dir);
        let r = import(&store, &dir, "img:dir", &opts()).unwrap();
        assert_eq!(
            (r.format, &r.manifest_digest, r.layers),
            (Format::OciDir, &want, 2)
        );
        assert_eq!(r.reference, "img:dir");
        let ar = t.path().join("x.tar");
        fs::write(&ar, fx.tar()).unwrap();
        let r = import(&store, &ar, "img:tar", &opts()).unwrap();
        assert_eq!((r.format, &r.manifest_digest), (Format::OciArchive, &want));
        let gz = t.path().join("x.tar.gz");
        fs::write(&gz, gzip(&fx.tar())).unwrap();
        let r = import(&store, &gz, "img:gz", &opts()).unwrap();
        assert_eq!((r.format, &r.manifest_digest), (Format::OciArchive, &want));
        let zst = t.path().join("x.tar.zst");
        fs::write(&zst, zstd::encode_all(&fx.tar()[..], 3).unwrap()).unwrap();
        let r = import(&store, &zst, "img", &opts()).unwrap();
        assert_eq!(r.reference, "img:latest");
        let img = store.resolve("img").unwrap();
        assert_eq!(img.manifest_digest, want);
        assert_eq!(img.layers[0].media_type().as_ref(), MT_OCI_LAYER_GZIP);
        assert_eq!(store.list().unwrap().len(), 4);
        assert_eq!(fs::read_dir(store.tmp_dir()).unwrap().count(), 0);
        let info = &store.list().unwrap()[0];
        assert!(
            info.source.starts_with("import oci-dir /"),
            "{}",
            info.source
        );
    }

    #[test]
    fn multi_platform_indexes_pick_the_host_or_the_requested_platform() {
        let (t, store) = setup("imp-multi");
        let mut fx = Fixture::default();
        let mut descs = Vec::new();
        let mut by_arch = BTreeMap::new();
        for arch in ["amd64", "arm64", "arm/v7", "ppc64le"] {
            let d = fx.image(arch, &[layer_tar(&[("arch", arch.as_bytes())])], false);
            by_arch.insert(arch, Fixture::manifest_digest(&d));
            let mut d2 = d.clone();
            let p: Vec<&str> = arch.split('/').collect();
            d2["platform"] = json!({"os": "linux", "architecture": p[0]});
            if p.len() > 1 {
                d2["platform"]["variant"] = json!(p[1]);
            }
            descs.push(d2);
        }
        // nested: index.json -> index blob -> per-platform manifests
        let nested = fx.index_blob(descs);
        fx.add(nested, Some("latest"), None);
        let dir = t.path().join("multi");
        fx.write_dir(&dir);
        if let Some(d) = by_arch.get(host_arch().as_str()) {
            let r = import(&store, &dir, "m:host", &opts()).unwrap();
            assert_eq!(&r.manifest_digest, d);
        }
        let o = ImportOptions {
            platform: Some(Platform::parse("linux/arm/v7").unwrap()),
            ..opts()
        };
        let r = import(&store, &dir, "m:arm", &o).unwrap();
        assert_eq!(
            (&r.manifest_digest, r.platform.as_str()),
            (&by_arch["arm/v7"], "linux/arm/v7")
        );
        let o = ImportOptions {
            platform: Some(Platform::parse("linux/s390x").unwrap()),
            ..opts()
        };
        let e = err(import(&store, &dir, "m:s390x", &o));
        assert!(
            e.contains("no image for linux/s390x (available: linux/amd64, linux/arm/v7, linux/arm64, linux/ppc64le)"),
            "{e}"
        );
    }

    #[test]
    fn platforms_come_from_configs_when_the_index_has_none() {
        let (t, store) = setup("imp-cfgplat");
        let mut fx = Fixture::default();
        let mine = fx.image(&host_arch(), &[layer_tar(&[("a", b"1")])], false);
        let theirs = fx.image(other_arch(), &[layer_tar(&[("a", b"2")])], false);
        let want = Fixture::manifest_digest(&mine);
        fx.add(theirs, None, None);
        fx.add(mine, None, None);
        let dir = t.path().join("l");
        fx.write_dir(&dir);
        assert_eq!(
            import(&store, &dir, "x", &opts()).unwrap().manifest_digest,
            want
        );
        // a single image for another platform is refused unless asked for
        let mut fx = Fixture::default();
        let theirs = fx.image(other_arch(), &[layer_tar(&[("a", b"2")])], false);
        fx.add(theirs, None, None);
        let dir = t.path().join("l2");
        fx.write_dir(&dir);
        let e = err(import(&store, &dir, "y", &opts()));
        assert!(e.contains("pick one with --platform"), "{e}");
        let o = ImportOptions {
            platform: Some(Platform::parse(&format!("linux/{}", other_arch())).unwrap()),
            ..opts()
        };
        import(&store, &dir, "y", &o).unwrap();
    }

    #[test]
    fn several_named_images_need_a_choice() {
        let (t, store) = setup("imp-select");
        let mut fx = Fixture::default();
        let a = fx.image(&host_arch(), &[layer_tar(&[("a", b"a")])], false);
        let b = fx.image(&host_arch(), &[layer_tar(&[("b", b"b")])], false);
        let bd = Fixture::manifest_digest(&b);
        fx.add(a, Some("one"), None);
        fx.add(b, Some("two"), None);
        let dir = t.path().join("l");
        fx.write_dir(&dir);
        let e = err(import(&store, &dir, "x", &opts()));
        assert!(
            e.contains("several images for")
                && e.contains("ref names: one, two")
                && e.contains("--ref"),
            "{e}"
        );
        let o = ImportOptions {
            select: Some("two".into()),
            ..opts()
        };
        assert_eq!(import(&store, &dir, "x", &o).unwrap().manifest_digest, bd);
        let o = ImportOptions {
            select: Some("three".into()),
            ..opts()
        };
        let e = err(import(&store, &dir, "x2", &o));
        assert!(
            e.contains("no image named \"three\" (ref names: one, two)"),
            "{e}"
        );
    }

    #[test]
    fn tampered_or_missing_blobs_fail_without_a_ref() {
        let (t, store) = setup("imp-tamper");
        let mut fx = Fixture::default();
        let desc = fx.image(&host_arch(), &[layer_tar(&[("a", b"good")])], false);
        fx.add(desc, None, None);
        let dir = t.path().join("l");
        fx.write_dir(&dir);
        // swap the layer's content for other bytes of the same size
        let layer = fx
            .blobs
            .iter()
            .find(|(_, b)| b.len() > 1000)
            .map(|(d, _)| d.clone())
            .unwrap();
        let p = dir.join(layout::blob_path(&layer));
        let mut bytes = fs::read(&p).unwrap();
        let i = bytes.iter().position(|&b| b == b'g').unwrap();
        bytes[i] = b'G';
        fs::write(&p, &bytes).unwrap();
        let e = err(import(&store, &dir, "x", &opts()));
        assert!(e.contains("layers[0]: content digest mismatch"), "{e}");
        assert!(
            e.starts_with(&format!(
                "oci-dir {}: index.json: manifests[0]",
                dir.display()
            )),
            "{e}"
        );
        assert_no_refs(&store);
        fs::remove_file(&p).unwrap();
        let e = err(import(&store, &dir, "x", &opts()));
        assert!(e.contains("not in the layout"), "{e}");
        assert_no_refs(&store);
        // a symlinked blob is refused
        std::os::unix::fs::symlink("/etc/passwd", &p).unwrap();
        let e = err(import(&store, &dir, "x", &opts()));
        assert!(e.contains("is a symlink"), "{e}");
        // a lying size in the descriptor
        let mut fx = Fixture::default();
        let mut desc = fx.image(&host_arch(), &[layer_tar(&[("a", b"x")])], false);
        desc["size"] = json!(desc["size"].as_u64().unwrap() + 1);
        fx.add(desc, None, None);
        let dir = t.path().join("l2");
        fx.write_dir(&dir);
        let e = err(import(&store, &dir, "x", &opts()));
        assert!(e.contains("size mismatch"), "{e}");
        assert_no_refs(&store);
    }

    type RawEntry<'a> = (&'a str, tar::EntryType, &'a [u8], Option<&'a str>);

    fn raw_tar(entries: &[RawEntry]) -> Vec<u8> {
        // Names written raw into the header (tar::Builder refuses `..`).
        let mut out = Vec::new();
        for (name, kind, data, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            if let Some(l) = link {
                h.as_old_mut().linkname[..l.len()].copy_from_slice(l.as_bytes());
            }
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
            h.set_cksum();
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(512) * 512, 0);
        }
        out.resize(out.len() + 1024, 0);
        out
    }

    #[test]
    fn hostile_archives_are_refused() {
        let (t, store) = setup("imp-hostile");
        let mut fx = Fixture::default();
        let desc = fx.image(&host_arch(), &[layer_tar(&[("a", b"a")])], false);
        fx.add(desc, None, None);
        let files = fx.files();
        let base: Vec<RawEntry> = files
            .iter()
            .map(|(n, b)| (n.as_str(), tar::EntryType::Regular, b.as_slice(), None))
            .collect();
        let cases: Vec<(Vec<RawEntry>, &str)> = vec![
            (
                vec![("../evil", tar::EntryType::Regular, b"x", None)],
                "entry \"../evil\": path leaves the archive",
            ),
            (
                vec![("/etc/evil", tar::EntryType::Regular, b"x", None)],
                "entry \"/etc/evil\": absolute path",
            ),
            (
                vec![("x", tar::EntryType::Link, b"", Some("../../etc/shadow"))],
                "hard link to \"../../etc/shadow\"",
            ),
            (
                vec![("oci-layout", tar::EntryType::Regular, b"{}", None)],
                "entry \"oci-layout\": appears twice",
            ),
        ];
        for (extra, want) in cases {
            let mut entries = base.clone();
            entries.extend(extra);
            let p = t.path().join("h.tar");
            fs::write(&p, raw_tar(&entries)).unwrap();
            let e = err(import(&store, &p, "x", &opts()));
            assert!(e.contains(want), "{want}: {e}");
        }
        // a blob that is a symlink out of the archive
        let layer = fx
            .blobs
            .keys()
            .find(|d| fx.blobs[*d].len() > 1000)
            .unwrap()
            .clone();
        let lp = layout::blob_path(&layer);
        let mut entries: Vec<_> = base.iter().filter(|e| e.0 != lp).cloned().collect();
        entries.push((
            lp.as_str(),
            tar::EntryType::Symlink,
            b"",
            Some("../../../etc/passwd"),
        ));
        let p = t.path().join("h.tar");
        fs::write(&p, raw_tar(&entries)).unwrap();
        let e = err(import(&store, &p, "x", &opts()));
        assert!(
            e.contains("symlink to \"../../../etc/passwd\": path leaves the archive"),
            "{e}"
        );
        // an index.json over the JSON size limit
        let big = vec![b' '; MAX_JSON_SIZE as usize + 10];
        let mut entries: Vec<_> = base
            .iter()
            .filter(|e| e.0 != "index.json")
            .cloned()
            .collect();
        entries.push(("index.json", tar::EntryType::Regular, &big, None));
        fs::write(&p, raw_tar(&entries)).unwrap();
        let e = err(import(&store, &p, "x", &opts()));
        assert!(e.contains("index.json") && e.contains("limit"), "{e}");
        // a header claiming more data than the file has
        let mut bytes = raw_tar(&base);
        let cut = bytes.len() - 1024 - 600;
        bytes.truncate(cut);
        fs::write(&p, &bytes).unwrap();
        let e = err(import(&store, &p, "x", &opts()));
        assert!(e.contains("tar") || e.contains("past the end"), "{e}");
        assert_no_refs(&store);
        // nothing was written outside the store
        assert!(!t.path().join("evil").exists());
    }

    /// A `docker save`-style archive: legacy `<id>/layer.tar` layers (one gzip'd,
    /// one a symlink to another) and a `<hex>.json` config.
    fn docker_archive(arch: &str, layers_json: Option<Value>) -> (Vec<u8>, Vec<Digest>) {
        let l1 = layer_tar(&[("etc/one", b"1")]);
        let l2 = layer_tar(&[("etc/two", b"2")]);
        let diff = vec![
            Digest::of_bytes(&l1),
            Digest::of_bytes(&l2),
            Digest::of_bytes(&l1),
        ];
        let cfg = serde_json::to_vec(&json!({"architecture": arch, "os": "linux",
            "container_config": {"Hostname": "x"}, "docker_version": "24.0.0",
            "rootfs": {"type": "layers", "diff_ids": diff.iter().map(|d| d.to_string()).collect::<Vec<_>>()}}))
        .unwrap();
        let cname = format!("{}.json", Digest::of_bytes(&cfg).hex());
        let layers =
            layers_json.unwrap_or(json!(["aaa/layer.tar", "bbb/layer.tar", "ccc/layer.tar"]));
        let manifest = serde_json::to_vec(
            &json!([{"Config": cname, "RepoTags": ["app:1"], "Layers": layers}]),
        )
        .unwrap();
        let l2gz = gzip(&l2);
        let entries = vec![
            (
                "aaa/layer.tar",
                tar::EntryType::Regular,
                l1.as_slice(),
                None,
            ),
            (
                "bbb/layer.tar",
                tar::EntryType::Regular,
                l2gz.as_slice(),
                None,
            ),
            (
                "ccc/layer.tar",
                tar::EntryType::Symlink,
                &b""[..],
                Some("../aaa/layer.tar"),
            ),
            (
                cname.as_str(),
                tar::EntryType::Regular,
                cfg.as_slice(),
                None,
            ),
            (
                "manifest.json",
                tar::EntryType::Regular,
                manifest.as_slice(),
                None,
            ),
            ("repositories", tar::EntryType::Regular, b"{}", None),
        ];
        (raw_tar(&entries), diff)
    }

    #[test]
    fn docker_archives_become_oci_manifests() {
        let (t, store) = setup("imp-docker");
        let (bytes, diff) = docker_archive(&Platform::host().architecture, None);
        let p = t.path().join("d.tar");
        fs::write(&p, &bytes).unwrap();
        let r = import(&store, &p, "app:1", &opts()).unwrap();
        assert_eq!((r.format, r.layers), (Format::DockerArchive, 3));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let img = store.resolve("app:1").unwrap();
        let mts: Vec<&str> = img.layers.iter().map(|l| l.media_type().as_ref()).collect();
        assert_eq!(mts, [MT_OCI_LAYER, MT_OCI_LAYER_GZIP, MT_OCI_LAYER]);
        assert_eq!(layout::descriptor_digest(&img.layers[0]).unwrap(), diff[0]);
        assert_eq!(img.layers[0].digest(), img.layers[2].digest());
        assert_eq!(img.manifest.config().media_type().as_ref(), MT_OCI_CONFIG);
        assert_eq!(img.config.rootfs().diff_ids().len(), 3);
        // the same archive gzip'd, selected by RepoTag: same manifest
        let gz = t.path().join("d.tar.gz");
        fs::write(&gz, gzip(&bytes)).unwrap();
        let o = ImportOptions {
            select: Some("app:1".into()),
            ..opts()
        };
        assert_eq!(
            import(&store, &gz, "app:2", &o).unwrap().manifest_digest,
            r.manifest_digest
        );
        let o = ImportOptions {
            select: Some("app:9".into()),
            ..opts()
        };
        assert!(err(import(&store, &gz, "app:3", &o))
            .contains("no image tagged \"app:9\" (RepoTags: app:1)"));
    }

    #[test]
    fn hostile_docker_archives_are_refused() {
        let (t, store) = setup("imp-docker-bad");
        let p = t.path().join("x.tar");
        let host = Platform::host().architecture;
        for (layers, want) in [
            (
                json!(["aaa/layer.tar", "../../etc/passwd"]),
                format!("docker-archive {}: manifest.json: Layers[1]: \"../../etc/passwd\": path leaves the archive", p.display()),
            ),
            (json!(["/etc/passwd"]), "Layers[0]: \"/etc/passwd\": absolute path".to_owned()),
            (json!(["aaa"]), "Layers[0]: \"aaa\": is a directory".to_owned()),
            (json!(["nope/layer.tar"]), "Layers[0]: \"nope/layer.tar\": not in the archive".to_owned()),
        ] {
            let (mut bytes, _) = docker_archive(&host, Some(layers));
            // give "aaa" a directory entry
            let mut h = tar::Header::new_gnu();
            h.set_path("aaa/").unwrap();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            h.set_cksum();
            let mut with_dir = h.as_bytes().to_vec();
            with_dir.append(&mut bytes);
            fs::write(&p, &with_dir).unwrap();
            let e = err(import(&store, &p, "x", &opts()));
            assert!(e.contains(&want), "{want}\n{e}");
        }
        // wrong platform
        let (bytes, _) = docker_archive(other_arch(), None);
        fs::write(&p, &bytes).unwrap();
        let e = err(import(&store, &p, "x", &opts()));
        assert!(
            e.contains(&format!("the image is for linux/{}", other_arch()))
                && e.contains("--platform"),
            "{e}"
        );
        // a config whose content does not match its <hex>.json name
        let cfg =
            br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
        let name = format!("{}.json", Digest::of_bytes(b"something else").hex());
        let manifest = serde_json::to_vec(&json!([{"Config": name, "Layers": []}])).unwrap();
        let tarb = raw_tar(&[
            (name.as_str(), tar::EntryType::Regular, &cfg[..], None),
            ("manifest.json", tar::EntryType::Regular, &manifest, None),
        ]);
        fs::write(&p, tarb).unwrap();
        let e = err(import(&store, &p, "x", &opts()));
        assert!(
            e.contains("Config") && e.contains("content digest mismatch"),
            "{e}"
        );
        assert_no_refs(&store);
    }

    #[test]
    fn rootfs_tarballs_give_one_uncompressed_layer() {
        let (t, store) = setup("imp-rootfs-tar");
        let tarb = layer_tar(&[("bin/sh", b"#!"), ("etc/os-release", b"ID=test")]);
        let layer = Digest::of_bytes(&tarb);
        let mut digests = BTreeSet::new();
        for (name, bytes) in [
            ("r.tar", tarb.clone()),
            ("r.tar.gz", gzip(&tarb)),
            ("r.tar.zst", zstd::encode_all(&tarb[..], 3).unwrap()),
        ] {
            let p = t.path().join(name);
            fs::write(&p, bytes).unwrap();
            let r = import(&store, &p, name.replace('.', "-").as_str(), &opts()).unwrap();
            assert_eq!(r.format, Format::RootfsTar);
            digests.insert(r.manifest_digest);
        }
        assert_eq!(digests.len(), 1, "same content, same image");
        let img = store.resolve("r-tar").unwrap();
        assert_eq!(layout::descriptor_digest(&img.layers[0]).unwrap(), layer);
        assert_eq!(img.layers[0].media_type().as_ref(), MT_OCI_LAYER);
        assert_eq!(img.config.rootfs().diff_ids(), &vec![layer.to_string()]);
        assert_eq!(Platform::from(&img.config), Platform::host());
        let env = img.config.config().as_ref().unwrap().env().clone().unwrap();
        assert_eq!(env, [DEFAULT_PATH]);
        // not tar, xz, empty
        let p = t.path().join("junk");
        fs::write(&p, vec![b'x'; 2048]).unwrap();
        assert!(err(import(&store, &p, "j", &opts())).contains("not a tar archive"));
        fs::write(&p, b"\xfd7zXZ\0rest").unwrap();
        assert!(
            err(import(&store, &p, "j", &opts())).contains("xz-compressed input is not supported")
        );
        fs::write(&p, b"").unwrap();
        assert!(err(import(&store, &p, "j", &opts())).contains("no entries"));
        // a bad target name
        assert!(matches!(
            import(&store, &p, "Bad Name", &opts()),
            Err(ImportError::Name(_))
        ));
        assert!(matches!(
            import(&store, &p, &format!("a@{layer}"), &opts()),
            Err(ImportError::Name(_))
        ));
    }

    #[test]
    fn rootfs_directories_are_tarred_deterministically() {
        use std::os::unix::fs::PermissionsExt;
        let (t, store) = setup("imp-rootfs-dir");
        let root = t.path().join("rootfs");
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        fs::create_dir_all(root.join("etc")).unwrap();
        fs::write(root.join("usr/bin/tool"), b"#!/bin/sh\n").unwrap();
        fs::set_permissions(
            root.join("usr/bin/tool"),
            fs::Permissions::from_mode(0o4755),
        )
        .unwrap();
        fs::write(root.join("etc/b"), b"b").unwrap();
        fs::write(root.join("etc/a"), b"a").unwrap();
        fs::hard_link(root.join("etc/a"), root.join("etc/a-link")).unwrap();
        std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
        let long = "n".repeat(150);
        fs::write(root.join(&long), b"long").unwrap();
        nix::unistd::mkfifo(
            &root.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let r1 = import(&store, &root, "fs:1", &opts()).unwrap();
        let r2 = import(&store, &root, "fs:2", &opts()).unwrap();
        assert_eq!(r1.format, Format::RootfsDir);
        assert_eq!(r1.manifest_digest, r2.manifest_digest, "deterministic");
        let img = store.resolve("fs:1").unwrap();
        let ld = layout::descriptor_digest(&img.layers[0]).unwrap();
        let mut ar = tar::Archive::new(store.open_blob(&ld).unwrap());
        let mut seen = Vec::new();
        let root_euid = nix::unistd::geteuid().is_root();
        for e in ar.entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            if root_euid {
                assert_eq!(
                    h.uid().unwrap(),
                    fs::symlink_metadata(root.join(&name)).unwrap().uid() as u64
                );
            } else {
                assert_eq!(
                    (h.uid().unwrap(), h.gid().unwrap()),
                    (0, 0),
                    "rootless: owned by root"
                );
            }
            let kind = match h.entry_type() {
                tar::EntryType::Directory => "dir",
                tar::EntryType::Symlink => "symlink",
                tar::EntryType::Link => "hardlink",
                tar::EntryType::Fifo => "fifo",
                tar::EntryType::Regular => "file",
                _ => "other",
            };
            if name == "usr/bin/tool" {
                assert_eq!(h.mode().unwrap(), 0o4755);
                assert_eq!(
                    h.mtime().unwrap() as i64,
                    fs::metadata(root.join("usr/bin/tool")).unwrap().mtime()
                );
            }
            seen.push(format!("{kind} {name}"));
        }
        assert_eq!(
            seen,
            [
                "symlink bin",
                "dir etc/",
                "file etc/a",
                "hardlink etc/a-link",
                "file etc/b",
                "fifo fifo",
                &format!("file {long}"),
                "dir usr/",
                "dir usr/bin/",
                "file usr/bin/tool"
            ]
        );
        // a store inside the imported tree is skipped
        let inner = Store::open(root.join("store")).unwrap();
        let r = import(&inner, &root, "fs:3", &opts()).unwrap();
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("the image store itself")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn format_names_and_forced_formats() {
        for f in [
            Format::OciDir,
            Format::OciArchive,
            Format::DockerArchive,
            Format::RootfsTar,
            Format::RootfsDir,
        ] {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
        }
        assert!("zip".parse::<Format>().is_err());
        let (t, store) = setup("imp-forced");
        let o = ImportOptions {
            format: Some(Format::OciArchive),
            ..opts()
        };
        let e = err(import(&store, t.path(), "x", &o));
        assert!(e.contains("is a directory, not a oci-archive"), "{e}");
        // forcing rootfs-tar on an oci-archive imports it as one layer
        let mut fx = Fixture::default();
        let d = fx.image(&host_arch(), &[layer_tar(&[("a", b"a")])], false);
        fx.add(d, None, None);
        let p = t.path().join("o.tar");
        fs::write(&p, fx.tar()).unwrap();
        let o = ImportOptions {
            format: Some(Format::RootfsTar),
            ..opts()
        };
        assert_eq!(
            import(&store, &p, "x", &o).unwrap().format,
            Format::RootfsTar
        );
    }

    #[test]
    fn member_names_normalize() {
        assert_eq!(normalize_member("./a//b/./c").unwrap(), "a/b/c");
        assert_eq!(normalize_member("a/../b"), Err("path leaves the archive"));
        assert_eq!(normalize_member("/a"), Err("absolute path"));
        assert_eq!(resolve_relative("x/y", "../z").unwrap(), "x/z");
        assert_eq!(
            resolve_relative("x", "../../z"),
            Err("path leaves the archive")
        );
        assert_eq!(resolve_relative("", "a/../b").unwrap(), "b");
        assert_eq!(docker_short_tag("docker.io/library/a:1"), "a:1");
        assert_eq!(docker_short_tag("docker.io/u/a"), "u/a:latest");
        assert_eq!(docker_short_tag("reg:5000/a"), "reg:5000/a:latest");
    }
}
