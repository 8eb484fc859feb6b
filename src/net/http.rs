//! HTTP/1.1 wire handling shared by the egress proxy and the registry
//! index: reading and parsing request heads, the forwarded request head,
//! and writing responses (short fixed bodies, or streamed with chunked
//! framing).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::policy::Host;

/// Bound on writing a short error response to a client that does not read.
const RESPONSE_WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// After an error response, how long to keep reading what the client still
/// sends, so that closing with unread data (which sends RST) does not
/// destroy the response before the client has read it.
const RESPONSE_DRAIN_TIMEOUT: Duration = Duration::from_millis(500);

/// Writes a short `Connection: close` response, then lets the client read
/// it before the socket closes.
pub fn respond(mut stream: TcpStream, status: u16, phrase: &str, body: &str) {
    let _ = stream.set_write_timeout(Some(RESPONSE_WRITE_TIMEOUT));
    let msg = format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(msg.as_bytes()).is_err() {
        return;
    }
    finish_response(stream);
}

/// Ends a response that has been written: half-closes, then reads what the
/// client still sends for a moment before the socket closes.
pub fn finish_response(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(RESPONSE_DRAIN_TIMEOUT));
    let deadline = Instant::now() + RESPONSE_DRAIN_TIMEOUT;
    let mut sink = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// The 503 for a connection over the cap. This runs on the accept thread,
/// so it must not block: one non-blocking write (a short response fits in
/// an empty socket buffer) and close, without reading the request.
pub fn respond_busy(mut stream: TcpStream, body: &str) {
    let msg = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.set_nonblocking(true).is_ok() {
        let _ = stream.write(msg.as_bytes());
        let _ = stream.shutdown(Shutdown::Write);
    }
}

/// Where a request wants to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// As written, without brackets around IPv6 literals.
    pub host: String,
    pub port: u16,
}

impl Target {
    /// `host` normalized for the log (lowercase, no trailing dot), or as
    /// written if it does not parse.
    pub fn log_host(&self) -> String {
        match Host::parse(&self.host) {
            Ok(Host::Name(n)) => n,
            Ok(Host::Ip(ip)) => ip.to_string(),
            Err(_) => self.host.clone(),
        }
    }

    /// `host:port` for messages, IPv6 bracketed.
    pub fn display(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A parsed request head.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: &'a str,
    /// Where a CONNECT or absolute-form request goes; `None` for an
    /// origin-form request (`GET /path`), which asks the proxy itself.
    pub target: Option<Target>,
    /// Origin-form path and query; empty for CONNECT.
    pub path: String,
    /// `host[:port]` as in the URL, for the forwarded `Host` header.
    pub authority: String,
    pub version: &'a str,
    pub headers: Vec<(&'a str, &'a [u8])>,
}

impl Request<'_> {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn parse_port(p: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("bad port {p:?}")),
    }
}

/// Splits `host:port` (or `[v6]:port`); `default_port` applies when there
/// is no port.
pub fn split_authority(auth: &str, default_port: Option<u16>) -> Result<Target, String> {
    let (host, port) = if let Some(rest) = auth.strip_prefix('[') {
        let end = rest.find(']').ok_or("unclosed `[` in authority")?;
        let host = &rest[..end];
        match &rest[end + 1..] {
            "" => (host, None),
            tail => match tail.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None => return Err(format!("bad authority {auth:?}")),
            },
        }
    } else {
        match auth.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err(format!("IPv6 literal must be bracketed in {auth:?}"))
            }
            Some((h, p)) => (h, Some(p)),
            None => (auth, None),
        }
    };
    if host.is_empty() {
        return Err(format!("no host in {auth:?}"));
    }
    let port = match (port, default_port) {
        (Some(p), _) if !p.is_empty() => parse_port(p)?,
        (_, Some(d)) => d,
        _ => return Err(format!("CONNECT target {auth:?} needs a port")),
    };
    Ok(Target {
        host: host.to_owned(),
        port,
    })
}

