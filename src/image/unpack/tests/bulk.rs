//! Many files, legacy entries, sparse and large files, reused inodes, duplicate names, truncated gzip.

use super::*;

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
