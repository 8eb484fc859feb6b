//! A reader that hashes what passes through it on a second thread.
//!
//! Unpacking an uncompressed layer is bound by the filesystem work and by
//! SHA-256 in about equal parts; hashing beside the extraction instead of
//! in line with it is what lets `image unpack` keep up with `tar -x` while
//! still checking every byte. The bytes hashed are the very bytes handed
//! out: each chunk goes to the hasher, unchanged, once the consumer has
//! had all of it (not a second read of the file), so what is checked is
//! what was used. The digest is only known at the end; callers must not
//! let what they made be used before [`ThreadedDigestReader::finish`].
//!
//! Tried and dropped, on the bench image of `bench/image.sh`: a second,
//! independent read of the file by the hashing thread (slower: the hasher
//! copies everything once more), and a memory map shared by both threads
//! (fewer system calls for the reader, yet about 7% slower overall).
//!
//! The thread lives only as long as the reader: [`ThreadedDigestReader::finish`]
//! and `Drop` join it, so the process is single-threaded again before it
//! forks a container.

use std::io::{self, BufRead, Read};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use sha2::{Digest as _, Sha256};

use super::digest::Digest;

/// Bytes handed to the hasher at once. Each hand-over wakes the hasher
/// up, so chunks are large.
const CHUNK: usize = 1 << 20;
/// Bytes read from the source at once, into the chunk being filled. Small
/// enough that what the kernel copied in is still in this core's L2 cache
/// when the consumer copies it out again (a 1 MiB read is not).
const READ: usize = 128 << 10;
/// Chunks the hasher may lag behind by (bounds memory to about 6 MiB).
const IN_FLIGHT: usize = 4;
/// Below this many bytes a thread costs more than it saves.
pub const THREAD_MIN: u64 = 1 << 20;

struct Worker {
    tx: SyncSender<Vec<u8>>,
    back: Receiver<Vec<u8>>,
    handle: JoinHandle<Sha256>,
}

/// Hashes and counts everything read on a thread of its own;
/// [`Self::finish`] gives the digest. A [`BufRead`], so no second buffer
/// is needed in front of it.
///
/// The chunk being filled belongs to the reader; once every byte of it has
/// been read in and handed out, it goes to the hasher as it is, and is
/// never written again until the hasher gives it back.
pub struct ThreadedDigestReader<R> {
    inner: R,
    chunk: Vec<u8>,
    /// Bytes of `chunk` read from the source.
    filled: usize,
    /// Bytes of `chunk` handed out.
    pos: usize,
    len: u64,
    eof: bool,
    worker: Option<Worker>,
    /// Buffers the hasher is done with, for reuse: a fresh one has to be
    /// zeroed and faulted in, and freeing large blocks makes malloc
    /// consolidate its heap.
    spare: Vec<Vec<u8>>,
}

impl<R: Read> ThreadedDigestReader<R> {
    /// `None` when no thread can be started (a thread or pid limit): the
    /// caller hashes in line then.
    pub fn new(inner: R) -> Option<Self> {
        let worker = spawn_worker()?;
        Some(ThreadedDigestReader {
            inner,
            chunk: Vec::new(),
            filled: 0,
            pos: 0,
            len: 0,
            eof: false,
            worker: Some(worker),
            spare: Vec::new(),
        })
    }

    /// The digest and length of everything read so far; joins the thread.
    pub fn finish(mut self) -> io::Result<(Digest, u64)> {
        self.hand_over()?;
        let w = self.worker.take().expect("joined once");
        drop(w.tx);
        let hasher = w
            .handle
            .join()
            .map_err(|_| io::Error::other("the hashing thread panicked"))?;
        Ok((Digest::from_hasher(hasher), self.len))
    }

    /// Sends what the current chunk holds to the hasher and starts a new
    /// one. Called only when every byte read in was handed out.
    fn hand_over(&mut self) -> io::Result<()> {
        if self.filled == 0 {
            return Ok(());
        }
        let next = self.recycled();
        let mut full = std::mem::replace(&mut self.chunk, next);
        full.truncate(self.filled);
        self.filled = 0;
        self.pos = 0;
        let w = self.worker.as_ref().expect("running until finish");
        w.tx.send(full)
            .map_err(|_| io::Error::other("the hashing thread stopped"))
    }

