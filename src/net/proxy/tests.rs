//! The proxy against upstreams on loopback: tunnels, forwarding, refusals,
//! limits and shutdown.

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
        let Ok((buf, end)) = read_head(&mut s, limits.max_head_bytes, limits.head_timeout) else {
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
        Running::start_with(name, allow, resolve, limits, Resolver::default())
    }

    fn start_with(
        name: &str,
        allow: &[String],
        resolve: &[&str],
        limits: Limits,
        resolver: Resolver,
    ) -> Running {
        let log =
            std::env::temp_dir().join(format!("cbrun-proxy-{}-{name}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let policy = EgressPolicy::parse(allow, false, resolve).unwrap();
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let proxy = Proxy::new(policy, ConnLog::open(&log).unwrap())
            .with_limits(limits)
            .with_resolver(resolver);
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
    assert!(api.heads.lock().unwrap()[0].contains(&format!("Host: API.test.:{}\r\n", api.port())));
    let recs = p.records(1);
    assert_eq!(recs[0].host, "api.test");
}

#[test]
fn resolver_answers_are_checked_like_dns() {
    let api = Upstream::start("inside ");
    let port = api.port();
    let resolver =
        Resolver::parse_hosts("127.0.0.1 inside.test listed.test\n10.9.9.9 lan.test\n").unwrap();
    let p = Running::start_with(
        "hostsfile",
        &["*".into(), format!("listed.test:{port}")],
        &[],
        Limits::default(),
        resolver,
    );
    // `*` covers the names, not where the file points them.
    for (name, what) in [
        ("inside.test", "(loopback)"),
        ("lan.test", "private (RFC 1918)"),
    ] {
        let out = p.exchange(&format!("GET http://{name}:{port}/ HTTP/1.1\r\n\r\n"));
        assert!(out.starts_with("HTTP/1.1 403 "), "{name}: {out}");
        assert!(body(&out).contains(what), "{name}: {out}");
    }
    // An exact entry for the name is an explicit choice.
    let out = p.exchange(&format!("GET http://listed.test:{port}/ HTTP/1.1\r\n\r\n"));
    assert_eq!(body(&out), "inside ", "{out}");
    let recs = p.records(3);
    assert_eq!(
        recs.iter().map(|r| r.decision).collect::<Vec<_>>(),
        [
            LogDecision::Denied,
            LogDecision::Denied,
            LogDecision::Allowed
        ]
    );
    assert_eq!(api.accepts.load(Ordering::SeqCst), 1);
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
    nix::sys::socket::shutdown(l.as_raw_fd(), nix::sys::socket::Shutdown::Both).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let res = serve(l, EgressPolicy::default(), ConnLog::disabled(), stop);
    assert!(res.is_err());
    assert!(t0.elapsed() < Duration::from_secs(1));
}
