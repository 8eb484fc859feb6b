//! API failures, with a tiny scripted agent.

use super::*;

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
