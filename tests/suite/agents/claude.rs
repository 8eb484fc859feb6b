//! The real Claude Code against a scripted API and npm registry.

use super::*;

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
