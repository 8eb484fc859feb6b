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

// ---------------------------------------------------------------------------
// 1. import, ls, inspect, tag, rm, gc

#[test]
fn import_list_inspect_tag_rm_and_gc() {
    let bb = need!(
        busybox(),
        "import_list_inspect_tag_rm_and_gc",
        "a static busybox"
    );
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-basic");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        let tgz = ctx.dir.join("rootfs.tar.gz");
        tar_gz_of(&root, &tgz, &[("etc/from-tarball", b"yes\n")]);

        // An empty store lists nothing.
        assert!(list(&ctx, &home).is_empty());
        let text = image_ok(&ctx, &home, &["ls"]);
        assert!(text.stdout.starts_with("IMAGE"), "{}", text.show());

        let d_dir = import(&ctx, &home, &root, "bb:dir", &[]);
        let d_tgz = import(&ctx, &home, &tgz, "bb:tgz", &[]);
        assert_ne!(d_dir, d_tgz, "different content, different manifests");
        // Importing the same directory again gives the same digest (the
        // tar of a directory is deterministic) and no new blob.
        let n_blobs = blobs(&home).len();
        assert_eq!(
            n_blobs,
            6,
            "manifest, config and layer of each image: {:?}",
            blobs(&home)
        );
        assert_eq!(import(&ctx, &home, &root, "bb:again", &[]), d_dir);
        assert_eq!(blobs(&home).len(), n_blobs);
        image_ok(&ctx, &home, &["rm", "bb:again"]);

        let l = list(&ctx, &home);
        assert_eq!(
            l.keys().cloned().collect::<Vec<_>>(),
            ["bb:dir", "bb:tgz"],
            "{l:?}"
        );
        for (name, digest) in [("bb:dir", &d_dir), ("bb:tgz", &d_tgz)] {
            let e = &l[name];
            assert_eq!(&manifest_of(e), digest, "{e}");
            assert!(is_digest(e["config"].as_str().unwrap_or("")), "{e}");
            assert_eq!(e["layers"], 1, "{e}");
            assert!(
                e["size"].as_u64().unwrap() > 1_000_000,
                "busybox is in it: {e}"
            );
            assert!(e["error"].is_null(), "{e}");
            assert!(e["source"].as_str().unwrap().contains("rootfs-"), "{e}");
            assert!(blobs(&home).contains(&digest[7..]), "{e}");
        }
        let text = image_ok(&ctx, &home, &["ls"]);
        assert!(
            text.stdout.contains("bb:dir") && text.stdout.contains("bb:tgz"),
            "{}",
            text.show()
        );

        // inspect: the manifest and the config, as stored.
        let ins = image_ok(&ctx, &home, &["inspect", "bb:dir"]).stdout_json();
        assert_eq!(
            ins["manifest_digest"].as_str(),
            Some(d_dir.as_str()),
            "{ins}"
        );
        assert_eq!(ins["manifest"]["schemaVersion"], 2, "{ins}");
        assert_eq!(
            ins["manifest"]["layers"].as_array().unwrap().len(),
            1,
            "{ins}"
        );
        assert_eq!(
            ins["manifest"]["config"]["digest"], ins["config_digest"],
            "{ins}"
        );
        assert_eq!(ins["config"]["os"], "linux", "{ins}");
        assert_eq!(ins["config"]["architecture"], oci_arch(), "{ins}");
        assert_eq!(
            ins["config"]["rootfs"]["diff_ids"]
                .as_array()
                .unwrap()
                .len(),
            1,
            "{ins}"
        );
        assert_eq!(
            ins["config"]["config"]["Env"],
            json!([format!("PATH={DEFAULT_PATH}")]),
            "{ins}"
        );
        // The stored blobs are what their names say.
        for d in [
            ins["manifest_digest"].as_str().unwrap(),
            ins["config_digest"].as_str().unwrap(),
            ins["manifest"]["layers"][0]["digest"].as_str().unwrap(),
        ] {
            let bytes = fs::read(home.join("blobs/sha256").join(&d[7..])).unwrap();
            assert_eq!(sha256_hex(&bytes), d[7..], "blob {d}");
        }
        // The tarball's extra file made it into the layer, as a rootless
        // unpack shows.
        let un = image_ok(&ctx, &home, &["unpack", "bb:tgz"]);
        let unpacked = PathBuf::from(un.stdout.trim());
        assert_eq!(
            unpacked,
            home.join("rootfs").join(&d_tgz[7..]),
            "{}",
            un.show()
        );
        assert_eq!(
            fs::read_to_string(unpacked.join("etc/from-tarball")).unwrap(),
            "yes\n"
        );
        assert!(unpacked.join("bin/busybox").is_file());

        // tag, then rm one name: the other still works.
        let t = image_ok(&ctx, &home, &["tag", "bb:dir", "other/name:v2"]);
        assert_eq!(t.stdout.trim(), "other/name:v2", "{}", t.show());
        let l = list(&ctx, &home);
        assert_eq!(manifest_of(&l["other/name:v2"]), d_dir, "{l:?}");
        let rm = image_ok(&ctx, &home, &["rm", "bb:dir"]);
        assert!(rm.stdout.contains("removed bb:dir"), "{}", rm.show());
        let l = list(&ctx, &home);
        assert_eq!(
            l.keys().cloned().collect::<Vec<_>>(),
            ["bb:tgz", "other/name:v2"]
        );
        let ins = image_ok(&ctx, &home, &["inspect", "other/name:v2"]).stdout_json();
        assert_eq!(ins["manifest_digest"].as_str(), Some(d_dir.as_str()));
        assert_one_line_error(
            &image(&ctx, &home, &["inspect", "bb:dir"]),
            "inspect a removed tag",
            &["bb:dir"],
        );

        // gc frees nothing while every blob is referenced.
        let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
        assert_eq!(gc["removed_blobs"], 0, "{gc}");
        assert_eq!(gc["kept_blobs"], 6, "{gc}");
        assert_eq!(blobs(&home).len(), 6);

        // Last name of the directory image gone: its 3 blobs go with gc.
        image_ok(&ctx, &home, &["rm", "other/name:v2"]);
        assert_eq!(blobs(&home).len(), 6, "rm leaves blobs to gc");
        let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
        assert_eq!(gc["removed_blobs"], 3, "{gc}");
        assert_eq!(gc["kept_blobs"], 3, "{gc}");
        let left = blobs(&home);
        assert_eq!(left.len(), 3);
        assert!(
            !left.contains(&d_dir[7..]) && left.contains(&d_tgz[7..]),
            "{left:?}"
        );
        image_ok(&ctx, &home, &["inspect", "bb:tgz"]);

        // The last image: rm drops its unpacked root too; gc the blobs.
        image_ok(&ctx, &home, &["rm", "bb:tgz"]);
        let gc = image_ok(&ctx, &home, &["gc"]);
        assert!(
            gc.stdout.contains("cbrun image gc: removed 3 blob(s)"),
            "{}",
            gc.show()
        );
        assert!(blobs(&home).is_empty(), "{:?}", blobs(&home));
        assert!(dir_names(&home.join("rootfs")).is_empty());
        assert!(tmp_entries(&home).is_empty());
        assert!(list(&ctx, &home).is_empty());
        ctx.assert_clean("image import/ls/inspect/tag/rm/gc");
    }
}

