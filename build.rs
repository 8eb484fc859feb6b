//! Build script: `CBRUN_VERSION` for `cbrun --version`, the package version
//! followed by the git commit it was built from (`0.1.0 (abc1234)`) when
//! the source is a git checkout of its own, else the package version alone
//! (a release tarball). `CBRUN_GIT_COMMIT` in the build environment names
//! the commit where git cannot (a packager's build).

use std::path::Path;
use std::process::Command;

fn main() {
    let version = env("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rerun-if-env-changed=CBRUN_GIT_COMMIT");
    let commit = env("CBRUN_GIT_COMMIT")
        .filter(|c| !c.is_empty())
        .or_else(git_commit);
    match commit {
        Some(c) => println!("cargo:rustc-env=CBRUN_VERSION={version} ({c})"),
        None => println!("cargo:rustc-env=CBRUN_VERSION={version}"),
    }
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// `git rev-parse --short HEAD`, when the package directory is the top of
/// a git work tree (not a tarball unpacked inside some other repository).
/// Asks to be run again when HEAD or the branch it names moves.
fn git_commit() -> Option<String> {
    let dir = env("CARGO_MANIFEST_DIR")?;
    let top = git(&dir, &["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != Path::new(&dir).canonicalize().ok()? {
        return None;
    }
    let branch = git(&dir, &["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        // A path that does not exist would make cargo run this every time.
        if let Some(p) = git(&dir, &["rev-parse", "--git-path", name]) {
            let p = Path::new(&dir).join(p);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    git(&dir, &["rev-parse", "--short", "HEAD"])
}

/// One line of git's output, or `None` when git is missing or fails.
fn git(dir: &str, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!s.is_empty()).then_some(s)
}
