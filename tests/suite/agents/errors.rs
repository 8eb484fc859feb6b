//! Errors and warnings: a missing model, a read-only rootfs, env flags and a host warning printed once.

use super::*;

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
