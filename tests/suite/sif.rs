//! `cbrun image import FILE.sif`: the test makes a SIF file itself (a
//! busybox root filesystem through `mksquashfs`, and a SIF header and
//! descriptor table written here from the public layout), imports it as
//! root and as nobody, and runs a sandbox on it; hostile SIF files (data
//! past the end, overlapping objects, a huge descriptor count, no
//! squashfs partition) get a one-line error and leave no image.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

const DEADLINE: Duration = Duration::from_secs(120);
const DESCR: usize = 585;
const DESCR_AT: usize = 4096;
const SLOTS: usize = 4;

fn tools_ready() -> bool {
    let have = ["mksquashfs", "unsquashfs"].iter().all(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    }) && Path::new("/bin/busybox").exists();
    if !have {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true but squashfs-tools or busybox-static are missing"
        );
        eprintln!("skipped: squashfs-tools or busybox-static missing");
    }
    have
}

/// One descriptor: (type, offset, length, fs type, partition type).
type D = (i32, u64, u64, i32, i32);

/// A SIF file: header, descriptor table at 4096, then `data`.
fn sif(total: i64, descrs: &[D], data: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; DESCR_AT];
    f[..31].copy_from_slice(b"#!/usr/bin/env run-singularity\n");
    f[32..42].copy_from_slice(b"SIF_MAGIC\0");
    f[42..44].copy_from_slice(b"01");
    f[45..47].copy_from_slice(b"02");
    f[64..72].copy_from_slice(&(SLOTS as i64 - descrs.len() as i64).to_le_bytes());
    f[72..80].copy_from_slice(&total.to_le_bytes());
    f[80..88].copy_from_slice(&(DESCR_AT as i64).to_le_bytes());
    f[88..96].copy_from_slice(&((descrs.len() * DESCR) as i64).to_le_bytes());
    let data_at = DESCR_AT + SLOTS * DESCR;
    f[96..104].copy_from_slice(&(data_at as i64).to_le_bytes());
    f[104..112].copy_from_slice(&(data.len() as i64).to_le_bytes());
    for (i, (kind, off, len, fs, part)) in descrs.iter().enumerate() {
        let mut d = vec![0u8; DESCR];
        d[0..4].copy_from_slice(&kind.to_le_bytes());
        d[4] = 1;
        d[5..9].copy_from_slice(&(i as u32 + 1).to_le_bytes());
        d[17..25].copy_from_slice(&off.to_le_bytes());
        d[25..33].copy_from_slice(&len.to_le_bytes());
        d[33..41].copy_from_slice(&len.to_le_bytes());
        d[73..73 + 6].copy_from_slice(b"rootfs");
        d[201..205].copy_from_slice(&fs.to_le_bytes());
        d[205..209].copy_from_slice(&part.to_le_bytes());
        d[209..211].copy_from_slice(b"02");
        f.extend_from_slice(&d);
    }
    f.resize(data_at, 0);
    f.extend_from_slice(data);
    f
}

/// A busybox root filesystem squashed.
fn squashfs(ctx: &Ctx) -> Vec<u8> {
    let root = ctx.dir.join("bb-root");
    fs::create_dir_all(root.join("bin")).unwrap();
    fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    for a in ["sh", "cat", "ls", "id"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(a)).unwrap();
    }
    fs::write(root.join("hello"), "from a SIF image\n").unwrap();
    let sq = ctx.dir.join("root.squashfs");
    let st = Command::new("mksquashfs")
        .arg(&root)
        .arg(&sq)
        .args(["-noappend", "-quiet", "-no-progress", "-all-root"])
        .status()
        .unwrap();
    assert!(st.success());
    fs::read(&sq).unwrap()
}

fn write(ctx: &Ctx, name: &str, bytes: &[u8]) -> PathBuf {
    let p = ctx.dir.join(name);
    fs::write(&p, bytes).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p
}

fn store_home(ctx: &Ctx) -> PathBuf {
    let p = ctx.dir.join("store");
    fs::create_dir(&p).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&p, Some(ctx.who.uid()), Some(ctx.who.uid())).unwrap();
    p
}

fn cb(ctx: &Ctx, home: &Path, args: &[&str]) -> Run {
    let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    ctx.spawn_args(&a, &[("CBRUN_HOME", home.to_str().unwrap())], None)
        .wait(DEADLINE)
}

