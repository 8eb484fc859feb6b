//! Images through the real binary: import (rootfs directory, rootfs
//! tarball, OCI layouts, docker-archive), `ls`/`inspect`/`tag`/`rm`/`gc`,
//! export read back by skopeo and umoci, pull from a real registry on
//! loopback, `sandbox run --image` (a writable layer that goes away, no copy
//! of the root, the image's environment), hostile layers and archives,
//! concurrent and killed imports, and bad input.
//!
//! The test image is a busybox root filesystem built here from the host's
//! static busybox (Debian: busybox-static); without one, the tests that need
//! it print a note and skip. So do the ones that need skopeo, umoci or
//! docker-registry. Every test gives cbrun a fresh store (`CBRUN_HOME`)
//! owned by the user it runs as.
//!
//! Two tests guard regressions found while writing this file:
//! `writes_at_the_top_of_an_image_root_...` (real root could not create
//! entries directly in `/` of an image sandbox) and
//! `error_lines_say_each_cause_once`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

/// How long one `cbrun image ...` may take.
const DEADLINE: Duration = Duration::from_secs(90);
/// Applets linked into the test image's /bin.
const APPLETS: &[&str] = &[
    "sh", "echo", "cat", "ls", "touch", "rm", "mkdir", "printenv", "env", "true", "false", "sleep",
    "pwd", "id", "test", "[", "stat", "wc", "head", "find", "grep",
];
/// What `cbrun image import` gives an image made from a plain root filesystem.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const MT_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const MT_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const MT_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
const MT_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

macro_rules! need {
    ($e:expr, $test:expr, $what:expr) => {
        match $e {
            Some(v) => v,
            None => {
                eprintln!("note: {}: {} not found; test skipped", $test, $what);
                return;
            }
        }
    };
}

// ---------------------------------------------------------------------------
// Tools

fn find_tool(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// A static busybox (a dynamic one would not run in an image without libc).
fn busybox() -> Option<PathBuf> {
    ["/usr/bin/busybox", "/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file() && is_static_elf(p))
}

/// 64-bit little-endian ELF without a PT_INTERP program header.
fn is_static_elf(p: &Path) -> bool {
    let Ok(b) = fs::read(p) else { return false };
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > b.len() {
            return false;
        }
        if u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) == 3 {
            return false; // PT_INTERP: dynamically linked
        }
    }
    true
}

fn oci_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn sha256_hex(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .map(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        })
        .unwrap_or(false)
}

