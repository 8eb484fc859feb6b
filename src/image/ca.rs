//! Extra certificate authorities for the sandboxes that fetch over TLS
//! (image builds, an agent's install and solve sandboxes).
//!
//! Corporate and HPC networks often re-sign TLS with a CA of their own,
//! which the host trusts and images do not: pip and npm inside then fail
//! with "self-signed certificate in chain". `--ca-bundle FILE` (or
//! `--ca-bundle system`, the host's own bundle; repeatable) adds that
//! trust, for the sandbox's life only:
//!
//! - a combined bundle (the root's own bundle, when it has one, then the
//!   extra certificates) is bound read-only at [`BUNDLE_MOUNT`], and the
//!   variables in [`ENV_VARS`] point at it (OpenSSL, pip, requests, curl,
//!   git, Node);
//! - for the tools that read only the system store (wget, apt's https
//!   method without configuration), the same bundle also stands in for the
//!   root's `/etc/ssl/certs/ca-certificates.crt` when it has one: bound
//!   over it in a solve sandbox, placed in the build's upper layer and
//!   taken out again before the layer is captured in a build.
//!
//! Stored images are never modified, and a built image does not carry the
//! extra certificates.

use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;

use crate::sys::dir::Dir;

/// Where the combined bundle appears inside the sandbox.
pub const BUNDLE_DIR: &str = "/.cbrun-ca";
pub const BUNDLE_MOUNT: &str = "/.cbrun-ca/ca-certificates.crt";
/// The system store of Debian-family roots (relative to the root).
pub const SYSTEM_STORE: &str = "etc/ssl/certs/ca-certificates.crt";
/// Variables that make TLS clients trust [`BUNDLE_MOUNT`].
pub const ENV_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
];
/// Host bundles tried for `system`, after `$SSL_CERT_FILE`.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];
/// A bundle bigger than this is refused (Mozilla's whole store is ~220 KB).
pub const MAX_BUNDLE: u64 = 16 << 20;
const PEM_BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const PEM_END: &str = "-----END CERTIFICATE-----";

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("--ca-bundle {path}: {why}")]
    Bad { path: PathBuf, why: String },
    #[error("--ca-bundle system: no system bundle on this host ($SSL_CERT_FILE unset; none of {})", SYSTEM_BUNDLES.join(", "))]
    NoSystemBundle,
}

/// `--ca-bundle FILE|system`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaSource {
    /// The host's own bundle.
    System,
    File(PathBuf),
}

impl FromStr for CaSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" => Err("expected a PEM file or `system`".into()),
            "system" => Ok(CaSource::System),
            p => Ok(CaSource::File(PathBuf::from(p))),
        }
    }
}

/// Extra certificates, read and checked.
#[derive(Debug, Clone)]
pub struct CaBundle {
    /// Where they came from: `system (PATH)` or a file, in order.
    pub sources: Vec<String>,
    /// Only the `CERTIFICATE` blocks of the files, each ending in a newline.
    pub pem: String,
    pub certificates: usize,
}

/// What a sandbox was given, for records.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CaUse {
    /// `system (PATH)` or the file(s), joined with ` + `.
    pub source: String,
    /// Certificates added on top of the root's own bundle.
    pub certificates: usize,
    /// Where the combined bundle is inside.
    pub bundle: &'static str,
    /// The variables pointed at it.
    pub env: Vec<&'static str>,
    /// Whether the root's system store was stood in for as well.
    pub system_store: bool,
}

impl CaUse {
    /// One line for a record's warnings.
    pub fn describe(&self, sandbox: &str) -> String {
        format!(
            "CA bundle {} ({} certificates) added to the {sandbox}'s trust at {}{} and in {}; the image is not modified",
            self.source,
            self.certificates,
            self.bundle,
            if self.system_store {
                " and over /etc/ssl/certs/ca-certificates.crt"
            } else {
                ""
            },
            self.env.join(", ")
        )
    }
}

