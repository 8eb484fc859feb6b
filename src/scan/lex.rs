//! Pieces shared by the hand-written lexers: the token type, a byte cursor
//! that counts lines, and string-literal unescaping.
//!
//! The lexers work on bytes: every character that matters to the syntax is
//! ASCII, and any non-ASCII byte is treated as part of an identifier, so
//! token boundaries always fall on UTF-8 character boundaries.

/// How deep template substitutions, f-string fields and use-trees may nest
/// before a lexer or parser stops descending. Real code never comes close;
/// the bound keeps a hostile file from overflowing the stack.
pub(crate) const MAX_NEST: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    Ident(String),
    /// A string literal. `plain` is false when it is not a literal text
    /// value (bytes, an f-string or template with substitutions), which an
    /// import by name cannot use.
    Str {
        value: String,
        plain: bool,
    },
    Punct(u8),
    /// `::`; `spaced` when whitespace comes right before it, which tells
    /// `a > ::b` (a comparison) from `Vec::<T>::new`.
    PathSep {
        spaced: bool,
    },
    /// The target of a C/C++ `#include`, without its `<>` or quotes.
    Include(String),
    /// The end of a Python logical line (never inside brackets).
    Newline,
    /// Anything else that ends an expression: numbers, character literals,
    /// regular expressions.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub tok: Tok,
    /// 1-based line of the token's first character.
    pub line: usize,
}

impl Token {
    pub fn is_ident(&self, name: &str) -> bool {
        matches!(&self.tok, Tok::Ident(s) if s == name)
    }

    pub fn is_path_sep(&self) -> bool {
        matches!(self.tok, Tok::PathSep { .. })
    }

    pub fn is_punct(&self, c: u8) -> bool {
        self.tok == Tok::Punct(c)
    }

    pub fn ident(&self) -> Option<&str> {
        match &self.tok {
            Tok::Ident(s) => Some(s),
            _ => None,
        }
    }

    /// The value of a plain string literal.
    pub fn plain_str(&self) -> Option<&str> {
        match &self.tok {
            Tok::Str { value, plain: true } => Some(value),
            _ => None,
        }
    }
}

/// Longest import text a report repeats; longer ones are cut with `...`.
/// A name is never that long, and a hostile file must not make the report
/// huge.
pub(crate) const MAX_IMPORT_CHARS: usize = 256;

/// `s` cut to [`MAX_IMPORT_CHARS`] characters.
pub(crate) fn clip(mut s: String) -> String {
    if let Some((at, _)) = s.char_indices().nth(MAX_IMPORT_CHARS) {
        s.truncate(at);
        s.push_str("...");
    }
    s
}

/// Whether `toks[i]` is the punctuation `c`.
pub(crate) fn punct_at(toks: &[Token], i: usize, c: u8) -> bool {
    toks.get(i).is_some_and(|t| t.is_punct(c))
}

/// A string argument made only of literals: `"a"`, `"a" "b"` (adjacent
/// literals, Python) or `"a" + "b"`, starting at `toks[i]` and followed by
/// `)` or `,`. Returns its value and the line of its first literal.
pub(crate) fn literal_arg(toks: &[Token], mut i: usize) -> Option<(String, usize)> {
    let first = toks.get(i)?;
    let mut value = first.plain_str()?.to_string();
    i += 1;
    loop {
        let t = toks.get(i)?;
        if let Some(s) = t.plain_str() {
            value.push_str(s);
            i += 1;
        } else if t.is_punct(b'+') {
            value.push_str(toks.get(i + 1)?.plain_str()?);
            i += 2;
        } else if t.is_punct(b')') || t.is_punct(b',') {
            return Some((value, first.line));
        } else {
            return None;
        }
    }
}

pub(crate) fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