/// Run a host tool to completion; (success, stdout, stderr).
fn host_cmd(prog: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", prog.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn chown_r(p: &Path, uid: u32) {
    let st = Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

/// `chmod -R a+rX`: every test user may read it.
fn world_readable(p: &Path) {
    let st = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

// ---------------------------------------------------------------------------
// The store and cbrun

/// A fresh, empty store directory owned by the user cbrun runs as.
fn store_home(ctx: &Ctx, name: &str) -> PathBuf {
    let p = ctx.dir.join(name);
    fs::create_dir(&p).unwrap();
    chmod(&p, 0o700);
    std::os::unix::fs::chown(&p, Some(ctx.who.uid()), Some(ctx.who.uid())).unwrap();
    p
}

fn home_env(home: &Path) -> [(&'static str, &str); 1] {
    [("CBRUN_HOME", home.to_str().unwrap())]
}

/// `cbrun image ARGS...` with `CBRUN_HOME=home`.
fn image(ctx: &Ctx, home: &Path, args: &[&str]) -> Run {
    let args: Vec<String> = std::iter::once("image")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect();
    ctx.spawn_args(&args, &home_env(home), None).wait(DEADLINE)
}

fn image_ok(ctx: &Ctx, home: &Path, args: &[&str]) -> Run {
    let r = image(ctx, home, args);
    r.assert_code(0, &format!("cbrun image {}", args.join(" ")));
    r
}

/// `cbrun sandbox run --image NAME OPTS -- CMD` with `CBRUN_HOME=home`.
fn run_image(ctx: &Ctx, home: &Path, name: &str, opts: &[&str], cmd: &[&str]) -> Run {
    let mut o = vec!["--image", name];
    o.extend_from_slice(opts);
    ctx.run_env(&o, cmd, &home_env(home))
}

/// Exit 125 and exactly one line on stderr, `cbrun: error: ...`, naming
/// every one of `naming`.
fn assert_one_line_error(run: &Run, what: &str, naming: &[&str]) {
    run.assert_code(125, what);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "{what}: expected one line on stderr\n{}",
        run.show()
    );
    assert!(
        lines[0].starts_with("cbrun: error: "),
        "{what}: the error line lacks the `cbrun: error:` prefix\n{}",
        run.show()
    );
    for n in naming {
        assert!(
            lines[0].contains(n),
            "{what}: the error does not name {n:?}\n{}",
            run.show()
        );
    }
}

/// Exit 125 and clap's message for a command line it refused: the first
/// line `cbrun: error: ...` naming every one of `naming`, the last its
/// pointer to `--help`.
fn assert_clap_error(run: &Run, what: &str, naming: &[&str]) {
    run.assert_code(125, what);
    let first = run.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("cbrun: error: ")
            && naming.iter().all(|n| first.contains(n))
            && run
                .stderr
                .trim_end()
                .ends_with("For more information, try '--help'."),
        "{what}: expected clap's error naming {naming:?}\n{}",
        run.show()
    );
}

/// `image ls --json`, as reference → entry.
fn list(ctx: &Ctx, home: &Path) -> BTreeMap<String, Value> {
    let r = image_ok(ctx, home, &["ls", "--json"]);
    r.stdout_json()
        .as_array()
        .unwrap_or_else(|| panic!("ls --json is not an array\n{}", r.show()))
        .iter()
        .map(|e| (e["reference"].as_str().unwrap().to_owned(), e.clone()))
        .collect()
}

fn manifest_of(entry: &Value) -> String {
    entry["manifest"].as_str().unwrap().to_owned()
}

fn blobs(home: &Path) -> BTreeSet<String> {
    dir_names(&home.join("blobs/sha256"))
}

fn tmp_entries(home: &Path) -> BTreeSet<String> {
    dir_names(&home.join("tmp"))
}

/// Import and return the manifest digest printed (`NAME DIGEST`).
fn import(ctx: &Ctx, home: &Path, path: &Path, tag: &str, extra: &[&str]) -> String {
    let mut args = vec!["import", path.to_str().unwrap(), "--tag", tag];
    args.extend_from_slice(extra);
    let r = image_ok(ctx, home, &args);
    let line = r.stdout.trim();
    let (name, digest) = line
        .split_once(' ')
        .unwrap_or_else(|| panic!("import printed no `NAME DIGEST`\n{}", r.show()));
    assert_eq!(name, tag, "{}", r.show());
    assert!(is_digest(digest), "{}", r.show());
    digest.to_owned()
}

// ---------------------------------------------------------------------------
// Test images

/// A busybox root filesystem in `ctx.dir/name`, readable by every test user.
fn busybox_rootfs(ctx: &Ctx, name: &str, bb: &Path) -> PathBuf {
    let root = ctx.dir.join(name);
    for d in [
        "bin",
        "etc",
        "tmp",
        "proc",
        "dev",
        "sys",
        "root",
        "home/app",
        "usr/bin",
        "usr/lib",
        "var/empty",
    ] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::copy(bb, root.join("bin/busybox")).unwrap();
    chmod(&root.join("bin/busybox"), 0o755);
    for a in APPLETS {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(a)).unwrap();
    }
    fs::write(root.join("etc/motd"), "original motd\n").unwrap();
    fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    world_readable(&root);
    chmod(&root.join("tmp"), 0o1777);
    root
}

