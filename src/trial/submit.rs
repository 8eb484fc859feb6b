//! The submission protocol: `/logs/agent/submit` holding exactly
//! `CODINGBENCH_SUBMIT`, with at most one trailing newline.

use std::fs;
use std::io::Read;
use std::path::Path;

pub const SUBMIT_LINE: &str = "CODINGBENCH_SUBMIT";

/// What the marker file says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", content = "detail", rename_all = "snake_case")]
pub enum Submission {
    Submitted,
    /// No marker, or one with other content (the reason says which).
    NotSubmitted(String),
}

impl Submission {
    pub fn is_submitted(&self) -> bool {
        matches!(self, Submission::Submitted)
    }
}

/// Reads the marker without following a symlink (the agent controls it).
pub fn check(marker: &Path) -> Submission {
    let meta = match fs::symlink_metadata(marker) {
        Ok(m) => m,
        Err(_) => return Submission::NotSubmitted("no submit file".into()),
    };
    if !meta.file_type().is_file() {
        return Submission::NotSubmitted("the submit path is not a regular file".into());
    }
    // Anything longer than the line and a newline is not a submission.
    let mut buf = Vec::new();
    let read = fs::File::open(marker)
        .and_then(|f| f.take(SUBMIT_LINE.len() as u64 + 2).read_to_end(&mut buf));
    if read.is_err() {
        return Submission::NotSubmitted("the submit file cannot be read".into());
    }
    let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
    if body == SUBMIT_LINE.as_bytes() {
        Submission::Submitted
    } else {
        Submission::NotSubmitted(format!(
            "the submit file does not hold exactly {SUBMIT_LINE}"
        ))
    }
}

/// Writes the marker (the replay agent submits from outside).
pub fn write_marker(marker: &Path) -> std::io::Result<()> {
    fs::write(marker, format!("{SUBMIT_LINE}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(content: Option<&[u8]>) -> Submission {
        // One directory per call: tests run in parallel, and contents of
        // the same length once shared a directory and removed it under
        // each other.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cbrun-submit-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("submit");
        if let Some(c) = content {
            fs::write(&p, c).unwrap();
        }
        let s = check(&p);
        fs::remove_dir_all(&dir).unwrap();
        s
    }

    #[test]
    fn exact_line_with_or_without_one_newline() {
        assert!(with(Some(b"CODINGBENCH_SUBMIT")).is_submitted());
        assert!(with(Some(b"CODINGBENCH_SUBMIT\n")).is_submitted());
    }

    #[test]
    fn anything_else_is_not_a_submission() {
        assert!(!with(None).is_submitted());
        assert!(!with(Some(b"")).is_submitted());
        assert!(!with(Some(b"CODINGBENCH_SUBMIT\n\n")).is_submitted());
        assert!(!with(Some(b" CODINGBENCH_SUBMIT")).is_submitted());
        assert!(!with(Some(b"codingbench_submit")).is_submitted());
        assert!(!with(Some(b"CODINGBENCH_SUBMIT\r\n")).is_submitted());
        assert!(!with(Some(b"CODINGBENCH_SUBMIT_NOW_PLEASE")).is_submitted());
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("cbrun-submit-link-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("real"), "CODINGBENCH_SUBMIT\n").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("submit")).unwrap();
        assert!(!check(&dir.join("submit")).is_submitted());
        fs::remove_dir_all(&dir).unwrap();
    }
}
