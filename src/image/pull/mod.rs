//! `cbrun image pull REF`: fetch an image over the OCI distribution
//! protocol into a [`BlobSink`] (the image store).
//!
//! Blocking HTTP (ureq 2, rustls): cbrun never runs an async runtime in the
//! process that forks containers. The manifest (OCI or Docker schema 2, an
//! index / manifest list resolved to one platform) is returned as the bytes
//! the registry sent, verified against its digest; the config and layers go
//! to the sink, each verified against its digest, resumed with `Range` after
//! a broken connection, skipped when the sink already has them.

mod auth;
mod blob;
mod http;
mod reference;

#[cfg(test)]
mod mock_tests;
#[cfg(test)]
mod registry_tests;

use std::collections::HashSet;
use std::fmt;
use std::io::{self, Read};
use std::path::PathBuf;

use serde::Deserialize;

use crate::image::digest::{Digest, DigestError};
use blob::{BlobStats, Want};
use http::{Client, Tuning};

pub use reference::{is_loopback_host, Reference, ReferenceError, DOCKER_HUB_REGISTRY};

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";

/// Registries cap manifests at 4 MiB; so do we.
const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;
/// Index → index nesting we follow.
const MAX_INDEX_DEPTH: usize = 3;

/// Where pulled blobs go (the image store).
pub trait BlobSink {
    fn has_blob(&self, d: &Digest) -> bool;
    /// Write a blob from `r`, verifying it hashes to `expected`; returns its
    /// size. `r` itself fails (an `InvalidData` error) rather than yield the
    /// last bytes of a blob whose digest is wrong, so a sink that propagates
    /// read errors never commits a bad blob.
    fn put_blob(&self, r: &mut dyn Read, expected: &Digest) -> io::Result<u64>;
    /// A file to keep a partial download in, resumed by a later pull; `None`
    /// streams straight into `put_blob` (broken connections are still
    /// resumed within one pull). Removed after the blob is stored.
    fn partial_path(&self, d: &Digest) -> Option<PathBuf>;
}

#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Plain http, allowed only for loopback registries (localhost, 127/8, ::1).
    pub insecure: bool,
    /// (os, architecture, variant) picked from an index; default: the host's
    /// (linux/amd64, linux/arm64, ...).
    pub platform: Option<(String, String, Option<String>)>,
    /// Retries of a transient failure (connection error, 408, 429, 5xx, a
    /// broken blob download without progress). Default 4.
    pub retries: u32,
    /// (user, password): for `Basic` challenges, and to get bearer tokens.
    pub credentials: Option<(String, String)>,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            insecure: false,
            platform: None,
            retries: 4,
            credentials: None,
        }
    }
}

/// What a pull fetched.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub reference: Reference,
    /// Digest of `manifest_bytes` (the platform's image manifest).
    pub manifest_digest: Digest,
    /// The image manifest exactly as the registry sent it.
    pub manifest_bytes: Vec<u8>,
    /// `OCI_MANIFEST` or `DOCKER_MANIFEST`.
    pub manifest_media_type: String,
    /// The index / manifest list the manifest was picked from, if any.
    pub index_digest: Option<Digest>,
    pub config_digest: Digest,
    /// In manifest order (base layer first).
    pub layers: Vec<Digest>,
    /// Bytes received for manifests and blobs (retries included).
    pub bytes_downloaded: u64,
    /// Blobs (config, layers) the sink already had.
    pub blobs_skipped: u64,
}

/// A pull failure, one line: `pull REF: CONTEXT: what happened`.
#[derive(Debug)]
pub struct PullError {
    /// The reference as given to [`pull`].
    pub reference: String,
    /// `manifest`, `config sha256:..`, `layer sha256:..`, `... : token`.
    pub context: String,
    pub kind: ErrorKind,
    /// Attempts made, when retries were exhausted.
    pub attempts: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    #[error("{0}")]
    InvalidReference(String),
    #[error("{0}")]
    Insecure(String),
    #[error("{status} {reason}{}", detail.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Status {
        status: u16,
        reason: String,
        detail: Option<String>,
    },
    #[error("{0}")]
    Transport(String),
    #[error("{0}")]
    Auth(String),
    #[error(transparent)]
    Digest(#[from] DigestError),
    #[error("{0}")]
    Manifest(String),
    #[error("no manifest for platform {wanted} (available: {})", if available.is_empty() { "none".to_owned() } else { available.join(", ") })]
    Platform {
        wanted: String,
        available: Vec<String>,
    },
    #[error("store: {0}")]
    Sink(io::Error),
    #[error("{0}")]
    Io(io::Error),
}

