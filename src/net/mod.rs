//! Allowlisted egress for sandboxes (`--net allowlist`).
//!
//! The sandbox's network namespace has only `lo`. cbrun creates a listening
//! socket on the sandbox's loopback ([`netns`]) and serves it from the host
//! side with an HTTP/HTTPS forward proxy ([`proxy`]) that applies an
//! [`EgressPolicy`] ([`policy`], with built-in host lists in [`hosts`]) and
//! records every connection attempt ([`log`]). Inside the sandbox
//! `HTTP_PROXY`/`HTTPS_PROXY` point at it; any other connection has no
//! route. Names are resolved once ([`resolve`]) and every address is
//! checked against the host's own and special-purpose ranges ([`addr`]).
//! The same listener serves cbrun's registry index ([`index`]): PyPI and
//! npm without the case's banned packages. [`http`] holds the wire code
//! both share.

pub mod addr;
pub mod forward;
pub mod hosts;
pub mod http;
pub mod index;
pub mod log;
pub mod netns;
pub mod policy;
pub mod proxy;
pub mod resolve;

pub use log::{summarize, ConnLog, ConnRecord, LogDecision, NetSummary};
pub use netns::{listen_in_netns, listen_in_userns_netns};
pub use policy::{AllowEntry, Decision, EgressPolicy, ParseError, ResolveOverride};
pub use proxy::{serve, Limits, Proxy};
