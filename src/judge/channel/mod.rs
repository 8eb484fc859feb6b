//! The judge's result channel: test results that come from cbrun's own
//! reporter, never from what the judged code prints.
//!
//! Two pipes cross the sandbox wall (handed in with `SandboxConfig::pass_fds`
//! at fixed numbers; everything else above 2 is closed):
//!
//! - [`REPORT_FD`], the write end of the *record* pipe. Its read end stays
//!   with cbrun, which drains it from the run loop ([`Drain`] is the
//!   `RunHooks`) and, once the sandbox is dead and cbrun has dropped its own
//!   copy of the write end, reads it to EOF. Capped at [`MAX_BYTES`].
//! - [`TOKEN_FD`], the read end of the *token* pipe. Before the sandbox
//!   starts cbrun writes [`TOKENS`] random 32-byte keys into it and closes
//!   the write end: each test process's reporter takes one (a single
//!   `read` of 32 bytes), so a key is known only to the first reader. A
//!   reporter that finds none left raises an alarm.
//!
//! Each reporter session authenticates its records with its key (HMAC-SHA256,
//! [`mac`]) and numbers them; [`records`] verifies and adds them up. The
//! reporter itself is `guard/scripts/judge_reporter.py` (loaded like the
//! judge hooks), plus a pytest plugin.

pub mod mac;
pub mod records;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sandbox::config::PassFd;
use crate::sandbox::run::RunHooks;

pub use records::{read_channel, tally, ChannelReport, Keys, Tally};

/// The record pipe's write end inside the sandbox.
pub const REPORT_FD: RawFd = 61;
/// The token pipe's read end inside the sandbox.
pub const TOKEN_FD: RawFd = 62;
/// Keys handed out: one per test process that reports (32 KiB, within a
/// pipe's buffer).
pub const TOKENS: usize = 1024;
/// The most record bytes cbrun keeps.
pub const MAX_BYTES: usize = 64 << 20;
/// The variables telling the reporter where its descriptors are.
pub const ENV_REPORT_FD: &str = "CBRUN_REPORT_FD";
pub const ENV_TOKEN_FD: &str = "CBRUN_TOKEN_FD";

/// A channel for one judge run.
pub struct Channel {
    keys: Vec<[u8; 32]>,
    pass: Vec<PassFd>,
    drain: Drain,
}

