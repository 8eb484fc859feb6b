//! JavaScript and TypeScript imports: `require('x')`, `import 'x'`,
//! `import x, {a} from 'x'`, `export * from 'x'`, dynamic `import('x')`,
//! each with a literal specifier. Relative specifiers never match.

use super::clike::{self, Dialect};
use super::lex::{literal_arg, punct_at, Tok, Token};
use super::Hit;

pub(crate) fn scan(text: &str, bans: &[String]) -> Vec<Hit> {
    let bans: Vec<(String, &str)> = bans
        .iter()
        .map(|b| b.trim())
        .map(|b| (bare(b).trim_end_matches('/').to_string(), b))
        .filter(|(b, _)| !b.is_empty())
        .collect();
    if bans.is_empty() {
        return Vec::new();
    }
    let toks = clike::lex(text, Dialect::Js);
    let mut hits = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        // `obj.import` and `obj.export` are properties, not statements;
        // `module.require('x')` does import, so any `require` call counts.
        let member = i > 0 && toks[i - 1].is_punct(b'.');
        let spec = match &t.tok {
            Tok::Ident(k) if k == "require" && punct_at(&toks, i + 1, b'(') => {
                literal_arg(&toks, i + 2)
            }
            Tok::Ident(k) if k == "import" && !member => match toks.get(i + 1) {
                Some(n) if n.is_punct(b'(') => literal_arg(&toks, i + 2),
                Some(n) if n.plain_str().is_some() => {
                    n.plain_str().map(|s| (s.to_string(), n.line))
                }
                _ => from_clause(&toks, i + 1),
            },
            Tok::Ident(k) if k == "export" && !member => from_clause(&toks, i + 1),
            _ => None,
        };
        let Some((spec, line)) = spec else { continue };
        for (ban, written) in &bans {
            if spec_matches(&spec, ban) {
                hits.push((line, spec.clone(), written.to_string()));
            }
        }
    }
    hits
}

/// The specifier after `from` in an import or export clause starting at
/// `toks[i]`: the clause holds only names, `{ } , *` and `type`/`as`. It
/// ends at the next `import`/`export`, so no token is read by two clauses.
fn from_clause(toks: &[Token], mut i: usize) -> Option<(String, usize)> {
    while let Some(t) = toks.get(i) {
        match &t.tok {
            Tok::Ident(k) if k == "import" || k == "export" => return None,
            Tok::Ident(k) if k == "from" => {
                if let Some(s) = toks.get(i + 1).and_then(Token::plain_str) {
                    return Some((s.to_string(), toks[i + 1].line));
                }
            }
            Tok::Ident(_) => {}
            Tok::Punct(b'{' | b'}' | b',' | b'*') => {}
            _ => return None,
        }
        i += 1;
    }
    None
}

/// A specifier without its `node:` (builtins) or `npm:` (Deno) scheme, and
/// an `npm:` specifier without its version (`npm:left-pad@1.3/x`).
fn bare(spec: &str) -> String {
    if let Some(s) = spec.strip_prefix("node:") {
        return s.to_string();
    }
    let Some(s) = spec.strip_prefix("npm:") else {
        return spec.to_string();
    };
    // The version follows the first `@` that is not a scope's.
    let (scope_len, rest) = match s.strip_prefix('@') {
        Some(r) => match r.find('/') {
            Some(slash) => (slash + 2, &s[slash + 2..]),
            None => (0, s),
        },
        None => (0, s),
    };
    let name_end = rest.find('/').unwrap_or(rest.len());
    let name = &rest[..name_end];
    let name = name.split('@').next().unwrap_or(name);
    format!("{}{}{}", &s[..scope_len], name, &rest[name_end..])
}

