//! The blocking HTTP side of a pull (ureq 2): URL policy (https, or plain
//! http to loopback under `--insecure`), redirects followed by hand (so the
//! policy applies to every hop and credentials never leave the registry's
//! origin), registry authentication and retries with backoff.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::auth::{self, AuthState, Challenge};
use super::reference::{is_loopback_host, split_host_port, Reference};
use super::{ErrorKind, PullError};

const MAX_REDIRECTS: usize = 10;
const MAX_ERROR_BODY: u64 = 64 * 1024;
const MAX_TOKEN_BODY: u64 = 1024 * 1024;

/// Retry pacing (tests shorten it).
#[derive(Debug, Clone)]
pub(crate) struct Tuning {
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub retry_after_max: Duration,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            retry_after_max: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(60),
        }
    }
}

impl Tuning {
    /// Delay before retry number `attempt` (1-based).
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(ra) = retry_after {
            return ra.min(self.retry_after_max);
        }
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.backoff_base
            .saturating_mul(factor)
            .min(self.backoff_max)
    }
}

/// An absolute http(s) URL, enough of one for a registry client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    pub scheme: String,
    /// Without IPv6 brackets.
    pub host: String,
    pub port: Option<u16>,
    /// Starts with '/'; includes the query.
    pub path: String,
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, String> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("not an absolute URL: {s:?}"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!("unsupported URL scheme {scheme:?}"));
        }
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        let mut path = rest[end..].split('#').next().unwrap_or("").to_owned();
        if authority.contains('@') {
            return Err("URLs with credentials are not followed".to_owned());
        }
        let (host, port) = split_host_port(authority);
        if host.is_empty() {
            return Err(format!("no host in URL {s:?}"));
        }
        let port = match port {
            Some(p) => Some(
                p.parse::<u16>()
                    .map_err(|_| format!("bad port in URL {s:?}"))?,
            ),
            None => None,
        };
        if !path.starts_with('/') {
            path.insert(0, '/');
        }
        Ok(Url {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
            path,
        })
    }

    pub fn port_or_default(&self) -> u16 {
        self.port
            .unwrap_or(if self.scheme == "https" { 443 } else { 80 })
    }

    pub fn same_origin(&self, other: &Url) -> bool {
        self.scheme == other.scheme
            && self.host == other.host
            && self.port_or_default() == other.port_or_default()
    }

    fn host_port(&self) -> String {
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(p) => format!("{h}:{p}"),
            None => h,
        }
    }

    /// Resolve a `Location` header against this URL.
    pub fn join(&self, loc: &str) -> Result<Url, String> {
        if loc.contains("://") {
            return Url::parse(loc);
        }
        if let Some(rest) = loc.strip_prefix("//") {
            return Url::parse(&format!("{}://{rest}", self.scheme));
        }
        let path = if loc.starts_with('/') {
            loc.to_owned()
        } else if loc.starts_with('?') {
            let base = self.path.split('?').next().unwrap_or("/");
            format!("{base}{loc}")
        } else {
            let base = self.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map(|i| i + 1).unwrap_or(0)];
            format!("{dir}{loc}")
        };
        Ok(Url {
            path,
            ..self.clone()
        })
    }

    /// With `?a=b&...` appended (values already encoded).
    pub fn with_query(&self, pairs: &[(&str, String)]) -> Url {
        if pairs.is_empty() {
            return self.clone();
        }
        let q: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let sep = if self.path.contains('?') { '&' } else { '?' };
        Url {
            path: format!("{}{sep}{}", self.path, q.join("&")),
            ..self.clone()
        }
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.host_port(), self.path)
    }
}

/// The registry's base URL, `https://host[:port]`, or `http://` under
/// `insecure` — which only loopback registries may be. Pure, no network.
pub(crate) fn registry_base(r: &Reference, insecure: bool) -> Result<Url, PullError> {
    let scheme = if insecure {
        if !r.is_loopback() {
            return Err(PullError::new(
                "registry",
                ErrorKind::Insecure(format!(
                    "--insecure (plain http) is only allowed for loopback registries (localhost, 127.0.0.0/8, ::1), not {}",
                    r.registry
                )),
            ));
        }
        "http"
    } else {
        "https"
    };
    Url::parse(&format!("{scheme}://{}/", r.registry))
        .map_err(|e| PullError::new("registry", ErrorKind::InvalidReference(e)))
}

