//! Real agent CLIs through cbrun, and what a trial records about them.
//!
//! - A real Claude Code (npm, pinned 2.1.197, installed by the shipped
//!   spec's own install script through cbrun's registry index) solves the
//!   sample case against a scripted Anthropic Messages API on the host's
//!   loopback, reached through cbrun's loopback forward: reward 1, token
//!   usage, cost, transcript and connection log recorded, as root and as
//!   an unprivileged user; a second trial starts from the install cache.
//! - API failures (refused, 401, 429, a name that does not resolve) make a
//!   trial without a submission an infrastructure failure; a working API
//!   with no submission stays the agent's.
//! - The install cache cannot be poisoned by an agent, a moving version is
//!   warned about and never cached, `--rootfs DIR` is never written, a
//!   missing `--model` is refused before anything is written, and a host
//!   warning is printed once per trial.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::sample_case as case;
use crate::common::*;
use serde_json::{json, Value};

/// A real CLI install and run; the install goes to the npm registry.
const REAL_DEADLINE: Duration = Duration::from_secs(900);
const TRIAL_DEADLINE: Duration = Duration::from_secs(240);
/// The model the scripted API answers as (priced in the built-in table).
const MODEL: &str = "claude-sonnet-5-5";
/// Per streamed response: input, cache read, cache write, output tokens.
const USAGE: (u64, u64, u64, u64) = (100, 30, 20, 7);

