//! Rust imports: `use` declarations (`use a::b`, `use ::a`, `pub use`,
//! grouped `use {a, b::c}`), `extern crate a (as b)`, and, since Rust 2018
//! needs no `use` to reach a crate, paths in code that start at a crate
//! (`regex::Regex::new(..)`, `::serde::Serialize`).
//!
//! Crate names compare with `-` read as `_`. `crate::`, `self::`,
//! `super::` never match, nor does a path that starts at a name the file
//! binds itself where the path is (`mod x`, `use crate::x`, `extern crate y
//! as x`). A ban with `::` (`serde::de`) matches paths that start with all
//! its segments.

use std::collections::BTreeSet;

use super::clike::{self, Dialect};
use super::lex::{clip, Tok, Token, MAX_IMPORT_CHARS, MAX_NEST};
use super::{Hit, MAX_HITS_PER_FILE};

/// Roots that are never a crate.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod",
    "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
    "true", "try", "type", "union", "unsafe", "use", "where", "while", "yield",
];

/// Path segments that are themselves roots: `Self::x` is no absolute path.
const PATH_ROOTS: &[&str] = &["crate", "self", "super", "Self"];

/// Segments kept of a path; the rest is shown as `::...`. Bans are a crate
/// or a short path, and nested use groups repeat their prefix per leaf.
const MAX_SEGS: usize = 16;

/// Candidate paths kept per file before local names are known.
const MAX_CANDIDATES: usize = 100_000;

