//! Pulls against a registry mocked in-process (std TcpListener threads, on
//! 127.0.0.1 only): bearer and basic auth, redirects to another origin,
//! broken downloads resumed with Range (honoured or not), partial files,
//! 5xx/429 retries, digest mismatches, platform selection.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::http::Tuning;
use super::*;
use crate::image::digest::{Digest, DigestWriter};

// ---------------------------------------------------------------- test sink

/// A blob store in a temp dir: `blobs/<hex>`, partials in `partial/<hex>`.
pub(super) struct DirSink {
    pub root: PathBuf,
    pub partials: bool,
}

impl DirSink {
    pub fn new(tag: &str, partials: bool) -> DirSink {
        let root = temp_dir(tag);
        fs::create_dir_all(root.join("blobs")).unwrap();
        DirSink { root, partials }
    }
    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.root.join("blobs").join(d.hex())
    }
    pub fn blob(&self, d: &Digest) -> Vec<u8> {
        fs::read(self.blob_path(d)).unwrap()
    }
    pub fn count(&self) -> usize {
        fs::read_dir(self.root.join("blobs")).unwrap().count()
    }
}

impl Drop for DirSink {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

impl BlobSink for DirSink {
    fn has_blob(&self, d: &Digest) -> bool {
        self.blob_path(d).exists()
    }
    fn put_blob(&self, r: &mut dyn Read, expected: &Digest) -> io::Result<u64> {
        let tmp = self.root.join(format!("tmp-{}", expected.hex()));
        let result = (|| {
            let mut w = DigestWriter::new(fs::File::create(&tmp)?);
            io::copy(r, &mut w)?;
            let (d, n, f) = w.finish();
            f.sync_all()?;
            expected
                .verify(&d)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            fs::rename(&tmp, self.blob_path(expected))?;
            Ok(n)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
    fn partial_path(&self, d: &Digest) -> Option<PathBuf> {
        self.partials
            .then(|| self.root.join("partial").join(d.hex()))
    }
}

pub(super) fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "cbrun-pull-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&p);
    fs::create_dir_all(&p).unwrap();
    p
}

pub(super) fn fast() -> Tuning {
    Tuning {
        backoff_base: Duration::from_millis(5),
        backoff_max: Duration::from_millis(20),
        retry_after_max: Duration::from_millis(20),
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
    }
}

// ------------------------------------------------------------- mock server

#[derive(Debug, Clone)]
struct Req {
    path: String,
    headers: HashMap<String, String>,
}

impl Req {
    fn header(&self, n: &str) -> Option<&str> {
        self.headers
            .get(&n.to_ascii_lowercase())
            .map(String::as_str)
    }
}

type Handler = Arc<dyn Fn(&Req, &mut TcpStream) + Send + Sync>;

struct Mock {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Req>>>,
}

impl Mock {
    fn start(handler: impl Fn(&Req, &mut TcpStream) + Send + Sync + 'static) -> Mock {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let handler: Handler = Arc::new(handler);
        let (stop2, log2) = (stop.clone(), log.clone());
        thread::spawn(move || {
            for conn in l.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut s) = conn else { continue };
                let (h, log) = (handler.clone(), log2.clone());
                thread::spawn(move || {
                    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
                    if let Some(req) = read_request(&s) {
                        log.lock().unwrap().push(req.clone());
                        h(&req, &mut s);
                    }
                    let _ = s.flush();
                });
            }
        });
        Mock { addr, stop, log }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn host(&self) -> String {
        self.addr.to_string()
    }

    fn requests(&self, path_contains: &str) -> Vec<Req> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path.contains(path_contains))
            .cloned()
            .collect()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn read_request(s: &TcpStream) -> Option<Req> {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let _method = parts.next()?;
    let path = parts.next()?.to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).ok()? == 0 {
            return None;
        }
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    Some(Req { path, headers })
}

fn respond(s: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
}

/// Headers promising the whole `data`, then only its first `n` bytes, then close.
fn respond_truncated(s: &mut TcpStream, data: &[u8], n: usize) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        data.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&data[..n]);
    let _ = s.flush();
    let _ = s.shutdown(std::net::Shutdown::Both);
}