/// https always; http only to loopback hosts and only under `insecure`.
pub(crate) fn check_url_policy(u: &Url, insecure: bool) -> Result<(), ErrorKind> {
    match u.scheme.as_str() {
        "https" => Ok(()),
        "http" if insecure && is_loopback_host(&u.host) => Ok(()),
        "http" => Err(ErrorKind::Insecure(format!(
            "refusing plain http to {} (only loopback hosts, with --insecure)",
            u.host_port()
        ))),
        s => Err(ErrorKind::Insecure(format!("unsupported URL scheme {s:?}"))),
    }
}

/// The proxy for `u` from `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` (either
/// case), honouring `NO_PROXY`; never for loopback hosts.
fn proxy_for(u: &Url, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if is_loopback_host(&u.host) {
        return None;
    }
    let get = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| env(n).filter(|v| !v.trim().is_empty()))
    };
    if let Some(no) = get(&["NO_PROXY", "no_proxy"]) {
        for entry in no.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                return None;
            }
            let entry = split_host_port(entry)
                .0
                .trim_start_matches('.')
                .to_ascii_lowercase();
            if u.host == entry || u.host.ends_with(&format!(".{entry}")) {
                return None;
            }
        }
    }
    if u.scheme == "https" {
        get(&["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"])
    } else {
        get(&["http_proxy", "HTTP_PROXY", "ALL_PROXY", "all_proxy"])
    }
}