/// A gzip'd tarball of `dir` plus extra regular files.
fn tar_gz_of(dir: &Path, out: &Path, extra: &[(&str, &[u8])]) {
    let gz = flate2::write::GzEncoder::new(File::create(out).unwrap(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    b.follow_symlinks(false);
    b.append_dir_all(".", dir).unwrap();
    for (name, data) in extra {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(1_700_000_000);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
    chmod(out, 0o644);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    File,
    Dir,
    Symlink,
    Hardlink,
    Char,
    Block,
    Fifo,
}

/// One tar entry, written raw: the name and link target go into the header
/// exactly as given (`..`, absolute paths and all).
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    kind: Kind,
    data: Vec<u8>,
    link: String,
    mode: u32,
    dev: (u32, u32),
}

fn entry(name: &str, kind: Kind) -> Entry {
    Entry {
        name: name.to_owned(),
        kind,
        data: Vec::new(),
        link: String::new(),
        mode: if kind == Kind::Dir { 0o755 } else { 0o644 },
        dev: (0, 0),
    }
}
fn file(name: &str, data: &[u8]) -> Entry {
    Entry {
        data: data.to_vec(),
        ..entry(name, Kind::File)
    }
}
fn exe(name: &str, data: &[u8]) -> Entry {
    Entry {
        mode: 0o755,
        ..file(name, data)
    }
}
fn dir(name: &str) -> Entry {
    entry(name, Kind::Dir)
}
fn symlink(name: &str, target: &str) -> Entry {
    Entry {
        link: target.to_owned(),
        mode: 0o777,
        ..entry(name, Kind::Symlink)
    }
}
fn hardlink(name: &str, target: &str) -> Entry {
    Entry {
        link: target.to_owned(),
        ..entry(name, Kind::Hardlink)
    }
}
fn device(name: &str, kind: Kind, major: u32, minor: u32) -> Entry {
    Entry {
        dev: (major, minor),
        ..entry(name, kind)
    }
}

fn layer_tar(entries: &[Entry]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_gnu();
        {
            let g = h.as_gnu_mut().unwrap();
            let n = e.name.as_bytes();
            let l = e.link.as_bytes();
            assert!(
                n.len() < 100 && l.len() < 100,
                "name too long for a raw header: {e:?}"
            );
            g.name[..n.len()].copy_from_slice(n);
            g.linkname[..l.len()].copy_from_slice(l);
        }
        h.set_mode(e.mode);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(1_700_000_000);
        h.set_size(e.data.len() as u64);
        h.set_entry_type(match e.kind {
            Kind::File => tar::EntryType::Regular,
            Kind::Dir => tar::EntryType::Directory,
            Kind::Symlink => tar::EntryType::Symlink,
            Kind::Hardlink => tar::EntryType::Link,
            Kind::Char => tar::EntryType::Char,
            Kind::Block => tar::EntryType::Block,
            Kind::Fifo => tar::EntryType::Fifo,
        });
        if matches!(e.kind, Kind::Char | Kind::Block) {
            h.set_device_major(e.dev.0).unwrap();
            h.set_device_minor(e.dev.1).unwrap();
        }
        h.set_cksum();
        b.append(&h, &e.data[..]).unwrap();
    }
    b.into_inner().unwrap()
}

/// The layer of a busybox image built by hand.
fn busybox_layer_entries(bb: &Path) -> Vec<Entry> {
    let mut v = vec![
        dir("bin/"),
        exe("bin/busybox", &fs::read(bb).unwrap()),
        dir("etc/"),
        file("etc/motd", b"original motd\n"),
        dir("home/"),
        dir("home/app/"),
        dir("tmp/"),
        dir("proc/"),
        dir("dev/"),
        dir("sys/"),
    ];
    for a in APPLETS {
        v.push(symlink(&format!("bin/{a}"), "busybox"));
    }
    v
}

struct ImageSpec<'a> {
    layers: Vec<Vec<u8>>,
    gzip: bool,
    env: &'a [&'a str],
    workdir: Option<&'a str>,
    tag: &'a str,
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// An OCI image layout written by hand in `out`; returns the manifest digest.
fn write_oci_dir(out: &Path, spec: &ImageSpec) -> String {
    let stored: Vec<StoredLayer> = spec
        .layers
        .iter()
        .map(|l| StoredLayer {
            diff_id: format!("sha256:{}", sha256_hex(l)),
            blob: if spec.gzip { gzip(l) } else { l.clone() },
            media_type: if spec.gzip { MT_LAYER_GZIP } else { MT_LAYER },
        })
        .collect();
    write_oci_layout(out, spec, &stored)
}

/// A layer blob as stored in a layout: whatever bytes, named by their
/// digest, with the diff_id the config claims for them.
struct StoredLayer {
    blob: Vec<u8>,
    media_type: &'static str,
    diff_id: String,
}

