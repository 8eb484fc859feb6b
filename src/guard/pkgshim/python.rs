//! Python package managers: pip (and `pip<version>`), pipx, uv/uvx,
//! poetry, pdm. The script part parses PEP 508 specs, requirement and
//! constraint files (`-r`, `-c`, nested, `\` continuations) and
//! `pyproject.toml` dependency tables, and each tool's options.

/// The tool names this part handles.
pub const TOOLS: &[&str] = &["pip", "pipx", "uv", "uvx", "poetry", "pdm"];

/// Its part of the shim script.
pub(super) const SCRIPT: &str = include_str!("../scripts/pkgshim_python.sh");

/// `pip3`, `pip3.12`, `pip2.7`: pip under a versioned name.
pub fn is_versioned_pip(name: &str) -> bool {
    name.strip_prefix("pip").is_some_and(|v| {
        !v.is_empty()
            && v.starts_with(|c: char| c.is_ascii_digit())
            && v.chars().all(|c| c.is_ascii_digit() || c == '.')
    })
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use std::fs;

    #[test]
    fn pip_blocks_every_spelling() {
        let e = env(BANS);
        e.blocked("pip3", &["install", "Semver==2"], "Semver");
        e.blocked(
            "pip3",
            &["install", "requests", "semantic_version"],
            "semantic_version",
        );
        e.blocked(
            "pip3",
            &["install", "Semantic.Version>=2; python_version<'3.9'"],
            "Semantic.Version",
        );
        e.blocked(
            "pip3",
            &["install", "semver[extra] @ https://x.invalid/a.whl"],
            "semver",
        );
        e.blocked(
            "pip3",
            &["install", "./dist/semver-3.0.0-py3-none-any.whl"],
            "semver",
        );
        e.blocked(
            "pip3",
            &[
                "install",
                "https://h.invalid/p/semantic_version-2.10.tar.gz",
            ],
            "semantic_version",
        );
        e.blocked(
            "pip3",
            &["install", "git+https://h.invalid/x/y.git#egg=semver"],
            "semver",
        );
        e.blocked(
            "pip",
            &["-q", "--cache-dir", "/tmp/c", "install", "-U", "semver"],
            "semver",
        );
        e.blocked(
            "pip3.11",
            &["download", "--no-deps", "-d", "/tmp/x", "semver"],
            "semver",
        );
        e.blocked("pip3", &["install", "--pre", "semver"], "semver");
        e.blocked(
            "pip3",
            &["install", "--no-binary", "semver", "ok"],
            "semver",
        );

        fs::write(
            e.work.join("req.txt"),
            "# pinned\nrequests==2.0  # http\n-r sub/more.txt\n",
        )
        .unwrap();
        fs::create_dir_all(e.work.join("sub")).unwrap();
        fs::write(
            e.work.join("sub/more.txt"),
            "flask\\\n>=2\n  SEMVER ; python_version>'3' \\\n  --hash=sha256:00\n",
        )
        .unwrap();
        e.blocked("pip3", &["install", "-r", "req.txt"], "SEMVER");
        e.blocked("pip3", &["install", "-Ur", "req.txt"], "SEMVER");
        e.blocked("pip3", &["install", "-rreq.txt"], "SEMVER");
        e.blocked("pip3", &["install", "--requirement=req.txt"], "SEMVER");
        e.blocked("pip3", &["install", "--req", "req.txt"], "SEMVER");
        e.blocked("pip3", &["install", "ok", "-c", "sub/more.txt"], "SEMVER");

        fs::create_dir_all(e.work.join("proj")).unwrap();
        fs::write(
            e.work.join("proj/pyproject.toml"),
            "[project]\nname = \"x\"\ndependencies = [\n  \"requests>=2\", # c\n  'semantic-version[x]>=2',\n]\n",
        )
        .unwrap();
        e.blocked("pip3", &["install", "-e", "./proj"], "semantic-version");
    }

    #[test]
    fn pip_passes_other_installs_with_args_intact() {
        let e = env(BANS);
        e.passed(
            "pip3",
            &[
                "install", "requests", "semver2", "my pkg", "it's", "a\"b", "$(x)", "*",
            ],
        );
        e.passed("pip3", &["uninstall", "-y", "semver"]);
        e.passed("pip3", &["show", "semver"]);
        e.passed("pip3", &[]);
        e.passed("pip3", &["install", "-r", "missing.txt"]);
        e.passed(
            "pip",
            &[
                "install",
                "-i",
                "https://idx.invalid/simple",
                "--target",
                "/tmp/semver",
                "ok",
            ],
        );
        fs::write(
            e.work.join("ok.txt"),
            "requests\n-e git+https://h.invalid/a/b.git#egg=b\n",
        )
        .unwrap();
        e.passed("pip3", &["install", "-r", "ok.txt", "--", "x"]);
        let out = e.passed("pip", &["--version"]);
        assert!(
            out.starts_with("REAL pip\n"),
            "pip keeps its own name: {out}"
        );
    }

    #[test]
    fn python_tools_other_than_pip() {
        let e = env(&["semver", "example.com/bad", "libssl-dev", "serde_json"]);
        e.blocked("uv", &["pip", "install", "SemVer>=3"], "SemVer");
        e.blocked("uv", &["--directory", "/tmp", "add", "semver"], "semver");
        e.blocked("uv", &["tool", "run", "semver"], "semver");
        e.blocked("uvx", &["--python", "3.11", "semver"], "semver");
        e.blocked("uvx", &["--from", "semver", "pysemver"], "semver");
        e.blocked(
            "uv",
            &["run", "--with", "semver", "python", "x.py"],
            "semver",
        );
        e.passed("uv", &["run", "python", "-m", "semver"]);
        e.passed("uvx", &["ruff", "check", "semver"]);
        fs::write(
            e.work.join("pyproject.toml"),
            "[dependency-groups]\ndev = [\"pytest\", \"semver>=3\"]\n",
        )
        .unwrap();
        e.blocked("uv", &["sync"], "semver");
        fs::write(
            e.work.join("pyproject.toml"),
            "[tool.poetry.dependencies]\npython = \"^3.8\"\nSemVer = \"^3\"\n",
        )
        .unwrap();
        e.blocked("poetry", &["install"], "SemVer");
        fs::remove_file(e.work.join("pyproject.toml")).unwrap();
        e.blocked("poetry", &["add", "semver@^3"], "semver");
        e.blocked("pipx", &["run", "semver"], "semver");
    }
}
