//! Hostile layers built in memory. Everything runs as root and as an
//! unprivileged user (`setpriv --reuid=65534 ...`); tests needing root say
//! so and return early otherwise.

use super::*;
use crate::image::digest::DigestReader;
use std::fs;
use std::io::{BufReader, Cursor, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;
use tar::{EntryType, Header};

/// A scratch directory holding `root/` (the rootfs) and room beside it
/// for sentinels; removed on drop, read-only directories included.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "cbrun-unpack-test-{}-{}-{}",
            std::process::id(),
            tag,
            N.fetch_add(1, Ordering::SeqCst)
        ));
        rm_rf(&p);
        fs::create_dir_all(p.join("root")).unwrap();
        Scratch(p)
    }
    fn root(&self) -> PathBuf {
        self.0.join("root")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        rm_rf(&self.0);
    }
}

fn rm_rf(p: &Path) {
    fn open_up(p: &Path) {
        if let Ok(m) = fs::symlink_metadata(p) {
            if m.is_dir() {
                let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o700));
                if let Ok(rd) = fs::read_dir(p) {
                    for e in rd.flatten() {
                        open_up(&e.path());
                    }
                }
            }
        }
    }
    if fs::remove_dir_all(p).is_err() {
        open_up(p);
        let _ = fs::remove_dir_all(p);
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

const MTIME: u64 = 1_600_000_000;

/// A layer tar written header by header, with no validation of names.
struct L {
    b: tar::Builder<Vec<u8>>,
    ids: (u64, u64),
    pax: Vec<(String, Vec<u8>)>,
}

impl L {
    fn new() -> L {
        L {
            b: tar::Builder::new(Vec::new()),
            ids: (0, 0),
            pax: Vec::new(),
        }
    }
    fn ids(mut self, uid: u64, gid: u64) -> L {
        self.ids = (uid, gid);
        self
    }
    /// PAX records for the next entry.
    fn pax(mut self, key: &str, value: &[u8]) -> L {
        self.pax.push((key.to_owned(), value.to_vec()));
        self
    }
    fn raw(mut self, kind: EntryType, name: &[u8], link: &[u8], data: &[u8], mode: u32) -> L {
        if name.len() > 100 {
            self.pax.push(("path".into(), name.to_vec()));
        }
        if link.len() > 100 {
            self.pax.push(("linkpath".into(), link.to_vec()));
        }
        if !self.pax.is_empty() {
            let recs: Vec<(&str, &[u8])> = self
                .pax
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_slice()))
                .collect();
            self.b.append_pax_extensions(recs).unwrap();
            self.pax.clear();
        }
        let mut h = Header::new_ustar();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_uid(self.ids.0);
        h.set_gid(self.ids.1);
        h.set_mtime(MTIME);
        let n = name.len().min(100);
        h.as_old_mut().name[..n].copy_from_slice(&name[..n]);
        let n = link.len().min(100);
        h.as_old_mut().linkname[..n].copy_from_slice(&link[..n]);
        h.set_cksum();
        self.b.append(&h, data).unwrap();
        self
    }
    fn dir(self, name: &str, mode: u32) -> L {
        self.raw(EntryType::Directory, name.as_bytes(), b"", b"", mode)
    }
    fn file(self, name: &str, data: &str) -> L {
        self.raw(
            EntryType::Regular,
            name.as_bytes(),
            b"",
            data.as_bytes(),
            0o644,
        )
    }
    fn file_mode(self, name: &str, data: &str, mode: u32) -> L {
        self.raw(
            EntryType::Regular,
            name.as_bytes(),
            b"",
            data.as_bytes(),
            mode,
        )
    }
    fn symlink(self, name: &str, target: &str) -> L {
        self.raw(
            EntryType::Symlink,
            name.as_bytes(),
            target.as_bytes(),
            b"",
            0o777,
        )
    }
    fn hardlink(self, name: &str, target: &str) -> L {
        self.raw(
            EntryType::Link,
            name.as_bytes(),
            target.as_bytes(),
            b"",
            0o644,
        )
    }
    fn done(self) -> Vec<u8> {
        self.b.into_inner().unwrap()
    }
}

fn opts() -> UnpackOptions {
    UnpackOptions::default()
}