pub(crate) fn scan(text: &str, bans: &[String]) -> Vec<Hit> {
    let bans: Vec<(Vec<String>, &str)> = bans
        .iter()
        .map(|b| b.trim())
        .map(|b| (ban_segments(b), b))
        .filter(|(segs, _)| !segs.is_empty())
        .collect();
    // Only paths and bindings of these names can matter.
    let roots: BTreeSet<&str> = bans.iter().map(|(segs, _)| segs[0].as_str()).collect();
    if roots.is_empty() {
        return Vec::new();
    }
    let toks = clike::lex(text, Dialect::Rust);
    let mut scopes = Scopes::new();
    // Each candidate path with the scope it appears in.
    let mut found: Vec<(usize, UsePath)> = Vec::new();
    let mut i = 0;
    while i < toks.len() && found.len() < MAX_CANDIDATES {
        let t = &toks[i];
        let here = scopes.current;
        if t.is_ident("use") {
            let mut paths = Vec::new();
            let mut tree = UseTree {
                toks: &toks,
                roots: &roots,
                out: &mut paths,
                furthest: i,
            };
            match tree.expand(i + 1, &[], 0, false, 0) {
                Some(next) => i = next,
                None => {
                    // Malformed: keep nothing, and read on after what it
                    // read (so `use {use {use {...` is read once, not once
                    // per `use`).
                    i = tree.furthest.max(i + 1);
                    continue;
                }
            }
            for p in paths {
                // `use crate::x` or `use a::x` binds `x` to something other
                // than the crate `x`; `use x;`, `use x::{self}` and
                // `use quote::quote` (a crate's item of its own name) do
                // not hide the crate.
                if let Some(b) = p.bound.filter(|b| Some(b) != p.segs.first()) {
                    scopes.bind(b);
                }
                if roots.contains(p.segs[0]) {
                    found.push((here, p));
                }
            }
            continue;
        }
        match &t.tok {
            Tok::Punct(b'{') => scopes.open(),
            Tok::Punct(b'}') => scopes.close(),
            Tok::Ident(k) if k == "mod" => {
                if let Some(name) = toks.get(i + 1).and_then(Token::ident) {
                    scopes.bind(name);
                    if toks.get(i + 2).is_some_and(|t| t.is_punct(b'{')) {
                        // The module's body sees none of the names around it.
                        scopes.open();
                        scopes.seal();
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(k)
                if k == "extern" && toks.get(i + 1).is_some_and(|t| t.is_ident("crate")) =>
            {
                if let Some(n) = toks.get(i + 2).filter(|n| n.ident().is_some()) {
                    let name = n.ident().unwrap_or_default();
                    if toks.get(i + 3).is_some_and(|t| t.is_ident("as")) {
                        if let Some(alias) = toks.get(i + 4).and_then(Token::ident) {
                            if alias != name {
                                scopes.bind(alias);
                            }
                        }
                    }
                    if roots.contains(name) {
                        found.push((here, UsePath::new(vec![name], n.line, false)));
                    }
                    i += 3;
                    continue;
                }
            }
            _ => {
                if let Some(p) = code_path(&toks, i).filter(|p| roots.contains(p.segs[0])) {
                    found.push((here, p));
                }
            }
        }
        i += 1;
    }

    let mut hits = Vec::new();
    for (scope, p) in found {
        let root = p.segs[0];
        if PATH_ROOTS.contains(&root) || root.starts_with('$') {
            continue;
        }
        if !p.absolute && scopes.binds(scope, root) {
            // `use x::y` after `mod x`, or `x::y()` after `use crate::x`.
            continue;
        }
        for (ban, written) in &bans {
            let prefix = p.segs.len() >= ban.len() && p.segs.iter().zip(ban).all(|(s, b)| s == b);
            if prefix && hits.len() < MAX_HITS_PER_FILE {
                hits.push((p.line, p.written(), written.to_string()));
            }
        }
    }
    hits
}

/// The names a file binds itself (`mod x`, `use a::x`, `extern crate a as
/// x`), by block. A name bound in a block is seen in the blocks inside it,
/// but not inside a `mod { }` body, which starts afresh. Names are seen
/// wherever they are bound in their block, before or after the use.
///
/// Past [`MAX_NEST`] levels braces share their parent's scope, so a lookup
/// never walks far.
struct Scopes {
    /// Per scope: its parent, whether it is a module body, its names.
    list: Vec<(usize, bool, BTreeSet<String>)>,
    current: usize,
    depth: usize,
    /// Braces opened past the depth limit and not yet closed.
    overflow: usize,
}

impl Scopes {
    fn new() -> Self {
        Scopes {
            list: vec![(0, true, BTreeSet::new())],
            current: 0,
            depth: 0,
            overflow: 0,
        }
    }

    fn open(&mut self) {
        if self.depth >= MAX_NEST {
            self.overflow += 1;
            return;
        }
        self.depth += 1;
        self.list.push((self.current, false, BTreeSet::new()));
        self.current = self.list.len() - 1;
    }

    /// Marks the current scope as a module body.
    fn seal(&mut self) {
        if self.overflow == 0 {
            self.list[self.current].1 = true;
        }
    }

    fn close(&mut self) {
        if self.overflow > 0 {
            self.overflow -= 1;
        } else if self.depth > 0 {
            self.depth -= 1;
            self.current = self.list[self.current].0;
        }
    }

    fn bind(&mut self, name: &str) {
        self.list[self.current].2.insert(name.to_string());
    }

    fn binds(&self, mut scope: usize, name: &str) -> bool {
        loop {
            let (parent, module, names) = &self.list[scope];
            if names.contains(name) {
                return true;
            }
            if *module {
                return false;
            }
            scope = *parent;
        }
    }
}

/// `serde-json` -> `[serde_json]`; `::serde::de` -> `[serde, de]`.
fn ban_segments(ban: &str) -> Vec<String> {
    ban.trim_start_matches("::")
        .split("::")
        .map(|s| s.trim().replace('-', "_"))
        .filter(|s| !s.is_empty())
        .collect()
}

/// A path from a `use`, an `extern crate` or code, borrowing the tokens.
#[derive(Debug)]
struct UsePath<'a> {
    /// Never empty; without a trailing `self` (`use a::{self}` is `a`); at
    /// most [`MAX_SEGS`].
    segs: Vec<&'a str>,
    /// Segments were left off past [`MAX_SEGS`].
    cut: bool,
    line: usize,
    /// Written with a leading `::`: always a crate.
    absolute: bool,
    glob: bool,
    /// The name it brings into scope.
    bound: Option<&'a str>,
}

impl<'a> UsePath<'a> {
    fn new(segs: Vec<&'a str>, line: usize, absolute: bool) -> Self {
        UsePath {
            segs,
            cut: false,
            line,
            absolute,
            glob: false,
            bound: None,
        }
    }

    fn written(&self) -> String {
        let mut s = String::new();
        for (n, seg) in self.segs.iter().enumerate() {
            if n > 0 || self.absolute {
                s.push_str("::");
            }
            // Stop early: segments may be long, and leaves of a use group
            // repeat them.
            if s.len() > MAX_IMPORT_CHARS {
                return clip(s);
            }
            let keep = seg
                .char_indices()
                .nth(MAX_IMPORT_CHARS + 1)
                .map_or(seg.len(), |(at, _)| at);
            s.push_str(&seg[..keep]);
        }
        if self.cut {
            s.push_str("::...");
        }
        if self.glob {
            s.push_str("::*");
        }
        clip(s)
    }
}

/// Expands use trees into their paths, keeping only those whose root or
/// bound name is in `roots`, and at most [`MAX_CANDIDATES`] of them.
struct UseTree<'t, 'a> {
    toks: &'a [Token],
    roots: &'t BTreeSet<&'t str>,
    out: &'t mut Vec<UsePath<'a>>,
    /// The furthest token reached.
    furthest: usize,
}

impl<'a> UseTree<'_, 'a> {
    fn keep(&mut self, p: UsePath<'a>) {
        let wanted =
            self.roots.contains(p.segs[0]) || p.bound.is_some_and(|b| self.roots.contains(b));
        if wanted && self.out.len() < MAX_CANDIDATES {
            self.out.push(p);
        }
    }

    /// Expands the tree at `toks[i]` under `prefix`; returns the index after
    /// it, or None when it is malformed (or nested too deeply).
    fn expand(
        &mut self,
        mut i: usize,
        prefix: &[&'a str],
        prefix_line: usize,
        mut absolute: bool,
        depth: usize,
    ) -> Option<usize> {
        self.furthest = self.furthest.max(i);
        if depth > MAX_NEST {
            return None;
        }
        let toks = self.toks;
        let mut segs = prefix.to_vec();
        let mut cut = false;
        let mut line = prefix_line;
        if segs.is_empty() && toks.get(i)?.is_path_sep() {
            absolute = true;
            i += 1;
        }
        loop {
            let t = toks.get(i)?;
            match &t.tok {
                Tok::Ident(name) => {
                    if segs.is_empty() {
                        line = t.line;
                    }
                    i += 1;
                    if segs.len() >= MAX_SEGS {
                        cut = true;
                    } else if name != "self" || segs.is_empty() {
                        segs.push(name);
                    }
                    if toks.get(i).is_some_and(Token::is_path_sep) {
                        i += 1;
                        continue;
                    }
                    let mut p = UsePath::new(segs, line, absolute);
                    p.cut = cut;
                    p.bound = p.segs.last().copied();
                    if toks.get(i).is_some_and(|t| t.is_ident("as")) {
                        p.bound = toks.get(i + 1).and_then(Token::ident);
                        i += 2;
                    }
                    self.keep(p);
                    return Some(i);
                }
                Tok::Punct(b'*') if !segs.is_empty() => {
                    let mut p = UsePath::new(segs, line, absolute);
                    p.cut = cut;
                    p.glob = true;
                    self.keep(p);
                    return Some(i + 1);
                }
                Tok::Punct(b'{') => {
                    i += 1;
                    loop {
                        if toks.get(i)?.is_punct(b'}') {
                            return Some(i + 1);
                        }
                        i = self.expand(i, &segs, line, absolute, depth + 1)?;
                        if toks.get(i)?.is_punct(b',') {
                            i += 1;
                        }
                    }
                }
                _ => return None,
            }
        }
    }
}

/// A path in code that starts at `toks[i]`: `name::...` where `name` is not
/// a keyword nor a later segment of a longer path, or `::name::...`.
fn code_path(toks: &[Token], i: usize) -> Option<UsePath<'_>> {
    let prev = i.checked_sub(1).map(|p| &toks[p].tok);
    let (start, absolute) = match &toks[i].tok {
        Tok::Ident(_) => {
            let later_segment = matches!(
                prev,
                Some(Tok::PathSep { .. } | Tok::Punct(b'.' | b'$' | b'\''))
            );
            if later_segment {
                return None;
            }
            (i, false)
        }
        Tok::PathSep { spaced } => {
            let after_value = match prev {
                Some(Tok::Ident(p)) => {
                    PATH_ROOTS.contains(&p.as_str()) || !KEYWORDS.contains(&p.as_str())
                }
                // `Vec::<T>::new` or `<T as U>::f`, but not `-> ::a`,
                // `=> ::a` or `a > ::b`.
                Some(Tok::Punct(b'>')) => {
                    let arrow = i >= 2 && matches!(toks[i - 2].tok, Tok::Punct(b'-' | b'='));
                    !(*spaced || arrow)
                }
                _ => false,
            };
            if after_value {
                return None;
            }
            (i + 1, true)
        }
        _ => return None,
    };
    let first = toks.get(start)?;
    let root = first
        .ident()
        .filter(|r| !KEYWORDS.contains(r) && !r.starts_with("r#"))?;
    if !toks.get(start + 1)?.is_path_sep() {
        return None;
    }
    let mut p = UsePath::new(vec![root], first.line, absolute);
    let mut j = start + 1;
    while toks.get(j).is_some_and(Token::is_path_sep) {
        // The path goes on through names; `::<T>`, `::{` or a keyword end
        // it (a keyword also starts the next scan, so each token is read by
        // one path only).
        match toks.get(j + 1).and_then(Token::ident) {
            Some(s) if !KEYWORDS.contains(&s) => {
                if p.segs.len() < MAX_SEGS {
                    p.segs.push(s);
                } else {
                    p.cut = true;
                }
            }
            _ => break,
        }
        j += 2;
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(src: &str, list: &[&str]) -> Vec<(usize, String, String)> {
        let bans: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        let mut h = scan(src, &bans);
        h.sort();
        h.dedup();
        h
    }

    fn h(line: usize, import: &str, banned: &str) -> (usize, String, String) {
        (line, import.to_string(), banned.to_string())
    }

    const BANS: &[&str] = &["semver", "serde-json", "regex"];

    #[test]
    fn use_forms() {
        let src = "use semver::Version;\nuse ::regex;\npub use serde_json::{self, Value};\npub(crate) use semver::*;\n";
        assert_eq!(
            hits(src, BANS),
            [
                h(1, "semver::Version", "semver"),
                h(2, "::regex", "regex"),
                h(3, "serde_json", "serde-json"),
                h(3, "serde_json::Value", "serde-json"),
                h(4, "semver::*", "semver"),
            ]
        );
    }

    #[test]
    fn grouped_use_reports_each_root_on_its_line() {
        let src = "use {\n    std::fmt,\n    semver::{Version, VersionReq},\n    regex::Regex as Re,\n};\n";
        assert_eq!(
            hits(src, BANS),
            [
                h(3, "semver::Version", "semver"),
                h(3, "semver::VersionReq", "semver"),
                h(4, "regex::Regex", "regex"),
            ]
        );
    }

    #[test]
    fn extern_crate() {
        assert_eq!(
            hits(
                "extern crate semver;\nextern crate serde_json as json;\n",
                BANS
            ),
            [h(1, "semver", "semver"), h(2, "serde_json", "serde-json")]
        );
        assert!(hits(
            "extern crate self as semver;\nextern \"C\" { fn f(); }",
            BANS
        )
        .is_empty());
    }

    #[test]
    fn local_roots_never_match() {
        let src = "use crate::semver::X;\nuse self::regex;\nuse super::serde_json::Y;\nuse crate::{semver, regex::R};\n";
        assert!(hits(src, BANS).is_empty());
    }

    #[test]
    fn crate_names_must_match_whole() {
        assert!(hits(
            "use semver_parser::X;\nuse regexes;\nuse serde::Serialize;",
            BANS
        )
        .is_empty());
    }

    #[test]
    fn paths_in_code() {
        let src = "fn f() {\n    let r = regex::Regex::new(\"x\");\n    let v: ::semver::Version = Default::default();\n    let j = serde_json::json!({});\n}\n";
        assert_eq!(
            hits(src, BANS),
            [
                h(2, "regex::Regex::new", "regex"),
                h(3, "::semver::Version", "semver"),
                h(4, "serde_json::json", "serde-json"),
            ]
        );
        assert_eq!(
            hits("#[derive(serde_json::Thing)]\nstruct S;", BANS),
            [h(1, "serde_json::Thing", "serde-json")]
        );
    }

    #[test]
    fn paths_in_code_that_are_not_crates() {
        let src = r#"
mod semver;
use crate::regex;
fn f<T: Default>() {
    let a = semver::parse("1");
    let b = regex::compile();
    let c = Vec::<u8>::new();
    let d = x.regex::<u8>();
    let e = Self::semver();
    let f = <T as Default>::default();
    let g = self::regex::x();
    let h = a::regex::b();
}
"#;
        assert!(hits(src, BANS).is_empty());
    }

    #[test]
    fn absolute_paths_after_arrows_and_comparisons() {
        let src = "fn f() -> ::semver::V { if a > ::regex::X {} }\nfn g()->::semver::W {}";
        assert_eq!(
            hits(src, BANS),
            [
                h(1, "::regex::X", "regex"),
                h(1, "::semver::V", "semver"),
                h(2, "::semver::W", "semver")
            ]
        );
        assert!(hits("let v = Vec::<u8>::semver(); <T as X>::regex();", BANS).is_empty());
    }

    #[test]
    fn a_crate_item_of_the_crates_own_name() {
        assert_eq!(
            hits(
                "use quote::quote;\nfn f() { quote::format_ident!(); }",
                &["quote"]
            ),
            [
                h(1, "quote::quote", "quote"),
                h(2, "quote::format_ident", "quote")
            ]
        );
    }

    #[test]
    fn local_names_are_scoped_by_module() {
        // A decoy `mod semver` does not hide the crate from a nested module,
        // nor from its own body.
        let src = "mod semver {\n    use semver::Version;\n}\nmod inner {\n    use semver::Version;\n    fn f() { semver::parse(); }\n}\nfn top() { semver::parse(); }\n";
        assert_eq!(
            hits(src, BANS),
            [
                h(2, "semver::Version", "semver"),
                h(5, "semver::Version", "semver"),
                h(6, "semver::parse", "semver"),
            ]
        );
        // A `use` inside one function binds nothing in another.
        let src = "fn a() { use crate::x as regex; regex::f(); }\nfn b() { regex::g(); }\n";
        assert_eq!(hits(src, BANS), [h(2, "regex::g", "regex")]);
        // Blocks inside a function do see its names.
        let src = "fn a() { use crate::x as regex; { if true { regex::f(); } } }";
        assert!(hits(src, BANS).is_empty());
    }

    #[test]
    fn use_of_a_local_module_of_the_same_name() {
        assert!(hits("mod semver;\nuse semver::Version;\n", BANS).is_empty());
        // An absolute path is always a crate.
        assert_eq!(
            hits("mod semver;\nuse ::semver::Version;\n", BANS),
            [h(2, "::semver::Version", "semver")]
        );
    }

    #[test]
    fn path_bans() {
        let src = "use serde::de::Deserialize;\nuse serde::ser::Serialize;\nuse serde::{de, Serialize as S};";
        assert_eq!(
            hits(src, &["serde::de"]),
            [
                h(1, "serde::de::Deserialize", "serde::de"),
                h(3, "serde::de", "serde::de")
            ]
        );
    }

    #[test]
    fn comments_and_strings_are_ignored() {
        let src = r####"
// use semver::Version;
/* use regex; /* nested */ use semver; */
/// ```
/// use semver::Version;
/// ```
const S: &str = "use semver::Version; regex::Regex";
const R: &str = r#"use regex::Regex; "semver::x" "#;
const C: char = '"';
fn f<'a>(x: &'a str) -> &'a str { x }
"####;
        assert!(hits(src, BANS).is_empty());
    }

    #[test]
    fn long_paths_are_cut() {
        let long = "a".repeat(1000);
        let src = format!("use semver::{{{long}::{{x, y}}}};");
        let h = hits(&src, BANS);
        assert_eq!(h.len(), 1); // both leaves cut to the same text
        assert!(h[0].1.starts_with("semver::aaa"));
        assert!(h[0].1.ends_with("..."));
        assert_eq!(h[0].1.chars().count(), MAX_IMPORT_CHARS + 3);
        let segs = "::a".repeat(40);
        let h = hits(&format!("fn f() {{ semver{segs}(); }}"), BANS);
        assert_eq!(h[0].1, format!("semver{}::...", "::a".repeat(MAX_SEGS - 1)));
    }

    #[test]
    fn deep_use_groups_do_not_overflow() {
        let mut src = "use ".to_string();
        for _ in 0..5000 {
            src.push_str("a::{");
        }
        assert!(hits(&src, BANS).is_empty());
    }
}
