//! Hostile archives and layers, truncated gzip layers, whiteouts unpacked as umoci unpacks them.

use super::*;

// ---------------------------------------------------------------------------
// 5. hostile archives and layers

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
