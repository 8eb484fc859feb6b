//! Package-manager shims for the solve sandbox.
//!
//! Each shim is a POSIX `sh` script generated from `scripts/pkgshim.sh` and
//! one part per ecosystem ([`python`], [`conda`], [`js`], [`system`], each
//! with its `scripts/pkgshim_<ecosystem>.sh`). It is
//! bound read-only over the real tool's *resolved* file (a bind mount follows
//! symlinks in its destination, so binding "over /usr/bin/npm" lands on
//! `npm-cli.js` anyway; saying so explicitly avoids surprises). The shim
//! checks the names the command would install against sha256 hashes of the
//! normalised bans and then `exec`s the real tool from a pristine copy of the
//! tool's *prefix* directory bound under `/.cbrun/real/p<N>`:
//!
//! - a tool in `X/bin/` has prefix `X` (`/usr/bin/pip3` → `/usr`,
//!   `/opt/conda/bin/mamba` → `/opt/conda`, `/usr/local/go/bin/go` →
//!   `/usr/local/go`), so `$ORIGIN/../lib` rpaths, Go's GOROOT detection and
//!   relative shebangs keep working;
//! - a Node script (`#!…node`) has the package root as prefix (the nearest
//!   ancestor holding `package.json`: `/usr/lib/node_modules/npm`), so
//!   `npm-cli.js` runs with `__dirname` inside a full copy of its package and
//!   its relative `require`s resolve. It is exec'd directly (its shebang
//!   picks `node`), not through a single-file bind;
//! - anything else has its own directory as prefix.
//!
//! The shim decides which tool it is from `$0` (the path the caller used,
//! then its base name), so one file serves every name that resolves to it;
//! a same-directory relative symlink (`bunx -> bun`, `pip -> pip3`) is
//! exec'd by its own name in the pristine copy, keeping `argv[0]` dispatch.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

pub mod conda;
pub mod js;
pub mod python;
pub mod system;
#[cfg(test)]
mod testkit;

use super::names::{hashed_bans, Family};
use super::{ShimFile, GUARD_MOUNT};

/// The shared part of the script: names, files, the option walker, main.
const CORE: &str = include_str!("../scripts/pkgshim.sh");

/// Tool names the shims know how to read, by ecosystem, besides
/// `pip<version>`.
pub const KNOWN_TOOLS: [&[&str]; 4] = [python::TOOLS, conda::TOOLS, js::TOOLS, system::TOOLS];

/// The whole shim script, before the per-shim substitutions.
fn template() -> String {
    CORE.replace(
        "@@CBRUN_ECOSYSTEMS@@",
        &[python::SCRIPT, conda::SCRIPT, js::SCRIPT, system::SCRIPT].join("\n"),
    )
}

/// Where tools are looked for by default (inside the sandbox).
pub const DEFAULT_SEARCH_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
    "/opt/conda/bin",
    "/opt/conda/condabin",
    "/opt/venv/bin",
    "/usr/local/go/bin",
    "/usr/lib/go/bin",
    "/usr/local/cargo/bin",
];

/// Subdirectory of the guard dir (and of `/.cbrun`) holding the shim files.
pub const SHIM_SUBDIR: &str = "shims";
/// Subdirectory of `/.cbrun` where pristine tool prefixes are bound.
pub const REAL_SUBDIR: &str = "real";

/// Shim scripts plus where they and the real tools go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimSet {
    /// Written into `<guard dir>/shims/` (bound at `/.cbrun/shims`).
    pub files: Vec<ShimFile>,
    /// `(shim file name, sandbox path it is bound over)`.
    pub targets: Vec<(String, PathBuf)>,
    /// `(host dir, sandbox mount point)` of each pristine tool prefix.
    pub real_dirs: Vec<(PathBuf, PathBuf)>,
}