fn apply(root: &Path, layers: &[&[u8]]) -> Result<UnpackReport, UnpackError> {
    apply_layers(root, layers.iter().map(|l| Cursor::new(*l)), &opts())
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn exists(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// Every name below `p`, sorted, relative.
fn listing(p: &Path) -> Vec<String> {
    fn walk(base: &Path, p: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(p).unwrap().flatten() {
            let path = e.path();
            out.push(path.strip_prefix(base).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                walk(base, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(p, p, &mut out);
    out.sort();
    out
}

fn inner(e: &UnpackError) -> &UnpackError {
    e.innermost()
}

#[test]
fn basic_tree() {
    let s = Scratch::new("basic");
    let l = L::new()
        .dir("./", 0o755)
        .dir("a/", 0o750)
        .file("a/f", "hello")
        .symlink("a/l", "f")
        .hardlink("a/h", "a/f")
        .file("x/y/z", "implicit parents")
        .file_mode("a/exec", "#!/bin/sh\n", 0o755)
        .done();
    let r = apply(&s.root(), &[&l]).unwrap();
    let root = s.root();
    assert_eq!(read(&root.join("a/f")), "hello");
    assert_eq!(fs::read_link(root.join("a/l")).unwrap(), Path::new("f"));
    assert_eq!(read(&root.join("a/l")), "hello");
    let (f, h) = (
        fs::metadata(root.join("a/f")).unwrap(),
        fs::metadata(root.join("a/h")).unwrap(),
    );
    assert_eq!((f.ino(), f.nlink()), (h.ino(), 2));
    assert_eq!(read(&root.join("x/y/z")), "implicit parents");
    assert_eq!(mode(&root.join("x")), 0o755);
    assert_eq!(mode(&root.join("a")), 0o750);
    assert_eq!(mode(&root.join("a/f")), 0o644);
    assert_eq!(mode(&root.join("a/exec")), 0o755);
    assert_eq!(mode(&root), 0o755);
    // mtimes kept, directories' too (their entries came after them).
    for p in ["a", "a/f", "a/exec", "."] {
        assert_eq!(
            fs::symlink_metadata(root.join(p)).unwrap().mtime(),
            MTIME as i64,
            "{p}"
        );
    }
    assert_eq!(
        fs::symlink_metadata(root.join("a/l")).unwrap().mtime(),
        MTIME as i64
    );
    assert_eq!(
        (r.files, r.dirs, r.symlinks, r.hardlinks, r.bytes),
        (3, 2, 1, 1, 5 + 16 + 10)
    );
    assert!(r.skipped.is_empty());
    // Owned by the caller in Caller mode.
    let me = nix::unistd::geteuid().as_raw();
    assert_eq!(fs::metadata(root.join("a/f")).unwrap().uid(), me);
}

#[test]
fn whiteout_of_a_file_and_of_a_dir() {
    let s = Scratch::new("wh");
    let l1 = L::new()
        .file("a/f", "1")
        .file("a/g", "1")
        .file("d/sub/deep", "1")
        .file("keep", "1")
        .done();
    let l2 = L::new()
        .file("a/.wh.f", "")
        .file(".wh.d", "")
        .file("a/.wh.missing", "")
        .done();
    let r = apply(&s.root(), &[&l1, &l2]).unwrap();
    assert_eq!(listing(&s.root()), ["a", "a/g", "keep"]);
    assert_eq!(r.whiteouts, 3);
    // A whiteout under a parent that does not exist is a no-op.
    let l3 = L::new().file("nope/deeper/.wh.x", "").done();
    apply(&s.root(), &[&l3]).unwrap();
    assert!(!exists(&s.root().join("nope")));
}

#[test]
fn opaque_dir_keeps_same_layer_entries_before_and_after_marker() {
    let s = Scratch::new("opq");
    let l1 = L::new()
        .file("d/old", "lower")
        .file("d/sub/old2", "lower")
        .file("d/gone/x", "lower")
        .file("d/made/x", "lower")
        .file("other/keep", "lower")
        .done();
    let l2 = L::new()
        .file("d/before", "upper")
        // Into a lower directory without an entry for it: the directory
        // stays, its lower content goes.
        .file("d/sub/new", "upper")
        // An entry for a lower directory: same.
        .dir("d/made/", 0o755)
        .file("d/.wh..wh..opq", "")
        .file("d/after", "upper")
        .done();
    let r = apply(&s.root(), &[&l1, &l2]).unwrap();
    assert_eq!(
        listing(&s.root()),
        [
            "d",
            "d/after",
            "d/before",
            "d/made",
            "d/sub",
            "d/sub/new",
            "other",
            "other/keep"
        ]
    );
    assert_eq!(r.opaque_dirs, 1);
    // The marker itself is never created.
    assert!(!exists(&s.root().join("d/.wh..wh..opq")));

    // A marker for a directory no layer had yet makes it.
    let l3 = L::new().file("fresh/.wh..wh..opq", "").done();
    apply(&s.root(), &[&l3]).unwrap();
    assert!(s.root().join("fresh").is_dir());

    // An opaque root.
    let l4 = L::new().file("only", "x").file(".wh..wh..opq", "").done();
    apply(&s.root(), &[&l4]).unwrap();
    assert_eq!(listing(&s.root()), ["only"]);
}

#[test]
fn same_layer_whiteout_hides_only_lower_content() {
    let s = Scratch::new("samewh");
    let l1 = L::new().file("d/old", "lower").file("f", "lower").done();
    let l2 = L::new()
        .dir("d/", 0o755)
        .file("d/new", "upper")
        .file(".wh.d", "")
        .file("f", "upper")
        .file(".wh.f", "")
        .file(".wh.g", "")
        .file("g", "upper, after its whiteout")
        .done();
    apply(&s.root(), &[&l1, &l2]).unwrap();
    assert_eq!(listing(&s.root()), ["d", "d/new", "f", "g"]);
    assert_eq!(read(&s.root().join("f")), "upper");
}

#[test]
fn planted_symlink_cannot_lead_outside() {
    let s = Scratch::new("escape");
    let outside = s.0.join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("victim"), "orig").unwrap();
    let abs = outside.to_str().unwrap().to_owned();
    let root = s.root();

    // Layer 1 plants links to the real outside directory, absolute and
    // by climbing.
    let l1 = L::new()
        .symlink("esc", &abs)
        .symlink("up", "../../../../../../../../..")
        .symlink("climb_out", &format!("../../../../../../../..{abs}"))
        .symlink("etc", "/etc")
        .done();
    apply(&root, &[&l1]).unwrap();
    // Writing through them: the targets do not exist inside the rootfs
    // (and directories named only by a link's target are not made), so
    // these fail, and nothing outside changes.
    // Inside the rootfs, `etc -> /etc` is a link to itself.
    for (name, why) in [
        ("esc/victim", "No such file or directory"),
        ("climb_out/victim", "No such file or directory"),
        (
            "etc/cbrun-unpack-test-sentinel",
            "Too many levels of symbolic links",
        ),
    ] {
        let l2 = L::new().file(name, "pwned").done();
        let e = apply(&root, &[&l2]).unwrap_err();
        assert!(e.to_string().contains(why), "{name}: {e}");
    }
    // Planted and written through in the same layer: the same.
    let l2 = L::new()
        .symlink("same", &abs)
        .file("same/victim", "pwned")
        .done();
    let e = apply(&root, &[&l2]).unwrap_err();
    assert!(e.to_string().contains("same/victim"), "{e}");
    // `up` stops at the rootfs; the rest of the name is the entry's own,
    // so its directories are made, inside.
    let l2 = L::new().file(&format!("up/up{abs}/victim"), "up").done();
    apply(&root, &[&l2]).unwrap();
    let inside = root.join(abs.trim_start_matches('/'));
    assert_eq!(read(&inside.join("victim")), "up");
    assert_eq!(read(&outside.join("victim")), "orig");
    assert!(!exists(Path::new("/etc/cbrun-unpack-test-sentinel")));

    // Now that the rootfs has directories at those paths, the same writes
    // land inside it.
    let l3 = L::new().dir("etc/", 0o755).done();
    // `etc/` replaces the `etc` symlink itself (never followed).
    apply(&root, &[&l3]).unwrap();
    assert!(fs::symlink_metadata(root.join("etc")).unwrap().is_dir());
    let l4 = L::new()
        .file("esc/victim", "esc")
        .file("climb_out/other", "climb")
        .file("up/etc/passwd", "in-root passwd")
        .done();
    apply(&root, &[&l4]).unwrap();
    assert_eq!(read(&inside.join("victim")), "esc");
    assert_eq!(read(&inside.join("other")), "climb");
    assert_eq!(read(&root.join("etc/passwd")), "in-root passwd");
    assert_eq!(read(&outside.join("victim")), "orig");
    assert!(!exists(&outside.join("other")));
    assert!(!exists(Path::new("/etc/cbrun-unpack-test-sentinel")));
}

#[test]
fn dotdot_and_absolute_names() {
    let s = Scratch::new("dotdot");
    let root = s.root();
    for bad in ["../evil", "a/../../evil", "./../evil", "/../evil"] {
        let l = L::new().file(bad, "x").done();
        let e = apply(&root, &[&l]).unwrap_err();
        assert!(
            matches!(inner(&e), UnpackError::Unsafe { .. }),
            "{bad}: {e}"
        );
        assert!(e.to_string().contains("evil"), "{e}");
    }
    assert!(!exists(&s.0.join("evil")));
    let l = L::new()
        .file("a/../b", "b")
        .file("/abs/file", "abs")
        .file("./c", "c")
        .file("//d///e/./f", "f")
        .done();
    apply(&root, &[&l]).unwrap();
    assert_eq!(
        listing(&root),
        ["abs", "abs/file", "b", "c", "d", "d/e", "d/e/f"]
    );
    // A NUL can only come through PAX.
    let l = L::new().pax("path", b"x\0y").file("ignored", "x").done();
    let e = apply(&root, &[&l]).unwrap_err();
    assert!(e.to_string().contains("NUL"), "{e}");
    // Non-directories cannot name the root.
    let l = L::new().file("./", "x").done();
    let e = apply(&root, &[&l]).unwrap_err();
    assert!(e.to_string().contains("root"), "{e}");
}

#[test]
fn symlinked_parents_resolve_inside_the_root() {
    let s = Scratch::new("inroot");
    let root = s.root();
    let l1 = L::new()
        .dir("real/", 0o755)
        .dir("real/deeper/", 0o755)
        .symlink("abs", "/real")
        .symlink("rel", "real")
        .symlink("climb", "../../../../real")
        .symlink("chain", "abs")
        .symlink("real/deeper/back", "../../abs/deeper")
        .symlink("loop1", "loop2")
        .symlink("loop2", "loop1")
        .symlink("file_link", "real/f0")
        .file("real/f0", "f0")
        .done();
    let l2 = L::new()
        .file("abs/f1", "1")
        .file("rel/f2", "2")
        .file("climb/f3", "3")
        .file("chain/f4", "4")
        .file("real/deeper/back/f5", "5")
        .file("abs/newdir/f6", "6")
        .done();
    apply(&root, &[&l1, &l2]).unwrap();
    for (p, c) in [
        ("real/f1", "1"),
        ("real/f2", "2"),
        ("real/f3", "3"),
        ("real/f4", "4"),
        ("real/deeper/f5", "5"),
        ("real/newdir/f6", "6"),
    ] {
        assert_eq!(read(&root.join(p)), c, "{p}");
    }
    let l3 = L::new().file("loop1/x", "x").done();
    let e = apply(&root, &[&l3]).unwrap_err();
    assert!(e.to_string().contains("symbolic links"), "{e}");
    let l4 = L::new().file("file_link/x", "x").done();
    let e = apply(&root, &[&l4]).unwrap_err();
    assert!(e.to_string().contains("Not a directory"), "{e}");
    // The links themselves are untouched.
    assert_eq!(fs::read_link(root.join("abs")).unwrap(), Path::new("/real"));
}

/// Our resolution against the kernel's `openat2(RESOLVE_IN_ROOT)`.
#[test]
fn resolution_matches_openat2_in_root() {
    let s = Scratch::new("openat2");
    let root = s.root();
    let l = L::new()
        .dir("a/", 0o755)
        .dir("a/b/", 0o755)
        .dir("c/", 0o755)
        .symlink("a/up", "..")
        .symlink("a/b/abs", "/c")
        .symlink("a/b/far", "../../../../../../a/b")
        .symlink("c/toa", "../a/b/far/../..")
        .symlink("selfloop", "selfloop")
        .symlink("dotty", "./a/./b/../b/")
        .symlink("a/b/rootlink", "/")
        .file("c/file", "x")
        .done();
    apply(&root, &[&l]).unwrap();
    let names = [
        "a",
        "a/up",
        "a/up/a/up/c",
        "a/b/abs",
        "a/b/far",
        "a/b/far/abs",
        "c/toa",
        "c/toa/c",
        "dotty",
        "dotty/rootlink/a",
        "a/b/rootlink",
        "selfloop",
        "c/file",
        "missing",
        "a/b/abs/missing",
    ];
    let rootfd = std::fs::File::open(&root).unwrap();
    let o = UnpackOptions::default();
    let mut u = Unpacker::open(&root, &o).unwrap();
    let mut compared = 0;
    for n in names {
        let comps: Vec<&[u8]> = n.split('/').map(str::as_bytes).collect();
        let ours = u.resolve(&comps, false).map(|h| h.id);
        let cn = CString::new(n).unwrap();
        let how = at::open_how(
            (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
            0,
            libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS,
        );
        match at::openat2(rootfd.as_fd(), &cn, &how) {
            Err(e) if at::errno_is(&e, &[libc::ENOSYS, libc::EPERM]) => {
                eprintln!("skipped: no openat2 here");
                return;
            }
            Err(e) => {
                let ours = ours.expect_err(n);
                assert_eq!(ours.raw_os_error(), e.raw_os_error(), "{n}: {ours} vs {e}");
            }
            Ok(fd) => {
                let st = at::fstat(fd.as_fd()).unwrap();
                assert_eq!(ours.unwrap(), at::id_of(&st), "{n}");
                compared += 1;
            }
        }
    }
    assert!(compared >= 8, "{compared}");
}

#[test]
fn hard_links_resolve_inside_the_root() {
    let s = Scratch::new("hard");
    let root = s.root();
    let outside = s.0.join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("victim"), "orig").unwrap();
    let abs = outside.to_str().unwrap().to_owned();
    let host_passwd = fs::metadata("/etc/passwd").ok();
    let l1 = L::new()
        .file("etc/passwd", "in-root")
        .symlink("lnk", "/etc")
        .symlink("out", &abs)
        .symlink("sym", "/etc/passwd")
        .dir("adir/", 0o755)
        .done();
    let l2 = L::new()
        .hardlink("x", "/etc/passwd")
        .hardlink("y", "lnk/passwd")
        .hardlink("z", "./etc/../etc/passwd")
        .done();
    let r = apply(&root, &[&l1, &l2]).unwrap();
    assert_eq!(r.hardlinks, 3);
    let ino = fs::metadata(root.join("etc/passwd")).unwrap().ino();
    for n in ["x", "y", "z"] {
        assert_eq!(fs::metadata(root.join(n)).unwrap().ino(), ino, "{n}");
        assert_eq!(read(&root.join(n)), "in-root");
    }
    for (target, why) in [
        ("/etc/shadow", "not in the rootfs"),
        ("out/victim", "not in the rootfs"),
        ("../../etc/passwd", "leads out of the root"),
        ("sym", "not a regular file"),
        ("adir", "not a regular file"),
        ("/", "root"),
    ] {
        let l = L::new().hardlink("bad", target).done();
        let e = apply(&root, &[&l]).unwrap_err();
        assert!(
            matches!(inner(&e), UnpackError::Unsafe { .. }),
            "{target}: {e}"
        );
        assert!(e.to_string().contains(why), "{target}: {e}");
    }
    assert!(!exists(&root.join("bad")));
    assert_eq!(fs::metadata(outside.join("victim")).unwrap().nlink(), 1);
    if let Some(m) = host_passwd {
        assert_eq!(fs::metadata("/etc/passwd").unwrap().nlink(), m.nlink());
    }
    // A link to itself is a no-op.
    let l = L::new().hardlink("x", "x").done();
    apply(&root, &[&l]).unwrap();
    assert_eq!(read(&root.join("x")), "in-root");
}

#[test]
fn devices_and_fifos_are_dropped() {
    let s = Scratch::new("dev");
    let root = s.root();
    let l1 = L::new().file("dev/null", "a lower file").done();
    let l2 = L::new()
        .raw(EntryType::Char, b"dev/null", b"", b"", 0o666)
        .raw(EntryType::Block, b"dev/sda", b"", b"", 0o660)
        .raw(EntryType::Fifo, b"run/fifo", b"", b"", 0o600)
        .done();
    let r = apply(&root, &[&l1, &l2]).unwrap();
    assert_eq!(r.devices_dropped, 3);
    assert_eq!(listing(&root), ["dev", "run"]);
}

#[test]
fn setid_bits_are_stripped_sticky_kept() {
    let s = Scratch::new("setid");
    let root = s.root();
    let l = L::new()
        .file_mode("suid", "x", 0o4755)
        .file_mode("sgid", "x", 0o2711)
        .dir("sgdir/", 0o2775)
        .dir("tmp/", 0o1777)
        .symlink("link", "suid")
        .done();
    let r = apply(&root, &[&l]).unwrap();
    assert_eq!(r.setid_stripped, 3);
    assert_eq!(mode(&root.join("suid")), 0o755);
    assert_eq!(mode(&root.join("sgid")), 0o711);
    assert_eq!(mode(&root.join("sgdir")), 0o775);
    assert_eq!(mode(&root.join("tmp")), 0o1777);
}

#[test]
fn replacing_entries() {
    let s = Scratch::new("replace");
    let root = s.root();
    let outside = s.0.join("outside");
    fs::create_dir(&outside).unwrap();
    let l1 = L::new()
        .file("p/deep/f", "1")
        .file("q", "file")
        .symlink("r", outside.to_str().unwrap())
        .file("h1", "one")
        .hardlink("h2", "h1")
        .file("s/x", "1")
        .dir("m/", 0o700)
        .file("m/a", "a")
        .done();
    let l2 = L::new()
        .file("p", "file over a tree")
        .dir("q/", 0o755)
        .dir("r/", 0o755)
        .file("r/inside", "1")
        .file("h1", "new")
        .symlink("s", "q")
        .dir("m/", 0o755)
        .file("m/b", "b")
        .done();
    apply(&root, &[&l1, &l2]).unwrap();
    assert_eq!(read(&root.join("p")), "file over a tree");
    assert!(root.join("q").is_dir());
    assert!(fs::symlink_metadata(root.join("r")).unwrap().is_dir());
    assert!(!exists(&outside.join("inside")));
    assert_eq!(read(&root.join("h1")), "new");
    // The lower file's other link kept the old content.
    assert_eq!(read(&root.join("h2")), "one");
    assert_eq!(fs::read_link(root.join("s")).unwrap(), Path::new("q"));
    // Directory over directory: merged, the newer mode.
    assert_eq!(read(&root.join("m/a")), "a");
    assert_eq!(read(&root.join("m/b")), "b");
    assert_eq!(mode(&root.join("m")), 0o755);
}

#[test]
fn read_only_directories_are_filled_and_kept() {
    let s = Scratch::new("ro");
    let root = s.root();
    let l1 = L::new()
        .dir("ro/", 0o555)
        .file_mode("ro/f", "f", 0o444)
        .dir("ro/sub/", 0o500)
        .file("ro/sub/g", "g")
        .done();
    apply(&root, &[&l1]).unwrap();
    assert_eq!(mode(&root.join("ro")), 0o555);
    assert_eq!(mode(&root.join("ro/sub")), 0o500);
    assert_eq!(mode(&root.join("ro/f")), 0o444);
    assert_eq!(fs::metadata(root.join("ro")).unwrap().mtime(), MTIME as i64);
    // Later layers write into them, whiteout in them, and leave the
    // modes as they were.
    let l2 = L::new()
        .file("ro/new", "n")
        .file("ro/sub/h", "h")
        .file("ro/.wh.f", "")
        .done();
    apply(&root, &[&l2]).unwrap();
    assert_eq!(listing(&root.join("ro")), ["new", "sub", "sub/g", "sub/h"]);
    assert_eq!(mode(&root.join("ro")), 0o555);
    assert_eq!(mode(&root.join("ro/sub")), 0o500);
    let l3 = L::new().file("ro/sub/.wh..wh..opq", "").done();
    apply(&root, &[&l3]).unwrap();
    assert_eq!(listing(&root.join("ro")), ["new", "sub"]);
    assert_eq!(mode(&root.join("ro/sub")), 0o500);
    // And a whole read-only tree can be removed.
    let l4 = L::new().file(".wh.ro", "").done();
    apply(&root, &[&l4]).unwrap();
    assert_eq!(listing(&root), Vec::<String>::new());
    // A read-only rootfs root too.
    let l5 = L::new().dir("./", 0o555).done();
    apply(&root, &[&l5]).unwrap();
    assert_eq!(mode(&root), 0o555);
    let l6 = L::new().file("later", "x").done();
    apply(&root, &[&l6]).unwrap();
    assert_eq!(mode(&root), 0o555);
    assert_eq!(read(&root.join("later")), "x");
}

#[test]
fn gzip_and_zstd_layers() {
    let s = Scratch::new("compress");
    let root = s.root();
    let l1 = L::new().file("gz", "gzip").done();
    let l2 = L::new().file("zst", "zstd").done();
    let l3 = L::new().file("plain", "none").done();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&l1).unwrap();
    let gz = gz.finish().unwrap();
    let zst = zstd::encode_all(&l2[..], 3).unwrap();
    for (blob, want) in [
        (&gz, Compression::Gzip),
        (&zst, Compression::Zstd),
        (&l3, Compression::None),
    ] {
        let mut r = BufReader::new(&blob[..]);
        assert_eq!(detect(&mut r).unwrap(), want);
        // detect consumed nothing.
        assert_eq!(r.fill_buf().unwrap().len(), blob.len());
    }
    // Through a reader that hands out one byte at a time, with a
    // one-byte buffer: the magic still has to be found.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() || buf.is_empty() {
                return Ok(0);
            }
            buf[0] = self.0[0];
            self.0 = &self.0[1..];
            Ok(1)
        }
    }
    let layers: Vec<Box<dyn BufRead>> = vec![
        decompress(BufReader::new(&gz[..])).unwrap(),
        decompress(BufReader::with_capacity(1, Trickle(&zst))).unwrap(),
        decompress(BufReader::with_capacity(1, Trickle(&l3))).unwrap(),
    ];
    let r = apply_layers(&root, layers, &opts()).unwrap();
    assert_eq!(r.files, 3);
    assert_eq!(read(&root.join("gz")), "gzip");
    assert_eq!(read(&root.join("zst")), "zstd");
    assert_eq!(read(&root.join("plain")), "none");

    // The whole compressed stream is read, so a digest of it is complete.
    let mut dr = DigestReader::new(&gz[..]);
    apply_layer(&root, decompress(BufReader::new(&mut dr)).unwrap(), &opts()).unwrap();
    let (d, n) = dr.finish();
    assert_eq!(n, gz.len() as u64);
    assert_eq!(d, crate::image::digest::Digest::of_bytes(&gz));

    // A corrupt gzip trailer (CRC) is noticed after the last entry.
    let mut bad = gz.clone();
    let crc_at = bad.len() - 8;
    bad[crc_at] ^= 0xff;
    let e = apply_layer(
        &root,
        decompress(BufReader::new(&bad[..])).unwrap(),
        &opts(),
    )
    .unwrap_err();
    assert!(matches!(e, UnpackError::Tar { .. }), "{e}");

    let xz = [0xfd, b'7', b'z', b'X', b'Z', 0];
    let e = decompress(BufReader::new(&xz[..])).err().unwrap();
    assert!(e.to_string().contains("xz"), "{e}");
}

#[test]
fn truncated_and_corrupt_tars() {
    let s = Scratch::new("trunc");
    let root = s.root();
    let big = "x".repeat(10_000);
    let full = L::new().file("first", "1").file("big", &big).done();
    // Cut inside big's content.
    let cut = &full[..512 * 3 + 5000];
    let e = apply(&root, &[cut]).unwrap_err();
    assert!(matches!(inner(&e), UnpackError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("big"), "{e}");
    // Cut inside big's header.
    let cut = &full[..512 * 2 + 100];
    let e = apply(&root, &[cut]).unwrap_err();
    assert!(matches!(inner(&e), UnpackError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("after first"), "{e}");
    // Cut exactly after an entry: no end-of-archive marker.
    let cut = &full[..512 * 2];
    let e = apply(&root, &[cut]).unwrap_err();
    assert!(e.to_string().contains("end-of-archive"), "{e}");
    // A damaged header.
    let mut bad = full.clone();
    bad[512 * 2 + 10] ^= 0x55;
    let e = apply(&root, &[&bad]).unwrap_err();
    assert!(matches!(inner(&e), UnpackError::Tar { .. }), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
    // An empty stream is an empty layer.
    let r = apply(&root, &[b""]).unwrap();
    assert_eq!(r, UnpackReport::default());
}

#[test]
fn huge_extension_headers_are_refused() {
    let s = Scratch::new("paxbomb");
    let mut h = Header::new_ustar();
    h.set_entry_type(EntryType::XHeader);
    let body = vec![b'a'; 8 << 20];
    h.set_size(body.len() as u64);
    h.set_cksum();
    let mut b = tar::Builder::new(Vec::new());
    b.append(&h, &body[..]).unwrap();
    let l = b.into_inner().unwrap();
    let e = apply(&s.root(), &[&l]).unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
    // A GNU long name too.
    let mut h = Header::new_gnu();
    h.set_entry_type(EntryType::GNULongName);
    h.set_size(body.len() as u64);
    h.set_cksum();
    let mut b = tar::Builder::new(Vec::new());
    b.append(&h, &body[..]).unwrap();
    let l = b.into_inner().unwrap();
    let e = apply(&s.root(), &[&l]).unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
}

#[test]
fn long_names_and_pax_records() {
    let s = Scratch::new("long");
    let root = s.root();
    let long_dir = "d".repeat(120);
    let long = format!("{long_dir}/{}", "f".repeat(200));
    // GNU long names through the builder, PAX through our helper.
    let mut b = tar::Builder::new(Vec::new());
    let mut h = Header::new_gnu();
    h.set_size(3);
    h.set_mode(0o644);
    b.append_data(&mut h, format!("gnu/{long}"), &b"gnu"[..])
        .unwrap();
    let mut h = Header::new_gnu();
    h.set_entry_type(EntryType::Symlink);
    h.set_size(0);
    b.append_link(
        &mut h,
        "gnu/link",
        format!("{long_dir}/{}", "t".repeat(150)),
    )
    .unwrap();
    let gnu = b.into_inner().unwrap();
    let pax = L::new()
        .pax("mtime", b"1700000000.5")
        .file(&format!("pax/{long}"), "pax")
        .pax("mtime", b"-1.25")
        .file("old", "before 1970")
        .done();
    apply(&root, &[&gnu, &pax]).unwrap();
    assert_eq!(read(&root.join(format!("gnu/{long}"))), "gnu");
    assert_eq!(
        fs::read_link(root.join("gnu/link"))
            .unwrap()
            .to_str()
            .unwrap()
            .len(),
        120 + 1 + 150
    );
    let m = fs::metadata(root.join(format!("pax/{long}"))).unwrap();
    assert_eq!((m.mtime(), m.mtime_nsec()), (1_700_000_000, 500_000_000));
    let m = fs::metadata(root.join("old")).unwrap();
    assert_eq!((m.mtime(), m.mtime_nsec()), (-2, 750_000_000));
}

#[test]
fn ownership_caller_mode_counts_ids() {
    let s = Scratch::new("caller");
    let root = s.root();
    let l = L::new()
        .file("root_owned", "x")
        .ids(1000, 1000)
        .file("user_owned", "x")
        .dir("udir/", 0o755)
        .done();
    let r = apply(&root, &[&l]).unwrap();
    assert_eq!(r.ids_not_applied, 2);
    let me = nix::unistd::geteuid().as_raw();
    for n in ["root_owned", "user_owned", "udir"] {
        assert_eq!(fs::metadata(root.join(n)).unwrap().uid(), me, "{n}");
    }
}

#[test]
fn ownership_preserve_mode_shifts_ids() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("preserve");
    let root = s.root();
    let l = L::new()
        .ids(0, 0)
        .dir("./", 0o755)
        .ids(1000, 2000)
        .dir("home/u/", 0o700)
        .file_mode("home/u/f", "x", 0o4750)
        .symlink("home/u/l", "f")
        .file("implicit/parent/f", "x")
        .done();
    let o = UnpackOptions {
        owner: OwnerMode::Preserve {
            uid_shift: 100_000,
            gid_shift: 200_000,
        },
        ..opts()
    };
    let r = apply_layer(&root, Cursor::new(&l), &o).unwrap();
    assert_eq!(r.ids_not_applied, 0);
    let ids = |p: &str| {
        let m = fs::symlink_metadata(root.join(p)).unwrap();
        (m.uid(), m.gid())
    };
    assert_eq!(ids("."), (100_000, 200_000));
    assert_eq!(ids("home/u"), (101_000, 202_000));
    assert_eq!(ids("home/u/f"), (101_000, 202_000));
    assert_eq!(ids("home/u/l"), (101_000, 202_000));
    assert_eq!(ids("implicit"), (100_000, 200_000));
    assert_eq!(ids("implicit/parent/f"), (101_000, 202_000));
    // Chown did not bring setuid back; the mode is applied after it.
    assert_eq!(mode(&root.join("home/u/f")), 0o750);
    assert_eq!(mode(&root.join("home/u")), 0o700);
    // An id that would overflow (or become -1) is refused.
    let l = L::new()
        .ids(u32::MAX as u64 - 100_000, 0)
        .file("x", "x")
        .done();
    let e = apply_layer(&root, Cursor::new(&l), &o).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}

fn get_xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    let n = crate::sys::xattr::get(p, name, &mut buf, crate::sys::xattr::Follow::No).ok()?;
    buf.truncate(n);
    Some(buf)
}

#[test]
fn xattrs_by_namespace() {
    let s = Scratch::new("xattr");
    let root = s.root();
    // Does this filesystem take user xattrs at all?
    let probe = s.0.join("probe");
    fs::write(&probe, "").unwrap();
    if crate::sys::xattr::set(&probe, "user.t", b"1").is_err() {
        eprintln!("skipped: no user xattrs on {}", s.0.display());
        return;
    }
    let l = L::new()
        .pax("SCHILY.xattr.user.color", b"blue")
        .pax("SCHILY.xattr.security.capability", b"\x01\x00\x00\x02")
        .pax("SCHILY.xattr.trusted.t", b"t")
        .pax("SCHILY.xattr.system.posix_acl_access", b"\x02\x00\x00\x00")
        .file_mode("f", "x", 0o444)
        .pax("SCHILY.xattr.user.d", b"dir")
        .dir("d/", 0o555)
        .pax("SCHILY.xattr.user.l", b"link")
        .symlink("l", "f")
        .done();
    let r = apply(&root, &[&l]).unwrap();
    assert_eq!(get_xattr(&root.join("f"), "user.color").unwrap(), b"blue");
    assert_eq!(get_xattr(&root.join("d"), "user.d").unwrap(), b"dir");
    assert!(get_xattr(&root.join("f"), "security.capability").is_none());
    assert!(get_xattr(&root.join("l"), "user.l").is_none());
    // security.capability, the ACL and the symlink's always; trusted.*
    // unless root (and it took).
    let trusted_set = get_xattr(&root.join("f"), "trusted.t").is_some();
    if is_root() {
        assert!(trusted_set);
        assert_eq!(r.xattrs_dropped, 3);
    } else {
        assert!(!trusted_set);
        assert_eq!(r.xattrs_dropped, 4);
    }

    let s2 = Scratch::new("xattr-off");
    let o = UnpackOptions {
        keep_xattrs: false,
        ..opts()
    };
    let r = apply_layer(&s2.root(), Cursor::new(&l), &o).unwrap();
    assert_eq!(r.xattrs_dropped, 6);
    assert!(get_xattr(&s2.root().join("f"), "user.color").is_none());
}

#[test]
fn limits_hold_across_layers() {
    let s = Scratch::new("limits");
    let root = s.root();
    let a = "a".repeat(600);
    let l1 = L::new().file("one", &a).done();
    let l2 = L::new().file("two", &a).done();
    let o = UnpackOptions {
        max_bytes: 1000,
        ..opts()
    };
    let e = apply_layers(&root, [Cursor::new(&l1), Cursor::new(&l2)], &o).unwrap_err();
    assert!(matches!(e, UnpackError::Layer { index: 2, .. }), "{e}");
    assert!(
        matches!(inner(&e), UnpackError::TooLarge { limit: 1000, entry } if entry == "two"),
        "{e}"
    );
    assert!(
        e.to_string().starts_with("layer 2: layer entry two:"),
        "{e}"
    );

    // Data no file takes counts too.
    let l = L::new()
        .raw(EntryType::Char, b"dev/zero", b"", &[0u8; 1500], 0o666)
        .done();
    let e = apply_layer(&root, Cursor::new(&l), &o).unwrap_err();
    assert!(matches!(e, UnpackError::TooLarge { .. }), "{e}");

    let l = L::new().file("a", "").file("b", "").file("c", "").done();
    let o = UnpackOptions {
        max_entries: 2,
        ..opts()
    };
    let e = apply_layer(&root, Cursor::new(&l), &o).unwrap_err();
    assert!(
        matches!(&e, UnpackError::TooManyEntries { limit: 2, entry } if entry == "c"),
        "{e}"
    );
}

#[test]
fn reports_sum_and_other_types_are_skipped() {
    let s = Scratch::new("sum");
    let root = s.root();
    let l1 = L::new().file("a", "12").done();
    let l2 = L::new()
        .file("b", "345")
        .raw(EntryType::new(b'V'), b"volume", b"", b"", 0)
        .file(".wh..wh.plnk", "")
        .done();
    let r = apply(&root, &[&l1, &l2]).unwrap();
    assert_eq!((r.files, r.bytes), (2, 5));
    assert_eq!(r.skipped.len(), 2, "{:?}", r.skipped);
    assert!(r.skipped[0].1.contains("unsupported"));
    assert_eq!(listing(&root), ["a", "b"]);
    fn serializable<T: serde::Serialize>(_: &T) {}
    serializable(&r);
}

#[test]
fn many_small_files_are_fast() {
    let s = Scratch::new("many");
    let root = s.root();
    let mut b = tar::Builder::new(Vec::new());
    let n = 100_000;
    for i in 0..n {
        let mut h = Header::new_ustar();
        h.set_size(2);
        h.set_mode(0o644);
        h.set_mtime(MTIME);
        b.append_data(&mut h, format!("d{:03}/f{i}", i % 1000), &b"hi"[..])
            .unwrap();
    }
    let l = b.into_inner().unwrap();
    let t = Instant::now();
    let r = apply(&root, &[&l]).unwrap();
    let took = t.elapsed();
    eprintln!("100k tiny files applied in {took:.2?}");
    assert_eq!(r.files, n);
    assert_eq!(read(&root.join("d123/f5123")), "hi");
    // Whiteout the lot: opaque root in a second layer.
    let t = Instant::now();
    let l2 = L::new().file(".wh..wh..opq", "").done();
    apply(&root, &[&l2]).unwrap();
    eprintln!("and removed in {:.2?}", t.elapsed());
    assert!(listing(&root).is_empty());
}

#[test]
fn many_files_land_whole_with_their_modes_and_times() {
    // Files created with their final mode (the umask leaves it intact) and
    // ones that need a chmod (group-writable, read-only), small and large
    // (past the reader's chunk): all must end up with their content, mode
    // and time, hard links and a later layer's whiteouts included.
    let s = Scratch::new("manyfiles");
    let root = s.root();
    let content = |i: usize| -> Vec<u8> {
        let n = (i * 37) % 6000;
        (0..n).map(|k| ((k + i) % 251) as u8).collect()
    };
    let modes = [0o644, 0o600, 0o664, 0o755, 0o400];
    let mut b = tar::Builder::new(Vec::new());
    let n = 700;
    for i in 0..n {
        let mut h = Header::new_gnu();
        let data = content(i);
        h.set_size(data.len() as u64);
        h.set_mode(modes[i % modes.len()]);
        h.set_mtime(MTIME + i as u64);
        b.append_data(&mut h, format!("d{}/f{i}", i % 7), &data[..])
            .unwrap();
    }
    let big: Vec<Vec<u8>> = [1 << 20, (1 << 20) + 1, 3 << 20]
        .iter()
        .map(|&n| (0..n).map(|k| (k % 241) as u8).collect())
        .collect();
    for (j, data) in big.iter().enumerate() {
        let mut h = Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(MTIME);
        b.append_data(&mut h, format!("big{j}"), &data[..]).unwrap();
    }
    let mut h = Header::new_gnu();
    h.set_entry_type(EntryType::Link);
    h.set_size(0);
    h.set_mode(0o644);
    b.append_link(&mut h, "link-to-f10", "d3/f10").unwrap();
    let l1 = b.into_inner().unwrap();
    let l2 = L::new().file("d1/.wh.f1", "").file("d2/f2", "new").done();
    let r = apply(&root, &[&l1, &l2]).unwrap();
    assert_eq!(r.files, n as u64 + 3 + 1);
    for i in 0..n {
        let p = root.join(format!("d{}/f{i}", i % 7));
        if i == 1 {
            assert!(!exists(&p));
            continue;
        }
        if i == 2 {
            assert_eq!(read(&p), "new");
            continue;
        }
        assert_eq!(fs::read(&p).unwrap(), content(i), "f{i}");
        assert_eq!(mode(&p), modes[i % modes.len()], "f{i}");
        let mt = fs::metadata(&p).unwrap().mtime();
        assert_eq!(mt, (MTIME + i as u64) as i64, "f{i}");
    }
    for (j, data) in big.iter().enumerate() {
        assert_eq!(&fs::read(root.join(format!("big{j}"))).unwrap(), data);
    }
    let a = fs::metadata(root.join("link-to-f10")).unwrap();
    let t = fs::metadata(root.join("d3/f10")).unwrap();
    assert_eq!((a.ino(), a.nlink()), (t.ino(), 2));
    assert_eq!(fs::read(root.join("link-to-f10")).unwrap(), content(10));
}

#[test]
fn legacy_directory_entries() {
    let s = Scratch::new("legacy");
    let root = s.root();
    // Type NUL with a trailing slash: a directory in old tars.
    let mut h = Header::new_old();
    h.as_old_mut().name[..4].copy_from_slice(b"old/");
    h.as_old_mut().linkflag[0] = 0;
    h.set_mode(0o755);
    h.set_size(0);
    h.set_cksum();
    let mut b = tar::Builder::new(Vec::new());
    b.append(&h, &b""[..]).unwrap();
    let l = b.into_inner().unwrap();
    let r = apply(&root, &[&l]).unwrap();
    assert_eq!(r.dirs, 1);
    assert!(root.join("old").is_dir());
}

#[test]
fn rootfs_must_be_a_real_directory() {
    let s = Scratch::new("rootfs");
    std::os::unix::fs::symlink(s.root(), s.0.join("link")).unwrap();
    let l = L::new().file("a", "x").done();
    let e = apply(&s.0.join("link"), &[&l]).unwrap_err();
    assert!(matches!(e, UnpackError::Root { .. }), "{e}");
    let e = apply(&s.0.join("missing"), &[&l]).unwrap_err();
    assert!(matches!(e, UnpackError::Root { .. }), "{e}");
}

#[test]
fn sparse_and_large_files() {
    let s = Scratch::new("sparse");
    let src = s.0.join("src");
    fs::create_dir(&src).unwrap();
    // A file with a 4 MiB hole, as GNU sparse entries.
    let f = fs::File::create(src.join("holey")).unwrap();
    f.set_len(4 << 20).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"end", 4 << 20).unwrap();
    f.write_all_at(b"start", 0).unwrap();
    drop(f);
    // And a large plain file: far more content than the extension-header
    // budget, which must not apply to content.
    let big: Vec<u8> = (0..(9u32 << 20)).map(|i| (i % 251) as u8).collect();
    fs::write(src.join("big"), &big).unwrap();
    let mut b = tar::Builder::new(Vec::new());
    b.sparse(true);
    b.append_path_with_name(src.join("holey"), "holey").unwrap();
    b.append_path_with_name(src.join("big"), "big").unwrap();
    let l = b.into_inner().unwrap();
    let mut a = tar::Archive::new(&l[..]);
    let kinds: Vec<EntryType> = a
        .entries()
        .unwrap()
        .map(|e| e.unwrap().header().entry_type())
        .collect();
    assert_eq!(kinds, [EntryType::GNUSparse, EntryType::Regular]);
    let r = apply(&s.root(), &[&l]).unwrap();
    let got = fs::read(s.root().join("holey")).unwrap();
    assert_eq!(got.len(), (4 << 20) + 3);
    assert!(got.starts_with(b"start") && got.ends_with(b"end"));
    assert_eq!(fs::read(s.root().join("big")).unwrap(), big);
    assert_eq!(r.bytes, (4 << 20) + 3 + big.len() as u64);
}

#[test]
fn directories_finish_even_when_inodes_are_reused() {
    let s = Scratch::new("reuse");
    let root = s.root();
    let l1 = L::new().dir("ro/", 0o555).file("ro/f", "f").done();
    apply(&root, &[&l1]).unwrap();
    // `ro` is opened up, then removed; new directories may get its inode
    // number back.
    let mut l2 = L::new().file("ro/g", "g").file(".wh.ro", "");
    for i in 0..20 {
        l2 = l2.dir(&format!("new{i}/"), 0o751);
    }
    apply(&root, &[&l2.done()]).unwrap();
    for i in 0..20 {
        assert_eq!(mode(&root.join(format!("new{i}"))), 0o751, "new{i}");
    }
}

#[test]
fn a_name_twice_in_one_layer_is_refused() {
    // (first, second): the second entry's name normalises to the first's.
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (L::new().file("a", "1").file("a", "2").done(), "a"),
        (L::new().file("a", "1").file("./a", "2").done(), "./a"),
        (L::new().dir("d/", 0o755).dir("./d", 0o755).done(), "./d"),
        (L::new().dir("d", 0o755).file("d/", "x").done(), "d/"),
        (
            L::new().file("x/y", "1").file("x//./y", "2").done(),
            "x//./y",
        ),
        (L::new().file("b", "1").file("q/../b", "2").done(), "q/../b"),
        (L::new().file("c", "1").symlink("/c", "c").done(), "/c"),
        (L::new().file("h", "1").hardlink("h", "h").done(), "h"),
        (L::new().dir("./", 0o755).dir("/", 0o755).done(), "/"),
        // Whiteouts are names of their own: twice is twice.
        (
            L::new().file(".wh.w", "").file("./.wh.w", "").done(),
            "./.wh.w",
        ),
        (
            L::new()
                .file("o/.wh..wh..opq", "")
                .file("o/.wh..wh..opq", "")
                .done(),
            "o/.wh..wh..opq",
        ),
        (
            L::new()
                .raw(EntryType::Fifo, b"dev/p", b"", b"", 0o600)
                .file("dev/p", "x")
                .done(),
            "dev/p",
        ),
    ];
    for (l, second) in cases {
        let s = Scratch::new("dup");
        let e = apply(&s.root(), &[&l]).unwrap_err();
        assert!(
            matches!(inner(&e), UnpackError::Duplicate { entry } if entry == second),
            "{second}: {e}"
        );
        assert_eq!(
            e.to_string(),
            format!("layer 1: layer entry {second}: appears twice in this layer")
        );
    }

    // The hostile form: a directory, then the same name as a link to a
    // directory outside, then a file through it. Refused at the link,
    // before anything is done with it.
    let s = Scratch::new("dup-escape");
    let outside = s.0.join("outside");
    fs::create_dir(&outside).unwrap();
    let l = L::new()
        .dir("x/", 0o755)
        .symlink("x", outside.to_str().unwrap())
        .file("x/f", "pwned")
        .done();
    let e = apply(&s.root(), &[&l]).unwrap_err();
    assert!(
        matches!(inner(&e), UnpackError::Duplicate { entry } if entry == "x"),
        "{e}"
    );
    assert!(fs::read_dir(&outside).unwrap().next().is_none());
    assert!(fs::symlink_metadata(s.root().join("x")).unwrap().is_dir());
    assert_eq!(listing(&s.root()), ["x"]);

    // Across layers a name may come back (that is layering), and the
    // names seen are forgotten between layers; `x` beside `.wh.x` in one
    // layer is fine.
    let s = Scratch::new("dup-layers");
    let l1 = L::new().file("a", "1").dir("d/", 0o755).done();
    let l2 = L::new()
        .file("a", "2")
        .symlink("d", "a")
        .file("w", "w")
        .file(".wh.w", "")
        .done();
    apply(&s.root(), &[&l1, &l2, &l1]).unwrap();
    assert_eq!(read(&s.root().join("a")), "1");
    assert!(s.root().join("d").is_dir());
    assert_eq!(read(&s.root().join("w")), "w");
}

