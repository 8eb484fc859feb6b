//! Identities and id mapping; stdio files and the outcome.

use super::*;

// ------------------------------------------------------------ identities

fn identities(who: Who) {
    let ctx = Ctx::new(who, "identities");
    let r = ctx.run(&["--user", "1000:1000"], &["sh", "-c", "id -u; id -g"]);
    r.assert_code(0, "--user 1000:1000");
    assert_eq!(
        r.stdout.split_whitespace().collect::<Vec<_>>(),
        ["1000", "1000"],
        "--user 1000:1000 inside\n{}",
        r.show()
    );
    let r = ctx.run(&[], &["id", "-u"]);
    assert_eq!(
        r.stdout.trim(),
        "0",
        "default identity inside is 0\n{}",
        r.show()
    );

    // From the host, the sandbox's processes are never host root.
    let base = who.sandbox_host_uids().start;
    for (opts, inside) in [(&[][..], 0u32), (&["--user", "1000:1000"][..], 1000)] {
        let (p, _) = observe_sleeper(&ctx, opts);
        assert!(
            p.uids.iter().all(|u| *u != 0),
            "attack: a sandbox process runs as host uid 0: {:?}",
            p.uids
        );
        assert!(
            p.gids.iter().all(|g| *g != 0),
            "attack: a sandbox process runs as host gid 0: {:?}",
            p.gids
        );
        let want = if who == Who::Root {
            base + inside
        } else {
            base
        };
        assert_eq!(
            p.uids,
            vec![want; 4],
            "host uid of the sandbox's process ({}, inside uid {inside})",
            who.label()
        );
        if who == Who::Root {
            assert!((ROOT_RANGE_START..ROOT_RANGE_START + ROOT_RANGE_LEN).contains(&p.uids[0]));
        }
    }
    ctx.assert_clean("identity runs");
}

/// Run `sleep` in a sandbox, read its process from the host, then stop the
/// run with SIGINT.
fn observe_sleeper(ctx: &Ctx, opts: &[&str]) -> (Proc, common::Run) {
    let m = ctx.sleep_marker();
    let mut all = opts.to_vec();
    all.extend_from_slice(&["--kill-grace", "1"]);
    let running = ctx.spawn(&all, &["sleep", &m]);
    let mut p = None;
    wait_until(Duration::from_secs(15), || {
        p = live_procs_with_arg(&m).into_iter().next();
        p.is_some()
    });
    let p = p.expect("the sandbox's sleeper never appeared on the host");
    running.signal("INT");
    let r = running.wait(Duration::from_secs(20));
    r.assert_code(130, "SIGINT to cbrun");
    (p, r)
}

/// The outcome's id_mapping says which host ids the sandbox really has.
fn id_mapping_is_truthful(who: Who) {
    let ctx = Ctx::new(who, "id-mapping");
    let (p, r) = observe_sleeper(&ctx, &[]);
    let idm = &r.outcome()["isolation"]["id_mapping"];
    let inside = idm["uid"].as_u64().unwrap_or(u64::MAX);
    let host = map_entries(&idm["uid_map"])
        .into_iter()
        .find(|(i, _, l)| inside >= *i && inside < i + l)
        .map(|(i, h, _)| h + (inside - i));
    assert_eq!(
        host,
        Some(u64::from(p.uids[0])),
        "outcome id_mapping {idm} says inside uid {inside} is host uid {host:?}, but the sandbox's process runs as host uid {} ({})",
        p.uids[0],
        who.label()
    );
    ctx.assert_clean("id mapping");
}

#[test]
fn id_mapping_is_truthful_root() {
    id_mapping_is_truthful(Who::Root);
}

#[test]
fn id_mapping_is_truthful_delegated_user() {
    id_mapping_is_truthful(Who::Delegated);
}

#[test]
fn id_mapping_is_truthful_undelegated_user() {
    id_mapping_is_truthful(Who::Undelegated);
}

#[test]
fn identities_root() {
    identities(Who::Root);
}

#[test]
fn identities_delegated_user() {
    identities(Who::Delegated);
}

#[test]
fn identities_undelegated_user() {
    identities(Who::Undelegated);
}

// ----------------------------------------------- stdio files and outcome

fn has_keys(v: &Value, keys: &[&str], what: &str) {
    for k in keys {
        assert!(v.get(k).is_some(), "outcome: {what} lacks {k:?}: {v}");
    }
}

