//! `cbrun image bootstrap` and `cbrun image build`, through the binary, as
//! root and as unprivileged users: the captured layer holds additions,
//! deletions (whiteouts) and symlinks; a second build is a cache hit; a
//! failed build leaves a log and no image; a case's recipe builds with a
//! mapped base.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use crate::imgkit;
use serde_json::Value;

fn busybox_present() -> bool {
    Path::new("/bin/busybox").exists() || Path::new("/usr/bin/busybox").exists()
}

/// A store owned by the user cbrun runs as.
fn home(ctx: &Ctx) -> String {
    let h = ctx.out.join("store");
    fs::create_dir(&h).unwrap();
    std::os::unix::fs::chown(&h, Some(ctx.who.uid()), Some(ctx.who.uid())).unwrap();
    h.display().to_string()
}

fn cb(ctx: &Ctx, home: &str, args: &[&str]) -> Run {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    ctx.spawn_args(&args, &[("CBRUN_HOME", home)], None)
        .wait(Duration::from_secs(120))
}

fn world_readable(p: &Path) {
    Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(p)
        .status()
        .unwrap();
}

// The tests, by topic; the helpers above are theirs.
mod layers;
mod shapes;
mod tls_guards;
