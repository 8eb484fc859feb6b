//! Which hosts the sandbox may reach through the egress proxy.
//!
//! Precedence, first match wins:
//! 1. code hosts ([`hosts::CODE_HOSTS`]) are always denied, even under `*`;
//! 2. package registries ([`hosts::REGISTRIES`]) need `--allow-registries`,
//!    whether or not an `--allow` entry names them. When the case bans
//!    packages, the registries cbrun's index serves filtered
//!    ([`hosts::INDEXED`]: PyPI, npm) are never reached directly (the
//!    sandbox uses the index), and the others only when an `--allow` entry
//!    other than `*` names them (they are then unfiltered);
//! 3. otherwise the host is allowed iff an `--allow` entry matches it.
//!
//! After name resolution the proxy asks [`EgressPolicy::check_resolved`]
//! for every address, so that a broad entry (`*`, `*.example.com`) cannot
//! be used to reach the host's own addresses, its loopback, link-local and
//! private networks, or any other special-purpose range ([`addr::special`]).

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

use super::addr;
use super::hosts;
use super::index::RegistryBans;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {value:?}: {why}")]
pub struct ParseError {
    pub what: &'static str,
    pub value: String,
    pub why: String,
}

fn perr(what: &'static str, value: &str, why: impl Into<String>) -> ParseError {
    ParseError {
        what,
        value: value.to_owned(),
        why: why.into(),
    }
}

/// A host as it appears in an entry or a request, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// Lowercase, without trailing dot.
    Name(String),
    /// IPv4-mapped IPv6 addresses are folded to IPv4.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl Host {
    /// Parses a host: an IPv4 literal, an IPv6 literal with or without
    /// brackets, or a DNS name (case-insensitive, one trailing dot ignored).
    pub fn parse(raw: &str) -> Result<Host, &'static str> {
        if let Some(inner) = raw.strip_prefix('[') {
            let inner = inner.strip_suffix(']').ok_or("unclosed `[`")?;
            return inner
                .parse::<Ipv6Addr>()
                .map(|ip| Host::Ip(IpAddr::V6(ip).to_canonical()))
                .map_err(|_| "not an IPv6 address inside `[...]`");
        }
        if let Ok(ip) = raw.parse::<IpAddr>() {
            return Ok(Host::Ip(ip.to_canonical()));
        }
        let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
        if name.is_empty() {
            return Err("empty host");
        }
        if name.len() > 253 {
            return Err("host name longer than 253 characters");
        }
        for label in name.split('.') {
            if label.is_empty() {
                return Err("empty label in host name");
            }
            if label.len() > 63 {
                return Err("label longer than 63 characters");
            }
            if !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err("host name may hold only letters, digits, `-`, `_` and `.`");
            }
        }
        // The system resolver reads `127.1`, `2130706433` or `0x7f.1` as IPv4
        // addresses; refusing them keeps every IP literal visible as one.
        let last = name.rsplit('.').next().unwrap_or("");
        let numeric = last.bytes().all(|b| b.is_ascii_digit())
            || (last.starts_with("0x") && last[2..].bytes().all(|b| b.is_ascii_hexdigit()));
        if numeric {
            return Err("numeric host that is not a dotted-quad IPv4 address");
        }
        Ok(Host::Name(name))
    }
}

/// The host part of an `--allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `*`: any host name (not IP literals; see [`EgressPolicy::decide`]).
    Any,
    /// `*.example.com`: strict subdomains of `example.com`, not the apex.
    Subdomains(String),
    /// `api.example.com`: that name only.
    Exact(String),
    /// An IP literal.
    Ip(IpAddr),
}

/// One `--allow HOST[:PORT]` entry. No port means any port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    pub host: HostPattern,
    pub port: Option<u16>,
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Any => f.write_str("*")?,
            HostPattern::Subdomains(d) => write!(f, "*.{d}")?,
            HostPattern::Exact(n) => f.write_str(n)?,
            HostPattern::Ip(ip) => write!(f, "{}", Host::Ip(*ip))?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

impl serde::Serialize for AllowEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

fn parse_port(what: &'static str, whole: &str, p: &str) -> Result<u16, ParseError> {
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(perr(what, whole, format!("port {p:?} is not in 1-65535"))),
        Ok(n) => Ok(n),
    }
}

