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

// ---------------------------------------------------------------------
// The real Claude Code.

/// Node and npm (what the shipped spec installs with) and the packed
/// pinned Claude Code; CI must have them, elsewhere the test is skipped.
fn require_claude() -> Option<Vec<PathBuf>> {
    let node = ["node", "npm"].iter().all(|t| {
        Command::new(t)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    });
    let packs = claude_packs();
    let missing: Vec<String> = packs
        .iter()
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    let why = if !node {
        "node and npm are not installed".to_owned()
    } else if !missing.is_empty() {
        format!(
            "the packed Claude Code is missing ({}); run: mkdir -p {dir} && cd {dir} && npm pack @anthropic-ai/claude-code@{CLAUDE_VERSION} @anthropic-ai/claude-code-linux-x64@{CLAUDE_VERSION}",
            missing.join(", "),
            dir = npm_packs_dir().display()
        )
    } else {
        return Some(packs);
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "a real Claude Code is required in CI: {why}"
    );
    eprintln!("skipping: {why}");
    None
}

/// cbrun's environment for a real-CLI trial: its data dir, and the CA
/// variables of this host (its network may re-sign TLS) to pass on.
fn real_env(home: &Path, registry: &MockRegistry) -> Vec<(String, String)> {
    let mut env = vec![
        ("CBRUN_HOME".to_owned(), home.display().to_string()),
        ("CBRUN_NPM_REGISTRY_URL".to_owned(), registry.url()),
    ];
    for k in ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR"] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.to_owned(), v));
        }
    }
    env
}

fn claude_trial(
    ctx: &Ctx,
    label: &str,
    c: &Path,
    api: &MockApi,
    registry: &MockRegistry,
    home: &Path,
    more: &[&str],
) -> Trial {
    let allow = format!("127.0.0.1:{}", api.port);
    let base = format!("ANTHROPIC_BASE_URL={}", api.url());
    let env = real_env(home, registry);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut args = more.to_vec();
    let model = format!("anthropic/{MODEL}");
    args.extend([
        "--model",
        &model,
        "--net",
        "allowlist",
        "--allow-registries",
        "--allow",
        &allow,
        "--env",
        &base,
        "--env",
        "ANTHROPIC_API_KEY=sk-mock-not-secret",
        "--solve-timeout",
        "600",
    ]);
    trial(ctx, label, c, "claude-code", &args, &env, REAL_DEADLINE)
}

