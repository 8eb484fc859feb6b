//! Apptainer/Singularity images (SIF): the global header, the descriptor
//! table and the primary system partition, a squashfs, which
//! `unsquashfs` (squashfs-tools) unpacks into a temporary directory of the
//! store; that directory is then imported as a root filesystem (one
//! layer, a generated config).
//!
//! The layout (little-endian, no padding): a 128-byte header (a 32-byte
//! launch line, `SIF_MAGIC\0`, version, arch, a 16-byte id, then eight
//! int64: ctime, mtime, free and total descriptors, descriptor offset and
//! length, data offset and length), and `total` descriptors of 585 bytes
//! (int32 type, bool used, uint32 id/group/link, int64 offset, length,
//! stored length, ctime, mtime, uid, gid, a 128-byte name, 384 bytes of
//! type-specific data; a partition's start with int32 fs type, int32
//! partition type, 3-byte arch).
//!
//! A hostile file gets a one-line error: every offset and length is
//! checked against the file's size (with overflow checks), the descriptor
//! table is capped, and used data objects must not overlap. unsquashfs
//! runs with `-no-xattrs` (no file capabilities) into a 0700 directory;
//! device nodes and setuid bits it creates there are dropped when the
//! image is unpacked, as for any layer.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::{ImportError, ImportReport, Importer};
use crate::image::platform::Platform;
use crate::image::store::remove_tree;

pub const MAGIC: &[u8] = b"SIF_MAGIC\0";
const MAGIC_AT: usize = 32;
pub const HEADER_LEN: usize = 128;
pub const DESCRIPTOR_LEN: usize = 585;
/// Most descriptors read (sif's default table has 48).
const MAX_DESCRIPTORS: i64 = 4096;
pub const DATA_PARTITION: i32 = 0x4004;
pub const FS_SQUASH: i32 = 1;
const FS_ENCRYPTED_SQUASH: i32 = 5;
pub const PART_SYSTEM: i32 = 1;
pub const PART_PRIMARY: i32 = 2;

/// Whether `head` (the file's first bytes) is a SIF header.
pub fn is_sif(head: &[u8]) -> bool {
    head.len() >= MAGIC_AT + MAGIC.len() && &head[MAGIC_AT..MAGIC_AT + MAGIC.len()] == MAGIC
}

/// The partition to unpack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub offset: u64,
    pub len: u64,
    /// `02` (amd64), `04` (arm64), ...
    pub arch: String,
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A range `[off, off+len)` inside a file of `size` bytes, or why not.
fn range(what: &str, off: i64, len: i64, size: u64) -> Result<(u64, u64), String> {
    if off < 0 || len < 0 {
        return Err(format!("{what}: negative offset {off} or length {len}"));
    }
    let end = (off as u64)
        .checked_add(len as u64)
        .ok_or_else(|| format!("{what}: offset {off} + length {len} overflows"))?;
    if end > size {
        return Err(format!(
            "{what}: bytes {off}..{end} lie past the end of the file ({size} bytes)"
        ));
    }
    Ok((off as u64, end))
}