impl FromStr for AllowEntry {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        const W: &str = "--allow";
        if s.is_empty() {
            return Err(perr(W, s, "empty entry"));
        }
        if s.contains("://") {
            return Err(perr(W, s, "expected HOST[:PORT], not a URL"));
        }
        if s.contains('/') {
            return Err(perr(W, s, "expected HOST[:PORT]; paths cannot be allowed"));
        }
        // Split off the port. A bare IPv6 literal has colons but no port; a
        // port on an IPv6 literal needs brackets, as in URLs.
        let (host, port) = if s.starts_with('[') {
            let end = s
                .find(']')
                .ok_or_else(|| perr(W, s, "unclosed `[` in IPv6 literal"))?;
            match &s[end + 1..] {
                "" => (&s[..=end], None),
                rest => match rest.strip_prefix(':') {
                    Some(p) => (&s[..=end], Some(parse_port(W, s, p)?)),
                    None => return Err(perr(W, s, "expected `:PORT` after `]`")),
                },
            }
        } else if s.parse::<Ipv6Addr>().is_ok() {
            (s, None)
        } else if let Some((h, p)) = s.rsplit_once(':') {
            if h.contains(':') {
                return Err(perr(
                    W,
                    s,
                    "IPv6 literal with a port must be bracketed: [ADDR]:PORT",
                ));
            }
            (h, Some(parse_port(W, s, p)?))
        } else {
            (s, None)
        };
        let pattern = if host == "*" {
            HostPattern::Any
        } else if let Some(rest) = host.strip_prefix("*.") {
            match Host::parse(rest) {
                Ok(Host::Name(d)) => HostPattern::Subdomains(d),
                Ok(Host::Ip(_)) => {
                    return Err(perr(W, s, "a wildcard needs a domain, not an IP address"))
                }
                Err(why) => return Err(perr(W, s, why)),
            }
        } else if host.contains('*') {
            return Err(perr(
                W,
                s,
                "`*` is allowed only alone or as a leading `*.` label",
            ));
        } else {
            match Host::parse(host) {
                Ok(Host::Name(n)) => HostPattern::Exact(n),
                Ok(Host::Ip(ip)) => HostPattern::Ip(ip),
                Err(why) => return Err(perr(W, s, why)),
            }
        };
        Ok(AllowEntry {
            host: pattern,
            port,
        })
    }
}

impl AllowEntry {
    fn port_matches(&self, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
    }

    /// Whether this entry covers `host:port`.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        if !self.port_matches(port) {
            return false;
        }
        match (&self.host, host) {
            (HostPattern::Any, Host::Name(_)) => true,
            (HostPattern::Subdomains(d), Host::Name(n)) => {
                n.len() > d.len() && hosts::domain_matches(n, d)
            }
            (HostPattern::Exact(e), Host::Name(n)) => e == n,
            (HostPattern::Ip(a), Host::Ip(b)) => a == b,
            _ => false,
        }
    }

    /// An entry naming one host (not a wildcard) is an explicit choice.
    fn is_explicit(&self) -> bool {
        matches!(self.host, HostPattern::Exact(_) | HostPattern::Ip(_))
    }
}

/// `--resolve HOST=IP`: connect to IP whenever HOST is asked for, instead
/// of asking DNS (as curl's `--resolve`, without the port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveOverride {
    pub host: String,
    pub ip: IpAddr,
}

impl FromStr for ResolveOverride {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        const W: &str = "--resolve";
        let (h, ip) = s
            .split_once('=')
            .ok_or_else(|| perr(W, s, "expected HOST=IP"))?;
        let host = match Host::parse(h) {
            Ok(Host::Name(n)) => n,
            Ok(Host::Ip(_)) => return Err(perr(W, s, "HOST must be a name, not an IP address")),
            Err(why) => return Err(perr(W, s, why)),
        };
        let ip = match Host::parse(ip) {
            Ok(Host::Ip(ip)) => ip,
            _ => return Err(perr(W, s, "IP must be an IPv4 or IPv6 address")),
        };
        Ok(ResolveOverride { host, ip })
    }
}

/// The outcome of a policy check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// Why, in a few words, for the 403 body and the connection log.
    Denied(String),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed)
    }
}

/// The egress allowlist for one run (`--net allowlist`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EgressPolicy {
    pub allow: Vec<AllowEntry>,
    pub allow_registries: bool,
    /// Host name → address, consulted before DNS.
    pub resolve: BTreeMap<String, IpAddr>,
    /// The case's install ban, hashed: what the registry index refuses.
    /// Never serialised (the record must not list the bans).
    #[serde(skip)]
    pub install_ban: RegistryBans,
}