pub(crate) fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Length in bytes of the UTF-8 character whose first byte is `b`.
pub(crate) fn utf8_len(b: u8) -> usize {
    match b {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

pub(crate) struct Cursor<'a> {
    src: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        // A byte-order mark is not part of the first token.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        Cursor {
            src: text.as_bytes(),
            pos: 0,
            line: 1,
        }
    }

    pub fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    pub fn peek_at(&self, n: usize) -> Option<u8> {
        self.src.get(self.pos + n).copied()
    }

    pub fn starts_with(&self, pat: &[u8]) -> bool {
        self.src[self.pos..].starts_with(pat)
    }

    pub fn bump(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        if b == b'\n' {
            self.line += 1;
        }
        Some(b)
    }

    pub fn advance(&mut self, n: usize) {
        for _ in 0..n {
            if self.bump().is_none() {
                break;
            }
        }
    }

    /// The byte before the cursor.
    pub fn prev(&self) -> Option<u8> {
        self.pos.checked_sub(1).map(|i| self.src[i])
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn line(&self) -> usize {
        self.line
    }

    pub fn text(&self, start: usize, end: usize) -> String {
        String::from_utf8_lossy(&self.src[start..end.min(self.src.len())]).into_owned()
    }

    /// Consumes identifier bytes; `extra` is one more byte allowed in them
    /// (`$` in JavaScript).
    pub fn ident(&mut self, extra: Option<u8>) -> String {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if is_ident_continue(b) || Some(b) == extra {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.text(start, self.pos)
    }

    /// Skips to the end of the line, leaving the newline to the caller.
    pub fn skip_line(&mut self) {
        while let Some(b) = self.peek() {
            if b == b'\n' {
                break;
            }
            self.pos += 1;
        }
    }

    /// Skips a number: digits, letters (suffixes, hex, exponents), `_`, `.`
    /// and a sign right after an exponent letter. `sep` allows C++14's
    /// `1'000` digit separator.
    pub fn number(&mut self, sep: bool) {
        while let Some(b) = self.peek() {
            let exp_sign = matches!(b, b'+' | b'-')
                && self.pos > 0
                && matches!(self.src[self.pos - 1], b'e' | b'E' | b'p' | b'P');
            let digit_sep =
                sep && b == b'\'' && self.peek_at(1).is_some_and(|n| n.is_ascii_alphanumeric());
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || exp_sign || digit_sep {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// A raw literal (Go's backquoted strings): no escapes, may span lines.
    pub fn quoted_raw(&mut self, quote: u8) -> String {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b == quote {
                let s = self.text(start, self.pos);
                self.bump();
                return s;
            }
            self.bump();
        }
        self.text(start, self.pos)
    }

    /// Consumes a quoted literal whose opening `quote` was already consumed,
    /// through its closing quote. A backslash protects the next byte (raw
    /// Python strings too keep `\"` inside). With `multiline` false an
    /// unescaped newline ends the literal unconsumed, so a stray quote
    /// spoils one line, not the rest of the file. Returns the raw content.
    pub fn quoted(&mut self, quote: u8, multiline: bool) -> String {
        let start = self.pos;
        loop {
            match self.peek() {
                None => return self.text(start, self.pos),
                Some(b'\\') => self.advance(2),
                Some(b'\n') if !multiline => return self.text(start, self.pos),
                Some(b) if b == quote => {
                    let s = self.text(start, self.pos);
                    self.bump();
                    return s;
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
    }
}

/// Resolves the escapes of a non-raw string literal. Module names rarely
/// hold escapes, but `"sem\x76er"` must not hide `semver`. Covers the
/// escapes that C, Go, JavaScript, Python and Rust share; an unknown escape
/// keeps its character.
pub(crate) fn unescape(raw: &str) -> String {
    if !raw.contains('\\') {
        return raw.to_string();
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            '0'..='7' => {
                // Octal: up to three digits (`\0` alone is NUL).
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            v = v * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(v));
            }
            'x' => push_hex(&mut out, &mut chars, 2),
            'u' if chars.peek() == Some(&'{') => {
                chars.next();
                let mut v = 0u32;
                for d in chars.by_ref() {
                    match d.to_digit(16) {
                        Some(d) => v = v.saturating_mul(16).saturating_add(d),
                        None => break, // the closing `}`
                    }
                }
                out.extend(char::from_u32(v));
            }
            'u' => push_hex(&mut out, &mut chars, 4),
            'U' => push_hex(&mut out, &mut chars, 8),
            // A backslash-newline continues the literal on the next line.
            '\n' => {}
            other => out.push(other),
        }
    }
    out
}

fn push_hex(out: &mut String, chars: &mut std::iter::Peekable<std::str::Chars>, max: usize) {
    let mut v = 0u32;
    for _ in 0..max {
        match chars.peek().and_then(|d| d.to_digit(16)) {
            Some(d) => {
                v = v * 16 + d;
                chars.next();
            }
            None => break,
        }
    }
    out.extend(char::from_u32(v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_cuts_long_text_on_a_char_boundary() {
        assert_eq!(clip("short".into()), "short");
        let long = "é".repeat(MAX_IMPORT_CHARS + 1);
        let cut = clip(long);
        assert_eq!(cut.chars().count(), MAX_IMPORT_CHARS + 3);
        assert!(cut.ends_with("é..."));
    }

    #[test]
    fn unescape_handles_common_escapes() {
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape(r"sem\x76er"), "semver");
        assert_eq!(unescape(r"left\u002dpad"), "left-pad");
        assert_eq!(unescape(r"left\u{2d}pad"), "left-pad");
        assert_eq!(unescape(r"a\U0000002Db"), "a-b");
        assert_eq!(unescape(r"a\055b"), "a-b");
        assert_eq!(unescape(r#"q\"q\\"#), "q\"q\\");
        assert_eq!(unescape("a\\\nb"), "ab");
        assert_eq!(unescape(r"tab\tnl\n"), "tab\tnl\n");
        assert_eq!(unescape("end\\"), "end\\");
    }

    #[test]
    fn cursor_counts_lines_and_reads_quoted() {
        let mut c = Cursor::new("\u{feff}'ab\\'c'\nx");
        assert_eq!(c.bump(), Some(b'\''));
        assert_eq!(c.quoted(b'\'', false), "ab\\'c");
        assert_eq!(c.line(), 1);
        assert_eq!(c.bump(), Some(b'\n'));
        assert_eq!(c.line(), 2);
        assert_eq!(c.ident(None), "x");
        assert_eq!(c.peek(), None);
    }

    #[test]
    fn unterminated_quote_stops_at_newline() {
        let mut c = Cursor::new("\"abc\nnext");
        c.bump();
        assert_eq!(c.quoted(b'"', false), "abc");
        assert_eq!(c.peek(), Some(b'\n'));
        let mut c = Cursor::new("\"abc\nnext\"");
        c.bump();
        assert_eq!(c.quoted(b'"', true), "abc\nnext");
        assert_eq!(c.line(), 2);
    }

    #[test]
    fn numbers_stop_at_operators() {
        let mut c = Cursor::new("1e+5+x");
        c.number(false);
        assert_eq!(c.pos(), 4);
        let mut c = Cursor::new("1'000'000;");
        c.number(true);
        assert_eq!(c.pos(), 9);
        let mut c = Cursor::new("1'a'");
        c.number(false);
        assert_eq!(c.pos(), 1);
    }

    fn tok(t: Tok) -> Token {
        Token { tok: t, line: 3 }
    }

    fn s(v: &str) -> Token {
        tok(Tok::Str {
            value: v.into(),
            plain: true,
        })
    }

    #[test]
    fn literal_arg_concatenates_literals_only() {
        let close = tok(Tok::Punct(b')'));
        let plus = tok(Tok::Punct(b'+'));
        let toks = vec![s("sem"), plus.clone(), s("ver"), close.clone()];
        assert_eq!(literal_arg(&toks, 0), Some(("semver".into(), 3)));
        let toks = vec![s("a"), s("b"), tok(Tok::Punct(b','))];
        assert_eq!(literal_arg(&toks, 0), Some(("ab".into(), 3)));
        let toks = vec![s("a"), plus, tok(Tok::Ident("x".into())), close.clone()];
        assert_eq!(literal_arg(&toks, 0), None);
        let bytes = tok(Tok::Str {
            value: "a".into(),
            plain: false,
        });
        assert_eq!(literal_arg(&[bytes, close], 0), None);
        assert_eq!(literal_arg(&[s("open")], 0), None);
    }
}
