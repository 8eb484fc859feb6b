//! The store as the destination of a registry pull.

use std::io::{self, Read};
use std::path::PathBuf;

use super::digest::Digest;
use super::pull::BlobSink;
use super::store::Store;

impl BlobSink for Store {
    fn has_blob(&self, d: &Digest) -> bool {
        Store::has_blob(self, d)
    }

    fn put_blob(&self, r: &mut dyn Read, expected: &Digest) -> io::Result<u64> {
        Store::put_blob(self, r, Some(expected))
            .map(|(_, n)| n)
            .map_err(|e| io::Error::other(crate::error::chain(&e)))
    }

    /// Broken downloads resume from here (kept across runs until gc).
    fn partial_path(&self, d: &Digest) -> Option<PathBuf> {
        Some(self.tmp_dir().join(format!("partial-{}", d.hex())))
    }
}
