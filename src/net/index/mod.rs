//! cbrun's registry index: PyPI and npm served to the sandbox through the
//! egress proxy, without the case's banned packages.
//!
//! The sandbox reaches it at the proxy's own address (origin-form requests,
//! or absolute-form ones naming that address): `/pypi/simple/` for pip and
//! uv, `/npm/` for npm, yarn, pnpm and bun (see [`route`]). Every request
//! is checked against the case's install ban ([`RegistryBans`], the hashed
//! normalised names the shims use) before anything is fetched: a banned
//! project's pages, documents and files get 404 with a body naming the
//! denylist, so a direct dependency, a transitive one and a file asked for
//! by URL all fail alike. Allowed documents are streamed with the upstream
//! URLs in them rewritten to the index ([`rewrite`]), so files are fetched
//! through it too; while the case bans packages, the policy refuses the
//! registry hosts themselves (see [`super::policy`]).
//!
//! Bodies are streamed, never held; documents are capped in size. The
//! upstreams are configurable ([`upstream`]) so tests run mock registries
//! on loopback.

pub mod rewrite;
pub mod route;
pub mod upstream;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::guard::names::{Family, HashedBans};

use super::http::{self, Chunked, Request};
use super::log::LogDecision;
use super::policy::EgressPolicy;
use rewrite::Rewriter;
use route::{Route, RouteError};
use upstream::{BaseUrl, Timeouts, Upstreams};

/// The case's install ban as the index checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryBans {
    python: HashedBans,
    npm: HashedBans,
}

impl RegistryBans {
    pub fn new(install_ban: &[String]) -> Self {
        RegistryBans {
            python: HashedBans::new(Family::Python, install_ban),
            npm: HashedBans::new(Family::Npm, install_ban),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.python.is_empty() && self.npm.is_empty()
    }

    /// Whether a ban covers `name` in `family` (Python or npm).
    pub fn covers(&self, family: Family, name: &str) -> bool {
        match family {
            Family::Npm => self.npm.covers(name),
            _ => self.python.covers(name),
        }
    }
}

impl Default for RegistryBans {
    fn default() -> Self {
        RegistryBans::new(&[])
    }
}

/// Bounds on what one request may make the index do.
#[derive(Debug, Clone)]
pub struct IndexLimits {
    /// Largest document (project page, package document) relayed.
    pub max_document_bytes: u64,
    /// How long a client may take to read what it asked for, per write.
    pub client_write_timeout: Duration,
    pub upstream: Timeouts,
}

impl Default for IndexLimits {
    fn default() -> Self {
        IndexLimits {
            max_document_bytes: 256 << 20,
            client_write_timeout: Duration::from_secs(60),
            upstream: Timeouts::default(),
        }
    }
}

/// The index: where it fetches from and with what client.
pub struct Index {
    upstreams: Upstreams,
    agent: ureq::Agent,
    limits: IndexLimits,
}

/// What one index request came to, for the connection log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The upstream the request was for (empty when it named none).
    pub host: String,
    pub port: u16,
    pub decision: LogDecision,
    pub reason: Option<String>,
    /// Body bytes relayed from the upstream.
    pub bytes_down: u64,
}

const BUF: usize = 16 * 1024;

/// Response headers passed from the upstream to the client. Documents lose
/// their length (rewriting changes it) and keep only identity encoding.
const PASS_HEADERS: &[&str] = &[
    "Content-Type",
    "ETag",
    "Last-Modified",
    "Cache-Control",
    "Age",
    "Expires",
];
const FILE_HEADERS: &[&str] = &[
    "Content-Length",
    "Content-Range",
    "Accept-Ranges",
    "Content-Encoding",
];
/// Request headers passed upstream.
const DOC_REQUEST_HEADERS: &[&str] = &["Accept", "If-None-Match", "If-Modified-Since"];
const FILE_REQUEST_HEADERS: &[&str] = &[
    "Accept",
    "If-None-Match",
    "If-Modified-Since",
    "Range",
    "If-Range",
];

impl Index {
    pub fn new(upstreams: Upstreams, limits: IndexLimits) -> Index {
        let agent = upstream::agent(&limits.upstream);
        Index {
            upstreams,
            agent,
            limits,
        }
    }

