//! Streaming prefix rewriting: upstream URLs in a document become URLs of
//! the index, without holding the document in memory.
//!
//! Only a tail shorter than the longest pattern is kept between chunks: an
//! occurrence that starts before that tail is already complete in the
//! buffer, so it cannot be missed or split.

use std::io::{self, Write};

/// Replaces every occurrence of any of `from` with `to` in the bytes
/// written through it.
pub struct Rewriter<W: Write> {
    inner: W,
    from: Vec<Vec<u8>>,
    to: Vec<u8>,
    carry: Vec<u8>,
    keep: usize,
}

impl<W: Write> Rewriter<W> {
    /// `from` must not be empty strings.
    pub fn new(inner: W, from: &[String], to: &str) -> Self {
        let from: Vec<Vec<u8>> = from
            .iter()
            .filter(|f| !f.is_empty())
            .map(|f| f.as_bytes().to_vec())
            .collect();
        let keep = from.iter().map(Vec::len).max().unwrap_or(1) - 1;
        Rewriter {
            inner,
            from,
            to: to.as_bytes().to_vec(),
            carry: Vec::new(),
            keep,
        }
    }

    /// The earliest occurrence of a pattern in `buf[from..]`: (start, len).
    fn next_match(&self, buf: &[u8], from: usize) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for p in &self.from {
            if let Some(i) = find(&buf[from..], p) {
                let at = from + i;
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, p.len()));
                }
            }
        }
        best
    }

    /// Rewrites `data` after the carried tail. Matches are taken only
    /// where every pattern that could start at or before them is wholly in
    /// the buffer, so the result is that of rewriting the whole document at
    /// once (leftmost match, the first pattern on ties); unless `last`, a
    /// tail shorter than the longest pattern waits for more bytes.
    fn process(&mut self, data: &[u8], last: bool) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(data);
        let limit = if last {
            buf.len()
        } else {
            buf.len().saturating_sub(self.keep)
        };
        let mut pos = 0;
        let mut out = Vec::with_capacity(buf.len() + 64);
        while let Some((at, len)) = self.next_match(&buf, pos) {
            if at >= limit {
                break;
            }
            out.extend_from_slice(&buf[pos..at]);
            out.extend_from_slice(&self.to);
            pos = at + len;
        }
        let cut = limit.max(pos);
        out.extend_from_slice(&buf[pos..cut]);
        self.carry = buf[cut..].to_vec();
        self.inner.write_all(&out)
    }

    /// Writes what is left and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.process(&[], true)?;
        Ok(self.inner)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        match hay[i..=hay.len() - needle.len()]
            .iter()
            .position(|&b| b == first)
        {
            None => return None,
            Some(off) => {
                let at = i + off;
                if hay[at..at + needle.len()] == *needle {
                    return Some(at);
                }
                i = at + 1;
            }
        }
    }
    None
}

impl<W: Write> Write for Rewriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.process(data, false)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8], chunk: usize, from: &[&str], to: &str) -> Vec<u8> {
        let from: Vec<String> = from.iter().map(|s| s.to_string()).collect();
        let mut r = Rewriter::new(Vec::new(), &from, to);
        for c in input.chunks(chunk.max(1)) {
            r.write_all(c).unwrap();
        }
        r.finish().unwrap()
    }

    #[test]
    fn every_chunking_gives_the_same_result() {
        let doc = br#"<a href="https://files.pythonhosted.org/packages/a/b/x-1.whl#sha256=00">x</a>
<a href="https://files.pythonhosted.org/packages/c/d/x-2.tar.gz">y</a>https://files.pythonhosted.org"#;
        let want = br#"<a href="http://127.0.0.1:3128/pypi/files/packages/a/b/x-1.whl#sha256=00">x</a>
<a href="http://127.0.0.1:3128/pypi/files/packages/c/d/x-2.tar.gz">y</a>https://files.pythonhosted.org"#;
        for chunk in 1..doc.len() + 1 {
            assert_eq!(
                run(
                    doc,
                    chunk,
                    &["https://files.pythonhosted.org/"],
                    "http://127.0.0.1:3128/pypi/files/"
                ),
                want.to_vec(),
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn several_patterns_and_overlaps() {
        let doc = b"A:http://up/x B:https://registry.npmjs.org/y C:http://upp/z";
        for chunk in 1..doc.len() {
            assert_eq!(
                run(
                    doc,
                    chunk,
                    &["http://up/", "https://registry.npmjs.org/"],
                    "I/"
                ),
                b"A:I/x B:I/y C:http://upp/z".to_vec(),
                "chunk {chunk}"
            );
        }
        assert_eq!(run(b"aaab", 1, &["aab"], "X"), b"aX".to_vec());
        // A short pattern inside a longer one that starts earlier: the
        // longer one wins however the bytes arrive.
        for chunk in 1..12 {
            assert_eq!(
                run(b"..http://a/b/c", chunk, &["a/", "http://a/b/"], "I"),
                b"..Ic".to_vec(),
                "chunk {chunk}"
            );
        }
        assert_eq!(run(b"", 3, &["x"], "y"), b"".to_vec());
        assert_eq!(run(b"xxx", 2, &["x"], ""), b"".to_vec());
    }
}
