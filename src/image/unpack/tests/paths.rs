//! Trees, whiteouts and names: planted symlinks, `..`, symlinked parents and hard links stay inside the root.

use super::*;

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
                crate::testing::missing("openat2 (Linux 5.6, not refused by a seccomp filter)");
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
