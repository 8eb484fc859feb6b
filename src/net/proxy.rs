//! A small HTTP/1.1 forward proxy that enforces an [`EgressPolicy`].
//!
//! It speaks three request forms ([`super::http`] parses them):
//! - `CONNECT host:port`: a byte tunnel (HTTPS and anything else over TCP);
//! - absolute-form `GET http://host[:port]/path` (any method): forwarded with
//!   an origin-form request line, hop-by-hop headers dropped, `Host` set
//!   from the URL, and `Connection: close`, so each client connection
//!   carries one request;
//! - origin-form `GET /path`, or absolute-form naming the proxy's own
//!   address: a request to the registry index ([`super::index`]).
//!
//! A name is resolved once ([`super::resolve`]); every address it resolves
//! to is checked, and the connection goes to a checked address, so there is
//! no window for DNS rebinding between the check and the connect.
//!
//! One thread per connection (two while relaying); the accept loop polls
//! with a short timeout so that [`serve`] returns soon after `shutdown` is
//! set. Every attempt is written to the [`ConnLog`].

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::addr;
use super::http::{
    forwarded_head, parse_request, read_head, respond, respond_busy, HeadError, Request, Target,
};
use super::index::Index;
use super::log::{ConnLog, ConnRecord, LogDecision};
use super::policy::{Decision, EgressPolicy, Host};
use super::resolve::Resolver;

/// How often the accept loop looks at the shutdown flag.
const ACCEPT_POLL_MS: u16 = 50;
/// How long [`serve`] waits, once stopping, for closed connections to log
/// their records.
const DRAIN_WAIT: Duration = Duration::from_millis(100);
const RELAY_BUF: usize = 16 * 1024;
const THREAD_STACK: usize = 256 * 1024;

/// Bounds on what one client can make the proxy hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request head (request line and headers).
    pub max_head_bytes: usize,
    /// Time allowed for the whole request head to arrive.
    pub head_timeout: Duration,
    /// Time allowed for each upstream TCP connect attempt.
    pub connect_timeout: Duration,
    /// Connections served at once; more are answered 503.
    pub max_connections: usize,
    /// Once the upstream has closed its side, how long the client may keep
    /// its side open before the connection is dropped.
    pub linger: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 64 * 1024,
            head_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_connections: 256,
            linger: Duration::from_secs(30),
        }
    }
}

/// The proxy: policy, log, limits, resolver and registry index.
/// [`Proxy::run`] serves a listener.
pub struct Proxy {
    policy: EgressPolicy,
    log: ConnLog,
    limits: Limits,
    resolver: Resolver,
    index: Option<Index>,
}

/// Serves `listener` with default limits until `shutdown` is set (returns
/// `Ok`) or accepting fails (returns the error).
pub fn serve(
    listener: TcpListener,
    policy: EgressPolicy,
    log: ConnLog,
    shutdown: Arc<AtomicBool>,
) -> io::Result<()> {
    Proxy::new(policy, log).run(listener, &shutdown)
}

impl Proxy {
    pub fn new(policy: EgressPolicy, log: ConnLog) -> Proxy {
        Proxy {
            policy,
            log,
            limits: Limits::default(),
            resolver: Resolver::default(),
            index: None,
        }
    }

    pub fn with_limits(mut self, limits: Limits) -> Proxy {
        self.limits = limits;
        self
    }

    pub fn with_log(mut self, log: ConnLog) -> Proxy {
        self.log = log;
        self
    }

    pub fn with_resolver(mut self, resolver: Resolver) -> Proxy {
        self.resolver = resolver;
        self
    }

    /// Serves the registry index at the proxy's own address.
    pub fn with_index(mut self, index: Index) -> Proxy {
        self.index = Some(index);
        self
    }

    /// Blocks serving `listener` until `shutdown` is set or accepting fails.
    /// On the way out, open connections are shut down so their threads end
    /// and log what they carried; the wait for that is bounded.
    pub fn run(self, listener: TcpListener, shutdown: &AtomicBool) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            policy: self.policy,
            log: self.log,
            limits: self.limits,
            resolver: self.resolver,
            index: self.index,
            local,
            public: format!("http://{local}"),
            start: Instant::now(),
            conns: Mutex::new(Tracked::default()),
            active: AtomicUsize::new(0),
        });
        let result = accept_loop(&shared, &listener, shutdown);
        shared.stop_all();
        let deadline = Instant::now() + DRAIN_WAIT;
        while shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        result
    }
}

