//! Lexer for the C family of syntaxes: C/C++, JavaScript/TypeScript, Go and
//! Rust. Comments vanish; string literals become [`Tok::Str`] so a parser
//! can read an import specifier but never mistakes a string's text for code.

use super::lex::{is_ident_start, utf8_len, Cursor, Tok, Token, MAX_NEST};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    C,
    Js,
    Go,
    Rust,
}

pub(crate) fn lex(text: &str, dialect: Dialect) -> Vec<Token> {
    let mut l = Lexer {
        c: Cursor::new(text),
        d: dialect,
        out: Vec::new(),
        bol: true,
        nest: 0,
    };
    // A JavaScript hashbang line is a comment (`#!` in Rust is an attribute).
    if dialect == Dialect::Js && l.c.starts_with(b"#!") {
        l.c.skip_line();
    }
    l.run(false);
    l.out
}

struct Lexer<'a> {
    c: Cursor<'a>,
    d: Dialect,
    out: Vec<Token>,
    /// Nothing but whitespace and comments since the last newline: where a
    /// C preprocessor directive may start.
    bol: bool,
    /// Open template substitutions (JavaScript).
    nest: usize,
}

/// JavaScript keywords after which `/` starts a regular expression.
const JS_REGEX_AFTER: &[&str] = &[
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
];

