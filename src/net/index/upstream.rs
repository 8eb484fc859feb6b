//! The registries the index fetches from, and the client it fetches with.
//!
//! The upstreams are the operator's configuration (defaults: pypi.org,
//! files.pythonhosted.org, registry.npmjs.org), so they are trusted: no
//! address check applies to them. Plain `http` is accepted only for a
//! loopback host (a local mirror or a test's mock registry). TLS uses the
//! host's CA bundle (`SSL_CERT_FILE`/`SSL_CERT_DIR` honoured), so a network
//! that re-signs TLS with its own CA works when the host trusts that CA.

use std::sync::Arc;
use std::time::Duration;

/// Environment variables that replace the default upstreams.
pub const ENV_PYPI: &str = "CBRUN_PYPI_URL";
pub const ENV_PYPI_FILES: &str = "CBRUN_PYPI_FILES_URL";
pub const ENV_NPM: &str = "CBRUN_NPM_REGISTRY_URL";

const DEFAULT_PYPI: &str = "https://pypi.org";
const DEFAULT_PYPI_FILES: &str = "https://files.pythonhosted.org";
const DEFAULT_NPM: &str = "https://registry.npmjs.org";

/// A bad upstream setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {value:?}: {why}")]
pub struct UpstreamError {
    pub var: &'static str,
    pub value: String,
    pub why: &'static str,
}

/// `scheme://host[:port][/path]`, without a trailing slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// The URL as it prefixes every request (no trailing `/`).
    pub url: String,
    pub host: String,
    pub port: u16,
}

impl BaseUrl {
    pub fn parse(var: &'static str, raw: &str) -> Result<BaseUrl, UpstreamError> {
        let err = |why| UpstreamError {
            var,
            value: raw.to_owned(),
            why,
        };
        let trimmed = raw.trim_end_matches('/');
        let (https, rest) = if let Some(r) = trimmed.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = trimmed.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(err("expected an http:// or https:// URL"));
        };
        if rest.contains(['?', '#', '@']) || rest.chars().any(|c| c.is_whitespace()) {
            return Err(err(
                "expected scheme://host[:port][/path], no query or credentials",
            ));
        }
        let authority = rest.split('/').next().unwrap_or("");
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, tail) = v6.split_once(']').ok_or_else(|| err("unclosed `[`"))?;
            (h, tail.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(err("no host"));
        }
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| err("bad port"))?,
            None if https => 443,
            None => 80,
        };
        let host = host.to_ascii_lowercase();
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.to_canonical().is_loopback());
        if !https && !loopback {
            return Err(err("plain http is accepted only for a loopback host"));
        }
        Ok(BaseUrl {
            url: trimmed.to_owned(),
            host,
            port,
        })
    }
}

/// Where the index fetches from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstreams {
    /// The PyPI host: `/simple/` and the JSON API under `/pypi/`.
    pub pypi: BaseUrl,
    /// The host PyPI's pages link files on.
    pub pypi_files: BaseUrl,
    /// The npm registry.
    pub npm: BaseUrl,
}

impl Upstreams {
    /// The defaults, each replaced by its variable in `get` when set.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Upstreams, UpstreamError> {
        let one = |var: &'static str, default: &str| {
            let v = get(var).filter(|v| !v.is_empty());
            BaseUrl::parse(var, v.as_deref().unwrap_or(default))
        };
        Ok(Upstreams {
            pypi: one(ENV_PYPI, DEFAULT_PYPI)?,
            pypi_files: one(ENV_PYPI_FILES, DEFAULT_PYPI_FILES)?,
            npm: one(ENV_NPM, DEFAULT_NPM)?,
        })
    }

    /// What PyPI documents link files as: the configured file host and the
    /// canonical one (a mirror may keep PyPI's own URLs).
    pub fn pypi_file_prefixes(&self) -> Vec<String> {
        dedup(vec![
            format!("{}/", self.pypi_files.url),
            format!("{DEFAULT_PYPI_FILES}/"),
        ])
    }

    /// What npm documents link tarballs as.
    pub fn npm_prefixes(&self) -> Vec<String> {
        dedup(vec![
            format!("{}/", self.npm.url),
            format!("{DEFAULT_NPM}/"),
            "https://registry.yarnpkg.com/".to_owned(),
        ])
    }
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = Vec::new();
    v.retain(|s| {
        let new = !seen.contains(s);
        seen.push(s.clone());
        new
    });
    v
}

/// Timeouts of the upstream side.
#[derive(Debug, Clone)]
pub struct Timeouts {
    pub connect: Duration,
    /// Between reads of a response (a stalled upstream is dropped).
    pub read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(15),
            read: Duration::from_secs(60),
        }
    }
}

/// System roots when the host has any (`SSL_CERT_FILE`/`SSL_CERT_DIR`
/// honoured), else the bundled Mozilla roots.
pub fn tls_config() -> Arc<ureq::rustls::ClientConfig> {
    use ureq::rustls;
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    let (valid, _invalid) = roots.add_parsable_certificates(native.certs);
    if valid == 0 {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// The client: no redirects followed (an upstream's redirect is reported,
/// never chased to another host), no proxy from the environment.
pub fn agent(t: &Timeouts) -> ureq::Agent {
    ureq::AgentBuilder::new()
        .redirects(0)
        .timeout_connect(t.connect)
        .timeout_read(t.read)
        .timeout_write(t.read)
        .try_proxy_from_env(false)
        .user_agent(concat!("cbrun-index/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls_config())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        let b = BaseUrl::parse(ENV_PYPI, "https://PyPI.org/").unwrap();
        assert_eq!(
            (b.url.as_str(), b.host.as_str(), b.port),
            ("https://PyPI.org", "pypi.org", 443)
        );
        let b = BaseUrl::parse(ENV_NPM, "http://127.0.0.1:4873/mirror/").unwrap();
        assert_eq!(
            (b.url.as_str(), b.port),
            ("http://127.0.0.1:4873/mirror", 4873)
        );
        assert!(BaseUrl::parse(ENV_NPM, "http://[::1]:8/").is_ok());
        assert!(BaseUrl::parse(ENV_NPM, "http://localhost").is_ok());
        for bad in [
            "http://mirror.example.org",
            "ftp://x",
            "https://u:p@x",
            "https://x/?q",
            "https://:80",
            "https://x:0",
            "https://x:99999",
        ] {
            let e = BaseUrl::parse(ENV_NPM, bad).unwrap_err();
            assert!(e.to_string().starts_with("CBRUN_NPM_REGISTRY_URL: "), "{e}");
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let u = Upstreams::from_env(|_| None).unwrap();
        assert_eq!(u.pypi.url, "https://pypi.org");
        assert_eq!(u.pypi_file_prefixes(), ["https://files.pythonhosted.org/"]);
        let u =
            Upstreams::from_env(|v| (v == ENV_NPM).then(|| "http://127.0.0.1:9/".into())).unwrap();
        assert_eq!(
            u.npm_prefixes(),
            [
                "http://127.0.0.1:9/",
                "https://registry.npmjs.org/",
                "https://registry.yarnpkg.com/"
            ]
        );
        let e = Upstreams::from_env(|v| (v == ENV_PYPI).then(|| "pypi.org".into())).unwrap_err();
        assert_eq!(e.var, ENV_PYPI);
    }
}
