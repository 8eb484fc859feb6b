//! Every operation against planted symlinks, FIFOs, directories and hard
//! links, with openat2 and with the component walk RHEL 8 kernels take.

use super::*;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "cbrun-dir-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn mkfifo(p: &Path) {
    let c = at::cpath(p.as_os_str()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// The same directory opened both ways.
fn both(p: &Path) -> [Dir; 2] {
    [
        Dir::open(p).unwrap().sandbox_writable(),
        Dir::open(p).unwrap().sandbox_writable().component_walk(),
    ]
}

fn planted(e: &DirError) -> Option<(Kind, Kind)> {
    match e {
        DirError::Planted { found, wanted, .. } => Some((*found, *wanted)),
        _ => None,
    }
}

#[test]
fn write_replace_replaces_a_symlink_and_leaves_its_target() {
    let s = Scratch::new("wlink");
    let target = s.0.join("host-secret");
    fs::write(&target, "untouched").unwrap();
    let d = s.0.join("d");
    fs::create_dir(&d).unwrap();
    for (i, dir) in both(&d).iter().enumerate() {
        let name = format!("instruction{i}.md");
        symlink(&target, d.join(&name)).unwrap();
        dir.write_replace(&name, b"new text", 0o644).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "untouched");
        let m = fs::symlink_metadata(d.join(&name)).unwrap();
        assert!(m.is_file());
        assert_eq!(m.mode() & 0o777, 0o644);
        assert_eq!(fs::read_to_string(d.join(&name)).unwrap(), "new text");
    }
    // No temporary file is left.
    assert_eq!(fs::read_dir(&d).unwrap().count(), 2);
}