// ---------------------------------------------------------------------------
// 2. export, read back by skopeo and umoci; docker-archive round trip

#[test]
fn export_is_read_by_skopeo_and_umoci_and_round_trips() {
    const T: &str = "export_is_read_by_skopeo_and_umoci_and_round_trips";
    let bb = need!(busybox(), T, "a static busybox");
    let skopeo = need!(find_tool("skopeo"), T, "skopeo");
    let umoci = need!(find_tool("umoci"), T, "umoci");
    let ctx = Ctx::new(Who::Root, "img-export");
    let home = store_home(&ctx, "store");
    let root = busybox_rootfs(&ctx, "rootfs", &bb);
    let digest = import(&ctx, &home, &root, "bb:1", &[]);
    let n_blobs = blobs(&home).len();

    let archive = ctx.out.join("bb.tar");
    let layout = ctx.out.join("bb-oci");
    let a = archive.to_str().unwrap();
    let l = layout.to_str().unwrap();
    for (fmt, out) in [("oci-archive", a), ("oci-dir", l)] {
        let r = image_ok(
            &ctx,
            &home,
            &["export", "bb:1", "--format", fmt, "--output", out],
        );
        let rep = r.stdout_json();
        assert_eq!(
            rep["manifest_digest"].as_str(),
            Some(digest.as_str()),
            "{}",
            r.show()
        );
        assert_eq!(rep["ref_name"], "1", "{}", r.show());
        assert_eq!(rep["blobs"], 3, "{}", r.show());
    }
    assert!(archive.is_file() && layout.join("index.json").is_file());
    // The archive is deterministic: a second export gives the same bytes;
    // an existing output needs --force.
    let first = fs::read(&archive).unwrap();
    let again = image(&ctx, &home, &["export", "bb:1", "--output", a]);
    assert_one_line_error(&again, "export over an existing file", &[a]);
    image_ok(&ctx, &home, &["export", "bb:1", "--output", a, "--force"]);
    assert!(
        fs::read(&archive).unwrap() == first,
        "the same image exported twice differs"
    );

    // skopeo reads both, and sees our manifest.
    for src in [format!("oci-archive:{a}"), format!("oci:{l}:1")] {
        let (ok, out, err) = host_cmd(&skopeo, &["inspect", &src]);
        assert!(ok, "skopeo inspect {src}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["Digest"].as_str(),
            Some(digest.as_str()),
            "skopeo inspect {src}: {v}"
        );
        assert_eq!(v["Architecture"], oci_arch(), "{v}");
        let (ok, out, err) = host_cmd(&skopeo, &["inspect", "--raw", &src]);
        assert!(ok, "{err}");
        let raw = out.strip_suffix('\n').unwrap_or(&out);
        assert_eq!(
            format!("sha256:{}", sha256_hex(raw.as_bytes())),
            digest,
            "raw manifest"
        );
    }

    // umoci unpacks the layout to a runnable bundle.
    let bundle = ctx.dir.join("bundle");
    let (ok, _, err) = host_cmd(
        &umoci,
        &[
            "unpack",
            "--rootless",
            "--image",
            &format!("{l}:1"),
            bundle.to_str().unwrap(),
        ],
    );
    assert!(ok, "umoci unpack: {err}");
    let bbin = bundle.join("rootfs/bin/busybox");
    assert!(bbin.is_file(), "umoci's rootfs has no bin/busybox");
    assert_eq!(fs::read(&bbin).unwrap(), fs::read(&bb).unwrap());
    assert_eq!(
        fs::read_link(bundle.join("rootfs/bin/sh")).unwrap(),
        PathBuf::from("busybox")
    );
    assert!(bundle.join("config.json").is_file());

    // Our own export imports back to the same manifest, with no new blob.
    assert_eq!(import(&ctx, &home, &archive, "back:archive", &[]), digest);
    assert_eq!(import(&ctx, &home, &layout, "back:dir", &[]), digest);
    assert_eq!(blobs(&home).len(), n_blobs);
    let l2 = list(&ctx, &home);
    assert!(
        l2["back:archive"]["source"]
            .as_str()
            .unwrap()
            .contains("oci-archive"),
        "{l2:?}"
    );
    assert!(
        l2["back:dir"]["source"]
            .as_str()
            .unwrap()
            .contains("oci-dir"),
        "{l2:?}"
    );

    // skopeo converts to a docker-archive; that imports and runs.
    let dock = ctx.dir.join("bb-docker.tar");
    let (ok, _, err) = host_cmd(
        &skopeo,
        &[
            "--insecure-policy",
            "copy",
            "-q",
            &format!("oci-archive:{a}"),
            &format!("docker-archive:{}:conv/bb:docker", dock.display()),
        ],
    );
    assert!(ok, "skopeo copy to docker-archive: {err}");
    chmod(&dock, 0o644);
    let dd = import(&ctx, &home, &dock, "conv:1", &[]);
    let l3 = list(&ctx, &home);
    assert!(
        l3["conv:1"]["source"]
            .as_str()
            .unwrap()
            .contains("docker-archive"),
        "{l3:?}"
    );
    assert_eq!(l3["conv:1"]["layers"], 1);
    // Picking the image by its RepoTag works too.
    assert_eq!(
        import(&ctx, &home, &dock, "conv:2", &["--ref", "conv/bb:docker"]),
        dd
    );
    let r = run_image(
        &ctx,
        &home,
        "conv:1",
        &[],
        &["sh", "-c", "echo ok; cat /etc/motd"],
    );
    r.assert_code(0, "run the docker-archive image");
    assert_eq!(r.stdout, "ok\noriginal motd\n", "{}", r.show());
    ctx.assert_clean("export, skopeo, umoci, docker-archive");
}

// ---------------------------------------------------------------------------
// 3. pull from a registry on loopback