/// `n`: the streamed main-loop calls the mock served during this trial.
fn assert_claude_solved(t: &Trial, api: &MockApi, n: u64, who: Who) {
    let what = format!("claude-code trial as {}", who.label());
    assert_eq!(t.status(), "completed", "{what}\n{}", t.show());
    assert_eq!(t.reward(), 1, "{what}\n{}", t.show());
    let r = &t.record;
    assert_eq!(
        r["cli_version"].as_str().map(|v| v.starts_with("2.1.197")),
        Some(true),
        "{}",
        t.show()
    );
    assert!(r["run_valid"].as_bool().unwrap(), "{}", t.show());
    // Usage: exactly what the mock reported, per streamed main-loop call.
    assert!(
        n >= 4,
        "the script has four steps ({n} calls)\n{}",
        t.show()
    );
    let (i, cr, cw, o) = USAGE;
    let by = &r["usage"]["by_model"][MODEL];
    assert_eq!(by["input"], json!(n * i), "{}", t.show());
    assert_eq!(by["cache_read"], json!(n * cr), "{}", t.show());
    assert_eq!(by["cache_write"], json!(n * cw), "{}", t.show());
    assert_eq!(by["output"], json!(n * o), "{}", t.show());
    assert_eq!(r["usage"]["format"], "claude-stream-json");
    assert_eq!(r["usage"]["complete"], true);
    let tu = &r["token_usage"];
    assert!(tu["input"].as_u64().unwrap() >= n * i, "{}", t.show());
    assert!(
        tu["reasoning"].is_null(),
        "Claude Code does not report reasoning"
    );
    // Cost by the built-in table (Sonnet 5.5: 2 / 0.10 / 2.5 / 10 per M),
    // when the main model is the only one with usage.
    if r["usage"]["by_model"].as_object().unwrap().len() == 1 {
        let want = (n as f64)
            * (i as f64 * 2.0 + cr as f64 * 0.1 + cw as f64 * 2.5 + o as f64 * 10.0)
            / 1e6;
        let got = r["cost_usd"]
            .as_f64()
            .unwrap_or_else(|| panic!("no cost\n{}", t.show()));
        assert!(
            (got - want).abs() < 1e-12,
            "cost {got} != {want}\n{}",
            t.show()
        );
    } else {
        assert!(r["cost_usd"].is_number() || !r["unpriced_models"].as_array().unwrap().is_empty());
    }
    assert_eq!(r["cost_source"], "pricing-table:2026-12-01", "{}", t.show());
    assert!(
        r["cli_cost_usd"].is_number(),
        "Claude Code's own estimate is kept\n{}",
        t.show()
    );
    // The transcript: listed, present, under the home, holding the session.
    let tr = r["transcripts"].as_array().unwrap();
    assert!(!tr.is_empty(), "{}", t.show());
    for p in tr {
        let p = p.as_str().unwrap();
        assert!(
            p.starts_with("home/.claude/projects/-app/") && p.ends_with(".jsonl"),
            "{p}"
        );
        let text = fs::read_to_string(t.dir.join(p)).unwrap();
        assert!(text.contains("tool_use"), "{p} holds the session");
    }
    assert_eq!(r["files"]["transcript"], tr[0]);
    // The network log: every forwarded connection to the mock, logged.
    let fwd: Vec<Value> = t
        .net_log()
        .into_iter()
        .filter(|l| l["method"] == "FORWARD" && l["port"] == api.port)
        .collect();
    assert!(
        fwd.len() as u64 >= n,
        "{} forwards for {n} calls\n{}",
        fwd.len(),
        t.show()
    );
    assert!(fwd
        .iter()
        .all(|l| l["decision"] == "allowed" && l["bytes_down"].as_u64().unwrap() > 0));
    let hosts = r["network"]["connections"]["hosts"].as_array().unwrap();
    assert!(
        hosts
            .iter()
            .any(|h| h["host"] == "127.0.0.1" && h["port"] == api.port),
        "{}",
        t.show()
    );
    assert!(r["env_keys"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == "ANTHROPIC_BASE_URL"));
    assert!(
        !serde_json::to_string(r)
            .unwrap()
            .contains("sk-mock-not-secret"),
        "values are never recorded"
    );
}