#[test]
fn whiteouts_of_dot_and_dotdot_are_refused() {
    let s = Scratch::new("whdots");
    let root = s.root();
    // A sibling of the rootfs (what `..` of the root would name) and
    // content inside the rootfs.
    let sibling = s.0.join("sibling");
    fs::create_dir(&sibling).unwrap();
    fs::write(sibling.join("keep"), "keep").unwrap();
    let l1 = L::new()
        .file("a/f", "f")
        .file("b", "b")
        .symlink("lnk", sibling.to_str().unwrap())
        .done();
    apply(&root, &[&l1]).unwrap();
    let before = listing(&s.0);
    for name in [
        ".wh..",
        ".wh...",
        "./.wh...",
        "a/.wh..",
        "a/.wh...",
        "a/missing/.wh...",
        "lnk/.wh...",
        ".wh.",
        "a/.wh.",
    ] {
        let l = L::new().file("a/new", "x").file(name, "").done();
        let e = apply(&root, &[&l]).unwrap_err();
        assert!(
            matches!(inner(&e), UnpackError::Unsafe { entry, why }
                if entry == name && why == "whiteout of nothing, `.` or `..`"),
            "{name}: {e}"
        );
        assert!(!e.to_string().contains('\n'), "{e}");
        // Only `a/new` (before the whiteout) was written.
        fs::remove_file(root.join("a/new")).unwrap();
        assert_eq!(listing(&s.0), before, "{name}");
    }
    // A whiteout through the link to the sibling stays inside the root:
    // there is no `keep` there, so it hides nothing.
    let l = L::new().file("lnk/.wh.keep", "").done();
    apply(&root, &[&l]).unwrap();
    assert_eq!(listing(&s.0), before);
    assert_eq!(read(&sibling.join("keep")), "keep");
}

