//! Python imports: `import a.b as c, d`, `from a.b import (c, d)`, and
//! imports by name with a literal argument: `importlib.import_module("x")`,
//! `import_module("x")` (also under a `from importlib import import_module
//! as alias`), `__import__("x")`, `pytest.importorskip("x")` and
//! `runpy.run_module("x")`. Relative imports never match.

use std::collections::BTreeSet;

use super::lex::{literal_arg, punct_at, Token};
use super::pylex;
use super::Hit;

/// Functions that import the module named by their first argument, called
/// bare or as an attribute of anything.
const LOADERS: &[&str] = &["import_module", "__import__", "importorskip", "run_module"];

pub(crate) fn scan(text: &str, bans: &[String]) -> Vec<Hit> {
    let bans = Bans::new(bans);
    if bans.0.is_empty() {
        return Vec::new();
    }
    let toks = pylex::lex(text);
    let mut hits = Vec::new();
    let mut loaders: BTreeSet<String> = LOADERS.iter().map(|s| s.to_string()).collect();
    let mut i = 0;
    while i < toks.len() {
        i = if toks[i].is_ident("import") {
            import_stmt(&toks, i + 1, &bans, &mut hits)
        } else if toks[i].is_ident("from") {
            from_stmt(&toks, i + 1, &bans, &mut hits, &mut loaders).unwrap_or(i + 1)
        } else {
            i + 1
        };
    }
    for (i, t) in toks.iter().enumerate() {
        let Some(name) = t.ident() else { continue };
        if !loaders.contains(name) || !punct_at(&toks, i + 1, b'(') {
            continue;
        }
        // `import_module(name="x")` names its argument.
        let mut arg = i + 2;
        if toks.get(arg).is_some_and(|t| t.is_ident("name")) && punct_at(&toks, arg + 1, b'=') {
            arg += 2;
        }
        if let Some((module, line)) = literal_arg(&toks, arg) {
            let module = module.trim();
            if !module.starts_with('.') {
                bans.check(module, line, &mut hits);
            }
        }
    }
    hits
}

/// Ban entries, each as compared (`-` read as `_`) and as written.
struct Bans<'a>(Vec<(String, &'a str)>);

impl<'a> Bans<'a> {
    fn new(bans: &'a [String]) -> Self {
        let list = bans
            .iter()
            .map(|b| b.trim())
            .filter(|b| !b.is_empty())
            .map(|b| (b.replace('-', "_"), b))
            .collect();
        Bans(list)
    }

    /// Records a hit for every ban that `module` is, or is inside.
    fn check(&self, module: &str, line: usize, hits: &mut Vec<Hit>) -> bool {
        let norm = module.replace('-', "_");
        let mut any = false;
        for (ban, written) in &self.0 {
            if module_matches(&norm, ban) {
                hits.push((line, module.to_string(), written.to_string()));
                any = true;
            }
        }
        any
    }

    /// Whether some ban names a submodule of `module`.
    fn below(&self, module: &str) -> bool {
        let norm = module.replace('-', "_");
        self.0.iter().any(|(ban, _)| {
            ban.strip_prefix(norm.as_str())
                .is_some_and(|rest| rest.starts_with('.'))
        })
    }
}

