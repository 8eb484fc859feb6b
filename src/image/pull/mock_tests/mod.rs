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

// The tests, by topic; the helpers above are theirs.
mod errors;
mod pulls;
mod resume;