/// docker/distribution serving on 127.0.0.1; killed on drop.
struct Registry {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Registry {
    fn start(bin: &Path) -> Registry {
        let dir = PathBuf::from(format!("/tmp/cbrun-it-registry-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("data")).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("data").display()
        );
        fs::write(dir.join("config.yml"), config).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(File::create(dir.join("log")).unwrap())
            .stderr(File::create(dir.join("log.err")).unwrap())
            .spawn()
            .expect("starting docker-registry");
        let mut reg = Registry { child, dir, port };
        let up = wait_until(Duration::from_secs(15), || {
            reg.get("/v2/")
                .map(|s| s.starts_with("HTTP/1.0 200") || s.starts_with("HTTP/1.1 200"))
                .unwrap_or(false)
        });
        if !up {
            let status = reg.child.try_wait().ok().flatten();
            panic!(
                "docker-registry did not answer GET /v2/ on 127.0.0.1:{port} (exited: {status:?}): {}",
                fs::read_to_string(reg.dir.join("log.err")).unwrap_or_default()
            );
        }
        reg
    }

    fn get(&self, path: &str) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// "N blob(s) already present" from a pull's stderr.
fn blobs_already_present(stderr: &str) -> Option<u64> {
    let i = stderr.find(" blob(s) already present")?;
    stderr[..i]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn pull_from_a_loopback_registry() {
    const T: &str = "pull_from_a_loopback_registry";
    let bb = need!(busybox(), T, "a static busybox");
    let skopeo = need!(find_tool("skopeo"), T, "skopeo");
    let regbin = need!(
        find_tool("docker-registry"),
        T,
        "docker-registry (Debian's docker/distribution)"
    );
    let reg = Registry::start(&regbin);
    let addr = reg.addr();
    let remote = format!("{addr}/test/bb:1");
    {
        let ctx = Ctx::new(Who::Root, "img-pull");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        import(&ctx, &home, &root, "bb:1", &[]);
        let layout = ctx.out.join("bb-oci");
        image_ok(
            &ctx,
            &home,
            &[
                "export",
                "bb:1",
                "--format",
                "oci-dir",
                "--output",
                layout.to_str().unwrap(),
            ],
        );
        let (ok, _, err) = host_cmd(
            &skopeo,
            &[
                "--insecure-policy",
                "copy",
                "-q",
                "--dest-tls-verify=false",
                &format!("oci:{}:1", layout.display()),
                &format!("docker://{remote}"),
            ],
        );
        assert!(ok, "skopeo push to the registry: {err}");
        assert!(reg
            .get("/v2/test/bb/tags/list")
            .unwrap_or_default()
            .contains("\"1\""));

        // Pull into a fresh store and run it.
        let home2 = store_home(&ctx, "store2");
        let p = image_ok(
            &ctx,
            &home2,
            &["pull", "--insecure", &remote, "--tag", "pulled:1"],
        );
        let (name, digest) = p.stdout.trim().split_once(' ').unwrap();
        assert_eq!(name, "pulled:1", "{}", p.show());
        assert!(is_digest(digest), "{}", p.show());
        assert!(p.stderr.contains("cbrun: pulled"), "{}", p.show());
        assert_eq!(blobs_already_present(&p.stderr), Some(0), "{}", p.show());
        let l = list(&ctx, &home2);
        assert_eq!(manifest_of(&l["pulled:1"]), digest);
        assert!(
            l["pulled:1"]["source"].as_str().unwrap().contains(&remote),
            "{l:?}"
        );
        let r = run_image(&ctx, &home2, "pulled:1", &[], &["echo", "ok"]);
        r.assert_code(0, "run the pulled image");
        assert_eq!(r.stdout, "ok\n", "{}", r.show());

        // Again, under the reference's own name: nothing but the manifest
        // is fetched.
        let p2 = image_ok(&ctx, &home2, &["pull", "--insecure", &remote]);
        assert_eq!(
            p2.stdout.trim(),
            format!("{remote} {digest}"),
            "{}",
            p2.show()
        );
        assert_eq!(
            blobs_already_present(&p2.stderr),
            Some(2),
            "config and layer: {}",
            p2.show()
        );
        assert_eq!(blobs(&home2).len(), 3);

        // A missing tag: one line, fast, nothing stored.
        let t = Instant::now();
        let miss = image(
            &ctx,
            &home2,
            &["pull", "--insecure", &format!("{addr}/test/bb:nope")],
        );
        assert_one_line_error(&miss, "pull of a missing tag", &["test/bb:nope"]);
        assert!(t.elapsed() < Duration::from_secs(20), "{}", miss.show());
        let miss = image(
            &ctx,
            &home2,
            &["pull", "--insecure", &format!("{addr}/test/nosuchrepo:1")],
        );
        assert_one_line_error(
            &miss,
            "pull of a missing repository",
            &["test/nosuchrepo:1"],
        );
        assert_eq!(list(&ctx, &home2).len(), 2);

        // Plain http to anything but loopback is refused before connecting.
        for bad in ["10.255.255.1:5000/x:1", "registry.example.invalid:5000/x:1"] {
            let t = Instant::now();
            let r = image(&ctx, &home2, &["pull", "--insecure", bad]);
            assert_one_line_error(&r, "pull --insecure from a remote host", &[bad, "loopback"]);
            assert!(
                t.elapsed() < Duration::from_secs(3),
                "not refused up front\n{}",
                r.show()
            );
        }
        ctx.assert_clean("pulls as root");
    }
    // Rootless: nobody pulls into its own store and runs the image.
    {
        let ctx = Ctx::new(Who::Delegated, "img-pull-nobody");
        let home = store_home(&ctx, "store");
        let p = image_ok(
            &ctx,
            &home,
            &["pull", "--insecure", &remote, "--tag", "mine:1"],
        );
        assert!(p.stdout.starts_with("mine:1 sha256:"), "{}", p.show());
        let r = run_image(&ctx, &home, "mine:1", &[], &["sh", "-c", "echo ok; id -u"]);
        r.assert_code(0, "nobody runs the pulled image");
        assert_eq!(r.stdout, "ok\n0\n", "{}", r.show());
        ctx.assert_clean("a pull and a run as nobody");
    }
    drop(reg);
}

// ---------------------------------------------------------------------------
// 4. sandbox run --image: a writable layer per run, no copy, the image's env

#[test]
fn runs_on_an_image_write_to_an_overlay_that_goes_away() {
    const T: &str = "runs_on_an_image_write_to_an_overlay_that_goes_away";
    let bb = need!(busybox(), T, "a static busybox");
    for who in [Who::Root, Who::Delegated, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-run");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        let digest = import(&ctx, &home, &root, "bb:1", &[]);
        let unpacked = home.join("rootfs").join(&digest[7..]);

        // First use unpacks the image; the listing is the reference.
        let r = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &["sh", "-c", "echo \"$PATH\"; id -u; cat /etc/motd"],
        );
        r.assert_code(0, "a first run on the image");
        assert_eq!(
            r.stdout,
            format!("{DEFAULT_PATH}\n0\noriginal motd\n"),
            "the image's PATH reaches the command\n{}",
            r.show()
        );
        assert!(
            unpacked.join("bin/busybox").is_file(),
            "not unpacked at {}",
            unpacked.display()
        );
        let before = tree_listing(&unpacked);

        // Writes anywhere in / succeed.
        let w = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &[
                "sh",
                "-c",
                "set -e
                 echo written > /root/new-file
                 mkdir -p /usr/lib/deep/er && echo x > /usr/lib/deep/er/f
                 echo changed > /etc/motd
                 echo added > /bin/added
                 mkdir /var/empty/sub && rmdir /var/empty/sub
                 chmod 700 /home/app
                 rm /bin/cat
                 test ! -e /bin/cat
                 echo \"$(busybox cat /etc/motd) $(busybox cat /root/new-file)\"",
            ],
        );
        w.assert_code(0, "writes in the image's /");
        assert_eq!(w.stdout, "changed written\n", "{}", w.show());

        // ...and are gone in the next run.
        let n = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &[
                "sh",
                "-c",
                "test ! -e /root/new-file && test ! -e /usr/lib/deep && test ! -e /bin/added \
                 && test -e /bin/cat && stat -c %a /home/app && cat /etc/motd",
            ],
        );
        n.assert_code(0, "the next run sees none of the previous run's writes");
        assert_eq!(n.stdout, "755\noriginal motd\n", "{}", n.show());

        // No copy of the root per run: while a run is live, its state holds
        // only what the command wrote.
        let running = ctx.spawn_env(
            &["--image", "bb:1"],
            &[
                "sh",
                "-c",
                "echo mine > /tmp/../etc/written-by-the-run; sleep 3",
            ],
            &home_env(&home),
        );
        let mut upper = None;
        let seen = wait_until(Duration::from_secs(20), || {
            for id in ctx.new_runs() {
                let u = who.runs_dir().join(id).join("upper");
                if u.join("etc/written-by-the-run").is_file() {
                    upper = Some(u);
                    return true;
                }
            }
            false
        });
        assert!(
            seen,
            "no run dir with upper/etc/written-by-the-run under {}",
            who.runs_dir().display()
        );
        let upper = upper.unwrap();
        let run_dir = upper.parent().unwrap().to_path_buf();
        let files = files_under(&run_dir);
        let total: u64 = files.iter().map(|(_, s)| s).sum();
        assert!(
            total < 256 * 1024 && !files.iter().any(|(p, _)| p.ends_with("busybox")),
            "the run dir holds a copy of the image? {total} bytes: {files:?}"
        );
        let up: Vec<_> = files_under(&upper).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            up,
            [PathBuf::from("etc/written-by-the-run")],
            "the upper layer holds more than the write"
        );
        let r = running.wait(DEFAULT_DEADLINE);
        r.assert_code(0, "the run that wrote one file");
        assert!(
            !run_dir.exists(),
            "the run dir (and its upper layer) outlived the run"
        );