#[test]
fn a_sif_file_round_trips_into_a_sandbox_as_root_and_as_nobody() {
    if !tools_ready() {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "sif");
        let home = store_home(&ctx);
        let sq = squashfs(&ctx);
        let data_at = (DESCR_AT + SLOTS * DESCR) as u64;
        let deffile = b"Bootstrap: scratch\n".to_vec();
        let mut data = deffile.clone();
        data.extend_from_slice(&sq);
        let file = write(
            &ctx,
            "image.sif",
            &sif(
                SLOTS as i64,
                &[
                    (0x4001, data_at, deffile.len() as u64, 0, 0),
                    (
                        0x4004,
                        data_at + deffile.len() as u64,
                        sq.len() as u64,
                        1,
                        2,
                    ),
                ],
                &data,
            ),
        );
        let f = file.to_str().unwrap();
        let imp = cb(&ctx, &home, &["image", "import", f, "--tag", "sif-test:1"]);
        imp.assert_code(0, "import of a SIF file");
        let ls = cb(&ctx, &home, &["image", "ls"]);
        assert!(ls.stdout.contains("sif-test"), "{}", ls.show());
        let run = cb(
            &ctx,
            &home,
            &[
                "sandbox",
                "run",
                "--image",
                "sif-test:1",
                "--",
                "/bin/sh",
                "-c",
                "cat /hello; ls /bin",
            ],
        );
        run.assert_code(0, "a sandbox on the SIF image");
        assert!(run.stdout.contains("from a SIF image"), "{}", run.show());
        assert!(run.stdout.contains("busybox"), "{}", run.show());
        ctx.assert_clean("a sandbox on a SIF image");
    }
}

#[test]
fn hostile_sif_files_get_one_line_errors_and_leave_no_image() {
    if !tools_ready() {
        return;
    }
    let ctx = Ctx::new(Who::Root, "sif-bad");
    let home = store_home(&ctx);
    let data_at = (DESCR_AT + SLOTS * DESCR) as u64;
    let junk = vec![0x5au8; 4096];
    let n = junk.len() as u64;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "past-end",
            sif(4, &[(0x4004, data_at, n * 100, 1, 2)], &junk),
            "past the end of the file",
        ),
        (
            "huge",
            sif(4, &[(0x4004, data_at, u64::MAX / 2, 1, 2)], &junk),
            "past the end of the file",
        ),
        (
            "negative",
            sif(4, &[(0x4004, u64::MAX - 10, 100, 1, 2)], &junk),
            "negative offset",
        ),
        (
            "overlap",
            sif(
                4,
                &[
                    (0x4001, data_at, 1000, 0, 0),
                    (0x4004, data_at + 10, 1000, 1, 2),
                ],
                &junk,
            ),
            "overlaps descriptor 1",
        ),
        (
            "into-table",
            sif(4, &[(0x4004, DESCR_AT as u64, 1000, 1, 2)], &junk),
            "overlaps the header or the descriptor table",
        ),
        ("many", sif(1 << 40, &[], &junk), "descriptors (1 to 4096"),
        (
            "ext3",
            sif(4, &[(0x4004, data_at, n, 2, 2)], &junk),
            "not squashfs",
        ),
        (
            "no-partition",
            sif(4, &[(0x4001, data_at, n, 0, 0)], &junk),
            "no system partition",
        ),
        // Valid table, junk where the squashfs should be.
        (
            "junk-squashfs",
            sif(4, &[(0x4004, data_at, n, 1, 2)], &junk),
            "unsquashfs",
        ),
    ];
    for (name, bytes, want) in cases {
        let p = write(&ctx, &format!("{name}.sif"), &bytes);
        let r = cb(
            &ctx,
            &home,
            &["image", "import", p.to_str().unwrap(), "--tag", "bad:1"],
        );
        assert_ne!(r.code, Some(0), "{name}: {}", r.show());
        let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{name}: {}", r.show());
        assert!(
            lines[0].contains(want) && lines[0].contains(&format!("{name}.sif")),
            "{name}: {}",
            r.show()
        );
    }
    let ls = cb(&ctx, &home, &["image", "ls"]);
    assert!(!ls.stdout.contains("bad"), "{}", ls.show());
    // Nothing of the failed imports is left in the store's temp folder.
    let tmp: Vec<_> = fs::read_dir(home.join("tmp"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(tmp.is_empty(), "{tmp:?}");
}
