//! Go imports: `import "x"`, `import name "x"` and import blocks
//! `import ( a "x"; _ "y" )`. A ban matches a path exactly or as a prefix
//! ending at a `/`.

use super::clike::{self, Dialect};
use super::lex::{punct_at, Tok, Token};
use super::Hit;

pub(crate) fn scan(text: &str, bans: &[String]) -> Vec<Hit> {
    let bans: Vec<(&str, &str)> = bans
        .iter()
        .map(|b| b.trim())
        .map(|b| (b.trim_end_matches('/'), b))
        .filter(|(b, _)| !b.is_empty())
        .collect();
    if bans.is_empty() {
        return Vec::new();
    }
    let toks = clike::lex(text, Dialect::Go);
    let mut paths = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if !toks[i].is_ident("import") {
            i += 1;
            continue;
        }
        i += 1;
        if punct_at(&toks, i, b'(') {
            i += 1;
            while let Some(t) = toks.get(i) {
                if t.is_punct(b')') {
                    break;
                }
                if let Some(p) = t.plain_str() {
                    paths.push((p.to_string(), t.line));
                } else if !(t.ident().is_some() || t.is_punct(b'.') || t.is_punct(b';')) {
                    break; // not an import spec: malformed, stop reading it
                }
                i += 1;
            }
        } else if let Some((p, line)) = single_spec(&toks, i) {
            paths.push((p, line));
        }
    }
    let mut hits = Vec::new();
    for (path, line) in paths {
        for (ban, written) in &bans {
            if path_matches(&path, ban) {
                hits.push((line, path.clone(), written.to_string()));
            }
        }
    }
    hits
}

/// `"x"`, `name "x"`, `_ "x"` or `. "x"` at `toks[i]`.
fn single_spec(toks: &[Token], i: usize) -> Option<(String, usize)> {
    let t = toks.get(i)?;
    let t = match &t.tok {
        Tok::Ident(_) | Tok::Punct(b'.') => toks.get(i + 1)?,
        _ => t,
    };
    t.plain_str().map(|p| (p.to_string(), t.line))
}

fn path_matches(path: &str, ban: &str) -> bool {
    path.trim()
        .strip_prefix(ban)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(src: &str, list: &[&str]) -> Vec<(usize, String, String)> {
        let bans: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        let mut h = scan(src, &bans);
        h.sort();
        h
    }

    fn h(line: usize, import: &str, banned: &str) -> (usize, String, String) {
        (line, import.to_string(), banned.to_string())
    }

    const BANS: &[&str] = &[
        "github.com/Masterminds/semver",
        "golang.org/x/mod",
        "os/exec",
    ];

    #[test]
    fn single_and_block_imports() {
        let src = r#"package main

import "github.com/Masterminds/semver"
import sv "github.com/Masterminds/semver/v3"
import (
	"fmt"
	m "golang.org/x/mod/semver"
	_ "os/exec"
	. "strings"
)
import `os/exec`
"#;
        assert_eq!(
            hits(src, BANS),
            [
                h(
                    3,
                    "github.com/Masterminds/semver",
                    "github.com/Masterminds/semver"
                ),
                h(
                    4,
                    "github.com/Masterminds/semver/v3",
                    "github.com/Masterminds/semver"
                ),
                h(7, "golang.org/x/mod/semver", "golang.org/x/mod"),
                h(8, "os/exec", "os/exec"),
                h(11, "os/exec", "os/exec"),
            ]
        );
    }

    #[test]
    fn prefix_must_end_at_a_slash() {
        let src = "import (\"github.com/Masterminds/semverx\"; \"golang.org/x/modfile\"; \"os\")";
        assert!(hits(src, BANS).is_empty());
        assert!(hits("import \"os\"", &["os/exec"]).is_empty());
        assert_eq!(hits("import \"os/exec\"", &["os"]), [h(1, "os/exec", "os")]);
    }

    #[test]
    fn one_line_block_with_semicolons() {
        assert_eq!(
            hits("import ( a \"fmt\"; _ \"os/exec\" )", BANS),
            [h(1, "os/exec", "os/exec")]
        );
    }

    #[test]
    fn comments_and_strings_are_ignored() {
        let src = r#"package main
// import "os/exec"
/* import (
	"os/exec"
) */
var s = "import \"os/exec\""
var r = `import "os/exec"`
func f() { exec := "os/exec"; _ = exec }
"#;
        assert!(hits(src, BANS).is_empty());
    }
}
