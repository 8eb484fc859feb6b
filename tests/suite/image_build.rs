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

#[test]
fn build_captures_changes_as_a_layer_and_caches_it() {
    if !busybox_present() {
        eprintln!("note: busybox missing (apt-get install busybox-static); skipped");
        return;
    }
    for who in [Who::Root, Who::Delegated, Who::Undelegated] {
        let ctx = Ctx::new(who, "image-build");
        let h = home(&ctx);
        let recipe_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rootfs/busybox");
        let r = cb(
            &ctx,
            &h,
            &["image", "bootstrap", recipe_dir.to_str().unwrap()],
        );
        r.assert_code(0, "bootstrap busybox");
        assert!(
            r.stdout.starts_with("busybox:latest sha256:"),
            "{}",
            r.show()
        );

        let recipe = ctx.dir.join("tool.toml");
        fs::write(
            &recipe,
            "base = \"busybox:latest\"\n\
             install_command = \"mkdir -p /opt/tool && echo v1 > /opt/tool/version && rm /etc/group && ln -s /opt/tool/version /etc/tool-version\"\n\
             env = [\"TOOL_HOME=/opt/tool\"]\n",
        )
        .unwrap();
        world_readable(&recipe);
        let r = cb(
            &ctx,
            &h,
            &["image", "build", recipe.to_str().unwrap(), "--json"],
        );
        r.assert_code(0, "image build");
        let rep = r.stdout_json();
        assert_eq!(rep["cache_hit"], false);
        assert_eq!(rep["network"], "host");
        assert!(rep["whiteouts"].as_u64().unwrap() >= 1, "{}", r.show());
        assert!(
            r.stderr.contains("network: host"),
            "the build says it has the host's network"
        );
        let image = rep["image"].as_str().unwrap().to_owned();

        let again = cb(
            &ctx,
            &h,
            &["image", "build", recipe.to_str().unwrap(), "--json"],
        );
        again.assert_code(0, "second build");
        let rep2 = again.stdout_json();
        assert_eq!(rep2["cache_hit"], true, "{}", again.show());
        assert_eq!(rep2["manifest_digest"], rep["manifest_digest"]);
        assert!(rep2["seconds"].as_f64().unwrap() < 1.0, "{}", again.show());

        let run = ctx.spawn_args(
            &[
                "sandbox", "run", "--image", &image, "--",
                "sh", "-c", "cat /opt/tool/version; cat /etc/tool-version; echo $TOOL_HOME; test -e /etc/group && echo group-present || echo group-gone",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
            &[("CBRUN_HOME", h.as_str())],
            None,
        )
        .wait(Duration::from_secs(60));
        run.assert_code(0, "run on the built image");
        assert_eq!(
            run.stdout,
            "v1\nv1\n/opt/tool\ngroup-gone\n",
            "{}",
            run.show()
        );

        // A failing build: a readable log, no image.
        let bad = ctx.dir.join("bad.toml");
        fs::write(
            &bad,
            "base = \"busybox:latest\"\ninstall_command = \"echo about-to-fail; exit 7\"\n",
        )
        .unwrap();
        world_readable(&bad);
        let r = cb(&ctx, &h, &["image", "build", bad.to_str().unwrap()]);
        r.assert_code(125, "failing build");
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains("log:"))
            .unwrap_or_else(|| panic!("{}", r.show()));
        let log = PathBuf::from(line.rsplit("log: ").next().unwrap().trim());
        assert!(fs::read_to_string(&log).unwrap().contains("about-to-fail"));
        let ls = cb(&ctx, &h, &["image", "ls", "--json"]);
        let names: Vec<String> = serde_json::from_str::<Value>(&ls.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["reference"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names.len(), 2, "only busybox and the good build: {names:?}");
        ctx.assert_clean("image builds");
    }
}

#[test]
fn a_case_recipe_builds_on_its_mapped_base() {
    if !busybox_present() {
        eprintln!("note: busybox missing; skipped");
        return;
    }
    let ctx = Ctx::new(Who::Root, "image-build-case");
    let h = home(&ctx);
    let recipe_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rootfs/busybox");
    cb(
        &ctx,
        &h,
        &["image", "bootstrap", recipe_dir.to_str().unwrap()],
    )
    .assert_code(0, "bootstrap");
    let case = ctx.dir.join("case001");
    Command::new("cp")
        .arg("-r")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/case001"))
        .arg(&case)
        .status()
        .unwrap();
    let install = "mkdir -p /opt/case && echo built > /opt/case/marker";
    for f in ["source/manifest.json", "source/recipe.lock.json"] {
        let p = case.join(f);
        let mut v: Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
        v["runner"]["install_command"] = install.into();
        fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }
    world_readable(&case);
    let map = ctx.dir.join("map.toml");
    fs::write(
        &map,
        "\"codingbench-base/ubuntu:24.04\" = \"busybox:latest\"\n",
    )
    .unwrap();
    fs::set_permissions(&map, fs::Permissions::from_mode(0o644)).unwrap();
    let r = cb(
        &ctx,
        &h,
        &[
            "image",
            "build",
            case.to_str().unwrap(),
            "--base-map",
            map.to_str().unwrap(),
            "--json",
        ],
    );
    r.assert_code(0, "build from a case");
    let rep = r.stdout_json();
    assert_eq!(rep["base"], "busybox:latest");
    let image = rep["image"].as_str().unwrap();
    assert!(image.starts_with("cbrun-case/case001:"), "{image}");
    let run = ctx
        .spawn_args(
            &[
                "sandbox",
                "run",
                "--image",
                image,
                "--",
                "cat",
                "/opt/case/marker",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
            &[("CBRUN_HOME", h.as_str())],
            None,
        )
        .wait(Duration::from_secs(60));
    assert_eq!(run.stdout, "built\n", "{}", run.show());
    // Without a mapping the published base name is reported, not guessed.
    let r = cb(&ctx, &h, &["image", "build", case.to_str().unwrap()]);
    r.assert_code(125, "unmapped base");
    assert!(r.stderr.contains("debian-bookworm-dev"), "{}", r.show());
}
