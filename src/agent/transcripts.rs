//! Finding an agent's session transcripts in its home, by the spec's
//! `transcripts` globs (`*` and `?` within a name, `**` for any depth).
//!
//! The home is the agent's: the walk goes through [`Dir`]s (no link is
//! followed anywhere), descends only where a pattern can still match,
//! lists only regular files, and is bounded in entries, depth and results.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::sys::dir::{Dir, Kind};

/// Entries looked at, over all patterns.
pub const MAX_VISITED: usize = 50_000;
/// Directories `**` descends below where it starts.
pub const MAX_STAR_DEPTH: usize = 12;
/// Files returned.
pub const MAX_FOUND: usize = 1000;
/// Entries listed per directory.
const MAX_NAMES: usize = 10_000;

/// Whether `name` matches one pattern component (`*`, `?`, literals). A
/// leading `.` is matched only by a literal `.`, as in shells.
pub fn name_matches(pat: &str, name: &str) -> bool {
    if name.starts_with('.') && !pat.starts_with('.') {
        return false;
    }
    fn go(p: &[u8], n: &[u8]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some((b'*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some((b'?', rest)) => !n.is_empty() && go(rest, &n[1..]),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    go(pat.as_bytes(), name.as_bytes())
}

struct Walk {
    visited: usize,
    found: Vec<PathBuf>,
    truncated: bool,
}

impl Walk {
    fn spend(&mut self) -> bool {
        self.visited += 1;
        if self.visited > MAX_VISITED || self.found.len() >= MAX_FOUND {
            self.truncated = true;
            return false;
        }
        true
    }
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?'])
}

fn kind_of(dir: &Dir, name: &OsStr) -> Option<Kind> {
    dir.entry(name).ok().flatten().map(|st| Kind::of(&st))
}

fn walk(dir: &Dir, rel: &Path, pat: &[&str], star_depth: usize, w: &mut Walk) {
    let Some((head, rest)) = pat.split_first() else {
        return;
    };
    if *head == "**" {
        // Zero directories...
        walk(dir, rel, rest, star_depth, w);
        // ...or one more, and `**` again.
        if star_depth >= MAX_STAR_DEPTH {
            return;
        }
        for name in names(dir) {
            if !w.spend() {
                return;
            }
            let name = OsStr::from_bytes(&name);
            if name.as_bytes().starts_with(b".") {
                continue;
            }
            if kind_of(dir, name) == Some(Kind::Dir) {
                if let Ok(sub) = dir.open_dir(name) {
                    walk(&sub, &rel.join(name), pat, star_depth + 1, w);
                }
            }
        }
        return;
    }
    let candidates: Vec<Vec<u8>> = if is_glob(head) {
        names(dir)
            .into_iter()
            .filter(|n| name_matches(head, &String::from_utf8_lossy(n)))
            .collect()
    } else {
        vec![head.as_bytes().to_vec()]
    };
    for name in candidates {
        if !w.spend() {
            return;
        }
        let name = OsStr::from_bytes(&name);
        match (kind_of(dir, name), rest.is_empty()) {
            (Some(Kind::File), true) => {
                let p = rel.join(name);
                if !w.found.contains(&p) {
                    w.found.push(p);
                }
            }
            (Some(Kind::Dir), false) => {
                if let Ok(sub) = dir.open_dir(name) {
                    walk(&sub, &rel.join(name), rest, star_depth, w);
                }
            }
            _ => {}
        }
    }
}

fn names(dir: &Dir) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = dir
        .names(MAX_NAMES)
        .map(|(n, _)| n.into_iter().map(|c| c.into_bytes()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Regular files under `home` matching any of `globs`, relative to
/// `home`, sorted; the flag says a bound cut the search short.
pub fn find(home: &Dir, globs: &[String]) -> (Vec<PathBuf>, bool) {
    let mut w = Walk {
        visited: 0,
        found: Vec::new(),
        truncated: false,
    };
    for g in globs {
        let parts: Vec<&str> = g.split('/').filter(|p| !p.is_empty()).collect();
        walk(home, Path::new(""), &parts, 0, &mut w);
    }
    w.found.sort();
    w.found.dedup();
    (w.found, w.truncated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn component_patterns() {
        assert!(name_matches("*.jsonl", "a.jsonl"));
        assert!(!name_matches("*.jsonl", "a.json"));
        assert!(name_matches("rollout-*-??.jsonl", "rollout-x-12.jsonl"));
        assert!(!name_matches("*", ".hidden"));
        assert!(name_matches(".claude", ".claude"));
        assert!(name_matches("*", ""), "an empty name never reaches here");
    }

    #[test]
    fn finds_transcripts_without_following_links() {
        let d = std::env::temp_dir().join(format!("cbrun-transcripts-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        let home = d.join("home");
        let outside = d.join("outside");
        fs::create_dir_all(home.join(".claude/projects/-app/sess/subagents")).unwrap();
        fs::create_dir_all(outside.join("-evil")).unwrap();
        fs::write(outside.join("-evil/stolen.jsonl"), "x").unwrap();
        fs::write(outside.join("secret.jsonl"), "x").unwrap();
        fs::write(home.join(".claude/projects/-app/s1.jsonl"), "{}").unwrap();
        fs::write(home.join(".claude/projects/-app/notes.txt"), "").unwrap();
        fs::write(
            home.join(".claude/projects/-app/sess/subagents/agent-1.jsonl"),
            "{}",
        )
        .unwrap();
        // Planted: a link to a folder outside, a link to a file outside,
        // a FIFO and a directory with the transcript's name.
        std::os::unix::fs::symlink(&outside, home.join(".claude/projects/link")).unwrap();
        std::os::unix::fs::symlink(
            outside.join("secret.jsonl"),
            home.join(".claude/projects/-app/l.jsonl"),
        )
        .unwrap();
        nix::unistd::mkfifo(
            &home.join(".claude/projects/-app/f.jsonl"),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        fs::create_dir(home.join(".claude/projects/-app/d.jsonl")).unwrap();
        let h = Dir::open(&home).unwrap().sandbox_writable();
        let (found, cut) = find(
            &h,
            &[
                ".claude/projects/**/*.jsonl".into(),
                ".codex/sessions/**/*.jsonl".into(),
            ],
        );
        assert!(!cut);
        let got: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            got,
            [
                ".claude/projects/-app/s1.jsonl",
                ".claude/projects/-app/sess/subagents/agent-1.jsonl"
            ]
        );
        // A link as the first component is not followed either.
        fs::remove_dir_all(home.join(".claude")).unwrap();
        std::os::unix::fs::symlink(&outside, home.join(".claude")).unwrap();
        let (found, _) = find(&h, &[".claude/**/*.jsonl".into()]);
        assert!(found.is_empty(), "{found:?}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_walk_is_bounded() {
        let d = std::env::temp_dir().join(format!("cbrun-transcripts-deep-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        let mut p = d.join("home/t");
        for i in 0..(MAX_STAR_DEPTH + 5) {
            p = p.join(format!("d{i}"));
        }
        fs::create_dir_all(&p).unwrap();
        fs::write(p.join("deep.jsonl"), "").unwrap();
        fs::write(d.join("home/t/d0/shallow.jsonl"), "").unwrap();
        let h = Dir::open(&d.join("home")).unwrap();
        let (found, _) = find(&h, &["t/**/*.jsonl".into()]);
        assert_eq!(found, [PathBuf::from("t/d0/shallow.jsonl")]);
        fs::remove_dir_all(&d).unwrap();
    }
}
