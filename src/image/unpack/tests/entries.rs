//! Entry types, modes, compression, broken tars, long names, ownership, xattrs, limits and reports.

use super::*;

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
        crate::testing::missing("root (preserving ownership)");
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
        crate::testing::missing(&format!("user xattrs on {}", s.0.display()));
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
