//! `kind = "busybox"`: a root filesystem of the host's static busybox and
//! its applets, built here entry by entry in sorted order with a fixed
//! mtime and owner, so the same binary and epoch always give the same
//! digest.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use super::{BootstrapError, BusyboxSpec};

/// One entry of the busybox rootfs.
enum Node {
    Dir { mode: u32, owner: u64 },
    File { mode: u32, data: Vec<u8> },
    Symlink { target: String },
}

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
user:x:1000:1000:user:/home/user:/bin/sh\n\
nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n";
const HOSTS: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// The applets `busybox` provides, as paths relative to `/`
/// (`bin/sh`, `usr/bin/env`, ...). `--list-full` gives each its usual
/// directory; a busybox without it gets them all in `bin/`.
fn busybox_applets(binary: &Path) -> Result<Vec<String>, BootstrapError> {
    let run = |arg: &str| {
        Command::new(binary)
            .arg(arg)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
    };
    let bb_err = |msg: String| BootstrapError::Busybox {
        path: binary.to_path_buf(),
        msg,
    };
    let full = run("--list-full").map_err(|e| bb_err(format!("cannot run: {e}")))?;
    let (out, full) = if full.status.success() && !full.stdout.is_empty() {
        (full.stdout, true)
    } else {
        let l = run("--list").map_err(|e| bb_err(format!("cannot run: {e}")))?;
        if !l.status.success() {
            return Err(bb_err(format!("`--list` failed ({})", l.status)));
        }
        (l.stdout, false)
    };
    let text = String::from_utf8(out).map_err(|_| bb_err("`--list` is not UTF-8".to_owned()))?;
    let mut applets = BTreeSet::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (dir, name) = match line.rsplit_once('/') {
            Some((d, n)) if full => (d, n),
            _ => ("bin", line),
        };
        let dir = if ["bin", "sbin", "usr/bin", "usr/sbin"].contains(&dir) {
            dir
        } else {
            // `linuxrc` and the like: nothing a sandbox needs.
            continue;
        };
        let bad = name.is_empty()
            || name == "."
            || name == ".."
            || name.contains('/')
            || name
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control());
        if bad || (dir == "bin" && name == "busybox") {
            continue;
        }
        applets.insert(format!("{dir}/{name}"));
    }
    if !applets.contains("bin/sh") {
        return Err(bb_err("provides no `sh` applet".to_owned()));
    }
    Ok(applets.into_iter().collect())
}

/// Refuses a busybox that needs a dynamic loader: the image has no libc.
fn check_static(binary: &Path, data: &[u8]) -> Result<(), BootstrapError> {
    let err = |msg: &str| BootstrapError::Busybox {
        path: binary.to_path_buf(),
        msg: msg.to_owned(),
    };
    if data.len() < 64 || &data[..4] != b"\x7fELF" {
        return Err(err("not an ELF executable"));
    }
    if elf_has_interp(data) {
        return Err(err(
            "is dynamically linked; the image needs a static one (`apt-get install busybox-static`)",
        ));
    }
    Ok(())
}

/// Whether an ELF file has a PT_INTERP program header (needs ld.so).
pub(super) fn elf_has_interp(d: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let is64 = d[4] == 2;
    let le = d[5] == 1;
    let u16_at = |o: usize| -> Option<u64> {
        let b: [u8; 2] = d.get(o..o + 2)?.try_into().ok()?;
        Some(u64::from(if le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }))
    };
    let u32_at = |o: usize| -> Option<u64> {
        let b: [u8; 4] = d.get(o..o + 4)?.try_into().ok()?;
        Some(u64::from(if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }))
    };
    let u64_at = |o: usize| -> Option<u64> {
        let b: [u8; 8] = d.get(o..o + 8)?.try_into().ok()?;
        Some(if le {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    };
    let scan = || -> Option<bool> {
        let (phoff, phentsize, phnum) = if is64 {
            (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?)
        } else {
            (u32_at(0x1c)?, u16_at(0x2a)?, u16_at(0x2c)?)
        };
        for i in 0..phnum {
            let off = usize::try_from(phoff + i * phentsize).ok()?;
            if u32_at(off)? == u64::from(PT_INTERP) {
                return Some(true);
            }
        }
        Some(false)
    };
    scan().unwrap_or(false)
}

fn busybox_tree(spec: &BusyboxSpec) -> Result<BTreeMap<String, Node>, BootstrapError> {
    let data = fs::read(&spec.binary).map_err(|e| BootstrapError::Busybox {
        path: spec.binary.clone(),
        msg: format!("cannot read: {e} (install busybox-static)"),
    })?;
    check_static(&spec.binary, &data)?;
    let applets = busybox_applets(&spec.binary)?;

    let dir = |mode| Node::Dir { mode, owner: 0 };
    let file = |mode, text: &str| Node::File {
        mode,
        data: text.as_bytes().to_vec(),
    };
    let mut t = BTreeMap::new();
    for d in [
        "bin", "dev", "etc", "home", "proc", "sbin", "sys", "usr", "usr/bin", "usr/sbin", "var",
    ] {
        t.insert(d.to_owned(), dir(0o755));
    }
    t.insert("root".to_owned(), dir(0o700));
    t.insert("tmp".to_owned(), dir(0o1777));
    t.insert("var/tmp".to_owned(), dir(0o1777));
    t.insert(
        "home/user".to_owned(),
        Node::Dir {
            mode: 0o755,
            owner: 1000,
        },
    );
    t.insert("etc/passwd".to_owned(), file(0o644, PASSWD));
    t.insert("etc/group".to_owned(), file(0o644, GROUP));
    t.insert("etc/hosts".to_owned(), file(0o644, HOSTS));
    t.insert("etc/hostname".to_owned(), file(0o644, "localhost\n"));
    t.insert("bin/busybox".to_owned(), Node::File { mode: 0o755, data });
    for a in applets {
        let depth = a.matches('/').count();
        let target = format!("{}bin/busybox", "../".repeat(depth));
        let target = if depth == 1 && a.starts_with("bin/") {
            "busybox".to_owned()
        } else {
            target
        };
        t.entry(a).or_insert(Node::Symlink { target });
    }
    Ok(t)
}

/// Writes the busybox rootfs as a tar: entries in sorted path order, every
/// mtime `epoch`, owner 0:0 (1000:1000 for `/home/user`), no user or group
/// names, no other metadata from the host.
pub(super) fn write_busybox_tar(
    spec: &BusyboxSpec,
    epoch: u64,
    out: &mut impl Write,
) -> Result<(), BootstrapError> {
    let tree = busybox_tree(spec)?;
    let mut b = tar::Builder::new(out);
    let werr = |e: io::Error| BootstrapError::Io {
        what: "write layer for",
        path: spec.binary.clone(),
        source: e,
    };
    for (path, node) in &tree {
        let mut h = tar::Header::new_ustar();
        h.set_mtime(epoch);
        h.set_uid(0);
        h.set_gid(0);
        match node {
            Node::Dir { mode, owner } => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                h.set_uid(*owner);
                h.set_gid(*owner);
                h.set_size(0);
                b.append_data(&mut h, format!("{path}/"), io::empty())
                    .map_err(werr)?;
            }
            Node::File { mode, data } => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, path, data.as_slice()).map_err(werr)?;
            }
            Node::Symlink { target } => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                b.append_link(&mut h, path, target).map_err(werr)?;
            }
        }
    }
    b.into_inner().map_err(werr)?;
    Ok(())
}
