//! The install cache and version pins.

use super::*;

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
