//! Node judge hook: a CommonJS preload wrapping `Module._load`, plus ESM
//! resolve hooks registered with `module.register` on Node >= 20.6 (older
//! Node checks `require` only). What it refuses is described in
//! `scripts/judge_require_hook.js`. Runtime bans (`judge_bans`) are not
//! enforced for Node: there is no audit-hook equivalent; the sandbox's own
//! isolation (no network, read-only root) is what applies there.

use super::{ShimFile, GUARD_MOUNT, WORKSPACE};

pub const REQUIRE_HOOK: &str = include_str!("scripts/judge_require_hook.js");
pub const ESM_HOOKS: &str = include_str!("scripts/judge_esm_hooks.mjs");
pub const JUDGE_NODE_SUBDIR: &str = "judge-node";

/// `judge-node/ban.js` and `judge-node/esm-hooks.mjs`, relative to the guard
/// dir (the preload finds the ESM hooks next to itself).
pub fn judge_node_files() -> Vec<ShimFile> {
    vec![
        ShimFile {
            name: format!("{JUDGE_NODE_SUBDIR}/ban.js"),
            contents: REQUIRE_HOOK.to_string(),
            mode: 0o644,
        },
        ShimFile {
            name: format!("{JUDGE_NODE_SUBDIR}/esm-hooks.mjs"),
            contents: ESM_HOOKS.to_string(),
            mode: 0o644,
        },
    ]
}

/// Environment for the judge's Node. `CBRUN_WORKSPACE` and
/// `CBRUN_IMPORT_BAN` are the same variables (and values) the Python hook
/// reads.
pub fn judge_node_env(import_ban: &[String]) -> Vec<(String, String)> {
    judge_node_env_at(GUARD_MOUNT, WORKSPACE, import_ban)
}

pub(crate) fn judge_node_env_at(
    mount: &str,
    workspace: &str,
    import_ban: &[String],
) -> Vec<(String, String)> {
    let bans: Vec<&str> = import_ban
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    vec![
        (
            "NODE_OPTIONS".into(),
            format!("--require {mount}/{JUDGE_NODE_SUBDIR}/ban.js"),
        ),
        ("CBRUN_WORKSPACE".into(), workspace.into()),
        ("CBRUN_IMPORT_BAN".into(), bans.join(",")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn require_and_import_bans() {
        let version = Command::new("node").arg("--version").output();
        let Ok(version) = version.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        else {
            crate::testing::missing("node (the Node hook test)");
            return;
        };
        let t: PathBuf =
            std::env::temp_dir().join(format!("cbrun-nodehook-{}", std::process::id()));
        let _ = fs::remove_dir_all(&t);
        let guard = t.join("guard");
        for f in judge_node_files() {
            write(&guard.join(&f.name), &f.contents);
        }
        let app = t.join("app");
        let nm = app.join("node_modules");
        write(
            &nm.join("semver/package.json"),
            r#"{"name":"semver","main":"index.js"}"#,
        );
        write(&nm.join("semver/index.js"), "module.exports = {v: 1};\n");
        write(
            &nm.join("semver/functions/parse.js"),
            "module.exports = 1;\n",
        );
        write(
            &nm.join("@evil/x/package.json"),
            r#"{"name":"@evil/x","main":"i.js"}"#,
        );
        write(&nm.join("@evil/x/i.js"), "module.exports = 2;\n");
        write(
            &nm.join("lib/package.json"),
            r#"{"name":"lib","main":"i.js"}"#,
        );
        write(
            &nm.join("lib/i.js"),
            "module.exports = require('semver').v;\n",
        );
        write(
            &app.join("a.js"),
            "require('semver'); console.log('loaded');\n",
        );
        write(&app.join("b.js"), "require('semver/functions/parse');\n");
        write(
            &app.join("c.js"),
            "require('./node_modules/semver/index.js');\n",
        );
        write(&app.join("d.js"), "require('@evil/x');\n");
        write(
            &app.join("e.js"),
            "try { require('semver') } catch (e) { console.log('fallback', e.code) }\n",
        );
        write(
            &app.join("f.js"),
            "console.log('lib says', require('lib'));\n",
        );
        write(&app.join("g.mjs"), "import s from 'semver';\n");
        write(
            &t.join("tests/t.js"),
            &format!(
                "console.log('tests', require({:?}).v);\n",
                nm.join("semver").display()
            ),
        );
        let bans = vec!["semver".to_string(), "@evil/*".to_string()];
        let env = judge_node_env_at(&guard.to_string_lossy(), &app.to_string_lossy(), &bans);
        let run = |script: &Path| -> Output {
            let mut c = Command::new("node");
            c.arg(script)
                .current_dir(&app)
                .envs(env.iter().map(|(k, v)| (k, v)));
            c.output().unwrap()
        };
        for f in ["a.js", "b.js", "c.js", "d.js"] {
            let o = run(&app.join(f));
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{f} loaded");
            assert!(e.contains("[cbrun judge-ban] import: "), "{f}: {e}");
            assert!(e.contains("cbrun: import of banned module"), "{f}: {e}");
        }
        let out = |f: &Path| {
            let o = run(f);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        assert_eq!(out(&app.join("e.js")), "fallback MODULE_NOT_FOUND\n");
        // A library under the workspace's node_modules is the agent's code.
        let o = run(&app.join("f.js"));
        assert!(!o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("[cbrun judge-ban] import: semver from ")
        );
        assert_eq!(out(&t.join("tests/t.js")), "tests 1\n");
        let esm_ok = version
            .trim_start_matches('v')
            .split('.')
            .map(|x| x.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>();
        if esm_ok.as_slice() >= [20, 6].as_slice() {
            let o = run(&app.join("g.mjs"));
            assert!(!o.status.success());
            assert!(String::from_utf8_lossy(&o.stderr).contains("[cbrun judge-ban] import: semver"));
        } else {
            // CI's node is NodeSource's 20.x, which has module.register.
            crate::testing::missing(&format!(
                "node >= 20.6 (module.register, for the ESM check; this is {version})"
            ));
        }
        let _ = fs::remove_dir_all(&t);
    }
}