fn error_json(code: &str, msg: &str) -> Vec<u8> {
    format!(r#"{{"errors":[{{"code":"{code}","message":"{msg}"}}]}}"#).into_bytes()
}

/// Serve `data`, honouring `Range: bytes=N-` with a 206 when `ranges`.
fn serve_blob(req: &Req, s: &mut TcpStream, data: &[u8], ranges: bool) {
    let start = req
        .header("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    match start {
        Some(n) if ranges && n < data.len() => respond(
            s,
            "206 Partial Content",
            &[(
                "Content-Range",
                format!("bytes {n}-{}/{}", data.len() - 1, data.len()),
            )],
            &data[n..],
        ),
        Some(_) if ranges => respond(s, "416 Range Not Satisfiable", &[], b""),
        _ => respond(s, "200 OK", &[], data),
    }
}

// --------------------------------------------------------------- fixtures

/// A deterministic pseudo-random byte string.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

struct Image {
    config: Vec<u8>,
    layers: Vec<Vec<u8>>,
    manifest: Vec<u8>,
}

impl Image {
    fn new(seed: u64, arch: &str, media_type: &str) -> Image {
        let config = format!(
            r#"{{"architecture":"{arch}","os":"linux","rootfs":{{"type":"layers","diff_ids":[]}},"config":{{}},"seed":{seed}}}"#
        )
        .into_bytes();
        let layers = vec![noise(300_000, seed), noise(1000, seed + 1)];
        let (config_mt, layer_mt) = if media_type == DOCKER_MANIFEST {
            (
                DOCKER_CONFIG,
                "application/vnd.docker.image.rootfs.diff.tar.gzip",
            )
        } else {
            (OCI_CONFIG, "application/vnd.oci.image.layer.v1.tar+gzip")
        };
        let desc = |mt: &str, b: &[u8]| {
            format!(
                r#"{{"mediaType":"{mt}","digest":"{}","size":{}}}"#,
                Digest::of_bytes(b),
                b.len()
            )
        };
        let layer_descs: Vec<String> = layers.iter().map(|l| desc(layer_mt, l)).collect();
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"{media_type}","config":{},"layers":[{}]}}"#,
            desc(config_mt, &config),
            layer_descs.join(",")
        )
        .into_bytes();
        Image {
            config,
            layers,
            manifest,
        }
    }

    fn blobs(&self) -> HashMap<String, Vec<u8>> {
        let mut m = HashMap::new();
        m.insert(
            Digest::of_bytes(&self.config).to_string(),
            self.config.clone(),
        );
        for l in &self.layers {
            m.insert(Digest::of_bytes(l).to_string(), l.clone());
        }
        m
    }

    fn digest(&self) -> Digest {
        Digest::of_bytes(&self.manifest)
    }
}

/// The content of a plain registry for `test/img`: manifests by tag and
/// digest, blobs by digest.
#[derive(Clone, Default)]
struct Content {
    manifests: HashMap<String, (String, Vec<u8>)>,
    blobs: HashMap<String, Vec<u8>>,
}

impl Content {
    fn with_image(tag: &str, img: &Image, mt: &str) -> Content {
        let mut c = Content::default();
        c.add_manifest(tag, mt, &img.manifest);
        c.blobs.extend(img.blobs());
        c
    }
    fn add_manifest(&mut self, tag: &str, mt: &str, bytes: &[u8]) {
        self.manifests
            .insert(tag.into(), (mt.into(), bytes.to_vec()));
        self.manifests.insert(
            Digest::of_bytes(bytes).to_string(),
            (mt.into(), bytes.to_vec()),
        );
    }

    /// Answer like a registry; `false` when the path is not ours.
    fn serve(&self, req: &Req, s: &mut TcpStream) -> bool {
        if let Some(r) = req.path.strip_prefix("/v2/test/img/manifests/") {
            match self.manifests.get(r) {
                Some((mt, b)) => respond(
                    s,
                    "200 OK",
                    &[
                        ("Content-Type", mt.clone()),
                        ("Docker-Content-Digest", Digest::of_bytes(b).to_string()),
                    ],
                    b,
                ),
                None => respond(
                    s,
                    "404 Not Found",
                    &[("Content-Type", "application/json".into())],
                    &error_json("MANIFEST_UNKNOWN", "manifest unknown"),
                ),
            }
            return true;
        }
        if let Some(d) = req.path.strip_prefix("/v2/test/img/blobs/") {
            match self.blobs.get(d) {
                Some(b) => serve_blob(req, s, b, true),
                None => respond(
                    s,
                    "404 Not Found",
                    &[],
                    &error_json("BLOB_UNKNOWN", "blob unknown"),
                ),
            }
            return true;
        }
        false
    }
}