        // The shared root did not change.
        assert_eq!(
            tree_listing(&unpacked),
            before,
            "the unpacked image changed under {}",
            unpacked.display()
        );

        // Removing the image while a sandbox runs on it keeps the root until
        // the sandbox is gone; gc waits for it, then collects everything.
        let running = ctx.spawn_env(
            &["--image", "bb:1"],
            &["sh", "-c", "echo > /etc/started; sleep 2; cat /etc/motd"],
            &home_env(&home),
        );
        let live = wait_until(Duration::from_secs(20), || {
            ctx.new_runs()
                .iter()
                .any(|id| who.runs_dir().join(id).join("upper/etc/started").exists())
        });
        assert!(live, "the sandbox did not start");
        let rm = image_ok(&ctx, &home, &["rm", "bb:1"]);
        assert!(rm.stdout.contains("removed bb:1"), "{}", rm.show());
        assert!(
            unpacked.join("bin/busybox").is_file(),
            "rm pulled the root from under a live sandbox"
        );
        let gc_args: Vec<String> = ["image", "gc", "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let gc = ctx.spawn_args(&gc_args, &home_env(&home), None);
        let r = running.wait(DEFAULT_DEADLINE);
        r.assert_code(
            0,
            &format!(
                "a sandbox ({}) whose image was removed under it; outcome {}",
                who.label(),
                r.outcome.clone().unwrap_or_default()
            ),
        );
        assert_eq!(r.stdout, "original motd\n", "{}", r.show());
        let gc = gc.wait(DEADLINE);
        gc.assert_code(0, "gc after the sandbox");
        let rep = gc.stdout_json();
        assert_eq!(rep["removed_rootfs"], 1, "{rep}");
        assert_eq!(rep["removed_blobs"], 3, "{rep}");
        assert!(!unpacked.exists());
        ctx.assert_clean("runs on an image");
    }
}

/// The top directory of an image's root is the sandbox root's, as every
/// other directory of the image is: `/new-file` can be created.
///
/// Regression: the overlay's upper directory gives the merged `/` its
/// owner; made by real root and left owned by host uid 0, it showed as
/// 65534 to a sandbox whose ids map to 0x70000000+, so nothing could be
/// created directly in `/`.
#[test]
fn writes_at_the_top_of_an_image_root_succeed_as_every_user() {
    const T: &str = "writes_at_the_top_of_an_image_root_succeed_as_every_user";
    let bb = need!(busybox(), T, "a static busybox");
    let mut failures = Vec::new();
    for who in [Who::Delegated, Who::Undelegated, Who::Root] {
        let ctx = Ctx::new(who, "img-top");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        import(&ctx, &home, &root, "bb:1", &[]);
        let r = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &["sh", "-c", "stat -c %u:%g /; echo written > /new-file && mkdir /new-dir && rm /new-file && rmdir /new-dir && echo ok"],
        );
        if r.code != Some(0) || !r.stdout.ends_with("ok\n") || !r.stdout.starts_with("0:0\n") {
            failures.push(format!("{}: {}", who.label(), r.show()));
        }
        let r = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &["sh", "-c", "test ! -e /new-file && echo gone"],
        );
        r.assert_code(0, "the next run");
        ctx.assert_clean("writes at the top of an image root");
    }
    assert!(
        failures.is_empty(),
        "`/` of an image sandbox is not the sandbox root's, or not writable:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_image_config_env_and_workdir_reach_the_command() {
    const T: &str = "the_image_config_env_and_workdir_reach_the_command";
    let bb = need!(busybox(), T, "a static busybox");
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-env");
        let home = store_home(&ctx, "store");
        let layout = ctx.dir.join("oci");
        let digest = write_oci_dir(
            &layout,
            &ImageSpec {
                layers: vec![layer_tar(&busybox_layer_entries(&bb))],
                gzip: true,
                env: &[
                    "PATH=/bin:/opt/nowhere",
                    "IMG_GREETING=hello from the config",
                    "IMG_OVERRIDE=image",
                ],
                workdir: Some("/home/app"),
                tag: "v1",
            },
        );
        assert_eq!(import(&ctx, &home, &layout, "envimg:1", &[]), digest);
        let script = "echo \"$IMG_GREETING|$IMG_OVERRIDE|$PATH|$(pwd)\"";
        let r = run_image(
            &ctx,
            &home,
            "envimg:1",
            &["--env", "IMG_OVERRIDE=flag"],
            &["sh", "-c", script],
        );
        r.assert_code(0, "a run on an image with Env and WorkingDir");
        assert_eq!(
            r.stdout,
            "hello from the config|flag|/bin:/opt/nowhere|/home/app\n",
            "{}",
            r.show()
        );
        // --workdir wins over the image's.
        let r = run_image(&ctx, &home, "envimg:1", &["--workdir", "/tmp"], &["pwd"]);
        r.assert_code(0, "--workdir");
        assert_eq!(r.stdout, "/tmp\n", "{}", r.show());
        // The host's environment does not leak in.
        let r = run_image(&ctx, &home, "envimg:1", &[], &["env"]);
        r.assert_code(0, "env");
        assert!(!r.stdout.contains(CANARY_VALUE), "{}", r.show());
        ctx.assert_clean("runs with the image's env");
    }
}

/// Regression: several error types print their source in their own
/// message and also return it from `source()`; each cause must come out
/// once on the one error line.
#[test]
fn error_lines_say_each_cause_once() {
    let ctx = Ctx::new(Who::Root, "img-errdup");
    let home = store_home(&ctx, "store");
    let tarball = ctx.dir.join("dotdot.tar");
    fs::write(
        &tarball,
        layer_tar(&[dir("etc/"), file("../../escape", b"x\n")]),
    )
    .unwrap();
    import(&ctx, &home, &tarball, "dotdot:1", &[]);
    let out = ctx.out_file("x.tar");
    let cases: Vec<(Run, &str)> = vec![
        (
            image(
                &ctx,
                &home,
                &["export", "nosuch:1", "--output", out.to_str().unwrap()],
            ),
            "is not in the store",
        ),
        (
            image(&ctx, &home, &["unpack", "dotdot:1"]),
            "leads out of the root",
        ),
        (
            run_image(&ctx, &home, "dotdot:1", &[], &["true"]),
            "leads out of the root",
        ),
    ];
    let mut bad = Vec::new();
    for (r, cause) in &cases {
        assert_one_line_error(r, "an error", &[cause]);
        if r.stderr.matches(cause).count() != 1 {
            bad.push(r.stderr.trim().to_owned());
        }
    }
    assert!(
        bad.is_empty(),
        "error lines that repeat their cause:\n{}",
        bad.join("\n")
    );
    ctx.assert_clean("errors");
}

