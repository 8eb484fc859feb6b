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
use super::index::{Index, Served};
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
                Served {
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
pub(crate) fn relay(
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
mod tests;
