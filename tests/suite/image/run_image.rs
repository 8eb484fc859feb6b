//! `sandbox run --image`: a writable layer per run that goes away, no copy of the root, the image's environment; each cause once on an error line.

use super::*;

// ---------------------------------------------------------------------------
// 4. sandbox run --image: a writable layer per run, no copy, the image's env

#[test]
fn runs_on_an_image_write_to_an_overlay_that_goes_away() {
    const T: &str = "runs_on_an_image_write_to_an_overlay_that_goes_away";
    let bb = need!(busybox(), T, "a static busybox");
    for who in [Who::Root, Who::Delegated, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-run");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        let digest = import(&ctx, &home, &root, "bb:1", &[]);
        let unpacked = home.join("rootfs").join(&digest[7..]);

        // First use unpacks the image; the listing is the reference.
        let r = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &["sh", "-c", "echo \"$PATH\"; id -u; cat /etc/motd"],
        );
        r.assert_code(0, "a first run on the image");
        assert_eq!(
            r.stdout,
            format!("{DEFAULT_PATH}\n0\noriginal motd\n"),
            "the image's PATH reaches the command\n{}",
            r.show()
        );
        assert!(
            unpacked.join("bin/busybox").is_file(),
            "not unpacked at {}",
            unpacked.display()
        );
        let before = tree_listing(&unpacked);

        // Writes anywhere in / succeed.
        let w = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &[
                "sh",
                "-c",
                "set -e
                 echo written > /root/new-file
                 mkdir -p /usr/lib/deep/er && echo x > /usr/lib/deep/er/f
                 echo changed > /etc/motd
                 echo added > /bin/added
                 mkdir /var/empty/sub && rmdir /var/empty/sub
                 chmod 700 /home/app
                 rm /bin/cat
                 test ! -e /bin/cat
                 echo \"$(busybox cat /etc/motd) $(busybox cat /root/new-file)\"",
            ],
        );
        w.assert_code(0, "writes in the image's /");
        assert_eq!(w.stdout, "changed written\n", "{}", w.show());

        // ...and are gone in the next run.
        let n = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &[
                "sh",
                "-c",
                "test ! -e /root/new-file && test ! -e /usr/lib/deep && test ! -e /bin/added \
                 && test -e /bin/cat && stat -c %a /home/app && cat /etc/motd",
            ],
        );
        n.assert_code(0, "the next run sees none of the previous run's writes");
        assert_eq!(n.stdout, "755\noriginal motd\n", "{}", n.show());

        // No copy of the root per run: while a run is live, its state holds
        // only what the command wrote.
        let running = ctx.spawn_env(
            &["--image", "bb:1"],
            &[
                "sh",
                "-c",
                "echo mine > /tmp/../etc/written-by-the-run; sleep 3",
            ],
            &home_env(&home),
        );
        let mut upper = None;
        let seen = wait_until(Duration::from_secs(20), || {
            for id in ctx.new_runs() {
                let u = who.runs_dir().join(id).join("upper");
                if u.join("etc/written-by-the-run").is_file() {
                    upper = Some(u);
                    return true;
                }
            }
            false
        });
        assert!(
            seen,
            "no run dir with upper/etc/written-by-the-run under {}",
            who.runs_dir().display()
        );
        let upper = upper.unwrap();
        let run_dir = upper.parent().unwrap().to_path_buf();
        let files = files_under(&run_dir);
        let total: u64 = files.iter().map(|(_, s)| s).sum();
        assert!(
            total < 256 * 1024 && !files.iter().any(|(p, _)| p.ends_with("busybox")),
            "the run dir holds a copy of the image? {total} bytes: {files:?}"
        );
        let up: Vec<_> = files_under(&upper).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            up,
            [PathBuf::from("etc/written-by-the-run")],
            "the upper layer holds more than the write"
        );
        let r = running.wait(DEFAULT_DEADLINE);
        r.assert_code(0, "the run that wrote one file");
        assert!(
            !run_dir.exists(),
            "the run dir (and its upper layer) outlived the run"
        );

        // The shared root did not change.
        assert_eq!(
            tree_listing(&unpacked),
            before,
            "the unpacked image changed under {}",
            unpacked.display()
        );

        // Removing the image while a sandbox runs on it keeps the root until
        // the sandbox is gone; gc waits for it, then collects everything.
        let running = ctx.spawn_env(
            &["--image", "bb:1"],
            &["sh", "-c", "echo > /etc/started; sleep 2; cat /etc/motd"],
            &home_env(&home),
        );
        let live = wait_until(Duration::from_secs(20), || {
            ctx.new_runs()
                .iter()
                .any(|id| who.runs_dir().join(id).join("upper/etc/started").exists())
        });
        assert!(live, "the sandbox did not start");
        let rm = image_ok(&ctx, &home, &["rm", "bb:1"]);
        assert!(rm.stdout.contains("removed bb:1"), "{}", rm.show());
        assert!(
            unpacked.join("bin/busybox").is_file(),
            "rm pulled the root from under a live sandbox"
        );
        let gc_args: Vec<String> = ["image", "gc", "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let gc = ctx.spawn_args(&gc_args, &home_env(&home), None);
        let r = running.wait(DEFAULT_DEADLINE);
        r.assert_code(
            0,
            &format!(
                "a sandbox ({}) whose image was removed under it; outcome {}",
                who.label(),
                r.outcome.clone().unwrap_or_default()
            ),
        );
        assert_eq!(r.stdout, "original motd\n", "{}", r.show());
        let gc = gc.wait(DEADLINE);
        gc.assert_code(0, "gc after the sandbox");
        let rep = gc.stdout_json();
        assert_eq!(rep["removed_rootfs"], 1, "{rep}");
        assert_eq!(rep["removed_blobs"], 3, "{rep}");
        assert!(!unpacked.exists());
        ctx.assert_clean("runs on an image");
    }
}