impl EgressPolicy {
    /// Builds a policy from the raw `--allow` and `--resolve` values.
    pub fn parse<A, R>(
        allow: &[A],
        allow_registries: bool,
        resolve: &[R],
    ) -> Result<Self, ParseError>
    where
        A: AsRef<str>,
        R: AsRef<str>,
    {
        let allow = allow
            .iter()
            .map(|a| a.as_ref().parse())
            .collect::<Result<Vec<AllowEntry>, _>>()?;
        let mut map = BTreeMap::new();
        for r in resolve {
            let o: ResolveOverride = r.as_ref().parse()?;
            if let Some(prev) = map.insert(o.host.clone(), o.ip) {
                if prev != o.ip {
                    return Err(perr(
                        "--resolve",
                        r.as_ref(),
                        format!("{} is already mapped to {prev}", o.host),
                    ));
                }
            }
        }
        Ok(EgressPolicy {
            allow,
            allow_registries,
            resolve: map,
            install_ban: RegistryBans::default(),
        })
    }

    /// The same policy with the case's install ban, which the registry
    /// index enforces and which decides how registries are reached.
    pub fn with_install_ban(mut self, install_ban: &[String]) -> Self {
        self.install_ban = RegistryBans::new(install_ban);
        self
    }

    /// May the sandbox open a connection to `host:port`? `host` is as the
    /// client wrote it (name, IPv4, or IPv6 with or without brackets).
    pub fn decide(&self, host: &str, port: u16) -> Decision {
        let host = match Host::parse(host) {
            Ok(h) => h,
            Err(why) => return Decision::Denied(format!("invalid host: {why}")),
        };
        if port == 0 {
            return Decision::Denied("port 0".to_owned());
        }
        if let Host::Name(name) = &host {
            if let Some(d) = hosts::code_host(name) {
                return Decision::Denied(format!("{d} is a code host (always denied)"));
            }
            if let Some(d) = hosts::registry(name) {
                return self.decide_registry(d, &host, port);
            }
        }
        if self.allow.iter().any(|e| e.matches(&host, port)) {
            return Decision::Allowed;
        }
        match host {
            // Code hosts are denied by name; a bare `*` matching IP literals
            // would let an agent reach them by address instead.
            Host::Ip(_) if self.allow.iter().any(|e| e.host == HostPattern::Any) => {
                Decision::Denied(
                    "IP address not in the allowlist (`*` matches host names only)".to_owned(),
                )
            }
            _ => Decision::Denied("not in the allowlist".to_owned()),
        }
    }

    fn decide_registry(&self, d: &str, host: &Host, port: u16) -> Decision {
        if !self.allow_registries {
            return Decision::Denied(format!(
                "{d} is a package registry (needs --allow-registries)"
            ));
        }
        if self.install_ban.is_empty() {
            return Decision::Allowed;
        }
        let Host::Name(name) = host else {
            return Decision::Allowed;
        };
        if hosts::indexed(name) {
            return Decision::Denied(format!(
                "{d} is served filtered through cbrun's registry index (PIP_INDEX_URL, npm_config_registry); direct access is refused while the case bans packages"
            ));
        }
        let named = self
            .allow
            .iter()
            .any(|e| e.host != HostPattern::Any && e.matches(host, port));
        if named {
            Decision::Allowed
        } else {
            Decision::Denied(format!(
                "{d} is a package registry cbrun cannot filter against the case's install ban; an --allow entry naming it lets it through unfiltered"
            ))
        }
    }

    /// The `--resolve` address for `host`, if one was given.
    pub fn resolve_override(&self, host: &str) -> Option<IpAddr> {
        match Host::parse(host) {
            Ok(Host::Name(n)) => self.resolve.get(&n).copied(),
            _ => None,
        }
    }