/// One package-manager executable found in the sandbox's root filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLocation {
    /// The name it is invoked by, e.g. `pip3`.
    pub tool: String,
    /// Where it was found inside the sandbox, e.g. `/usr/bin/pip3` (may be a
    /// symlink).
    pub path: PathBuf,
    /// `path` with every symlink resolved, inside the sandbox: the file the
    /// shim is bound over.
    pub target: PathBuf,
    /// Host path of `target`.
    pub host_target: PathBuf,
    /// Sandbox directory whose pristine copy the shim execs from.
    pub prefix: PathBuf,
    /// Host path of `prefix` (the bind source).
    pub host_prefix: PathBuf,
    /// What to exec, relative to `prefix`.
    pub exec_rel: PathBuf,
    /// For `go`: the GOROOT to default to (the tool's own tree).
    pub goroot: Option<PathBuf>,
}

/// Whether `name` is a tool the shims handle.
pub fn is_tool_name(name: &str) -> bool {
    KNOWN_TOOLS.iter().any(|tools| tools.contains(&name)) || python::is_versioned_pip(name)
}

fn host_path(root: &Path, sandbox: &Path) -> PathBuf {
    root.join(sandbox.strip_prefix("/").unwrap_or(sandbox))
}

/// Resolves `path` (absolute, inside the sandbox) against the root at host
/// path `root`, following symlinks as the sandbox would see them: absolute
/// targets are relative to `root`, `..` never climbs above it. `None` when a
/// component is missing or there are more than 40 links.
pub fn resolve_in_root(root: &Path, path: &Path) -> Option<PathBuf> {
    let mut todo: Vec<PathBuf> = Vec::new(); // components, reversed
    push_components(&mut todo, path);
    let mut cur = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = todo.pop() {
        if c.as_os_str() == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&c);
        let meta = fs::symlink_metadata(host_path(root, &next)).ok()?;
        if meta.file_type().is_symlink() {
            links += 1;
            if links > 40 {
                return None;
            }
            let target = fs::read_link(host_path(root, &next)).ok()?;
            if target.is_absolute() {
                cur = PathBuf::from("/");
            }
            push_components(&mut todo, &target);
        } else {
            cur = next;
        }
    }
    Some(cur)
}

fn push_components(todo: &mut Vec<PathBuf>, p: &Path) {
    let mut v: Vec<PathBuf> = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => v.push(PathBuf::from(n)),
            Component::ParentDir => v.push(PathBuf::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    todo.extend(v.into_iter().rev());
}

/// Whether `path` reaches its final file through relative symlinks that
/// never leave its directory (so the same name works in a pristine copy).
fn same_dir_chain(root: &Path, path: &Path) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    let mut cur = path.to_path_buf();
    for _ in 0..40 {
        let host = host_path(root, &cur);
        match fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                let Ok(t) = fs::read_link(&host) else {
                    return false;
                };
                let t = t.to_string_lossy().into_owned();
                if t.contains('/') || t == ".." || t == "." {
                    return false;
                }
                cur = dir.join(t);
            }
            Ok(_) => return true,
            Err(_) => return false,
        }
    }
    false
}

fn is_node_script(host_file: &Path) -> bool {
    let Ok(bytes) = fs::read(host_file).map(|b| b.into_iter().take(256).collect::<Vec<u8>>())
    else {
        return false;
    };
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(first);
    line.starts_with("#!")
        && line
            .split([' ', '/', '\t'])
            .any(|w| w == "node" || w == "nodejs")
}

/// The pristine-copy directory for a resolved tool file (see module docs).
fn prefix_for(root: &Path, target: &Path, host_target: &Path) -> PathBuf {
    let dir = target.parent().unwrap_or(Path::new("/")).to_path_buf();
    if is_node_script(host_target) {
        let mut a = dir.clone();
        for _ in 0..6 {
            if a == Path::new("/") {
                break;
            }
            if host_path(root, &a).join("package.json").is_file() {
                return a;
            }
            if !a.pop() {
                break;
            }
        }
    }
    if dir.file_name().is_some_and(|n| n == "bin") {
        if let Some(up) = dir.parent() {
            if up != Path::new("/") {
                return up.to_path_buf();
            }
        }
    }
    dir
}

