//! `cbrun run` plans that give each configuration its own agent options
//! (`env`, `env_pass`, `ca_bundle`, over `[defaults]`), driven through the
//! real binary: each trial gets its own configuration's values and no
//! other's, a passed secret is never written to the run folder, bad
//! fields are one line naming the file and the field (exit 2), and a run
//! whose plan changed in these fields is refused.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::run::{cases, json, plan, records, results, run_args, spec, RUN_DEADLINE};

/// Two fake certificates (only the PEM framing is checked when a bundle
/// is loaded; nothing connects with them).
const PEM_A: &str = "-----BEGIN CERTIFICATE-----\ncGxhbkNBYWFh\n-----END CERTIFICATE-----\n";
const PEM_B: &str = "-----BEGIN CERTIFICATE-----\ncGxhbkNBYmJi\n-----END CERTIFICATE-----\n";

/// A spec agent that shows what it was given: its environment and the
/// CA bundle cbrun bound for it, written into /app, then submits.
fn show_agent(ctx: &Ctx) -> String {
    spec(
        ctx,
        "show",
        "command = 'env > /app/env.txt; cat /.cbrun-ca/ca-certificates.crt > /app/ca.txt 2>/dev/null; printf CODINGBENCH_SUBMIT > /logs/agent/submit'\n",
    )
}

fn write_plan(ctx: &Ctx, body: &str) -> PathBuf {
    let pf = ctx.dir.join("plan.toml");
    fs::write(&pf, format!("cases = [\"cases/case001\"]\n{body}")).unwrap();
    pf
}

/// The two-config plan: `a` and `b` differ in env, env_pass and
/// ca_bundle; `b` takes `env` from `[defaults]`.
fn two_configs(agent: &str, who_a: &str, pass_b: &str) -> String {
    format!(
        "[defaults]\nenv = {{ SHARED = \"from-defaults\" }}\n\
         [[config]]\nname = \"a\"\nagent = \"{agent}\"\nenv = {{ WHO = \"{who_a}\" }}\nenv_pass = [\"PLAN_SECRET_A\"]\nca_bundle = [\"ca-a.pem\"]\n\
         [[config]]\nname = \"b\"\nagent = \"{agent}\"\nenv_pass = [\"{pass_b}\"]\nca_bundle = [\"ca-b.pem\"]\n"
    )
}

fn env_of(out: &Path, config: &str) -> String {
    fs::read_to_string(out.join(format!("trials/case001/{config}/1/workspace/env.txt")))
        .unwrap_or_else(|e| panic!("{config}: env.txt: {e}"))
}

/// Every file under `dir` but the agents' own workspaces, whose bytes
/// hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                if e.file_name() != "workspace" {
                    todo.push(p);
                }
            } else if t.is_file() {
                let bytes = fs::read(&p).unwrap();
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    out.push(p);
                }
            }
        }
    }
    out
}

fn one_line_usage(run: &Run, what: &str) -> String {
    run.assert_code(2, what);
    let err = run.stderr.trim().to_owned();
    assert_eq!(err.lines().count(), 1, "{what}: {}", run.show());
    err
}

