//! Tests of the store; [`TempDir`] and the image-making helpers serve the
//! tests of the rest of `image` too.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

use super::reference::escape_name;
use super::*;
use crate::image::layout::{self, MAX_JSON_SIZE, MT_OCI_CONFIG, MT_OCI_LAYER, MT_OCI_MANIFEST};

/// A temp directory removed (read-only parts included) on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "cbrun-{tag}-{}-{}-{}",
            nix::unistd::geteuid(),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = remove_tree(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = remove_tree(&self.0);
    }
}

pub(crate) fn config_json(diff_ids: &[&Digest]) -> Vec<u8> {
    let ids: Vec<String> = diff_ids.iter().map(|d| d.to_string()).collect();
    serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux", "created": "2024-01-02T03:04:05Z",
        "config": {"Env": ["PATH=/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": ids},
    }))
    .unwrap()
}

pub(crate) fn manifest_json(config: (&Digest, u64), layers: &[(&Digest, u64)]) -> Vec<u8> {
    let layers: Vec<serde_json::Value> = layers
        .iter()
        .map(|(d, n)| serde_json::json!({"mediaType": MT_OCI_LAYER, "digest": d.to_string(), "size": n}))
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
        "config": {"mediaType": MT_OCI_CONFIG, "digest": config.0.to_string(), "size": config.1},
        "layers": layers,
    }))
    .unwrap()
}

/// Store a one-layer image under `reference`; returns its manifest digest
/// and the layer digest.
pub(crate) fn add_image(store: &Store, reference: &str, layer: &[u8]) -> (Digest, Digest) {
    let (ld, ln) = store.put_blob(layer, None).unwrap();
    let config = config_json(&[&ld]);
    let (cd, cn) = store.put_blob(&config[..], None).unwrap();
    let m = manifest_json((&cd, cn), &[(&ld, ln)]);
    let md = store
        .commit_image(&ImageRef::parse(reference).unwrap(), &m, "test")
        .unwrap();
    (md, ld)
}

fn blob_count(store: &Store) -> usize {
    fs::read_dir(store.root().join("blobs/sha256"))
        .unwrap()
        .count()
}

fn tmp_count(store: &Store) -> usize {
    fs::read_dir(store.tmp_dir()).unwrap().count()
}

#[test]
fn references_parse_and_validate() {
    let r = ImageRef::parse("alpine").unwrap();
    assert_eq!(
        (r.name.as_str(), r.tag.as_deref(), r.digest.is_none()),
        ("alpine", Some("latest"), true)
    );
    let r = ImageRef::parse("localhost:5000/team/app:v1.2_rc-3").unwrap();
    assert_eq!(
        (r.name.as_str(), r.tag.as_deref()),
        ("localhost:5000/team/app", Some("v1.2_rc-3"))
    );
    let r = ImageRef::parse("localhost:5000/app").unwrap();
    assert_eq!(
        (r.name.as_str(), r.tag.as_deref()),
        ("localhost:5000/app", Some("latest"))
    );
    let d = Digest::of_bytes(b"m");
    let r = ImageRef::parse(&format!("a/b@{d}")).unwrap();
    assert_eq!((r.tag.as_deref(), r.digest.as_ref()), (None, Some(&d)));
    assert_eq!(r.to_string(), format!("a/b@{d}"));
    let r = ImageRef::parse(&format!("a:t@{d}")).unwrap();
    assert_eq!(r.to_string(), format!("a:t@{d}"));
    for ok in [
        "a__b",
        "a--b",
        "a.b_c-d",
        "registry.example.com/x/y",
        "my-reg:443/x",
        "127.0.0.1:5000/x",
    ] {
        ImageRef::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for (bad, part) in [
        ("", "empty"),
        ("Alpine", "\"Alpine\""),
        ("a/B/c", "\"B\""),
        ("a//b", "\"\""),
        ("a___b", "\"a___b\""),
        ("-a", "\"-a\""),
        ("a.", "\"a.\""),
        ("a:", "tag \"\""),
        ("a:.x", "tag \".x\""),
        ("a:x/y", "registry \"a:x\""),
        ("my_reg:5000/x", "\"my_reg:5000\""),
        ("reg:99999/x", "registry"),
        ("a@sha256:zz", "digest"),
        ("../etc", "\"..\""),
    ] {
        let e = ImageRef::parse(bad).unwrap_err().to_string();
        assert!(e.contains(part), "{bad:?}: {e}");
        assert!(!e.contains('\n'));
    }
    assert!(ImageRef::parse(&format!("a:{}", "x".repeat(129))).is_err());
    assert!(ImageRef::parse(&"a".repeat(256)).is_err());
    assert_eq!(
        escape_name("localhost:5000/a/b"),
        "localhost%3A5000%2Fa%2Fb"
    );
}

#[test]
fn default_root_precedence() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let all: &[(&str, &str)] = &[
        ("CBRUN_HOME", "/c"),
        ("XDG_DATA_HOME", "/x"),
        ("HOME", "/h"),
    ];
    assert_eq!(
        default_root_from(env(all), false),
        Some(PathBuf::from("/c"))
    );
    let no_c: &[(&str, &str)] = &[("CBRUN_HOME", ""), ("XDG_DATA_HOME", "/x"), ("HOME", "/h")];
    assert_eq!(
        default_root_from(env(no_c), true),
        Some(PathBuf::from("/var/lib/cbrun"))
    );
    assert_eq!(
        default_root_from(env(no_c), false),
        Some(PathBuf::from("/x/cbrun"))
    );
    let rel: &[(&str, &str)] = &[("XDG_DATA_HOME", "rel"), ("HOME", "/h")];
    assert_eq!(
        default_root_from(env(rel), false),
        Some(PathBuf::from("/h/.local/share/cbrun"))
    );
    assert_eq!(default_root_from(env(&[]), false), None);
}

