//! Denylist guards: tripwires that refuse banned packages and imports.
//!
//! A case's `source/denylist.json` names packages the agent must not install
//! (`install_ban`) and modules the product must not import (`import_ban`);
//! its manifest may add runtime `judge_bans`. These guards make the common
//! ways of breaking those rules fail loudly. They are not a security
//! boundary: the sandbox's network policy (and the judge having no network
//! at all), the post-submission static scan and the read-only root are.
//!
//! # Solve sandbox ([`prepare_solve`])
//! - Package-manager shims ([`pkgshim`]) over the real `pip`, `pip3.X`,
//!   `pipx`, `uv`/`uvx`, `poetry`, `pdm`, `conda`/`mamba`/`micromamba`,
//!   `npm`/`npx`, `pnpm`/`pnpx`, `yarn`, `bun`/`bunx`, `go`, `cargo`,
//!   `apt`/`apt-get` and `dpkg`, checking command-line specs, requirement
//!   and constraint files, `pyproject.toml`, `package.json` and conda
//!   environment files against sha256 hashes of the normalised bans
//!   ([`names`]), then `exec`ing the real tool with its arguments untouched.
//!   A refusal prints `[cbrun denylist] blocked install of NAME` and exits 1.
//! - A `sitecustomize` ([`pyhook`]) that does the same inside pip itself, so
//!   `python -m pip` and pip run by other tools are covered, with the names
//!   pip actually resolved (URLs, wheels, local projects' dependencies).
//!
//! Not covered (all need the network or a copy of the code, which is the
//! real barrier): calling the pristine tools under `/.cbrun/real/` directly;
//! `python -S`/`-I`/`-E -m pip` or an emptied `PYTHONPATH`; downloading an
//! archive with curl and unpacking it; copying or vendoring the source;
//! transitive dependencies of other packages (refusing those would break
//! ordinary tooling); `uv`/`poetry`/`pdm` lock files and workspaces, npm
//! workspaces and lock files beyond `package.json`, `go.mod`, `Cargo.toml`;
//! remote requirement files (`-r https://...`) and pip configuration files;
//! a tool installed by the agent itself (a venv's own `pip` is covered by
//! the Python hook, a fresh `npm` tarball is not). The hashed bans of short
//! names can be recovered by hashing a dictionary of package names: the
//! hashing keeps the list out of casual view, no more.
//!
//! # Judge sandbox ([`prepare_judge`])
//! - Python ([`pyhook`]): a boot file, loaded before any workspace code,
//!   that starts cbrun's result reporter (`scripts/judge_reporter.py` and
//!   its pytest plugin; the host side is `judge::channel`) and the bans:
//!   `import_ban` enforced at import time for imports made by workspace
//!   code (anything under `/app`, its `site-packages` included);
//!   `judge_bans` (`socket`, `network`, `subprocess`,
//!   `filesystem_outside_workspace`) enforced with an audit hook while
//!   workspace code is on the stack, or everywhere in a process whose main
//!   program is in the workspace. Violations print `[cbrun judge-ban] ...`
//!   and raise. Plus pytest/interpreter hardening variables.
//! - Node ([`nodehook`]): `import_ban` for `require` and (Node >= 20.6) ESM
//!   `import` from workspace code (a `node_modules` under `/app` included).
//!   No runtime bans.
//! - [`shadow::shadowed_test_tools`] reports workspace files that would
//!   replace or preconfigure the test runner (the judge records them as
//!   tampering); the reporter repeats the module checks inside the sandbox.

pub mod names;
pub mod nodehook;
pub mod pkgshim;
pub mod probe;
pub mod pyhook;
pub mod shadow;

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use pkgshim::{binds, build_shims, find_real_tools, ShimSet, ToolLocation};

/// Where the guard directory is bound (read-only) in both sandboxes.
pub const GUARD_MOUNT: &str = "/.cbrun";
/// The workspace inside the sandboxes.
pub const WORKSPACE: &str = "/app";

/// A file cbrun writes into the guard directory. `name` is relative to it
/// (shims: relative to its `shims/` subdirectory) and may contain `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimFile {
    pub name: String,
    pub contents: String,
    pub mode: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("cannot write guard file {path}")]
    Write { path: PathBuf, source: io::Error },
}

/// What cbrun must add to a sandbox for a guard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// `(host source, sandbox destination)`, all read-only, in this order.
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// Variables to set in the sandbox's environment.
    pub env: Vec<(String, String)>,
    /// The package managers found and shimmed (solve only).
    pub tools: Vec<ToolLocation>,
}

fn mkdirs(dir: &Path) -> Result<(), GuardError> {
    let err = |source| GuardError::Write {
        path: dir.to_path_buf(),
        source,
    };
    fs::create_dir_all(dir).map_err(err)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).map_err(err)
}

/// Writes `files` under `dir`, creating directories (mode 0755) as needed.
pub fn write_files(dir: &Path, files: &[ShimFile]) -> Result<(), GuardError> {
    for f in files {
        let p = dir.join(&f.name);
        let mut d = p.parent().unwrap_or(dir).to_path_buf();
        let mut made = Vec::new();
        while !d.exists() && d.starts_with(dir) {
            made.push(d.clone());
            if !d.pop() {
                break;
            }
        }
        for d in made.iter().rev() {
            mkdirs(d)?;
        }
        let err = |source| GuardError::Write {
            path: p.clone(),
            source,
        };
        fs::write(&p, &f.contents).map_err(err)?;
        fs::set_permissions(&p, fs::Permissions::from_mode(f.mode)).map_err(err)?;
    }
    Ok(())
}

