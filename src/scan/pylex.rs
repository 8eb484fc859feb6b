//! Lexer for Python. Comments vanish, string literals (any prefix, single
//! or triple quoted) become [`Tok::Str`], and [`Tok::Newline`] marks the end
//! of each logical line: never inside brackets or after a backslash
//! continuation, so a parser sees a parenthesised import as one statement.
//! The code inside f-string replacement fields is lexed as code.

use super::lex::{is_ident_start, unescape, Cursor, Tok, Token, MAX_NEST};

pub(crate) fn lex(text: &str) -> Vec<Token> {
    let mut l = Lexer {
        c: Cursor::new(text),
        out: Vec::new(),
        depth: 0,
        fields: 0,
    };
    l.run(None);
    l.out
}

struct Lexer<'a> {
    c: Cursor<'a>,
    out: Vec<Token>,
    /// Open brackets.
    depth: usize,
    /// Open f-string replacement fields.
    fields: usize,
}

/// Whether `p` is a string prefix (`r`, `b`, `f`, `u`, `t` and their legal
/// pairs, any case).
fn is_prefix(p: &str) -> bool {
    let p = p.to_ascii_lowercase();
    matches!(
        p.as_str(),
        "r" | "u" | "b" | "f" | "t" | "br" | "rb" | "fr" | "rf" | "tr" | "rt"
    )
}