/// System roots when the host has any (`SSL_CERT_FILE`/`SSL_CERT_DIR`
/// honoured), else the bundled webpki (Mozilla) roots.
fn tls_config() -> Arc<ureq::rustls::ClientConfig> {
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

/// What a request ended with, before status classification.
pub(crate) struct Answer {
    pub resp: ureq::Response,
    /// The URL that answered (after redirects).
    pub url: Url,
}

/// A transport-level failure of one attempt.
struct TransportFailure {
    message: String,
    transient: bool,
}

/// The client of one pull: one registry, one auth state.
pub(crate) struct Client {
    pub base: Url,
    pub repository: String,
    insecure: bool,
    retries: u32,
    pub tuning: Tuning,
    agents: RefCell<HashMap<Option<String>, ureq::Agent>>,
    tls: Arc<ureq::rustls::ClientConfig>,
    pub auth: RefCell<AuthState>,
}

impl Client {
    pub fn new(
        base: Url,
        repository: String,
        insecure: bool,
        retries: u32,
        credentials: Option<(String, String)>,
        tuning: Tuning,
    ) -> Client {
        Client {
            base,
            repository,
            insecure,
            retries,
            tuning,
            agents: RefCell::new(HashMap::new()),
            tls: tls_config(),
            auth: RefCell::new(AuthState::new(credentials)),
        }
    }

    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// `<base>/v2/<repository>/<suffix>`
    pub fn repo_url(&self, suffix: &str) -> Url {
        Url {
            path: format!("/v2/{}/{suffix}", self.repository),
            ..self.base.clone()
        }
    }

    fn agent(&self, u: &Url) -> Result<ureq::Agent, ErrorKind> {
        let proxy = proxy_for(u, &|n| std::env::var(n).ok());
        let mut agents = self.agents.borrow_mut();
        if let Some(a) = agents.get(&proxy) {
            return Ok(a.clone());
        }
        let mut b = ureq::AgentBuilder::new()
            .redirects(0)
            .timeout_connect(self.tuning.connect_timeout)
            .timeout_read(self.tuning.read_timeout)
            .timeout_write(self.tuning.read_timeout)
            .user_agent(concat!("cbrun/", env!("CARGO_PKG_VERSION")))
            .tls_config(self.tls.clone());
        if let Some(p) = &proxy {
            let p = ureq::Proxy::new(p)
                .map_err(|e| ErrorKind::Transport(format!("proxy {p:?}: {e}")))?;
            b = b.proxy(p);
        }
        let a = b.build();
        agents.insert(proxy, a.clone());
        Ok(a)
    }

    /// One attempt: GET, following redirects by hand. `registry_auth`
    /// attaches the registry's `Authorization` to requests to its origin;
    /// `explicit_auth` is sent to the first URL's origin only (token realm).
    fn attempt(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        registry_auth: bool,
        explicit_auth: Option<&str>,
    ) -> Result<Result<Answer, TransportFailure>, ErrorKind> {
        let mut cur = url.clone();
        for _ in 0..=MAX_REDIRECTS {
            check_url_policy(&cur, self.insecure)?;
            let mut req = self.agent(&cur)?.get(&cur.to_string());
            for (k, v) in headers {
                req = req.set(k, v);
            }
            if registry_auth && cur.same_origin(&self.base) {
                if let Some(h) = &self.auth.borrow().header {
                    req = req.set("Authorization", h);
                }
            } else if let Some(h) = explicit_auth {
                if cur.same_origin(url) {
                    req = req.set("Authorization", h);
                }
            }
            let resp = match req.call() {
                Ok(r) => r,
                Err(ureq::Error::Status(_, r)) => r,
                Err(ureq::Error::Transport(t)) => return Ok(Err(classify_transport(&t))),
            };
            let status = resp.status();
            if matches!(status, 301 | 302 | 303 | 307 | 308) {
                let loc = resp.header("location").ok_or_else(|| {
                    ErrorKind::Transport(format!("{status} redirect without a Location"))
                })?;
                cur = cur
                    .join(loc)
                    .map_err(|e| ErrorKind::Transport(format!("bad redirect: {e}")))?;
                continue;
            }
            return Ok(Ok(Answer { resp, url: cur }));
        }
        Err(ErrorKind::Transport(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// GET a registry URL: authentication on 401, retries with backoff on
    /// transient failures (connection errors, 408, 429, 5xx). Only 2xx
    /// (and 206/416 for ranged requests, which callers handle) come back.
    pub fn get(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        what: &str,
    ) -> Result<Answer, PullError> {
        self.get_inner(url, headers, what, true, None)
    }

    fn get_inner(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        what: &str,
        registry_auth: bool,
        explicit_auth: Option<&str>,
    ) -> Result<Answer, PullError> {
        let fail = |k: ErrorKind| PullError::new(what, k);
        let mut failures = 0u32;
        let mut auth_rounds = 0u32;
        loop {
            let sent_auth = self.auth.borrow().header.clone();
            let outcome = self
                .attempt(url, headers, registry_auth, explicit_auth)
                .map_err(fail)?;
            let (retry_after, last) = match outcome {
                Err(t) if t.transient => (None, ErrorKind::Transport(t.message)),
                Err(t) => return Err(fail(ErrorKind::Transport(t.message))),
                Ok(a) => {
                    let status = a.resp.status();
                    if (200..300).contains(&status) || status == 416 {
                        return Ok(a);
                    }
                    if status == 401
                        && registry_auth
                        && a.url.same_origin(&self.base)
                        && auth_rounds < 2
                    {
                        let challenges: Vec<Challenge> = a
                            .resp
                            .all("www-authenticate")
                            .iter()
                            .flat_map(|h| auth::parse_challenges(h))
                            .collect();
                        if self.answer_challenge(&challenges, sent_auth.as_deref(), what)? {
                            auth_rounds += 1;
                            continue;
                        }
                    }
                    let transient = matches!(status, 408 | 429 | 500 | 502 | 503 | 504);
                    let retry_after = a
                        .resp
                        .header("retry-after")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let err = status_error(a.resp);
                    if !transient {
                        return Err(fail(err));
                    }
                    (retry_after, err)
                }
            };
            failures += 1;
            if failures > self.retries {
                return Err(fail(last).after_attempts(failures));
            }
            thread::sleep(self.tuning.backoff(failures, retry_after));
        }
    }

    /// React to a 401 from the registry. `Ok(true)`: retry with the new
    /// `Authorization`; `Ok(false)`: nothing more to try.
    fn answer_challenge(
        &self,
        challenges: &[Challenge],
        sent: Option<&str>,
        what: &str,
    ) -> Result<bool, PullError> {
        let bearer = challenges.iter().find_map(|c| match c {
            Challenge::Bearer {
                realm,
                service,
                scope,
            } => Some((realm, service, scope)),
            _ => None,
        });
        if let Some((realm, service, scope)) = bearer {
            let default_scope = format!("repository:{}:pull", self.repository);
            let scope = scope.as_deref().unwrap_or(&default_scope);
            let key = AuthState::cache_key(realm, service.as_deref(), Some(scope));
            let cached = self.auth.borrow().cached(&key).cloned();
            let header = match cached {
                // A cached token we did not send yet (another scope was active).
                Some(h) if Some(h.as_str()) != sent => h,
                // Never tried, or the one we sent was refused (expired?): fetch.
                _ => {
                    let token = self.fetch_token(realm, service.as_deref(), scope, what)?;
                    let h = format!("Bearer {token}");
                    self.auth.borrow_mut().store(key, h.clone());
                    h
                }
            };
            if Some(header.as_str()) == sent {
                return Ok(false);
            }
            self.auth.borrow_mut().header = Some(header);
            return Ok(true);
        }
        if challenges.contains(&Challenge::Basic) {
            let mut st = self.auth.borrow_mut();
            let Some((u, p)) = &st.credentials else {
                return Ok(false);
            };
            let h = auth::basic_header(u, p);
            if Some(h.as_str()) == sent {
                return Ok(false);
            }
            st.header = Some(h);
            return Ok(true);
        }
        Ok(false)
    }

    fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: &str,
        what: &str,
    ) -> Result<String, PullError> {
        let ctx = format!("{what}: token");
        let realm_url = Url::parse(realm)
            .map_err(|e| PullError::new(&ctx, ErrorKind::Auth(format!("bad realm: {e}"))))?;
        let mut q = Vec::new();
        if let Some(s) = service {
            q.push(("service", auth::percent_encode(s)));
        }
        for s in scope.split(' ').filter(|s| !s.is_empty()) {
            q.push(("scope", auth::percent_encode(s)));
        }
        let url = realm_url.with_query(&q);
        let basic = self
            .auth
            .borrow()
            .credentials
            .as_ref()
            .map(|(u, p)| auth::basic_header(u, p));
        let a = self.get_inner(&url, &[], &ctx, false, basic.as_deref())?;
        let body = read_limited(a.resp, MAX_TOKEN_BODY).map_err(|e| {
            let m = match e {
                ReadError::TooLarge => "token response too large".to_owned(),
                ReadError::Io(e) => format!("reading token response: {e}"),
            };
            PullError::new(&ctx, ErrorKind::Auth(m))
        })?;
        auth::parse_token_response(&body).map_err(|e| PullError::new(&ctx, ErrorKind::Auth(e)))
    }
}

fn classify_transport(t: &ureq::Transport) -> TransportFailure {
    use ureq::ErrorKind as K;
    let message = t.to_string();
    let certificate = {
        let m = message.to_ascii_lowercase();
        m.contains("certificate") || m.contains("invalidcert")
    };
    let transient = !certificate
        && matches!(
            t.kind(),
            K::Dns | K::ConnectionFailed | K::Io | K::BadStatus | K::BadHeader | K::ProxyConnect
        );
    TransportFailure { message, transient }
}

pub(crate) enum ReadError {
    TooLarge,
    Io(std::io::Error),
}

/// Read a whole (small) body, refusing more than `limit` bytes.
pub(crate) fn read_limited(resp: ureq::Response, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    resp.into_reader()
        .take(limit + 1)
        .read_to_end(&mut body)
        .map_err(ReadError::Io)?;
    if body.len() as u64 > limit {
        return Err(ReadError::TooLarge);
    }
    Ok(body)
}

/// `404 Not Found (MANIFEST_UNKNOWN: manifest unknown)`.
pub(crate) fn status_error(resp: ureq::Response) -> ErrorKind {
    let status = resp.status();
    let reason = match resp.status_text().trim() {
        "" => canonical_reason(status).to_owned(),
        r => r.to_owned(),
    };
    let body = read_limited(resp, MAX_ERROR_BODY).unwrap_or_else(|_| Vec::new());
    ErrorKind::Status {
        status,
        reason,
        detail: registry_error_detail(&body),
    }
}

/// The registry's `{"errors":[{"code":..,"message":..}]}`, as `CODE: message; ...`.
fn registry_error_detail(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct E {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    #[derive(serde::Deserialize)]
    struct Es {
        errors: Vec<E>,
    }
    let es: Es = serde_json::from_slice(body).ok()?;
    let parts: Vec<String> = es
        .errors
        .iter()
        .map(|e| match (e.code.is_empty(), e.message.is_empty()) {
            (false, false) => format!("{}: {}", e.code, e.message),
            (false, true) => e.code.clone(),
            _ => e.message.clone(),
        })
        .filter(|s| !s.is_empty())
        .map(|s| s.chars().filter(|c| !c.is_control()).take(300).collect())
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn canonical_reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parse_join_and_origin() {
        let u = Url::parse("https://Registry.example:5000/v2/a/blobs/x?y=1#frag").unwrap();
        assert_eq!(u.host, "registry.example");
        assert_eq!(u.port, Some(5000));
        assert_eq!(u.path, "/v2/a/blobs/x?y=1");
        assert_eq!(
            u.to_string(),
            "https://registry.example:5000/v2/a/blobs/x?y=1"
        );
        assert_eq!(
            u.join("/s/1").unwrap().to_string(),
            "https://registry.example:5000/s/1"
        );
        assert_eq!(
            u.join("z").unwrap().to_string(),
            "https://registry.example:5000/v2/a/blobs/z"
        );
        assert_eq!(
            u.join("?q").unwrap().to_string(),
            "https://registry.example:5000/v2/a/blobs/x?q"
        );
        assert_eq!(
            u.join("//cdn.example/p").unwrap().to_string(),
            "https://cdn.example/p"
        );
        assert_eq!(u.join("http://127.0.0.1:9/p").unwrap().port, Some(9));
        let v6 = Url::parse("http://[::1]:8080").unwrap();
        assert_eq!((v6.host.as_str(), v6.path.as_str()), ("::1", "/"));
        assert_eq!(v6.to_string(), "http://[::1]:8080/");
        assert!(Url::parse("https://a:443/")
            .unwrap()
            .same_origin(&Url::parse("https://a/x").unwrap()));
        assert!(!Url::parse("http://a/")
            .unwrap()
            .same_origin(&Url::parse("https://a/").unwrap()));
        assert!(Url::parse("ftp://a/").is_err());
        assert!(Url::parse("https://u:p@a/").is_err());
        assert!(Url::parse("/relative").is_err());
        let q = Url::parse("https://a/t?x=1")
            .unwrap()
            .with_query(&[("s", "v".into())]);
        assert_eq!(q.path, "/t?x=1&s=v");
    }

    #[test]
    fn plain_http_only_to_loopback_under_insecure() {
        // Parse-time checks: no network involved.
        let r = Reference::parse("example.com/x:1").unwrap();
        let e = registry_base(&r, true).unwrap_err();
        assert!(e.to_string().contains("only allowed for loopback"), "{e}");
        assert_eq!(
            registry_base(&r, false).unwrap().to_string(),
            "https://example.com/"
        );
        for loopback in ["localhost:5000/x", "127.0.0.1:5000/x", "[::1]:5000/x"] {
            let r = Reference::parse(loopback).unwrap();
            assert_eq!(
                registry_base(&r, true).unwrap().scheme,
                "http",
                "{loopback}"
            );
            assert_eq!(
                registry_base(&r, false).unwrap().scheme,
                "https",
                "{loopback}"
            );
        }
        let http_remote = Url::parse("http://storage.example/blob").unwrap();
        assert!(check_url_policy(&http_remote, true).is_err());
        assert!(check_url_policy(&http_remote, false).is_err());
        let http_local = Url::parse("http://127.0.0.1:1/blob").unwrap();
        assert!(check_url_policy(&http_local, true).is_ok());
        assert!(check_url_policy(&http_local, false).is_err());
        assert!(check_url_policy(&Url::parse("https://s.example/").unwrap(), false).is_ok());
    }

    #[test]
    fn proxies_from_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            }
        };
        let u = Url::parse("https://registry.example/v2/").unwrap();
        let e = env(&[("HTTPS_PROXY", "http://proxy:3128")]);
        assert_eq!(proxy_for(&u, &e).as_deref(), Some("http://proxy:3128"));
        let e = env(&[
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("NO_PROXY", "localhost,.example"),
        ]);
        assert_eq!(proxy_for(&u, &e), None);
        let e = env(&[
            ("https_proxy", "http://proxy:3128"),
            ("no_proxy", "other.example:443"),
        ]);
        assert_eq!(proxy_for(&u, &e).as_deref(), Some("http://proxy:3128"));
        let e = env(&[("ALL_PROXY", "http://p:1")]);
        assert_eq!(
            proxy_for(&Url::parse("http://127.0.0.1:5/").unwrap(), &e),
            None
        );
        assert_eq!(
            proxy_for(&Url::parse("http://h.example/").unwrap(), &e).as_deref(),
            Some("http://p:1")
        );
        assert_eq!(proxy_for(&u, &env(&[])), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let t = Tuning::default();
        assert_eq!(t.backoff(1, None), Duration::from_millis(500));
        assert_eq!(t.backoff(2, None), Duration::from_secs(1));
        assert_eq!(t.backoff(30, None), Duration::from_secs(8));
        assert_eq!(
            t.backoff(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(30)
        );
        assert_eq!(
            t.backoff(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn registry_error_bodies() {
        let b = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"1"}}]}"#;
        assert_eq!(
            registry_error_detail(b).as_deref(),
            Some("MANIFEST_UNKNOWN: manifest unknown")
        );
        assert_eq!(registry_error_detail(b"<html>"), None);
        assert_eq!(registry_error_detail(br#"{"errors":[]}"#), None);
    }
}
