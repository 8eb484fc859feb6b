//! HMAC-SHA256 (RFC 2104) over `sha2`, and the key ids the reporter
//! names its session by. The reporter uses Python's `hmac`/`hashlib`; the
//! two must agree byte for byte (checked against RFC 4231's vectors here
//! and against the real reporter in the guard's tests).

use sha2::{Digest, Sha256};

const BLOCK: usize = 64;

/// A keyed MAC, ready to authenticate any number of messages.
#[derive(Clone)]
pub struct Mac {
    inner: Sha256,
    outer: Sha256,
}

impl Mac {
    pub fn new(key: &[u8]) -> Mac {
        let mut k = [0u8; BLOCK];
        if key.len() > BLOCK {
            k[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            k[..key.len()].copy_from_slice(key);
        }
        let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
        let mut inner = Sha256::new();
        inner.update(pad(0x36));
        let mut outer = Sha256::new();
        outer.update(pad(0x5c));
        Mac { inner, outer }
    }

    /// The MAC of `msg`, lowercase hex.
    pub fn hex(&self, msg: &[u8]) -> String {
        let mut i = self.inner.clone();
        i.update(msg);
        let mut o = self.outer.clone();
        o.update(i.finalize());
        hex(&o.finalize())
    }

    /// Whether `tag` (hex) is the MAC of `msg`, compared in constant time.
    pub fn verify(&self, msg: &[u8], tag: &str) -> bool {
        let want = self.hex(msg);
        want.len() == tag.len()
            && want
                .bytes()
                .zip(tag.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

/// The id a session's records carry: the first 16 hex digits of
/// `sha256("cbrun-kid\0" || key)`. It names the key without revealing it.
pub fn key_id(key: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(b"cbrun-kid\0");
    h.update(key);
    hex(&h.finalize())[..16].to_owned()
}

pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4231_vectors() {
        // Test case 1.
        let m = Mac::new(&[0x0b; 20]);
        assert_eq!(
            m.hex(b"Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 2: a short key.
        assert_eq!(
            Mac::new(b"Jefe").hex(b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        assert_eq!(
            Mac::new(&[0xaa; 131]).hex(b"Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn verify_and_key_ids() {
        let m = Mac::new(b"k");
        let tag = m.hex(b"msg");
        assert!(m.verify(b"msg", &tag));
        assert!(!m.verify(b"msg2", &tag));
        assert!(!m.verify(b"msg", &tag[..63]));
        assert!(!Mac::new(b"other").verify(b"msg", &tag));
        assert_eq!(key_id(b"k").len(), 16);
        assert_ne!(key_id(b"k"), key_id(b"l"));
    }
}