fn real_claude_code(who: Who) {
    let Some(packs) = require_claude() else {
        return;
    };
    let ctx = Ctx::new(who, "claude");
    let c = case(&ctx, "case001");
    let reference =
        fs::read_to_string(c.join("controls/reference/app/src/versionkit/__init__.py")).unwrap();
    let api = MockApi::start(Mode::Solve(vec![(
        "/app/src/versionkit/__init__.py".into(),
        reference,
    )]));
    let registry = MockRegistry::start(&packs);
    let home = data_home(&ctx, "cbrun-home");

    let first = claude_trial(&ctx, "first", &c, &api, &registry, &home, &[]);
    let n1 = api.calls(MODEL);
    assert_claude_solved(&first, &api, n1, who);
    assert_eq!(first.record["install_cached"], false, "{}", first.show());
    // The shipped install script fetched the pinned package and its
    // native binary through cbrun's registry index.
    let fetched = registry.requests.lock().unwrap().clone();
    for want in [
        format!("/claude-code/-/claude-code-{CLAUDE_VERSION}.tgz"),
        format!("/-/claude-code-linux-{}-{CLAUDE_VERSION}.tgz", linux_arch()),
    ] {
        assert!(
            fetched.iter().any(|p| p.ends_with(&want)),
            "{want} was not fetched: {fetched:?}\n{}",
            first.show()
        );
    }
    let npm_first = first
        .net_log()
        .iter()
        .filter(|l| l["index_path"].is_string())
        .count();
    assert!(
        npm_first > 0,
        "the first install went through the index\n{}",
        first.show()
    );

    let before = registry.count();
    let second = claude_trial(&ctx, "second", &c, &api, &registry, &home, &[]);
    let n2 = api.calls(MODEL) - n1;
    assert_claude_solved(&second, &api, n2, who);
    assert_eq!(second.record["install_cached"], true, "{}", second.show());
    assert_eq!(
        registry.count(),
        before,
        "the cached trial asked the registry: {:?}",
        &registry.requests.lock().unwrap()[before..]
    );
    let npm_second: Vec<Value> = second
        .net_log()
        .into_iter()
        .filter(|l| l["index_path"].is_string() || l["host"].as_str().unwrap_or("").contains("npm"))
        .collect();
    assert!(
        npm_second.is_empty(),
        "the cached trial downloaded: {npm_second:?}"
    );
    let log = fs::read_to_string(second.dir.join("logs/cbrun/install.log")).unwrap();
    assert!(log.starts_with("cbrun: install: cached"), "{log}");
    let (s1, s2) = (
        first.record["setup_seconds"].as_f64().unwrap(),
        second.record["setup_seconds"].as_f64().unwrap(),
    );
    println!(
        "claude-code as {}: setup (install, setup, version probe) first {s1:.2}s, second {s2:.2}s (cached); whole trial first {:.1}s, second {:.1}s",
        who.label(),
        first.run.elapsed.as_secs_f64(),
        second.run.elapsed.as_secs_f64(),
    );
    assert!(
        s2 * 3.0 < s1,
        "a cached start must be much shorter: {s1:.2}s then {s2:.2}s"
    );
    // The trial folder no longer holds the 200+ MB install.
    assert!(!second.dir.join("home/.cli/bin").exists());

    // The real CLI against an API that refuses its key, and one that
    // fails every call (retried once: CLAUDE_CODE_MAX_RETRIES): its own
    // error events make the trial the infrastructure's failure.
    for (code, signal, shown) in [
        (401, "auth", "auth"),
        (500, "retry_exhausted", "retry_exhausted"),
    ] {
        let failing = MockApi::start(Mode::Status(code));
        let t = claude_trial(
            &ctx,
            &format!("s{code}"),
            &c,
            &failing,
            &registry,
            &home,
            &["--env", "CLAUDE_CODE_MAX_RETRIES=1"],
        );
        let what = format!("real Claude Code, HTTP {code}");
        println!("{what}: {:.1}s", t.run.elapsed.as_secs_f64());
        assert_eq!(t.record["install_cached"], true, "{}", t.show());
        assert!(failing.requests.load(Ordering::SeqCst) >= 1, "{}", t.show());
        assert_infra(&t, signal, &what);
        assert!(
            t.record["infra_signals"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["signal"] == shown && s["source"] == "agent_log"),
            "Claude Code's own api_retry/result events\n{}",
            t.show()
        );
    }
    ctx.assert_clean("real claude-code trials");
}

#[test]
fn real_claude_code_solves_against_a_scripted_api_as_root() {
    real_claude_code(Who::Root);
}

#[test]
fn real_claude_code_solves_against_a_scripted_api_as_a_delegated_user() {
    real_claude_code(Who::Delegated);
}

// ---------------------------------------------------------------------
// API failures, with a tiny scripted agent.