impl PullError {
    pub(crate) fn new(context: &str, kind: ErrorKind) -> PullError {
        PullError {
            reference: String::new(),
            context: context.to_owned(),
            kind,
            attempts: 0,
        }
    }

    pub(crate) fn after_attempts(mut self, n: u32) -> PullError {
        self.attempts = n;
        self
    }

    /// HTTP status, when the registry answered with an error.
    pub fn status(&self) -> Option<u16> {
        match self.kind {
            ErrorKind::Status { status, .. } => Some(status),
            _ => None,
        }
    }
}

impl fmt::Display for PullError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pull {}: ", self.reference)?;
        if !self.context.is_empty() {
            write!(f, "{}: ", self.context)?;
        }
        write!(f, "{}", self.kind)?;
        if self.attempts > 1 {
            write!(f, " (after {} attempts)", self.attempts)?;
        }
        Ok(())
    }
}

/// No `source()`: the message already says the cause (the kind, I/O
/// errors included), and a cause is said once.
impl std::error::Error for PullError {}

/// Pull `reference` into `sink`.
pub fn pull(reference: &str, sink: &dyn BlobSink, opts: &PullOptions) -> Result<Pulled, PullError> {
    pull_with(reference, sink, opts, Tuning::default())
}

pub(crate) fn pull_with(
    reference: &str,
    sink: &dyn BlobSink,
    opts: &PullOptions,
    tuning: Tuning,
) -> Result<Pulled, PullError> {
    pull_inner(reference, sink, opts, tuning).map_err(|mut e| {
        e.reference = reference.to_owned();
        e
    })
}

fn pull_inner(
    input: &str,
    sink: &dyn BlobSink,
    opts: &PullOptions,
    tuning: Tuning,
) -> Result<Pulled, PullError> {
    let reference = Reference::parse(input)
        .map_err(|e| PullError::new("", ErrorKind::InvalidReference(e.reason)))?;
    let platform = wanted_platform(opts);
    let base = http::registry_base(&reference, opts.insecure)?;
    let client = Client::new(
        base,
        reference.repository.clone(),
        opts.insecure,
        opts.retries,
        opts.credentials.clone(),
        tuning,
    );
    let mut downloaded = 0u64;

    let mut fetched = fetch_manifest(
        &client,
        &reference.manifest_ref(),
        reference.digest.as_ref(),
    )?;
    downloaded += fetched.bytes.len() as u64;
    let mut index_digest = None;
    let mut depth = 0;
    while fetched.media_type == OCI_INDEX || fetched.media_type == DOCKER_MANIFEST_LIST {
        depth += 1;
        if depth > MAX_INDEX_DEPTH {
            return Err(PullError::new(
                "manifest",
                ErrorKind::Manifest("indexes nested too deep".into()),
            ));
        }
        if index_digest.is_none() {
            index_digest = Some(fetched.digest.clone());
        }
        let idx: IndexDoc = serde_json::from_slice(&fetched.bytes).map_err(|e| {
            PullError::new("manifest", ErrorKind::Manifest(format!("bad index: {e}")))
        })?;
        let chosen = select_platform(&idx.manifests, &platform)
            .map_err(|k| PullError::new("manifest", k))?;
        let d = Digest::parse(&chosen.digest).map_err(|e| PullError::new("manifest", e.into()))?;
        fetched = fetch_manifest(&client, &d.to_string(), Some(&d))?;
        downloaded += fetched.bytes.len() as u64;
    }

    let man: ManifestDoc = serde_json::from_slice(&fetched.bytes).map_err(|e| {
        PullError::new(
            "manifest",
            ErrorKind::Manifest(format!("bad manifest: {e}")),
        )
    })?;
    let config = man
        .config
        .ok_or_else(|| PullError::new("manifest", ErrorKind::Manifest("no config".into())))?;
    if !config.media_type.is_empty()
        && config.media_type != OCI_CONFIG
        && config.media_type != DOCKER_CONFIG
    {
        return Err(PullError::new(
            "manifest",
            ErrorKind::Manifest(format!(
                "not a container image (config media type {})",
                config.media_type
            )),
        ));
    }
    let config_digest = parse_desc_digest(&config, "config")?;
    let layers: Vec<(Digest, u64)> = man
        .layers
        .iter()
        .map(|l| Ok((parse_desc_digest(l, "layer")?, l.size)))
        .collect::<Result<_, PullError>>()?;

    let mut stats = BlobStats::default();
    let mut seen = HashSet::new();
    let blobs = std::iter::once((&config_digest, config.size, "config"))
        .chain(layers.iter().map(|(d, s)| (d, *s, "layer")));
    for (digest, size, role) in blobs {
        if !seen.insert(digest.clone()) {
            continue;
        }
        blob::fetch_blob(&client, sink, &Want { digest, size, role }, &mut stats)?;
    }

    Ok(Pulled {
        reference,
        manifest_digest: fetched.digest,
        manifest_bytes: fetched.bytes,
        manifest_media_type: fetched.media_type,
        index_digest,
        config_digest,
        layers: layers.into_iter().map(|(d, _)| d).collect(),
        bytes_downloaded: downloaded + stats.downloaded,
        blobs_skipped: stats.skipped,
    })
}