    /// Second check, once `host` (already allowed by [`Self::decide`]) has
    /// resolved to `addr`; `own` are the host's interface addresses. The
    /// proxy connects from the host's network namespace, so `*` reaching
    /// `localhost`, the host's own address or its LAN would expose services
    /// the host keeps to itself; such addresses need an exact `--allow`
    /// entry (the name, or the address) or a `--resolve` for the name.
    pub fn check_resolved(&self, host: &str, port: u16, addr: IpAddr, own: &[IpAddr]) -> Decision {
        let addr = addr.to_canonical();
        let mine = own.iter().any(|o| o.to_canonical() == addr);
        let what = match (addr::special(addr), mine) {
            (None, false) => return Decision::Allowed,
            (Some(range), false) => range.to_owned(),
            (None, true) => "an address of this host".to_owned(),
            (Some(range), true) => format!("an address of this host ({range})"),
        };
        if self.resolve_override(host) == Some(addr) {
            return Decision::Allowed;
        }
        if let Ok(h) = Host::parse(host) {
            if self
                .allow
                .iter()
                .any(|e| e.is_explicit() && e.matches(&h, port))
            {
                return Decision::Allowed;
            }
        }
        let shown = Host::Ip(addr);
        let subject = match Host::parse(host) {
            Ok(Host::Name(n)) => format!("{n} resolves to {shown},"),
            _ => format!("{shown} is"),
        };
        Decision::Denied(format!(
            "{subject} {what}: reachable only through an --allow entry naming it exactly or a --resolve pin"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str]) -> EgressPolicy {
        EgressPolicy::parse(allow, false, &[] as &[&str]).unwrap()
    }

    fn allowed(p: &EgressPolicy, host: &str, port: u16) -> bool {
        p.decide(host, port).is_allowed()
    }

    #[test]
    fn parses_entries() {
        let e: AllowEntry = "api.openai.com".parse().unwrap();
        assert_eq!(e.host, HostPattern::Exact("api.openai.com".into()));
        assert_eq!(e.port, None);
        let e: AllowEntry = "API.OpenAI.com.:443".parse().unwrap();
        assert_eq!(e.host, HostPattern::Exact("api.openai.com".into()));
        assert_eq!(e.port, Some(443));
        let e: AllowEntry = "*.anthropic.com".parse().unwrap();
        assert_eq!(e.host, HostPattern::Subdomains("anthropic.com".into()));
        let e: AllowEntry = "*".parse().unwrap();
        assert_eq!(e.host, HostPattern::Any);
        let e: AllowEntry = "*:443".parse().unwrap();
        assert_eq!((e.host, e.port), (HostPattern::Any, Some(443)));
        let e: AllowEntry = "[::1]:8080".parse().unwrap();
        assert_eq!(e.host, HostPattern::Ip("::1".parse().unwrap()));
        assert_eq!(e.port, Some(8080));
        let e: AllowEntry = "::1".parse().unwrap();
        assert_eq!(
            (e.host, e.port),
            (HostPattern::Ip("::1".parse().unwrap()), None)
        );
        let e: AllowEntry = "10.0.0.1:80".parse().unwrap();
        assert_eq!(e.host, HostPattern::Ip("10.0.0.1".parse().unwrap()));
        assert_eq!(e.to_string(), "10.0.0.1:80");
        assert_eq!(
            "[::1]:8080".parse::<AllowEntry>().unwrap().to_string(),
            "[::1]:8080"
        );
        assert_eq!(
            "*.A.com".parse::<AllowEntry>().unwrap().to_string(),
            "*.a.com"
        );
    }

    #[test]
    fn bad_entries_say_why() {
        for (bad, why) in [
            ("", "empty"),
            ("https://api.openai.com", "URL"),
            ("api.openai.com/v1", "path"),
            ("api.openai.com:0", "1-65535"),
            ("api.openai.com:99999", "1-65535"),
            ("api.openai.com:", "1-65535"),
            ("api.openai.com:https", "1-65535"),
            ("*.", "empty host"),
            ("*foo.com", "leading"),
            ("a.*.com", "leading"),
            ("**", "leading"),
            ("*.10.0.0.1", "IP"),
            ("[::1", "unclosed"),
            ("[::1]8080", "after `]`"),
            ("[foo]:80", "IPv6"),
            ("::1:80:x", "bracketed"),
            ("a..b", "empty label"),
            ("bad host", "letters"),
            ("127.1", "numeric"),
            ("2130706433", "numeric"),
        ] {
            let err = bad.parse::<AllowEntry>().unwrap_err();
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains(why), "{bad:?}: {err}");
            assert!(err.to_string().starts_with("--allow: "), "{err}");
        }
    }