#[test]
fn each_config_gets_its_own_env_env_pass_and_ca_bundle_and_no_secret_is_written() {
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "run-plan-env");
        cases(&ctx, &["case001"]);
        let agent = show_agent(&ctx);
        fs::write(ctx.dir.join("ca-a.pem"), PEM_A).unwrap();
        fs::write(ctx.dir.join("ca-b.pem"), PEM_B).unwrap();
        let pf = write_plan(&ctx, &two_configs(&agent, "config-a", "PLAN_SECRET_B"));
        let secret_a = ctx.marker("secret-a");
        let secret_b = ctx.marker("secret-b");
        let out = ctx.out.join("run");
        let a = vec![
            "run".to_string(),
            "--plan".into(),
            pf.display().to_string(),
            "--out".into(),
            out.display().to_string(),
        ];
        let run = ctx
            .spawn_args(
                &a,
                &[("PLAN_SECRET_A", &secret_a), ("PLAN_SECRET_B", &secret_b)],
                None,
            )
            .wait(RUN_DEADLINE);
        run.assert_code(0, "a plan whose configs differ in agent options");

        let env_a = env_of(&out, "a");
        let env_b = env_of(&out, "b");
        let has = |env: &str, line: &str| env.lines().any(|l| l == line);
        // a: its own env (replacing the default's), its own secret only.
        assert!(has(&env_a, "WHO=config-a"), "{who:?} a: {env_a}");
        assert!(has(&env_a, &format!("PLAN_SECRET_A={secret_a}")), "{env_a}");
        assert!(
            !env_a.contains("SHARED=") && !env_a.contains(&secret_b),
            "{env_a}"
        );
        // b: the default's env, its own secret only.
        assert!(has(&env_b, "SHARED=from-defaults"), "{who:?} b: {env_b}");
        assert!(has(&env_b, &format!("PLAN_SECRET_B={secret_b}")), "{env_b}");
        assert!(
            !env_b.contains("WHO=") && !env_b.contains(&secret_a),
            "{env_b}"
        );
        // Each trusts its own CA, not the other's.
        for (config, mine, other) in [("a", PEM_A, PEM_B), ("b", PEM_B, PEM_A)] {
            let env = env_of(&out, config);
            assert!(
                has(&env, "SSL_CERT_FILE=/.cbrun-ca/ca-certificates.crt"),
                "{config}: {env}"
            );
            let ca =
                fs::read_to_string(out.join(format!("trials/case001/{config}/1/workspace/ca.txt")))
                    .unwrap();
            let body = |pem: &str| pem.lines().nth(1).unwrap().to_owned();
            assert!(ca.contains(&body(mine)), "{config}: {ca}");
            assert!(!ca.contains(&body(other)), "{config}: {ca}");
        }

        // plan.toml: env values, env_pass names, CA files pinned.
        let p = plan(&out);
        let (ca, cb) = (&p["config"][0], &p["config"][1]);
        assert_eq!(ca["env"]["WHO"].as_str(), Some("config-a"), "{p}");
        assert_eq!(cb["env"]["SHARED"].as_str(), Some("from-defaults"), "{p}");
        assert_eq!(ca["env_pass"][0].as_str(), Some("PLAN_SECRET_A"), "{p}");
        assert_eq!(cb["env_pass"][0].as_str(), Some("PLAN_SECRET_B"), "{p}");
        let pinned = ca["ca_bundle"][0]["source"].as_str().unwrap();
        assert!(pinned.ends_with("/ca-a.pem"), "{p}");
        assert_eq!(ca["ca_bundle"][0]["sha256"].as_str().unwrap().len(), 64);
        // Records carry names only; no secret anywhere the run wrote.
        for r in records(&out).values() {
            let keys: Vec<&str> = r["env_keys"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|k| k.as_str())
                .collect();
            let want = if r["config"] == "a" {
                "PLAN_SECRET_A"
            } else {
                "PLAN_SECRET_B"
            };
            assert!(keys.contains(&want), "{keys:?}");
        }
        assert_eq!(results(&out).len(), 2);
        // The scan reads what the run wrote: the names are found.
        assert!(files_holding(&out, "PLAN_SECRET_A").contains(&out.join("plan.toml")));
        for s in [&secret_a, &secret_b] {
            let found = files_holding(&out, s);
            assert!(found.is_empty(), "{who:?}: secret written to {found:?}");
        }
    }
}