#[test]
fn rfc3339_dates() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_704_164_645), "2024-01-02T03:04:05Z");
    assert_eq!(rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
}

#[test]
fn open_creates_layout_and_refuses_foreign_roots() {
    let t = TempDir::new("store-open");
    let store = Store::open(t.path().join("a/b/store")).unwrap();
    for d in ["blobs/sha256", "images", "rootfs", "tmp"] {
        assert!(store.root().join(d).is_dir(), "{d}");
    }
    let mode = fs::metadata(store.root().join("blobs"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
    let file = t.path().join("file");
    fs::write(&file, b"").unwrap();
    assert!(Store::open(&file)
        .unwrap_err()
        .to_string()
        .contains("not a directory"));
    let foreign = if nix::unistd::geteuid().is_root() {
        let d = t.path().join("foreign");
        fs::create_dir(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
        d
    } else {
        PathBuf::from("/")
    };
    let e = Store::open(&foreign).unwrap_err().to_string();
    assert!(e.contains("not by the current user"), "{e}");
}

#[test]
fn blobs_are_verified_on_write() {
    let t = TempDir::new("store-put");
    let store = Store::open(t.path()).unwrap();
    let d = Digest::of_bytes(b"hello");
    assert!(!store.has_blob(&d));
    let wrong = Digest::of_bytes(b"other");
    let e = store.put_blob(&b"hello"[..], Some(&wrong)).unwrap_err();
    assert!(matches!(e, StoreError::DigestMismatch { .. }), "{e}");
    assert_eq!((blob_count(&store), tmp_count(&store)), (0, 0));
    assert_eq!(
        store.put_blob(&b"hello"[..], Some(&d)).unwrap(),
        (d.clone(), 5)
    );
    let p = store.blob_path(&d);
    let meta = fs::metadata(&p).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o444);
    // present: not rewritten (same inode), with or without expectation
    assert_eq!(store.put_blob(&b"hello"[..], None).unwrap(), (d.clone(), 5));
    assert_eq!(
        store.put_blob(&b"ignored"[..], Some(&d)).unwrap(),
        (d.clone(), 5)
    );
    assert_eq!(fs::metadata(&p).unwrap().ino(), meta.ino());
    assert_eq!((blob_count(&store), tmp_count(&store)), (1, 0));
    // a dropped writer leaves no temp file
    let mut w = store.blob_writer().unwrap();
    w.write_all(b"partial").unwrap();
    assert_eq!(tmp_count(&store), 1);
    drop(w);
    assert_eq!(tmp_count(&store), 0);
}

#[test]
fn blobs_are_verified_on_read_and_damage_is_removed() {
    let t = TempDir::new("store-read");
    let store = Store::open(t.path()).unwrap();
    let (d, _) = store.put_blob(&b"{\"a\":1}"[..], None).unwrap();
    assert_eq!(store.read_blob_verified(&d).unwrap(), b"{\"a\":1}");
    let mut s = String::new();
    store.open_blob(&d).unwrap().read_to_string(&mut s).unwrap();
    assert_eq!(s, "{\"a\":1}");
    let p = store.blob_path(&d);
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&p, b"{\"a\":2}").unwrap();
    let e = store
        .open_blob(&d)
        .unwrap()
        .read_to_end(&mut Vec::new())
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("damaged"), "{e}");
    assert!(!store.has_blob(&d), "damaged blob removed");
    assert!(matches!(
        store.read_blob_verified(&d),
        Err(StoreError::MissingBlob { .. })
    ));
    // the next put repairs it
    store.put_blob(&b"{\"a\":1}"[..], Some(&d)).unwrap();
    assert!(store.read_blob_verified(&d).is_ok());
    // size cap for JSON reads
    let big = vec![b' '; MAX_JSON_SIZE as usize + 1];
    let (bd, _) = store.put_blob(&big[..], None).unwrap();
    assert!(store
        .read_blob_verified(&bd)
        .unwrap_err()
        .to_string()
        .contains("limit"));
}