impl CaBundle {
    /// One bundle of every source's certificates (`--ca-bundle` may be
    /// given more than once: `system` and a private CA, say); `None` for
    /// no source.
    pub fn load_all(srcs: &[CaSource]) -> Result<Option<CaBundle>, CaError> {
        let mut out: Option<CaBundle> = None;
        for s in srcs {
            let b = CaBundle::load(s)?;
            out = Some(match out {
                None => b,
                Some(mut a) => {
                    a.sources.extend(b.sources);
                    a.pem.push_str(&b.pem);
                    a.certificates += b.certificates;
                    a
                }
            });
        }
        Ok(out)
    }

    pub fn load(src: &CaSource) -> Result<CaBundle, CaError> {
        let (path, system) = match src {
            CaSource::File(p) => (p.clone(), false),
            CaSource::System => (system_bundle().ok_or(CaError::NoSystemBundle)?, true),
        };
        let bad = |why: String| CaError::Bad {
            path: path.clone(),
            why,
        };
        let meta = fs::metadata(&path).map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        if meta.len() > MAX_BUNDLE {
            return Err(bad(format!("larger than {MAX_BUNDLE} bytes")));
        }
        let text = fs::read(&path).map_err(|e| bad(e.to_string()))?;
        let text = String::from_utf8_lossy(&text);
        let (pem, certificates) = certificate_blocks(&text);
        if certificates == 0 {
            return Err(bad(format!("no PEM certificate ({PEM_BEGIN}) in it")));
        }
        Ok(CaBundle {
            sources: vec![if system {
                format!("system ({})", path.display())
            } else {
                path.display().to_string()
            }],
            pem,
            certificates,
        })
    }

    /// The combined bundle: `own` (the root's bundle), then these.
    pub fn combined(&self, own: Option<&[u8]>) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(own) = own {
            out.extend_from_slice(own);
            if !own.ends_with(b"\n") && !own.is_empty() {
                out.push(b'\n');
            }
        }
        out.extend_from_slice(self.marker_begin().as_bytes());
        out.extend_from_slice(self.pem.as_bytes());
        out.extend_from_slice(MARKER_END.as_bytes());
        out
    }

    /// What [`CaBundle::combined`] appends, exactly (to take it out again).
    pub fn appended(&self) -> Vec<u8> {
        self.combined(None)
    }

    fn marker_begin(&self) -> String {
        format!(
            "# cbrun: {} certificate(s) from {} (this sandbox only)\n",
            self.certificates,
            self.sources.join(" + ")
        )
    }

    pub fn usage(&self, system_store: bool) -> CaUse {
        CaUse {
            source: self.sources.join(" + "),
            certificates: self.certificates,
            bundle: BUNDLE_MOUNT,
            env: ENV_VARS.to_vec(),
            system_store,
        }
    }
}

const MARKER_END: &str = "# cbrun: end of added certificates\n";

/// The host's bundle: `$SSL_CERT_FILE` when it names a file, else the
/// first of the usual places that exists.
pub fn system_bundle() -> Option<PathBuf> {
    std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            SYSTEM_BUNDLES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        })
}

/// The `CERTIFICATE` blocks of `text` (nothing else: no private keys, no
/// comments), and how many.
fn certificate_blocks(text: &str) -> (String, usize) {
    let mut out = String::new();
    let mut n = 0;
    let mut inside = false;
    for line in text.lines() {
        let l = line.trim_end();
        if !inside && l == PEM_BEGIN {
            inside = true;
            out.push_str(PEM_BEGIN);
            out.push('\n');
        } else if inside {
            let ok = l
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
            if l == PEM_END {
                out.push_str(PEM_END);
                out.push('\n');
                inside = false;
                n += 1;
            } else if ok {
                out.push_str(l);
                out.push('\n');
            } else {
                // A broken block: drop what was kept of it.
                let start = out.rfind(PEM_BEGIN).unwrap_or(out.len());
                out.truncate(start);
                inside = false;
            }
        }
    }
    if inside {
        let start = out.rfind(PEM_BEGIN).unwrap_or(out.len());
        out.truncate(start);
    }
    (out, n)
}

