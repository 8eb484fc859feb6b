//! JavaScript package managers: npm/npx, pnpm/pnpx, yarn, bun/bunx:
//! specs (scopes, `npm:` aliases, git and file sources, tarballs),
//! `init`/`create` packages, and a project's `package.json` dependencies.

/// The tool names this part handles.
pub const TOOLS: &[&str] = &[
    "npm", "npx", "pnpm", "pnpx", "yarn", "yarnpkg", "bun", "bunx",
];

/// Its part of the shim script.
pub(super) const SCRIPT: &str = include_str!("../scripts/pkgshim_js.sh");

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use std::fs;

    #[test]
    fn js_tools() {
        let e = env(BANS);
        e.blocked("npm", &["install", "@Scope/Pkg@1"], "@Scope/Pkg");
        e.blocked("npm", &["i", "-D", "semver@^7"], "semver");
        e.blocked("npm", &["add", "@evil/anything"], "@evil/anything");
        e.blocked("npm", &["install", "x@npm:semver@7"], "semver");
        e.blocked("npm", &["install", "npm/node-semver"], "node-semver");
        e.blocked(
            "npm",
            &["--prefix", "/tmp/p", "install", "./semver-7.5.4.tgz"],
            "semver",
        );
        e.blocked("npm", &["exec", "--", "semver", "1.2.3"], "semver");
        e.blocked("npx", &["-y", "semver", "1.2.3"], "semver");
        e.blocked("npx", &["-p", "semver", "cowsay"], "semver");
        e.blocked("npx", &["--package=semver", "cowsay"], "semver");
        e.blocked("pnpm", &["add", "semver"], "semver");
        e.blocked("pnpm", &["dlx", "semver"], "semver");
        e.blocked("yarn", &["add", "semver"], "semver");
        e.blocked("yarn", &["global", "add", "semver"], "semver");
        e.blocked("yarn", &["dlx", "-p", "semver", "x"], "semver");
        e.blocked("npm", &["init", "@evil/x"], "@evil/create-x");
        e.passed("npm", &["init", "@scope/pkg"]);
        // npx: arguments after the package belong to the command
        e.passed("npx", &["cowsay", "semver"]);
        e.passed("npm", &["run", "semver"]);
        e.passed("npm", &["uninstall", "semver"]);
        e.passed("npm", &["install", "left-pad", "--save-prefix", "~"]);
        fs::write(
            e.work.join("package.json"),
            r#"{"name": "x", "scripts": {"semver": "echo"}, "dependencies": {"left-pad": "^1"},
               "devDependencies": {"my-semver": "npm:semver@^7"}}"#,
        )
        .unwrap();
        e.blocked("npm", &["install"], "semver");
        e.blocked("npm", &["ci"], "semver");
        e.blocked("yarn", &[], "semver");
        e.blocked("pnpm", &["install"], "semver");
        e.passed("npm", &["install", "-g", "left-pad"]);
        fs::write(
            e.work.join("package.json"),
            r#"{"dependencies": {"@evil/x": "1"}}"#,
        )
        .unwrap();
        e.blocked("npm", &["install"], "@evil/x");
        fs::write(
            e.work.join("package.json"),
            r#"{"dependencies": {"left-pad": "1"}, "semver": {}}"#,
        )
        .unwrap();
        e.passed("npm", &["install"]);
        e.passed("yarn", &[]);
    }
}