#[derive(Debug, Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Debug, Deserialize)]
struct Platform {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
    #[serde(default)]
    variant: Option<String>,
}

#[derive(Debug, Deserialize)]
struct IndexDoc {
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

#[derive(Debug, Deserialize)]
struct ManifestDoc {
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

/// What decides the kind of a manifest document.
#[derive(Debug, Deserialize)]
struct Probe {
    #[serde(rename = "schemaVersion", default)]
    schema_version: u32,
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<serde_json::Value>,
    #[serde(default)]
    config: Option<serde_json::Value>,
}

fn parse_desc_digest(d: &Descriptor, what: &str) -> Result<Digest, PullError> {
    Digest::parse(&d.digest).map_err(|_| {
        PullError::new(
            "manifest",
            ErrorKind::Manifest(format!("{what} digest {:?} is not sha256", d.digest)),
        )
    })
}

struct Fetched {
    bytes: Vec<u8>,
    digest: Digest,
    media_type: String,
}

/// GET a manifest by tag or digest, verified against `expect` and against
/// `Docker-Content-Digest` when the registry sends one.
fn fetch_manifest(
    client: &Client,
    reference: &str,
    expect: Option<&Digest>,
) -> Result<Fetched, PullError> {
    let ctx = "manifest";
    let url = client.repo_url(&format!("manifests/{reference}"));
    let accept = [
        OCI_INDEX,
        OCI_MANIFEST,
        DOCKER_MANIFEST_LIST,
        DOCKER_MANIFEST,
    ]
    .join(", ");
    let mut failures = 0;
    let (bytes, header_digest, content_type) = loop {
        let a = client.get(&url, &[("Accept", accept.clone())], ctx)?;
        if a.resp.status() != 200 {
            return Err(PullError::new(ctx, http::status_error(a.resp)));
        }
        let header_digest = a.resp.header("docker-content-digest").map(str::to_owned);
        let content_type = a.resp.header("content-type").unwrap_or("").to_owned();
        match http::read_limited(a.resp, MAX_MANIFEST_BYTES) {
            Ok(b) => break (b, header_digest, content_type),
            Err(http::ReadError::TooLarge) => {
                return Err(PullError::new(
                    ctx,
                    ErrorKind::Manifest("larger than 4 MiB".into()),
                ))
            }
            Err(http::ReadError::Io(e)) => {
                failures += 1;
                if failures > client.retries() {
                    return Err(
                        PullError::new(ctx, ErrorKind::Transport(format!("reading: {e}")))
                            .after_attempts(failures),
                    );
                }
                std::thread::sleep(client.tuning.backoff(failures, None));
            }
        }
    };
    let digest = Digest::of_bytes(&bytes);
    if let Some(e) = expect {
        e.verify(&digest)
            .map_err(|e| PullError::new(ctx, e.into()))?;
    }
    if let Some(h) = header_digest.as_deref().map(str::trim) {
        // Only sha256 is comparable; other algorithms are not ours to check.
        if h.starts_with("sha256:") {
            let claimed = Digest::parse(h).map_err(|e| PullError::new(ctx, e.into()))?;
            claimed
                .verify(&digest)
                .map_err(|e| PullError::new(ctx, e.into()))?;
        }
    }
    let media_type = manifest_media_type(&bytes, &content_type)?;
    Ok(Fetched {
        bytes,
        digest,
        media_type,
    })
}

/// The manifest's media type: its `mediaType` field, else a known
/// `Content-Type`, else its shape. Schema 1 and unknown types are refused.
fn manifest_media_type(bytes: &[u8], content_type: &str) -> Result<String, PullError> {
    let bad = |m: String| PullError::new("manifest", ErrorKind::Manifest(m));
    let probe: Probe =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("not a JSON manifest: {e}")))?;
    if probe.schema_version == 1 || content_type.contains("distribution.manifest.v1+") {
        return Err(bad("Docker schema 1 manifests are not supported".into()));
    }
    if probe.schema_version != 2 {
        return Err(bad(format!(
            "unsupported schemaVersion {}",
            probe.schema_version
        )));
    }
    let ct = content_type.split(';').next().unwrap_or("").trim();
    let known = [
        OCI_MANIFEST,
        OCI_INDEX,
        DOCKER_MANIFEST,
        DOCKER_MANIFEST_LIST,
    ];
    let mt = match probe.media_type {
        Some(m) => m,
        None if known.contains(&ct) => ct.to_owned(),
        None if probe.manifests.is_some() => OCI_INDEX.to_owned(),
        None if probe.config.is_some() => OCI_MANIFEST.to_owned(),
        None => return Err(bad("neither an image manifest nor an index".into())),
    };
    if !known.contains(&mt.as_str()) {
        return Err(bad(format!("unsupported manifest media type {mt}")));
    }
    Ok(mt)
}