#[test]
fn write_replace_replaces_fifos_and_hard_links_and_refuses_directories() {
    let s = Scratch::new("wmisc");
    for (i, dir) in both(&s.0).iter().enumerate() {
        let fifo = format!("fifo{i}");
        mkfifo(&s.0.join(&fifo));
        let t = Instant::now();
        dir.write_replace(&fifo, b"x", 0o600).unwrap();
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(fs::symlink_metadata(s.0.join(&fifo)).unwrap().is_file());

        let other = format!("other{i}");
        let hard = format!("hard{i}");
        fs::write(s.0.join(&other), "kept").unwrap();
        fs::hard_link(s.0.join(&other), s.0.join(&hard)).unwrap();
        dir.write_replace(&hard, b"mine", 0o644).unwrap();
        assert_eq!(fs::read_to_string(s.0.join(&other)).unwrap(), "kept");
        assert_eq!(fs::read_to_string(s.0.join(&hard)).unwrap(), "mine");

        let sub = format!("dir{i}");
        fs::create_dir_all(s.0.join(&sub).join("inside")).unwrap();
        let e = dir.write_replace(&sub, b"x", 0o644).unwrap_err();
        assert_eq!(planted(&e), Some((Kind::Dir, Kind::File)), "{e}");
        assert_eq!(e.blame(), Blame::Agent);
        assert!(e.to_string().contains(&sub), "{e}");
        assert!(s.0.join(&sub).join("inside").is_dir());
    }
    // Only what the test made: no temporaries.
    let names: Vec<_> = fs::read_dir(&s.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

#[test]
fn reads_refuse_links_fifos_and_directories_without_blocking() {
    let s = Scratch::new("read");
    let outside = Scratch::new("read-outside");
    fs::write(outside.0.join("secret"), "secret").unwrap();
    fs::create_dir(s.0.join("sub")).unwrap();
    fs::write(s.0.join("sub/ok"), "hello world").unwrap();
    symlink(outside.0.join("secret"), s.0.join("link")).unwrap();
    symlink(&outside.0, s.0.join("linkdir")).unwrap();
    mkfifo(&s.0.join("fifo"));
    for dir in both(&s.0) {
        let c = dir.read_capped("sub/ok", 5).unwrap();
        assert_eq!(c.bytes, b"hello");
        assert_eq!((c.size, c.omitted, c.truncated()), (11, 6, true));
        let c = dir.read_capped("sub/ok", 100).unwrap();
        assert!(!c.truncated());
        let t = Instant::now();
        for (rel, found) in [
            ("link", Kind::Symlink),
            ("fifo", Kind::Fifo),
            ("sub", Kind::Dir),
        ] {
            let e = dir.read_capped(rel, 100).unwrap_err();
            assert_eq!(planted(&e), Some((found, Kind::File)), "{rel}: {e}");
            assert_eq!(e.blame(), Blame::Agent);
        }
        // A link on the way is refused as well, at the component it is.
        let e = dir.read_capped("linkdir/secret", 100).unwrap_err();
        assert_eq!(planted(&e), Some((Kind::Symlink, Kind::Dir)), "{e}");
        assert!(e.to_string().contains("linkdir"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2));
        let e = dir.open_dir("linkdir").unwrap_err();
        assert_eq!(planted(&e), Some((Kind::Symlink, Kind::Dir)), "{e}");
    }
}

#[test]
fn head_and_tail_of_a_sparse_terabyte() {
    let s = Scratch::new("sparse");
    let f = fs::File::create(s.0.join("log")).unwrap();
    use std::io::{Seek, SeekFrom};
    let mut f = f;
    f.write_all(b"first line\n").unwrap();
    f.set_len(1 << 40).unwrap();
    f.seek(SeekFrom::Start((1 << 40) - 5)).unwrap();
    f.write_all(b"last\n").unwrap();
    drop(f);
    let d = Dir::open(&s.0).unwrap();
    let t = Instant::now();
    let c = d.read_head_tail("log", 64, 16).unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(c.size, 1 << 40);
    assert_eq!(c.omitted, (1 << 40) - 80);
    let text = c.text_lossy();
    assert!(text.starts_with("first line\n"), "{text:?}");
    assert!(text.ends_with("last\n"), "{text:?}");
    assert!(text.contains("bytes of this file not read"), "{text:?}");
    assert!(c.bytes.len() < 200);
    let c = d.read_capped("log", 1 << 20).unwrap();
    assert_eq!(c.bytes.len(), 1 << 20);
    assert!(c.truncated());
}

#[test]
fn append_only_to_a_single_linked_regular_file() {
    let s = Scratch::new("append");
    let outside = Scratch::new("append-outside");
    fs::write(outside.0.join("target"), "orig").unwrap();
    symlink(outside.0.join("target"), s.0.join("link")).unwrap();
    mkfifo(&s.0.join("fifo"));
    fs::create_dir(s.0.join("dir")).unwrap();
    fs::write(s.0.join("a"), "").unwrap();
    fs::hard_link(s.0.join("a"), s.0.join("b")).unwrap();
    for dir in both(&s.0) {
        let mut f = dir.open_append("log", 0o644).unwrap();
        f.write_all(b"line\n").unwrap();
        for (rel, found) in [
            ("link", Kind::Symlink),
            ("fifo", Kind::Fifo),
            ("dir", Kind::Dir),
        ] {
            let e = dir.open_append(rel, 0o644).unwrap_err();
            assert_eq!(planted(&e), Some((found, Kind::File)), "{rel}: {e}");
        }
        let e = dir.open_append("b", 0o644).unwrap_err();
        assert!(matches!(e, DirError::HardLinked { links: 2, .. }), "{e}");
    }
    assert_eq!(fs::read_to_string(s.0.join("log")).unwrap(), "line\nline\n");
    assert_eq!(
        fs::read_to_string(outside.0.join("target")).unwrap(),
        "orig"
    );
}

#[test]
fn remove_takes_the_entry_not_what_it_names() {
    let s = Scratch::new("remove");
    let outside = Scratch::new("remove-outside");
    fs::write(outside.0.join("keep"), "k").unwrap();
    symlink(&outside.0, s.0.join("link")).unwrap();
    fs::create_dir_all(s.0.join("tree/a/b")).unwrap();
    fs::write(s.0.join("tree/a/b/f"), "x").unwrap();
    symlink(&outside.0, s.0.join("tree/a/inner-link")).unwrap();
    mkfifo(&s.0.join("tree/fifo"));
    let d = Dir::open(&s.0).unwrap();
    assert!(d.remove("link").unwrap());
    assert!(d.remove("tree").unwrap());
    assert!(!d.remove("tree").unwrap());
    assert!(fs::symlink_metadata(s.0.join("tree")).is_err());
    assert_eq!(fs::read_to_string(outside.0.join("keep")).unwrap(), "k");
}

#[test]
fn remove_tree_of_any_depth() {
    let s = Scratch::new("deep");
    // 3000 levels: deeper than PATH_MAX allows to name by path.
    let mut cur = Dir::open(&s.0).unwrap();
    for _ in 0..3000 {
        cur = cur.ensure_dir("a", 0o755).unwrap();
        cur.write_replace("f", b"", 0o644).unwrap();
    }
    drop(cur);
    let d = Dir::open(&s.0).unwrap();
    d.remove_tree("a").unwrap();
    assert!(fs::symlink_metadata(s.0.join("a")).is_err());
}

#[test]
fn directories_below_are_created_and_opened_without_links() {
    let s = Scratch::new("mk");
    let outside = Scratch::new("mk-outside");
    symlink(&outside.0, s.0.join("evil")).unwrap();
    for dir in both(&s.0) {
        let e = dir.ensure_dir("evil", 0o755).unwrap_err();
        assert_eq!(planted(&e), Some((Kind::Symlink, Kind::Dir)), "{e}");
        let e = dir.create_dir("evil/x", 0o755).unwrap_err();
        assert_eq!(planted(&e), Some((Kind::Symlink, Kind::Dir)), "{e}");
        let e = dir.write_replace("evil/x", b"", 0o644).unwrap_err();
        assert_eq!(e.blame(), Blame::Agent, "{e}");
    }
    assert_eq!(fs::read_dir(&outside.0).unwrap().count(), 0);
    let d = Dir::open(&s.0).unwrap();
    let sub = d.ensure_dir("real", 0o755).unwrap();
    sub.write_replace("f", b"1", 0o644).unwrap();
    assert_eq!(d.read_capped("real/f", 10).unwrap().bytes, b"1");
    assert!(d.entry("real/missing").unwrap().is_none());
    assert!(d.entry("nothing/here").unwrap().is_none());
    assert_eq!(Kind::of(&d.entry("evil").unwrap().unwrap()), Kind::Symlink);
    // `..` and absolute paths never resolve.
    assert!(d.read_capped("../x", 1).is_err());
    assert!(d.read_capped("/etc/passwd", 1).is_err());
}

#[test]
fn blame_follows_who_writes_the_folder() {
    let e = io::Error::from_raw_os_error(libc::EACCES);
    assert_eq!(blame_for(true, &e), Blame::Agent);
    assert_eq!(blame_for(false, &e), Blame::Host);
    let e = io::Error::from_raw_os_error(libc::ENOSPC);
    assert_eq!(blame_for(true, &e), Blame::Host);
}