/// Finds the package-manager executables in `search_dirs` (sandbox paths)
/// of the root filesystem at host path `root` (`/` for the host's own).
/// Every name in every directory is reported, symlinks included; entries
/// whose final target is not an executable regular file are skipped.
pub fn find_real_tools(root: &Path, search_dirs: &[&str]) -> Vec<ToolLocation> {
    let mut out: Vec<ToolLocation> = Vec::new();
    for d in search_dirs {
        let d = Path::new(d);
        if !d.is_absolute() {
            continue;
        }
        let Some(rd) = resolve_in_root(root, d) else {
            continue;
        };
        let Ok(rd_entries) = fs::read_dir(host_path(root, &rd)) else {
            continue;
        };
        let mut names: Vec<String> = rd_entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| is_tool_name(n))
            .collect();
        names.sort();
        for name in names {
            let path = d.join(&name);
            if out.iter().any(|t| t.path == path) {
                continue;
            }
            let Some(target) = resolve_in_root(root, &path) else {
                continue;
            };
            let host_target = host_path(root, &target);
            let Ok(meta) = fs::metadata(&host_target) else {
                continue;
            };
            if !meta.is_file() || meta.mode() & 0o111 == 0 {
                continue;
            }
            let prefix = prefix_for(root, &target, &host_target);
            let mut exec_rel = target
                .strip_prefix(&prefix)
                .unwrap_or(&target)
                .to_path_buf();
            let tname = target.file_name().map(|n| n.to_string_lossy().into_owned());
            if tname.as_deref() != Some(name.as_str()) && same_dir_chain(root, &path) {
                exec_rel.set_file_name(&name);
            }
            let goroot = (name == "go" && host_path(root, &prefix).join("pkg/tool").is_dir())
                .then(|| prefix.clone());
            out.push(ToolLocation {
                tool: name,
                path,
                target,
                host_target,
                host_prefix: host_path(root, &prefix),
                prefix,
                exec_rel,
                goroot,
            });
        }
    }
    out
}

/// Single-quotes `s` for sh.
fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Builds the shims for `real_tools`. `ecosystem` is the denylist's
/// (`pip`, `conda`, `source`, `npm`); it is only recorded: every ban applies
/// to every package manager, each normalising names its own way, because the
/// same upstream code is often reachable through several of them (PyPI
/// `semver`, npm `semver`, Debian `libssl-dev` vs conda `openssl`...).
pub fn build_shims(
    ecosystem: &str,
    install_ban: &[String],
    real_tools: &[ToolLocation],
) -> ShimSet {
    build_shims_at(
        ecosystem,
        install_ban,
        real_tools,
        &Path::new(GUARD_MOUNT).join(REAL_SUBDIR),
    )
}