#[test]
fn a_run_whose_agent_options_changed_is_refused_and_bad_fields_are_one_line() {
    let ctx = Ctx::new(Who::Root, "run-plan-change");
    let cs = cases(&ctx, &["case001"]);
    let agent = show_agent(&ctx);
    fs::write(ctx.dir.join("ca-a.pem"), PEM_A).unwrap();
    fs::write(ctx.dir.join("ca-b.pem"), PEM_B).unwrap();
    let pf = write_plan(&ctx, &two_configs(&agent, "config-a", "PLAN_SECRET_B"));
    let out = ctx.out.join("run");
    let o = out.display().to_string();
    let by_plan = ["run", "--plan", pf.to_str().unwrap(), "--out", &o];
    ctx.cbrun(&by_plan).assert_code(0, "the first run");
    let plan_bytes = fs::read(out.join("plan.toml")).unwrap();

    // Another env value, another env_pass: another plan, refused; the
    // message names the variable, never its value.
    for (what, body, want) in [
        (
            "another env value",
            two_configs(&agent, "the-new-value", "PLAN_SECRET_B"),
            "config a differs (env: WHO has another value)",
        ),
        (
            "another env_pass",
            two_configs(&agent, "config-a", "OTHER_SECRET"),
            "config b differs (env_pass:",
        ),
    ] {
        write_plan(&ctx, &body);
        let err = one_line_usage(&ctx.cbrun(&by_plan), what);
        assert!(
            err.contains("holds another plan") && err.contains(want),
            "{what}: {err}"
        );
        assert!(!err.contains("the-new-value"), "{err}");
        assert_eq!(fs::read(out.join("plan.toml")).unwrap(), plan_bytes);
    }
    write_plan(&ctx, &two_configs(&agent, "config-a", "PLAN_SECRET_B"));
    let again = ctx.cbrun(&by_plan);
    again.assert_code(0, "the same plan again");
    assert_eq!(results(&out).len(), 2, "{}", again.show());

    // A CA file whose certificates changed: resume refuses, and runs
    // again once it is back.
    fs::write(ctx.dir.join("ca-a.pem"), PEM_B).unwrap();
    let err = one_line_usage(&ctx.cbrun(&["run", "--resume", &o]), "resume, CA changed");
    assert!(
        err.contains(&format!("{o}/plan.toml: config a: ca_bundle[0]: "))
            && err.ends_with("its certificates changed since the plan was made"),
        "{err}"
    );
    fs::write(ctx.dir.join("ca-a.pem"), PEM_A).unwrap();
    ctx.cbrun(&["run", "--resume", &o])
        .assert_code(0, "resume, CA restored");

    // Bad fields: one line naming the file, the config and the field.
    let bad_out = ctx.out.join("bad").display().to_string();
    let pfs = pf.display().to_string();
    for (body, want) in [
        (
            format!(
                "[[config]]\nname = \"s\"\nagent = \"{agent}\"\nenv_pass = [\"OK\", \"NO-DASH\"]\n"
            ),
            "config s: env_pass[1]: \"NO-DASH\": not a variable name",
        ),
        (
            format!(
                "[[config]]\nname = \"s\"\nagent = \"{agent}\"\nca_bundle = [\"missing.pem\"]\n"
            ),
            "config s: ca_bundle[0]: ",
        ),
        (
            format!("[[config]]\nname = \"s\"\nagent = \"{agent}\"\nenv = {{ HOME = \"/x\" }}\n"),
            "config s: env.HOME: HOME:",
        ),
        (
            format!(
                "[defaults]\nenv_pas = [\"X\"]\n[[config]]\nname = \"s\"\nagent = \"{agent}\"\n"
            ),
            "unknown field `env_pas`",
        ),
    ] {
        write_plan(&ctx, &body);
        let run = ctx.cbrun(&["run", "--plan", &pfs, "--out", &bad_out]);
        let err = one_line_usage(&run, want);
        assert!(
            err.contains(&format!("error: {pfs}")) && err.contains(want),
            "want {want:?}: {err}"
        );
        assert!(!Path::new(&bad_out).exists(), "a bad plan made its folder");
    }

    // The flags form takes the same options run-wide.
    let flags_out = ctx.out.join("flags");
    let ca = ctx.dir.join("ca-b.pem").display().to_string();
    let a = run_args(
        &cs,
        &[&agent],
        &[
            "--env",
            "WHO=flags",
            "--env-pass",
            "PLAN_SECRET_A",
            "--ca-bundle",
            &ca,
            "--out",
            flags_out.to_str().unwrap(),
        ],
    );
    let secret = ctx.marker("flag-secret");
    ctx.spawn_args(&a, &[("PLAN_SECRET_A", &secret)], None)
        .wait(RUN_DEADLINE)
        .assert_code(0, "run-wide agent options as flags");
    let env = env_of(&flags_out, "show");
    assert!(env.lines().any(|l| l == "WHO=flags"), "{env}");
    assert!(
        env.lines().any(|l| l == format!("PLAN_SECRET_A={secret}")),
        "{env}"
    );
    assert!(files_holding(&flags_out, &secret).is_empty());
    let rec = json(&flags_out.join("trials/case001/show/1/trial.json"));
    assert_eq!(rec["pipeline_status"], "evaluated", "{rec:#}");
    let mut b = run_args(&cs, &[&agent], &["--out", &bad_out]);
    b.extend(["--env".to_string(), "NOEQUALS".to_string()]);
    let err = one_line_usage(&ctx.spawn_args(&b, &[], None).wait(RUN_DEADLINE), "--env");
    assert!(err.contains("--env NOEQUALS: expected K=V"), "{err}");
    let mut b = run_args(&cs, &[&agent], &["--out", &bad_out]);
    b.extend(["--env-pass".to_string(), "1X".to_string()]);
    let err = one_line_usage(
        &ctx.spawn_args(&b, &[], None).wait(RUN_DEADLINE),
        "bad name",
    );
    assert!(
        err.contains("env_pass[0]: \"1X\": not a variable name"),
        "{err}"
    );
}
