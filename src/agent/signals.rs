//! Infrastructure signals: signs in a run's logs that the model API, not
//! the agent, failed (bad credentials, rate limits, an overloaded or
//! unreachable API, a host the policy refused, a CLI that gave up
//! retrying).
//!
//! Two sources:
//! - the agent's log, read as its CLI's format says (`usage_format`): only
//!   the CLI's own error events and its plain-text lines are looked at,
//!   never tool output or model text inside the JSON events (a test suite
//!   printing "connection refused" is not an API failure). A spec without
//!   a format has every line looked at. This is the agent's own word: the
//!   model's tools run as the same user and could print a forgery.
//! - cbrun's connection log (`network.jsonl`, cbrun's own), for the model
//!   hosts: the spec's `api_hosts`, the hosts of the agent's `*_BASE_URL`
//!   variables, and every loopback forward.
//!
//! A trial whose agent did not submit is the infrastructure's failure
//! (`run_valid: false`) when a terminating signal turned up, or any
//! signal at all while the model was never reached (no output tokens).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::fsutil::quote_text;
use crate::net::log::{ConnRecord, LogDecision};
use crate::net::policy::Host;
use crate::usage::UsageFormat;

/// What went wrong with the model API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// 401/403, an invalid key.
    Auth,
    /// 429.
    RateLimit,
    /// 529, `overloaded_error`, 503.
    Overloaded,
    /// Another 5xx: the API failed the request.
    ServerError,
    /// Refused, reset, unreachable.
    Connection,
    /// The API's name did not resolve.
    Dns,
    Timeout,
    /// The CLI gave up on the API after its retries.
    RetryExhausted,
    /// cbrun's policy refused a connection to a model host.
    EgressDenied,
}

impl Signal {
    /// Ends a run by itself (as opposed to a transient error a CLI retries
    /// past).
    pub fn terminating(self) -> bool {
        matches!(
            self,
            Signal::Auth
                | Signal::Connection
                | Signal::Dns
                | Signal::RetryExhausted
                | Signal::EgressDenied
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Signal::Auth => "auth",
            Signal::RateLimit => "rate_limit",
            Signal::Overloaded => "overloaded",
            Signal::ServerError => "server_error",
            Signal::Connection => "connection",
            Signal::Dns => "dns",
            Signal::Timeout => "timeout",
            Signal::RetryExhausted => "retry_exhausted",
            Signal::EgressDenied => "egress_denied",
        }
    }
}

/// Where a signal was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    AgentLog,
    NetworkLog,
}

/// One signal from one source: how often, and the first line that showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    pub signal: Signal,
    pub source: Source,
    pub count: u64,
    /// Quoted and cut to [`EXAMPLE_LEN`] characters.
    pub example: String,
}

pub const EXAMPLE_LEN: usize = 200;

/// Every signal of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Signals {
    pub hits: Vec<Hit>,
}

impl Signals {
    fn note(&mut self, signal: Signal, source: Source, line: &str) {
        if let Some(h) = self
            .hits
            .iter_mut()
            .find(|h| h.signal == signal && h.source == source)
        {
            h.count += 1;
            return;
        }
        self.hits.push(Hit {
            signal,
            source,
            count: 1,
            example: example(line),
        });
        self.hits.sort_by_key(|h| (h.signal, h.source));
    }

    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    pub fn merge(&mut self, other: Signals) {
        for h in other.hits {
            match self
                .hits
                .iter_mut()
                .find(|x| x.signal == h.signal && x.source == h.source)
            {
                Some(x) => x.count += h.count,
                None => self.hits.push(h),
            }
        }
        self.hits.sort_by_key(|h| (h.signal, h.source));
    }

    /// The signal that makes a run without a submission invalid, if any:
    /// the first terminating one, else (when the model was never reached)
    /// the first of any kind.
    pub fn invalidating(&self, model_reached: bool) -> Option<Signal> {
        self.hits
            .iter()
            .map(|h| h.signal)
            .find(|s| s.terminating())
            .or_else(|| {
                (!model_reached)
                    .then(|| self.hits.first().map(|h| h.signal))
                    .flatten()
            })
    }
}