/// [`build_shims`] with the pristine prefixes mounted under `real_root`
/// (tests point it at host directories).
pub(crate) fn build_shims_at(
    ecosystem: &str,
    install_ban: &[String],
    real_tools: &[ToolLocation],
    real_root: &Path,
) -> ShimSet {
    // Pristine prefix mounts, in order of first use.
    let mut real_dirs: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut prefix_idx: Vec<usize> = Vec::new();
    for t in real_tools {
        let j = match real_dirs.iter().position(|(h, _)| *h == t.host_prefix) {
            Some(j) => j,
            None => {
                real_dirs.push((
                    t.host_prefix.clone(),
                    real_root.join(format!("p{}", real_dirs.len())),
                ));
                real_dirs.len() - 1
            }
        };
        prefix_idx.push(j);
    }

    let mut hashes = String::new();
    for f in Family::ALL {
        let h = hashed_bans(f, install_ban);
        hashes.push_str(&format!("_cb_h_{}=' {} '\n", f.tag(), h.join(" ")));
    }
    hashes.push_str(&format!("# ecosystem: {}", ecosystem.replace('\n', " ")));

    // One shim file per distinct resolved target.
    let mut by_target: BTreeMap<&Path, usize> = BTreeMap::new();
    let mut targets: Vec<(String, PathBuf)> = Vec::new();
    let mut defaults: Vec<usize> = Vec::new();
    for (i, t) in real_tools.iter().enumerate() {
        if by_target.contains_key(t.target.as_path()) {
            continue;
        }
        by_target.insert(&t.target, i);
        let mut name = t.tool.clone();
        let mut k = 2;
        while targets.iter().any(|(n, _)| *n == name) {
            name = format!("{}-{k}", t.tool);
            k += 1;
        }
        targets.push((name, t.target.clone()));
        defaults.push(i);
    }

    let template = template();
    let files = targets
        .iter()
        .zip(&defaults)
        .map(|((name, _), &default)| ShimFile {
            name: name.clone(),
            contents: template.replace("@@CBRUN_HASHES@@", &hashes).replace(
                "@@CBRUN_SELECT@@",
                &select_block(real_tools, &prefix_idx, &real_dirs, default),
            ),
            mode: 0o755,
        })
        .collect();
    ShimSet {
        files,
        targets,
        real_dirs,
    }
}

fn select_block(
    tools: &[ToolLocation],
    prefix_idx: &[usize],
    real_dirs: &[(PathBuf, PathBuf)],
    default: usize,
) -> String {
    let mut s = String::from("\tcase $0 in\n");
    for (i, t) in tools.iter().enumerate() {
        s.push_str(&format!(
            "\t{}) _cb_i={i} ;;\n",
            sq(&t.path.to_string_lossy())
        ));
    }
    s.push_str("\t*)\n\t\tcase ${0##*/} in\n");
    let mut seen: Vec<&str> = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        if !seen.contains(&t.tool.as_str()) {
            seen.push(&t.tool);
            s.push_str(&format!("\t\t{}) _cb_i={i} ;;\n", sq(&t.tool)));
        }
    }
    s.push_str(&format!(
        "\t\t*) _cb_i={default} ;;\n\t\tesac\n\t\t;;\n\tesac\n"
    ));
    s.push_str("\tcase $_cb_i in\n");
    for (i, t) in tools.iter().enumerate() {
        let real = real_dirs[prefix_idx[i]].1.join(&t.exec_rel);
        let goroot = t
            .goroot
            .as_ref()
            .map(|g| g.to_string_lossy().into_owned())
            .unwrap_or_default();
        s.push_str(&format!(
            "\t{i}) _cb_tool={} _cb_real={} _cb_goroot={} ;;\n",
            sq(&t.tool),
            sq(&real.to_string_lossy()),
            sq(&goroot)
        ));
    }
    s.push_str("\tesac");
    s
}

/// The bind mounts, in order, that put the shims in place once `set` has been
/// written to `guard_host_dir` by [`ShimSet::write`] (and any other guard
/// files next to it): the guard dir at `/.cbrun`, each pristine tool prefix
/// at `/.cbrun/real/p<N>`, each shim over its tool's resolved path. All
/// read-only.
pub fn binds(set: &ShimSet, guard_host_dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut v = vec![(guard_host_dir.to_path_buf(), PathBuf::from(GUARD_MOUNT))];
    v.extend(set.real_dirs.iter().cloned());
    for (name, dst) in &set.targets {
        v.push((guard_host_dir.join(SHIM_SUBDIR).join(name), dst.clone()));
    }
    v
}