/// (os, arch, variant) wanted: `opts.platform` or the host's.
fn wanted_platform(opts: &PullOptions) -> (String, String, Option<String>) {
    match &opts.platform {
        Some((os, arch, variant)) => (
            os.to_ascii_lowercase(),
            normalise_arch(arch).to_owned(),
            variant.as_ref().map(|v| v.to_ascii_lowercase()),
        ),
        None => ("linux".to_owned(), host_arch().to_owned(), None),
    }
}

/// The OCI name of the host's architecture.
pub fn host_arch() -> &'static str {
    normalise_arch(std::env::consts::ARCH)
}

fn normalise_arch(a: &str) -> &str {
    match a {
        "x86_64" | "x86-64" => "amd64",
        "aarch64" => "arm64",
        "x86" | "i386" | "i686" => "386",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64le" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// The variant an image without one is taken to have.
fn default_variant(arch: &str) -> Option<&'static str> {
    match arch {
        "arm64" => Some("v8"),
        _ => None,
    }
}

fn select_platform<'a>(
    manifests: &'a [Descriptor],
    (os, arch, variant): &(String, String, Option<String>),
) -> Result<&'a Descriptor, ErrorKind> {
    let eff_variant = |a: &str, v: Option<&str>| -> Option<String> {
        v.filter(|v| !v.is_empty())
            .map(str::to_owned)
            .or_else(|| default_variant(a).map(str::to_owned))
    };
    let want_variant = variant.as_deref().map(|v| eff_variant(arch, Some(v)));
    let mut fallback = None;
    for m in manifests {
        let Some(p) = &m.platform else { continue };
        if !p.os.eq_ignore_ascii_case(os) || normalise_arch(&p.architecture) != arch.as_str() {
            continue;
        }
        let v = eff_variant(arch, p.variant.as_deref());
        match &want_variant {
            Some(w) if &v == w => return Ok(m),
            Some(_) => {}
            // No variant asked for: the default one (or none) first, else the first.
            None if v == eff_variant(arch, None) => return Ok(m),
            None => {
                fallback.get_or_insert(m);
            }
        }
    }
    if let Some(m) = fallback {
        return Ok(m);
    }
    let fmt_platform = |os: &str, arch: &str, v: Option<&str>| match v {
        Some(v) if !v.is_empty() => format!("{os}/{arch}/{v}"),
        _ => format!("{os}/{arch}"),
    };
    let mut available: Vec<String> = manifests
        .iter()
        .filter_map(|m| m.platform.as_ref())
        .filter(|p| p.os != "unknown" && p.architecture != "unknown")
        .map(|p| fmt_platform(&p.os, &p.architecture, p.variant.as_deref()))
        .collect();
    available.dedup();
    Err(ErrorKind::Platform {
        wanted: fmt_platform(os, arch, variant.as_deref()),
        available,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(os: &str, arch: &str, variant: Option<&str>, n: u8) -> Descriptor {
        Descriptor {
            media_type: OCI_MANIFEST.into(),
            digest: format!("sha256:{}", format!("{n:02x}").repeat(32)),
            size: 1,
            platform: Some(Platform {
                architecture: arch.into(),
                os: os.into(),
                variant: variant.map(str::to_owned),
            }),
        }
    }

    fn want(os: &str, arch: &str, v: Option<&str>) -> (String, String, Option<String>) {
        wanted_platform(&PullOptions {
            platform: Some((os.into(), arch.into(), v.map(str::to_owned))),
            ..PullOptions::default()
        })
    }

    #[test]
    fn platform_selection() {
        let ms = vec![
            desc("unknown", "unknown", None, 9),
            desc("linux", "arm", Some("v6"), 1),
            desc("linux", "arm", Some("v7"), 2),
            desc("linux", "amd64", None, 3),
            desc("linux", "arm64", Some("v8"), 4),
            desc("windows", "amd64", None, 5),
        ];
        let pick = |w| select_platform(&ms, &w).map(|d| d.digest.clone());
        assert_eq!(pick(want("linux", "x86_64", None)).unwrap(), ms[3].digest);
        assert_eq!(pick(want("linux", "aarch64", None)).unwrap(), ms[4].digest);
        assert_eq!(
            pick(want("linux", "arm64", Some("v8"))).unwrap(),
            ms[4].digest
        );
        assert_eq!(
            pick(want("linux", "arm", Some("v7"))).unwrap(),
            ms[2].digest
        );
        assert_eq!(pick(want("linux", "arm", None)).unwrap(), ms[1].digest);
        assert_eq!(pick(want("windows", "amd64", None)).unwrap(), ms[5].digest);
        let e = pick(want("linux", "riscv64", None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no manifest for platform linux/riscv64 (available: linux/arm/v6, linux/arm/v7, linux/amd64, linux/arm64/v8, windows/amd64)"
        );
        // arm64 without a variant is v8.
        let ms2 = vec![desc("linux", "arm64", None, 7)];
        assert!(select_platform(&ms2, &want("linux", "arm64", Some("v8"))).is_ok());
        assert!(select_platform(&ms2, &want("linux", "arm64", Some("v9"))).is_err());
        let host = wanted_platform(&PullOptions::default());
        assert_eq!(host.0, "linux");
        assert_eq!(host.1, host_arch());
        if cfg!(target_arch = "x86_64") {
            assert_eq!(host_arch(), "amd64");
        }
    }

    #[test]
    fn manifest_media_types() {
        let oci = format!(r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{}}}}"#);
        assert_eq!(
            manifest_media_type(oci.as_bytes(), "").unwrap(),
            OCI_MANIFEST
        );
        let bare = br#"{"schemaVersion":2,"config":{},"layers":[]}"#;
        assert_eq!(manifest_media_type(bare, "").unwrap(), OCI_MANIFEST);
        assert_eq!(
            manifest_media_type(bare, DOCKER_MANIFEST).unwrap(),
            DOCKER_MANIFEST
        );
        let idx = br#"{"schemaVersion":2,"manifests":[]}"#;
        assert_eq!(
            manifest_media_type(idx, "application/json").unwrap(),
            OCI_INDEX
        );
        let v1 = br#"{"schemaVersion":1,"fsLayers":[]}"#;
        let e = manifest_media_type(
            v1,
            "application/vnd.docker.distribution.manifest.v1+prettyjws",
        )
        .unwrap_err();
        assert!(e.to_string().contains("schema 1"), "{e}");
        let art = br#"{"schemaVersion":2,"mediaType":"application/vnd.example+json"}"#;
        assert!(manifest_media_type(art, "").is_err());
        assert!(manifest_media_type(b"<html>", "").is_err());
    }

    #[test]
    fn error_lines() {
        let mut e = PullError::new(
            "manifest",
            ErrorKind::Status {
                status: 404,
                reason: "Not Found".into(),
                detail: Some("MANIFEST_UNKNOWN: manifest unknown".into()),
            },
        );
        e.reference = "localhost:5000/x:1".into();
        assert_eq!(
            e.to_string(),
            "pull localhost:5000/x:1: manifest: 404 Not Found (MANIFEST_UNKNOWN: manifest unknown)"
        );
        assert_eq!(e.status(), Some(404));
        let e = e.after_attempts(5);
        assert!(e.to_string().ends_with("(after 5 attempts)"));
    }

    #[test]
    fn bad_references_and_insecure_remote_fail_before_any_network() {
        struct NoSink;
        impl BlobSink for NoSink {
            fn has_blob(&self, _: &Digest) -> bool {
                unreachable!()
            }
            fn put_blob(&self, _: &mut dyn Read, _: &Digest) -> io::Result<u64> {
                unreachable!()
            }
            fn partial_path(&self, _: &Digest) -> Option<PathBuf> {
                unreachable!()
            }
        }
        let opts = PullOptions {
            insecure: true,
            ..PullOptions::default()
        };
        let e = pull("registry.example.com/x:1", &NoSink, &opts).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::Insecure(_)), "{e}");
        assert!(
            e.to_string()
                .starts_with("pull registry.example.com/x:1: registry: --insecure"),
            "{e}"
        );
        let e = pull("http://10.0.0.1:5000/x:1", &NoSink, &opts).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::InvalidReference(_)), "{e}");
        let e = pull("UPPER", &NoSink, &PullOptions::default()).unwrap_err();
        assert!(e.to_string().starts_with("pull UPPER: "), "{e}");
    }
}