fn accept_loop(
    shared: &Arc<Shared>,
    listener: &TcpListener,
    shutdown: &AtomicBool,
) -> io::Result<()> {
    while !shutdown.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ACCEPT_POLL_MS)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        match listener.accept() {
            Ok((stream, _)) => dispatch(shared, stream),
            Err(e) => match e.raw_os_error().map(Errno::from_raw) {
                Some(Errno::EAGAIN | Errno::EINTR | Errno::ECONNABORTED | Errno::EPROTO) => {}
                // Out of descriptors or memory: transient, and the pending
                // connection would make poll return at once, so back off.
                Some(Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM) => {
                    thread::sleep(Duration::from_millis(ACCEPT_POLL_MS.into()));
                }
                _ => return Err(e),
            },
        }
    }
    Ok(())
}

/// Sockets of open connections, so stopping can unblock their threads.
#[derive(Default)]
struct Tracked {
    next_id: u64,
    stopping: bool,
    by_conn: HashMap<u64, Vec<TcpStream>>,
}

struct Shared {
    policy: EgressPolicy,
    log: ConnLog,
    limits: Limits,
    resolver: Resolver,
    index: Option<Index>,
    /// The listener's address, as the sandbox sees it.
    local: SocketAddr,
    /// The index's base URL, as the sandbox sees it.
    public: String,
    start: Instant,
    conns: Mutex<Tracked>,
    active: AtomicUsize,
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn tracked(&self) -> std::sync::MutexGuard<'_, Tracked> {
        // Poisoning only means a connection thread panicked; the map is
        // still consistent enough to shut sockets down.
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stop_all(&self) {
        let mut t = self.tracked();
        t.stopping = true;
        for s in t.by_conn.values().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// One connection's slot: counts towards the cap and unregisters its
/// sockets when dropped.
struct ConnGuard {
    shared: Arc<Shared>,
    id: u64,
}

impl ConnGuard {
    fn new(shared: &Arc<Shared>) -> ConnGuard {
        let mut t = shared.tracked();
        t.next_id += 1;
        let id = t.next_id;
        drop(t);
        ConnGuard {
            shared: Arc::clone(shared),
            id,
        }
    }

    /// Registers `s` to be shut down if the proxy stops. A socket that
    /// arrives after the stop is shut down at once.
    fn track(&self, s: &TcpStream) {
        let Ok(dup) = s.try_clone() else { return };
        let mut t = self.shared.tracked();
        if t.stopping {
            let _ = dup.shutdown(Shutdown::Both);
            return;
        }
        t.by_conn.entry(self.id).or_default().push(dup);
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.shared.tracked().by_conn.remove(&self.id);
        self.shared.active.fetch_sub(1, Ordering::SeqCst);
    }
}

fn dispatch(shared: &Arc<Shared>, stream: TcpStream) {
    let at_ms = shared.now_ms();
    // Accepted sockets do not inherit O_NONBLOCK on Linux; be explicit
    // since every connection thread relies on blocking I/O.
    let _ = stream.set_nonblocking(false);
    let cap = shared.limits.max_connections;
    if shared.active.fetch_add(1, Ordering::SeqCst) >= cap {
        shared.active.fetch_sub(1, Ordering::SeqCst);
        let reason = format!("too many connections (limit {cap})");
        let body = format!("cbrun: egress proxy busy: {reason}\n");
        shared
            .log
            .record(&record(at_ms, "", "", 0, LogDecision::Error, Some(reason)));
        respond_busy(stream, &body);
        return;
    }
    let guard = ConnGuard::new(shared);
    let conn = Conn {
        shared: Arc::clone(shared),
        at_ms,
        guard,
    };
    let spawned = thread::Builder::new()
        .name("cbrun-proxy".into())
        .stack_size(THREAD_STACK)
        .spawn(move || conn.handle(stream));
    if let Err(e) = spawned {
        // The closure (and with it the stream and the guard) was dropped.
        let reason = format!("cannot start a connection thread: {e}");
        shared
            .log
            .record(&record(at_ms, "", "", 0, LogDecision::Error, Some(reason)));
    }
}

fn record(
    at_ms: u64,
    method: &str,
    host: &str,
    port: u16,
    decision: LogDecision,
    reason: Option<String>,
) -> ConnRecord {
    ConnRecord {
        at_ms,
        method: method.to_owned(),
        host: host.to_owned(),
        port,
        decision,
        reason,
        bytes_up: 0,
        bytes_down: 0,
        index_path: None,
    }
}

/// Why no upstream connection was made.
enum Refusal {
    Denied(String),
    Unreachable(String),
}

/// One accepted client connection.
struct Conn {
    shared: Arc<Shared>,
    at_ms: u64,
    guard: ConnGuard,
}

impl Conn {
    fn log(
        &self,
        method: &str,
        host: &str,
        port: u16,
        decision: LogDecision,
        reason: Option<String>,
    ) {
        self.shared
            .log
            .record(&record(self.at_ms, method, host, port, decision, reason));
    }

    fn handle(self, mut client: TcpStream) {
        self.guard.track(&client);
        let limits = &self.shared.limits;
        let (buf, end) = match read_head(&mut client, limits.max_head_bytes, limits.head_timeout) {
            Ok(h) => h,
            // A connection that never asked for anything is not an attempt.
            Err(HeadError::Empty) => return,
            Err(HeadError::TooLarge) => {
                let why = format!("request head larger than {} bytes", limits.max_head_bytes);
                let body = format!("cbrun: {why}\n");
                self.log("", "", 0, LogDecision::Error, Some(why));
                respond(client, 431, "Request Header Fields Too Large", &body);
                return;
            }
            Err(HeadError::TimedOut) => {
                let why = format!("request head not received within {:?}", limits.head_timeout);
                let body = format!("cbrun: {why}\n");
                self.log("", "", 0, LogDecision::Error, Some(why));
                respond(client, 408, "Request Timeout", &body);
                return;
            }
            Err(HeadError::Io(e)) => {
                self.log(
                    "",
                    "",
                    0,
                    LogDecision::Error,
                    Some(format!("reading request: {e}")),
                );
                return;
            }
        };
        let req = match parse_request(&buf[..end]) {
            Ok(r) => r,
            Err(why) => {
                let body = format!("cbrun: bad proxy request: {why}\n");
                self.log("", "", 0, LogDecision::Error, Some(why));
                respond(client, 400, "Bad Request", &body);
                return;
            }
        };
        let early = &buf[end..];
        let target = match &req.target {
            Some(t) if !self.is_own_address(t) => t.clone(),
            _ => return self.serve_index(&req, client),
        };
        let log_host = target.log_host();
        let method = req.method;

        let refused = |client: TcpStream, refusal: Refusal| match refusal {
            Refusal::Denied(why) => {
                let body = format!("cbrun: egress to {} denied: {why}\n", target.display());
                self.log(
                    method,
                    &log_host,
                    target.port,
                    LogDecision::Denied,
                    Some(why),
                );
                respond(client, 403, "Forbidden", &body);
            }
            Refusal::Unreachable(why) => {
                let body = format!("cbrun: cannot reach {}: {why}\n", target.display());
                self.log(
                    method,
                    &log_host,
                    target.port,
                    LogDecision::Error,
                    Some(why),
                );
                respond(client, 502, "Bad Gateway", &body);
            }
        };
        let upstream = match self.connect(&target) {
            Ok(u) => u,
            Err(r) => return refused(client, r),
        };
        self.guard.track(&upstream);

        let mut first_up = Vec::new();
        if method == "CONNECT" {
            let ok = b"HTTP/1.1 200 Connection established\r\n\r\n";
            if let Err(e) = client.write_all(ok) {
                let why = format!("writing the CONNECT reply: {e}");
                self.log(
                    method,
                    &log_host,
                    target.port,
                    LogDecision::Error,
                    Some(why),
                );
                return;
            }
        } else {
            first_up = forwarded_head(&req);
        }
        // Bytes the client sent right after the head (a TLS ClientHello
        // pipelined behind CONNECT, or the start of a request body).
        first_up.extend_from_slice(early);
        let (up, down, err) = relay(&client, &upstream, &first_up, limits.linger);
        let mut rec = record(
            self.at_ms,
            method,
            &log_host,
            target.port,
            LogDecision::Allowed,
            err,
        );
        rec.bytes_up = up;
        rec.bytes_down = down;
        self.shared.log.record(&rec);
    }

    /// Whether an absolute-form target names the proxy itself (a client
    /// that sends index requests through its proxy setting).
    fn is_own_address(&self, t: &Target) -> bool {
        let local = self.shared.local;
        t.port == local.port()
            && match Host::parse(&t.host) {
                Ok(Host::Ip(ip)) => ip == local.ip().to_canonical(),
                Ok(Host::Name(n)) => n == "localhost" && local.ip().is_loopback(),
                Err(_) => false,
            }
    }

    /// Hands an index request to the registry index and logs its outcome.
    fn serve_index(&self, req: &Request<'_>, client: TcpStream) {
        let shared = &self.shared;
        let served = match &shared.index {
            Some(index) => index.serve(req, &shared.policy, &shared.public, client),
            None => {
                let why = "no registry index here: send proxy requests in absolute form (http://host/path)".to_owned();
                respond(client, 404, "Not Found", &format!("cbrun: {why}\n"));
                crate::net::index::Served {
                    host: String::new(),
                    port: 0,
                    decision: LogDecision::Error,
                    reason: Some(why),
                    bytes_down: 0,
                }
            }
        };
        let mut rec = record(
            self.at_ms,
            req.method,
            &served.host,
            served.port,
            served.decision,
            served.reason,
        );
        rec.index_path = Some(req.path.clone());
        rec.bytes_down = served.bytes_down;
        shared.log.record(&rec);
    }

    /// Applies the policy, resolves once, checks every address, and
    /// connects to one of the checked addresses.
    fn connect(&self, target: &Target) -> Result<TcpStream, Refusal> {
        let policy = &self.shared.policy;
        if let Decision::Denied(why) = policy.decide(&target.host, target.port) {
            return Err(Refusal::Denied(why));
        }
        let addrs: Vec<SocketAddr> = if let Some(ip) = policy.resolve_override(&target.host) {
            vec![SocketAddr::new(ip, target.port)]
        } else {
            match Host::parse(&target.host) {
                Ok(Host::Ip(ip)) => vec![SocketAddr::new(ip, target.port)],
                Ok(Host::Name(name)) => match self.shared.resolver.lookup(&name, target.port) {
                    Ok(a) => a,
                    Err(e) => {
                        return Err(Refusal::Unreachable(format!("cannot resolve {name}: {e}")))
                    }
                },
                // decide() already refused unparsable hosts.
                Err(why) => return Err(Refusal::Denied(format!("invalid host: {why}"))),
            }
        };
        // The host's addresses now (interfaces come and go); without them
        // nothing can be checked, so nothing is reached.
        let own = addr::host_addresses()
            .map_err(|e| Refusal::Unreachable(format!("cannot list this host's addresses: {e}")))?;
        // A name with one forbidden address is refused whole: its owner
        // chose to point it inside.
        for a in &addrs {
            if let Decision::Denied(why) =
                policy.check_resolved(&target.host, target.port, a.ip(), &own)
            {
                return Err(Refusal::Denied(why));
            }
        }
        let mut last_err = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, self.shared.limits.connect_timeout) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last_err = Some(format!("{addr}: {e}")),
            }
        }
        Err(Refusal::Unreachable(
            last_err.unwrap_or_else(|| "name resolved to no address".into()),
        ))
    }
}