/// A Python agent that asks the API once (three times on a 5xx) and never
/// submits; it prints what went wrong as a CLI would.
const PY_AGENT: &str = r#"
import json, os, sys, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"].rstrip("/")
req = urllib.request.Request(base + "/v1/messages", data=json.dumps({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}).encode(), headers={"content-type": "application/json", "x-api-key": "k"})
for attempt in range(1, 4):
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            print("API ok", r.status, r.read()[:200].decode())
        break
    except urllib.error.HTTPError as e:
        if e.code >= 500:
            # A server error is retried, then given up on in Codex's words.
            print(f"attempt {attempt}: server answered {e.code}, retrying")
            if attempt == 3:
                print(f"ERROR: exceeded retry limit, last status: {e.code} {e.reason}")
                sys.exit(1)
            continue
        print(f"API Error: {e.code} {e.read()[:300].decode()}")
        sys.exit(1)
    except Exception as e:
        print(f"API Error: {type(e).__name__}: {e}")
        sys.exit(1)
"#;

fn py_spec(ctx: &Ctx) -> PathBuf {
    let p = ctx.dir.join("agent.py");
    fs::write(&p, PY_AGENT).unwrap();
    let b64 = base64(PY_AGENT.as_bytes());
    spec(
        ctx,
        "pyagent",
        &format!("command = \"echo {b64} | base64 -d | python3 - 2>&1 | tee -a {{log_quoted}}\"\n"),
    )
}

fn py_trial(ctx: &Ctx, label: &str, c: &Path, agent: &Path, base_url: &str, allow: &str) -> Trial {
    trial(
        ctx,
        label,
        c,
        agent.to_str().unwrap(),
        &[
            "--net",
            "allowlist",
            "--allow",
            allow,
            "--env",
            &format!("ANTHROPIC_BASE_URL={base_url}"),
            "--solve-timeout",
            "120",
        ],
        &[],
        TRIAL_DEADLINE,
    )
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

#[test]
fn api_failures_are_infrastructure_and_a_working_api_is_not() {
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "apifail");
        let c = case(&ctx, "case001");
        let agent = py_spec(&ctx);

        // Connection refused: an allowed loopback port nobody listens on.
        let dead = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let t = py_trial(
            &ctx,
            "refused",
            &c,
            &agent,
            &format!("http://127.0.0.1:{dead}"),
            &format!("127.0.0.1:{dead}"),
        );
        assert_infra(&t, "connection", "connection refused");
        let fwd: Vec<Value> = t
            .net_log()
            .into_iter()
            .filter(|l| l["method"] == "FORWARD")
            .collect();
        assert!(
            fwd.iter()
                .any(|l| l["decision"] == "error" && l["port"] == dead),
            "the refused forward is logged\n{}",
            t.show()
        );
        assert!(
            t.record["infra_signals"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["source"] == "network_log"),
            "{}",
            t.show()
        );

        // 401 and 429 from the API.
        for (code, signal) in [(401, "auth"), (429, "rate_limit")] {
            let api = MockApi::start(Mode::Status(code));
            let t = py_trial(
                &ctx,
                &format!("s{code}"),
                &c,
                &agent,
                &api.url(),
                &format!("127.0.0.1:{}", api.port),
            );
            assert_infra(&t, signal, &format!("HTTP {code}"));
            assert!(
                api.requests.load(Ordering::SeqCst) >= 1,
                "the API was reached through the forward"
            );
        }

        // A server error on every attempt: the CLI gives up retrying.
        let api = MockApi::start(Mode::Status(500));
        let t = py_trial(
            &ctx,
            "s500",
            &c,
            &agent,
            &api.url(),
            &format!("127.0.0.1:{}", api.port),
        );
        assert_infra(&t, "retry_exhausted", "retries exhausted");
        assert_eq!(api.requests.load(Ordering::SeqCst), 3, "three attempts");

        // A model host whose name does not resolve (through the proxy).
        let t = py_trial(
            &ctx,
            "dns",
            &c,
            &agent,
            "http://api.cbrun-test.invalid:8080",
            "api.cbrun-test.invalid:8080",
        );
        assert_infra(&t, "dns", "unresolvable host");

        // The control: the API works, the agent just does not submit.
        let api = MockApi::start(Mode::Answer);
        let t = py_trial(
            &ctx,
            "ok",
            &c,
            &agent,
            &api.url(),
            &format!("127.0.0.1:{}", api.port),
        );
        assert_eq!(t.status(), "not_submitted", "{}", t.show());
        assert_eq!(t.record["failure_class"], "implementation", "{}", t.show());
        assert_eq!(t.record["run_valid"], true, "{}", t.show());
        assert!(
            t.record["infra_signals"].as_array().unwrap().is_empty(),
            "{}",
            t.show()
        );
        t.run.assert_code(0, "an evaluated trial");
        let log = fs::read_to_string(t.dir.join("logs/agent/agent.log")).unwrap();
        assert!(log.contains("API ok 200"), "{log}");
        ctx.assert_clean("API failure trials");
    }
}