// ---------------------------------------------------------------------------
// 5. hostile archives and layers

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

#[test]
fn hostile_layers_and_archives_write_nothing_outside_the_store() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "img-hostile");
        let home = store_home(&ctx, "store");
        // A directory the user may write to, with a sentinel in it.
        let outside = ctx.dir.join("outside");
        fs::create_dir_all(outside.join("sub")).unwrap();
        fs::write(outside.join("sentinel.txt"), "untouched\n").unwrap();
        chown_r(&outside, who.uid());
        let outside_before = tree_listing(&outside);
        let out_abs = outside.to_str().unwrap().to_owned();
        let esc = ctx.marker("escape");
        let plain_layer = || layer_tar(&[dir("etc/"), file("etc/ok", b"ok\n")]);
        let oci = |name: &str, layers: Vec<Vec<u8>>| -> PathBuf {
            let d = ctx.dir.join(name);
            write_oci_dir(
                &d,
                &ImageSpec {
                    layers,
                    gzip: false,
                    env: &["PATH=/bin"],
                    workdir: None,
                    tag: "1",
                },
            );
            d
        };

        // (a) `..` entries in a layer (here a plain rootfs tarball): the
        // unpack refuses them, naming the entry.
        let dots = format!("../../{esc}");
        let deep = format!("../../../../../../../../../../tmp/{esc}");
        let tarball = ctx.dir.join("dotdot.tar");
        fs::write(
            &tarball,
            layer_tar(&[
                dir("etc/"),
                file("etc/ok", b"ok\n"),
                file(&dots, b"escaped\n"),
                file(&deep, b"escaped\n"),
            ]),
        )
        .unwrap();
        chmod(&tarball, 0o644);
        let r = image(
            &ctx,
            &home,
            &["import", tarball.to_str().unwrap(), "--tag", "dotdot:1"],
        );
        if r.code == Some(0) {
            let e = unpack(&ctx, &home, "dotdot:1")
                .expect_err("a layer with `../..` entries was unpacked");
            assert_one_line_error(&e, "unpack of a `..` entry", &[&dots]);
            let e = run_image(&ctx, &home, "dotdot:1", &[], &["true"]);
            assert_one_line_error(
                &e,
                "run on an image with a `..` entry",
                &["dotdot:1", &dots],
            );
        } else {
            assert_one_line_error(&r, "import of a `..` entry", &[&dots]);
        }

        // (b) the same in an oci-archive's own members: refused at import.
        let good = oci("good-oci", vec![plain_layer()]);
        let evil_archive = ctx.dir.join("evil-archive.tar");
        oci_archive_of(&good, &evil_archive, &[file(&dots, b"escaped\n")]);
        let r = image(
            &ctx,
            &home,
            &[
                "import",
                evil_archive.to_str().unwrap(),
                "--tag",
                "evilarch:1",
            ],
        );
        assert_one_line_error(&r, "import of an oci-archive with a `..` member", &[&dots]);
        // Without the hostile member the same archive is fine.
        let fine = ctx.dir.join("fine-archive.tar");
        oci_archive_of(&good, &fine, &[]);
        import(&ctx, &home, &fine, "fine:1", &[]);

        // (c) symlinks planted by one layer, written through by the next:
        // resolved inside the root, or refused.
        let mut l1 = vec![];
        let mut acc = String::new();
        for comp in out_abs.trim_start_matches('/').split('/') {
            acc.push_str(comp);
            acc.push('/');
            l1.push(dir(&acc));
        }
        l1.push(symlink("abs-link", &out_abs));
        l1.push(symlink(
            "rel-link",
            &format!("../../../../../../../..{out_abs}"),
        ));
        l1.push(symlink("file-link", &format!("{out_abs}/sentinel.txt")));
        let l2 = vec![
            file("abs-link/planted-abs", b"pwned\n"),
            file("rel-link/planted-rel", b"pwned\n"),
            file("file-link", b"pwned\n"),
            file("abs-link/.wh.sentinel.txt", b""),
        ];
        let links = oci("links-oci", vec![layer_tar(&l1), layer_tar(&l2)]);
        import(&ctx, &home, &links, "links:1", &[]);
        match unpack(&ctx, &home, "links:1") {
            Ok((_, root)) => {
                let mirror = root.join(out_abs.trim_start_matches('/'));
                for f in ["planted-abs", "planted-rel"] {
                    assert_eq!(
                        fs::read_to_string(mirror.join(f)).ok().as_deref(),
                        Some("pwned\n"),
                        "{f} should land inside the root, under {}",
                        mirror.display()
                    );
                }
                eprintln!("note: planted symlinks: resolved inside the root");
                let fl = root.join("file-link").symlink_metadata().unwrap();
                assert!(
                    fl.is_file(),
                    "a file over a planted symlink replaces the link"
                );
            }
            Err(e) => {
                eprintln!("note: planted symlinks: refused: {}", e.stderr.trim());
                assert_one_line_error(&e, "unpack through planted symlinks", &["link"])
            }
        }

        // (d) a symlink to a host directory the root does not have.
        let dangling = oci(
            "dangling-oci",
            vec![
                layer_tar(&[symlink("dangling", &format!("{out_abs}/sub"))]),
                layer_tar(&[file("dangling/x", b"pwned\n")]),
            ],
        );
        import(&ctx, &home, &dangling, "dangling:1", &[]);
        match unpack(&ctx, &home, "dangling:1") {
            // Accepted: then `x` went inside the root (checked below: not
            // into the host's `sub`).
            Ok(_) => eprintln!("note: dangling symlink: accepted"),
            Err(e) => {
                eprintln!("note: dangling symlink: refused: {}", e.stderr.trim());
                assert_one_line_error(&e, "unpack through a dangling symlink", &["dangling/x"])
            }
        }

        // (e) hard links to host paths.
        for (i, target) in [
            format!("{out_abs}/sentinel.txt"),
            format!("../../../..{out_abs}/sentinel.txt"),
        ]
        .iter()
        .enumerate()
        {
            let name = format!("hard{i}:1");
            let h = oci(
                &format!("hard{i}-oci"),
                vec![layer_tar(&[dir("etc/"), hardlink("etc/hl", target)])],
            );
            let r = image(
                &ctx,
                &home,
                &["import", h.to_str().unwrap(), "--tag", &name],
            );
            if r.code != Some(0) {
                eprintln!(
                    "note: hard link to {target}: import refused: {}",
                    r.stderr.trim()
                );
                assert_one_line_error(&r, "import of a hard link out", &["etc/hl"]);
                continue;
            }
            match unpack(&ctx, &home, &name) {
                Ok((_, root)) => {
                    eprintln!("note: hard link to {target}: accepted");
                    let m = root.join("etc/hl").symlink_metadata();
                    let host = outside.join("sentinel.txt").metadata().unwrap();
                    assert!(
                        m.map(|m| m.ino() != host.ino()).unwrap_or(true),
                        "etc/hl is a hard link to the host's sentinel"
                    );
                }
                Err(e) => {
                    eprintln!("note: hard link to {target}: refused: {}", e.stderr.trim());
                    assert_one_line_error(&e, "unpack of a hard link out", &["etc/hl"])
                }
            }
        }

        // (f) devices, FIFOs, setuid: dropped, counted, stripped.
        let dev = oci(
            "dev-oci",
            vec![layer_tar(&[
                dir("dev/"),
                device("dev/evil-null", Kind::Char, 1, 3),
                device("dev/evil-sda", Kind::Block, 8, 0),
                device("evil-fifo", Kind::Fifo, 0, 0),
                dir("bin/"),
                Entry {
                    mode: 0o4755,
                    ..exe("bin/suid", b"#!/bin/sh\n")
                },
                Entry {
                    mode: 0o2755,
                    ..exe("bin/sgid", b"#!/bin/sh\n")
                },
                file("etc-file", b"kept\n"),
            ])],
        );
        import(&ctx, &home, &dev, "dev:1", &[]);
        let (report, root) = unpack(&ctx, &home, "dev:1")
            .unwrap_or_else(|e| panic!("devices are dropped, not refused\n{}", e.show()));
        assert_eq!(report["devices_dropped"], 3, "{report}");
        assert_eq!(report["setid_stripped"], 2, "{report}");
        for p in ["dev/evil-null", "dev/evil-sda", "evil-fifo"] {
            let m = root.join(p).symlink_metadata();
            assert!(
                m.as_ref()
                    .map(|m| !(m.file_type().is_char_device()
                        || m.file_type().is_block_device()
                        || m.file_type().is_fifo()))
                    .unwrap_or(true),
                "{p} was created as a special file: {m:?}"
            );
        }
        for p in ["bin/suid", "bin/sgid"] {
            let mode = root.join(p).metadata().unwrap().mode();
            assert_eq!(mode & 0o6000, 0, "{p}: mode {mode:o}");
        }
        assert_eq!(fs::read_to_string(root.join("etc-file")).unwrap(), "kept\n");

        // Nothing was written outside the store.
        assert_eq!(
            tree_listing(&outside),
            outside_before,
            "{} changed",
            outside.display()
        );
        assert_eq!(
            fs::read_to_string(outside.join("sentinel.txt")).unwrap(),
            "untouched\n"
        );
        assert_eq!(outside.join("sentinel.txt").metadata().unwrap().nlink(), 1);
        // The `..` entries aimed at the store's root, its parent (the
        // test dir) and /tmp.
        let mut escaped = find_named(&ctx.dir, &esc);
        escaped.extend(
            dir_names(Path::new("/tmp"))
                .into_iter()
                .filter(|n| n.contains(&esc))
                .map(|n| Path::new("/tmp").join(n)),
        );
        assert!(escaped.is_empty(), "entries escaped: {escaped:?}");
        // Failed unpacks leave no temp trees; gc finds nothing in tmp/.
        let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
        assert_eq!(gc["removed_tmp"], 0, "{gc}");
        ctx.assert_clean("hostile layers");
    }
}