/// Sets up the solve guard in `guard_host_dir` (an empty directory owned by
/// cbrun, e.g. in the run's state directory): finds the package managers in
/// the root filesystem at host path `root` (`/` for `--rootfs host`), writes
/// their shims and the pip hook, and returns the binds and environment.
/// Returns nothing to do when `install_ban` is empty.
///
/// Binds: `guard_host_dir` at `/.cbrun`; each tool's pristine prefix at
/// `/.cbrun/real/p<N>`; each shim over its tool's resolved file. Env:
/// `PYTHONPATH=/.cbrun/py`.
pub fn prepare_solve(
    guard_host_dir: &Path,
    root: &Path,
    search_dirs: &[&str],
    ecosystem: &str,
    install_ban: &[String],
) -> Result<Prepared, GuardError> {
    if install_ban.iter().all(|b| b.trim().is_empty()) {
        return Ok(Prepared::default());
    }
    mkdirs(guard_host_dir)?;
    let tools = find_real_tools(root, search_dirs);
    let set = build_shims(ecosystem, install_ban, &tools);
    mkdirs(&guard_host_dir.join(pkgshim::SHIM_SUBDIR))?;
    set.write(guard_host_dir)
        .map_err(|source| GuardError::Write {
            path: guard_host_dir.join(pkgshim::SHIM_SUBDIR),
            source,
        })?;
    write_files(guard_host_dir, &pyhook::solve_python_files(install_ban))?;
    Ok(Prepared {
        binds: binds(&set, guard_host_dir),
        env: pyhook::solve_python_env(),
        tools,
    })
}

/// Sets up the judge guard in `guard_host_dir`: the Python and Node hooks.
/// Binds: `guard_host_dir` at `/.cbrun`. Env: see
/// [`pyhook::judge_python_env`] and [`nodehook::judge_node_env`].
pub fn prepare_judge<S: AsRef<str>>(
    guard_host_dir: &Path,
    import_ban: &[String],
    judge_bans: &[S],
) -> Result<Prepared, GuardError> {
    mkdirs(guard_host_dir)?;
    write_files(guard_host_dir, &pyhook::judge_python_files())?;
    write_files(guard_host_dir, &nodehook::judge_node_files())?;
    let mut env = pyhook::judge_python_env(import_ban, judge_bans);
    for (k, v) in nodehook::judge_node_env(import_ban) {
        if !env.iter().any(|(n, _)| *n == k) {
            env.push((k, v));
        }
    }
    Ok(Prepared {
        binds: vec![(guard_host_dir.to_path_buf(), PathBuf::from(GUARD_MOUNT))],
        env,
        tools: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_both() {
        let t = std::env::temp_dir().join(format!("cbrun-guard-prep-{}", std::process::id()));
        let _ = fs::remove_dir_all(&t);
        let bans = vec!["semver".to_string()];
        let p = prepare_solve(
            &t.join("solve"),
            Path::new("/"),
            pkgshim::DEFAULT_SEARCH_DIRS,
            "pip",
            &bans,
        )
        .unwrap();
        assert_eq!(p.binds[0], (t.join("solve"), PathBuf::from("/.cbrun")));
        assert_eq!(
            p.env,
            vec![("PYTHONPATH".to_string(), "/.cbrun/py".to_string())]
        );
        assert!(t.join("solve/py/sitecustomize.py").is_file());
        for (src, dst) in &p.binds[1..] {
            assert!(src.exists(), "{}", src.display());
            if dst.starts_with("/.cbrun/real") {
                assert!(t
                    .join("solve")
                    .join(dst.strip_prefix("/.cbrun").unwrap())
                    .is_dir());
            }
        }
        assert!(
            prepare_solve(&t.join("none"), Path::new("/"), &[], "pip", &[])
                .unwrap()
                .binds
                .is_empty()
        );

        let j = prepare_judge(&t.join("judge"), &bans, &["network"]).unwrap();
        assert_eq!(j.binds, vec![(t.join("judge"), PathBuf::from("/.cbrun"))]);
        for f in [
            "judge-py/sitecustomize.py",
            "judge-py/_cbrun_boot.py",
            "judge-py/_cbrun_judge_hook.py",
            "judge-py/_cbrun_report.py",
            "judge-py/_cbrun_pytest.py",
            "judge-pyuser/lib/python3.12/site-packages/_cbrun_judge.pth",
            "judge-node/ban.js",
            "judge-node/esm-hooks.mjs",
        ] {
            assert!(t.join("judge").join(f).is_file(), "{f}");
        }
        let keys: Vec<&str> = j.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys.iter().filter(|k| **k == "CBRUN_IMPORT_BAN").count(), 1);
        assert!(keys.contains(&"NODE_OPTIONS") && keys.contains(&"PYTHONUSERBASE"));
        let _ = fs::remove_dir_all(&t);
    }
}