fn example(line: &str) -> String {
    let line = line.trim();
    let mut cut: String = line.chars().take(EXAMPLE_LEN).collect();
    if cut.len() < line.len() {
        cut.push_str("...");
    }
    quote_text(&cut)
}

/// Case-insensitive phrases per signal, for plain-text error messages.
const PHRASES: &[(Signal, &[&str])] = &[
    (
        Signal::RetryExhausted,
        &[
            "exceeded retry limit",
            "retries exhausted",
            "maximum retries",
            "max retries exceeded",
        ],
    ),
    (
        Signal::Auth,
        &[
            "authentication_error",
            "authentication_failed",
            "authenticationerror",
            "failed to authenticate",
            "invalid_api_key",
            "invalid api key",
            "invalid x-api-key",
            "incorrect api key",
            "unauthorized",
            "status 401",
            "http 401",
            "error: 401",
            "error 401",
            "(401)",
            "status 403",
            "http 403",
            "permission_error",
        ],
    ),
    (
        Signal::RateLimit,
        &[
            "rate_limit",
            "rate limit",
            "ratelimiterror",
            "too many requests",
            "status 429",
            "http 429",
            "error: 429",
            "error 429",
            "(429)",
        ],
    ),
    (
        Signal::Overloaded,
        &[
            "overloaded",
            "status 529",
            "error: 529",
            "error 529",
            "(529)",
            "503 service unavailable",
        ],
    ),
    (
        Signal::ServerError,
        &[
            "internal server error",
            "502 bad gateway",
            "status 500",
            "error: 500",
            "error 500",
        ],
    ),
    (
        Signal::Dns,
        &[
            "enotfound",
            "eai_again",
            "getaddrinfo",
            "could not resolve host",
            "name or service not known",
            "temporary failure in name resolution",
            "cannot resolve",
            "failed to lookup address",
        ],
    ),
    (
        Signal::Connection,
        &[
            "econnrefused",
            "connection refused",
            "connectionrefused",
            "unable to connect to api",
            "connection error",
            "econnreset",
            "connection reset",
            "socket hang up",
            "fetch failed",
            "network is unreachable",
            "stream disconnected before completion",
        ],
    ),
    (
        Signal::Timeout,
        &["etimedout", "request timed out", "connection timed out"],
    ),
];

/// Signals a plain-text line shows (each at most once).
pub fn text_signals(line: &str) -> Vec<Signal> {
    let lower = line.to_ascii_lowercase();
    PHRASES
        .iter()
        .filter(|(_, ps)| ps.iter().any(|p| lower.contains(p)))
        .map(|(s, _)| *s)
        .collect()
}

/// A status code as a signal.
fn status_signal(code: u64) -> Option<Signal> {
    match code {
        401 | 403 => Some(Signal::Auth),
        429 => Some(Signal::RateLimit),
        529 | 503 => Some(Signal::Overloaded),
        408 | 504 => Some(Signal::Timeout),
        500..=599 => Some(Signal::ServerError),
        _ => None,
    }
}

/// Signals in one agent log, read as `format` says.
pub fn from_agent_log(text: &str, format: Option<UsageFormat>) -> Signals {
    let mut out = Signals::default();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let json = if format.is_some() && trimmed.starts_with('{') {
            serde_json::from_str::<Value>(trimmed)
                .ok()
                .filter(Value::is_object)
        } else {
            None
        };
        let found = match (&json, format) {
            // A CLI's event: only its error events count.
            (Some(v), Some(f)) => event_signals(v, f),
            // Its own plain-text lines (stderr), or a spec without a format.
            _ => text_signals(trimmed),
        };
        for s in found {
            out.note(s, Source::AgentLog, trimmed);
        }
    }
    out
}