#[test]
fn commit_requires_every_blob_and_writes_the_ref_last() {
    let t = TempDir::new("store-commit");
    let store = Store::open(t.path()).unwrap();
    let (ld, ln) = store.put_blob(&b"layer"[..], None).unwrap();
    let config = config_json(&[&ld]);
    let cd = Digest::of_bytes(&config);
    let m = manifest_json((&cd, config.len() as u64), &[(&ld, ln)]);
    let r = ImageRef::parse("x/y:1").unwrap();
    let e = store.commit_image(&r, &m, "test").unwrap_err().to_string();
    assert!(
        e.contains("config") && e.contains("not in the store"),
        "{e}"
    );
    store.put_blob(&config[..], None).unwrap();
    // wrong size in the descriptor
    let lying = manifest_json((&cd, config.len() as u64), &[(&ld, ln + 1)]);
    let e = store
        .commit_image(&r, &lying, "test")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("layers[0]") && e.contains("descriptor says"),
        "{e}"
    );
    assert!(store.list().unwrap().is_empty());
    // a digest reference must match
    let other = ImageRef::parse(&format!("x/y@{}", Digest::of_bytes(b"z"))).unwrap();
    assert!(matches!(
        store.commit_image(&other, &m, "t"),
        Err(StoreError::DigestMismatch { .. })
    ));
    // not a manifest
    assert!(store.commit_image(&r, b"{}", "t").is_err());
    let md = store.commit_image(&r, &m, "import test").unwrap();
    assert_eq!(md, Digest::of_bytes(&m));
    let rec: RefRecord =
        serde_json::from_slice(&fs::read(store.root().join("images/x%2Fy/1.json")).unwrap())
            .unwrap();
    assert_eq!(
        (rec.name.as_str(), rec.tag.as_deref(), &rec.manifest),
        ("x/y", Some("1"), &md)
    );
    assert_eq!(rec.source, "import test");
    assert_eq!(tmp_count(&store), 0);
    // by digest only
    let pin = ImageRef::parse(&format!("x/z@{md}")).unwrap();
    store.commit_image(&pin, &m, "pull").unwrap();
    assert!(store
        .root()
        .join(format!("images/x%2Fz/@{}.json", md.hex()))
        .is_file());
}

#[test]
fn list_inspect_resolve_tag_remove() {
    let t = TempDir::new("store-ops");
    let store = Store::open(t.path()).unwrap();
    let (m1, l1) = add_image(&store, "app:1", b"one");
    let (m2, _) = add_image(&store, "reg.io:5000/lib/base", b"two");
    let list = store.list().unwrap();
    let names: Vec<&str> = list.iter().map(|i| i.reference.as_str()).collect();
    assert_eq!(names, ["app:1", "reg.io:5000/lib/base:latest"]);
    assert_eq!(list[0].layers, 1);
    assert_eq!(list[0].created.as_deref(), Some("2024-01-02T03:04:05Z"));
    assert!(list[0].error.is_none());
    let r = store.resolve("app:1").unwrap();
    assert_eq!((&r.manifest_digest, r.layers.len()), (&m1, 1));
    assert_eq!(layout::descriptor_digest(&r.layers[0]).unwrap(), l1);
    assert_eq!(r.config.architecture().to_string(), "amd64");
    assert!(matches!(store.resolve("app"), Err(StoreError::NotFound(_))));
    assert_eq!(
        store.resolve(&format!("app@{m1}")).unwrap().manifest_digest,
        m1
    );
    assert!(matches!(
        store.resolve(&format!("app@{m2}")),
        Err(StoreError::NotFound(_))
    ));
    assert!(store.resolve(&format!("app:2@{m1}")).is_err());
    let d = store.inspect("reg.io:5000/lib/base").unwrap();
    assert_eq!(d.manifest_digest, m2);
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["manifest"]["schemaVersion"], 2);
    store.tag("app:1", "app:latest").unwrap();
    store.tag("app:1", "other/app:x").unwrap();
    assert!(store.tag(&format!("app@{m1}"), "app:2").is_ok());
    assert!(store.tag("app:1", &format!("app@{m1}")).is_err());
    assert!(store.tag("nope", "app:3").is_err());
    assert_eq!(store.list().unwrap().len(), 5);
    let rep = store.remove("app:latest").unwrap();
    assert_eq!(rep.removed, ["app:latest"]);
    let rep = store.remove(&format!("app@{m1}")).unwrap();
    assert_eq!(rep.removed, ["app:1", "app:2"]);
    assert!(!store.root().join("images/app").exists());
    assert!(matches!(
        store.remove("app:1"),
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.list().unwrap().len(), 2);
}