/// Parses a request head (everything up to and including the blank line).
pub fn parse_request(head: &[u8]) -> Result<Request<'_>, String> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let line = lines.next().unwrap_or_default();
    if !line.iter().all(|&b| (0x20..0x7f).contains(&b)) {
        return Err("request line is not printable ASCII".into());
    }
    // Checked ASCII just above, so this cannot fail.
    let line = std::str::from_utf8(line).map_err(|_| "request line is not ASCII")?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("bad request line {line:?}"));
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(format!("bad method {method:?}"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(format!("unsupported version {version:?}"));
    }
    let mut headers = Vec::new();
    for l in lines {
        if l.is_empty() {
            break;
        }
        if l[0] == b' ' || l[0] == b'\t' {
            return Err("obsolete header line folding".into());
        }
        let colon = l
            .iter()
            .position(|&b| b == b':')
            .ok_or("header line without `:`")?;
        let name = &l[..colon];
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err("bad header name".into());
        }
        let value = l[colon + 1..].trim_ascii();
        if value.iter().any(|&b| b == 0 || b == b'\r') {
            return Err("control character in header value".into());
        }
        let name = std::str::from_utf8(name).map_err(|_| "bad header name")?;
        headers.push((name, value));
    }

    if method == "CONNECT" {
        let target = split_authority(target, None)?;
        return Ok(Request {
            method,
            target: Some(target),
            path: String::new(),
            authority: String::new(),
            version,
            headers,
        });
    }
    if target.starts_with('/') {
        // Addressed to the proxy itself (the registry index).
        let path = target.split('#').next().unwrap_or("");
        return Ok(Request {
            method,
            target: None,
            path: path.to_owned(),
            authority: String::new(),
            version,
            headers,
        });
    }
    let scheme_end = target.find("://").unwrap_or(0);
    let scheme = &target[..scheme_end];
    if scheme_end == 0 {
        return Err(format!("bad request target {target:?}"));
    }
    if scheme.eq_ignore_ascii_case("https") {
        return Err("https URLs go through CONNECT, not a plain request".into());
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(format!("unsupported scheme {scheme:?}"));
    }
    let rest = &target[scheme_end + 3..];
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    if authority.contains('@') {
        return Err("credentials in the URL are not supported".into());
    }
    let tail = &rest[auth_end..];
    // The fragment is the client's business, never sent upstream.
    let tail = tail.split('#').next().unwrap_or("");
    let path = if tail.starts_with('/') {
        tail.to_owned()
    } else {
        format!("/{tail}")
    };
    let target = split_authority(authority, Some(80))?;
    Ok(Request {
        method,
        target: Some(target),
        path,
        authority: authority.to_owned(),
        version,
        headers,
    })
}

/// Headers that describe one hop and are not forwarded. `Transfer-Encoding`
/// stays: the body is relayed byte for byte, so its framing must too.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
];

/// The request head sent upstream for a forwarded (non-CONNECT) request.
pub fn forwarded_head(req: &Request<'_>) -> Vec<u8> {
    // Headers the client lists in `Connection` are hop-by-hop too, except
    // the body framing ones, which must survive (see HOP_BY_HOP).
    let mut drop_names: Vec<String> = HOP_BY_HOP.iter().map(|s| (*s).to_owned()).collect();
    for (name, value) in &req.headers {
        if name.eq_ignore_ascii_case("connection") {
            for tok in String::from_utf8_lossy(value).split(',') {
                let tok = tok.trim().to_ascii_lowercase();
                if !tok.is_empty() && tok != "content-length" && tok != "transfer-encoding" {
                    drop_names.push(tok);
                }
            }
        }
    }
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(format!("{} {} {}\r\n", req.method, req.path, req.version).as_bytes());
    out.extend_from_slice(format!("Host: {}\r\n", req.authority).as_bytes());
    for (name, value) in &req.headers {
        let lower = name.to_ascii_lowercase();
        if drop_names.contains(&lower) {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

pub enum HeadError {
    /// The client closed before sending anything.
    Empty,
    TooLarge,
    TimedOut,
    Io(io::Error),
}

/// End of the head: the index just past the blank line, accepting bare
/// `\n` line ends as well as `\r\n`.
pub fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(off) = buf[i..].iter().position(|&b| b == b'\n') {
        let nl = i + off;
        let rest = &buf[nl + 1..];
        if rest.starts_with(b"\n") {
            return Some(nl + 2);
        }
        if rest.starts_with(b"\r\n") {
            return Some(nl + 3);
        }
        i = nl + 1;
    }
    None
}

/// Reads until the end of the request head. Returns the buffer and where
/// the head ends; bytes after it belong to the body or the tunnel.
pub fn read_head(
    stream: &mut TcpStream,
    max_bytes: usize,
    timeout: Duration,
) -> Result<(Vec<u8>, usize), HeadError> {
    let deadline = Instant::now() + timeout;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::TimedOut);
        }
        stream.set_read_timeout(Some(left)).map_err(HeadError::Io)?;
        let n = match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Err(HeadError::Empty),
            Ok(0) => {
                return Err(HeadError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "client closed in the middle of the request head",
                )))
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::TimedOut)
            }
            Err(e) => return Err(HeadError::Io(e)),
        };
        // Resume the search a little before the new bytes: the blank line
        // may straddle two reads.
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf, from) {
            if end > max_bytes {
                return Err(HeadError::TooLarge);
            }
            stream.set_read_timeout(None).map_err(HeadError::Io)?;
            return Ok((buf, end));
        }
        if buf.len() > max_bytes {
            return Err(HeadError::TooLarge);
        }
    }
}