fn str_of<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The signals one JSON event of a CLI stands for.
fn event_signals(v: &Value, format: UsageFormat) -> Vec<Signal> {
    let kind = str_of(v, "type");
    let mut out = Vec::new();
    match format {
        UsageFormat::ClaudeStreamJson => match kind {
            // `{"type":"system","subtype":"api_retry","error_status":429,"error":"rate_limit"}`
            "system" if str_of(v, "subtype") == "api_retry" => {
                let by_status = v
                    .get("error_status")
                    .and_then(Value::as_u64)
                    .and_then(status_signal);
                let by_name = match str_of(v, "error") {
                    "authentication_failed" => Some(Signal::Auth),
                    "rate_limit" => Some(Signal::RateLimit),
                    "overloaded" | "overloaded_error" => Some(Signal::Overloaded),
                    "server_error" | "api_error" => Some(Signal::ServerError),
                    _ => None,
                };
                // Without a status, no answer came back.
                let no_answer = v.get("error_status").and_then(Value::as_u64).is_none();
                out.extend(
                    by_status
                        .or(by_name)
                        .or(no_answer.then_some(Signal::Connection)),
                );
            }
            // The run's end; `is_error` with an API error means the CLI gave up.
            "result" if v.get("is_error").and_then(Value::as_bool) == Some(true) => {
                let status = v.get("api_error_status").and_then(Value::as_u64);
                let text = str_of(v, "result");
                let api = status.is_some()
                    || text.starts_with("API Error")
                    || text.contains("Failed to authenticate");
                if api {
                    out.push(Signal::RetryExhausted);
                    out.extend(status.and_then(status_signal));
                    out.extend(text_signals(text));
                }
            }
            _ => {}
        },
        UsageFormat::CodexJson => match kind {
            "error" => out.extend(text_signals(str_of(v, "message"))),
            "turn.failed" => {
                let msg = v.get("error").map(|e| str_of(e, "message")).unwrap_or("");
                out.extend(text_signals(msg));
            }
            _ => {}
        },
        UsageFormat::OpencodeJson => {
            if kind == "error" {
                out.extend(text_signals(&v.to_string()));
            }
        }
        UsageFormat::CursorStreamJson => {
            if kind == "result" && v.get("is_error").and_then(Value::as_bool) == Some(true) {
                out.extend(text_signals(str_of(v, "result")));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The model hosts of a run: the spec's `api_hosts` and the hosts of its
/// `*_BASE_URL` variables (given as name/value pairs), normalized.
pub fn model_hosts(api_hosts: &[String], env: &[(String, String)]) -> Vec<String> {
    let mut out: Vec<String> = api_hosts.iter().filter_map(|h| host_key(h)).collect();
    for (k, v) in env {
        if k.ends_with("_BASE_URL") {
            out.extend(url_host(v).and_then(|h| host_key(&h)));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn host_key(h: &str) -> Option<String> {
    Host::parse(h).ok().map(|h| h.to_string())
}

/// The host of `scheme://[user@]host[:port]/...`.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if hostport.starts_with('[') {
        hostport.split_once(']').map(|(h, _)| format!("{h}]"))?
    } else {
        hostport.split(':').next()?.to_owned()
    };
    (!host.is_empty()).then_some(host)
}

/// Signals in the connection log's records, for the model hosts (and
/// every loopback forward, which exists only for an API).
pub fn from_network(records: &[ConnRecord], model_hosts: &[String]) -> Signals {
    let mut out = Signals::default();
    for r in records {
        let host = host_key(&r.host).unwrap_or_else(|| r.host.clone());
        let model = r.method == crate::net::forward::FORWARD_METHOD || model_hosts.contains(&host);
        if !model {
            continue;
        }
        let reason = r.reason.as_deref().unwrap_or("");
        let line = format!(
            "{} {}:{} {:?}: {reason}",
            r.method, r.host, r.port, r.decision
        );
        let signal = match r.decision {
            LogDecision::Allowed => continue,
            LogDecision::Denied => Signal::EgressDenied,
            LogDecision::Error => text_signals(reason)
                .into_iter()
                .find(|s| matches!(s, Signal::Dns | Signal::Timeout | Signal::Connection))
                .unwrap_or(Signal::Connection),
        };
        out.note(signal, Source::NetworkLog, &line);
    }
    out
}

/// Counts per signal name, for summaries.
pub fn counts(s: &Signals) -> BTreeMap<&'static str, u64> {
    let mut m = BTreeMap::new();
    for h in &s.hits {
        *m.entry(h.signal.name()).or_default() += h.count;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines Claude Code 2.1.197 printed against a mock API that answered
    /// 401, 429, and against a closed port.
    const CLAUDE_401: &str = r#"{"type":"system","subtype":"init","cwd":"/app","session_id":"s"}
{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":594.8,"error_status":401,"error":"authentication_failed","session_id":"s"}
{"type":"assistant","message":{"id":"x","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"Failed to authenticate. API Error: 401 mock authentication_error"}]},"error":"server_error"}
{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"num_turns":1,"result":"Failed to authenticate. API Error: 401 mock authentication_error","total_cost_usd":0}"#;
    const CLAUDE_429: &str = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":1000,"error_status":429,"error":"rate_limit"}
{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1221,"error_status":429,"error":"rate_limit"}"#;
    const CLAUDE_REFUSED: &str = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":521,"error_status":null,"error":"unknown"}
{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"result":"API Error: Unable to connect to API (ConnectionRefused)"}"#;
    /// Against a mock answering 500, with CLAUDE_CODE_MAX_RETRIES=1.
    const CLAUDE_500: &str = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":616.1,"error_status":500,"error":"server_error","session_id":"s"}
{"type":"assistant","message":{"id":"x","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 500 mock api_error. This is a server-side issue, usually temporary"}]},"error":"server_error"}
{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"num_turns":1,"result":"API Error: 500 mock api_error. This is a server-side issue, usually temporary","total_cost_usd":0}"#;

    fn kinds(s: &Signals) -> Vec<(Signal, u64)> {
        s.hits.iter().map(|h| (h.signal, h.count)).collect()
    }

    #[test]
    fn claude_code_error_events() {
        let f = Some(UsageFormat::ClaudeStreamJson);
        let s = from_agent_log(CLAUDE_401, f);
        assert_eq!(kinds(&s), [(Signal::Auth, 2), (Signal::RetryExhausted, 1)]);
        assert_eq!(s.invalidating(true), Some(Signal::Auth));
        let s = from_agent_log(CLAUDE_429, f);
        assert_eq!(kinds(&s), [(Signal::RateLimit, 2)]);
        assert_eq!(
            s.invalidating(true),
            None,
            "a CLI retrying past 429s is not finished"
        );
        assert_eq!(s.invalidating(false), Some(Signal::RateLimit));
        let s = from_agent_log(CLAUDE_REFUSED, f);
        assert_eq!(
            kinds(&s),
            [(Signal::Connection, 2), (Signal::RetryExhausted, 1)]
        );
        assert!(s.hits[0].example.contains("api_retry"), "{:?}", s.hits);
        // A server error is no connection failure; giving up on it ends the run.
        let s = from_agent_log(CLAUDE_500, f);
        assert_eq!(
            kinds(&s),
            [(Signal::ServerError, 2), (Signal::RetryExhausted, 1)]
        );
        assert_eq!(s.invalidating(true), Some(Signal::RetryExhausted));
    }

    #[test]
    fn tool_output_and_model_text_are_not_signals() {
        let f = Some(UsageFormat::ClaudeStreamJson);
        let text = r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"ConnectionRefusedError: [Errno 111] Connection refused; HTTP 401 Unauthorized; 429 Too Many Requests"}]}}
{"type":"assistant","message":{"id":"m","model":"claude-x","content":[{"type":"text","text":"The test expects ECONNREFUSED and a rate limit error."}]}}
{"type":"result","subtype":"success","is_error":false,"result":"fixed the 401 handling"}"#;
        assert!(from_agent_log(text, f).is_empty());
        // The same words as plain text (a spec without a format) count.
        let s = from_agent_log("curl: (7) Failed to connect: Connection refused", None);
        assert_eq!(kinds(&s), [(Signal::Connection, 1)]);
        // A CLI's stderr line between its JSON events counts too.
        let s = from_agent_log("{\"type\":\"turn.started\"}\nERROR: exceeded retry limit, last status: 429 Too Many Requests", Some(UsageFormat::CodexJson));
        assert_eq!(
            kinds(&s),
            [(Signal::RateLimit, 1), (Signal::RetryExhausted, 1)]
        );
    }

    #[test]
    fn codex_opencode_cursor_errors() {
        let s = from_agent_log(
            "{\"type\":\"turn.failed\",\"error\":{\"message\":\"unexpected status 401 Unauthorized: invalid_api_key\"}}",
            Some(UsageFormat::CodexJson),
        );
        assert_eq!(kinds(&s), [(Signal::Auth, 1)]);
        let s = from_agent_log(
            "{\"type\":\"error\",\"error\":{\"name\":\"APIError\",\"data\":{\"message\":\"getaddrinfo ENOTFOUND api.example.test\"}}}",
            Some(UsageFormat::OpencodeJson),
        );
        assert_eq!(kinds(&s), [(Signal::Dns, 1)]);
        let s = from_agent_log(
            "{\"type\":\"result\",\"is_error\":true,\"result\":\"Overloaded, try later\"}",
            Some(UsageFormat::CursorStreamJson),
        );
        assert_eq!(kinds(&s), [(Signal::Overloaded, 1)]);
    }

    #[test]
    fn examples_are_one_quoted_capped_line() {
        let long = format!("connection refused \u{1b}[31m{}", "x".repeat(1000));
        let s = from_agent_log(&long, None);
        let ex = &s.hits[0].example;
        assert!(!ex.contains('\u{1b}'), "{ex}");
        assert!(ex.len() < EXAMPLE_LEN + 20, "{}", ex.len());
        assert!(ex.ends_with("..."));
    }

    fn rec(method: &str, host: &str, port: u16, d: LogDecision, reason: &str) -> ConnRecord {
        ConnRecord {
            at_ms: 0,
            method: method.into(),
            host: host.into(),
            port,
            decision: d,
            reason: (!reason.is_empty()).then(|| reason.into()),
            bytes_up: 0,
            bytes_down: 0,
            index_path: None,
        }
    }

    #[test]
    fn network_records_for_model_hosts_only() {
        let hosts = model_hosts(
            &["api.anthropic.com".into()],
            &[
                (
                    "ANTHROPIC_BASE_URL".into(),
                    "https://Gateway.Example.test:8443/v1".into(),
                ),
                ("OTHER".into(), "http://ignored.test".into()),
            ],
        );
        assert_eq!(hosts, ["api.anthropic.com", "gateway.example.test"]);
        let recs = vec![
            rec(
                "CONNECT",
                "api.anthropic.com",
                443,
                LogDecision::Denied,
                "not in the allowlist",
            ),
            rec(
                "CONNECT",
                "github.com",
                443,
                LogDecision::Denied,
                "code host",
            ),
            rec(
                "CONNECT",
                "gateway.example.test",
                8443,
                LogDecision::Error,
                "cannot resolve gateway.example.test: failed to lookup address information",
            ),
            rec(
                crate::net::forward::FORWARD_METHOD,
                "127.0.0.1",
                9,
                LogDecision::Error,
                "127.0.0.1:9: Connection refused (os error 111)",
            ),
            rec(
                "CONNECT",
                "pypi.org",
                443,
                LogDecision::Error,
                "connection refused",
            ),
            rec(
                "CONNECT",
                "api.anthropic.com",
                443,
                LogDecision::Allowed,
                "",
            ),
        ];
        let s = from_network(&recs, &hosts);
        assert_eq!(
            kinds(&s),
            [
                (Signal::Connection, 1),
                (Signal::Dns, 1),
                (Signal::EgressDenied, 1)
            ]
        );
        assert!(s.hits.iter().all(|h| h.source == Source::NetworkLog));
        assert_eq!(s.invalidating(true), Some(Signal::Connection));
    }

    #[test]
    fn url_hosts() {
        assert_eq!(
            url_host("http://127.0.0.1:8080").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            url_host("https://u:p@h.test/x?y").as_deref(),
            Some("h.test")
        );
        assert_eq!(url_host("http://[::1]:9/v1").as_deref(), Some("[::1]"));
        assert_eq!(url_host("h.test"), None);
    }
}
