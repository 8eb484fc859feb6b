//! Fixtures for the shim tests: a fake root with tools in their usual
//! layouts, and shims built over it whose pristine prefixes are symlinks.

use super::*;
pub(super) use std::os::unix::fs::symlink;
use std::process::{Command, Output};

pub(super) struct Tmp(pub(super) PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
pub(super) fn tmpdir(tag: &str) -> Tmp {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "cbrun-guard-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&p);
    fs::create_dir_all(&p).unwrap();
    Tmp(p)
}

/// A fake real tool: prints `REAL <name>` and then each argument on its
/// own line.
pub(super) fn fake_tool(path: &Path, name: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(
        path,
        format!("#!/bin/sh\n# {name}\nprintf 'REAL %s\\n' \"${{0##*/}}\"\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"),
    )
    .unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A fake root with the tools under their usual layouts.
pub(super) fn fake_root(root: &Path) {
    let b = root.join("usr/bin");
    fake_tool(&b.join("pip3"), "pip3");
    symlink("pip3", b.join("pip")).unwrap();
    fake_tool(&b.join("pip3.11"), "pip3.11");
    fake_tool(&root.join("usr/local/bin/uv"), "uv");
    fake_tool(&root.join("usr/local/bin/uvx"), "uvx");
    let npm = root.join("usr/lib/node_modules/npm");
    fake_tool(&npm.join("bin/npm-cli.js"), "npm");
    fake_tool(&npm.join("bin/npx-cli.js"), "npx");
    fs::write(npm.join("package.json"), "{}").unwrap();
    symlink("../lib/node_modules/npm/bin/npm-cli.js", b.join("npm")).unwrap();
    symlink("../lib/node_modules/npm/bin/npx-cli.js", b.join("npx")).unwrap();
    fake_tool(&b.join("pnpm"), "pnpm");
    fake_tool(&b.join("yarn"), "yarn");
    fake_tool(&root.join("opt/conda/bin/conda"), "conda");
    fake_tool(&root.join("usr/local/go/bin/go"), "go");
    fs::create_dir_all(root.join("usr/local/go/pkg/tool")).unwrap();
    symlink("/usr/local/go/bin/go", b.join("go")).unwrap();
    fake_tool(&b.join("cargo"), "cargo");
    fake_tool(&b.join("apt-get"), "apt-get");
    fake_tool(&b.join("pipx"), "pipx");
    fake_tool(&b.join("poetry"), "poetry");
    fs::write(b.join("not-a-tool"), "x").unwrap();
    fs::write(b.join("bun"), "not executable").unwrap();
    symlink("usr/bin", root.join("bin")).unwrap();
}

/// A fake root, its tools, and shims whose "pristine prefixes" are
/// symlinks to the fake root's directories (standing in for the binds).
pub(super) struct Env {
    pub(super) _tmp: Tmp,
    pub(super) shims: PathBuf,
    pub(super) work: PathBuf,
    pub(super) set: ShimSet,
    pub(super) tools: Vec<ToolLocation>,
    pub(super) shell: Vec<String>,
}

pub(super) fn env(bans: &[&str]) -> Env {
    let tmp = tmpdir("shim");
    let root = tmp.0.join("root");
    fake_root(&root);
    let tools = find_real_tools(&root, DEFAULT_SEARCH_DIRS);
    let real = tmp.0.join("realmnt");
    let bans: Vec<String> = bans.iter().map(|s| s.to_string()).collect();
    let set = build_shims_at("pip", &bans, &tools, &real);
    fs::create_dir_all(&real).unwrap();
    for (host, dst) in &set.real_dirs {
        symlink(host, dst).unwrap();
    }
    let guard = tmp.0.join("guard");
    set.write(&guard).unwrap();
    let work = tmp.0.join("work");
    fs::create_dir_all(&work).unwrap();
    Env {
        shims: guard.join(SHIM_SUBDIR),
        work,
        set,
        tools,
        shell: vec!["/bin/sh".into()],
        _tmp: tmp,
    }
}

impl Env {
    /// Runs the shim as `tool` would be run: through a link named `tool`
    /// (the shim picks its behaviour from `$0`).
    pub(super) fn run(&self, tool: &str, args: &[&str]) -> Output {
        let t = self
            .tools
            .iter()
            .find(|t| t.tool == tool)
            .unwrap_or_else(|| panic!("no tool {tool}"));
        let (file, _) = self
            .set
            .targets
            .iter()
            .find(|(_, d)| *d == t.target)
            .unwrap();
        let bin = self.work.parent().unwrap().join("callbin");
        fs::create_dir_all(&bin).unwrap();
        let link = bin.join(tool);
        if !link.exists() {
            symlink(self.shims.join(file), &link).unwrap();
        }
        let mut shell = self.shell.iter();
        Command::new(shell.next().unwrap())
            .args(shell)
            .arg(&link)
            .args(args)
            .current_dir(&self.work)
            .env_remove("PIP_REQUIREMENT")
            .output()
            .unwrap()
    }
    pub(super) fn blocked(&self, tool: &str, args: &[&str], name: &str) {
        let o = self.run(tool, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{tool} {args:?} not blocked: {err}"
        );
        assert_eq!(
            err,
            format!("[cbrun denylist] blocked install of {name}\n"),
            "{tool} {args:?}"
        );
        assert!(o.stdout.is_empty(), "{tool} {args:?} reached the real tool");
    }
    pub(super) fn passed(&self, tool: &str, args: &[&str]) -> String {
        let o = self.run(tool, args);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{tool} {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut lines = out.lines();
        assert!(lines.next().unwrap_or("").starts_with("REAL "), "{out}");
        let got: Vec<&str> = lines.collect();
        assert_eq!(got, args, "{tool}: arguments changed");
        out
    }
}

pub(super) const BANS: &[&str] = &[
    "semver",
    "semantic-version",
    "node-semver",
    "@scope/pkg",
    "@evil/*",
];