/// A layer blob that is a gzip stream cut short (in the middle, and just
/// before its 8-byte trailer), under a correct digest: the import takes
/// it, the unpack finds the cut, names the layer, and leaves neither an
/// unpacked root nor a temp tree.
#[test]
fn a_truncated_gzip_layer_fails_to_unpack_and_leaves_nothing() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "img-gzcut");
        let home = store_home(&ctx, "store");
        // Compressible, but spanning many deflate blocks.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let noise: Vec<u8> = (0..300_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b'a' + (x % 16) as u8
            })
            .collect();
        let tar = layer_tar(&[
            dir("etc/"),
            file("etc/first", b"1\n"),
            file("etc/big", &noise),
            file("etc/last", b"3\n"),
        ]);
        let gz = gzip(&tar);
        assert!(gz.len() > 50_000, "{}", gz.len());
        // A one-layer image whose layer blob is `blob` (all or part of
        // `gz`), under the uncompressed tar's diff id.
        let gz_layout = |layout: &Path, blob: &[u8]| {
            write_oci_layout(
                layout,
                &ImageSpec {
                    layers: vec![],
                    gzip: true,
                    env: &["PATH=/bin"],
                    workdir: None,
                    tag: "1",
                },
                &[StoredLayer {
                    blob: blob.to_vec(),
                    media_type: MT_LAYER_GZIP,
                    diff_id: format!("sha256:{}", sha256_hex(&tar)),
                }],
            )
        };
        for (tag, cut, cause) in [
            ("cut-middle:1", gz.len() / 2, "incomplete deflate stream"),
            ("cut-trailer:1", gz.len() - 8, "end-of-archive marker"),
        ] {
            let layout = ctx.dir.join(tag.replace(':', "-"));
            let md = gz_layout(&layout, &gz[..cut]);
            assert_eq!(import(&ctx, &home, &layout, tag, &[]), md);
            let rootfs = home.join("rootfs").join(md.trim_start_matches("sha256:"));
            let e = unpack(&ctx, &home, tag)
                .expect_err("a layer with a truncated gzip stream was unpacked");
            eprintln!("note: {tag}: {}", e.stderr.trim());
            assert_one_line_error(
                &e,
                "unpack of a truncated gzip layer",
                &[tag, "layer 1", cause],
            );
            let r = run_image(&ctx, &home, tag, &[], &["true"]);
            assert_one_line_error(
                &r,
                "run on a truncated gzip layer",
                &[tag, "layer 1", cause],
            );
            assert!(!rootfs.exists(), "{} was left", rootfs.display());
            assert!(
                dir_names(&home.join("rootfs")).is_empty(),
                "{:?}",
                dir_names(&home.join("rootfs"))
            );
            assert!(tmp_entries(&home).is_empty(), "{:?}", tmp_entries(&home));
        }
        // The whole stream unpacks (so the cut is what failed above).
        let layout = ctx.dir.join("whole");
        gz_layout(&layout, &gz);
        import(&ctx, &home, &layout, "whole:1", &[]);
        let (_, root) = unpack(&ctx, &home, "whole:1")
            .unwrap_or_else(|e| panic!("the whole stream\n{}", e.show()));
        assert_eq!(fs::read(root.join("etc/big")).unwrap(), noise);
        assert_eq!(fs::read_to_string(root.join("etc/last")).unwrap(), "3\n");
        assert!(tmp_entries(&home).is_empty(), "{:?}", tmp_entries(&home));
        ctx.assert_clean("truncated gzip layers");
    }
}