fn stdio_and_outcome(who: Who) {
    let ctx = Ctx::new(who, "stdio-outcome");
    let m = ctx.marker("stdio");
    let out = ctx.out_file("stdout.txt");
    let err = ctx.out_file("stderr.txt");
    let (out_s, err_s) = (out.display().to_string(), err.display().to_string());
    let script = format!("echo out-{m}; echo err-{m} >&2; exit 3");
    let r = ctx.run(
        &["--stdout", &out_s, "--stderr", &err_s],
        &["sh", "-c", &script],
    );
    r.assert_code(3, "--stdout/--stderr run");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap_or_default(),
        format!("out-{m}\n"),
        "--stdout file"
    );
    assert_eq!(
        std::fs::read_to_string(&err).unwrap_or_default(),
        format!("err-{m}\n"),
        "--stderr file"
    );
    assert!(
        !r.stdout.contains(&m) && !r.stderr.contains(&m),
        "output went to cbrun's own streams too\n{}",
        r.show()
    );

    let o = r.outcome();
    has_keys(
        o,
        &[
            "id",
            "command",
            "exit_code",
            "signal",
            "timed_out",
            "interrupted",
            "oom_killed",
            "pids_limit_hit",
            "wall_ms",
            "setup_ms",
            "peak_memory_bytes",
            "isolation",
            "limits",
            "warnings",
            "cbrun_exit",
        ],
        "top level",
    );
    let iso = &o["isolation"];
    has_keys(
        iso,
        &[
            "namespaces",
            "network",
            "loopback_up",
            "rootfs",
            "root_readonly",
            "seccomp",
            "seccomp_rules",
            "capabilities",
            "no_new_privs",
            "id_mapping",
            "dies_with_cbrun",
        ],
        "isolation",
    );
    has_keys(
        &iso["id_mapping"],
        &["kind", "uid_map", "gid_map", "uid", "gid"],
        "isolation.id_mapping",
    );
    let lim = &o["limits"];
    has_keys(
        lim,
        &[
            "cgroup", "memory", "pids", "cpus", "nofile", "nproc", "core",
        ],
        "limits",
    );
    for l in ["memory", "pids", "cpus"] {
        has_keys(&lim[l], &["requested", "enforced", "via", "note"], l);
    }

    assert!(o["id"].as_str().map(|s| !s.is_empty()).unwrap_or(false));
    assert_eq!(o["command"], json!(["sh", "-c", script]));
    assert_eq!(o["exit_code"], 3);
    assert_eq!(o["cbrun_exit"], 3);
    assert_eq!(o["signal"], json!(null));
    for f in ["timed_out", "interrupted", "oom_killed", "pids_limit_hit"] {
        assert_eq!(o[f], false, "{f}");
    }
    let (wall, setup) = (
        o["wall_ms"].as_u64().unwrap(),
        o["setup_ms"].as_u64().unwrap(),
    );
    assert!(
        setup <= wall && wall <= r.elapsed.as_millis() as u64 + 50,
        "wall_ms {wall}, setup_ms {setup}, observed {:?}",
        r.elapsed
    );
    let ns: Vec<&str> = iso["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for n in ["user", "mount", "pid", "ipc", "uts", "cgroup", "net"] {
        assert!(ns.contains(&n), "isolation.namespaces lacks {n}: {ns:?}");
    }
    assert_eq!(iso["network"], "none");
    assert_eq!(iso["loopback_up"], true);
    assert_eq!(iso["rootfs"], "host");
    assert_eq!(iso["root_readonly"], true);
    assert_eq!(iso["seccomp"], "default");
    assert_eq!(iso["no_new_privs"], true);
    assert_eq!(iso["dies_with_cbrun"], true);
    let idm = &iso["id_mapping"];
    assert_eq!(
        (idm["uid"].clone(), idm["gid"].clone()),
        (json!(0), json!(0))
    );
    if who == Who::Root {
        assert_eq!(idm["kind"], "root-range");
        assert_eq!(
            idm["uid_map"],
            json!([[0, ROOT_RANGE_START, ROOT_RANGE_LEN]])
        );
        assert_eq!(
            idm["gid_map"],
            json!([[0, ROOT_RANGE_START, ROOT_RANGE_LEN]])
        );
    }
    assert_eq!(
        (
            lim["nofile"].clone(),
            lim["nproc"].clone(),
            lim["core"].clone()
        ),
        (json!(4096), json!(4096), json!(0))
    );
    assert_eq!(lim["memory"]["requested"], json!(null));
    assert_eq!(
        o["warnings"],
        json!([]),
        "no warnings expected for a plain run"
    );
    assert_eq!(
        lim["cgroup"].is_string(),
        who.has_cgroup(),
        "limits.cgroup: {lim}"
    );

    // The rlimits the outcome reports are the ones inside.
    let rl =
        "import resource as r; print(*(r.getrlimit(x)[0] for x in (r.RLIMIT_NOFILE, r.RLIMIT_NPROC, r.RLIMIT_CORE)))";
    let r = ctx.run(&["--nofile", "100", "--nproc", "50"], &[PY, "-c", rl]);
    r.assert_code(0, "ulimit inside");
    assert_eq!(
        r.stdout.split_whitespace().collect::<Vec<_>>(),
        ["100", "50", "0"],
        "rlimits inside\n{}",
        r.show()
    );
    assert_eq!(
        (
            r.outcome()["limits"]["nofile"].clone(),
            r.outcome()["limits"]["nproc"].clone()
        ),
        (json!(100), json!(50))
    );
    ctx.assert_clean("stdio and outcome");
}

fn map_entries(v: &Value) -> Vec<(u64, u64, u64)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| Some((e[0].as_u64()?, e[1].as_u64()?, e[2].as_u64()?)))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn stdio_files_and_outcome_root() {
    stdio_and_outcome(Who::Root);
}

#[test]
fn stdio_files_and_outcome_delegated_user() {
    stdio_and_outcome(Who::Delegated);
}

#[test]
fn stdio_files_and_outcome_undelegated_user() {
    stdio_and_outcome(Who::Undelegated);
}