/// Reads the header and descriptors of `f` (`size` bytes) and finds the
/// primary system partition.
pub fn parse(f: &mut File, size: u64) -> Result<Partition, String> {
    let mut h = [0u8; HEADER_LEN];
    f.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    f.read_exact(&mut h)
        .map_err(|_| "shorter than a SIF header (128 bytes)".to_string())?;
    if !is_sif(&h) {
        return Err("no SIF_MAGIC at byte 32: not a SIF file".into());
    }
    let total = i64_at(&h, 72);
    let (descr_off, descr_len) = (i64_at(&h, 80), i64_at(&h, 88));
    if !(1..=MAX_DESCRIPTORS).contains(&total) {
        return Err(format!(
            "header: {total} descriptors (1 to {MAX_DESCRIPTORS} are read)"
        ));
    }
    let table_len = total * DESCRIPTOR_LEN as i64;
    if descr_len > table_len {
        return Err(format!(
            "header: descriptors take {descr_len} bytes, more than {total} descriptors hold"
        ));
    }
    let (start, _) = range("descriptor table", descr_off, table_len, size)?;
    if start < HEADER_LEN as u64 {
        return Err(format!("descriptor table at {start} overlaps the header"));
    }
    let mut table = vec![0u8; table_len as usize];
    f.seek(SeekFrom::Start(start)).map_err(|e| e.to_string())?;
    f.read_exact(&mut table).map_err(|e| e.to_string())?;
    let table_end = start + table_len as u64;
    let mut used: Vec<(u64, u64, usize)> = Vec::new();
    let mut best: Option<(i32, Partition)> = None;
    for (i, d) in table.chunks_exact(DESCRIPTOR_LEN).enumerate() {
        if d[4] == 0 {
            continue;
        }
        let kind = i32_at(d, 0);
        let what = format!("descriptor {}", i + 1);
        let (a, b) = range(&what, i64_at(d, 17), i64_at(d, 25), size)?;
        if a < b && a < table_end {
            return Err(format!(
                "{what}: its data ({a}..{b}) overlaps the header or the descriptor table"
            ));
        }
        if let Some((x, y, j)) = used.iter().find(|(x, y, _)| a < *y && *x < b) {
            return Err(format!(
                "{what}: its data ({a}..{b}) overlaps descriptor {}'s ({x}..{y})",
                j + 1
            ));
        }
        used.push((a, b, i));
        if kind != DATA_PARTITION {
            continue;
        }
        let extra = &d[201..];
        let (fs, part) = (i32_at(extra, 0), i32_at(extra, 4));
        let arch = String::from_utf8_lossy(&extra[8..10]).into_owned();
        let rank = match part {
            PART_PRIMARY => 2,
            PART_SYSTEM => 1,
            _ => continue,
        };
        if best.as_ref().is_some_and(|(r, _)| *r >= rank) {
            continue;
        }
        match fs {
            FS_SQUASH => {}
            FS_ENCRYPTED_SQUASH => {
                return Err(format!(
                    "{what}: an encrypted squashfs partition is not supported"
                ))
            }
            other => {
                return Err(format!(
                    "{what}: the system partition's file system is type {other}, not squashfs (1)"
                ))
            }
        }
        if b == a {
            return Err(format!("{what}: the system partition is empty"));
        }
        best = Some((
            rank,
            Partition {
                offset: a,
                len: b - a,
                arch,
            },
        ));
    }
    best.map(|(_, p)| p)
        .ok_or_else(|| "no system partition (a squashfs data object) in the descriptors".into())
}

/// SIF's arch code of `arch` (Go's names, as the platform has them).
fn sif_arch(arch: &str) -> Option<&'static str> {
    Some(match arch {
        "386" => "01",
        "amd64" => "02",
        "arm" => "03",
        "arm64" => "04",
        "ppc64" => "05",
        "ppc64le" => "06",
        "s390x" => "11",
        _ => return None,
    })
}