/// Copies `from` to `to` until EOF, then half-closes `to` so the peer sees
/// the end too. On an error both sockets are shut down, which also ends the
/// copy running the other way. Bytes written go to `counter`.
fn pump(from: &TcpStream, to: &TcpStream, counter: &AtomicU64) -> Option<io::Error> {
    let mut buf = vec![0u8; RELAY_BUF];
    let (mut from_r, mut to_w) = (from, to);
    loop {
        let n = match from_r.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return None;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
                return Some(e);
            }
        };
        if let Err(e) = to_w.write_all(&buf[..n]) {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return Some(e);
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Relays between client and upstream after writing `first_up` upstream.
/// Returns (bytes up, bytes down, first error worth logging).
fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    first_up: &[u8],
    linger: Duration,
) -> (u64, u64, Option<String>) {
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let _ = client.set_nodelay(true);
    if !first_up.is_empty() {
        if let Err(e) = (&*upstream).write_all(first_up) {
            let _ = client.shutdown(Shutdown::Both);
            let _ = upstream.shutdown(Shutdown::Both);
            return (0, 0, Some(format!("writing upstream: {e}")));
        }
        up.fetch_add(first_up.len() as u64, Ordering::Relaxed);
    }
    let (up_err, down_err) = thread::scope(|s| {
        let downstream = thread::Builder::new()
            .name("cbrun-proxy-down".into())
            .stack_size(THREAD_STACK)
            .spawn_scoped(s, || {
                let err = pump(upstream, client, &down);
                if err.is_none() {
                    // The upstream is done; a client that keeps its side
                    // open after that gets a bounded grace period.
                    let _ = client.set_read_timeout(Some(linger));
                }
                err
            });
        let downstream = match downstream {
            Ok(h) => h,
            Err(e) => {
                let _ = client.shutdown(Shutdown::Both);
                let _ = upstream.shutdown(Shutdown::Both);
                return (Some(e), None);
            }
        };
        let up_err = pump(client, upstream, &up);
        let down_err = downstream
            .join()
            .unwrap_or_else(|_| Some(io::Error::other("relay thread panicked")));
        (up_err, down_err)
    });
    // Errors after a clean finish in the other direction are the usual
    // teardown noise (resets, the linger timeout); report the first one only.
    let err = down_err
        .map(|e| format!("upstream to client: {e}"))
        .or_else(|| up_err.map(|e| format!("client to upstream: {e}")));
    (up.into_inner(), down.into_inner(), err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::log::summarize;
    use std::net::Ipv4Addr;
    use std::os::fd::AsRawFd;
    use std::path::PathBuf;

    /// An upstream HTTP server on loopback: answers each request with
    /// `body` (plus any request body it received) and keeps the heads it
    /// saw. Also counts accepted connections.
    struct Upstream {
        addr: SocketAddr,
        accepts: Arc<AtomicUsize>,
        heads: Arc<Mutex<Vec<String>>>,
        stop: Arc<AtomicBool>,
        thread: Option<thread::JoinHandle<()>>,
    }

    impl Upstream {
        fn start(body: &'static str) -> Upstream {
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            l.set_nonblocking(true).unwrap();
            let addr = l.local_addr().unwrap();
            let accepts = Arc::new(AtomicUsize::new(0));
            let heads = Arc::new(Mutex::new(Vec::new()));
            let stop = Arc::new(AtomicBool::new(false));
            let (a, h, st) = (accepts.clone(), heads.clone(), stop.clone());
            let thread = thread::spawn(move || {
                while !st.load(Ordering::SeqCst) {
                    match l.accept() {
                        Ok((s, _)) => {
                            a.fetch_add(1, Ordering::SeqCst);
                            let h = h.clone();
                            thread::spawn(move || Upstream::answer(s, body, &h));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(5)),
                    }
                }
            });
            Upstream {
                addr,
                accepts,
                heads,
                stop,
                thread: Some(thread),
            }
        }

        fn answer(mut s: TcpStream, body: &str, heads: &Mutex<Vec<String>>) {
            s.set_nonblocking(false).unwrap();
            let limits = Limits::default();
            let Ok((buf, end)) = read_head(&mut s, limits.max_head_bytes, limits.head_timeout)
            else {
                return;
            };
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            let mut req_body = buf[end..].to_vec();
            while req_body.len() < len {
                let mut chunk = [0u8; 1024];
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0);
                req_body.extend_from_slice(&chunk[..n]);
            }
            heads.lock().unwrap().push(head);
            let reply = format!("{body}{}", String::from_utf8_lossy(&req_body));
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }

        fn port(&self) -> u16 {
            self.addr.port()
        }
    }

    impl Drop for Upstream {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    struct Running {
        addr: SocketAddr,
        log: PathBuf,
        stop: Arc<AtomicBool>,
        thread: Option<thread::JoinHandle<io::Result<()>>>,
    }

    impl Running {
        fn start(name: &str, allow: &[String], resolve: &[&str], limits: Limits) -> Running {
            let log = std::env::temp_dir()
                .join(format!("cbrun-proxy-{}-{name}.jsonl", std::process::id()));
            let _ = std::fs::remove_file(&log);
            let policy = EgressPolicy::parse(allow, false, resolve).unwrap();
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            let addr = l.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let proxy = Proxy::new(policy, ConnLog::open(&log).unwrap()).with_limits(limits);
            let st = stop.clone();
            let thread = thread::spawn(move || proxy.run(l, &st));
            Running {
                addr,
                log,
                stop,
                thread: Some(thread),
            }
        }

        fn connect(&self) -> TcpStream {
            let s = TcpStream::connect(self.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        }

        /// Sends `req` and reads everything until the proxy closes.
        fn exchange(&self, req: &str) -> String {
            let mut s = self.connect();
            s.write_all(req.as_bytes()).unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
            String::from_utf8(out).unwrap()
        }

        /// The log's records, once there are `n` of them (they are written
        /// when each connection's thread finishes).
        fn records(&self, n: usize) -> Vec<ConnRecord> {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let text = std::fs::read_to_string(&self.log).unwrap_or_default();
                let recs: Vec<ConnRecord> = text
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
                if recs.len() >= n || Instant::now() > deadline {
                    assert_eq!(recs.len(), n, "{text}");
                    return recs;
                }
                thread::sleep(Duration::from_millis(10));
            }
        }

        fn stop(&mut self) -> Duration {
            let t0 = Instant::now();
            self.stop.store(true, Ordering::SeqCst);
            if let Some(t) = self.thread.take() {
                t.join().unwrap().unwrap();
            }
            t0.elapsed()
        }
    }

    impl Drop for Running {
        fn drop(&mut self) {
            self.stop();
            let _ = std::fs::remove_file(&self.log);
        }
    }

    fn body(resp: &str) -> &str {
        resp.split_once("\r\n\r\n").map_or("", |(_, b)| b)
    }

    #[test]
    fn connect_tunnels_both_ways() {
        let api = Upstream::start("api says hi ");
        let p = Running::start(
            "tunnel",
            &[format!("127.0.0.1:{}", api.port())],
            &[],
            Limits::default(),
        );
        let target = format!("127.0.0.1:{}", api.port());

        // Client waits for the 200, then talks through the tunnel.
        let mut s = p.connect();
        write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").unwrap();
        let mut reply = [0u8; 39];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"HTTP/1.1 200 Connection established\r\n\r\n");
        s.write_all(b"POST /v1/x HTTP/1.1\r\nHost: api\r\nContent-Length: 5\r\n\r\nhello")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert_eq!(body(&out), "api says hi hello");
        drop(s);

        // Bytes pipelined right behind the CONNECT head are not lost.
        let out = p.exchange(&format!(
            "CONNECT {target} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: api\r\n\r\n"
        ));
        assert!(
            out.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
            "{out}"
        );
        assert_eq!(body(body(&out)), "api says hi ");

        let recs = p.records(2);
        for r in &recs {
            assert_eq!(
                (r.method.as_str(), r.host.as_str(), r.port),
                ("CONNECT", "127.0.0.1", api.port())
            );
            assert_eq!(r.decision, LogDecision::Allowed);
            assert!(r.bytes_up > 0 && r.bytes_down > 0, "{r:?}");
        }
        assert_eq!(recs[0].bytes_up, 58);
        assert_eq!(api.accepts.load(Ordering::SeqCst), 2);
        let sum = summarize(&p.log).unwrap();
        assert_eq!(
            (sum.total, sum.allowed, sum.denied, sum.errors),
            (2, 2, 0, 0)
        );
        assert_eq!(sum.hosts.len(), 1);
        assert_eq!(sum.hosts[0].count, 2);
    }

    #[test]
    fn plain_http_is_forwarded_in_origin_form() {
        let api = Upstream::start("models: [] ");
        let p = Running::start(
            "get",
            &[format!("127.0.0.1:{}", api.port())],
            &[],
            Limits::default(),
        );
        let port = api.port();
        let out = p.exchange(&format!(
            "GET http://127.0.0.1:{port}/v1/models?x=1#frag HTTP/1.1\r\n\
             Host: elsewhere.example\r\n\
             Proxy-Authorization: Basic Zm9vOmJhcg==\r\n\
             Proxy-Connection: keep-alive\r\n\
             Connection: keep-alive, X-Secret\r\n\
             X-Secret: drop me\r\n\
             X-Custom: kept\r\n\r\n"
        ));
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert_eq!(body(&out), "models: [] ");
        let out = p.exchange(&format!(
            "POST http://127.0.0.1:{port} HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody"
        ));
        assert_eq!(body(&out), "models: [] body");

        let heads = api.heads.lock().unwrap().clone();
        assert_eq!(
            heads[0],
            format!(
                "GET /v1/models?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Custom: kept\r\nConnection: close\r\n\r\n"
            )
        );
        assert!(heads[1].starts_with("POST / HTTP/1.1\r\n"), "{}", heads[1]);

        let recs = p.records(2);
        assert_eq!(recs[0].method, "GET");
        assert_eq!(recs[1].method, "POST");
        assert!(recs
            .iter()
            .all(|r| r.decision == LogDecision::Allowed && r.bytes_down > 0));
    }

    #[test]
    fn code_hosts_are_refused_before_any_connection() {
        let code = Upstream::start("the reference solution");
        let p = Running::start(
            "codehost",
            &["*".into()],
            &[
                "github.com=127.0.0.1",
                "raw.githubusercontent.com=127.0.0.1",
            ],
            Limits::default(),
        );
        let port = code.port();
        let out = p.exchange(&format!("CONNECT github.com:{port} HTTP/1.1\r\n\r\n"));
        assert!(out.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{out}");
        assert_eq!(
            body(&out),
            format!("cbrun: egress to github.com:{port} denied: github.com is a code host (always denied)\n")
        );
        let out = p.exchange(&format!(
            "GET http://raw.githubusercontent.com:{port}/x HTTP/1.1\r\n\r\n"
        ));
        assert!(out.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{out}");
        // `*` does not extend to IP literals, so the address is no way round.
        let out = p.exchange(&format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"));
        assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
        // Nor is a name that merely resolves to loopback.
        let out = p.exchange(&format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"));
        assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
        assert!(
            body(&out).contains("resolves to 127.0.0.1, ") && body(&out).contains("(loopback)"),
            "{out}"
        );

        let recs = p.records(4);
        assert!(recs
            .iter()
            .all(|r| r.decision == LogDecision::Denied && r.bytes_up == 0));
        assert_eq!(recs[0].host, "github.com");
        assert_eq!(recs[1].method, "GET");
        thread::sleep(Duration::from_millis(50));
        assert_eq!(
            code.accepts.load(Ordering::SeqCst),
            0,
            "the code host saw a connection"
        );
    }

    #[test]
    fn resolve_override_reaches_a_named_api() {
        let api = Upstream::start("named ");
        let p = Running::start(
            "resolve",
            &["*".into()],
            &["api.test=127.0.0.1"],
            Limits::default(),
        );
        let out = p.exchange(&format!(
            "GET http://API.test.:{}/ HTTP/1.1\r\n\r\n",
            api.port()
        ));
        assert_eq!(body(&out), "named ");
        assert!(
            api.heads.lock().unwrap()[0].contains(&format!("Host: API.test.:{}\r\n", api.port()))
        );
        let recs = p.records(1);
        assert_eq!(recs[0].host, "api.test");
    }

    #[test]
    fn unlisted_hosts_are_denied() {
        let api = Upstream::start("");
        let other = Upstream::start("");
        let p = Running::start(
            "unlisted",
            &[format!("127.0.0.1:{}", api.port()), "*.example.test".into()],
            &[],
            Limits::default(),
        );
        let out = p.exchange(&format!(
            "CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n",
            other.port()
        ));
        assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
        assert!(
            body(&out).ends_with("denied: not in the allowlist\n"),
            "{out}"
        );
        let out = p.exchange("CONNECT example.test:443 HTTP/1.1\r\n\r\n");
        assert!(
            out.starts_with("HTTP/1.1 403 "),
            "apex of a wildcard: {out}"
        );
        let out = p.exchange("CONNECT [::1]:443 HTTP/1.1\r\n\r\n");
        assert!(
            body(&out).starts_with("cbrun: egress to [::1]:443 denied"),
            "{out}"
        );
        let out = p.exchange("CONNECT pypi.org:443 HTTP/1.1\r\n\r\n");
        assert!(body(&out).contains("--allow-registries"), "{out}");
        let recs = p.records(4);
        assert!(recs
            .iter()
            .all(|r| r.decision == LogDecision::Denied && r.reason.is_some()));
        assert_eq!(recs[2].host, "::1");
        assert_eq!(other.accepts.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn unreachable_upstream_is_502() {
        let closed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let p = Running::start(
            "502",
            &[format!("127.0.0.1:{port}")],
            &[],
            Limits::default(),
        );
        let out = p.exchange(&format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"));
        assert!(out.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{out}");
        assert!(
            body(&out).starts_with(&format!("cbrun: cannot reach 127.0.0.1:{port}: ")),
            "{out}"
        );
        let recs = p.records(1);
        assert_eq!(recs[0].decision, LogDecision::Error);
    }

    #[test]
    fn malformed_requests_are_400() {
        let p = Running::start("400", &["*".into()], &[], Limits::default());
        for (req, why) in [
            ("garbage\r\n\r\n", "bad request line"),
            ("GET * HTTP/1.1\r\nHost: x\r\n\r\n", "bad request target"),
            ("GET https://example.test/ HTTP/1.1\r\n\r\n", "CONNECT"),
            ("GET ftp://example.test/ HTTP/1.1\r\n\r\n", "scheme"),
            (
                "GET http://u:p@example.test/ HTTP/1.1\r\n\r\n",
                "credentials",
            ),
            ("CONNECT example.test HTTP/1.1\r\n\r\n", "needs a port"),
            ("CONNECT example.test:0 HTTP/1.1\r\n\r\n", "bad port"),
            ("CONNECT ::1:443 HTTP/1.1\r\n\r\n", "bracketed"),
            ("GET http://example.test/ HTTP/2.0\r\n\r\n", "version"),
            (
                "GET http://example.test/ HTTP/1.1\r\nbad header\r\n\r\n",
                "without",
            ),
            (
                "GET http://example.test/ HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
                "folding",
            ),
        ] {
            let out = p.exchange(req);
            assert!(
                out.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{req:?}: {out}"
            );
            assert!(body(&out).contains(why), "{req:?}: {out}");
        }
        // Origin form asks the proxy itself; without an index it says how
        // to use a proxy.
        let out = p.exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 404 "), "{out}");
        assert!(body(&out).contains("absolute form"), "{out}");
        let recs = p.records(12);
        assert!(recs.iter().all(|r| r.decision == LogDecision::Error));
        assert_eq!(recs[11].index_path.as_deref(), Some("/"));
        // Bare LF line ends are tolerated.
        let out = p.exchange("CONNECT github.com:443 HTTP/1.1\n\n");
        assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
    }

    #[test]
    fn slow_or_huge_heads_are_cut_off() {
        let limits = Limits {
            max_head_bytes: 1024,
            head_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let p = Running::start("limits", &["*".into()], &[], limits);
        let t0 = Instant::now();
        let out = p.exchange("CONNECT example.test:443 HTTP/1.1\r\n");
        assert!(out.starts_with("HTTP/1.1 408 "), "{out}");
        assert!(t0.elapsed() < Duration::from_secs(3));
        let mut s = p.connect();
        let big = format!(
            "GET http://example.test/ HTTP/1.1\r\nX: {}\r\n",
            "a".repeat(2000)
        );
        let _ = s.write_all(big.as_bytes());
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
        // A connection that sends nothing and closes is not logged.
        drop(p.connect());
        let recs = p.records(2);
        assert!(recs.iter().all(|r| r.decision == LogDecision::Error));
    }

    #[test]
    fn connections_beyond_the_cap_get_503() {
        let limits = Limits {
            max_connections: 2,
            ..Limits::default()
        };
        let p = Running::start("cap", &["*".into()], &[], limits);
        let mut held: Vec<TcpStream> = (0..2).map(|_| p.connect()).collect();
        for s in &mut held {
            s.write_all(b"CONNECT exa").unwrap();
        }
        let out = p.exchange("CONNECT example.test:443 HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 503 "), "{out}");
        drop(held);
        // Slots are released when connections end.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let out = p.exchange("CONNECT github.com:443 HTTP/1.1\r\n\r\n");
            if out.starts_with("HTTP/1.1 403 ") {
                break;
            }
            assert!(Instant::now() < deadline, "{out}");
            thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn shutdown_is_prompt_and_closes_open_tunnels() {
        let echo = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = echo.local_addr().unwrap().port();
        let echo_thread = thread::spawn(move || {
            let (mut s, _) = echo.accept().unwrap();
            let mut buf = [0u8; 64];
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut p = Running::start(
            "shutdown",
            &[format!("127.0.0.1:{port}")],
            &[],
            Limits::default(),
        );
        let mut s = p.connect();
        write!(s, "CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nabc").unwrap();
        let mut got = [0u8; 42];
        s.read_exact(&mut got).unwrap();
        assert!(got.ends_with(b"abc"));

        let took = p.stop();
        assert!(took < Duration::from_millis(400), "shutdown took {took:?}");
        // The tunnel was closed and logged on the way out.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty());
        let recs = p.records(1);
        assert_eq!((recs[0].bytes_up, recs[0].bytes_down), (3, 3));
        echo_thread.join().unwrap();
        // An idle proxy stops just as fast.
        let mut idle = Running::start("idle", &[], &[], Limits::default());
        thread::sleep(Duration::from_millis(20));
        assert!(idle.stop() < Duration::from_millis(300));
    }

    #[test]
    fn serve_returns_listener_errors() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        // Shutting a listening socket down makes accept fail with EINVAL.
        // SAFETY: plain shutdown(2) on a socket we own.
        unsafe { libc::shutdown(l.as_fd().as_raw_fd(), libc::SHUT_RDWR) };
        let stop = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let res = serve(l, EgressPolicy::default(), ConnLog::disabled(), stop);
        assert!(res.is_err());
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
}
