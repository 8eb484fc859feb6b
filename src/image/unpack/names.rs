//! Entry names: normalised into components (see the module docs of
//! [`super`]) and shown in messages.

use super::MAX_DEPTH;

/// An entry name as messages show it (see [`shown`]), made into text only
/// when a message is: not once per entry.
#[derive(Clone, Copy)]
pub(super) struct Shown<'a>(pub(super) &'a [u8]);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&shown(self.0))
    }
}

/// An entry name for messages: lossy UTF-8, control characters escaped,
/// long names cut.
pub(super) fn shown(name: &[u8]) -> String {
    let s = String::from_utf8_lossy(name);
    // The usual case, once per entry: nothing to escape or cut.
    if !s.is_empty() && s.len() <= 300 && !s.chars().any(char::is_control) {
        return s.into_owned();
    }
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i >= 300 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push_str("(empty name)");
    }
    out
}

/// The components of an entry name (see the module docs), or why not.
pub(super) fn normalise(name: &[u8]) -> Result<Vec<&[u8]>, String> {
    if name.contains(&0) {
        return Err("NUL in name".into());
    }
    let mut out: Vec<&[u8]> = Vec::new();
    for c in name.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                if out.pop().is_none() {
                    return Err("`..` leads out of the root".into());
                }
            }
            c => out.push(c),
        }
    }
    if out.len() > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    Ok(out)
}
