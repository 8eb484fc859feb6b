//! A 10 GiB sparse entry, whiteout semantics file by file, pax sparse files, and mutated layers.

use super::*;

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