/// A layer tar with a few entries and a file big enough that its gzip
/// spans many deflate blocks.
fn gzip_fixture() -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Compressible, but not to nothing.
    let noise: Vec<u8> = (0..300_000).map(|_| b'a' + rng.below(16) as u8).collect();
    let tar = L::new()
        .file("first", "1")
        .raw(EntryType::Regular, b"big", b"", &noise, 0o644)
        .file("last", "3")
        .done();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).unwrap();
    (tar, gz.finish().unwrap())
}

#[test]
fn truncated_gzip_layers_fail() {
    let (tar, gz) = gzip_fixture();
    assert!(gz.len() > 50_000, "{}", gz.len());
    // The whole stream applies.
    let s = Scratch::new("gzcut");
    let layer = |b: &[u8]| decompress(BufReader::new(Cursor::new(b.to_vec()))).unwrap();
    apply_layer(&s.root(), layer(&gz), &opts()).unwrap();
    assert_eq!(listing(&s.root()), ["big", "first", "last"]);
    // Cut in the middle of the deflate data (inside `big`), just before
    // the 8-byte trailer (every entry and the end-of-archive marker are
    // there), inside the trailer, and by one byte.
    for (cut, at) in [
        (gz.len() / 2, "big"),
        (gz.len() - 8, "end-of-archive"),
        (gz.len() - 5, "end-of-archive"),
        (gz.len() - 1, "end-of-archive"),
    ] {
        let s = Scratch::new("gzcut");
        let e = apply_layer(&s.root(), layer(&gz[..cut]), &opts())
            .expect_err(&format!("a gzip cut at {cut} of {} applied", gz.len()));
        let msg = e.to_string();
        eprintln!("gzip cut at {cut} of {}: {msg}", gz.len());
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.contains(at), "cut at {cut}: {msg}");
        assert!(
            matches!(e, UnpackError::Tar { .. } | UnpackError::Truncated { .. }),
            "cut at {cut}: {msg}"
        );
        // Cut inside `big`: nothing after it was applied.
        if at == "big" {
            assert!(!exists(&s.root().join("last")));
        }
    }
    // The same cut through apply_layers names the layer.
    let s = Scratch::new("gzcut");
    let e = apply_layers(&s.root(), [layer(&gz), layer(&gz[..gz.len() / 2])], &opts()).unwrap_err();
    assert!(matches!(e, UnpackError::Layer { index: 2, .. }), "{e}");
    // The uncompressed tar cut at the same place: Truncated, naming `big`.
    let cut = &tar[..tar.len() / 2];
    let e = apply(&s.root(), &[cut]).unwrap_err();
    assert!(matches!(inner(&e), UnpackError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("big"), "{e}");
}

