//! The index against mock registries on loopback, through a real proxy.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::*;
use crate::net::http::{head_end, read_head};
use crate::net::log::ConnRecord;
use crate::net::proxy::Proxy;

/// A registry on loopback: fixed answers by path, and the paths asked.
struct Mock {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

type Answer = (u16, Vec<(String, String)>, Vec<u8>);

impl Mock {
    fn start(routes: HashMap<String, Answer>) -> Mock {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st) = (seen.clone(), stop.clone());
        let routes = Arc::new(routes);
        thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let Ok((mut c, _)) = l.accept() else {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (seen, routes) = (s2.clone(), routes.clone());
                thread::spawn(move || {
                    c.set_nonblocking(false).unwrap();
                    // One request per connection is enough: answers close.
                    let Ok((buf, end)) = read_head(&mut c, 65536, Duration::from_secs(5)) else {
                        return;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    let line = head.lines().next().unwrap_or("").to_owned();
                    let mut parts = line.split(' ');
                    let method = parts.next().unwrap_or("").to_owned();
                    let path = parts.next().unwrap_or("").to_owned();
                    seen.lock().unwrap().push(format!("{method} {path}"));
                    let (status, headers, body) = routes.get(&path).cloned().unwrap_or((
                        404,
                        vec![],
                        b"no such thing".to_vec(),
                    ));
                    let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
                    for (k, v) in &headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    if !headers.iter().any(|(k, _)| k == "Transfer-Encoding") {
                        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
                    }
                    out.push_str("\r\n");
                    let _ = c.write_all(out.as_bytes());
                    if method != "HEAD" {
                        let _ = c.write_all(&body);
                    }
                });
            }
        });
        Mock { addr, seen, stop }
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn ok(ct: &str, body: &str) -> Answer {
    (
        200,
        vec![("Content-Type".into(), ct.into())],
        body.as_bytes().to_vec(),
    )
}

/// A proxy with the index in front of `pypi`/`files`/`npm` mocks.
struct Front {
    addr: SocketAddr,
    log: std::path::PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Front {
    fn start(
        name: &str,
        registries: bool,
        bans: &[&str],
        ups: Upstreams,
        limits: IndexLimits,
    ) -> Front {
        let log =
            std::env::temp_dir().join(format!("cbrun-index-{}-{name}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let bans: Vec<String> = bans.iter().map(|s| s.to_string()).collect();
        let policy = EgressPolicy::parse(&["*"], registries, &[] as &[&str])
            .unwrap()
            .with_install_ban(&bans);
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let proxy = Proxy::new(policy, crate::net::log::ConnLog::open(&log).unwrap())
            .with_index(Index::new(ups, limits));
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = Some(thread::spawn(move || proxy.run(l, &st).unwrap()));
        Front {
            addr,
            log,
            stop,
            thread,
        }
    }

    fn public(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sends `req`, returns (status, head, decoded body, complete).
    fn get(&self, req: &str) -> (u16, String, Vec<u8>, bool) {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let end = head_end(&raw, 0).expect("a response head");
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let status: u16 = head[9..12].parse().unwrap();
        let rest = &raw[end..];
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            let (body, complete) = dechunk(rest);
            (status, head, body, complete)
        } else {
            (status, head, rest.to_vec(), true)
        }
    }

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
}

impl Drop for Front {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

fn dechunk(mut b: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        let Some(nl) = b.windows(2).position(|w| w == b"\r\n") else {
            return (out, false);
        };
        let Ok(n) = usize::from_str_radix(std::str::from_utf8(&b[..nl]).unwrap_or("x"), 16) else {
            return (out, false);
        };
        if n == 0 {
            return (out, true);
        }
        let start = nl + 2;
        if b.len() < start + n + 2 {
            out.extend_from_slice(&b[start.min(b.len())..]);
            return (out, false);
        }
        out.extend_from_slice(&b[start..start + n]);
        b = &b[start + n + 2..];
    }
}

fn upstreams(pypi: &Mock, files: &Mock, npm: &Mock) -> Upstreams {
    let (p, f, n) = (pypi.base(), files.base(), npm.base());
    Upstreams::from_env(move |v| match v {
        upstream::ENV_PYPI => Some(p.clone()),
        upstream::ENV_PYPI_FILES => Some(f.clone()),
        upstream::ENV_NPM => Some(n.clone()),
        _ => None,
    })
    .unwrap()
}

const WHEEL: &[u8] = b"PK\x03\x04 pretend wheel bytes";

#[test]
fn pypi_pages_and_files_are_served_and_bans_refused() {
    let files = Mock::start(HashMap::from([
        (
            "/packages/aa/bb/okpkg-1.0-py3-none-any.whl".to_string(),
            (200, vec![], WHEEL.to_vec()),
        ),
        (
            "/packages/cc/dd/semver-3.0.2-py3-none-any.whl".to_string(),
            (200, vec![], b"banned bytes".to_vec()),
        ),
    ]));
    let fb = files.base();
    let page = format!(
        "<html><body><a href=\"{fb}/packages/aa/bb/okpkg-1.0-py3-none-any.whl#sha256=00\">okpkg-1.0-py3-none-any.whl</a></body></html>"
    );
    let pypi = Mock::start(HashMap::from([
        ("/simple/okpkg/".to_string(), ok("text/html", &page)),
        (
            "/simple/semver/".to_string(),
            ok("text/html", "<a href=x>semver</a>"),
        ),
        (
            "/pypi/okpkg/json".to_string(),
            ok(
                "application/json",
                &format!(
                    "{{\"urls\":[{{\"url\":\"{fb}/packages/aa/bb/okpkg-1.0-py3-none-any.whl\"}}]}}"
                ),
            ),
        ),
        (
            "/simple/moved/".to_string(),
            (
                301,
                vec![("Location".into(), "https://elsewhere.test/".into())],
                vec![],
            ),
        ),
    ]));
    let npm = Mock::start(HashMap::new());
    let f = Front::start(
        "pypi",
        true,
        &["semver", "Semantic_Version"],
        upstreams(&pypi, &files, &npm),
        IndexLimits::default(),
    );
    let public = f.public();

    let (st, head, body, complete) = f.get(
        "GET /pypi/simple/OKPKG/ HTTP/1.1\r\nAccept: text/html\r\nAccept-Encoding: gzip\r\n\r\n",
    );
    assert_eq!(st, 200, "{head}");
    assert!(
        complete && head.contains("Content-Type: text/html"),
        "{head}"
    );
    let body = String::from_utf8(body).unwrap();
    assert!(
        body.contains(&format!(
            "href=\"{public}/pypi/files/packages/aa/bb/okpkg-1.0-py3-none-any.whl#sha256=00\""
        )),
        "{body}"
    );
    assert!(!body.contains(&fb), "upstream URL left in: {body}");

    let (st, head, body, _) =
        f.get("GET /pypi/files/packages/aa/bb/okpkg-1.0-py3-none-any.whl HTTP/1.1\r\n\r\n");
    assert_eq!((st, body.as_slice()), (200, WHEEL), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {}", WHEEL.len())),
        "{head}"
    );

    // The JSON API is rewritten the same way.
    let (st, _, body, _) = f.get("GET /pypi/pypi/okpkg/json HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    assert!(String::from_utf8(body)
        .unwrap()
        .contains(&format!("{public}/pypi/files/")));

    // Banned: pages, the JSON API and files, whatever the spelling, and
    // absolute-form through the proxy setting too.
    for req in [
        "GET /pypi/simple/Semver/ HTTP/1.1\r\n\r\n".to_string(),
        "GET /pypi/simple/semantic.version/ HTTP/1.1\r\n\r\n".to_string(),
        "GET /pypi/pypi/SEMVER/3.0.2/json HTTP/1.1\r\n\r\n".to_string(),
        "GET /pypi/files/packages/cc/dd/semver-3.0.2-py3-none-any.whl HTTP/1.1\r\n\r\n".to_string(),
        "HEAD /pypi/files/packages/cc/dd/semver-3.0.2-py3-none-any.whl.metadata HTTP/1.1\r\n\r\n"
            .to_string(),
        format!("GET {public}/pypi/simple/semver/ HTTP/1.1\r\n\r\n"),
    ] {
        let (st, head, body, _) = f.get(&req);
        assert_eq!(st, 404, "{req}: {head}");
        let body = String::from_utf8(body).unwrap();
        if !req.starts_with("HEAD") {
            assert!(body.contains("install denylist"), "{req}: {body}");
        }
    }
    // An upstream redirect is not followed; a missing project is passed on.
    let (st, _, body, _) = f.get("GET /pypi/simple/moved/ HTTP/1.1\r\n\r\n");
    assert_eq!(st, 502);
    assert!(String::from_utf8(body).unwrap().contains("not followed"));
    let (st, _, _, _) = f.get("GET /pypi/simple/nothere/ HTTP/1.1\r\n\r\n");
    assert_eq!(st, 404);
    let (st, _, _, _) = f.get("POST /pypi/simple/okpkg/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(st, 405);
    let (st, _, _, _) = f.get("GET /pypi/simple/ HTTP/1.1\r\n\r\n");
    assert_eq!(st, 404);

    // The banned project was never asked for upstream.
    let asked: Vec<String> = pypi.seen().into_iter().chain(files.seen()).collect();
    assert!(
        !asked
            .iter()
            .any(|p| p.contains("semver") || p.contains("semantic")),
        "{asked:?}"
    );
    assert!(
        asked.contains(&"GET /simple/okpkg/".to_string()),
        "{asked:?}"
    );

    let recs = f.records(13);
    let pypi_port = pypi.addr.port();
    assert_eq!(recs[0].index_path.as_deref(), Some("/pypi/simple/OKPKG/"));
    assert_eq!(
        (recs[0].host.as_str(), recs[0].port),
        ("127.0.0.1", pypi_port)
    );
    assert_eq!(recs[0].decision, LogDecision::Allowed);
    assert!(recs[0].bytes_down > 0);
    assert_eq!(recs[1].port, files.addr.port());
    for r in &recs[3..9] {
        assert_eq!(r.decision, LogDecision::Denied, "{r:?}");
        assert!(r.reason.as_deref().unwrap().contains("denylist"), "{r:?}");
    }
}

#[test]
fn npm_documents_tarballs_and_scopes() {
    let doc = |base: &str, name: &str, file: &str| {
        format!(
            "{{\"name\":\"{name}\",\"versions\":{{\"1.0.0\":{{\"dist\":{{\"tarball\":\"{base}/{name}/-/{file}\"}}}}}}}}"
        )
    };
    // Documents link the canonical registry; the rewrite covers it too.
    let canon = "https://registry.npmjs.org";
    let npm = Mock::start(HashMap::from([
        (
            "/okjs".to_string(),
            ok("application/json", &doc(canon, "okjs", "okjs-1.0.0.tgz")),
        ),
        (
            "/@ok%2fscoped".to_string(),
            ok(
                "application/json",
                &doc(canon, "@ok/scoped", "scoped-1.0.0.tgz"),
            ),
        ),
        (
            "/okjs/-/okjs-1.0.0.tgz".to_string(),
            (200, vec![], b"tgz!".to_vec()),
        ),
        (
            "/@ok/scoped/-/scoped-1.0.0.tgz".to_string(),
            (200, vec![], b"stgz".to_vec()),
        ),
    ]));
    let other = Mock::start(HashMap::new());
    let f = Front::start(
        "npm",
        true,
        &["semver", "@evil/*"],
        upstreams(&other, &other, &npm),
        IndexLimits::default(),
    );
    let public = f.public();
    let (st, _, body, complete) =
        f.get("GET /npm/okjs HTTP/1.1\r\nAccept: application/vnd.npm.install-v1+json\r\n\r\n");
    assert!(st == 200 && complete);
    let body = String::from_utf8(body).unwrap();
    assert!(
        body.contains(&format!("\"{public}/npm/okjs/-/okjs-1.0.0.tgz\"")),
        "{body}"
    );
    let (st, _, body, _) = f.get("GET /npm/@ok%2Fscoped HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    assert!(String::from_utf8(body)
        .unwrap()
        .contains(&format!("{public}/npm/@ok/scoped/-/scoped-1.0.0.tgz")));
    let (st, _, body, _) = f.get("GET /npm/okjs/-/okjs-1.0.0.tgz HTTP/1.1\r\n\r\n");
    assert_eq!((st, body.as_slice()), (200, &b"tgz!"[..]));
    let (st, _, body, _) = f.get("GET /npm/@ok/scoped/-/scoped-1.0.0.tgz HTTP/1.1\r\n\r\n");
    assert_eq!((st, body.as_slice()), (200, &b"stgz"[..]));
    for req in [
        "GET /npm/semver HTTP/1.1",
        "GET /npm/SemVer/latest HTTP/1.1",
        "GET /npm/semver/-/semver-7.5.4.tgz HTTP/1.1",
        "GET /npm/@evil%2fpkg HTTP/1.1",
        "GET /npm/@Evil/pkg/-/pkg-1.0.0.tgz HTTP/1.1",
    ] {
        let (st, _, body, _) = f.get(&format!("{req}\r\n\r\n"));
        assert_eq!(st, 404, "{req}");
        assert!(
            String::from_utf8(body).unwrap().contains("denylist"),
            "{req}"
        );
    }
    // A tarball filed under another package's name is refused.
    let (st, _, _, _) = f.get("GET /npm/okjs/-/semver-7.5.4.tgz HTTP/1.1\r\n\r\n");
    assert_eq!(st, 400);
    assert!(!npm
        .seen()
        .iter()
        .any(|p| p.contains("semver") || p.contains("evil")));
    f.records(10);
}

#[test]
fn registries_flag_caps_and_head() {
    let big = "x".repeat(300_000);
    let npm = Mock::start(HashMap::from([
        ("/big".to_string(), ok("application/json", &big)),
        ("/small".to_string(), ok("application/json", "{}")),
    ]));
    let other = Mock::start(HashMap::new());
    let no = Front::start(
        "noreg",
        false,
        &["semver"],
        upstreams(&other, &other, &npm),
        IndexLimits::default(),
    );
    let (st, _, body, _) = no.get("GET /npm/small HTTP/1.1\r\n\r\n");
    assert_eq!(st, 403);
    assert!(String::from_utf8(body)
        .unwrap()
        .contains("--allow-registries"));
    assert_eq!(no.records(1)[0].decision, LogDecision::Denied);
    assert!(npm.seen().is_empty());

    let limits = IndexLimits {
        max_document_bytes: 100_000,
        ..IndexLimits::default()
    };
    let f = Front::start("cap", true, &[], upstreams(&other, &other, &npm), limits);
    let (st, _, body, complete) = f.get("GET /npm/big HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    assert!(!complete, "an over-long document must end incomplete");
    assert!(body.len() <= 100_000 + 16 * 1024, "{}", body.len());
    let (st, head, body, _) = f.get("HEAD /npm/small HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200, "{head}");
    assert!(body.is_empty(), "{head}");
    let recs = f.records(2);
    assert!(
        recs[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("larger than 100000"),
        "{:?}",
        recs[0]
    );
}
