//! An error and its causes as one line of text, for the places that keep an
//! error as text (a trial record's `error`, a message quoting a failure)
//! instead of handing it up to the command line's printer.
//!
//! cbrun's error types say each cause once: a variant either quotes its
//! cause in its message or returns it from `source()`, never both. So the
//! full story is the message followed by each source, which is what
//! [`Chain`] writes (the same text as anyhow's `{:#}` at the CLI edge).

use std::error::Error;
use std::fmt;

/// `e` and each of its sources, joined by `": "`.
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

/// [`Chain`] as a `String`.
pub fn chain(e: &(dyn Error + 'static)) -> String {
    Chain(e).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading {path}")]
    struct Outer {
        path: &'static str,
        source: std::io::Error,
    }

    #[test]
    fn message_then_each_source() {
        let e = Outer {
            path: "case.toml",
            source: std::io::Error::other("disk on fire"),
        };
        assert_eq!(chain(&e), "reading case.toml: disk on fire");
        assert_eq!(chain(&std::io::Error::other("alone")), "alone");
    }
}