/// The reason phrase cbrun sends with `status`.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        206 => "Partial Content",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        410 => "Gone",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Writes a status line, `headers` and the blank line that ends the head.
pub fn write_response_head(
    w: &mut impl Write,
    status: u16,
    headers: &[(&str, &str)],
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    for (k, v) in headers {
        head.push_str(k);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())
}

/// A body in chunked transfer coding: every `write` is one chunk, and
/// [`Chunked::finish`] writes the last chunk. A body cut short (the writer
/// dropped without `finish`) is visibly incomplete to the client.
pub struct Chunked<W: Write> {
    inner: W,
}

impl<W: Write> Chunked<W> {
    pub fn new(inner: W) -> Self {
        Chunked { inner }
    }

    /// Ends the body; returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.inner.write_all(b"0\r\n\r\n")?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for Chunked<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.inner
            .write_all(format!("{:x}\r\n", buf.len()).as_bytes())?;
        self.inner.write_all(buf)?;
        self.inner.write_all(b"\r\n")?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_end_handles_split_and_bare_lf() {
        assert_eq!(head_end(b"A\r\n\r\nrest", 0), Some(5));
        assert_eq!(head_end(b"A\n\nrest", 0), Some(3));
        assert_eq!(head_end(b"A\r\nB: c\r\n", 0), None);
        assert_eq!(head_end(b"A\r\nB: c\r\n\r\n", 7), Some(11));
    }

    #[test]
    fn request_forms() {
        let r = parse_request(b"CONNECT [::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let t = r.target.unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 443));
        assert_eq!(t.display(), "[::1]:443");
        let r = parse_request(b"GET http://A.test/p?q#f HTTP/1.1\r\nAccept: x/y\r\n\r\n").unwrap();
        assert_eq!(r.target.as_ref().unwrap().port, 80);
        assert_eq!(r.path, "/p?q");
        assert_eq!(r.authority, "A.test");
        assert_eq!(r.header("ACCEPT"), Some(&b"x/y"[..]));
        assert_eq!(r.header("host"), None);
        // Origin form asks the proxy itself.
        let r = parse_request(b"GET /pypi/simple/x/#frag HTTP/1.1\r\n\r\n").unwrap();
        assert!(r.target.is_none());
        assert_eq!(r.path, "/pypi/simple/x/");
        assert!(parse_request(b"GET * HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn chunked_framing() {
        let mut c = Chunked::new(Vec::new());
        c.write_all(b"hello").unwrap();
        c.write_all(b"").unwrap();
        c.write_all(&[b'x'; 17]).unwrap();
        let out = c.finish().unwrap();
        assert_eq!(
            out,
            b"5\r\nhello\r\n11\r\nxxxxxxxxxxxxxxxxx\r\n0\r\n\r\n".to_vec()
        );
        let mut head = Vec::new();
        write_response_head(&mut head, 404, &[("Content-Length", "0")]).unwrap();
        assert_eq!(head, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
}
