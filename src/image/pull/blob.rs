//! Streaming one blob into the sink: a reader that resumes a broken
//! download with `Range: bytes=N-` (or, when the server ignores the range,
//! re-reads from the start and discards what the sink already has), keeps
//! a partial file for a later run, and refuses to hand the sink the last
//! byte of a blob whose digest is wrong.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::thread;

use super::http::Client;
use super::{BlobSink, ErrorKind, PullError};
use crate::image::digest::{Digest, DigestWriter};

/// Reconnects per blob, all told, whatever progress is made in between.
const MAX_RECONNECTS: u32 = 100;

/// A descriptor we fetch: digest and the size the manifest promises.
pub(crate) struct Want<'a> {
    pub digest: &'a Digest,
    pub size: u64,
    /// "config", "layer": for messages.
    pub role: &'a str,
}

#[derive(Default)]
pub(crate) struct BlobStats {
    pub downloaded: u64,
    pub skipped: u64,
}

/// Fetch one blob into `sink`, unless it has it.
pub(crate) fn fetch_blob(
    client: &Client,
    sink: &dyn BlobSink,
    want: &Want<'_>,
    stats: &mut BlobStats,
) -> Result<(), PullError> {
    let ctx = format!("{} {}", want.role, want.digest);
    if sink.has_blob(want.digest) {
        stats.skipped += 1;
        return Ok(());
    }
    // Second round only after a digest mismatch with a stale partial file.
    for round in 0..2 {
        let partial = sink.partial_path(want.digest);
        let mut reader = BlobReader::new(client, want, &ctx, partial.clone())
            .map_err(|e| PullError::new(&ctx, ErrorKind::Io(e)))?;
        let had_prefix = reader.prefix_len > 0;
        let opened = reader.open();
        let result = match opened {
            Ok(()) => sink.put_blob(&mut reader, want.digest),
            Err(e) => {
                stats.downloaded += reader.net_bytes;
                return Err(e);
            }
        };
        stats.downloaded += reader.net_bytes;
        let remove_partial = || {
            if let Some(p) = &partial {
                let _ = fs::remove_file(p);
            }
        };
        match result {
            Ok(n) => {
                if !reader.verified {
                    return Err(PullError::new(
                        &ctx,
                        ErrorKind::Sink(io::Error::other(
                            "the store stopped reading before the end of the blob",
                        )),
                    ));
                }
                if n != want.size {
                    return Err(PullError::new(
                        &ctx,
                        ErrorKind::Sink(io::Error::other(format!(
                            "the store wrote {n} bytes of a {}-byte blob",
                            want.size
                        ))),
                    ));
                }
                remove_partial();
                return Ok(());
            }
            Err(sink_err) => match reader.failure.take() {
                Some(f) => {
                    let mismatch = matches!(f.kind, ErrorKind::Digest(_));
                    if mismatch {
                        // The partial data (or the server) is bad: never resume from it.
                        remove_partial();
                        if had_prefix && round == 0 {
                            continue;
                        }
                    }
                    return Err(f);
                }
                None => return Err(PullError::new(&ctx, ErrorKind::Sink(sink_err))),
            },
        }
    }
    unreachable!("the second round always returns")
}

pub(crate) struct BlobReader<'a> {
    client: &'a Client,
    ctx: String,
    digest: Digest,
    size: u64,
    /// Bytes handed to the consumer so far.
    pos: u64,
    /// Bytes of a partial file replayed before the network.
    prefix: Option<File>,
    pub prefix_len: u64,
    /// The partial file, appended with every network byte.
    tee: Option<File>,
    body: Option<Box<dyn Read + Send + Sync>>,
    hasher: Option<DigestWriter<io::Sink>>,
    /// Interruptions since the last progress, and in all.
    stalled: u32,
    reconnects: u32,
    progressed: bool,
    pub net_bytes: u64,
    /// The digest was checked and matched at the end.
    pub verified: bool,
    /// Why reading failed (the sink sees only an io::Error).
    pub failure: Option<PullError>,
}