/// [`write_oci_dir`] with the layer blobs given as stored (`spec.layers`
/// and `spec.gzip` unused).
fn write_oci_layout(out: &Path, spec: &ImageSpec, stored: &[StoredLayer]) -> String {
    let blobs = out.join("blobs/sha256");
    fs::create_dir_all(&blobs).unwrap();
    let put = |data: &[u8]| -> (String, usize) {
        let hex = sha256_hex(data);
        fs::write(blobs.join(&hex), data).unwrap();
        (format!("sha256:{hex}"), data.len())
    };
    let mut diff_ids = Vec::new();
    let mut layers = Vec::new();
    for l in stored {
        diff_ids.push(l.diff_id.clone());
        let (d, s) = put(&l.blob);
        layers.push(json!({"mediaType": l.media_type, "digest": d, "size": s}));
    }
    let mut cfg = json!({"Env": spec.env});
    if let Some(w) = spec.workdir {
        cfg["WorkingDir"] = json!(w);
    }
    let config = json!({
        "architecture": oci_arch(),
        "os": "linux",
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created_by": "tests/image.rs"}],
    });
    let (cd, cs) = put(&serde_json::to_vec(&config).unwrap());
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": {"mediaType": MT_CONFIG, "digest": cd, "size": cs},
        "layers": layers,
    });
    let mbytes = serde_json::to_vec(&manifest).unwrap();
    let (md, ms) = put(&mbytes);
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": MT_MANIFEST, "digest": md, "size": ms,
            "annotations": {"org.opencontainers.image.ref.name": spec.tag},
        }],
    });
    fs::write(out.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    fs::write(out.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    world_readable(out);
    md
}

/// A tar of an OCI layout directory (an oci-archive), plus raw extra entries.
fn oci_archive_of(layout: &Path, out: &Path, extra: &[Entry]) {
    let mut b = tar::Builder::new(Vec::new());
    b.follow_symlinks(false);
    for name in ["oci-layout", "index.json"] {
        b.append_path_with_name(layout.join(name), name).unwrap();
    }
    for hex in dir_names(&layout.join("blobs/sha256")) {
        let rel = format!("blobs/sha256/{hex}");
        b.append_path_with_name(layout.join(&rel), &rel).unwrap();
    }
    let mut bytes = b.into_inner().unwrap();
    // Drop the two zero blocks that end the archive, add the extras.
    bytes.truncate(bytes.len() - 1024);
    let mut extra_tar = layer_tar(extra);
    bytes.append(&mut extra_tar);
    fs::write(out, bytes).unwrap();
    chmod(out, 0o644);
}

/// Every entry under `root` with its type, mode, owner, size, mtime and
/// content (hashed) or link target: equal listings mean an unchanged tree.
fn tree_listing(root: &Path) -> String {
    fn walk(root: &Path, rel: &Path, out: &mut String) {
        let mut names: Vec<_> = fs::read_dir(root.join(rel))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for n in names {
            let r = rel.join(&n);
            let p = root.join(&r);
            let m = p.symlink_metadata().unwrap();
            let ft = m.file_type();
            let what = if ft.is_dir() {
                "dir".to_owned()
            } else if ft.is_symlink() {
                format!("-> {}", fs::read_link(&p).unwrap().display())
            } else if ft.is_file() {
                format!("file {}", sha256_hex(&fs::read(&p).unwrap()))
            } else {
                format!("special {:o}", m.mode())
            };
            out.push_str(&format!(
                "{} {:o} {}:{} {} {}.{} {}\n",
                r.display(),
                m.mode(),
                m.uid(),
                m.gid(),
                m.len(),
                m.mtime(),
                m.mtime_nsec(),
                what
            ));
            if ft.is_dir() {
                walk(root, &r, out);
            }
        }
    }
    let mut out = String::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// Regular files under `p` (not following symlinks): (relative path, size).
fn files_under(p: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(rd) = fs::read_dir(p.join(&rel)) else {
            continue;
        };
        for e in rd.flatten() {
            let r = rel.join(e.file_name());
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(r);
            } else if m.is_file() {
                out.push((r, m.len()));
            }
        }
    }
    out
}

fn find_named(p: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let path = e.path();
            if e.file_name().to_string_lossy().contains(name) {
                out.push(path.clone());
            }
            if path.symlink_metadata().map(|m| m.is_dir()).unwrap_or(false) {
                stack.push(path);
            }
        }
    }
    out
}

/// `image unpack NAME`: Ok(report JSON, root) or Err(the failed run).
fn unpack(ctx: &Ctx, home: &Path, name: &str) -> Result<(Value, PathBuf), Box<Run>> {
    let r = image(ctx, home, &["unpack", name]);
    if r.code != Some(0) {
        return Err(Box::new(r));
    }
    let report = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("cbrun: unpacked: "))
        .map(|j| serde_json::from_str(j).unwrap())
        .unwrap_or(Value::Null);
    Ok((report, PathBuf::from(r.stdout.trim())))
}
// The tests, by topic; the helpers above are theirs.
mod crash;
mod hostile;
mod pull;
mod run_image;
mod store;
