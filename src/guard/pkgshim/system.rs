//! Go, Cargo and the Debian tools (apt, apt-get, dpkg): module paths
//! (a ban covers paths below it), crates (`-`/`_` equivalent), packages
//! and `.deb` files.

/// The tool names this part handles.
pub const TOOLS: &[&str] = &["go", "cargo", "apt", "apt-get", "dpkg"];

/// Its part of the shim script.
pub(super) const SCRIPT: &str = include_str!("../scripts/pkgshim_system.sh");

#[cfg(test)]
mod tests {
    use super::super::testkit::*;

    #[test]
    fn go_cargo_and_apt() {
        let e = env(&["semver", "example.com/bad", "libssl-dev", "serde_json"]);
        e.blocked(
            "go",
            &["get", "example.com/bad/v2@v2.1.0"],
            "example.com/bad/v2",
        );
        e.blocked(
            "go",
            &["install", "-ldflags=-s", "Example.com/Bad@latest"],
            "Example.com/Bad",
        );
        e.blocked(
            "go",
            &["run", "example.com/bad/cmd@latest", "arg"],
            "example.com/bad/cmd",
        );
        e.passed("go", &["get", "example.com/bad@none"]);
        e.passed("go", &["run", "main.go", "example.com/bad"]);
        e.passed("go", &["build", "./..."]);
        e.blocked("cargo", &["add", "serde-json@1.0"], "serde-json");
        e.blocked(
            "cargo",
            &["+nightly", "install", "--vers", "1", "Serde_Json"],
            "Serde_Json",
        );
        e.blocked(
            "cargo",
            &["install", "--git", "https://github.com/o/serde_json"],
            "serde_json",
        );
        e.passed("cargo", &["build", "--release"]);
        e.blocked(
            "apt-get",
            &["install", "-y", "libssl-dev=3.0"],
            "libssl-dev",
        );
        e.passed("apt-get", &["update"]);
    }
}