impl Importer<'_> {
    pub(super) fn sif(
        &mut self,
        path: &Path,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        let mut f = File::open(path).map_err(|e| self.ctx.bad(e.to_string()))?;
        let size = f.metadata().map_err(|e| self.ctx.bad(e.to_string()))?.len();
        let part = parse(&mut f, size).map_err(|e| self.ctx.bad(e))?;
        if let Some(code) = sif_arch(&wanted.architecture) {
            if part.arch != code && part.arch != "00" {
                return Err(self.ctx.bad(format!(
                    "the system partition is for SIF arch {}, not {} ({code})",
                    part.arch, wanted.architecture
                )));
            }
        }
        let work = self.store.temp_path("sif");
        let result = self.sif_unpack(&mut f, &part, &work, wanted);
        let _ = remove_tree(&work);
        result
    }

    fn sif_unpack(
        &mut self,
        f: &mut File,
        part: &Partition,
        work: &Path,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        let io_err = |e: io::Error| self.ctx.bad(format!("{}: {e}", work.display()));
        fs::create_dir(work).map_err(io_err)?;
        fs::set_permissions(work, fs::Permissions::from_mode(0o700)).map_err(io_err)?;
        let squash = work.join("partition.squashfs");
        {
            let mut out = File::create(&squash).map_err(io_err)?;
            f.seek(SeekFrom::Start(part.offset)).map_err(io_err)?;
            let n = io::copy(&mut Read::by_ref(f).take(part.len), &mut out).map_err(io_err)?;
            if n != part.len {
                return Err(self
                    .ctx
                    .bad("the system partition was cut short while read"));
            }
        }
        let root = work.join("rootfs");
        let out = Command::new("unsquashfs")
            .args(["-no-progress", "-no-xattrs", "-quiet", "-d"])
            .arg(&root)
            .arg(&squash)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                self.ctx.bad(format!(
                    "unsquashfs: {e} (install squashfs-tools to import SIF images)"
                ))
            })?;
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stderr);
            let line = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("failed");
            return Err(self
                .ctx
                .bad(format!("unsquashfs: the system partition: {line}")));
        }
        let _ = fs::remove_file(&squash);
        self.rootfs_dir(&root, wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A SIF file with the given descriptors `(type, offset, len, fs, part)`.
    pub(crate) fn sif_bytes(
        total: i64,
        descr_off: i64,
        descrs: &[(i32, i64, i64, i32, i32)],
        tail: &[u8],
    ) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN];
        h[..31].copy_from_slice(b"#!/usr/bin/env run-singularity\n");
        h[32..42].copy_from_slice(MAGIC);
        h[42..44].copy_from_slice(b"01");
        h[45..47].copy_from_slice(b"02");
        h[72..80].copy_from_slice(&total.to_le_bytes());
        h[80..88].copy_from_slice(&descr_off.to_le_bytes());
        h[88..96].copy_from_slice(&((descrs.len() * DESCRIPTOR_LEN) as i64).to_le_bytes());
        let mut file = h;
        if descr_off as usize > file.len() {
            file.resize(descr_off as usize, 0);
        }
        for (i, (kind, off, len, fs, part)) in descrs.iter().enumerate() {
            let mut d = vec![0u8; DESCRIPTOR_LEN];
            d[0..4].copy_from_slice(&kind.to_le_bytes());
            d[4] = 1;
            d[5..9].copy_from_slice(&(i as u32 + 1).to_le_bytes());
            d[17..25].copy_from_slice(&off.to_le_bytes());
            d[25..33].copy_from_slice(&len.to_le_bytes());
            d[201..205].copy_from_slice(&fs.to_le_bytes());
            d[205..209].copy_from_slice(&part.to_le_bytes());
            d[209..211].copy_from_slice(b"02");
            file.extend_from_slice(&d);
        }
        if total <= 64 {
            file.resize(
                file.len()
                    .max(descr_off as usize + total as usize * DESCRIPTOR_LEN),
                0,
            );
        }
        file.extend_from_slice(tail);
        file
    }

    fn parse_bytes(b: &[u8]) -> Result<Partition, String> {
        let p = std::env::temp_dir().join(format!("cbrun-sif-{}-{}", std::process::id(), b.len()));
        File::create(&p).unwrap().write_all(b).unwrap();
        let mut f = File::open(&p).unwrap();
        let r = parse(&mut f, b.len() as u64);
        let _ = fs::remove_file(&p);
        r
    }

    #[test]
    fn the_primary_partition_is_found_and_hostile_tables_refused() {
        let data_at = (4096 + 4 * DESCRIPTOR_LEN) as i64;
        let tail = vec![7u8; 1000];
        let ok = sif_bytes(
            4,
            4096,
            &[
                (0x4001, data_at, 100, 0, 0),
                (DATA_PARTITION, data_at + 100, 900, FS_SQUASH, PART_PRIMARY),
            ],
            &tail,
        );
        assert_eq!(
            parse_bytes(&ok),
            Ok(Partition {
                offset: data_at as u64 + 100,
                len: 900,
                arch: "02".into()
            })
        );
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                sif_bytes(
                    4,
                    4096,
                    &[(DATA_PARTITION, data_at, 2000, FS_SQUASH, PART_PRIMARY)],
                    &tail,
                ),
                "past the end",
            ),
            (
                sif_bytes(
                    4,
                    4096,
                    &[(DATA_PARTITION, data_at, i64::MAX, FS_SQUASH, PART_PRIMARY)],
                    &tail,
                ),
                "past the end of the file",
            ),
            (
                sif_bytes(
                    4,
                    4096,
                    &[(DATA_PARTITION, -5, 10, FS_SQUASH, PART_PRIMARY)],
                    &tail,
                ),
                "negative",
            ),
            (
                sif_bytes(
                    4,
                    4096,
                    &[
                        (0x4001, data_at, 500, 0, 0),
                        (DATA_PARTITION, data_at + 100, 900, FS_SQUASH, PART_PRIMARY),
                    ],
                    &tail,
                ),
                "overlaps descriptor 1",
            ),
            (
                sif_bytes(
                    4,
                    4096,
                    &[(DATA_PARTITION, 4096, 900, FS_SQUASH, PART_PRIMARY)],
                    &tail,
                ),
                "overlaps the header or the descriptor table",
            ),
            (
                sif_bytes(
                    4,
                    4096,
                    &[(DATA_PARTITION, data_at, 900, 2, PART_PRIMARY)],
                    &tail,
                ),
                "not squashfs",
            ),
            (
                sif_bytes(
                    4,
                    4096,
                    &[(DATA_PARTITION, data_at, 900, 5, PART_PRIMARY)],
                    &tail,
                ),
                "encrypted",
            ),
            (
                sif_bytes(4, 4096, &[(0x4001, data_at, 100, 0, 0)], &tail),
                "no system partition",
            ),
            (sif_bytes(1 << 40, 4096, &[], &[]), "descriptors (1 to"),
            (sif_bytes(4, 64, &[], &tail), "overlaps the header"),
        ];
        for (bytes, want) in cases {
            let e = parse_bytes(&bytes).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let mut cut = ok.clone();
        cut.truncate(100);
        assert!(parse_bytes(&cut)
            .unwrap_err()
            .contains("shorter than a SIF header"));
    }
}