    #[test]
    fn exact_and_wildcard() {
        let p = policy(&["api.openai.com", "*.anthropic.com:443"]);
        assert!(allowed(&p, "api.openai.com", 443));
        assert!(allowed(&p, "API.OPENAI.COM.", 8443));
        assert!(!allowed(&p, "openai.com", 443));
        assert!(!allowed(&p, "x.api.openai.com", 443));
        assert!(allowed(&p, "api.anthropic.com", 443));
        assert!(allowed(&p, "a.b.anthropic.com", 443));
        assert!(!allowed(&p, "api.anthropic.com", 80), "port restricts");
        assert!(!allowed(&p, "anthropic.com", 443), "apex not covered");
        assert!(!allowed(&p, "evilanthropic.com", 443));
        assert!(!allowed(&p, "anthropic.com.evil.org", 443));
        assert!(!allowed(&p, "example.org", 443));
        assert_eq!(
            p.decide("example.org", 443),
            Decision::Denied("not in the allowlist".into())
        );
    }

    #[test]
    fn ip_literals() {
        let p = policy(&["127.0.0.1:8080", "[::1]"]);
        assert!(allowed(&p, "127.0.0.1", 8080));
        assert!(!allowed(&p, "127.0.0.1", 8081));
        assert!(allowed(&p, "::1", 1));
        assert!(allowed(&p, "[::1]", 2));
        assert!(allowed(&p, "[::ffff:127.0.0.1]", 8080), "mapped v4 folds");
        assert!(
            !allowed(&p, "localhost", 8080),
            "names do not match IP entries"
        );
        // `*` covers names only, so code hosts cannot be reached by address.
        let star = policy(&["*"]);
        assert!(allowed(&star, "example.org", 1));
        let d = star.decide("140.82.112.3", 443);
        assert!(
            matches!(&d, Decision::Denied(r) if r.contains("names only")),
            "{d:?}"
        );
        assert!(!allowed(&star, "127.1", 80), "inet_aton forms are refused");
        assert!(!allowed(&star, "0x7f.1", 80));
        assert!(!allowed(&star, "bad_host name", 80));
        assert!(!allowed(&star, "example.org", 0));
    }

    #[test]
    fn code_hosts_always_denied() {
        let mut p = policy(&["*", "github.com", "*.githubusercontent.com"]);
        p.allow_registries = true;
        for h in [
            "github.com",
            "api.github.com",
            "GitHub.com.",
            "raw.githubusercontent.com",
            "gitlab.com",
            "git.sr.ht",
        ] {
            let d = p.decide(h, 443);
            assert!(
                matches!(&d, Decision::Denied(r) if r.contains("code host")),
                "{h}: {d:?}"
            );
        }
        assert!(allowed(&p, "notgithub.com", 443));
    }

    #[test]
    fn registries_gated() {
        let p = policy(&["*", "pypi.org"]);
        for h in [
            "pypi.org",
            "files.pythonhosted.org",
            "registry.npmjs.org",
            "index.crates.io",
        ] {
            let d = p.decide(h, 443);
            assert!(
                matches!(&d, Decision::Denied(r) if r.contains("--allow-registries")),
                "{h}: {d:?}"
            );
        }
        let p = EgressPolicy::parse(&[] as &[&str], true, &[] as &[&str]).unwrap();
        assert!(
            allowed(&p, "pypi.org", 443),
            "registries reachable without an entry"
        );
        assert!(allowed(&p, "static.crates.io", 443));
        assert!(!allowed(&p, "example.org", 443));
    }

    #[test]
    fn resolve_overrides() {
        let p =
            EgressPolicy::parse(&["*"], false, &["API.test=127.0.0.1", "v6.test=[::1]"]).unwrap();
        assert_eq!(
            p.resolve_override("api.test"),
            Some("127.0.0.1".parse().unwrap())
        );
        assert_eq!(
            p.resolve_override("api.test."),
            Some("127.0.0.1".parse().unwrap())
        );
        assert_eq!(p.resolve_override("v6.test"), Some("::1".parse().unwrap()));
        assert_eq!(p.resolve_override("other.test"), None);
        for (bad, why) in [
            ("api.test", "HOST=IP"),
            ("1.2.3.4=1.2.3.4", "name"),
            ("api.test=nope", "IPv4 or IPv6"),
            ("*.test=1.2.3.4", "letters"),
        ] {
            let err = bad.parse::<ResolveOverride>().unwrap_err();
            assert!(err.to_string().contains(why), "{bad}: {err}");
        }
        let err =
            EgressPolicy::parse(&["*"], false, &["a.test=1.1.1.1", "a.test=2.2.2.2"]).unwrap_err();
        assert!(err.to_string().contains("already mapped"), "{err}");
    }

