//! Small file-system helpers shared by the CLI and the trial runner, and
//! the quoting every message uses for names an agent chose.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sys::dir::Dir;

pub use crate::sys::at::{read_dir_names, readlink_at};

/// Write `bytes` to `path` atomically: a temp file created exclusively in
/// the same directory (never through a link), synced, then renamed over
/// the target. A reader sees the old file or the new one, never half of
/// one. `path`'s directory is the caller's choice; below a folder a
/// sandbox writes use [`Dir::write_replace`] on a `Dir` of it instead.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    Dir::open(dir)
        .and_then(|d| d.write_replace(name, bytes, 0o644))
        .map_err(io::Error::other)
}

/// [`write_atomic`] of pretty JSON with a trailing newline.
pub fn write_json_atomic<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> io::Result<()> {
    write_atomic(path, &json_bytes(value)?)
}

/// Pretty JSON with a trailing newline.
pub fn json_bytes<T: serde::Serialize + ?Sized>(value: &T) -> io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Whether the directory at `path` has no entries but `.` and `..`.
/// Reads a few entries at most, where a full listing (`read_dir`) has the
/// kernel walk the whole directory into a 32 KiB buffer.
pub fn dir_is_empty(path: &Path) -> io::Result<bool> {
    let dir = File::open(path)?;
    crate::sys::at::dir_fd_is_empty(dir.as_fd())
}

/// `bytes` (a name or text an agent chose) as one line that cannot fake
/// structure: newlines, tabs and other control characters, backslashes,
/// backticks (Markdown fences), bidirectional and invisible format
/// characters and invalid UTF-8 are written as `\n`, `\x60`, `\u{202e}`,
/// `\xff` and so on; everything else is kept as it is, so ordinary names
/// read as they are.
pub fn quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_char(&mut out, c);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// [`quote_bytes`] of a path.
pub fn quote_path(p: &Path) -> String {
    quote_bytes(p.as_os_str().as_bytes())
}

/// [`quote_bytes`] of text.
pub fn quote_text(s: &str) -> String {
    quote_bytes(s.as_bytes())
}

/// Text (already made of quoted names) with any control or invisible
/// character still in it written as `\u{..}`: a last line of defence for
/// text that must stay one line. Backslashes and backticks are left alone.
pub fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || invisible(c) {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn push_char(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '`' => out.push_str("\\x60"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            out.push_str(&format!("\\x{:02x}", c as u32));
        }
        c if invisible(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
        c => out.push(c),
    }
}

/// C1 controls, line and paragraph separators, bidirectional controls and
/// zero-width characters: they reorder, hide or break lines in a viewer.
fn invisible(c: char) -> bool {
    matches!(c as u32,
        0x80..=0x9f
        | 0x061c
        | 0x200b..=0x200f
        | 0x2028..=0x202e
        | 0x2060..=0x2069
        | 0xfeff)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs;

    #[test]
    fn quoting_keeps_names_on_one_line() {
        assert_eq!(quote_text("src/app/core.py"), "src/app/core.py");
        assert_eq!(quote_text("caf\u{e9}.py"), "caf\u{e9}.py");
        assert_eq!(
            quote_text("a\nb\r\tc```d\\e"),
            "a\\nb\\r\\tc\\x60\\x60\\x60d\\\\e"
        );
        assert_eq!(quote_text("\u{1b}[31m"), "\\x1b[31m");
        assert_eq!(quote_text("x\u{202e}y\u{2028}"), "x\\u{202e}y\\u{2028}");
        assert_eq!(quote_bytes(b"bad\xff.py"), "bad\\xff.py");
        for s in ["\n", "`", "\u{85}", "\u{2029}"] {
            let q = quote_text(&format!("x{s}y"));
            assert!(!q.contains(s), "{q:?}");
            assert!(!q.chars().any(char::is_control), "{q:?}");
        }
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("cbrun-fsutil-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.json");
        write_json_atomic(&p, &serde_json::json!({"a": 1})).unwrap();
        write_json_atomic(&p, &serde_json::json!({"a": 2})).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        assert_eq!(v["a"], 2);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dir_is_empty_sees_one_entry_among_many() {
        let d = std::env::temp_dir().join(format!("cbrun-empty-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir(&d).unwrap();
        assert!(dir_is_empty(&d).unwrap());
        fs::create_dir(d.join("sub")).unwrap();
        assert!(!dir_is_empty(&d).unwrap());
        fs::remove_dir(d.join("sub")).unwrap();
        assert!(dir_is_empty(&d).unwrap());
        // Many long names: the first small read holds no `.`-only batch.
        for i in 0..300 {
            fs::write(d.join(format!("{i:0>200}")), b"").unwrap();
        }
        assert!(!dir_is_empty(&d).unwrap());
        assert!(dir_is_empty(&d.join("missing")).is_err());
        fs::remove_dir_all(&d).unwrap();
    }
}