    /// Answers one request from the sandbox on `client`; `public` is the
    /// index's base URL as the sandbox sees it (`http://127.0.0.1:3128`).
    pub fn serve(
        &self,
        req: &Request<'_>,
        policy: &EgressPolicy,
        public: &str,
        client: TcpStream,
    ) -> Served {
        match self.check(req, policy) {
            Ok((route, head)) => self.relay(req, &route, head, public, client),
            Err(r) => r.send(client),
        }
    }

    /// The upstream a route is fetched from.
    fn base(&self, route: &Route) -> &BaseUrl {
        match route {
            Route::NpmDoc { .. } | Route::NpmTarball { .. } => &self.upstreams.npm,
            Route::PypiFile { .. } => &self.upstreams.pypi_files,
            Route::PypiSimple { .. } | Route::PypiJson { .. } => &self.upstreams.pypi,
        }
    }

    /// Everything decided before any upstream is asked: the method, the
    /// path, the registries flag, the bans. Returns the route and whether
    /// the request is a HEAD.
    fn check(&self, req: &Request<'_>, policy: &EgressPolicy) -> Result<(Route, bool), Refusal> {
        let head = match req.method {
            "GET" => false,
            "HEAD" => true,
            m => {
                return Err(Refusal::error(
                    405,
                    format!("method {m} is not served (GET and HEAD only)"),
                ))
            }
        };
        let route = match route::route(&req.path) {
            Ok(r) => r,
            Err(RouteError::NotFound(why)) => return Err(Refusal::error(404, why)),
            Err(RouteError::Bad(why)) => return Err(Refusal::error(400, why)),
        };
        let base = self.base(&route);
        let denied = |status, why: String| Refusal {
            status,
            decision: LogDecision::Denied,
            why,
            host: base.host.clone(),
            port: base.port,
        };
        if !policy.allow_registries {
            return Err(denied(
                403,
                "package registries need --allow-registries".into(),
            ));
        }
        let family = route.family();
        if let Some(name) = route
            .names()
            .into_iter()
            .find(|n| policy.install_ban.covers(family, n))
        {
            return Err(denied(
                404,
                format!(
                    "{name} is on this case's install denylist: its pages and files are not served"
                ),
            ));
        }
        Ok((route, head))
    }