/// The layers of the whiteout fixture (the unit tests' twin in
/// src/image/unpack/tests.rs checks the same layers against a table).
fn whiteout_fixture_layers() -> Vec<Vec<u8>> {
    let mode = |mode: u32, e: Entry| Entry { mode, ..e };
    vec![
        layer_tar(&[
            dir("etc/"),
            file("etc/passwd", b"root:x:0:0\n"),
            file("etc/gone", b"gone\n"),
            dir("var/"),
            dir("var/cache/"),
            file("var/cache/a", b"a"),
            mode(0o700, dir("var/cache/sub/")),
            file("var/cache/sub/b", b"b"),
            dir("opq/"),
            file("opq/old", b"old"),
            dir("opq/olddir/"),
            file("opq/olddir/x", b"x"),
            file("readd", b"first"),
            dir("p/"),
            file("p/child", b"child"),
            symlink("link", "etc"),
            dir("data/"),
            mode(0o640, file("data/orig", b"shared")),
            mode(0o640, hardlink("data/hl", "data/orig")),
        ]),
        layer_tar(&[
            file("etc/.wh.gone", b""),
            file("var/.wh.cache", b""),
            file("opq/before", b"before"),
            file("opq/.wh..wh..opq", b""),
            mode(0o600, file("opq/after", b"after")),
            mode(0o750, dir("opq/newdir/")),
            file("opq/newdir/y", b"y"),
            file(".wh.never", b""),
            file("etc/.wh.nothing", b""),
            file("nodir/.wh.nothing", b""),
            file(".wh.readd", b""),
            file("p", b"p is a file"),
            mode(0o640, hardlink("data/hl2", "data/orig")),
        ]),
        layer_tar(&[
            mode(0o600, file("readd", b"second")),
            file("p/.wh.child", b""),
            mode(0o750, dir("link/")),
            file("link/inside", b"inside"),
            file("data/.wh.orig", b""),
            mode(0o711, dir("var/cache/")),
            file("var/cache/new", b"new"),
        ]),
        layer_tar(&[file("opq/.wh.before", b""), file("var/cache/.wh.a", b"")]),
    ]
}

/// Every path below `root` with its type, content or link target, and
/// permission bits without setuid/setgid.
fn tree_contents(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(root.join(&rel)).unwrap() {
            let r = rel.join(e.unwrap().file_name());
            let p = root.join(&r);
            let m = p.symlink_metadata().unwrap();
            let ft = m.file_type();
            let what = if ft.is_dir() {
                stack.push(r.clone());
                "dir".to_owned()
            } else if ft.is_symlink() {
                format!("symlink -> {}", fs::read_link(&p).unwrap().display())
            } else if ft.is_file() {
                format!("file {:?}", String::from_utf8_lossy(&fs::read(&p).unwrap()))
            } else {
                format!("special {:o}", m.mode())
            };
            out.insert(
                r.display().to_string(),
                format!("{what} mode {:o}", m.mode() & 0o1777),
            );
        }
    }
    out
}

/// The whiteout fixture unpacked by umoci and by cbrun: the same tree,
/// path by path.
#[test]
fn whiteouts_unpack_as_umoci_unpacks_them() {
    const T: &str = "whiteouts_unpack_as_umoci_unpacks_them";
    let umoci = need!(find_tool("umoci"), T, "umoci");
    let ctx = Ctx::new(Who::Root, "img-whiteouts");
    let home = store_home(&ctx, "store");
    let layout = ctx.dir.join("wh-oci");
    write_oci_dir(
        &layout,
        &ImageSpec {
            layers: whiteout_fixture_layers(),
            gzip: true,
            env: &["PATH=/bin"],
            workdir: None,
            tag: "1",
        },
    );
    let bundle = ctx.dir.join("bundle");
    let (ok, _, err) = host_cmd(
        &umoci,
        &[
            "unpack",
            "--rootless",
            "--image",
            &format!("{}:1", layout.display()),
            bundle.to_str().unwrap(),
        ],
    );
    assert!(ok, "umoci unpack: {err}");
    let theirs = tree_contents(&bundle.join("rootfs"));

    import(&ctx, &home, &layout, "wh:1", &[]);
    let (report, root) =
        unpack(&ctx, &home, "wh:1").unwrap_or_else(|e| panic!("cbrun unpack\n{}", e.show()));
    let ours = tree_contents(&root);
    assert_eq!(report["whiteouts"], 10, "{report}");

    // Not two empty trees: the paths the fixture leaves.
    let paths: Vec<&str> = ours.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "data",
            "data/hl",
            "data/hl2",
            "etc",
            "etc/passwd",
            "link",
            "link/inside",
            "opq",
            "opq/after",
            "opq/newdir",
            "opq/newdir/y",
            "p",
            "readd",
            "var",
            "var/cache",
            "var/cache/new",
        ]
    );
    let mut diffs = Vec::new();
    for p in ours.keys().chain(theirs.keys()).collect::<BTreeSet<_>>() {
        let (a, b) = (ours.get(p), theirs.get(p));
        if a != b {
            diffs.push(format!("{p}: cbrun {a:?}, umoci {b:?}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "cbrun and umoci differ:\n{}",
        diffs.join("\n")
    );
    // umoci keeps the links as one file too.
    let (a, b) = (
        bundle.join("rootfs/data/hl").metadata().unwrap(),
        root.join("data/hl2").metadata().unwrap(),
    );
    assert_eq!((a.nlink(), b.nlink()), (2, 2));
    ctx.assert_clean("whiteouts against umoci");
}

// ---------------------------------------------------------------------------
// 6. concurrency and crashes

#[test]
fn parallel_imports_and_a_killed_import_leave_a_consistent_store() {
    const T: &str = "parallel_imports_and_a_killed_import_leave_a_consistent_store";
    let bb = need!(busybox(), T, "a static busybox");
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-par");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        let tarballs: Vec<PathBuf> = (0..4)
            .map(|i| {
                let p = ctx.dir.join(format!("rootfs-{i}.tar.gz"));
                tar_gz_of(
                    &root,
                    &p,
                    &[("etc/which", format!("tarball {i}\n").as_bytes())],
                );
                p
            })
            .collect();
        let running: Vec<Running> = tarballs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let args: Vec<String> = [
                    "image",
                    "import",
                    p.to_str().unwrap(),
                    "--tag",
                    &format!("par:{i}"),
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                ctx.spawn_args(&args, &home_env(&home), None)
            })
            .collect();
        let runs: Vec<Run> = running.into_iter().map(|r| r.wait(DEADLINE)).collect();
        for r in &runs {
            r.assert_code(0, "a parallel import");
        }
        let l = list(&ctx, &home);
        assert_eq!(l.len(), 4, "{l:?}");
        let manifests: BTreeSet<String> = l.values().map(manifest_of).collect();
        assert_eq!(manifests.len(), 4, "four different images: {l:?}");
        for (i, r) in runs.iter().enumerate() {
            let m = r.stdout.trim().split_once(' ').unwrap().1;
            assert_eq!(
                manifest_of(&l[&format!("par:{i}")]),
                m,
                "ls agrees with import {i}"
            );
            assert!(l[&format!("par:{i}")]["error"].is_null());
        }
        assert_eq!(blobs(&home).len(), 12, "{:?}", blobs(&home));
        assert!(
            tmp_entries(&home).is_empty(),
            "finished imports left temp files: {:?}",
            tmp_entries(&home)
        );
        let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
        assert_eq!(gc["removed_blobs"], 0, "{gc}");
        assert_eq!(gc["kept_blobs"], 12, "{gc}");
        assert!(tmp_entries(&home).is_empty());
        // Each one unpacks to its own content.
        for i in 0..4 {
            let (_, r) = unpack(&ctx, &home, &format!("par:{i}"))
                .map_err(|e| e.show())
                .unwrap();
            assert_eq!(
                fs::read_to_string(r.join("etc/which")).unwrap(),
                format!("tarball {i}\n")
            );
        }
        ctx.assert_clean("parallel imports");
    }

    // A 200 MB import killed with SIGKILL half way.
    let ctx = Ctx::new(Who::Root, "img-kill");
    let home = store_home(&ctx, "store");
    let big = ctx.dir.join("big.tar");
    {
        let mut b = tar::Builder::new(std::io::BufWriter::new(File::create(&big).unwrap()));
        let size: u64 = 200 << 20;
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        let rand = File::open("/dev/urandom").unwrap().take(size);
        b.append_data(&mut h, "random.bin", rand).unwrap();
        b.into_inner().unwrap().flush().unwrap();
    }
    let mut killed_mid_way = false;
    for attempt in 0..3 {
        let tag = format!("big:{attempt}");
        let args: Vec<String> = ["image", "import", big.to_str().unwrap(), "--tag", &tag]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut running = ctx.spawn_args(&args, &home_env(&home), None);
        // Kill it once its temp blob holds some of the data.
        let tmp = home.join("tmp");
        let caught = wait_until(Duration::from_secs(30), || {
            let partial = fs::read_dir(&tmp)
                .map(|rd| {
                    rd.flatten()
                        .any(|e| e.metadata().map(|m| m.len() > (8 << 20)).unwrap_or(false))
                })
                .unwrap_or(false);
            partial || !running.is_running()
        });
        assert!(caught);
        running.signal("KILL");
        let r = running.wait(DEADLINE);
        if r.killed_by == Some(9) {
            killed_mid_way = true;
            eprintln!(
                "note: import killed after {:.2}s with {:?} in tmp/",
                r.elapsed.as_secs_f64(),
                tmp_entries(&home)
            );
            let l = list(&ctx, &home);
            assert!(
                !l.contains_key(&tag),
                "a killed import left a reference: {l:?}"
            );
            assert!(l.is_empty(), "{l:?}");
            assert!(
                !tmp_entries(&home).is_empty(),
                "expected the killed import's temp file"
            );
            break;
        }
        // It finished first: start over with an empty store.
        r.assert_code(0, "an import that beat the kill");
        image_ok(&ctx, &home, &["rm", &tag]);
        image_ok(&ctx, &home, &["gc"]);
    }
    assert!(
        killed_mid_way,
        "the 200 MB import finished every time before SIGKILL"
    );
    // A later gc removes the leftovers: temp files and any blob no
    // reference reaches.
    let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
    assert!(gc["removed_tmp"].as_u64().unwrap() >= 1, "{gc}");
    assert!(tmp_entries(&home).is_empty(), "{:?}", tmp_entries(&home));
    assert!(blobs(&home).is_empty(), "{:?}", blobs(&home));
    // The store still works.
    let root = busybox_rootfs(&ctx, "rootfs", &bb);
    import(&ctx, &home, &root, "after:1", &[]);
    assert_eq!(list(&ctx, &home).len(), 1);
    ctx.assert_clean("a killed import");
}