/// `left-pad` matches `left-pad` and `left-pad/lib/x`; `@scope` matches all
/// of `@scope/*`.
fn spec_matches(spec: &str, ban: &str) -> bool {
    let spec = bare(spec.trim());
    if spec.starts_with('.') || spec.starts_with('/') {
        return false;
    }
    spec.strip_prefix(ban)
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

    const BANS: &[&str] = &["left-pad", "@scope/pkg", "@corp", "fs"];

    #[test]
    fn require_and_import_forms() {
        let src = r#"const lp = require('left-pad');
import x from "left-pad";
import 'left-pad';
import {a, b as c} from "left-pad/lib/x";
import * as ns from '@scope/pkg/sub';
import def, { d } from '@corp/anything';
export { e } from 'left-pad';
export * from "left-pad";
export * as all from 'left-pad';
const m = await import('left-pad');
import type { T } from 'left-pad';
import fs = require("node:fs");
"#;
        let lines: Vec<usize> = hits(src, BANS).iter().map(|h| h.0).collect();
        assert_eq!(lines, (1..=12).collect::<Vec<_>>());
        assert_eq!(
            hits("import {\n  a,\n  b,\n} from 'left-pad'", BANS),
            [h(4, "left-pad", "left-pad")]
        );
    }

    #[test]
    fn package_boundaries() {
        let src = "require('left-pad-extra'); require('@scope/pkg2'); require('@scoped/x'); require('@corporate/y'); require('fsx');";
        assert!(hits(src, BANS).is_empty());
        assert_eq!(
            hits("require('@scope/pkg')", BANS),
            [h(1, "@scope/pkg", "@scope/pkg")]
        );
        assert_eq!(hits("require('@corp/x')", BANS), [h(1, "@corp/x", "@corp")]);
    }

    #[test]
    fn node_scheme_is_stripped_on_both_sides() {
        assert_eq!(hits("require('node:fs')", BANS), [h(1, "node:fs", "fs")]);
        assert_eq!(
            hits("import fs from 'fs/promises'", &["node:fs"]),
            [h(1, "fs/promises", "node:fs")]
        );
    }

    #[test]
    fn npm_scheme_drops_the_version() {
        assert_eq!(
            hits("import lp from 'npm:left-pad@1.3.0/lib';", BANS),
            [h(1, "npm:left-pad@1.3.0/lib", "left-pad")]
        );
        assert_eq!(
            hits("import p from 'npm:@scope/pkg@2';", BANS),
            [h(1, "npm:@scope/pkg@2", "@scope/pkg")]
        );
    }

    #[test]
    fn relative_specifiers_never_match() {
        let src = "require('./left-pad'); import x from '../left-pad'; import '/left-pad';";
        assert!(hits(src, BANS).is_empty());
    }

    #[test]
    fn comments_strings_and_templates_are_ignored() {
        let src = r#"
// require('left-pad')
/* import x from 'left-pad' */
const s = "require('left-pad')";
const t = `import x from 'left-pad'`;
const u = `${x} require('left-pad')`;
"#;
        assert!(hits(src, BANS).is_empty());
    }

    #[test]
    fn template_literal_specifier_without_substitution() {
        assert_eq!(
            hits("require(`left-pad`)", BANS),
            [h(1, "left-pad", "left-pad")]
        );
        assert!(hits("require(`left-${pad}`)", BANS).is_empty());
    }

    #[test]
    fn code_in_template_substitutions_is_read() {
        assert_eq!(
            hits("const s = `${require('left-pad')(x)}`;", BANS),
            [h(1, "left-pad", "left-pad")]
        );
    }

    #[test]
    fn non_literal_and_member_forms_do_not_match() {
        let src = "require(name); import(name); x.import('left-pad'); import.meta.url; const o = { import: 'left-pad', require: 'left-pad' };";
        assert!(hits(src, BANS).is_empty());
        // An export that is not a re-export.
        assert!(hits("export const from = 'left-pad';", BANS).is_empty());
        assert!(hits("export default 'left-pad';", BANS).is_empty());
    }

    #[test]
    fn module_require_counts() {
        assert_eq!(
            hits("module.require('left-pad')", BANS),
            [h(1, "left-pad", "left-pad")]
        );
    }

    #[test]
    fn concatenated_literal_specifier() {
        assert_eq!(
            hits("require('left' + '-pad')", BANS),
            [h(1, "left-pad", "left-pad")]
        );
    }

    #[test]
    fn regex_with_quote_does_not_hide_an_import() {
        let src = "const r = /'/;\nconst lp = require('left-pad');";
        assert_eq!(hits(src, BANS), [h(2, "left-pad", "left-pad")]);
    }

    #[test]
    fn bare_strips_schemes() {
        assert_eq!(bare("node:fs"), "fs");
        assert_eq!(bare("npm:left-pad"), "left-pad");
        assert_eq!(bare("npm:left-pad@1/x/y"), "left-pad/x/y");
        assert_eq!(bare("npm:@s/p@^2/z"), "@s/p/z");
        assert_eq!(bare("@s/p"), "@s/p");
    }
}
