//! Keys and hashing for the unpacker's per-layer sets.
//!
//! Entry names are chosen by whoever wrote the layer, so a set keyed by
//! them must not let the layer choose colliding hashes: a million names in
//! one bucket would take hours to insert. Such sets are keyed instead by a
//! SHA-256 digest of the name under a secret salt drawn per unpack. The
//! keys are then fixed-size (no allocation, however long the name) and
//! spread uniformly whatever the names, so the table's own hash only has
//! to fold the digest's words. Inode identities come from the kernel, not
//! from the layer, and use the same cheap fold.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use sha2::{Digest as _, Sha256};

use crate::sys::at::InodeId;

/// A salted digest standing for a name.
pub(super) type Key = [u8; 32];

pub(super) type Fast = BuildHasherDefault<Fold>;
pub(super) type KeySet = HashSet<Key, Fast>;
pub(super) type IdSet = HashSet<InodeId, Fast>;
pub(super) type IdMap<V> = HashMap<InodeId, V, Fast>;

/// Makes the keys of one unpack.
pub(super) struct Salt([u8; 16]);

impl Salt {
    /// A fresh salt: 128 bits from the standard library's per-process
    /// random hashing keys, which come from the OS's random source.
    pub(super) fn new() -> Salt {
        let rs = RandomState::new();
        let mut s = [0u8; 16];
        s[..8].copy_from_slice(&rs.hash_one(1u8).to_le_bytes());
        s[8..].copy_from_slice(&rs.hash_one(2u8).to_le_bytes());
        Salt(s)
    }

    fn start(&self, domain: u8) -> Sha256 {
        let mut h = Sha256::new();
        h.update(self.0);
        h.update([domain]);
        h
    }

    /// The key of a normalised entry name (its components).
    pub(super) fn name(&self, comps: &[&[u8]]) -> Key {
        let mut h = self.start(b'n');
        for c in comps {
            // Components hold no `/`: this separates them unambiguously.
            h.update(b"/");
            h.update(c);
        }
        h.finalize().into()
    }

    /// The key of `name` inside the directory `parent`.
    pub(super) fn child(&self, parent: InodeId, name: &[u8]) -> Key {
        let mut h = self.start(b'c');
        h.update(parent.0.to_le_bytes());
        h.update(parent.1.to_le_bytes());
        h.update(name);
        h.finalize().into()
    }
}

/// Folds 64-bit words by rotate, xor and multiply: enough for keys that
/// are already uniform (digests) or that no layer chooses (inode ids).
#[derive(Default, Clone, Copy)]
pub(super) struct Fold(u64);

impl Fold {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(26) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Hasher for Fold {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_names_parents_and_salts() {
        let s = Salt::new();
        assert_eq!(s.name(&[b"a", b"b"]), s.name(&[b"a", b"b"]));
        assert_ne!(s.name(&[b"a", b"b"]), s.name(&[b"ab"]));
        assert_ne!(s.name(&[b"a"]), s.child((0, 0), b"a"));
        assert_ne!(s.child((1, 2), b"x"), s.child((1, 3), b"x"));
        assert_ne!(s.child((1, 2), b"x"), s.child((1, 2), b"y"));
        // Another unpack, another salt: a layer cannot know the keys.
        assert_ne!(Salt::new().name(&[b"a"]), s.name(&[b"a"]));
    }

    #[test]
    fn fold_spreads_sequential_inodes_over_buckets() {
        let fast = Fast::default();
        let low: HashSet<u64> = (0..4096u64)
            .map(|ino| fast.hash_one((7u64, ino)) & 4095)
            .collect();
        // Uniform hashing fills about 63% of 4096 buckets; a fold that
        // kept inode order would fill all, a broken one far fewer.
        assert!(low.len() > 2400, "{} of 4096 buckets used", low.len());
    }
}
