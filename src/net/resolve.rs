//! How the proxy turns a host name into addresses: a hosts(5)-format file
//! given with `CBRUN_EGRESS_HOSTS` first, then the system resolver.
//!
//! Unlike `--resolve`, the file is not an exact listing: its answers are
//! checked like DNS answers ([`super::policy::EgressPolicy::check_resolved`]),
//! so it can stand in for a DNS server an agent controls (tests use it to
//! point names at the host's own and private addresses) or for a private
//! DNS view, without exempting anything from the address checks.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;

use super::policy::Host;

/// The variable naming the hosts file.
pub const ENV_HOSTS: &str = "CBRUN_EGRESS_HOSTS";

/// Names answered from a hosts file, then by the system.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolver {
    hosts: HashMap<String, Vec<IpAddr>>,
}

impl Resolver {
    /// Reads a hosts file: `ADDRESS NAME...` per line, `#` comments.
    /// Errors name the file and line.
    pub fn from_hosts_file(path: &Path) -> Result<Resolver, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{ENV_HOSTS}: {}: {e}", path.display()))?;
        Resolver::parse_hosts(&text).map_err(|e| format!("{ENV_HOSTS}: {}: {e}", path.display()))
    }

    /// Parses hosts(5) text.
    pub fn parse_hosts(text: &str) -> Result<Resolver, String> {
        let mut hosts: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            let Some(addr) = words.next() else { continue };
            let ip: IpAddr = addr
                .parse()
                .map_err(|_| format!("line {}: {addr:?} is not an IP address", i + 1))?;
            let mut any = false;
            for w in words {
                let name = match Host::parse(w) {
                    Ok(Host::Name(n)) => n,
                    _ => return Err(format!("line {}: {w:?} is not a host name", i + 1)),
                };
                let v = hosts.entry(name).or_default();
                if !v.contains(&ip) {
                    v.push(ip);
                }
                any = true;
            }
            if !any {
                return Err(format!("line {}: an address without a name", i + 1));
            }
        }
        Ok(Resolver { hosts })
    }

    /// The addresses of `name` (normalised) at `port`.
    pub fn lookup(&self, name: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        if let Some(ips) = self.hosts.get(name) {
            return Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        }
        Ok((name, port).to_socket_addrs()?.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_file_answers_first() {
        let r = Resolver::parse_hosts(
            "# test view\n10.1.2.3 Ten.Test ten2.test # private\n\n::ffff:10.0.0.1 mapped.test\nfd00::2 ten.test\n",
        )
        .unwrap();
        let a = r.lookup("ten.test", 80).unwrap();
        assert_eq!(
            a,
            vec![
                "10.1.2.3:80".parse().unwrap(),
                "[fd00::2]:80".parse().unwrap()
            ]
        );
        assert_eq!(r.lookup("ten2.test", 1).unwrap().len(), 1);
        assert_eq!(
            r.lookup("mapped.test", 1).unwrap()[0].ip(),
            "::ffff:10.0.0.1".parse::<IpAddr>().unwrap()
        );
        // Others go to the system resolver.
        assert!(r
            .lookup("localhost", 1)
            .unwrap()
            .iter()
            .all(|a| a.ip().is_loopback()));
        for (bad, why) in [
            ("nope x.test", "not an IP"),
            ("1.2.3.4", "without a name"),
            ("1.2.3.4 bad_name!", "not a host name"),
        ] {
            let e = Resolver::parse_hosts(bad).unwrap_err();
            assert!(e.contains(why) && e.starts_with("line 1"), "{bad}: {e}");
        }
    }
}