/// `packaging` matches `packaging` and `packaging.version`, not
/// `packaging_tools`.
fn module_matches(module: &str, ban: &str) -> bool {
    module
        .strip_prefix(ban)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// Keywords that end a dotted name: besides being right, this keeps a
/// `from.from.from...` file from making every `from` rescan the rest.
const STATEMENT_KEYWORDS: &[&str] = &["import", "from", "as"];

/// A dotted name at `toks[i]`: its text, line and the index after it.
fn dotted(toks: &[Token], mut i: usize) -> Option<(String, usize, usize)> {
    let first = toks.get(i)?;
    let mut name = first.ident()?.to_string();
    i += 1;
    while punct_at(toks, i, b'.') {
        let Some(part) = toks
            .get(i + 1)
            .and_then(Token::ident)
            .filter(|p| !STATEMENT_KEYWORDS.contains(p))
        else {
            break;
        };
        name.push('.');
        name.push_str(part);
        i += 2;
    }
    Some((name, first.line, i))
}

/// `import a.b as c, d`; `i` is after `import`. Returns where to go on.
fn import_stmt(toks: &[Token], mut i: usize, bans: &Bans, hits: &mut Vec<Hit>) -> usize {
    while let Some((name, line, next)) = dotted(toks, i) {
        bans.check(&name, line, hits);
        i = next;
        if toks.get(i).is_some_and(|t| t.is_ident("as")) {
            i += 2;
        }
        if !punct_at(toks, i, b',') {
            break;
        }
        i += 1;
    }
    i
}

/// `from a.b import c as d, e` or `from . import x`; `i` is after `from`.
/// None when this `from` does not start an import (`yield from x`,
/// `raise E from e`).
fn from_stmt(
    toks: &[Token],
    mut i: usize,
    bans: &Bans,
    hits: &mut Vec<Hit>,
    loaders: &mut BTreeSet<String>,
) -> Option<usize> {
    let mut relative = false;
    while punct_at(toks, i, b'.') {
        relative = true;
        i += 1;
    }
    let mut module = None;
    if let Some((name, line, next)) = dotted(toks, i) {
        if name != "import" {
            module = Some((name, line));
            i = next;
        }
    }
    if !toks.get(i)?.is_ident("import") {
        return None;
    }
    i += 1;
    let paren = punct_at(toks, i, b'(');
    if paren {
        i += 1;
    }
    // The imported names, each with the name it is bound to.
    let mut names = Vec::new();
    while let Some(t) = toks.get(i) {
        if let Some(name) = t.ident() {
            let mut bound = name;
            i += 1;
            if toks.get(i).is_some_and(|t| t.is_ident("as")) {
                if let Some(alias) = toks.get(i + 1).and_then(Token::ident) {
                    bound = alias;
                }
                i += 2;
            }
            names.push((name, bound, t.line));
        } else if t.is_punct(b'*') {
            i += 1;
        } else {
            break;
        }
        if !punct_at(toks, i, b',') {
            break;
        }
        i += 1;
    }
    if paren && punct_at(toks, i, b')') {
        i += 1;
    }
    let Some((module, line)) = module.filter(|_| !relative) else {
        return Some(i);
    };
    for (name, bound, _) in &names {
        if LOADERS.contains(name) {
            loaders.insert(bound.to_string());
        }
    }
    // `from packaging import version` imports `packaging.version`; only
    // worth spelling out when a ban goes below this module.
    if !bans.check(&module, line, hits) && bans.below(&module) {
        for (name, _, line) in &names {
            bans.check(&format!("{module}.{name}"), *line, hits);
        }
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bans(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn hits(src: &str, list: &[&str]) -> Vec<(usize, String, String)> {
        let mut h = scan(src, &bans(list));
        h.sort();
        h
    }

    fn h(line: usize, import: &str, banned: &str) -> (usize, String, String) {
        (line, import.to_string(), banned.to_string())
    }

    const BANS: &[&str] = &["semver", "semantic_version", "packaging"];

    #[test]
    fn plain_imports() {
        assert_eq!(hits("import semver\n", BANS), [h(1, "semver", "semver")]);
        assert_eq!(
            hits("import os, packaging.version as pv, semver\n", BANS),
            [
                h(1, "packaging.version", "packaging"),
                h(1, "semver", "semver")
            ]
        );
        assert_eq!(
            hits("x = 1; import semantic_version.base", BANS),
            [h(1, "semantic_version.base", "semantic_version")]
        );
        assert_eq!(
            hits("if True:\n    import semver\n", BANS),
            [h(2, "semver", "semver")]
        );
    }

    #[test]
    fn prefix_must_end_at_a_dot() {
        assert!(hits("import packaging_tools\nimport semver2\n", BANS).is_empty());
        assert!(hits("from packagingx import a\n", BANS).is_empty());
        assert_eq!(hits("import packaging\n", &["packaging.version"]), []);
        assert_eq!(
            hits("import packaging.version.x\n", &["packaging.version"]),
            [h(1, "packaging.version.x", "packaging.version")]
        );
    }

    #[test]
    fn names_are_case_sensitive_and_dashes_are_underscores() {
        assert!(hits("import Semver\n", BANS).is_empty());
        assert_eq!(
            hits("import semantic_version\n", &["semantic-version"]),
            [h(1, "semantic_version", "semantic-version")]
        );
    }

    #[test]
    fn from_imports() {
        assert_eq!(
            hits("from packaging.version import Version\n", BANS),
            [h(1, "packaging.version", "packaging")]
        );
        assert_eq!(
            hits("from packaging import version\n", &["packaging.version"]),
            [h(1, "packaging.version", "packaging.version")]
        );
        assert!(hits("from packaging import specifiers\n", &["packaging.version"]).is_empty());
        assert_eq!(
            hits("from semver import *\n", BANS),
            [h(1, "semver", "semver")]
        );
    }

    #[test]
    fn relative_imports_never_match() {
        let src = "from . import semver\nfrom .semver import x\nfrom .. import packaging\nfrom ..packaging.version import V\nfrom ... import semver\n";
        assert!(hits(src, BANS).is_empty());
        assert!(hits("import_module('.semver', 'pkg')\n", BANS).is_empty());
    }

    #[test]
    fn multiline_imports() {
        let src = "from packaging.version import (\n    Version,\n    parse,\n)\nimport os, \\\n    semver\n";
        assert_eq!(
            hits(src, BANS),
            [
                h(1, "packaging.version", "packaging"),
                h(6, "semver", "semver")
            ]
        );
        let src = "from os import (\n  path,\n  sep\n)\nimport semver\n";
        assert_eq!(hits(src, BANS), [h(5, "semver", "semver")]);
        let src = "from \\\n  packaging \\\n  import version";
        assert_eq!(hits(src, BANS), [h(2, "packaging", "packaging")]);
    }

    #[test]
    fn from_that_is_not_an_import() {
        let src = "def g():\n    yield from semver\n    raise E from packaging\nimport os\n";
        assert!(hits(src, BANS).is_empty());
    }

    #[test]
    fn imports_by_name() {
        assert_eq!(
            hits(
                "import importlib\nm = importlib.import_module(\"semver\")\n",
                BANS
            ),
            [h(2, "semver", "semver")]
        );
        assert_eq!(
            hits("m = importlib.import_module('packaging.version')", BANS),
            [h(1, "packaging.version", "packaging")]
        );
        assert_eq!(
            hits("__import__('semver')", BANS),
            [h(1, "semver", "semver")]
        );
        assert_eq!(
            hits(
                "from importlib import import_module\nimport_module(\"semver\")",
                BANS
            ),
            [h(2, "semver", "semver")]
        );
        assert_eq!(
            hits(
                "from importlib import import_module as load\nload(\n  'sem' 'ver')",
                BANS
            ),
            [h(3, "semver", "semver")]
        );
        assert_eq!(
            hits("__import__(name='semver')", BANS),
            [h(1, "semver", "semver")]
        );
        assert_eq!(
            hits("__import__('sem' + 'ver')", BANS),
            [h(1, "semver", "semver")]
        );
        assert_eq!(
            hits("__import__('sem\\x76er')", BANS),
            [h(1, "semver", "semver")]
        );
    }

    #[test]
    fn test_and_runpy_loaders() {
        assert_eq!(
            hits(
                "sv = pytest.importorskip('semver')\nrunpy.run_module('packaging')",
                BANS
            ),
            [h(1, "semver", "semver"), h(2, "packaging", "packaging")]
        );
    }

    #[test]
    fn non_literal_or_unrelated_calls_do_not_match() {
        let src = "name = 'semver'\nimport_module(name)\n__import__(f'{name}')\n__import__(b'semver')\nload('semver')\nprint('semver')\n";
        assert!(hits(src, BANS).is_empty());
        // `load` is no loader until it is bound to one.
        assert!(hits("from mylib import load\nload('semver')", BANS).is_empty());
    }

    #[test]
    fn comments_and_strings_are_ignored() {
        let src = r#"
# import semver
"""
import semver
from packaging import version
"""
s = 'import semver'
t = '''__import__("semver")'''
def f():
    """Docstring: import packaging."""
    return "from packaging import x"
"#;
        assert!(hits(src, BANS).is_empty());
    }

    #[test]
    fn code_inside_fstring_fields_is_read() {
        assert_eq!(
            hits("x = f\"{__import__('semver').VERSION}\"", BANS),
            [h(1, "semver", "semver")]
        );
    }

    #[test]
    fn reported_line_is_the_module_line() {
        let src = "import os, \\\n  sys, \\\n  semver";
        assert_eq!(hits(src, BANS), [h(3, "semver", "semver")]);
    }

    #[test]
    fn every_ban_hit_is_reported() {
        assert_eq!(
            hits(
                "import packaging.version",
                &["packaging", "packaging.version"]
            ),
            [
                h(1, "packaging.version", "packaging"),
                h(1, "packaging.version", "packaging.version")
            ]
        );
    }

    #[test]
    fn no_bans_no_hits() {
        assert!(hits("import semver", &[]).is_empty());
        assert!(hits("import semver", &["  "]).is_empty());
    }
}
