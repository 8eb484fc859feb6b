//! Hidden test material must not reach `public/`, the folder the agent
//! reads: no canary marker, no hidden test file's name, no symlink into
//! `milestones/`.

use std::collections::BTreeSet;

use super::files::{read_capped, Entry, Root, MAX_DOC_BYTES};
use super::layout::*;
use super::problem::Sink;
use super::schema::TestManifest;

/// Names too common to mean a leak when a public document mentions them.
const GENERIC_NAMES: &[&str] = &[
    "__init__.py",
    "conftest.py",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "pytest.ini",
    "tox.ini",
    "requirements.txt",
    "package.json",
    "tsconfig.json",
    "Makefile",
    "CMakeLists.txt",
    "Cargo.toml",
    "README.md",
    "README",
    ".gitignore",
];

/// Hidden test material must not reach `public/`: no canary marker, no
/// hidden test file name, no symlink into the hidden tests.
pub(crate) fn leak_guard(root: &Root, s: &mut Sink, tm: Option<&TestManifest>) {
    let mut names = BTreeSet::new();
    let declared = tm.map(|tm| tm.test_files.iter().chain(&tm.support_files));
    let mut dirs = vec![TESTS_DIR.to_string()];
    for f in declared.into_iter().flatten() {
        // A support "file" may be a directory (`tests/fixtures`): its
        // files' names count, not its own.
        let rel = format!("{FINAL_DIR}/{f}");
        match root.resolve(&rel) {
            Entry::Dir(_) => dirs.push(rel),
            _ => {
                names.insert(basename(f.as_str()).to_string());
            }
        }
    }
    for dir in dirs {
        for (rel, e) in root.walk(&dir) {
            if matches!(e, Entry::File(_)) {
                names.insert(basename(&rel).to_string());
            }
        }
    }
    names.retain(|n| n.len() >= 4 && !GENERIC_NAMES.contains(&n.as_str()));

    let hidden = root.canon.join("milestones");
    for (rel, e) in root.walk(PUBLIC_DIR) {
        let path = match e {
            Entry::File(p) => p,
            Entry::Outside(_) => {
                s.error(&rel, "", &e.defect(false).unwrap_or_default());
                continue;
            }
            other => {
                s.warn(
                    &rel,
                    "",
                    &format!("not scanned: {}", other.defect(false).unwrap_or_default()),
                );
                continue;
            }
        };
        if path.starts_with(&hidden) {
            s.error(&rel, "", "symlink into milestones/ (hidden tests)");
            continue;
        }
        if names.contains(basename(&rel)) {
            s.error(&rel, "", "has the name of a hidden test file");
        }
        let bytes = match read_capped(&path, MAX_DOC_BYTES) {
            Ok(b) => b,
            Err(e) => {
                s.error(&rel, "", &format!("cannot scan for leaks: {e}"));
                continue;
            }
        };
        if let Some(token) = canary(&bytes) {
            s.error(
                &rel,
                "",
                &format!("contains the hidden-test canary {token}"),
            );
        }
        for n in &names {
            if contains(&bytes, n.as_bytes()) {
                s.error(&rel, "", &format!("mentions hidden test file {n}"));
            }
        }
    }
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The first canary token (`CBRUN-CANARY...`) in `bytes`.
fn canary(bytes: &[u8]) -> Option<String> {
    let m = CANARY.as_bytes();
    let at = bytes.windows(m.len()).position(|w| w == m)?;
    let token: String = bytes[at..]
        .iter()
        .take(80)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        .map(|&b| b as char)
        .collect();
    Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_token() {
        assert_eq!(
            canary(b"x # CBRUN-CANARY-case003-7f3a9c\n").as_deref(),
            Some("CBRUN-CANARY-case003-7f3a9c")
        );
        assert_eq!(canary(b"nothing"), None);
        assert!(contains(b"see test_a.py", b"test_a.py"));
        assert!(!contains(b"", b"x"));
    }
}