fn insecure() -> PullOptions {
    PullOptions {
        insecure: true,
        ..PullOptions::default()
    }
}

fn check_pulled(p: &Pulled, img: &Image, sink: &DirSink) {
    assert_eq!(p.manifest_bytes, img.manifest);
    assert_eq!(p.manifest_digest, img.digest());
    assert_eq!(p.config_digest, Digest::of_bytes(&img.config));
    assert_eq!(sink.blob(&p.config_digest), img.config);
    assert_eq!(p.layers.len(), img.layers.len());
    for (d, l) in p.layers.iter().zip(&img.layers) {
        assert_eq!(*d, Digest::of_bytes(l));
        assert_eq!(sink.blob(d), *l);
    }
}

fn total(img: &Image) -> u64 {
    (img.config.len() + img.layers.iter().map(Vec::len).sum::<usize>()) as u64
}

// -------------------------------------------------------------------- tests

#[test]
fn plain_pull_then_everything_skipped_then_by_digest() {
    let img = Image::new(1, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let reg = Mock::start(move |req, s| {
        assert!(content.serve(req, s), "unexpected {}", req.path);
    });
    let sink = DirSink::new("plain", false);
    let r = format!("{}/test/img:1", reg.host());
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(p.manifest_media_type, OCI_MANIFEST);
    assert_eq!(p.index_digest, None);
    assert_eq!(p.blobs_skipped, 0);
    assert_eq!(p.bytes_downloaded, total(&img) + img.manifest.len() as u64);
    assert_eq!(p.reference.tag.as_deref(), Some("1"));
    assert_eq!(sink.count(), 3);
    let accept = reg.requests("/manifests/")[0]
        .header("accept")
        .unwrap()
        .to_owned();
    for mt in [
        OCI_MANIFEST,
        OCI_INDEX,
        DOCKER_MANIFEST,
        DOCKER_MANIFEST_LIST,
    ] {
        assert!(accept.contains(mt), "{accept}");
    }
    assert!(reg
        .requests("/blobs/")
        .iter()
        .all(|r| r.header("authorization").is_none()));

    let again = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    assert_eq!(again.blobs_skipped, 3);
    assert_eq!(again.bytes_downloaded, img.manifest.len() as u64);
    assert_eq!(reg.requests("/blobs/").len(), 3, "no blob fetched twice");

    let by_digest = format!("{}/test/img@{}", reg.host(), img.digest());
    let p = pull_with(&by_digest, &sink, &insecure(), fast()).unwrap();
    assert_eq!(p.manifest_digest, img.digest());
    assert!(reg.requests(&format!("/manifests/{}", img.digest())).len() == 1);
}

#[test]
fn docker_schema2_is_accepted_as_is() {
    let img = Image::new(2, "amd64", DOCKER_MANIFEST);
    let content = Content::with_image("d", &img, DOCKER_MANIFEST);
    let reg = Mock::start(move |req, s| {
        content.serve(req, s);
    });
    let sink = DirSink::new("docker", false);
    let p = pull_with(
        &format!("{}/test/img:d", reg.host()),
        &sink,
        &insecure(),
        fast(),
    )
    .unwrap();
    assert_eq!(p.manifest_media_type, DOCKER_MANIFEST);
    check_pulled(&p, &img, &sink);
}

#[test]
fn index_picks_the_host_platform_or_the_asked_one() {
    let amd = Image::new(3, "amd64", OCI_MANIFEST);
    let arm = Image::new(4, "arm64", OCI_MANIFEST);
    let index = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[
        {{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":{},"platform":{{"architecture":"amd64","os":"linux"}}}},
        {{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":{},"platform":{{"architecture":"arm64","os":"linux","variant":"v8"}}}}]}}"#,
        amd.digest(),
        amd.manifest.len(),
        arm.digest(),
        arm.manifest.len()
    );
    let mut content = Content::default();
    content.add_manifest("multi", OCI_INDEX, index.as_bytes());
    content.add_manifest("amd", OCI_MANIFEST, &amd.manifest);
    content.add_manifest("arm", OCI_MANIFEST, &arm.manifest);
    content.blobs.extend(amd.blobs());
    content.blobs.extend(arm.blobs());
    let reg = Mock::start(move |req, s| {
        content.serve(req, s);
    });
    let r = format!("{}/test/img:multi", reg.host());

    let sink = DirSink::new("index", false);
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    let host = if host_arch() == "arm64" { &arm } else { &amd };
    if ["amd64", "arm64"].contains(&host_arch()) {
        check_pulled(&p, host, &sink);
    }
    assert_eq!(p.index_digest, Some(Digest::of_bytes(index.as_bytes())));

    let sink = DirSink::new("index-arm", false);
    let opts = PullOptions {
        platform: Some(("linux".into(), "arm64".into(), None)),
        ..insecure()
    };
    let p = pull_with(&r, &sink, &opts, fast()).unwrap();
    check_pulled(&p, &arm, &sink);

    let opts = PullOptions {
        platform: Some(("linux".into(), "s390x".into(), None)),
        ..insecure()
    };
    let e = pull_with(&r, &sink, &opts, fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pull {r}: manifest: no manifest for platform linux/s390x (available: linux/amd64, linux/arm64/v8)")
    );
}

#[test]
fn bearer_token_with_credentials_cached_and_not_leaked_on_redirect() {
    let img = Image::new(5, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let blobs = img.blobs();
    // Storage on another origin: must never see the registry's token.
    let storage = Mock::start(move |req, s| {
        assert!(
            req.header("authorization").is_none(),
            "token leaked to storage"
        );
        let d = req
            .path
            .trim_start_matches("/store/")
            .split('?')
            .next()
            .unwrap();
        serve_blob(req, s, &blobs[d], true);
    });
    let storage_url = storage.url();
    let token_hits = Arc::new(AtomicUsize::new(0));
    let hits = token_hits.clone();
    let reg_addr = Arc::new(Mutex::new(String::new()));
    let reg_addr2 = reg_addr.clone();
    let reg = Mock::start(move |req, s| {
        if req.path.starts_with("/token?") {
            hits.fetch_add(1, Ordering::SeqCst);
            if req.header("authorization") != Some(&super::auth::basic_header("alice", "s3cret")) {
                respond(s, "401 Unauthorized", &[], br#"{"details":"bad creds"}"#);
                return;
            }
            assert!(req.path.contains("service=mock-registry"), "{}", req.path);
            assert!(
                req.path.contains("scope=repository%3Atest%2Fimg%3Apull"),
                "{}",
                req.path
            );
            respond(s, "200 OK", &[], br#"{"token":"tok-1","expires_in":300}"#);
            return;
        }
        if req.header("authorization") != Some("Bearer tok-1") {
            let realm = format!("http://{}/token", reg_addr2.lock().unwrap());
            respond(
                s,
                "401 Unauthorized",
                &[(
                    "WWW-Authenticate",
                    format!(
                        r#"Bearer realm="{realm}",service="mock-registry",scope="repository:test/img:pull""#
                    ),
                )],
                &error_json("UNAUTHORIZED", "authentication required"),
            );
            return;
        }
        if let Some(d) = req.path.strip_prefix("/v2/test/img/blobs/") {
            respond(
                s,
                "307 Temporary Redirect",
                &[("Location", format!("{storage_url}/store/{d}?sig=x"))],
                b"",
            );
            return;
        }
        content.serve(req, s);
    });
    *reg_addr.lock().unwrap() = reg.host();
    let r = format!("{}/test/img:1", reg.host());

    let sink = DirSink::new("bearer", false);
    let opts = PullOptions {
        credentials: Some(("alice".into(), "s3cret".into())),
        ..insecure()
    };
    let p = pull_with(&r, &sink, &opts, fast()).unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(
        token_hits.load(Ordering::SeqCst),
        1,
        "token cached for the scope"
    );
    assert_eq!(storage.requests("/store/").len(), 3);
    // Once the token is known, blob requests carry it from the start.
    assert!(reg
        .requests("/blobs/")
        .iter()
        .all(|r| r.header("authorization") == Some("Bearer tok-1")));

    // Without credentials the token server refuses: one clear line.
    let sink = DirSink::new("bearer-anon", false);
    let e = pull_with(&r, &sink, &insecure(), fast()).unwrap_err();
    assert_eq!(e.status(), Some(401), "{e}");
    assert_eq!(
        e.to_string(),
        format!("pull {r}: manifest: token: 401 Unauthorized")
    );
    assert_eq!(sink.count(), 0);
}

#[test]
fn expired_token_is_refetched_once() {
    let img = Image::new(6, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let issued = Arc::new(AtomicUsize::new(0));
    let issued2 = issued.clone();
    let reg_addr = Arc::new(Mutex::new(String::new()));
    let reg_addr2 = reg_addr.clone();
    let reg = Mock::start(move |req, s| {
        if req.path.starts_with("/token") {
            let n = issued2.fetch_add(1, Ordering::SeqCst) + 1;
            respond(
                s,
                "200 OK",
                &[],
                format!(r#"{{"access_token":"t{n}"}}"#).as_bytes(),
            );
            return;
        }
        // Token t1 "expires" once the manifest has been served; t2 is good.
        let ok = match req.header("authorization") {
            Some("Bearer t1") => req.path.contains("/manifests/"),
            Some("Bearer t2") => true,
            _ => false,
        };
        if !ok {
            let realm = format!("http://{}/token", reg_addr2.lock().unwrap());
            respond(
                s,
                "401 Unauthorized",
                &[(
                    "WWW-Authenticate",
                    format!(r#"Bearer realm="{realm}",scope="repository:test/img:pull""#),
                )],
                b"",
            );
            return;
        }
        content.serve(req, s);
    });
    *reg_addr.lock().unwrap() = reg.host();
    let sink = DirSink::new("expired", false);
    let p = pull_with(
        &format!("{}/test/img:1", reg.host()),
        &sink,
        &insecure(),
        fast(),
    )
    .unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(issued.load(Ordering::SeqCst), 2);
}

#[test]
fn basic_challenge_uses_the_credentials() {
    let img = Image::new(7, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let reg = Mock::start(move |req, s| {
        if req.header("authorization") != Some(&super::auth::basic_header("bob", "pw")) {
            respond(
                s,
                "401 Unauthorized",
                &[("WWW-Authenticate", r#"Basic realm="reg""#.into())],
                b"",
            );
            return;
        }
        content.serve(req, s);
    });
    let r = format!("{}/test/img:1", reg.host());
    let sink = DirSink::new("basic", false);
    let opts = PullOptions {
        credentials: Some(("bob".into(), "pw".into())),
        ..insecure()
    };
    check_pulled(&pull_with(&r, &sink, &opts, fast()).unwrap(), &img, &sink);
    let e = pull_with(&r, &DirSink::new("basic-anon", false), &insecure(), fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pull {r}: manifest: 401 Unauthorized")
    );
    let wrong = PullOptions {
        credentials: Some(("bob".into(), "nope".into())),
        ..insecure()
    };
    let e = pull_with(&r, &DirSink::new("basic-wrong", false), &wrong, fast()).unwrap_err();
    assert_eq!(e.status(), Some(401));
}

/// A registry whose first answer for the big layer breaks off after
/// `cut` bytes; later answers honour Range or not.
fn flaky_registry(img: &Image, ranges: bool, cut: usize) -> (Mock, Arc<AtomicUsize>) {
    let content = Content::with_image("1", img, OCI_MANIFEST);
    let big = img.layers[0].clone();
    let big_path = format!("/v2/test/img/blobs/{}", Digest::of_bytes(&big));
    let first = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicUsize::new(0));
    let calls2 = calls.clone();
    let reg = Mock::start(move |req, s| {
        if req.path == big_path {
            calls2.fetch_add(1, Ordering::SeqCst);
            if first.swap(false, Ordering::SeqCst) {
                respond_truncated(s, &big, cut);
            } else {
                serve_blob(req, s, &big, ranges);
            }
            return;
        }
        content.serve(req, s);
    });
    (reg, calls)
}

#[test]
fn broken_download_resumes_with_range() {
    let img = Image::new(8, "amd64", OCI_MANIFEST);
    let cut = 120_000;
    let (reg, calls) = flaky_registry(&img, true, cut);
    let sink = DirSink::new("resume", false);
    let p = pull_with(
        &format!("{}/test/img:1", reg.host()),
        &sink,
        &insecure(),
        fast(),
    )
    .unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let big = reg.requests(&Digest::of_bytes(&img.layers[0]).to_string());
    assert_eq!(big[0].header("range"), None);
    assert_eq!(
        big[1].header("range"),
        Some(format!("bytes={cut}-").as_str())
    );
    // Nothing downloaded twice.
    assert_eq!(p.bytes_downloaded, total(&img) + img.manifest.len() as u64);
}

#[test]
fn broken_download_restarts_when_range_is_ignored() {
    let img = Image::new(9, "amd64", OCI_MANIFEST);
    let cut = 50_000;
    let (reg, calls) = flaky_registry(&img, false, cut);
    let sink = DirSink::new("restart", false);
    let p = pull_with(
        &format!("{}/test/img:1", reg.host()),
        &sink,
        &insecure(),
        fast(),
    )
    .unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        p.bytes_downloaded,
        total(&img) + img.manifest.len() as u64 + cut as u64
    );
}

#[test]
fn partial_file_is_resumed_and_removed() {
    let img = Image::new(10, "amd64", OCI_MANIFEST);
    let big = img.layers[0].clone();
    let d = Digest::of_bytes(&big);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let reg = Mock::start(move |req, s| {
        content.serve(req, s);
    });
    let r = format!("{}/test/img:1", reg.host());

    // A previous run left the first 100 000 bytes.
    let sink = DirSink::new("partial", true);
    let part = sink.partial_path(&d).unwrap();
    fs::create_dir_all(part.parent().unwrap()).unwrap();
    fs::write(&part, &big[..100_000]).unwrap();
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    check_pulled(&p, &img, &sink);
    let reqs = reg.requests(&d.to_string());
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("range"), Some("bytes=100000-"));
    assert!(!part.exists(), "partial removed once stored");
    assert!(!Path::new(
        &sink
            .root
            .join("partial")
            .join(Digest::of_bytes(&img.config).hex())
    )
    .exists());

    // A corrupt partial: the digest check fails, it is dropped, the blob is fetched whole.
    let sink = DirSink::new("partial-bad", true);
    let part = sink.partial_path(&d).unwrap();
    fs::create_dir_all(part.parent().unwrap()).unwrap();
    fs::write(&part, vec![0u8; 1000]).unwrap();
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    check_pulled(&p, &img, &sink);
    assert!(!part.exists());
    let reqs = reg.requests(&d.to_string());
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[1].header("range"), Some("bytes=1000-"));
    assert_eq!(reqs[2].header("range"), None);
}

#[test]
fn slow_progress_keeps_resuming_and_a_stall_keeps_the_partial() {
    let img = Image::new(11, "amd64", OCI_MANIFEST);
    let big = img.layers[0].clone();
    let d = Digest::of_bytes(&big);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let big2 = big.clone();
    let d2 = d.clone();
    // Every answer breaks off after 10 000 more bytes; while `stuck`, no
    // byte past 200 000 is ever sent.
    let stuck = Arc::new(AtomicBool::new(true));
    let stuck2 = stuck.clone();
    let reg = Mock::start(move |req, s| {
        if req.path.ends_with(&d2.to_string()) {
            let start: usize = req
                .header("range")
                .and_then(|r| {
                    r.trim_start_matches("bytes=")
                        .trim_end_matches('-')
                        .parse()
                        .ok()
                })
                .unwrap_or(0);
            let limit = if stuck2.load(Ordering::SeqCst) {
                200_000
            } else {
                big2.len()
            };
            let end = (start + 10_000).min(limit).max(start);
            let head = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{}/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                big2.len() - 1,
                big2.len(),
                big2.len() - start
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&big2[start..end]);
            return;
        }
        content.serve(req, s);
    });
    let r = format!("{}/test/img:1", reg.host());
    let sink = DirSink::new("stall", true);
    let e = pull_with(&r, &sink, &insecure(), fast()).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Transport(_)), "{e}");
    assert!(e.to_string().contains("at byte 200000 of 300000"), "{e}");
    assert!(e.to_string().ends_with("(after 5 attempts)"), "{e}");
    let part = sink.partial_path(&d).unwrap();
    assert_eq!(fs::read(&part).unwrap(), big[..200_000]);
    assert!(!sink.has_blob(&d));

    // Next run: resumes from the partial file, and progress (10 000 bytes
    // an answer) keeps resetting the retry budget.
    stuck.store(false, Ordering::SeqCst);
    let before = reg.requests(&d.to_string()).len();
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    check_pulled(&p, &img, &sink);
    let reqs = reg.requests(&d.to_string());
    assert_eq!(reqs[before].header("range"), Some("bytes=200000-"));
    assert_eq!(reqs.len() - before, 10);
    assert!(!part.exists());
}

#[test]
fn transient_errors_are_retried_then_reported() {
    let img = Image::new(12, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let reg = Mock::start(move |req, s| {
        if req.path.contains("/manifests/") {
            match n2.fetch_add(1, Ordering::SeqCst) {
                0 => return respond(s, "503 Service Unavailable", &[], b""),
                1 => {
                    return respond(
                        s,
                        "429 Too Many Requests",
                        &[("Retry-After", "3600".into())],
                        b"",
                    )
                }
                2 => return respond(s, "502 Bad Gateway", &[], b""),
                _ => {}
            }
        }
        content.serve(req, s);
    });
    let r = format!("{}/test/img:1", reg.host());
    let sink = DirSink::new("retry", false);
    let t0 = std::time::Instant::now();
    check_pulled(
        &pull_with(&r, &sink, &insecure(), fast()).unwrap(),
        &img,
        &sink,
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "Retry-After is capped"
    );

    let always = Mock::start(|_, s| {
        respond(
            s,
            "503 Service Unavailable",
            &[],
            &error_json("UNAVAILABLE", "try later"),
        )
    });
    let r = format!("{}/test/img:1", always.host());
    let opts = PullOptions {
        retries: 2,
        ..insecure()
    };
    let e = pull_with(&r, &DirSink::new("retry-fail", false), &opts, fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pull {r}: manifest: 503 Service Unavailable (UNAVAILABLE: try later) (after 3 attempts)")
    );
    assert_eq!(always.requests("/manifests/").len(), 3);

    // Nothing listening: connection refused is retried, then reported.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = pull_with(
        &format!("127.0.0.1:{port}/x:1"),
        &DirSink::new("refused", false),
        &opts,
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Transport(_)), "{e}");
    assert_eq!(e.attempts, 3, "{e}");
}

#[test]
fn registry_errors_are_one_line() {
    let img = Image::new(13, "amd64", OCI_MANIFEST);
    let mut content = Content::with_image("1", &img, OCI_MANIFEST);
    // A layer served with the wrong bytes.
    let bad_layer = Digest::of_bytes(&img.layers[1]).to_string();
    content.blobs.insert(bad_layer.clone(), noise(1000, 999));
    let reg = Mock::start(move |req, s| {
        if req.path.ends_with("/manifests/lying") {
            return respond(
                s,
                "200 OK",
                &[
                    ("Content-Type", OCI_MANIFEST.into()),
                    (
                        "Docker-Content-Digest",
                        Digest::of_bytes(b"other").to_string(),
                    ),
                ],
                &content.manifests["1"].1,
            );
        }
        if req.path.ends_with("/manifests/huge") {
            let mut big = br#"{"schemaVersion":2,"x":""#.to_vec();
            big.resize(5 << 20, b'a');
            return respond(s, "200 OK", &[], &big);
        }
        if req.path.ends_with("/manifests/noblob") {
            let m = String::from_utf8(content.manifests["1"].1.clone())
                .unwrap()
                .replace(
                    &Digest::of_bytes(&img.layers[0]).to_string(),
                    &Digest::of_bytes(b"gone").to_string(),
                );
            return respond(
                s,
                "200 OK",
                &[("Content-Type", OCI_MANIFEST.into())],
                m.as_bytes(),
            );
        }
        content.serve(req, s);
    });
    let h = reg.host();

    let e = pull_with(
        &format!("{h}/test/img:huge"),
        &DirSink::new("ehuge", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pull {h}/test/img:huge: manifest: larger than 4 MiB")
    );

    let sink = DirSink::new("enoblob", false);
    let e = pull_with(&format!("{h}/test/img:noblob"), &sink, &insecure(), fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "pull {h}/test/img:noblob: layer {}: 404 Not Found (BLOB_UNKNOWN: blob unknown)",
            Digest::of_bytes(b"gone")
        )
    );
    assert_eq!(sink.count(), 1, "only the config was stored");

    let e = pull_with(
        &format!("{h}/test/img:nope"),
        &DirSink::new("e404", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "pull {h}/test/img:nope: manifest: 404 Not Found (MANIFEST_UNKNOWN: manifest unknown)"
        )
    );

    let sink = DirSink::new("ebad", false);
    let e = pull_with(&format!("{h}/test/img:1"), &sink, &insecure(), fast()).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Digest(_)), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "pull {h}/test/img:1: layer {bad_layer}: content digest mismatch"
        )),
        "{e}"
    );
    assert!(
        !sink.has_blob(&Digest::parse(&bad_layer).unwrap()),
        "bad blob not stored"
    );
    assert!(!e.to_string().contains('\n'));

    let e = pull_with(
        &format!("{h}/test/img:lying"),
        &DirSink::new("elie", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Digest(_)), "{e}");

    let wrong = format!("{h}/test/img@{}", Digest::of_bytes(b"x"));
    let e = pull_with(&wrong, &DirSink::new("edig", false), &insecure(), fast()).unwrap_err();
    assert_eq!(e.status(), Some(404));
}

#[test]
fn digest_pinned_manifest_is_verified() {
    let img = Image::new(14, "amd64", OCI_MANIFEST);
    let other = Image::new(15, "amd64", OCI_MANIFEST);
    let pinned = img.digest();
    let mut content = Content::with_image("1", &img, OCI_MANIFEST);
    // The registry answers the pinned digest with other bytes (and no header).
    let other_bytes = other.manifest.clone();
    content.manifests.clear();
    let reg = Mock::start(move |req, s| {
        if req.path.contains("/manifests/") {
            return respond(
                s,
                "200 OK",
                &[("Content-Type", OCI_MANIFEST.into())],
                &other_bytes,
            );
        }
        content.serve(req, s);
    });
    let e = pull_with(
        &format!("{}/test/img@{pinned}", reg.host()),
        &DirSink::new("pin", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Digest(_)), "{e}");
}

#[test]
fn redirect_to_plain_http_elsewhere_is_refused() {
    // Under --insecure, a loopback registry redirecting to http on another
    // (non-loopback) host is refused before connecting.
    let reg = Mock::start(|req, s| {
        if req.path.contains("/manifests/") {
            respond(
                s,
                "302 Found",
                &[("Location", "http://storage.invalid/m".into())],
                b"",
            );
        }
    });
    let e = pull_with(
        &format!("{}/test/img:1", reg.host()),
        &DirSink::new("redir", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Insecure(_)), "{e}");
    assert!(
        e.to_string()
            .contains("refusing plain http to storage.invalid"),
        "{e}"
    );
}

#[test]
fn https_is_the_default_even_on_loopback() {
    // Without --insecure a loopback registry is spoken to over TLS: this
    // plain-http server fails the handshake, and nothing is pulled.
    let raw = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = raw.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in raw.incoming().take(1).flatten() {
            let mut buf = [0u8; 512];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
        }
    });
    let opts = PullOptions {
        retries: 0,
        ..PullOptions::default()
    };
    let r = format!("127.0.0.1:{port}/test/img:1");
    let e = pull_with(&r, &DirSink::new("tls", false), &opts, fast()).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Transport(_)), "{e}");
    assert!(
        e.to_string().starts_with(&format!("pull {r}: manifest: ")),
        "{e}"
    );
    assert!(!e.to_string().contains('\n'), "{e}");
}