/// The root's own system bundle (at host path `root`), read without
/// following links (an image may hold a link to a host file), capped.
pub fn root_bundle(root: &Path) -> Option<Vec<u8>> {
    let dir = Dir::open(root).ok()?;
    let got = dir.read_capped(SYSTEM_STORE, MAX_BUNDLE).ok()?;
    (!got.truncated()).then_some(got.bytes)
}

/// The variables for a sandbox whose bundle is at [`BUNDLE_MOUNT`].
pub fn env() -> Vec<(String, String)> {
    ENV_VARS
        .iter()
        .map(|k| (k.to_string(), BUNDLE_MOUNT.to_string()))
        .collect()
}

/// What a solve (or install) sandbox gets for `ca` on the root at host
/// path `root`: the combined bundle written into `dir` (a staging folder
/// the sandbox can reach), bound at [`BUNDLE_MOUNT`] and over the root's
/// system store when it has one, and the variables.
pub fn sandbox_trust(ca: &CaBundle, root: &Path, dir: &Path) -> std::io::Result<SandboxTrust> {
    let own = root_bundle(root);
    let file = dir.join("ca-certificates.crt");
    fs::write(&file, ca.combined(own.as_deref()))?;
    let mut binds = vec![(file.clone(), PathBuf::from(BUNDLE_MOUNT))];
    if own.is_some() {
        binds.push((file, Path::new("/").join(SYSTEM_STORE)));
    }
    Ok(SandboxTrust {
        binds,
        env: env(),
        usage: ca.usage(own.is_some()),
    })
}

/// Read-only binds `(host, inside)`, variables, and what to record.
#[derive(Debug, Clone)]
pub struct SandboxTrust {
    pub binds: Vec<(PathBuf, PathBuf)>,
    pub env: Vec<(String, String)>,
    pub usage: CaUse,
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str =
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\nAbC+/=\n-----END CERTIFICATE-----\n";

    #[test]
    fn only_certificate_blocks_are_kept() {
        let text = format!(
            "junk\n{CERT}-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n{CERT}-----BEGIN CERTIFICATE-----\nbad line!\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\ncut"
        );
        let (pem, n) = certificate_blocks(&text);
        assert_eq!(n, 2);
        assert_eq!(pem, format!("{CERT}{CERT}"));
        assert!(!pem.contains("secret"));
    }

    #[test]
    fn combined_appends_after_the_roots_own_and_can_be_found_again() {
        let dir = std::env::temp_dir().join(format!("cbrun-ca-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("extra.pem");
        fs::write(&f, CERT).unwrap();
        let b = CaBundle::load(&CaSource::File(f.clone())).unwrap();
        assert_eq!(b.certificates, 1);
        let all = b.combined(Some(b"OWN"));
        assert!(all.starts_with(b"OWN\n"));
        let app = b.appended();
        assert!(all.ends_with(&app));
        fs::write(&f, "no certificate here").unwrap();
        let e = CaBundle::load(&CaSource::File(f.clone()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--ca-bundle") && e.contains("no PEM"), "{e}");
        assert!(CaBundle::load(&CaSource::File(dir.clone())).is_err());
        fs::write(&f, format!("{CERT}{CERT}")).unwrap();
        let two = CaBundle::load_all(&[CaSource::File(f.clone()), CaSource::File(f.clone())])
            .unwrap()
            .unwrap();
        assert_eq!(two.certificates, 4);
        assert_eq!(two.sources.len(), 2);
        assert!(CaBundle::load_all(&[]).unwrap().is_none());
        assert_eq!("system".parse::<CaSource>().unwrap(), CaSource::System);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_root_bundle_that_is_a_link_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("cbrun-ca-root-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("etc/ssl/certs")).unwrap();
        let secret = dir.join("host-secret");
        fs::write(&secret, "host secret").unwrap();
        std::os::unix::fs::symlink(&secret, dir.join(SYSTEM_STORE)).unwrap();
        assert_eq!(root_bundle(&dir), None);
        fs::remove_file(dir.join(SYSTEM_STORE)).unwrap();
        fs::write(dir.join(SYSTEM_STORE), CERT).unwrap();
        assert_eq!(root_bundle(&dir).as_deref(), Some(CERT.as_bytes()));
        fs::remove_dir_all(&dir).unwrap();
    }
}