// ---------------------------------------------------------------------
// The install cache, version pins.

/// An agent with a cacheable install: its install script writes a tool
/// into ~/.cli (and counts its runs outside the home, in the workspace of
/// nobody: a file next to the spec); the agent runs the tool, then tries
/// to change the cached install.
fn cache_spec(ctx: &Ctx) -> PathBuf {
    spec(
        ctx,
        "cached",
        r#"version = "1.2.3"
install_dir = ".cli"
install_script = "set -e; mkdir -p $HOME/.cli/bin; printf '#!/bin/sh\\necho tool-%s\\n' \"$CBRUN_AGENT_VERSION\" > $HOME/.cli/bin/tool; chmod 755 $HOME/.cli/bin/tool; echo installed"
command = "$HOME/.cli/bin/tool > /logs/agent/ran; (echo 'echo poisoned' > $HOME/.cli/bin/tool) 2>/logs/agent/poison.err; rm -rf $HOME/.cli/bin 2>>/logs/agent/poison.err; mkdir $HOME/.cli/evil 2>>/logs/agent/poison.err; ls $HOME/.cli/bin > /logs/agent/ls; true"
"#,
    )
}

#[test]
fn installs_are_cached_read_only_and_a_moving_version_is_not() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "cache");
        let c = case(&ctx, "case001");
        let home = data_home(&ctx, "cbrun-home");
        let home_s = home.display().to_string();
        let env = [("CBRUN_HOME", home_s.as_str())];
        let a = cache_spec(&ctx);
        let a = a.to_str().unwrap();

        let t1 = trial(&ctx, "t1", &c, a, &[], &env, TRIAL_DEADLINE);
        assert_eq!(t1.record["install_cached"], false, "{}", t1.show());
        assert_eq!(
            fs::read_to_string(t1.dir.join("logs/agent/ran")).unwrap(),
            "tool-1.2.3\n"
        );
        let t2 = trial(&ctx, "t2", &c, a, &[], &env, TRIAL_DEADLINE);
        assert_eq!(t2.record["install_cached"], true, "{}", t2.show());
        assert_eq!(
            fs::read_to_string(t2.dir.join("logs/agent/ran")).unwrap(),
            "tool-1.2.3\n"
        );
        assert!(!fs::read_to_string(t2.dir.join("logs/cbrun/install.log"))
            .unwrap()
            .contains("installed"));
        // Attack: both agents tried to rewrite, remove and add to the
        // cached install. Every write failed, and the cache is intact.
        for t in [&t1, &t2] {
            let err = fs::read_to_string(t.dir.join("logs/agent/poison.err")).unwrap();
            assert!(
                err.contains("Read-only file system"),
                "attack: the cached install was writable: {err}\n{}",
                t.show()
            );
            assert_eq!(
                fs::read_to_string(t.dir.join("logs/agent/ls")).unwrap(),
                "tool\n"
            );
        }
        let entries: Vec<PathBuf> = fs::read_dir(home.join("agents"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        let tool = fs::read_to_string(entries[0].join("tree/bin/tool")).unwrap();
        assert_eq!(
            tool, "#!/bin/sh\necho tool-1.2.3\n",
            "the cached install changed"
        );
        assert!(!entries[0].join("tree/evil").exists());
        // The cache belongs to cbrun's user, not to the sandbox's ids.
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            fs::metadata(entries[0].join("tree/bin/tool"))
                .unwrap()
                .uid(),
            who.uid()
        );

        // `latest` replaces the pin: warned about, installed afresh, not cached.
        let t3 = trial(
            &ctx,
            "t3",
            &c,
            a,
            &["--agent-version", "latest"],
            &env,
            TRIAL_DEADLINE,
        );
        assert_eq!(
            t3.run
                .stderr
                .matches("version pin 1.2.3 is overridden with `latest`")
                .count(),
            1,
            "warned once\n{}",
            t3.show()
        );
        assert!(t3.record["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("overridden")));
        assert!(t3.record["install_cached"].is_null(), "{}", t3.show());
        assert_eq!(
            fs::read_to_string(t3.dir.join("logs/agent/ran")).unwrap(),
            "tool-latest\n"
        );
        assert_eq!(fs::read_dir(home.join("agents")).unwrap().count(), 1);
        // --fresh-install neither reads nor fills the cache.
        let t4 = trial(
            &ctx,
            "t4",
            &c,
            a,
            &["--fresh-install"],
            &env,
            TRIAL_DEADLINE,
        );
        assert!(t4.record["install_cached"].is_null(), "{}", t4.show());
        assert!(fs::read_to_string(t4.dir.join("logs/cbrun/install.log"))
            .unwrap()
            .contains("installed"));
        ctx.assert_clean("cached installs");
    }
}

// ---------------------------------------------------------------------
// Errors and warnings.

#[test]
fn a_missing_model_is_refused_before_anything_is_written() {
    let ctx = Ctx::new(Who::Root, "nomodel");
    let c = case(&ctx, "case001");
    let out = ctx.out.join("t");
    let r = ctx.cbrun(&[
        "trial",
        c.to_str().unwrap(),
        "--agent",
        "claude-code",
        "--out",
        out.to_str().unwrap(),
    ]);
    r.assert_code(2, "a trial without --model");
    let line = r.stderr.trim();
    assert_eq!(line.lines().count(), 1, "{}", r.show());
    assert!(line.contains("give --model"), "{}", r.show());
    assert_eq!(
        line.matches("claude-code").count(),
        1,
        "the message says its subject once: {line}"
    );
    assert!(!out.exists(), "the trial folder was made");
    let r = ctx.cbrun(&[
        "solve",
        c.to_str().unwrap(),
        "--agent",
        "codex",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_ne!(r.code, Some(0), "{}", r.show());
    assert!(!out.exists());
    // A loopback entry on the proxy's own address is refused too.
    let r = ctx.cbrun(&[
        "trial",
        c.to_str().unwrap(),
        "--agent",
        "none",
        "--net",
        "allowlist",
        "--allow",
        "127.0.0.1:3128",
        "--out",
        out.to_str().unwrap(),
    ]);
    r.assert_code(2, "--allow on the proxy's address");
    assert!(r.stderr.contains("cbrun's proxy"), "{}", r.show());
    assert!(!out.exists());
}

#[test]
fn rootfs_dir_is_never_written() {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .expect("busybox-static must be installed (.ci/run installs it)");
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "rootfsro");
        let root = ctx.dir.join("rootfs");
        fs::create_dir_all(root.join("bin")).unwrap();
        fs::copy(busybox, root.join("bin/busybox")).unwrap();
        std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
        // Writable by the user cbrun runs as: only cbrun's restraint keeps
        // it unchanged (it has no /proc, /dev, /sys, /tmp, nor /data).
        for p in [&root, &root.join("bin")] {
            std::os::unix::fs::chown(p, Some(who.uid()), Some(who.uid())).unwrap();
        }
        let before = dir_names(&root);
        let data = ctx.out.join("data");
        fs::create_dir(&data).unwrap();
        // Writable by the sandbox's root, whatever host id that is.
        fs::set_permissions(&data, fs::Permissions::from_mode(0o777)).unwrap();
        let bind = format!("{}:/data", data.display());
        let r = ctx.run(
            &["--rootfs", root.to_str().unwrap(), "--bind", &bind],
            &["/bin/sh", "-c", "echo ok > /data/x; ls /proc/self >/dev/null && echo proc-ok; /bin/busybox touch /written 2>/dev/null && echo WROTE; true"],
        );
        r.assert_code(0, "a --rootfs DIR sandbox");
        assert!(
            r.stdout.contains("proc-ok") && !r.stdout.contains("WROTE"),
            "{}",
            r.show()
        );
        assert_eq!(fs::read_to_string(data.join("x")).unwrap(), "ok\n");
        assert_eq!(
            dir_names(&root),
            before,
            "attack: cbrun wrote mount points into --rootfs DIR"
        );
        ctx.assert_clean("--rootfs DIR");
    }
}

#[test]
fn env_flags_reach_the_agent_and_a_host_warning_prints_once() {
    // Undelegated: no cgroup, so every sandbox of the trial (install,
    // setup, agent, judge) reports the same unenforced limits.
    let ctx = Ctx::new(Who::Undelegated, "envwarn");
    let c = case(&ctx, "case001");
    let a = spec(
        &ctx,
        "envprobe",
        "install_script = \"true\"\nsetup_script = \"true\"\ncommand = \"printf '%s|%s|%s' \\\"$FROM_FLAG\\\" \\\"$CBRUN_IT_CANARY\\\" \\\"$NOT_SET_ANYWHERE\\\" > /logs/agent/env; printf 'CODINGBENCH_SUBMIT\\\\n' > /logs/agent/submit\"\n",
    );
    let t = trial(
        &ctx,
        "env",
        &c,
        a.to_str().unwrap(),
        &[
            "--env",
            "FROM_FLAG=flag-value",
            "--env-pass",
            CANARY_KEY,
            "--env-pass",
            "NOT_SET_ANYWHERE",
        ],
        &[],
        TRIAL_DEADLINE,
    );
    assert_eq!(
        fs::read_to_string(t.dir.join("logs/agent/env")).unwrap(),
        format!("flag-value|{CANARY_VALUE}|"),
        "{}",
        t.show()
    );
    let keys: Vec<&str> = t.record["env_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [CANARY_KEY, "FROM_FLAG"],
        "names of what was set, nothing unset"
    );
    let rec = serde_json::to_string(&t.record).unwrap();
    assert!(
        !rec.contains(CANARY_VALUE) && !rec.contains("flag-value"),
        "values are never recorded"
    );
    let lines: Vec<&str> = t
        .run
        .stderr
        .lines()
        .filter(|l| l.contains("limits not enforced"))
        .collect();
    assert!(!lines.is_empty(), "{}", t.show());
    let mut distinct = lines.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        lines.len(),
        distinct.len(),
        "a warning printed more than once: {lines:#?}"
    );
    let warnings: Vec<&str> = t.record["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    let mut d = warnings.clone();
    d.sort();
    d.dedup();
    assert_eq!(warnings.len(), d.len(), "{warnings:#?}");
    assert!(
        warnings.iter().any(|w| w.contains("limits not enforced")),
        "kept in the record: {warnings:#?}"
    );
    let bad = ctx.cbrun(&[
        "trial",
        c.to_str().unwrap(),
        "--agent",
        a.to_str().unwrap(),
        "--env",
        "1X=y",
    ]);
    bad.assert_code(2, "--env with a bad name");
    let bad = ctx.cbrun(&[
        "trial",
        c.to_str().unwrap(),
        "--agent",
        a.to_str().unwrap(),
        "--env",
        "HOME=/x",
    ]);
    bad.assert_code(2, "--env HOME");
    let bad = ctx.cbrun(&[
        "trial",
        c.to_str().unwrap(),
        "--agent",
        a.to_str().unwrap(),
        "--pricing",
        "/nonexistent/p.toml",
    ]);
    bad.assert_code(2, "--pricing missing");
    assert!(
        bad.stderr.contains("/nonexistent/p.toml: cannot read"),
        "{}",
        bad.show()
    );
}