impl Channel {
    /// Both pipes, the tokens written and the token pipe's write end closed.
    pub fn open() -> io::Result<Channel> {
        let mut keys = vec![[0u8; 32]; TOKENS];
        let mut rnd = File::open("/dev/urandom")?;
        for k in &mut keys {
            rnd.read_exact(k)?;
        }
        let (rec_r, rec_w) = io::pipe()?;
        let (tok_r, tok_w) = io::pipe()?;
        // Nobody reads yet: never block. A pipe is 64 KiB, but only one
        // page for a user over the kernel's pipe quota; the keys that do
        // not fit are not handed out.
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        fcntl(tok_w.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(io::Error::from)?;
        let mut tok_w = File::from(OwnedFd::from(tok_w));
        let mut handed = 0;
        for k in &keys {
            match tok_w.write(k) {
                Ok(32) => handed += 1,
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        keys.truncate(handed);
        drop(tok_w);
        Ok(Channel {
            keys,
            pass: vec![
                PassFd {
                    fd: Arc::new(OwnedFd::from(rec_w)),
                    target: REPORT_FD,
                },
                PassFd {
                    fd: Arc::new(OwnedFd::from(tok_r)),
                    target: TOKEN_FD,
                },
            ],
            drain: Drain::new(File::from(OwnedFd::from(rec_r)), MAX_BYTES),
        })
    }

    /// The descriptors for `SandboxConfig::pass_fds`. The caller must drop
    /// every copy (the config's) once the sandbox has ended, or
    /// [`Channel::finish`] waits for an EOF that never comes.
    pub fn take_pass_fds(&mut self) -> Vec<PassFd> {
        std::mem::take(&mut self.pass)
    }

    /// The environment the reporter reads.
    pub fn env() -> Vec<(String, String)> {
        vec![
            (ENV_REPORT_FD.to_owned(), REPORT_FD.to_string()),
            (ENV_TOKEN_FD.to_owned(), TOKEN_FD.to_string()),
        ]
    }

    /// The run hook that drains the record pipe while the sandbox runs.
    pub fn hooks(&mut self) -> &mut Drain {
        &mut self.drain
    }

    /// Reads what is left (waiting at most `grace` for the EOF) and
    /// verifies it.
    pub fn finish(mut self, grace: Duration) -> ChannelReport {
        self.pass.clear();
        let closed = self.drain.read_to_eof(grace);
        let mut report = read_channel(
            &self.drain.buf,
            self.drain.overflowed,
            &Keys::new(&self.keys),
        );
        if !closed {
            report
                .tampered
                .push("the result channel was still open after the sandbox ended".into());
        }
        report
    }
}

/// Collects a pipe's bytes up to a cap; past it, reads and drops them so
/// the writer never blocks on a full pipe.
pub struct Drain {
    file: File,
    buf: Vec<u8>,
    cap: usize,
    overflowed: bool,
    eof: bool,
}

impl Drain {
    pub fn new(file: File, cap: usize) -> Drain {
        Drain {
            file,
            buf: Vec::new(),
            cap,
            overflowed: false,
            eof: false,
        }
    }

    /// One read (the caller knows the pipe is readable).
    fn read_once(&mut self) {
        let mut chunk = [0u8; 65536];
        match self.file.read(&mut chunk) {
            Ok(0) => self.eof = true,
            Ok(n) => {
                let room = self.cap.saturating_sub(self.buf.len());
                if n > room {
                    self.overflowed = true;
                }
                self.buf.extend_from_slice(&chunk[..n.min(room)]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => self.eof = true,
        }
    }

    /// Reads until EOF or `grace` passes; whether EOF came.
    fn read_to_eof(&mut self, grace: Duration) -> bool {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let end = Instant::now() + grace;
        while !self.eof {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let ms = PollTimeout::try_from(left.as_millis().min(60_000) as i32 + 1)
                .unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.file.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, ms) {
                Ok(0) => return false,
                Ok(_) => self.read_once(),
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return false,
            }
        }
        true
    }
}

impl RunHooks for Drain {
    fn watch_fds(&self) -> Vec<BorrowedFd<'_>> {
        if self.eof {
            Vec::new()
        } else {
            vec![self.file.as_fd()]
        }
    }

    fn readable(&mut self, fd: RawFd) {
        if fd == self.file.as_raw_fd() {
            self.read_once();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_readable_once_and_records_drain_to_eof() {
        let mut ch = Channel::open().unwrap();
        let pass = ch.take_pass_fds();
        assert_eq!(pass[0].target, REPORT_FD);
        // The token pipe holds exactly the keys, then EOF.
        let mut tok = File::from(pass[1].fd.try_clone().unwrap());
        let mut all = Vec::new();
        tok.read_to_end(&mut all).unwrap();
        assert_eq!(all.len(), 32 * ch.keys.len());
        assert!(ch.keys.len() >= 128, "{}", ch.keys.len());
        assert_eq!(&all[..32], &ch.keys[0]);
        // A record written under the first key verifies.
        let key = ch.keys[0];
        let body = format!(
            "{{\"k\":\"{}\",\"n\":0,\"t\":\"hello\",\"pid\":3}}",
            mac::key_id(&key)
        );
        let line = format!("{} {body}\n", mac::Mac::new(&key).hex(body.as_bytes()));
        let mut w = File::from(pass[0].fd.try_clone().unwrap());
        w.write_all(line.as_bytes()).unwrap();
        let fd = ch.drain.file.as_raw_fd();
        ch.hooks().readable(fd);
        drop((w, tok, pass));
        let r = ch.finish(Duration::from_secs(2));
        assert!(r.tampered.is_empty(), "{:?}", r.tampered);
        assert_eq!(r.sessions.len(), 1);
        assert_eq!(r.sessions[0].pid, Some(3));
    }

    #[test]
    fn an_open_write_end_times_out_and_a_flood_is_capped() {
        let (r, mut w) = io::pipe().unwrap();
        let mut d = Drain::new(File::from(OwnedFd::from(r)), 10);
        w.write_all(b"0123456789abcdef").unwrap();
        assert!(!d.read_to_eof(Duration::from_millis(100)));
        assert!(d.overflowed);
        assert_eq!(d.buf.len(), 10);
        drop(w);
        assert!(d.read_to_eof(Duration::from_secs(1)));
    }
}