impl Lexer<'_> {
    fn push(&mut self, tok: Tok, line: usize) {
        self.out.push(Token { tok, line });
    }

    /// Lexes to the end of input, or with `substitution`, through the `}`
    /// that closes a template's `${`.
    fn run(&mut self, substitution: bool) {
        let mut braces = 0usize;
        while let Some(b) = self.c.peek() {
            match b {
                b'\n' => {
                    self.c.bump();
                    self.bol = true;
                    continue;
                }
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c => {
                    self.c.bump();
                    continue;
                }
                // A line splice (C) or stray line-end backslash.
                b'\\' if matches!(self.c.peek_at(1), Some(b'\n')) => {
                    self.c.advance(2);
                    continue;
                }
                b'/' if self.c.peek_at(1) == Some(b'/') => {
                    self.line_comment();
                    continue;
                }
                b'/' if self.c.peek_at(1) == Some(b'*') => {
                    self.block_comment();
                    continue;
                }
                _ => {}
            }
            let bol = std::mem::replace(&mut self.bol, false);
            let line = self.c.line();
            match b {
                b'#' if bol && self.d == Dialect::C => self.directive(),
                b'"' => {
                    self.c.bump();
                    let multiline = self.d == Dialect::Rust;
                    let raw = self.c.quoted(b'"', multiline);
                    self.push_str(&raw, true, line);
                }
                b'\'' => self.single_quote(line),
                b'`' if self.d == Dialect::Go => {
                    self.c.bump();
                    let raw = self.c.quoted_raw(b'`');
                    self.push(
                        Tok::Str {
                            value: raw,
                            plain: true,
                        },
                        line,
                    );
                }
                b'`' if self.d == Dialect::Js => self.template(line),
                b'/' if self.d == Dialect::Js && self.regex_allowed() => self.regex(line),
                b'0'..=b'9' => {
                    self.c.number(self.d == Dialect::C);
                    self.push(Tok::Other, line);
                }
                b'.' if self.c.peek_at(1).is_some_and(|n| n.is_ascii_digit()) => {
                    self.c.number(self.d == Dialect::C);
                    self.push(Tok::Other, line);
                }
                b':' if self.c.peek_at(1) == Some(b':') => {
                    let spaced = self.c.prev().is_some_and(|p| p.is_ascii_whitespace());
                    self.c.advance(2);
                    self.push(Tok::PathSep { spaced }, line);
                }
                b'$' if self.d == Dialect::Js => self.ident(line),
                _ if is_ident_start(b) => self.ident(line),
                b'{' => {
                    self.c.bump();
                    braces += 1;
                    self.push(Tok::Punct(b), line);
                }
                b'}' => {
                    self.c.bump();
                    if substitution && braces == 0 {
                        return;
                    }
                    braces = braces.saturating_sub(1);
                    self.push(Tok::Punct(b), line);
                }
                _ => {
                    self.c.bump();
                    self.push(Tok::Punct(b), line);
                }
            }
        }
    }

    fn push_str(&mut self, raw: &str, plain: bool, line: usize) {
        let value = super::lex::unescape(raw);
        self.push(Tok::Str { value, plain }, line);
    }

    fn line_comment(&mut self) {
        loop {
            self.c.skip_line();
            // In C a backslash before the newline continues the comment.
            let spliced = self.d == Dialect::C && self.c.prev() == Some(b'\\');
            if spliced && self.c.bump().is_some() {
                continue;
            }
            return;
        }
    }

    fn block_comment(&mut self) {
        self.c.advance(2);
        // Rust block comments nest; the others end at the first `*/`.
        let mut depth = 1usize;
        while let Some(b) = self.c.peek() {
            if b == b'*' && self.c.peek_at(1) == Some(b'/') {
                self.c.advance(2);
                depth -= 1;
                if depth == 0 {
                    return;
                }
            } else if self.d == Dialect::Rust && b == b'/' && self.c.peek_at(1) == Some(b'*') {
                self.c.advance(2);
                depth += 1;
            } else {
                self.c.bump();
            }
        }
    }

    fn ident(&mut self, line: usize) {
        let extra = (self.d == Dialect::Js).then_some(b'$');
        let name = self.c.ident(extra);
        match self.d {
            Dialect::C
                if matches!(name.as_str(), "R" | "LR" | "uR" | "UR" | "u8R")
                    && self.c.peek() == Some(b'"') =>
            {
                return self.cpp_raw_string(line);
            }
            Dialect::Rust if matches!(name.as_str(), "r" | "br" | "cr") => {
                let hashes = (0..)
                    .take_while(|&i| self.c.peek_at(i) == Some(b'#'))
                    .count();
                if self.c.peek_at(hashes) == Some(b'"') {
                    return self.rust_raw_string(hashes, line);
                }
                // `r#name` is a raw identifier, never a keyword.
                if name == "r" && hashes == 1 && self.c.peek_at(1).is_some_and(is_ident_start) {
                    self.c.bump();
                    let rest = self.c.ident(None);
                    return self.push(Tok::Ident(format!("r#{rest}")), line);
                }
            }
            _ => {}
        }
        self.push(Tok::Ident(name), line);
    }

    /// `R"delim( ... )delim"`; the `"` is next.
    fn cpp_raw_string(&mut self, line: usize) {
        self.c.bump();
        let start = self.c.pos();
        while let Some(b) = self.c.peek() {
            if b == b'(' || b == b'\n' || b == b'"' || self.c.pos() - start > 16 {
                break;
            }
            self.c.bump();
        }
        if self.c.peek() != Some(b'(') {
            // Not a raw string after all: leave the rest to the main loop.
            return self.push(Tok::Other, line);
        }
        let close = format!("){}\"", self.c.text(start, self.c.pos()));
        self.c.bump();
        let body = self.c.pos();
        while self.c.peek().is_some() && !self.c.starts_with(close.as_bytes()) {
            self.c.bump();
        }
        let value = self.c.text(body, self.c.pos());
        self.c.advance(close.len());
        self.push(Tok::Str { value, plain: true }, line);
    }

    /// `r"..."`, `r#"..."#`; the hashes and `"` are next.
    fn rust_raw_string(&mut self, hashes: usize, line: usize) {
        self.c.advance(hashes + 1);
        let mut close = vec![b'"'];
        close.extend(std::iter::repeat_n(b'#', hashes));
        let body = self.c.pos();
        while self.c.peek().is_some() && !self.c.starts_with(&close) {
            self.c.bump();
        }
        let value = self.c.text(body, self.c.pos());
        self.c.advance(close.len());
        self.push(Tok::Str { value, plain: true }, line);
    }

    fn single_quote(&mut self, line: usize) {
        match self.d {
            Dialect::Js => {
                self.c.bump();
                let raw = self.c.quoted(b'\'', false);
                self.push_str(&raw, true, line);
            }
            Dialect::C | Dialect::Go => {
                self.c.bump();
                self.c.quoted(b'\'', false);
                self.push(Tok::Other, line);
            }
            Dialect::Rust => {
                // A char literal (`'x'`, `'\n'`, `'é'`) or a lifetime/label
                // (`'a`), which has no closing quote.
                let next = self.c.peek_at(1);
                let char_len = next.map(utf8_len).unwrap_or(1);
                if next == Some(b'\\') {
                    self.c.bump();
                    self.c.quoted(b'\'', false);
                    self.push(Tok::Other, line);
                } else if next.is_some() && self.c.peek_at(1 + char_len) == Some(b'\'') {
                    self.c.advance(2 + char_len);
                    self.push(Tok::Other, line);
                } else {
                    self.c.bump();
                    self.push(Tok::Punct(b'\''), line);
                }
            }
        }
    }

    /// A template literal. Without substitutions it is a plain string (so
    /// ``require(`x`)`` is read); with them its text is dropped and the
    /// code inside `${}` is lexed like any other code.
    fn template(&mut self, line: usize) {
        self.c.bump();
        let start = self.c.pos();
        let mut substituted = false;
        loop {
            match self.c.peek() {
                None => break,
                Some(b'\\') => self.c.advance(2),
                Some(b'`') => break,
                Some(b'$') if self.c.peek_at(1) == Some(b'{') && self.nest < MAX_NEST => {
                    substituted = true;
                    self.c.advance(2);
                    self.nest += 1;
                    self.run(true);
                    self.nest -= 1;
                }
                Some(_) => {
                    self.c.bump();
                }
            }
        }
        let end = self.c.pos();
        self.c.bump();
        if substituted {
            self.push(Tok::Other, line);
        } else {
            let raw = self.c.text(start, end);
            self.push_str(&raw, true, line);
        }
    }

    /// Whether a `/` here starts a regular expression rather than dividing:
    /// it does where an expression may start.
    fn regex_allowed(&self) -> bool {
        match self.out.last().map(|t| &t.tok) {
            None => true,
            Some(Tok::Ident(k)) => JS_REGEX_AFTER.contains(&k.as_str()),
            Some(Tok::Punct(p)) => !matches!(p, b')' | b']'),
            Some(Tok::Str { .. } | Tok::Other) => false,
            Some(Tok::PathSep { .. } | Tok::Include(_) | Tok::Newline) => true,
        }
    }

    /// `/body/flags`: ends at an unescaped `/` outside a `[...]` class, or at
    /// the end of the line.
    fn regex(&mut self, line: usize) {
        self.c.bump();
        let mut class = false;
        while let Some(b) = self.c.peek() {
            match b {
                b'\n' => break,
                b'\\' => {
                    self.c.advance(2);
                    continue;
                }
                b'[' => class = true,
                b']' => class = false,
                b'/' if !class => {
                    self.c.bump();
                    break;
                }
                _ => {}
            }
            self.c.bump();
        }
        self.c.ident(None); // flags
        self.push(Tok::Other, line);
    }

    /// A preprocessor line; the `#` is next. An `#include` (or GNU
    /// `#include_next`, Objective-C `#import`) target becomes an
    /// [`Tok::Include`]; other directives lex as ordinary tokens.
    fn directive(&mut self) {
        let line = self.c.line();
        self.c.bump();
        self.skip_blanks();
        if !self.c.peek().is_some_and(is_ident_start) {
            return;
        }
        let name = self.c.ident(None);
        if !matches!(name.as_str(), "include" | "include_next" | "import") {
            return;
        }
        self.skip_blanks();
        let close = match self.c.peek() {
            Some(b'<') => b'>',
            Some(b'"') => b'"',
            _ => return, // `#include MACRO`: nothing literal to check
        };
        self.c.bump();
        let start = self.c.pos();
        while let Some(b) = self.c.peek() {
            if b == close || b == b'\n' {
                break;
            }
            self.c.bump();
        }
        let path = self.c.text(start, self.c.pos());
        if self.c.peek() == Some(close) {
            self.c.bump();
        }
        self.push(Tok::Include(path.trim().to_string()), line);
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.c.peek() {
                Some(b' ' | b'\t') => {
                    self.c.bump();
                }
                Some(b'/') if self.c.peek_at(1) == Some(b'*') => self.block_comment(),
                _ => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(text: &str, d: Dialect) -> Vec<String> {
        lex(text, d)
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Str { value, plain: true } => Some(value),
                _ => None,
            })
            .collect()
    }

    fn idents(text: &str, d: Dialect) -> Vec<String> {
        lex(text, d)
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Ident(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn comments_vanish() {
        let src = "a // b 'c\n/* d \"e\" */ f /* g */";
        assert_eq!(idents(src, Dialect::Js), ["a", "f"]);
        assert!(strs(src, Dialect::Js).is_empty());
    }

    #[test]
    fn rust_block_comments_nest_and_c_ones_do_not() {
        let src = "a /* x /* y */ z */ b";
        assert_eq!(idents(src, Dialect::Rust), ["a", "b"]);
        assert_eq!(idents(src, Dialect::C), ["a", "z", "b"]);
    }

    #[test]
    fn c_line_comment_continues_after_backslash() {
        assert_eq!(idents("// a \\\n b\nc", Dialect::C), ["c"]);
        assert_eq!(idents("// a \\\n b\nc", Dialect::Js), ["b", "c"]);
    }

    #[test]
    fn strings_keep_their_lines() {
        let toks = lex("x\n\"a\"\n  'b'", Dialect::Js);
        let lines: Vec<usize> = toks.iter().map(|t| t.line).collect();
        assert_eq!(lines, [1, 2, 3]);
    }

    #[test]
    fn js_template_without_substitution_is_a_string() {
        assert_eq!(strs("`left-pad`", Dialect::Js), ["left-pad"]);
        // The text of a template with substitutions is not read, its code is.
        let toks = lex("`a ${require('x')} b` c", Dialect::Js);
        assert_eq!(strs("`a ${require('x')} b`", Dialect::Js), ["x"]);
        assert!(toks.iter().any(|t| t.is_ident("require")));
        assert!(toks.iter().any(|t| t.is_ident("c")));
        assert!(!toks.iter().any(|t| t.is_ident("a")));
        // Nested braces inside a substitution do not close it.
        assert_eq!(
            idents("`${ {a: 1}.a } ${`${b}`}` d", Dialect::Js),
            ["a", "a", "b", "d"]
        );
    }

    #[test]
    fn js_regex_is_not_a_string() {
        // The quote inside the regex must not start a string.
        let src = "x = /it's/g; y = 'real';";
        assert_eq!(strs(src, Dialect::Js), ["real"]);
        // After an identifier or `)`, `/` divides.
        assert_eq!(idents("a / b / c", Dialect::Js), ["a", "b", "c"]);
        assert_eq!(idents("(a) / b / c", Dialect::Js), ["a", "b", "c"]);
        assert_eq!(strs("return /[/']/.test('z')", Dialect::Js), ["z"]);
    }

    #[test]
    fn js_hashbang_is_skipped() {
        assert_eq!(strs("#!/usr/bin/env node\n'a'", Dialect::Js), ["a"]);
    }

    #[test]
    fn go_raw_strings_and_runes() {
        assert_eq!(strs("`a\"b\nc` '\"' \"d\"", Dialect::Go), ["a\"b\nc", "d"]);
    }

    #[test]
    fn c_char_literals_and_digit_separators() {
        assert_eq!(strs("c = '\"'; n = 1'000; s = \"x\";", Dialect::C), ["x"]);
        assert_eq!(
            strs("auto s = R\"D(a \" b)D\"; \"y\"", Dialect::C),
            ["a \" b", "y"]
        );
        assert_eq!(strs("L\"wide\"", Dialect::C), ["wide"]);
    }

    #[test]
    fn c_includes_only_at_line_start() {
        let toks = lex(
            "#include <a.h>\n  #  include \"b/c.h\"\nx; #include <no.h>\n/* c */ #include_next <d.h>\n#include MACRO\n// #include <e.h>\n",
            Dialect::C,
        );
        let incs: Vec<(String, usize)> = toks
            .iter()
            .filter_map(|t| match &t.tok {
                Tok::Include(p) => Some((p.clone(), t.line)),
                _ => None,
            })
            .collect();
        assert_eq!(
            incs,
            [
                ("a.h".to_string(), 1),
                ("b/c.h".to_string(), 2),
                ("d.h".to_string(), 4)
            ]
        );
    }

    #[test]
    fn include_inside_block_comment_is_ignored() {
        let toks = lex("/*\n#include <a.h>\n*/\n#include <b.h>", Dialect::C);
        let incs: Vec<&Tok> = toks
            .iter()
            .map(|t| &t.tok)
            .filter(|t| matches!(t, Tok::Include(_)))
            .collect();
        assert_eq!(incs, [&Tok::Include("b.h".into())]);
    }

    #[test]
    fn rust_raw_strings_chars_and_lifetimes() {
        let src = "r#\"a \" b\"# br\"\\\" 'x' '\\'' '\"' fn f<'a>(s: &'a str) {} r#type 'é'";
        assert_eq!(strs(src, Dialect::Rust), ["a \" b", "\\"]);
        let ids = idents(src, Dialect::Rust);
        assert!(ids.contains(&"r#type".to_string()));
        assert!(ids.contains(&"str".to_string()));
        // Rust strings may span lines.
        assert_eq!(strs("\"a\nb\" c", Dialect::Rust), ["a\nb"]);
    }

    #[test]
    fn path_separator_is_one_token() {
        let toks = lex("a::b", Dialect::Rust);
        assert_eq!(toks[1].tok, Tok::PathSep { spaced: false });
        assert_eq!(toks.len(), 3);
        assert_eq!(
            lex("a > ::b", Dialect::Rust)[2].tok,
            Tok::PathSep { spaced: true }
        );
    }

    #[test]
    fn escapes_are_resolved() {
        assert_eq!(strs("'sem\\x76er'", Dialect::Js), ["semver"]);
    }

    #[test]
    fn deep_template_nesting_does_not_overflow() {
        let mut src = String::new();
        for _ in 0..5000 {
            src.push_str("`${");
        }
        src.push('x');
        let toks = lex(&src, Dialect::Js);
        assert!(!toks.is_empty());
    }
}
