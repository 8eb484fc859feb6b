//! The submission protocol: `/logs/agent/submit` holding exactly
//! `CODINGBENCH_SUBMIT`, with at most one trailing newline.

use std::io::Read;

use crate::sys::dir::{Dir, DirError};

pub const SUBMIT_LINE: &str = "CODINGBENCH_SUBMIT";
/// The marker's name in `logs/agent/`.
pub const MARKER: &str = "submit";

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

/// Reads the marker in `agent_dir` (the agent's `logs/agent/`, which it
/// controls): a symlink is not followed, a FIFO not waited on, a directory
/// or a file with more than one link not taken for a submission, and no
/// more than the line and a newline is read.
pub fn check(agent_dir: &Dir) -> Submission {
    let not = |why: &str| Submission::NotSubmitted(why.to_owned());
    let (file, st) = match agent_dir.open_read(MARKER) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return not("no submit file"),
        Err(DirError::Planted { found, .. }) => {
            return Submission::NotSubmitted(format!(
                "the submit path is {found}, not a regular file"
            ))
        }
        Err(_) => return not("the submit file cannot be read"),
    };
    if agent_dir.single_link(MARKER, &st).is_err() {
        return not("the submit file is a hard link (it has more than one name)");
    }
    // Anything longer than the line and a newline is not a submission.
    let mut buf = Vec::new();
    if (&file)
        .take(SUBMIT_LINE.len() as u64 + 2)
        .read_to_end(&mut buf)
        .is_err()
    {
        return not("the submit file cannot be read");
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

/// Writes the marker (the replay agent submits from outside), replacing
/// whatever is at the name.
pub fn write_marker(agent_dir: &Dir) -> Result<(), DirError> {
    agent_dir.write_replace(MARKER, format!("{SUBMIT_LINE}\n").as_bytes(), 0o644)
}

/// Removes the marker before a fix attempt, whatever it is.
pub fn remove_marker(agent_dir: &Dir) -> Result<(), DirError> {
    agent_dir.remove(MARKER).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    /// One directory per call: tests run in parallel.
    fn scratch() -> PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cbrun-submit-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn with(content: Option<&[u8]>) -> Submission {
        let dir = scratch();
        if let Some(c) = content {
            fs::write(dir.join("submit"), c).unwrap();
        }
        let s = check(&Dir::open(&dir).unwrap().sandbox_writable());
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
    fn links_fifos_directories_and_hard_links_are_not_submissions() {
        let dir = scratch();
        let d = Dir::open(&dir).unwrap().sandbox_writable();
        fs::write(dir.join("real"), "CODINGBENCH_SUBMIT\n").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("submit")).unwrap();
        assert_eq!(
            check(&d),
            Submission::NotSubmitted(
                "the submit path is a symbolic link, not a regular file".into()
            )
        );
        fs::remove_file(dir.join("submit")).unwrap();
        fs::hard_link(dir.join("real"), dir.join("submit")).unwrap();
        assert!(!check(&d).is_submitted());
        fs::remove_file(dir.join("submit")).unwrap();
        nix::unistd::mkfifo(
            &dir.join("submit"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let t = std::time::Instant::now();
        assert_eq!(
            check(&d),
            Submission::NotSubmitted("the submit path is a FIFO, not a regular file".into())
        );
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        // The marker is replaced and removed whatever it was.
        write_marker(&d).unwrap();
        assert!(check(&d).is_submitted());
        remove_marker(&d).unwrap();
        fs::create_dir_all(dir.join("submit/inner")).unwrap();
        assert!(!check(&d).is_submitted());
        assert!(write_marker(&d).is_err());
        remove_marker(&d).unwrap();
        assert_eq!(check(&d), Submission::NotSubmitted("no submit file".into()));
        fs::remove_dir_all(&dir).unwrap();
    }
}