impl Lexer<'_> {
    fn push(&mut self, tok: Tok, line: usize) {
        self.out.push(Token { tok, line });
    }

    /// Lexes to the end of input or, inside a replacement field (`field` is
    /// the bracket depth where it opened), through the field's closing `}`.
    fn run(&mut self, field: Option<usize>) {
        while let Some(b) = self.c.peek() {
            let line = self.c.line();
            let at_field_level = field == Some(self.depth);
            match b {
                b'\n' => {
                    self.c.bump();
                    let logical_end = self.depth == 0 && self.fields == 0;
                    if logical_end && self.out.last().is_some_and(|t| t.tok != Tok::Newline) {
                        self.push(Tok::Newline, line);
                    }
                }
                b' ' | b'\t' | b'\r' | 0x0c => {
                    self.c.bump();
                }
                b'\\' if self.c.peek_at(1) == Some(b'\n') => self.c.advance(2),
                b'\\' if self.c.starts_with(b"\\\r\n") => self.c.advance(3),
                b'#' => self.c.skip_line(),
                b'\'' | b'"' => self.string("", line),
                b'0'..=b'9' => {
                    self.c.number(false);
                    self.push(Tok::Other, line);
                }
                b'.' if self.c.peek_at(1).is_some_and(|n| n.is_ascii_digit()) => {
                    self.c.number(false);
                    self.push(Tok::Other, line);
                }
                _ if is_ident_start(b) => {
                    let name = self.c.ident(None);
                    if is_prefix(&name) && matches!(self.c.peek(), Some(b'\'' | b'"')) {
                        self.string(&name, line);
                    } else {
                        self.push(Tok::Ident(name), line);
                    }
                }
                b'}' if at_field_level => {
                    self.c.bump();
                    return;
                }
                // A format spec: literal text with nested fields, to the `}`.
                b':' if at_field_level => {
                    self.c.bump();
                    return self.format_spec();
                }
                // A conversion (`!r`); `!=` is an operator.
                b'!' if at_field_level && self.c.peek_at(1) != Some(b'=') => {
                    self.c.bump();
                }
                b'(' | b'[' | b'{' => {
                    self.c.bump();
                    self.depth += 1;
                    self.push(Tok::Punct(b), line);
                }
                b')' | b']' | b'}' => {
                    self.c.bump();
                    self.depth = self.depth.saturating_sub(1);
                    self.push(Tok::Punct(b), line);
                }
                _ => {
                    self.c.bump();
                    self.push(Tok::Punct(b), line);
                }
            }
        }
    }

    /// A string literal; its opening quote is next.
    fn string(&mut self, prefix: &str, line: usize) {
        let p = prefix.to_ascii_lowercase();
        let raw = p.contains('r');
        let bytes = p.contains('b');
        let formatted = (p.contains('f') || p.contains('t')) && self.fields < MAX_NEST;
        let Some(q) = self.c.peek() else { return };
        let triple = self.c.starts_with(&[q, q, q]);
        self.c.advance(if triple { 3 } else { 1 });
        let start = self.c.pos();
        let mut end;
        let mut substituted = false;
        loop {
            end = self.c.pos();
            match self.c.peek() {
                None => break,
                Some(b'\\') => self.c.advance(2),
                // An unterminated single-quoted string ends with its line.
                Some(b'\n') if !triple => break,
                Some(b) if b == q => {
                    if !triple {
                        self.c.bump();
                        break;
                    }
                    if self.c.starts_with(&[q, q, q]) {
                        self.c.advance(3);
                        break;
                    }
                    self.c.bump();
                }
                Some(b'{') if formatted => {
                    if self.c.peek_at(1) == Some(b'{') {
                        self.c.advance(2);
                    } else {
                        substituted = true;
                        self.c.bump();
                        self.field();
                    }
                }
                Some(_) => {
                    self.c.bump();
                }
            }
        }
        let plain = !bytes && !substituted;
        // Only a plain literal's text is ever read; not copying the others
        // keeps nested f-strings from each holding the rest of the file.
        let value = match (plain, raw) {
            (false, _) => String::new(),
            (true, true) => self.c.text(start, end),
            (true, false) => unescape(&self.c.text(start, end)),
        };
        self.push(Tok::Str { value, plain }, line);
    }

    /// A replacement field's code; its `{` was consumed.
    fn field(&mut self) {
        self.fields += 1;
        let depth = self.depth;
        self.run(Some(depth));
        // An unbalanced field must not leave brackets open after the string.
        self.depth = depth;
        self.fields -= 1;
    }

    /// A format spec after `:` in a field, through the field's `}`.
    fn format_spec(&mut self) {
        while let Some(b) = self.c.peek() {
            match b {
                b'}' => {
                    self.c.bump();
                    return;
                }
                b'{' if self.fields < MAX_NEST => {
                    self.c.bump();
                    self.field();
                }
                _ => {
                    self.c.bump();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<String> {
        lex(text)
            .into_iter()
            .map(|t| match t.tok {
                Tok::Ident(s) => s,
                Tok::Str { value, plain } => format!("{}{value:?}", if plain { "s" } else { "x" }),
                Tok::Punct(p) => (p as char).to_string(),
                Tok::Newline => "NL".into(),
                Tok::Other => "#".into(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn comments_vanish() {
        assert_eq!(kinds("a # import b\nc"), ["a", "NL", "c"]);
    }

    #[test]
    fn newlines_inside_brackets_and_continuations_are_not_logical() {
        assert_eq!(
            kinds("f(a,\n  b)\nx = 1 + \\\n 2\n"),
            ["f", "(", "a", ",", "b", ")", "NL", "x", "=", "#", "+", "#", "NL"]
        );
    }

    #[test]
    fn string_prefixes_and_quotes() {
        assert_eq!(
            kinds(r#"'a' "b" r'\d' b"c" Rb'd' u"e" """f"g""" '''h'''"#),
            [
                "s\"a\"",
                "s\"b\"",
                "s\"\\\\d\"",
                "x\"\"",
                "x\"\"",
                "s\"e\"",
                "s\"f\\\"g\"",
                "s\"h\""
            ]
        );
        // `rb` etc. are prefixes only right before a quote.
        assert_eq!(kinds("rb = 1"), ["rb", "=", "#"]);
    }

    #[test]
    fn triple_quoted_strings_span_lines_and_hide_code() {
        let toks = lex("\"\"\"\nimport semver\n\"\"\"\nx");
        assert_eq!(toks.len(), 3);
        assert_eq!(toks[2].tok, Tok::Ident("x".into()));
        assert_eq!(toks[2].line, 4);
        assert!(!toks.iter().any(|t| t.is_ident("import")));
    }

    #[test]
    fn escaped_quotes_do_not_end_strings() {
        assert_eq!(kinds(r#"'it\'s' x"#), ["s\"it's\"", "x"]);
        assert_eq!(kinds(r#"r"\"" x"#), ["s\"\\\\\\\"\"", "x"]);
    }

    #[test]
    fn fstring_fields_are_code() {
        assert_eq!(
            kinds("f'a {__import__(\"m\")} b {{c}}' d"),
            ["__import__", "(", "s\"m\"", ")", "x\"\"", "d"]
        );
        // Format specs and conversions are not code.
        assert_eq!(
            kinds("f'{x!r:>{w}} {y:%H:%M}' z"),
            ["x", "r", "w", "y", "x\"\"", "z"]
        );
        // Python 3.12 nests the same quotes.
        assert_eq!(
            kinds("f\"{d[\"k\"]}\" e"),
            ["d", "[", "s\"k\"", "]", "x\"\"", "e"]
        );
        // An f-string without fields is plain text.
        assert_eq!(kinds("f'abc'"), ["s\"abc\""]);
    }

    #[test]
    fn unterminated_string_ends_at_line_end() {
        assert_eq!(kinds("'abc\nx"), ["s\"abc\"", "NL", "x"]);
    }

    #[test]
    fn deep_fstring_nesting_does_not_overflow() {
        let mut src = String::new();
        for _ in 0..5000 {
            src.push_str("f'{");
        }
        assert!(!lex(&src).is_empty());
    }
}
