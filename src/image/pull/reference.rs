//! Image references: `[registry[:port]/]repository[:tag][@sha256:...]`,
//! normalised the way Docker does (`debian` is
//! `registry-1.docker.io/library/debian:latest`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::image::digest::Digest;
use crate::image::store::{check_path_component, check_tag};

/// The registry host that `docker.io` names for the API.
pub const DOCKER_HUB_REGISTRY: &str = "registry-1.docker.io";
const DOCKER_HUB_ALIASES: [&str; 3] = ["docker.io", "index.docker.io", DOCKER_HUB_REGISTRY];
const DEFAULT_TAG: &str = "latest";
const MAX_NAME_LEN: usize = 255;

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// `host[:port]` as used for the API (Docker Hub is `registry-1.docker.io`),
    /// lowercase; IPv6 hosts keep their brackets (`[::1]:5000`).
    pub registry: String,
    /// `library/debian`, `test/tiny`.
    pub repository: String,
    /// `latest` when neither a tag nor a digest was given.
    pub tag: Option<String>,
    /// Pinned manifest digest; when present it is what gets pulled.
    pub digest: Option<Digest>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid reference {input:?}: {reason}")]
pub struct ReferenceError {
    pub input: String,
    pub reason: String,
}

impl Reference {
    pub fn parse(input: &str) -> Result<Reference, ReferenceError> {
        let fail = |reason: &str| ReferenceError {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        if input.is_empty() {
            return Err(fail("empty"));
        }
        if input.contains("://") {
            return Err(fail(
                "a reference has no scheme (plain http is chosen with --insecure, for loopback registries only)",
            ));
        }
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(fail("contains whitespace"));
        }

        let (rest, digest) = match input.split_once('@') {
            Some((rest, d)) => {
                let digest = Digest::parse(d)
                    .map_err(|_| fail("the digest must be sha256:<64 lowercase hex digits>"))?;
                (rest, Some(digest))
            }
            None => (input, None),
        };

        // A tag is a ':' after the last '/'.
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let i = last_slash + i;
                (&rest[..i], Some(rest[i + 1..].to_owned()))
            }
            None => (rest, None),
        };
        if let Some(t) = &tag {
            if check_tag(t).is_err() {
                return Err(fail(
                    "a tag is 1-128 of [A-Za-z0-9_.-] and does not start with '.' or '-'",
                ));
            }
        }

        let (registry, repository) = match name.split_once('/') {
            Some((first, path)) if looks_like_registry(first) => (
                normalise_registry(first).map_err(|r| fail(&r))?,
                path.to_owned(),
            ),
            _ => (DOCKER_HUB_REGISTRY.to_owned(), name.to_owned()),
        };
        if repository.is_empty() {
            return Err(fail("no repository"));
        }
        if repository.len() > MAX_NAME_LEN {
            return Err(fail("repository name longer than 255 characters"));
        }
        if !repository
            .split('/')
            .all(|c| check_path_component(c).is_ok())
        {
            return Err(fail(
                "repository path components are lowercase [a-z0-9] separated by '.', '_', '__' or '-'",
            ));
        }
        let repository = if registry == DOCKER_HUB_REGISTRY && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        let tag = match (tag, &digest) {
            (None, None) => Some(DEFAULT_TAG.to_owned()),
            (t, _) => t,
        };
        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// What goes after `/manifests/`: the digest when pinned, else the tag.
    pub fn manifest_ref(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => DEFAULT_TAG.to_owned(),
        }
    }

    /// The registry's host without port or IPv6 brackets.
    pub fn host(&self) -> &str {
        split_host_port(&self.registry).0
    }

    /// `localhost`, `127.0.0.0/8` or `::1`: the only registries `--insecure`
    /// may reach over plain http.
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(self.host())
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reference::parse(s)
    }
}

/// `localhost`, an IPv4 loopback address or `::1` (brackets allowed).
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `host[:port]` → (`host` without brackets, port).
pub(crate) fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let host = &rest[..end];
            let port = rest[end + 1..].strip_prefix(':');
            return (host, port);
        }
        return (s, None);
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (s, None),
    }
}