    /// Fetches `route` and streams the answer to `client`.
    fn relay(
        &self,
        req: &Request<'_>,
        route: &Route,
        head: bool,
        public: &str,
        mut client: TcpStream,
    ) -> Served {
        let base = self.base(route);
        let refuse = |status, decision, why| Refusal {
            status,
            decision,
            why,
            host: base.host.clone(),
            port: base.port,
        };
        let url = self.upstream_url(route);
        let doc = route.is_document();
        let wanted = if doc {
            DOC_REQUEST_HEADERS
        } else {
            FILE_REQUEST_HEADERS
        };
        let mut up = self
            .agent
            .request(req.method, &url)
            .set("Accept-Encoding", "identity");
        for h in wanted {
            if let Some(v) = req.header(h).and_then(|v| std::str::from_utf8(v).ok()) {
                up = up.set(h, v);
            }
        }
        let resp = match up.call() {
            Ok(r) => r,
            // The upstream's own refusal (a project that does not exist):
            // allowed by the policy, and passed on.
            Err(ureq::Error::Status(code, _)) => {
                let status = if (400..600).contains(&code) {
                    code
                } else {
                    502
                };
                let why = format!("upstream {url} answered {code}");
                return refuse(status, LogDecision::Allowed, why).send(client);
            }
            Err(e) => {
                let why = format!("cannot fetch {url}: {e}");
                return refuse(502, LogDecision::Error, why).send(client);
            }
        };
        let status = resp.status();
        if (300..400).contains(&status) && status != 304 {
            let to = resp.header("Location").unwrap_or("nowhere").to_owned();
            let why =
                format!("upstream {url} redirected ({status}) to {to}; redirects are not followed");
            return refuse(502, LogDecision::Error, why).send(client);
        }
        let encoding = resp.header("Content-Encoding").unwrap_or("identity");
        if doc && !encoding.eq_ignore_ascii_case("identity") {
            let why = format!("upstream {url} sent a {encoding}-encoded document");
            return refuse(502, LogDecision::Error, why).send(client);
        }
        let extra: &[&str] = if doc { &[] } else { FILE_HEADERS };
        let mut headers: Vec<(&str, String)> = PASS_HEADERS
            .iter()
            .chain(extra)
            .filter_map(|h| resp.header(h).map(|v| (*h, v.to_owned())))
            .collect();
        let has_body = !head && status != 304 && status != 204;
        let chunked = has_body && (doc || resp.header("Content-Length").is_none());
        if chunked {
            headers.push(("Transfer-Encoding", "chunked".into()));
        }
        headers.push(("Connection", "close".into()));
        let refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let _ = client.set_write_timeout(Some(self.limits.client_write_timeout));
        let sent = http::write_response_head(&mut client, status, &refs).and_then(|()| {
            if !has_body {
                return Ok(0);
            }
            let body = resp.into_reader();
            if doc {
                let (prefixes, to) = match route.family() {
                    Family::Npm => (self.upstreams.npm_prefixes(), format!("{public}/npm/")),
                    _ => (
                        self.upstreams.pypi_file_prefixes(),
                        format!("{public}/pypi/files/"),
                    ),
                };
                let mut w = Rewriter::new(Chunked::new(&mut client), &prefixes, &to);
                let n = copy_capped(body, &mut w, self.limits.max_document_bytes)?;
                w.finish()?.finish()?;
                Ok(n)
            } else if chunked {
                let mut w = Chunked::new(&mut client);
                let n = copy_capped(body, &mut w, u64::MAX)?;
                w.finish()?;
                Ok(n)
            } else {
                copy_capped(body, &mut client, u64::MAX)
            }
        });
        let mut served = Served {
            host: base.host.clone(),
            port: base.port,
            decision: LogDecision::Allowed,
            reason: None,
            bytes_down: 0,
        };
        match sent {
            Ok(n) => {
                served.bytes_down = n;
                http::finish_response(client);
            }
            Err(e) => {
                // Cut short: the chunked framing (or the length) shows the
                // client the body is incomplete.
                served.reason = Some(format!("relaying {url}: {e}"));
                let _ = client.shutdown(std::net::Shutdown::Both);
            }
        }
        served
    }

    fn upstream_url(&self, route: &Route) -> String {
        let u = &self.upstreams;
        match route {
            Route::PypiSimple { project } => format!("{}/simple/{project}/", u.pypi.url),
            Route::PypiJson {
                project,
                version: None,
            } => format!("{}/pypi/{project}/json", u.pypi.url),
            Route::PypiJson {
                project,
                version: Some(v),
            } => format!("{}/pypi/{project}/{v}/json", u.pypi.url),
            Route::PypiFile { path, .. } => format!("{}/{path}", u.pypi_files.url),
            Route::NpmDoc { name, spec } => {
                let enc = name.replacen('/', "%2f", 1);
                match spec {
                    None => format!("{}/{enc}", u.npm.url),
                    Some(s) => format!("{}/{enc}/{s}", u.npm.url),
                }
            }
            Route::NpmTarball { name, file } => format!("{}/{name}/-/{file}", u.npm.url),
        }
    }
}

/// A request answered by the index itself, without relaying a body.
struct Refusal {
    status: u16,
    decision: LogDecision,
    why: String,
    host: String,
    port: u16,
}

impl Refusal {
    /// A request the index cannot make sense of (not about any upstream).
    fn error(status: u16, why: String) -> Refusal {
        Refusal {
            status,
            decision: LogDecision::Error,
            why,
            host: String::new(),
            port: 0,
        }
    }

    fn send(self, client: TcpStream) -> Served {
        let body = format!("cbrun registry index: {}\n", self.why);
        http::respond(client, self.status, http::reason_phrase(self.status), &body);
        Served {
            host: self.host,
            port: self.port,
            decision: self.decision,
            reason: Some(self.why),
            bytes_down: 0,
        }
    }
}

/// Copies at most `cap` bytes; more is an error (the response is cut).
fn copy_capped(mut from: impl Read, to: &mut impl Write, cap: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; BUF];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        if total > cap {
            return Err(io::Error::other(format!(
                "document larger than {cap} bytes"
            )));
        }
        to.write_all(&buf[..n])?;
    }
}

#[cfg(test)]
mod tests;
