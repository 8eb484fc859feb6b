//! Loopback forwards: a model API the user runs on the host's loopback
//! (`--allow 127.0.0.1:PORT`), reachable from the sandbox at the same
//! address.
//!
//! Clients skip the proxy for loopback addresses (`NO_PROXY`), and the
//! sandbox's loopback is its own: without a forward, such a connection is
//! refused inside the sandbox and nothing is logged. So for each `--allow`
//! entry naming a loopback address and port exactly, cbrun listens on that
//! address:port inside the sandbox's network namespace (as it does for the
//! proxy, [`super::netns`]) and relays each connection to the same
//! address:port on the host, one thread per connection. Every connection
//! is logged like a proxied one, with method [`FORWARD_METHOD`]. Nothing
//! is parsed: the bytes go through as they are.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::log::{ConnLog, ConnRecord, LogDecision};
use super::policy::{EgressPolicy, HostPattern};
use super::proxy::relay;

/// The `method` of a forwarded connection in the connection log.
pub const FORWARD_METHOD: &str = "FORWARD";

const ACCEPT_POLL_MS: u16 = 50;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const LINGER: Duration = Duration::from_secs(30);
const MAX_CONNECTIONS: usize = 256;
const THREAD_STACK: usize = 256 * 1024;
const DRAIN_WAIT: Duration = Duration::from_millis(200);

/// One forward: where the sandbox connects, and where that goes on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardSpec {
    /// Inside the sandbox.
    pub listen: SocketAddr,
    /// On the host.
    pub target: SocketAddr,
    /// Binding may fail without failing the run (the `::1` half of
    /// `localhost`, on a kernel without IPv6).
    pub optional: bool,
}

/// The forwards an allowlist asks for: each entry that names a loopback
/// address (or `localhost`) with a port. `reserved` is an address the
/// sandbox's loopback already uses (the proxy's); an entry naming it is an
/// error. Entries naming loopback without a port get a warning: they are
/// reachable only through the proxy.
pub fn forwards_for(
    policy: &EgressPolicy,
    reserved: SocketAddr,
) -> Result<(Vec<ForwardSpec>, Vec<String>), String> {
    let mut out: Vec<ForwardSpec> = Vec::new();
    let mut warnings = Vec::new();
    for e in &policy.allow {
        let addrs: Vec<(std::net::IpAddr, bool)> = match &e.host {
            HostPattern::Ip(ip) if ip.is_loopback() => vec![(*ip, false)],
            HostPattern::Exact(n) if n == "localhost" => vec![
                (std::net::Ipv4Addr::LOCALHOST.into(), false),
                (std::net::Ipv6Addr::LOCALHOST.into(), true),
            ],
            _ => continue,
        };
        let Some(port) = e.port else {
            warnings.push(format!(
                "--allow {e}: a loopback entry without a port is reachable only through the proxy (clients skip it for loopback, NO_PROXY); give the port to get a forward into the sandbox"
            ));
            continue;
        };
        for (ip, optional) in addrs {
            let a = SocketAddr::new(ip, port);
            if a == reserved {
                return Err(format!(
                    "--allow {e}: {reserved} is cbrun's proxy inside the sandbox; serve the API on another port"
                ));
            }
            if !out.iter().any(|f| f.listen == a) {
                out.push(ForwardSpec {
                    listen: a,
                    target: a,
                    optional,
                });
            }
        }
    }
    Ok((out, warnings))
}

/// Sockets of open forwarded connections, so stopping can end them.
#[derive(Default)]
struct Open {
    stopping: bool,
    next: u64,
    socks: Vec<(u64, TcpStream)>,
}

struct Shared {
    log: ConnLog,
    start: Instant,
    open: Mutex<Open>,
    active: AtomicUsize,
}