// ---------------------------------------------------------------------------
// 7. bad input

#[test]
fn bad_input_is_one_line_exit_125() {
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-bad");
        let home = store_home(&ctx, "store");
        let rootdir = ctx.dir.join("tiny");
        fs::create_dir_all(rootdir.join("etc")).unwrap();
        fs::write(rootdir.join("etc/hello"), "hi\n").unwrap();
        world_readable(&rootdir);
        let rd = rootdir.to_str().unwrap();
        let notatar = ctx.dir.join("not-a-tar.txt");
        fs::write(&notatar, "just some text, not a tar archive\n").unwrap();
        chmod(&notatar, 0o644);
        let nt = notatar.to_str().unwrap();
        let out = ctx.out_file("x.tar");
        let o = out.to_str().unwrap();
        let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
            (
                vec!["import", "/nonexistent", "--tag", "x:1"],
                vec!["/nonexistent"],
            ),
            (vec!["import", rd, "--tag", "BAD NAME"], vec!["BAD NAME"]),
            (
                vec!["import", rd, "--tag", "x:1", "--format", "oci-archive"],
                vec![rd],
            ),
            (vec!["import", nt, "--tag", "x:1"], vec![nt]),
            (
                vec!["import", rd, "--tag", "x:1", "--platform", "linux"],
                vec!["linux"],
            ),
            (
                vec![
                    "export",
                    "nosuch:1",
                    "--format",
                    "oci-archive",
                    "--output",
                    o,
                ],
                vec!["nosuch:1"],
            ),
            (vec!["inspect", "nosuch:1"], vec!["nosuch:1"]),
            (vec!["rm", "nosuch:1"], vec!["nosuch:1"]),
            (vec!["tag", "nosuch:1", "y:1"], vec!["nosuch:1"]),
            (vec!["unpack", "nosuch:1"], vec!["nosuch:1"]),
            (vec!["pull", "Not A Reference"], vec!["Not A Reference"]),
        ];
        for (args, naming) in &cases {
            let r = image(&ctx, &home, args);
            assert_one_line_error(&r, &format!("cbrun image {}", args.join(" ")), naming);
        }
        // Values clap refuses: its message, behind the same prefix.
        let refused: Vec<(Vec<&str>, Vec<&str>)> = vec![
            (
                vec!["import", rd, "--tag", "x:1", "--format", "nosuchformat"],
                vec!["nosuchformat"],
            ),
            (
                vec!["export", "nosuch:1", "--format", "zip", "--output", o],
                vec!["zip"],
            ),
        ];
        for (args, naming) in &refused {
            let r = image(&ctx, &home, args);
            assert_clap_error(&r, &format!("cbrun image {}", args.join(" ")), naming);
        }
        assert!(!out.exists(), "a failed export wrote its output");
        let r = run_image(&ctx, &home, "nosuch:1", &[], &["true"]);
        assert_one_line_error(&r, "sandbox run --image nosuch:1", &["nosuch:1"]);
        let r = run_image(&ctx, &home, "Bad Name", &[], &["true"]);
        assert_one_line_error(&r, "sandbox run --image 'Bad Name'", &["Bad Name"]);
        let r = ctx.run_env(
            &["--image", "x:1", "--rootfs", rd],
            &["true"],
            &home_env(&home),
        );
        assert_clap_error(&r, "--image with --rootfs", &["--rootfs"]);
        // Nothing of that made it into the store.
        assert!(list(&ctx, &home).is_empty());
        assert!(blobs(&home).is_empty(), "{:?}", blobs(&home));

        // A good import still works; the bad tag of an existing image fails.
        import(&ctx, &home, &rootdir, "tiny:1", &[]);
        let r = image(&ctx, &home, &["tag", "tiny:1", "Bad:Tag:x"]);
        assert_one_line_error(&r, "tag to a bad name", &["Bad:Tag:x"]);

        // A store that belongs to somebody else is refused (rootless only:
        // root owns the ctx dir).
        if who != Who::Root {
            let foreign = ctx.dir.join("foreign");
            fs::create_dir(&foreign).unwrap();
            chmod(&foreign, 0o777);
            let r = image(&ctx, &foreign, &["ls"]);
            assert_one_line_error(
                &r,
                "a store owned by root",
                &[foreign.to_str().unwrap(), "owned by uid 0"],
            );
        }
        ctx.assert_clean("bad input");
    }
}
