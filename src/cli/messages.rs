//! The one place cbrun's commands print messages to stderr: errors
//! (`cbrun: error: ...`), warnings (`cbrun: warning: ...`) and status lines
//! (`cbrun: ...`). What a command prints on stdout is its result and is
//! printed by the command itself.

use std::fmt::Display;
use std::io::Write;

/// `cbrun: error: MSG`.
pub fn error(msg: impl Display) {
    line(format_args!("error: {msg}"));
}

/// `cbrun: warning: MSG`.
pub fn warning(msg: impl Display) {
    line(format_args!("warning: {msg}"));
}

/// `cbrun: MSG`: what a command is doing or did (`pulled ...`, `build: ...`).
pub fn status(msg: impl Display) {
    line(msg);
}

/// An error and its causes on one line, each cause once (many error types
/// already quote their cause in their own message), as `cbrun: error: ...`.
pub fn error_chain(e: &anyhow::Error) {
    error(one_line(e));
}

/// `e` and its causes joined by `: `, a cause left out when the message
/// already holds it, any line breaks in them folded.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let t = cause.to_string();
        if !msg.contains(&t) {
            msg.push_str(": ");
            msg.push_str(&t);
        }
    }
    msg.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// Whole lines go out in one write, so that messages of cbrun and of the
/// sandbox sharing the stream do not interleave mid-line. A closed stderr
/// is not an error worth dying for.
fn line(msg: impl Display) {
    let text = format!("cbrun: {msg}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_once_on_one_line() {
        let e = anyhow::anyhow!("inner\nsecond line");
        let e = e.context("outer: inner\nsecond line");
        assert_eq!(one_line(&e), "outer: inner second line");
        let e = anyhow::anyhow!("root").context("top");
        assert_eq!(one_line(&e), "top: root");
    }
}