fn looks_like_registry(first: &str) -> bool {
    first.contains('.')
        || first.contains(':')
        || first == "localhost"
        || first.starts_with('[')
        || first.chars().any(|c| c.is_ascii_uppercase())
}

fn normalise_registry(s: &str) -> Result<String, String> {
    let lower = s.to_ascii_lowercase();
    if DOCKER_HUB_ALIASES.contains(&lower.as_str()) {
        return Ok(DOCKER_HUB_REGISTRY.to_owned());
    }
    let (host, port) = split_host_port(&lower);
    if let Some(p) = port {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.parse::<u16>().is_err() {
            return Err(format!("bad registry port {p:?}"));
        }
    }
    let ok_host = if lower.starts_with('[') {
        host.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    };
    if !ok_host {
        return Err(format!("bad registry host {host:?}"));
    }
    Ok(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn p(s: &str) -> Reference {
        Reference::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn docker_hub_short_names() {
        let r = p("debian");
        assert_eq!(r.registry, "registry-1.docker.io");
        assert_eq!(r.repository, "library/debian");
        assert_eq!(r.tag.as_deref(), Some("latest"));
        assert_eq!(r.digest, None);
        assert_eq!(r.to_string(), "registry-1.docker.io/library/debian:latest");

        let r = p("docker.io/library/debian:bookworm");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("registry-1.docker.io", "library/debian")
        );
        assert_eq!(r.tag.as_deref(), Some("bookworm"));
        assert_eq!(p("index.docker.io/foo/bar").repository, "foo/bar");
        assert_eq!(p("foo/bar:1").registry, "registry-1.docker.io");
        assert_eq!(p("foo/bar:1").repository, "foo/bar");
    }

    #[test]
    fn registries_with_ports_and_digests() {
        let r = p("localhost:5000/busybox:1");
        assert_eq!(r.registry, "localhost:5000");
        assert_eq!(r.repository, "busybox");
        assert_eq!(r.tag.as_deref(), Some("1"));
        assert!(r.is_loopback());
        assert_eq!(r.host(), "localhost");

        let r = p("127.0.0.1:5000/test/tiny:1");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("127.0.0.1:5000", "test/tiny")
        );
        assert!(r.is_loopback());

        let r = p(&format!("x@{D}"));
        assert_eq!(r.repository, "library/x");
        assert_eq!(r.tag, None);
        assert_eq!(r.digest.as_ref().unwrap().to_string(), D);
        assert_eq!(r.manifest_ref(), D);

        let r = p(&format!("ghcr.io/o/r/s:v1.2@{D}"));
        assert_eq!(r.registry, "ghcr.io");
        assert_eq!(r.repository, "o/r/s");
        assert_eq!(r.tag.as_deref(), Some("v1.2"));
        assert_eq!(r.manifest_ref(), D);
        assert!(!r.is_loopback());

        let r = p("[::1]:5000/a/b");
        assert_eq!(r.registry, "[::1]:5000");
        assert_eq!(r.host(), "::1");
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "[::1]:5000/a/b:latest");

        let r = p("Example.COM/a");
        assert_eq!(r.registry, "example.com");
        assert_eq!(p("localhost/a").registry, "localhost");
        assert_eq!(p("a.b-c/e---f:_x").repository, "e---f");
        assert_eq!(p("a/b__c.d").repository, "a/b__c.d");
    }

    #[test]
    fn bad_references_are_refused() {
        for bad in [
            "",
            "Debian",
            "http://localhost:5000/x",
            "https://example.com/x",
            "x:",
            "x:-bad",
            "x@sha256:abc",
            "x@sha512:00",
            "localhost:5000/",
            "localhost:99999/x",
            "localhost:5x/x",
            "a//b",
            "a/b_",
            "a/-b",
            "a/b..c",
            "a b",
            "bad_host.com/x",
            "[zz]:5/x",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?} accepted");
        }
        let long = "a".repeat(300);
        assert!(Reference::parse(&long).is_err());
        assert!(Reference::parse(&format!("x:{}", "t".repeat(129))).is_err());
    }

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "[::1]",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "example.com",
            "10.0.0.1",
            "192.168.1.1",
            "::2",
            "localhost.example.com",
            "0.0.0.0",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
