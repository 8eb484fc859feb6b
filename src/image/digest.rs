//! Content digests (`sha256:<64 hex>`), the keys of the image store.

use std::fmt;
use std::io::{self, Read, Write};
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// A sha256 content digest, always lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error("digest {0:?}: expected sha256:<64 lowercase hex digits>")]
    Malformed(String),
    #[error("content digest mismatch: expected {expected}, got {actual}")]
    Mismatch { expected: Digest, actual: Digest },
}

impl Digest {
    pub fn parse(s: &str) -> Result<Digest, DigestError> {
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| DigestError::Malformed(s.to_owned()))?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(DigestError::Malformed(s.to_owned()));
        }
        Ok(Digest {
            hex: hex.to_owned(),
        })
    }

    pub fn of_bytes(data: &[u8]) -> Digest {
        Digest::from_hasher(Sha256::new_with_prefix(data))
    }

    /// Digest of everything `r` yields.
    pub fn of_reader(mut r: impl Read) -> io::Result<Digest> {
        let mut w = DigestWriter::new(io::sink());
        io::copy(&mut r, &mut w)?;
        Ok(w.finish().0)
    }

    pub(super) fn from_hasher(h: Sha256) -> Digest {
        let out = h.finalize();
        let mut hex = String::with_capacity(64);
        for b in out {
            hex.push_str(&format!("{b:02x}"));
        }
        Digest { hex }
    }

    /// The 64 hex digits (file names in the store).
    pub fn hex(&self) -> &str {
        &self.hex
    }

    pub fn algorithm(&self) -> &'static str {
        "sha256"
    }

    /// `Ok` when `actual` is this digest.
    pub fn verify(&self, actual: &Digest) -> Result<(), DigestError> {
        if self == actual {
            Ok(())
        } else {
            Err(DigestError::Mismatch {
                expected: self.clone(),
                actual: actual.clone(),
            })
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Digest::parse(s)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Digest::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A writer that hashes (and counts) what passes through it.
pub struct DigestWriter<W> {
    inner: W,
    hasher: Sha256,
    len: u64,
}

impl<W: Write> DigestWriter<W> {
    pub fn new(inner: W) -> Self {
        DigestWriter {
            inner,
            hasher: Sha256::new(),
            len: 0,
        }
    }

    /// The digest and length of everything written, and the inner writer.
    pub fn finish(self) -> (Digest, u64, W) {
        (Digest::from_hasher(self.hasher), self.len, self.inner)
    }
}

impl<W: Write> Write for DigestWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that hashes what is read through it.
pub struct DigestReader<R> {
    inner: R,
    hasher: Sha256,
    len: u64,
}

impl<R: Read> DigestReader<R> {
    pub fn new(inner: R) -> Self {
        DigestReader {
            inner,
            hasher: Sha256::new(),
            len: 0,
        }
    }
    pub fn finish(self) -> (Digest, u64) {
        (Digest::from_hasher(self.hasher), self.len)
    }
}

impl<R: Read> Read for DigestReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_value_and_round_trip() {
        let d = Digest::of_bytes(b"");
        assert_eq!(
            d.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(&d.to_string()).unwrap(), d);
        assert_eq!(Digest::of_reader(&b""[..]).unwrap(), d);
    }

    #[test]
    fn malformed_digests_are_refused() {
        for bad in [
            "",
            "sha256:",
            "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha256:../../etc/passwd",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
        ] {
            assert!(Digest::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn writer_and_reader_hash_what_passes() {
        let mut w = DigestWriter::new(Vec::new());
        w.write_all(b"hello").unwrap();
        let (d, n, v) = w.finish();
        assert_eq!((n, v.as_slice()), (5, &b"hello"[..]));
        assert_eq!(d, Digest::of_bytes(b"hello"));
        let mut r = DigestReader::new(&b"hello"[..]);
        io::copy(&mut r, &mut io::sink()).unwrap();
        assert_eq!(r.finish(), (d, 5));
        assert!(Digest::of_bytes(b"x")
            .verify(&Digest::of_bytes(b"y"))
            .is_err());
    }
}