#[test]
fn a_10_gib_sparse_entry_keeps_its_holes_and_counts_its_real_size() {
    const SIZE: u64 = 10 << 30;
    let s = Scratch::new("sparse10g");
    let src = s.0.join("src");
    {
        use std::os::unix::fs::FileExt;
        let f = fs::File::create(&src).unwrap();
        f.set_len(SIZE).unwrap();
        f.write_all_at(b"head", 0).unwrap();
        f.write_all_at(b"middle", 5 << 30).unwrap();
        f.write_all_at(b"tail", SIZE - 4).unwrap();
    }
    let mut b = tar::Builder::new(Vec::new());
    b.sparse(true);
    b.append_path_with_name(&src, "huge").unwrap();
    let l = b.into_inner().unwrap();
    fs::remove_file(&src).unwrap();
    // Really a GNU sparse entry of 10 GiB, in a small tar.
    assert!(l.len() < 1 << 20, "{}", l.len());
    {
        let mut a = tar::Archive::new(&l[..]);
        let e = a.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(e.header().entry_type(), EntryType::GNUSparse);
        assert_eq!(e.header().as_gnu().unwrap().real_size().unwrap(), SIZE);
        assert!(e.header().entry_size().unwrap() < 1 << 20);
    }
    let root = s.root();
    let huge = root.join("huge");
    // Over the cap: refused before anything is written. The cap counts
    // the real size, not the few bytes the tar stores.
    for cap in [1 << 30, SIZE - 1] {
        let o = UnpackOptions {
            max_bytes: cap,
            ..opts()
        };
        let e = apply_layer(&root, Cursor::new(&l), &o).unwrap_err();
        assert!(
            matches!(&e, UnpackError::TooLarge { entry, limit } if entry == "huge" && *limit == cap),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!("layer entry huge: more than {cap} bytes of file content")
        );
        assert!(!exists(&huge));
    }
    // The default cap takes it; holes stay holes.
    assert!(opts().max_bytes > SIZE);
    let r = apply_layer(&root, Cursor::new(&l), &opts()).unwrap();
    assert_eq!((r.files, r.bytes), (1, SIZE));
    let m = fs::metadata(&huge).unwrap();
    assert_eq!(m.len(), SIZE);
    assert!(m.blocks() * 512 < 64 << 20, "{} blocks", m.blocks());
    use std::os::unix::fs::FileExt;
    let f = fs::File::open(&huge).unwrap();
    for (at, want) in [
        (0, &b"head\0\0"[..]),
        ((5 << 30) - 2, b"\0\0middle\0\0"),
        (SIZE - 6, b"\0\0tail"),
        (3 << 30, b"\0\0\0\0"),
    ] {
        let mut got = vec![0xffu8; want.len()];
        f.read_exact_at(&mut got, at).unwrap();
        assert_eq!(got, want, "at {at}");
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File(&'static str),
    Link(&'static str),
}

/// Every path below `root`: (type with content or target, permission bits).
fn tree(root: &Path) -> std::collections::BTreeMap<String, (Node, u32)> {
    let mut out = std::collections::BTreeMap::new();
    for rel in listing(root) {
        let p = root.join(&rel);
        let m = fs::symlink_metadata(&p).unwrap();
        let node = if m.is_dir() {
            Node::Dir
        } else if m.file_type().is_symlink() {
            let t = fs::read_link(&p).unwrap();
            Node::Link(t.to_str().unwrap().to_owned().leak())
        } else if m.is_file() {
            Node::File(read(&p).leak())
        } else {
            panic!("{rel}: unexpected type {:?}", m.file_type());
        };
        out.insert(rel, (node, m.mode() & 0o7777));
    }
    out
}

/// Four layers exercising whiteouts; the result is checked path by path
/// against a table written out by hand.
#[test]
fn whiteout_semantics_file_by_file() {
    let s = Scratch::new("whfixture");
    let root = s.root();
    let hl = |l: L, name: &str, target: &str| {
        l.raw(
            EntryType::Link,
            name.as_bytes(),
            target.as_bytes(),
            b"",
            0o640,
        )
    };
    let l1 = L::new()
        .dir("etc/", 0o755)
        .file("etc/passwd", "root:x:0:0\n")
        .file("etc/gone", "gone\n")
        .dir("var/", 0o755)
        .dir("var/cache/", 0o755)
        .file("var/cache/a", "a")
        .dir("var/cache/sub/", 0o700)
        .file("var/cache/sub/b", "b")
        .dir("opq/", 0o755)
        .file("opq/old", "old")
        .dir("opq/olddir/", 0o755)
        .file("opq/olddir/x", "x")
        .file("readd", "first")
        .dir("p/", 0o755)
        .file("p/child", "child")
        .symlink("link", "etc")
        .dir("data/", 0o755)
        .file_mode("data/orig", "shared", 0o640);
    let l1 = hl(l1, "data/hl", "data/orig").done();
    let l2 = L::new()
        // A file whiteout and a directory whiteout.
        .file("etc/.wh.gone", "")
        .file("var/.wh.cache", "")
        // An opaque directory with this layer's entries before and after
        // the marker.
        .file("opq/before", "before")
        .file("opq/.wh..wh..opq", "")
        .file_mode("opq/after", "after", 0o600)
        .dir("opq/newdir/", 0o750)
        .file("opq/newdir/y", "y")
        // Whiteouts of paths no layer had.
        .file(".wh.never", "")
        .file("etc/.wh.nothing", "")
        .file("nodir/.wh.nothing", "")
        // Whited out here, back in layer 3.
        .file(".wh.readd", "")
        // A directory replaced by a file.
        .file("p", "p is a file");
    let l2 = hl(l2, "data/hl2", "data/orig").done();
    let l3 = L::new()
        .file_mode("readd", "second", 0o600)
        // Through a parent that is a file now: nothing to hide.
        .file("p/.wh.child", "")
        // A symlink replaced by a directory, filled in the same layer.
        .dir("link/", 0o750)
        .file("link/inside", "inside")
        // The hard links' target goes; the links keep the content.
        .file("data/.wh.orig", "")
        // A whited-out directory made again.
        .dir("var/cache/", 0o711)
        .file("var/cache/new", "new")
        .done();
    let l4 = L::new()
        // A file the opaque layer made, whited out by a later one.
        .file("opq/.wh.before", "")
        // Under the directory made again: the old content is long gone.
        .file("var/cache/.wh.a", "")
        .done();
    let r = apply(&root, &[&l1, &l2, &l3, &l4]).unwrap();
    assert_eq!(r.whiteouts, 10, "{r:?}");
    assert_eq!(r.opaque_dirs, 1, "{r:?}");

    use Node::*;
    let want: Vec<(&str, Node, u32)> = vec![
        ("data", Dir, 0o755),
        ("data/hl", File("shared"), 0o640),
        ("data/hl2", File("shared"), 0o640),
        ("etc", Dir, 0o755),
        ("etc/passwd", File("root:x:0:0\n"), 0o644),
        ("link", Dir, 0o750),
        ("link/inside", File("inside"), 0o644),
        ("opq", Dir, 0o755),
        ("opq/after", File("after"), 0o600),
        ("opq/newdir", Dir, 0o750),
        ("opq/newdir/y", File("y"), 0o644),
        ("p", File("p is a file"), 0o644),
        ("readd", File("second"), 0o600),
        ("var", Dir, 0o755),
        ("var/cache", Dir, 0o711),
        ("var/cache/new", File("new"), 0o644),
    ];
    let want: std::collections::BTreeMap<String, (Node, u32)> = want
        .into_iter()
        .map(|(p, n, m)| (p.to_owned(), (n, m)))
        .collect();
    let got = tree(&root);
    for (p, w) in &want {
        assert_eq!(got.get(p), Some(w), "{p}");
    }
    for p in got.keys() {
        assert!(want.contains_key(p), "{p} should not be there");
    }
    // The two links are one file, its only names.
    let (a, b) = (
        fs::metadata(root.join("data/hl")).unwrap(),
        fs::metadata(root.join("data/hl2")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    // The directory over `link` was not made through it.
    assert!(!exists(&root.join("etc/inside")));
}

#[test]
fn pax_sparse_files_are_refused_not_unpacked_wrong() {
    // GNU tar's POSIX-format sparse file: the real name and size in PAX
    // records, a placeholder path, the map at the start of the data.
    let s = Scratch::new("paxsparse");
    let l = L::new()
        .pax("GNU.sparse.major", b"1")
        .pax("GNU.sparse.minor", b"0")
        .pax("GNU.sparse.name", b"f.bin")
        .pax("GNU.sparse.realsize", b"8388611")
        .file("GNUSparseFile.7/f.bin", "1\n0\n5\n")
        .done();
    let e = apply(&s.root(), &[&l]).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("GNUSparseFile.7/f.bin"), "{msg}");
    assert!(msg.contains("PAX sparse"), "{msg}");
    assert!(listing(&s.root()).is_empty(), "{:?}", listing(&s.root()));
    // Other PAX records still pass.
    let l = L::new().pax("comment", b"hello").file("ok", "x").done();
    apply(&s.root(), &[&l]).unwrap();
    assert_eq!(read(&s.root().join("ok")), "x");
}

/// File data is copied straight out of the layer stream's buffer:
/// whatever size the buffer hands out, every file
/// gets exactly its bytes and the entries after it (padding skipped, PAX
/// headers, links, a device with data that is read through) stay in step.
#[test]
fn straight_copies_stay_in_step_with_the_tar_stream() {
    let sizes = [0usize, 1, 511, 512, 513, 1023, 4096, 70_001, 300_000];
    let content = |i: usize, n: usize| -> String {
        (0..n)
            .map(|k| (b'a' + ((i * 7 + k) % 26) as u8) as char)
            .collect()
    };
    let mut l = L::new().dir("d", 0o755);
    for (i, n) in sizes.iter().enumerate() {
        l = l.file(&format!("d/f{i}"), &content(i, *n));
        if i == 3 {
            l = l.pax("mtime", b"1600000001.5").file("d/pax", "after pax");
        }
    }
    let long = format!("d/{}", "n".repeat(150));
    let layer = l
        .file(&long, "long name")
        .raw(EntryType::Char, b"d/dev", b"", &[7u8; 1000], 0o644)
        .symlink("d/s", "f1")
        .hardlink("d/h", "d/f6")
        .file("last", "end")
        .done();
    for cap in [1usize, 7, 512, 4099, 1 << 20] {
        let s = Scratch::new(&format!("straight{cap}"));
        let root = s.root();
        let r = apply_layers(
            &root,
            [BufReader::with_capacity(cap, Cursor::new(&layer[..]))],
            &opts(),
        )
        .unwrap_or_else(|e| panic!("buffer of {cap}: {e}"));
        assert_eq!(r.files, sizes.len() as u64 + 3, "buffer of {cap}");
        assert_eq!(r.devices_dropped, 1, "buffer of {cap}");
        for (i, n) in sizes.iter().enumerate() {
            assert_eq!(
                read(&root.join(format!("d/f{i}"))),
                content(i, *n),
                "buffer of {cap}: d/f{i}"
            );
        }
        assert_eq!(read(&root.join("d/pax")), "after pax");
        assert_eq!(read(&root.join(&long)), "long name");
        assert_eq!(read(&root.join("d/h")), content(6, sizes[6]));
        assert_eq!(fs::read_link(root.join("d/s")).unwrap(), Path::new("f1"));
        assert_eq!(read(&root.join("last")), "end");
    }
}

/// A small deterministic generator (xorshift64) for noise and mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A layer with every kind of header the reader parses: PAX records
/// (long names, xattrs, fractional times), GNU long names and an old-style
/// GNU sparse map, links, a directory, file data across blocks.
fn varied_layer(scratch: &Path) -> Vec<u8> {
    let holey = scratch.join("holey-src");
    {
        use std::os::unix::fs::FileExt;
        let f = fs::File::create(&holey).unwrap();
        f.set_len(1 << 20).unwrap();
        f.write_all_at(b"start", 0).unwrap();
        f.write_all_at(b"mid", 300_000).unwrap();
    }
    let mut b = tar::Builder::new(Vec::new());
    b.sparse(true);
    b.append_path_with_name(&holey, "holey").unwrap();
    let mut h = Header::new_gnu();
    h.set_size(4);
    h.set_mode(0o640);
    b.append_data(&mut h, format!("gnu/{}", "g".repeat(150)), &b"long"[..])
        .unwrap();
    let mut gnu = b.into_inner().unwrap();
    // The builder's end marker off: the ustar/PAX part follows.
    gnu.truncate(gnu.len() - 1024);
    let rest = L::new()
        .dir("d", 0o755)
        .pax("mtime", b"1.5")
        .pax("SCHILY.xattr.user.k", b"v")
        .file("d/f", &"x".repeat(1500))
        .file(&format!("d/{}", "p".repeat(150)), "pax-long")
        .symlink("d/s", "../d/f")
        .hardlink("d/h", "d/f")
        .file("d/.wh.gone", "")
        .done();
    gnu.extend(rest);
    gnu
}

/// Damaged and cut-down layers, a few thousand of them, fail with an error
/// or unpack: never a panic (an abort, in the release build), never a
/// write outside the root.
#[test]
fn mutated_layers_fail_cleanly_and_stay_inside() {
    let s = Scratch::new("mutate");
    let base = varied_layer(&s.0);
    // The unmutated layer unpacks whole.
    let r = apply(&s.root(), &[&base]).unwrap();
    assert_eq!((r.files, r.symlinks, r.hardlinks), (4, 1, 1), "{r:?}");
    assert_eq!(fs::metadata(s.root().join("holey")).unwrap().len(), 1 << 20);
    fs::write(s.0.join("sentinel"), "keep").unwrap();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut ok, mut failed) = (0, 0);
    for i in 0..2000 {
        let mut layer = base.clone();
        for _ in 0..1 + rng.below(4) {
            if layer.len() < 512 {
                break;
            }
            match rng.below(5) {
                // Any byte.
                0 => {
                    let at = rng.below(layer.len());
                    layer[at] = rng.next() as u8;
                }
                // A number field of some header, as base-256 or octal
                // junk; checksum fixed up so the header is taken.
                1 | 2 => {
                    let block = rng.below(layer.len() / 512) * 512;
                    let (at, len) = [
                        (100, 8),
                        (108, 8),
                        (124, 12),
                        (136, 12),
                        (483, 12),
                        (386, 12),
                        (398, 12),
                    ][rng.below(7)];
                    for k in 0..len {
                        layer[block + at + k] = match rng.below(3) {
                            0 => 0xff,
                            1 => b'0' + rng.below(10) as u8,
                            _ => rng.next() as u8,
                        };
                    }
                    if rng.below(2) == 0 {
                        layer[block + at] = 0x80;
                    }
                    let sum: u32 = layer[block..block + 512]
                        .iter()
                        .enumerate()
                        .map(|(j, b)| {
                            if (148..156).contains(&j) {
                                32
                            } else {
                                u32::from(*b)
                            }
                        })
                        .sum();
                    layer[block + 148..block + 156]
                        .copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
                }
                // The type flag.
                3 => {
                    let block = rng.below(layer.len() / 512) * 512;
                    layer[block + 156] = b"0125LKxgS7V\0"[rng.below(12)];
                }
                // Cut.
                _ => layer.truncate(rng.below(layer.len() + 1)),
            }
        }
        let root = s.0.join(format!("r{}", i % 4));
        rm_rf(&root);
        fs::create_dir(&root).unwrap();
        let o = UnpackOptions {
            max_bytes: 64 << 20,
            ..opts()
        };
        match apply_layer(&root, Cursor::new(&layer), &o) {
            Ok(_) => ok += 1,
            Err(e) => {
                failed += 1;
                // One line, naming where.
                assert!(!e.to_string().contains('\n'), "{e}");
            }
        }
    }
    assert_eq!(read(&s.0.join("sentinel")), "keep");
    let mut outside: Vec<String> = fs::read_dir(&s.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside.sort();
    assert_eq!(
        outside,
        ["holey-src", "r0", "r1", "r2", "r3", "root", "sentinel"]
    );
    // Both outcomes were exercised.
    assert!(ok > 50 && failed > 500, "{ok} unpacked, {failed} refused");
}