impl<'a> BlobReader<'a> {
    fn new(
        client: &'a Client,
        want: &Want<'_>,
        ctx: &str,
        partial: Option<PathBuf>,
    ) -> io::Result<BlobReader<'a>> {
        let (mut prefix, mut prefix_len, mut tee) = (None, 0, None);
        if let Some(p) = partial {
            if let Some(dir) = p.parent() {
                fs::create_dir_all(dir)?;
            }
            let f = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&p)?;
            let mut len = f.metadata()?.len();
            if len > want.size {
                f.set_len(0)?;
                len = 0;
            }
            let mut app = f.try_clone()?;
            app.seek(SeekFrom::Start(len))?;
            let mut rd = File::open(&p)?;
            rd.seek(SeekFrom::Start(0))?;
            prefix = Some(rd);
            prefix_len = len;
            tee = Some(app);
        }
        Ok(BlobReader {
            client,
            ctx: ctx.to_owned(),
            digest: want.digest.clone(),
            size: want.size,
            pos: 0,
            prefix,
            prefix_len,
            tee,
            body: None,
            hasher: Some(DigestWriter::new(io::sink())),
            stalled: 0,
            reconnects: 0,
            progressed: false,
            net_bytes: 0,
            verified: false,
            failure: None,
        })
    }

    /// Connect for the bytes past the partial file, so that HTTP errors
    /// (404, auth) surface before the sink is involved.
    fn open(&mut self) -> Result<(), PullError> {
        if self.prefix_len < self.size {
            let start = self.prefix_len;
            self.connect(start)?;
        }
        Ok(())
    }

    /// A response positioned at byte `at` of the blob.
    fn connect(&mut self, at: u64) -> Result<(), PullError> {
        let url = self.client.repo_url(&format!("blobs/{}", self.digest));
        let mut ranged = at > 0;
        loop {
            let headers: Vec<(&str, String)> = if ranged {
                vec![("Range", format!("bytes={at}-"))]
            } else {
                vec![]
            };
            let a = self.client.get(&url, &headers, &self.ctx)?;
            let status = a.resp.status();
            let skip = match status {
                206 => {
                    let start = a
                        .resp
                        .header("content-range")
                        .and_then(parse_content_range_start)
                        .ok_or_else(|| {
                            PullError::new(
                                &self.ctx,
                                ErrorKind::Transport("206 without a usable Content-Range".into()),
                            )
                        })?;
                    if start > at {
                        return Err(PullError::new(
                            &self.ctx,
                            ErrorKind::Transport(format!(
                                "asked for bytes from {at}, got from {start}"
                            )),
                        ));
                    }
                    at - start
                }
                // The range was not honoured: the whole blob again.
                200 => at,
                416 if ranged => {
                    ranged = false;
                    continue;
                }
                _ => return Err(PullError::new(&self.ctx, super::http::status_error(a.resp))),
            };
            let mut body = a.resp.into_reader();
            if skip > 0 {
                let got = io::copy(&mut (&mut body).take(skip), &mut io::sink()).map_err(|e| {
                    PullError::new(&self.ctx, ErrorKind::Transport(format!("reading: {e}")))
                })?;
                self.net_bytes += got;
                if got < skip {
                    return Err(PullError::new(
                        &self.ctx,
                        ErrorKind::Transport("connection closed early".into()),
                    ));
                }
            }
            self.body = Some(body);
            return Ok(());
        }
    }

    /// After a broken read: back off and reconnect at `pos`, within the
    /// retry budget.
    fn recover(&mut self, why: String) -> io::Result<()> {
        self.body = None;
        if self.progressed {
            self.stalled = 0;
            self.progressed = false;
        }
        self.stalled += 1;
        self.reconnects += 1;
        if self.stalled > self.client.retries() || self.reconnects > MAX_RECONNECTS {
            return Err(self.fail(
                PullError::new(
                    &self.ctx,
                    ErrorKind::Transport(format!("{why} at byte {} of {}", self.pos, self.size)),
                )
                .after_attempts(self.stalled),
            ));
        }
        thread::sleep(self.client.tuning.backoff(self.stalled, None));
        let at = self.pos;
        match self.connect(at) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn fail(&mut self, e: PullError) -> io::Error {
        let kind = if matches!(e.kind, ErrorKind::Digest(_)) {
            io::ErrorKind::InvalidData
        } else {
            io::ErrorKind::Other
        };
        let err = io::Error::new(kind, e.to_string());
        self.failure = Some(e);
        err
    }

    /// Account for `n` bytes in `buf` handed out; check the digest at the end.
    fn advance(&mut self, buf: &[u8]) -> io::Result<()> {
        let h = self.hasher.as_mut().expect("hasher lives until the end");
        h.write_all(buf)?;
        self.pos += buf.len() as u64;
        if self.pos == self.size {
            self.check()?;
        }
        Ok(())
    }

    fn check(&mut self) -> io::Result<()> {
        if let Some(h) = self.hasher.take() {
            let (actual, _, _) = h.finish();
            if let Err(e) = self.digest.verify(&actual) {
                return Err(self.fail(PullError::new(&self.ctx, ErrorKind::Digest(e))));
            }
            self.verified = true;
        }
        Ok(())
    }
}

impl Read for BlobReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.failure.is_some() {
            return Err(io::Error::other("blob download already failed"));
        }
        if self.pos >= self.size {
            if !self.verified {
                self.check()?;
            }
            return Ok(0);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.size - self.pos).unwrap_or(usize::MAX));
        if self.pos < self.prefix_len {
            let room = want.min(usize::try_from(self.prefix_len - self.pos).unwrap_or(usize::MAX));
            let f = self.prefix.as_mut().expect("prefix file");
            let n = f.read(&mut buf[..room])?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "partial download file shrank while being read",
                ));
            }
            self.advance(&buf[..n])?;
            return Ok(n);
        }
        loop {
            if self.body.is_none() {
                self.recover("no connection".into())?;
            }
            let body = self.body.as_mut().expect("connected");
            match body.read(&mut buf[..want]) {
                Ok(0) => self.recover("connection closed early".into())?,
                Ok(n) => {
                    self.net_bytes += n as u64;
                    self.progressed = true;
                    if let Some(t) = self.tee.as_mut() {
                        if let Err(e) = t.write_all(&buf[..n]) {
                            return Err(self.fail(PullError::new(&self.ctx, ErrorKind::Io(e))));
                        }
                    }
                    self.advance(&buf[..n])?;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.recover(e.to_string())?,
            }
        }
    }
}

/// The first byte of `bytes START-END/TOTAL`.
fn parse_content_range_start(v: &str) -> Option<u64> {
    let rest = v.trim().strip_prefix("bytes")?.trim_start();
    let (range, _total) = rest.split_once('/')?;
    let (start, end) = range.split_once('-')?;
    let start = start.trim().parse::<u64>().ok()?;
    let end = end.trim().parse::<u64>().ok()?;
    (end >= start).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range() {
        assert_eq!(parse_content_range_start("bytes 100-199/200"), Some(100));
        assert_eq!(parse_content_range_start("bytes 0-0/*"), Some(0));
        assert_eq!(parse_content_range_start("bytes */200"), None);
        assert_eq!(parse_content_range_start("items 1-2/3"), None);
        assert_eq!(parse_content_range_start("bytes 5-1/9"), None);
    }
}