    /// Reads the next piece of the source into the current chunk. Sets
    /// `eof` at end of input.
    fn refill(&mut self) -> io::Result<()> {
        if self.filled == CHUNK {
            self.hand_over()?;
        }
        if self.chunk.len() != CHUNK {
            // Zeroed once per buffer: a recycled one is already full length.
            self.chunk.resize(CHUNK, 0);
        }
        let end = (self.filled + READ).min(CHUNK);
        loop {
            match self.inner.read(&mut self.chunk[self.filled..end]) {
                Ok(0) => {
                    self.eof = true;
                    // Nothing more will come: let the hasher finish
                    // while the consumer does.
                    return self.hand_over();
                }
                Ok(n) => {
                    self.filled += n;
                    self.len += n as u64;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// A buffer the hasher has finished with, or a new one.
    fn recycled(&mut self) -> Vec<u8> {
        if let Some(w) = &self.worker {
            self.spare.extend(w.back.try_iter());
        }
        self.spare.pop().unwrap_or_default()
    }
}

fn spawn_worker() -> Option<Worker> {
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT);
    // Room for every chunk that can exist at once, so none is dropped.
    let (back_tx, back) = mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT + 4);
    let handle = std::thread::Builder::new()
        .name("cbrun-sha256".into())
        .spawn(move || {
            let mut h = Sha256::new();
            for c in rx {
                h.update(&c[..]);
                let _ = back_tx.try_send(c);
            }
            h
        })
        .ok()?;
    Some(Worker { tx, back, handle })
}

impl<R: Read> BufRead for ThreadedDigestReader<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos >= self.filled && !self.eof {
            self.refill()?;
        }
        Ok(&self.chunk[self.pos..self.filled])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.filled);
    }
}

impl<R: Read> Read for ThreadedDigestReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R> Drop for ThreadedDigestReader<R> {
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            drop(w.tx);
            let _ = w.handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out at most `step` bytes per read, like a pipe.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(self.1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 253) as u8).collect()
    }

    #[test]
    fn same_bytes_and_digest_as_hashing_in_line() {
        for n in [
            0,
            1,
            4095,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            5 * CHUNK + 17,
            40 * CHUNK,
        ] {
            let src = data(n);
            for step in [1 << 30, 1000, 65536] {
                let mut r = ThreadedDigestReader::new(Trickle(&src, step)).unwrap();
                let mut out = Vec::new();
                // Odd-sized reads, so chunk boundaries fall mid-read.
                let mut buf = [0u8; 3001];
                loop {
                    let k = r.read(&mut buf).unwrap();
                    if k == 0 {
                        break;
                    }
                    out.extend_from_slice(&buf[..k]);
                }
                assert_eq!(out, src, "n={n} step={step}");
                let got = r.finish().unwrap();
                assert_eq!(got, (Digest::of_bytes(&src), n as u64), "n={n}");
            }
        }
    }

    #[test]
    fn buffers_are_reused() {
        let src = data(200 * CHUNK);
        let mut r = ThreadedDigestReader::new(&src[..]).unwrap();
        let mut seen = std::collections::HashSet::new();
        loop {
            let avail = r.fill_buf().unwrap();
            if avail.is_empty() {
                break;
            }
            let n = avail.len();
            seen.insert(r.chunk.as_ptr() as usize);
            r.consume(n);
        }
        // At most the chunks that can be in flight at once, not one per
        // chunk read.
        assert!(seen.len() <= IN_FLIGHT + 4, "{} buffers", seen.len());
        assert_eq!(r.finish().unwrap().0, Digest::of_bytes(&src));
    }

    #[test]
    fn digest_covers_what_was_taken_in_and_drop_joins() {
        let src = data(10 * CHUNK);
        let mut first = vec![0u8; 100];
        let mut r = ThreadedDigestReader::new(&src[..]).unwrap();
        r.read_exact(&mut first).unwrap();
        drop(r);
        // The source is read READ bytes at a time, so a partial read
        // hashes the first piece: the digest is of what was taken in.
        let mut r = ThreadedDigestReader::new(&src[..]).unwrap();
        r.read_exact(&mut first).unwrap();
        let (d, len) = r.finish().unwrap();
        assert_eq!(len, READ as u64);
        assert_eq!(d, Digest::of_bytes(&src[..READ]));
    }

    #[test]
    fn source_errors_pass_through() {
        struct Fails;
        impl Read for Fails {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        let mut r = ThreadedDigestReader::new(Fails).unwrap();
        let e = r.read(&mut [0u8; 10]).unwrap_err();
        assert!(e.to_string().contains("disk on fire"));
    }
}