impl Shared {
    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn track(&self, id: u64, s: &TcpStream) {
        let Ok(dup) = s.try_clone() else { return };
        let mut o = self.open();
        if o.stopping {
            let _ = dup.shutdown(Shutdown::Both);
            return;
        }
        o.socks.push((id, dup));
    }
    fn untrack(&self, id: u64) {
        self.open().socks.retain(|(i, _)| *i != id);
    }
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// Serves every `(listener, target)` until `shutdown` is set or accepting
/// fails; open connections are then shut down and logged.
pub fn serve(
    forwards: Vec<(TcpListener, SocketAddr)>,
    log: ConnLog,
    shutdown: &AtomicBool,
) -> io::Result<()> {
    for (l, _) in &forwards {
        l.set_nonblocking(true)?;
    }
    let shared = Arc::new(Shared {
        log,
        start: Instant::now(),
        open: Mutex::new(Open::default()),
        active: AtomicUsize::new(0),
    });
    let result = accept_loop(&shared, &forwards, shutdown);
    {
        let mut o = shared.open();
        o.stopping = true;
        for (_, s) in &o.socks {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
    let deadline = Instant::now() + DRAIN_WAIT;
    while shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    result
}

fn accept_loop(
    shared: &Arc<Shared>,
    forwards: &[(TcpListener, SocketAddr)],
    shutdown: &AtomicBool,
) -> io::Result<()> {
    if forwards.is_empty() {
        return Ok(());
    }
    while !shutdown.load(Ordering::SeqCst) {
        let mut fds: Vec<PollFd> = forwards
            .iter()
            .map(|(l, _)| PollFd::new(l.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(&mut fds, PollTimeout::from(ACCEPT_POLL_MS)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        for ((listener, target), ready) in forwards.iter().zip(ready) {
            if !ready {
                continue;
            }
            match listener.accept() {
                Ok((client, _)) => dispatch(shared, client, *target),
                Err(e) => match e.raw_os_error().map(Errno::from_raw) {
                    Some(Errno::EAGAIN | Errno::EINTR | Errno::ECONNABORTED | Errno::EPROTO) => {}
                    Some(Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM) => {
                        thread::sleep(Duration::from_millis(ACCEPT_POLL_MS.into()));
                    }
                    _ => return Err(e),
                },
            }
        }
    }
    Ok(())
}

fn record(
    at_ms: u64,
    target: SocketAddr,
    decision: LogDecision,
    reason: Option<String>,
) -> ConnRecord {
    ConnRecord {
        at_ms,
        method: FORWARD_METHOD.to_owned(),
        host: target.ip().to_string(),
        port: target.port(),
        decision,
        reason,
        bytes_up: 0,
        bytes_down: 0,
        index_path: None,
    }
}

fn dispatch(shared: &Arc<Shared>, client: TcpStream, target: SocketAddr) {
    let at_ms = shared.now_ms();
    let _ = client.set_nonblocking(false);
    if shared.active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        shared.active.fetch_sub(1, Ordering::SeqCst);
        let why = format!("too many forwarded connections (limit {MAX_CONNECTIONS})");
        shared
            .log
            .record(&record(at_ms, target, LogDecision::Error, Some(why)));
        return;
    }
    let id = {
        let mut o = shared.open();
        o.next += 1;
        o.next
    };
    let sh = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("cbrun-forward".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            handle(&sh, id, at_ms, client, target);
            sh.untrack(id);
            sh.active.fetch_sub(1, Ordering::SeqCst);
        });
    if let Err(e) = spawned {
        shared.active.fetch_sub(1, Ordering::SeqCst);
        let why = format!("cannot start a forward thread: {e}");
        shared
            .log
            .record(&record(at_ms, target, LogDecision::Error, Some(why)));
    }
}

fn handle(shared: &Shared, id: u64, at_ms: u64, client: TcpStream, target: SocketAddr) {
    shared.track(id, &client);
    let upstream = match TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) {
        Ok(u) => u,
        Err(e) => {
            let why = format!("{target}: {e}");
            shared
                .log
                .record(&record(at_ms, target, LogDecision::Error, Some(why)));
            // The client sees the refusal as a reset, like a refused connect.
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    shared.track(id, &upstream);
    let (up, down, err) = relay(&client, &upstream, &[], LINGER);
    let mut rec = record(at_ms, target, LogDecision::Allowed, err);
    rec.bytes_up = up;
    rec.bytes_down = down;
    shared.log.record(&rec);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::Ipv4Addr;

    fn policy(allow: &[&str]) -> EgressPolicy {
        EgressPolicy::parse(allow, false, &[] as &[&str]).unwrap()
    }

    const PROXY: &str = "127.0.0.1:3128";

    #[test]
    fn loopback_entries_with_a_port_become_forwards() {
        let p = policy(&[
            "127.0.0.1:8080",
            "api.test:443",
            "[::1]:9",
            "localhost:7000",
            "127.0.0.1:8080",
            "10.0.0.1:80",
        ]);
        let (f, w) = forwards_for(&p, PROXY.parse().unwrap()).unwrap();
        let listen: Vec<String> = f.iter().map(|x| x.listen.to_string()).collect();
        assert_eq!(
            listen,
            ["127.0.0.1:8080", "[::1]:9", "127.0.0.1:7000", "[::1]:7000"]
        );
        assert!(f.iter().all(|x| x.listen == x.target));
        assert_eq!(
            f.iter().filter(|x| x.optional).count(),
            1,
            "only localhost's ::1"
        );
        assert!(w.is_empty());
        let (f, w) = forwards_for(&policy(&["127.0.0.1", "*"]), PROXY.parse().unwrap()).unwrap();
        assert!(f.is_empty());
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("--allow 127.0.0.1: a loopback entry without a port"),
            "{w:?}"
        );
        let e = forwards_for(&policy(&["127.0.0.1:3128"]), PROXY.parse().unwrap()).unwrap_err();
        assert!(e.contains("cbrun's proxy"), "{e}");
    }

    fn temp_log(name: &str) -> (std::path::PathBuf, ConnLog) {
        let p = std::env::temp_dir().join(format!("cbrun-fwd-{}-{name}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let log = ConnLog::open(&p).unwrap();
        (p, log)
    }

    #[test]
    fn relays_and_logs_and_reports_a_refused_target() {
        let upstream = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let up_addr = upstream.local_addr().unwrap();
        let up = thread::spawn(move || {
            let (mut s, _) = upstream.accept().unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            s.write_all(b"pong").unwrap();
        });
        // A port with nobody behind it: bind, note, close.
        let dead = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap();
        let front = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let front_addr = front.local_addr().unwrap();
        let front_dead = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let front_dead_addr = front_dead.local_addr().unwrap();
        let (path, log) = temp_log("relay");
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let server =
            thread::spawn(move || serve(vec![(front, up_addr), (front_dead, dead)], log, &stop2));
        let mut c = TcpStream::connect(front_addr).unwrap();
        c.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"pong");
        drop(c);
        up.join().unwrap();
        let mut d = TcpStream::connect(front_dead_addr).unwrap();
        let mut buf = Vec::new();
        let _ = d.read_to_end(&mut buf);
        assert!(buf.is_empty());
        // Let both records land, then stop.
        let end = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .count()
            < 2
        {
            assert!(Instant::now() < end, "records did not land");
            thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::SeqCst);
        server.join().unwrap().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let recs: Vec<ConnRecord> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ok = recs
            .iter()
            .find(|r| r.port == up_addr.port())
            .expect("the relayed connection");
        assert_eq!(ok.method, FORWARD_METHOD);
        assert_eq!(ok.decision, LogDecision::Allowed);
        assert_eq!((ok.bytes_up, ok.bytes_down), (4, 4));
        let bad = recs
            .iter()
            .find(|r| r.port == dead.port())
            .expect("the refused one");
        assert_eq!(bad.decision, LogDecision::Error);
        assert!(
            bad.reason
                .as_deref()
                .unwrap_or("")
                .to_lowercase()
                .contains("refused"),
            "{bad:?}"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