fn spec(ctx: &Ctx, name: &str, body: &str) -> PathBuf {
    let p = ctx.dir.join(format!("{name}.toml"));
    fs::write(&p, format!("name = \"{name}\"\n{body}")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p
}

/// A folder owned by the user cbrun runs as: its data dir (the install
/// cache lives in `<it>/agents`).
fn data_home(ctx: &Ctx, name: &str) -> PathBuf {
    let h = ctx.out.join(name);
    fs::create_dir_all(&h).unwrap();
    std::os::unix::fs::chown(&h, Some(ctx.who.uid()), Some(ctx.who.uid())).unwrap();
    h
}

struct Trial {
    run: Run,
    dir: PathBuf,
    record: Value,
}

impl Trial {
    fn show(&self) -> String {
        let tail = |rel: &str| {
            let t = fs::read_to_string(self.dir.join(rel)).unwrap_or_default();
            let start = t.len().saturating_sub(3000);
            format!("--- {rel} (tail)\n{}", &t[t.floor_char_boundary(start)..])
        };
        format!(
            "{}\nrecord: {}\n{}\n{}\n{}\n{}",
            self.run.show(),
            serde_json::to_string_pretty(&self.record).unwrap(),
            tail("logs/cbrun/install.log"),
            tail("logs/cbrun/agent.log"),
            tail("logs/cbrun/agent.outcome.json"),
            tail("logs/cbrun/network.jsonl"),
        )
    }
    fn status(&self) -> &str {
        self.record["terminal_status"].as_str().unwrap_or("?")
    }
    fn reward(&self) -> i64 {
        self.record["reward"].as_i64().unwrap_or(-1)
    }
    fn net_log(&self) -> Vec<Value> {
        fs::read_to_string(self.dir.join("logs/cbrun/network.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn trial(
    ctx: &Ctx,
    label: &str,
    c: &Path,
    agent: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    deadline: Duration,
) -> Trial {
    let dir = ctx.out.join(label);
    let mut args: Vec<String> = vec![
        "trial".into(),
        c.display().to_string(),
        "--agent".into(),
        agent.into(),
        "--out".into(),
        dir.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let run = ctx.spawn_args(&args, env, None).wait(deadline);
    let text = fs::read_to_string(dir.join("trial.json"))
        .unwrap_or_else(|e| panic!("no trial.json in {} ({e})\n{}", dir.display(), run.show()));
    Trial {
        run,
        dir,
        record: serde_json::from_str(&text).unwrap(),
    }
}

// ---------------------------------------------------------------------
// A scripted Anthropic Messages API on 127.0.0.1.

#[derive(Clone)]
enum Mode {
    /// Tool calls that write `files` into /app and the submit marker, then
    /// a final message; streaming SSE as Claude Code asks for it.
    Solve(Vec<(String, String)>),
    /// Every messages request gets this status and an error body.
    Status(u16),
    /// A plain final answer to everything.
    Answer,
}

struct MockApi {
    port: u16,
    /// Streamed requests of the main loop (they carry tools), per model.
    main_calls: Arc<Mutex<BTreeMap<String, u64>>>,
    requests: Arc<AtomicUsize>,
}

fn read_request(s: &mut TcpStream) -> Option<(String, String, Vec<u8>)> {
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some((method, path, body))
}

fn respond(s: &mut TcpStream, status: u16, ctype: &str, body: &[u8]) {
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Error",
    };
    let _ = write!(
        s,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(body);
}

fn sse(event: &str, data: Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// The next step of the script: how many tool results came back so far.
fn step(req: &Value) -> usize {
    req["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .filter(|b| b["type"] == "tool_result")
                .count()
        })
        .unwrap_or(0)
}

fn script_blocks(files: &[(String, String)], n: usize) -> Option<(&'static str, Value)> {
    let mut steps: Vec<(&'static str, Value)> = Vec::new();
    for (path, content) in files {
        let parent = Path::new(path).parent().unwrap().display().to_string();
        steps.push((
            "Bash",
            json!({"command": format!("mkdir -p {parent}"), "description": "make the folder"}),
        ));
        steps.push(("Write", json!({"file_path": path, "content": content})));
    }
    steps.push((
        "Bash",
        json!({"command": "printf 'CODINGBENCH_SUBMIT\\n' > /logs/agent/submit", "description": "submit"}),
    ));
    steps.into_iter().nth(n)
}

fn stream_reply(model: &str, n: usize, tool: Option<(&str, Value)>) -> String {
    let (i, cr, cw, o) = USAGE;
    let mut out = sse(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{n}_{}", tool.is_some()), "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": i, "output_tokens": 1, "cache_read_input_tokens": cr, "cache_creation_input_tokens": cw}}}),
    );
    let stop = match &tool {
        Some((name, input)) => {
            out += &sse(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": {}}}),
            );
            out += &sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            );
            "tool_use"
        }
        None => {
            out += &sse(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            out += &sse(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done: the implementation is written and submitted."}}),
            );
            "end_turn"
        }
    };
    out += &sse(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    out += &sse(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": o}}),
    );
    out += &sse("message_stop", json!({"type": "message_stop"}));
    out
}

impl MockApi {
    fn start(mode: Mode) -> MockApi {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let main_calls = Arc::new(Mutex::new(BTreeMap::new()));
        let requests = Arc::new(AtomicUsize::new(0));
        let (mc, rq) = (main_calls.clone(), requests.clone());
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let mode = mode.clone();
                let (mc, rq) = (mc.clone(), rq.clone());
                std::thread::spawn(move || serve(s, &mode, &mc, &rq));
            }
        });
        MockApi {
            port,
            main_calls,
            requests,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn calls(&self, model: &str) -> u64 {
        self.main_calls
            .lock()
            .unwrap()
            .get(model)
            .copied()
            .unwrap_or(0)
    }
}

fn serve(
    mut s: TcpStream,
    mode: &Mode,
    main_calls: &Mutex<BTreeMap<String, u64>>,
    requests: &AtomicUsize,
) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let Some((method, path, body)) = read_request(&mut s) else {
        return;
    };
    requests.fetch_add(1, Ordering::SeqCst);
    let path = path.split('?').next().unwrap_or("").to_owned();
    if method != "POST" {
        return respond(&mut s, 200, "application/json", b"{}");
    }
    if path.ends_with("/count_tokens") {
        return respond(&mut s, 200, "application/json", b"{\"input_tokens\": 42}");
    }
    if !path.ends_with("/v1/messages") {
        return respond(&mut s, 404, "application/json", b"{\"type\":\"error\",\"error\":{\"type\":\"not_found_error\",\"message\":\"no such path\"}}");
    }
    if let Mode::Status(code) = mode {
        let kind = match code {
            401 => "authentication_error",
            429 => "rate_limit_error",
            _ => "api_error",
        };
        let body =
            json!({"type": "error", "error": {"type": kind, "message": format!("mock {kind}")}})
                .to_string();
        return respond(&mut s, *code, "application/json", body.as_bytes());
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = req["model"].as_str().unwrap_or("").to_owned();
    let has_tools = req["tools"].as_array().is_some_and(|t| !t.is_empty());
    let n = step(&req);
    let tool = match mode {
        Mode::Solve(files) if has_tools => script_blocks(files, n),
        _ => None,
    };
    if req["stream"] != true {
        let (i, _, _, o) = USAGE;
        let msg = json!({"id": "msg_plain", "type": "message", "role": "assistant", "model": model, "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": i, "output_tokens": o}});
        return respond(&mut s, 200, "application/json", msg.to_string().as_bytes());
    }
    if has_tools {
        *main_calls.lock().unwrap().entry(model.clone()).or_default() += 1;
    }
    let out = stream_reply(&model, n, tool);
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n{out}"
    );
}

// ---------------------------------------------------------------------
// A scripted npm registry on 127.0.0.1, serving packed packages.

/// Where the packed Claude Code packages are (`npm pack` output):
/// `$CBRUN_TEST_NPM_PACKS`, else this folder. `.ci/run` fills it.
const NPM_PACKS_DEFAULT: &str = "/var/cache/cbrun-tests/npm";
const CLAUDE_VERSION: &str = "2.1.197";

fn npm_packs_dir() -> PathBuf {
    std::env::var_os("CBRUN_TEST_NPM_PACKS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(NPM_PACKS_DEFAULT))
}

/// The tarballs the pinned Claude Code installs from on this machine: the
/// package and its native binary for this platform.
fn claude_packs() -> Vec<PathBuf> {
    let arch = linux_arch();
    let dir = npm_packs_dir();
    [
        format!("anthropic-ai-claude-code-{CLAUDE_VERSION}.tgz"),
        format!("anthropic-ai-claude-code-linux-{arch}-{CLAUDE_VERSION}.tgz"),
    ]
    .into_iter()
    .map(|f| dir.join(f))
    .collect()
}

/// npm's name for this machine's architecture.
fn linux_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// One package version of the mock registry.
struct Pack {
    name: String,
    version: String,
    manifest: Value,
    file: PathBuf,
}

struct MockRegistry {
    port: u16,
    /// Every request path, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

impl MockRegistry {
    /// Serves a packument (one version) per tarball, built from its
    /// `package/package.json`, with the tarball's sha512 as its integrity
    /// (npm checks it, so bytes changed on the way fail the install).
    /// Every other package is 404, as npm's registry answers for a name
    /// it does not have (npm skips such optional platform packages).
    fn start(packs: &[PathBuf]) -> MockRegistry {
        use sha2::{Digest, Sha512};
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut by_name: BTreeMap<String, Pack> = BTreeMap::new();
        for f in packs {
            let mut manifest = None;
            let gz = flate2::read::GzDecoder::new(fs::File::open(f).unwrap());
            let mut ar = tar::Archive::new(gz);
            for e in ar.entries().unwrap() {
                let mut e = e.unwrap();
                if e.path().unwrap().as_os_str() == "package/package.json" {
                    let mut t = String::new();
                    e.read_to_string(&mut t).unwrap();
                    manifest = Some(serde_json::from_str::<Value>(&t).unwrap());
                    break;
                }
            }
            let mut manifest = manifest.expect("package/package.json in the tarball");
            let digest = Sha512::digest(fs::read(f).unwrap());
            let b64 = base64(&digest);
            let name = manifest["name"].as_str().unwrap().to_owned();
            let version = manifest["version"].as_str().unwrap().to_owned();
            // Where npm's registry keeps it: `/<name>/-/<leaf>-<version>.tgz`.
            let leaf = name.rsplit('/').next().unwrap();
            manifest["dist"] = json!({
                "tarball": format!("http://127.0.0.1:{port}/{name}/-/{leaf}-{version}.tgz"),
                "integrity": format!("sha512-{b64}"),
            });
            by_name.insert(
                name.clone(),
                Pack {
                    name,
                    version,
                    manifest,
                    file: f.clone(),
                },
            );
        }
        let by_name = Arc::new(by_name);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let rq = requests.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let (packs, rq) = (by_name.clone(), rq.clone());
                std::thread::spawn(move || serve_registry(s, &packs, &rq));
            }
        });
        MockRegistry { port, requests }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

fn serve_registry(mut s: TcpStream, packs: &BTreeMap<String, Pack>, requests: &Mutex<Vec<String>>) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let Some((_method, path, _)) = read_request(&mut s) else {
        return;
    };
    requests.lock().unwrap().push(path.clone());
    let path = path.split('?').next().unwrap_or("");
    // Scoped names come as `@scope%2fname` (or with a plain `/`).
    let name = path
        .trim_start_matches('/')
        .replace("%2f", "/")
        .replace("%2F", "/");
    if let Some((pkg, file)) = name.split_once("/-/") {
        let leaf = pkg.rsplit('/').next().unwrap_or("");
        let found = packs
            .get(pkg)
            .filter(|p| file == format!("{leaf}-{}.tgz", p.version));
        let Some(p) = found else {
            return respond(
                &mut s,
                404,
                "application/json",
                b"{\"error\":\"Not found\"}",
            );
        };
        let mut f = fs::File::open(&p.file).unwrap();
        let len = f.metadata().unwrap().len();
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n"
        );
        let _ = std::io::copy(&mut f, &mut s);
        return;
    }
    match packs.get(&name) {
        Some(p) => {
            let doc = json!({
                "name": p.name,
                "dist-tags": {"latest": p.version},
                "versions": {p.version.clone(): p.manifest},
            });
            respond(&mut s, 200, "application/json", doc.to_string().as_bytes())
        }
        None => respond(
            &mut s,
            404,
            "application/json",
            b"{\"error\":\"Not found\"}",
        ),
    }
}

fn assert_infra(t: &Trial, signal: &str, what: &str) {
    assert_eq!(t.status(), "not_submitted", "{what}\n{}", t.show());
    assert_eq!(
        t.record["failure_class"],
        "infrastructure",
        "{what}\n{}",
        t.show()
    );
    assert_eq!(t.record["run_valid"], false, "{what}\n{}", t.show());
    assert_eq!(
        t.record["invalid_reason"],
        format!("infra:{signal}"),
        "{what}\n{}",
        t.show()
    );
    let sigs = t.record["infra_signals"].as_array().unwrap();
    assert!(
        sigs.iter().any(|s| s["signal"] == signal),
        "{what}\n{}",
        t.show()
    );
    t.run.assert_code(1, what);
    let reason = fs::read_to_string(t.dir.join("logs/verifier/reward.json")).unwrap();
    assert!(reason.contains(&format!("infra:{signal}")), "{reason}");
}
// The tests, by topic; the helpers above are theirs.
mod api_failures;
mod cache;
mod claude;
mod errors;