#[test]
fn gc_frees_unreferenced_blobs_rootfs_and_tmp() {
    let t = TempDir::new("store-gc");
    let store = Store::open(t.path()).unwrap();
    let (m1, l1) = add_image(&store, "a", b"layer-a");
    let (m2, _) = add_image(&store, "b", b"layer-b");
    store.put_blob(&b"stray"[..], None).unwrap();
    fs::write(store.temp_path("junk"), b"x").unwrap();
    // unpacked rootfs with read-only directories, for both images
    for m in [&m1, &m2] {
        let dir = store.rootfs_dir(m);
        fs::create_dir_all(dir.join("usr/bin")).unwrap();
        fs::write(dir.join("usr/bin/tool"), b"x").unwrap();
        for p in ["usr/bin", "usr", ""] {
            fs::set_permissions(dir.join(p), fs::Permissions::from_mode(0o555)).unwrap();
        }
    }
    let rep = store.gc().unwrap();
    assert_eq!(
        (rep.removed_blobs, rep.removed_rootfs, rep.removed_tmp),
        (1, 0, 1)
    );
    assert_eq!(rep.kept_blobs, 6);
    // rm of b removes its rootfs right away (nobody holds the store)
    let rep = store.remove("b").unwrap();
    assert_eq!(rep.rootfs_removed, vec![m2.clone()]);
    assert!(!store.rootfs_dir(&m2).exists());
    // while held, rm leaves the rootfs to gc, and gc refuses in-process
    store.tag("a", "a2").unwrap();
    store.remove("a").unwrap(); // still referenced by a2
    assert!(store.rootfs_dir(&m1).exists());
    let hold = store.hold().unwrap();
    let rep = store.remove("a2").unwrap();
    assert!(rep.rootfs_removed.is_empty());
    assert!(matches!(store.gc(), Err(StoreError::Busy { .. })));
    drop(hold);
    let rep = store.gc().unwrap();
    assert_eq!((rep.removed_blobs, rep.removed_rootfs), (6, 1));
    assert_eq!(blob_count(&store), 0);
    assert!(!store.has_blob(&l1));
    assert!(fs::read_dir(store.root().join("rootfs"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn gc_waits_for_holders_in_other_processes() {
    // A hold is an flock on its own open file description, so a second
    // descriptor in this process stands in for another process.
    let t = TempDir::new("store-gcwait");
    let store = Store::open(t.path()).unwrap();
    let other = take_lock(&store.gc_lock_path(), false, true)
        .unwrap()
        .unwrap();
    let s2 = store.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = s2.gc().map(|r| r.removed_blobs);
        tx.send(()).unwrap();
        r
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "gc must wait"
    );
    drop(other);
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(h.join().unwrap().unwrap(), 0);
}

#[test]
fn concurrent_writers_of_the_same_blob() {
    let t = TempDir::new("store-conc");
    let store = Store::open(t.path()).unwrap();
    let data: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let want = Digest::of_bytes(&data);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (s, d, w) = (store.clone(), data.clone(), want.clone());
            std::thread::spawn(move || {
                let exp = if i % 2 == 0 { None } else { Some(&w) };
                s.put_blob(&d[..], exp).unwrap()
            })
        })
        .collect();
    for th in threads {
        assert_eq!(th.join().unwrap(), (want.clone(), data.len() as u64));
    }
    assert_eq!((blob_count(&store), tmp_count(&store)), (1, 0));
    // concurrent ref updates of distinct tags
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let s = store.clone();
            std::thread::spawn(move || add_image(&s, &format!("img:{i}"), b"same layer"))
        })
        .collect();
    let ms: BTreeSet<Digest> = threads.into_iter().map(|t| t.join().unwrap().0).collect();
    assert_eq!(ms.len(), 1);
    assert_eq!(store.list().unwrap().len(), 8);
}

#[test]
fn stale_tmp_is_cleaned_on_open() {
    let t = TempDir::new("store-stale");
    let store = Store::open(t.path()).unwrap();
    let old = store.temp_path("old");
    fs::create_dir_all(old.join("d")).unwrap();
    fs::set_permissions(old.join("d"), fs::Permissions::from_mode(0o500)).unwrap();
    let fresh = store.temp_path("fresh");
    fs::write(&fresh, b"x").unwrap();
    let past = SystemTime::now() - Duration::from_secs(2 * 3600);
    File::open(&old).unwrap().set_modified(past).unwrap();
    Store::open(t.path()).unwrap();
    assert!(!old.exists());
    assert!(fresh.exists());
    // not while someone holds the store
    let hold = store.hold().unwrap();
    File::open(&fresh).unwrap().set_modified(past).unwrap();
    Store::open(t.path()).unwrap();
    assert!(fresh.exists());
    drop(hold);
}