/// The top directory of an image's root is the sandbox root's, as every
/// other directory of the image is: `/new-file` can be created.
///
/// Regression: the overlay's upper directory gives the merged `/` its
/// owner; made by real root and left owned by host uid 0, it showed as
/// 65534 to a sandbox whose ids map to 0x70000000+, so nothing could be
/// created directly in `/`.
#[test]
fn writes_at_the_top_of_an_image_root_succeed_as_every_user() {
    const T: &str = "writes_at_the_top_of_an_image_root_succeed_as_every_user";
    let bb = need!(busybox(), T, "a static busybox");
    let mut failures = Vec::new();
    for who in [Who::Delegated, Who::Undelegated, Who::Root] {
        let ctx = Ctx::new(who, "img-top");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        import(&ctx, &home, &root, "bb:1", &[]);
        let r = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &["sh", "-c", "stat -c %u:%g /; echo written > /new-file && mkdir /new-dir && rm /new-file && rmdir /new-dir && echo ok"],
        );
        if r.code != Some(0) || !r.stdout.ends_with("ok\n") || !r.stdout.starts_with("0:0\n") {
            failures.push(format!("{}: {}", who.label(), r.show()));
        }
        let r = run_image(
            &ctx,
            &home,
            "bb:1",
            &[],
            &["sh", "-c", "test ! -e /new-file && echo gone"],
        );
        r.assert_code(0, "the next run");
        ctx.assert_clean("writes at the top of an image root");
    }
    assert!(
        failures.is_empty(),
        "`/` of an image sandbox is not the sandbox root's, or not writable:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_image_config_env_and_workdir_reach_the_command() {
    const T: &str = "the_image_config_env_and_workdir_reach_the_command";
    let bb = need!(busybox(), T, "a static busybox");
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-env");
        let home = store_home(&ctx, "store");
        let layout = ctx.dir.join("oci");
        let digest = write_oci_dir(
            &layout,
            &ImageSpec {
                layers: vec![layer_tar(&busybox_layer_entries(&bb))],
                gzip: true,
                env: &[
                    "PATH=/bin:/opt/nowhere",
                    "IMG_GREETING=hello from the config",
                    "IMG_OVERRIDE=image",
                ],
                workdir: Some("/home/app"),
                tag: "v1",
            },
        );
        assert_eq!(import(&ctx, &home, &layout, "envimg:1", &[]), digest);
        let script = "echo \"$IMG_GREETING|$IMG_OVERRIDE|$PATH|$(pwd)\"";
        let r = run_image(
            &ctx,
            &home,
            "envimg:1",
            &["--env", "IMG_OVERRIDE=flag"],
            &["sh", "-c", script],
        );
        r.assert_code(0, "a run on an image with Env and WorkingDir");
        assert_eq!(
            r.stdout,
            "hello from the config|flag|/bin:/opt/nowhere|/home/app\n",
            "{}",
            r.show()
        );
        // --workdir wins over the image's.
        let r = run_image(&ctx, &home, "envimg:1", &["--workdir", "/tmp"], &["pwd"]);
        r.assert_code(0, "--workdir");
        assert_eq!(r.stdout, "/tmp\n", "{}", r.show());
        // The host's environment does not leak in.
        let r = run_image(&ctx, &home, "envimg:1", &[], &["env"]);
        r.assert_code(0, "env");
        assert!(!r.stdout.contains(CANARY_VALUE), "{}", r.show());
        ctx.assert_clean("runs with the image's env");
    }
}

/// Regression: several error types print their source in their own
/// message and also return it from `source()`; each cause must come out
/// once on the one error line.
#[test]
fn error_lines_say_each_cause_once() {
    let ctx = Ctx::new(Who::Root, "img-errdup");
    let home = store_home(&ctx, "store");
    let tarball = ctx.dir.join("dotdot.tar");
    fs::write(
        &tarball,
        layer_tar(&[dir("etc/"), file("../../escape", b"x\n")]),
    )
    .unwrap();
    import(&ctx, &home, &tarball, "dotdot:1", &[]);
    let out = ctx.out_file("x.tar");
    let cases: Vec<(Run, &str)> = vec![
        (
            image(
                &ctx,
                &home,
                &["export", "nosuch:1", "--output", out.to_str().unwrap()],
            ),
            "is not in the store",
        ),
        (
            image(&ctx, &home, &["unpack", "dotdot:1"]),
            "leads out of the root",
        ),
        (
            run_image(&ctx, &home, "dotdot:1", &[], &["true"]),
            "leads out of the root",
        ),
    ];
    let mut bad = Vec::new();
    for (r, cause) in &cases {
        assert_one_line_error(r, "an error", &[cause]);
        if r.stderr.matches(cause).count() != 1 {
            bad.push(r.stderr.trim().to_owned());
        }
    }
    assert!(
        bad.is_empty(),
        "error lines that repeat their cause:\n{}",
        bad.join("\n")
    );
    ctx.assert_clean("errors");
}
