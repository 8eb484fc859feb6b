//! Addresses egress must not reach unless they are listed exactly.
//!
//! The proxy dials from the host's network namespace, so an address that
//! means "this machine", its link or its private networks would let a name
//! the agent controls (under `*`) reach services the host keeps to itself:
//! daemons bound to 0.0.0.0, cloud metadata, the LAN. [`special`] names the
//! ranges (IANA special-purpose registries, plus the forms of IPv6 that
//! carry an IPv4 address); [`host_addresses`] lists the host's own
//! interface addresses, which may be public and so in no range.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address `ip` is, when it is one egress refuses by default;
/// `None` for an ordinary global unicast address.
pub fn special(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "\"this network\" (0.0.0.0/8)"),
        ([10, 0, 0, 0], 8, "private (RFC 1918)"),
        (
            [100, 64, 0, 0],
            10,
            "shared address space (CGNAT, 100.64.0.0/10)",
        ),
        ([127, 0, 0, 0], 8, "loopback"),
        (
            [169, 254, 0, 0],
            16,
            "link-local (169.254.0.0/16, cloud metadata)",
        ),
        ([172, 16, 0, 0], 12, "private (RFC 1918)"),
        (
            [192, 0, 0, 0],
            24,
            "IETF protocol assignment (192.0.0.0/24)",
        ),
        ([192, 0, 2, 0], 24, "documentation (TEST-NET-1)"),
        ([192, 88, 99, 0], 24, "6to4 relay anycast (192.88.99.0/24)"),
        ([192, 168, 0, 0], 16, "private (RFC 1918)"),
        ([198, 18, 0, 0], 15, "benchmarking (198.18.0.0/15)"),
        ([198, 51, 100, 0], 24, "documentation (TEST-NET-2)"),
        ([203, 0, 113, 0], 24, "documentation (TEST-NET-3)"),
        ([224, 0, 0, 0], 4, "multicast"),
        ([255, 255, 255, 255], 32, "broadcast"),
        ([240, 0, 0, 0], 4, "reserved (240.0.0.0/4)"),
    ];
    RANGES
        .iter()
        .find(|(net, bits, _)| in_v4(ip, *net, *bits))
        .map(|(_, _, what)| *what)
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], bits: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
    (u128::from(ip) & mask) == (u128::from(Ipv6Addr::from(net)) & mask)
}

/// The IPv4 address in bits `from..from+32` of `ip`.
fn embedded_v4(ip: Ipv6Addr, from: u32) -> Ipv4Addr {
    Ipv4Addr::from((u128::from(ip) >> (96 - from)) as u32)
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // Translation and tunnel forms lead to the IPv4 address inside them.
    if in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        return special_v4(embedded_v4(ip, 96)).map(|_| "NAT64 form of a special IPv4 address");
    }
    if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        return special_v4(embedded_v4(ip, 16)).map(|_| "6to4 form of a special IPv4 address");
    }
    const RANGES: &[([u16; 8], u32, &str)] = &[
        (
            [0, 0, 0, 0, 0, 0, 0, 0],
            96,
            "IPv4-compatible (deprecated, ::/96)",
        ),
        (
            [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
            48,
            "local-use NAT64 (64:ff9b:1::/48)",
        ),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only (100::/64)"),
        (
            [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
            32,
            "documentation (2001:db8::/32)",
        ),
        (
            [0x2001, 0, 0, 0, 0, 0, 0, 0],
            32,
            "Teredo tunnel (2001::/32)",
        ),
        (
            [0x2001, 0, 0, 0, 0, 0, 0, 0],
            23,
            "IETF protocol assignment (2001::/23)",
        ),
        (
            [0x3fff, 0, 0, 0, 0, 0, 0, 0],
            20,
            "documentation (3fff::/20)",
        ),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique local (fc00::/7)"),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local (fe80::/10)"),
        (
            [0xfec0, 0, 0, 0, 0, 0, 0, 0],
            10,
            "site-local (deprecated, fec0::/10)",
        ),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast"),
    ];
    RANGES
        .iter()
        .find(|(net, bits, _)| in_v6(ip, *net, *bits))
        .map(|(_, _, what)| *what)
}

/// The addresses of the host's own interfaces (in the caller's network
/// namespace), IPv4-mapped forms folded to IPv4.
pub fn host_addresses() -> io::Result<Vec<IpAddr>> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs()? {
        let Some(a) = ifa.address else { continue };
        let ip = if let Some(v4) = a.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = a.as_sockaddr_in6() {
            IpAddr::V6(v6.ip()).to_canonical()
        } else {
            continue;
        };
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(s: &str) -> Option<&'static str> {
        special(s.parse().unwrap())
    }

    #[test]
    fn ipv4_ranges() {
        for (a, what) in [
            ("10.1.2.3", "RFC 1918"),
            ("172.16.0.1", "RFC 1918"),
            ("172.31.255.255", "RFC 1918"),
            ("192.168.7.8", "RFC 1918"),
            ("100.64.0.1", "CGNAT"),
            ("100.127.255.255", "CGNAT"),
            ("169.254.169.254", "metadata"),
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("0.0.0.0", "this network"),
            ("0.1.2.3", "this network"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("192.0.2.2", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("192.0.0.8", "IETF"),
        ] {
            let got = sp(a).unwrap_or_else(|| panic!("{a} not special"));
            assert!(got.contains(what), "{a}: {got}");
        }
        for a in [
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "11.0.0.1",
            "192.169.0.1",
        ] {
            assert_eq!(sp(a), None, "{a}");
        }
    }

    #[test]
    fn ipv6_ranges_and_ipv4_forms() {
        for (a, what) in [
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00::2", "unique local"),
            ("fc12::1", "unique local"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("2001:0:4136:e378::1", "Teredo"),
            ("64:ff9b:1::1", "local-use NAT64"),
            ("::10.1.2.3", "IPv4-compatible"),
            ("100::1", "discard"),
            // IPv4-mapped forms are the IPv4 address.
            ("::ffff:10.1.2.3", "RFC 1918"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:100.64.1.1", "CGNAT"),
            ("64:ff9b::a01:203", "NAT64"),
            ("64:ff9b::7f00:1", "NAT64"),
            ("2002:c0a8:0101::1", "6to4"),
            ("2002:7f00:1::1", "6to4"),
        ] {
            let got = sp(a).unwrap_or_else(|| panic!("{a} not special"));
            assert!(got.contains(what), "{a}: {got}");
        }
        for a in [
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(sp(a), None, "{a}");
        }
    }

    #[test]
    fn own_addresses_include_loopback() {
        let own = host_addresses().unwrap();
        assert!(own.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{own:?}");
    }
}