    #[test]
    fn special_and_own_addresses_need_explicit_entries() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let own: Vec<IpAddr> = vec!["203.0.113.7".parse().unwrap(), "8.8.4.4".parse().unwrap()];
        let star = policy(&["*"]);
        let denied = |p: &EgressPolicy, host: &str, port: u16, a: &str| {
            let d = p.check_resolved(host, port, a.parse().unwrap(), &own);
            match d {
                Decision::Denied(why) => why,
                Decision::Allowed => panic!("{host} -> {a} allowed"),
            }
        };
        let why = denied(&star, "localhost", 22, "127.0.0.1");
        assert!(
            why.starts_with("localhost resolves to 127.0.0.1, loopback"),
            "{why}"
        );
        for a in [
            "169.254.169.254",
            "::ffff:127.0.0.1",
            "fe80::1",
            "10.1.2.3",
            "172.16.0.9",
            "192.168.1.1",
            "100.64.0.1",
            "fd00::2",
            "::ffff:10.1.2.3",
            "0.0.0.0",
            "ff02::1",
        ] {
            denied(&star, "x.test", 80, a);
        }
        // The host's own address, even when it is an ordinary public one.
        let why = denied(&star, "self.test", 80, "8.8.4.4");
        assert!(why.contains("an address of this host"), "{why}");
        let why = denied(&star, "self.test", 80, "::ffff:8.8.4.4");
        assert!(why.contains("8.8.4.4, an address of this host"), "{why}");
        assert!(star
            .check_resolved("x.test", 80, "93.184.216.34".parse().unwrap(), &own)
            .is_allowed());
        let wild = policy(&["*.test"]);
        denied(&wild, "a.test", 80, "127.0.0.1");
        // Exact names and addresses are explicit choices.
        let exact = policy(&["localhost:8080", "127.0.0.1:9090", "10.1.2.3", "[fd00::2]"]);
        assert!(exact
            .check_resolved("localhost", 8080, lo, &own)
            .is_allowed());
        denied(&exact, "localhost", 8081, "127.0.0.1");
        assert!(exact
            .check_resolved("127.0.0.1", 9090, lo, &own)
            .is_allowed());
        assert!(exact
            .check_resolved("10.1.2.3", 1, "10.1.2.3".parse().unwrap(), &own)
            .is_allowed());
        assert!(exact
            .check_resolved("[fd00::2]", 1, "fd00::2".parse().unwrap(), &own)
            .is_allowed());
        let why = denied(&exact, "10.1.2.4", 1, "10.1.2.4");
        assert!(why.starts_with("10.1.2.4 is private"), "{why}");
        // A --resolve pin allows the address it pins, not others.
        let over = EgressPolicy::parse(&["*"], false, &["api.test=127.0.0.1"]).unwrap();
        assert!(over.check_resolved("api.test", 80, lo, &own).is_allowed());
        denied(&over, "api.test", 80, "10.0.0.1");
        denied(&over, "other.test", 80, "127.0.0.1");
    }

    #[test]
    fn registries_behind_the_index_when_the_case_bans_packages() {
        let bans = vec!["semver".to_string()];
        let p = EgressPolicy::parse(&["*", "static.crates.io"], true, &[] as &[&str])
            .unwrap()
            .with_install_ban(&bans);
        for h in [
            "pypi.org",
            "files.pythonhosted.org",
            "registry.npmjs.org",
            "registry.yarnpkg.com",
        ] {
            let d = p.decide(h, 443);
            assert!(
                matches!(&d, Decision::Denied(r) if r.contains("registry index")),
                "{h}: {d:?}"
            );
        }
        // Registries the index does not serve: only when named, not by `*`.
        assert!(allowed(&p, "static.crates.io", 443));
        for h in [
            "index.crates.io",
            "proxy.golang.org",
            "unpkg.com",
            "registry.npmmirror.com",
        ] {
            let d = p.decide(h, 443);
            assert!(
                matches!(&d, Decision::Denied(r) if r.contains("cannot filter")),
                "{h}: {d:?}"
            );
        }
        assert!(allowed(&p, "example.org", 443));
        // Nothing banned: registries are reachable as before.
        let open = EgressPolicy::parse(&[] as &[&str], true, &[] as &[&str])
            .unwrap()
            .with_install_ban(&[]);
        assert!(allowed(&open, "pypi.org", 443) && allowed(&open, "index.crates.io", 443));
        // The bans never reach the record.
        let json = serde_json::to_string(&p).unwrap();
        assert!(
            !json.contains("semver") && !json.contains("install_ban"),
            "{json}"
        );
    }
}
