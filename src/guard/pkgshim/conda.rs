//! conda, mamba, micromamba: specs (`channel::name=version`, paths and
//! URLs of `.conda`/`.tar.bz2` packages), `--file` spec lists and
//! environment files (their `pip:` lists included).

/// The tool names this part handles.
pub const TOOLS: &[&str] = &["conda", "mamba", "micromamba"];

/// Its part of the shim script.
pub(super) const SCRIPT: &str = include_str!("../scripts/pkgshim_conda.sh");

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use std::fs;

    #[test]
    fn conda_tools() {
        let e = env(&["semver", "example.com/bad", "libssl-dev", "serde_json"]);
        e.blocked(
            "conda",
            &[
                "install",
                "-n",
                "base",
                "-c",
                "conda-forge",
                "conda-forge::semver=3",
            ],
            "semver",
        );
        fs::write(e.work.join("env.yml"), "name: x\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.11\n  - pip:\n    - \"SemVer==3\"\n").unwrap();
        e.blocked("conda", &["env", "create", "-f", "env.yml"], "SemVer");
        e.passed("conda", &["create", "-n", "x", "python=3.11"]);
    }
}