impl ShimSet {
    /// Writes the shim files into `<guard_host_dir>/shims/` and creates the
    /// empty mount points `<guard_host_dir>/real/p<N>/` the prefix binds need.
    pub fn write(&self, guard_host_dir: &Path) -> io::Result<()> {
        let shims = guard_host_dir.join(SHIM_SUBDIR);
        fs::create_dir_all(&shims)?;
        for f in &self.files {
            let p = shims.join(&f.name);
            fs::write(&p, &f.contents)?;
            fs::set_permissions(&p, fs::Permissions::from_mode(f.mode))?;
        }
        for (_, dst) in &self.real_dirs {
            if let Ok(rel) = dst.strip_prefix(GUARD_MOUNT) {
                fs::create_dir_all(guard_host_dir.join(rel))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::names::{banned_name, requirement_names};
    use super::testkit::*;
    use super::*;
    use std::process::Command;

    #[test]
    fn discovery_resolves_symlinks_and_prefixes() {
        let tmp = tmpdir("disc");
        let root = tmp.0.join("root");
        fake_root(&root);
        let tools = find_real_tools(&root, DEFAULT_SEARCH_DIRS);
        let get = |p: &str| tools.iter().find(|t| t.path == Path::new(p)).unwrap();
        let npm = get("/usr/bin/npm");
        assert_eq!(
            npm.target,
            Path::new("/usr/lib/node_modules/npm/bin/npm-cli.js")
        );
        assert_eq!(npm.prefix, Path::new("/usr/lib/node_modules/npm"));
        assert_eq!(npm.exec_rel, Path::new("bin/npm-cli.js"));
        let pip = get("/usr/bin/pip");
        assert_eq!(pip.target, Path::new("/usr/bin/pip3"));
        assert_eq!(pip.prefix, Path::new("/usr"));
        assert_eq!(
            pip.exec_rel,
            Path::new("bin/pip"),
            "argv[0] kept for same-dir links"
        );
        let go = get("/usr/bin/go");
        assert_eq!(go.target, Path::new("/usr/local/go/bin/go"));
        assert_eq!(go.exec_rel, Path::new("bin/go"));
        assert_eq!(go.goroot.as_deref(), Some(Path::new("/usr/local/go")));
        assert_eq!(get("/opt/conda/bin/conda").prefix, Path::new("/opt/conda"));
        assert!(tools.iter().any(|t| t.path == Path::new("/bin/pip3.11")));
        assert!(
            !tools.iter().any(|t| t.tool == "bun"),
            "non-executable skipped"
        );
        assert!(!tools.iter().any(|t| t.tool == "not-a-tool"));
        // /bin/pip3 and /usr/bin/pip3 share one shim.
        let set = build_shims("pip", &["x".to_string()], &tools);
        let pip3: Vec<_> = set
            .targets
            .iter()
            .filter(|(_, d)| d == Path::new("/usr/bin/pip3"))
            .collect();
        assert_eq!(pip3.len(), 1);
        let b = binds(&set, Path::new("/run/g"));
        assert_eq!(b[0], (PathBuf::from("/run/g"), PathBuf::from("/.cbrun")));
        assert!(
            b.iter().any(|(s, d)| *s == root.join("usr")
                && d.to_string_lossy().starts_with("/.cbrun/real/p")),
            "{b:#?}"
        );
        assert!(b.contains(&(
            PathBuf::from("/run/g/shims/npm"),
            PathBuf::from("/usr/lib/node_modules/npm/bin/npm-cli.js")
        )));
    }

    #[test]
    fn node_scripts_use_their_package_root() {
        let tmp = tmpdir("node");
        let root = &tmp.0;
        let shims = root.join("usr/lib/node_modules/corepack/shims");
        fs::create_dir_all(&shims).unwrap();
        fs::write(
            root.join("usr/lib/node_modules/corepack/package.json"),
            "{}",
        )
        .unwrap();
        fs::write(
            shims.join("pnpm"),
            "#!/usr/bin/env node\nrequire('../dist/pnpm.js')\n",
        )
        .unwrap();
        fs::set_permissions(shims.join("pnpm"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        symlink(
            "../lib/node_modules/corepack/shims/pnpm",
            root.join("usr/bin/pnpm"),
        )
        .unwrap();
        let tools = find_real_tools(root, &["/usr/bin"]);
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].prefix, Path::new("/usr/lib/node_modules/corepack"));
        assert_eq!(tools[0].exec_rel, Path::new("shims/pnpm"));
    }

    #[test]
    fn resolve_stays_inside_root() {
        let tmp = tmpdir("res");
        let root = &tmp.0;
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("a/f"), "").unwrap();
        symlink("/a/f", root.join("abs")).unwrap();
        symlink("../../../../a/f", root.join("a/up")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        assert_eq!(
            resolve_in_root(root, Path::new("/abs")),
            Some(PathBuf::from("/a/f"))
        );
        assert_eq!(
            resolve_in_root(root, Path::new("/a/up")),
            Some(PathBuf::from("/a/f"))
        );
        assert_eq!(resolve_in_root(root, Path::new("/loop")), None);
        assert_eq!(resolve_in_root(root, Path::new("/missing")), None);
    }

    #[test]
    fn tool_names() {
        for n in [
            "pip",
            "pip3",
            "pip3.12",
            "pip2.7",
            "uvx",
            "apt-get",
            "micromamba",
        ] {
            assert!(is_tool_name(n), "{n}");
        }
        for n in ["pipe", "pip3x", "pip-3", "node", "python3"] {
            assert!(!is_tool_name(n), "{n}");
        }
    }

    #[test]
    fn bans_are_not_in_clear_text() {
        let e = env(BANS);
        for f in &e.set.files {
            for b in ["semver", "semantic", "@scope", "scope/pkg", "@evil"] {
                assert!(!f.contents.contains(b), "{} contains {b}", f.name);
            }
        }
    }

    #[test]
    fn shell_agrees_with_rust_parsing() {
        // For each spec, ban the first name the Rust parser derives and check
        // the shim refuses it with that name.
        let cases: &[(&str, Family, &[&str])] = &[
            ("pip3", Family::Python, &["install"]),
            ("npm", Family::Npm, &["install"]),
            ("conda", Family::Conda, &["install"]),
            ("cargo", Family::Cargo, &["install"]),
            ("go", Family::Go, &["get"]),
            ("apt-get", Family::Deb, &["install"]),
        ];
        let specs: &[(Family, &str)] = &[
            (Family::Python, "Pkg_One==1.0"),
            (Family::Python, "pkg.two>=1,<2"),
            (Family::Python, "pkg-three[extra]"),
            (Family::Python, "Pkg~=1.0; python_version<\"3.9\""),
            (Family::Python, "pkg4 @ https://h.invalid/x.whl"),
            (Family::Python, "git+https://h.invalid/o/pkg5.git#egg=pkg5"),
            (Family::Python, "/tmp/pkg_six-1.0.tar.gz"),
            (
                Family::Python,
                "https://github.com/own/repo-seven/archive/main.zip",
            ),
            (Family::Npm, "pkg@^1.2"),
            (Family::Npm, "@scope/pkg@latest"),
            (Family::Npm, "alias@npm:real-pkg@1"),
            (Family::Npm, "git+ssh://git@github.com:o/node-thing.git#v1"),
            (Family::Npm, "./dist/thing-1.0.0.tgz"),
            (Family::Conda, "conda-forge::Some_Pkg>=1"),
            (Family::Conda, "/tmp/pkg_x-1.0-py_0.conda"),
            (Family::Cargo, "serde@1.0"),
            (Family::Go, "example.com/mod@v1.2.3"),
            (Family::Go, "example.com/mod/sub/..."),
            (Family::Deb, "libfoo-dev:amd64"),
            (Family::Deb, "./libbar_1.0_amd64.deb"),
        ];
        for (family, spec) in specs {
            let names = requirement_names(*family, spec);
            let name = names.first().unwrap_or_else(|| panic!("no name in {spec}"));
            let bans = vec![name.clone()];
            assert_eq!(
                banned_name(*family, spec, &bans).as_deref(),
                Some(name.as_str())
            );
            let (tool, _, pre) = cases.iter().find(|(_, f, _)| f == family).unwrap();
            let e = env(&[name.as_str()]);
            let mut args: Vec<&str> = pre.to_vec();
            args.push(spec);
            let o = e.run(tool, &args);
            let err = String::from_utf8_lossy(&o.stderr);
            let hit = err
                .strip_prefix("[cbrun denylist] blocked install of ")
                .map(str::trim_end);
            assert!(
                o.status.code() == Some(1) && hit.is_some_and(|h| names.iter().any(|n| n == h)),
                "{tool} {spec}: rust names {names:?}, shell said {err:?}"
            );
        }
    }

    /// The same checks under every shell at hand, with the host's tools and
    /// with busybox's (as on an Alpine image).

    #[test]
    fn portable_across_shells_and_userlands() {
        let have = |p: &str| Path::new(p).exists();
        let mut shells: Vec<Vec<String>> = vec![vec!["/bin/sh".into()]];
        for (bin, args) in [
            ("/bin/dash", vec![]),
            ("/bin/bash", vec!["--posix"]),
            ("/bin/busybox", vec!["sh"]),
            ("/usr/bin/busybox", vec!["sh"]),
        ] {
            let dup = bin.ends_with("busybox") && shells.iter().any(|s| s[0].ends_with("busybox"));
            if have(bin) && !dup {
                let mut v = vec![bin.to_string()];
                v.extend(args.iter().map(|a| a.to_string()));
                shells.push(v);
            }
        }
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| have(p));
        if busybox.is_none() {
            crate::testing::missing("busybox (the busybox userland)");
        }
        for shell in &shells {
            for userland in [None, busybox] {
                let mut e = env(BANS);
                e.shell = shell.clone();
                if let Some(bb) = userland {
                    // Point the shims' PATH at busybox applets only.
                    let apps = e.work.parent().unwrap().join("bbapps");
                    fs::create_dir_all(&apps).unwrap();
                    for a in ["sed", "awk", "tr", "sha256sum", "cat"] {
                        symlink(bb, apps.join(a)).unwrap();
                    }
                    for f in &e.set.files {
                        let p = e.shims.join(&f.name);
                        let c = fs::read_to_string(&p).unwrap();
                        let c = c.replace(
                            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n",
                            &format!("PATH={}\n", apps.display()),
                        );
                        fs::write(&p, c).unwrap();
                    }
                }
                let what = format!("{shell:?} busybox-userland={}", userland.is_some());
                eprintln!("testing {what}");
                e.blocked("pip3", &["install", "Semver==2"], "Semver");
                fs::write(e.work.join("req.txt"), "ok\n  semantic_version>=2 # c\n").unwrap();
                e.blocked("pip3", &["install", "-r", "req.txt"], "semantic_version");
                e.blocked("npm", &["install", "@Scope/Pkg@1"], "@Scope/Pkg");
                fs::write(
                    e.work.join("package.json"),
                    r#"{"devDependencies": {"node-semver": "1"}}"#,
                )
                .unwrap();
                e.blocked("npm", &["ci"], "node-semver");
                e.passed("pip3", &["install", "ok pkg", "it's", "\"q\""]);
            }
        }
    }

    #[test]
    fn no_sha256sum_refuses_checked_installs() {
        let e = env(BANS);
        let t = e.tools.iter().find(|t| t.tool == "pip3").unwrap();
        let (file, _) = e.set.targets.iter().find(|(_, d)| *d == t.target).unwrap();
        let shim = e.shims.join(file);
        let o = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "sed 's|^PATH=.*|PATH=/nonexistent|' {} > {}/nosha && exec /bin/sh {}/nosha install ok",
                shim.display(),
                e.work.display(),
                e.work.display()
            ))
            .current_dir(&e.work)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            err.contains("sha256sum is missing; refusing install"),
            "{err}"
        );
    }
}