#[test]
fn untrusted_certificates_are_refused_and_not_retried() {
    let Some(openssl) = ["/usr/bin/openssl", "/usr/local/bin/openssl"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
    else {
        println!("note: skipping: openssl is needed to make a test certificate");
        return;
    };
    use ureq::rustls;
    let dir = temp_dir("tls");
    let run = |args: &[&str]| {
        let st = std::process::Command::new(openssl)
            .args(args)
            .current_dir(&dir)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "openssl {args:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "key.pem",
        "-outform",
        "DER",
        "-out",
        "cert.der",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
    ]);
    run(&[
        "pkcs8", "-topk8", "-nocrypt", "-in", "key.pem", "-outform", "DER", "-out", "key.der",
    ]);
    let cert = rustls::pki_types::CertificateDer::from(fs::read(dir.join("cert.der")).unwrap());
    let key =
        rustls::pki_types::PrivateKeyDer::Pkcs8(fs::read(dir.join("key.der")).unwrap().into());
    let _ = fs::remove_dir_all(&dir);
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap(),
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let conns = Arc::new(AtomicUsize::new(0));
    let conns2 = conns.clone();
    thread::spawn(move || {
        for c in l.incoming().take(10).flatten() {
            conns2.fetch_add(1, Ordering::SeqCst);
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, c);
            let mut buf = [0u8; 64];
            let _ = tls.read(&mut buf);
        }
    });
    let opts = PullOptions {
        retries: 3,
        ..PullOptions::default()
    };
    let e = pull_with(
        &format!("127.0.0.1:{port}/test/img:1"),
        &DirSink::new("tls-cert", false),
        &opts,
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Transport(_)), "{e}");
    assert!(e.to_string().contains("certificate"), "{e}");
    assert_eq!(
        conns.load(Ordering::SeqCst),
        1,
        "a certificate failure is not retried: {e}"
    );
}
