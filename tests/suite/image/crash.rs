//! Concurrent and killed imports, and bad input.

use super::*;

// ---------------------------------------------------------------------------
// 6. concurrency and crashes

#[test]
fn parallel_imports_and_a_killed_import_leave_a_consistent_store() {
    const T: &str = "parallel_imports_and_a_killed_import_leave_a_consistent_store";
    let bb = need!(busybox(), T, "a static busybox");
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-par");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        let tarballs: Vec<PathBuf> = (0..4)
            .map(|i| {
                let p = ctx.dir.join(format!("rootfs-{i}.tar.gz"));
                tar_gz_of(
                    &root,
                    &p,
                    &[("etc/which", format!("tarball {i}\n").as_bytes())],
                );
                p
            })
            .collect();
        let running: Vec<Running> = tarballs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let args: Vec<String> = [
                    "image",
                    "import",
                    p.to_str().unwrap(),
                    "--tag",
                    &format!("par:{i}"),
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                ctx.spawn_args(&args, &home_env(&home), None)
            })
            .collect();
        let runs: Vec<Run> = running.into_iter().map(|r| r.wait(DEADLINE)).collect();
        for r in &runs {
            r.assert_code(0, "a parallel import");
        }
        let l = list(&ctx, &home);
        assert_eq!(l.len(), 4, "{l:?}");
        let manifests: BTreeSet<String> = l.values().map(manifest_of).collect();
        assert_eq!(manifests.len(), 4, "four different images: {l:?}");
        for (i, r) in runs.iter().enumerate() {
            let m = r.stdout.trim().split_once(' ').unwrap().1;
            assert_eq!(
                manifest_of(&l[&format!("par:{i}")]),
                m,
                "ls agrees with import {i}"
            );
            assert!(l[&format!("par:{i}")]["error"].is_null());
        }
        assert_eq!(blobs(&home).len(), 12, "{:?}", blobs(&home));
        assert!(
            tmp_entries(&home).is_empty(),
            "finished imports left temp files: {:?}",
            tmp_entries(&home)
        );
        let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
        assert_eq!(gc["removed_blobs"], 0, "{gc}");
        assert_eq!(gc["kept_blobs"], 12, "{gc}");
        assert!(tmp_entries(&home).is_empty());
        // Each one unpacks to its own content.
        for i in 0..4 {
            let (_, r) = unpack(&ctx, &home, &format!("par:{i}"))
                .map_err(|e| e.show())
                .unwrap();
            assert_eq!(
                fs::read_to_string(r.join("etc/which")).unwrap(),
                format!("tarball {i}\n")
            );
        }
        ctx.assert_clean("parallel imports");
    }

    // A 200 MB import killed with SIGKILL half way.
    let ctx = Ctx::new(Who::Root, "img-kill");
    let home = store_home(&ctx, "store");
    let big = ctx.dir.join("big.tar");
    {
        let mut b = tar::Builder::new(std::io::BufWriter::new(File::create(&big).unwrap()));
        let size: u64 = 200 << 20;
        let mut h = tar::Header::new_gnu();
        h.set_size(size);
        h.set_mode(0o644);
        h.set_cksum();
        let rand = File::open("/dev/urandom").unwrap().take(size);
        b.append_data(&mut h, "random.bin", rand).unwrap();
        b.into_inner().unwrap().flush().unwrap();
    }
    let mut killed_mid_way = false;
    for attempt in 0..3 {
        let tag = format!("big:{attempt}");
        let args: Vec<String> = ["image", "import", big.to_str().unwrap(), "--tag", &tag]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut running = ctx.spawn_args(&args, &home_env(&home), None);
        // Kill it once its temp blob holds some of the data.
        let tmp = home.join("tmp");
        let caught = wait_until(Duration::from_secs(30), || {
            let partial = fs::read_dir(&tmp)
                .map(|rd| {
                    rd.flatten()
                        .any(|e| e.metadata().map(|m| m.len() > (8 << 20)).unwrap_or(false))
                })
                .unwrap_or(false);
            partial || !running.is_running()
        });
        assert!(caught);
        running.signal("KILL");
        let r = running.wait(DEADLINE);
        if r.killed_by == Some(9) {
            killed_mid_way = true;
            eprintln!(
                "note: import killed after {:.2}s with {:?} in tmp/",
                r.elapsed.as_secs_f64(),
                tmp_entries(&home)
            );
            let l = list(&ctx, &home);
            assert!(
                !l.contains_key(&tag),
                "a killed import left a reference: {l:?}"
            );
            assert!(l.is_empty(), "{l:?}");
            assert!(
                !tmp_entries(&home).is_empty(),
                "expected the killed import's temp file"
            );
            break;
        }
        // It finished first: start over with an empty store.
        r.assert_code(0, "an import that beat the kill");
        image_ok(&ctx, &home, &["rm", &tag]);
        image_ok(&ctx, &home, &["gc"]);
    }
    assert!(
        killed_mid_way,
        "the 200 MB import finished every time before SIGKILL"
    );
    // A later gc removes the leftovers: temp files and any blob no
    // reference reaches.
    let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
    assert!(gc["removed_tmp"].as_u64().unwrap() >= 1, "{gc}");
    assert!(tmp_entries(&home).is_empty(), "{:?}", tmp_entries(&home));
    assert!(blobs(&home).is_empty(), "{:?}", blobs(&home));
    // The store still works.
    let root = busybox_rootfs(&ctx, "rootfs", &bb);
    import(&ctx, &home, &root, "after:1", &[]);
    assert_eq!(list(&ctx, &home).len(), 1);
    ctx.assert_clean("a killed import");
}

// ---------------------------------------------------------------------------
// 7. bad input

#[test]
fn bad_input_is_one_line_exit_125() {
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-bad");
        let home = store_home(&ctx, "store");
        let rootdir = ctx.dir.join("tiny");
        fs::create_dir_all(rootdir.join("etc")).unwrap();
        fs::write(rootdir.join("etc/hello"), "hi\n").unwrap();
        world_readable(&rootdir);
        let rd = rootdir.to_str().unwrap();
        let notatar = ctx.dir.join("not-a-tar.txt");
        fs::write(&notatar, "just some text, not a tar archive\n").unwrap();
        chmod(&notatar, 0o644);
        let nt = notatar.to_str().unwrap();
        let out = ctx.out_file("x.tar");
        let o = out.to_str().unwrap();
        let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
            (
                vec!["import", "/nonexistent", "--tag", "x:1"],
                vec!["/nonexistent"],
            ),
            (vec!["import", rd, "--tag", "BAD NAME"], vec!["BAD NAME"]),
            (
                vec!["import", rd, "--tag", "x:1", "--format", "oci-archive"],
                vec![rd],
            ),
            (vec!["import", nt, "--tag", "x:1"], vec![nt]),
            (
                vec!["import", rd, "--tag", "x:1", "--platform", "linux"],
                vec!["linux"],
            ),
            (
                vec![
                    "export",
                    "nosuch:1",
                    "--format",
                    "oci-archive",
                    "--output",
                    o,
                ],
                vec!["nosuch:1"],
            ),
            (vec!["inspect", "nosuch:1"], vec!["nosuch:1"]),
            (vec!["rm", "nosuch:1"], vec!["nosuch:1"]),
            (vec!["tag", "nosuch:1", "y:1"], vec!["nosuch:1"]),
            (vec!["unpack", "nosuch:1"], vec!["nosuch:1"]),
            (vec!["pull", "Not A Reference"], vec!["Not A Reference"]),
        ];
        for (args, naming) in &cases {
            let r = image(&ctx, &home, args);
            assert_one_line_error(&r, &format!("cbrun image {}", args.join(" ")), naming);
        }
        // Values clap refuses: its message, behind the same prefix.
        let refused: Vec<(Vec<&str>, Vec<&str>)> = vec![
            (
                vec!["import", rd, "--tag", "x:1", "--format", "nosuchformat"],
                vec!["nosuchformat"],
            ),
            (
                vec!["export", "nosuch:1", "--format", "zip", "--output", o],
                vec!["zip"],
            ),
        ];
        for (args, naming) in &refused {
            let r = image(&ctx, &home, args);
            assert_clap_error(&r, &format!("cbrun image {}", args.join(" ")), naming);
        }
        assert!(!out.exists(), "a failed export wrote its output");
        let r = run_image(&ctx, &home, "nosuch:1", &[], &["true"]);
        assert_one_line_error(&r, "sandbox run --image nosuch:1", &["nosuch:1"]);
        let r = run_image(&ctx, &home, "Bad Name", &[], &["true"]);
        assert_one_line_error(&r, "sandbox run --image 'Bad Name'", &["Bad Name"]);
        let r = ctx.run_env(
            &["--image", "x:1", "--rootfs", rd],
            &["true"],
            &home_env(&home),
        );
        assert_clap_error(&r, "--image with --rootfs", &["--rootfs"]);
        // Nothing of that made it into the store.
        assert!(list(&ctx, &home).is_empty());
        assert!(blobs(&home).is_empty(), "{:?}", blobs(&home));

        // A good import still works; the bad tag of an existing image fails.
        import(&ctx, &home, &rootdir, "tiny:1", &[]);
        let r = image(&ctx, &home, &["tag", "tiny:1", "Bad:Tag:x"]);
        assert_one_line_error(&r, "tag to a bad name", &["Bad:Tag:x"]);

        // A store that belongs to somebody else is refused (rootless only:
        // root owns the ctx dir).
        if who != Who::Root {
            let foreign = ctx.dir.join("foreign");
            fs::create_dir(&foreign).unwrap();
            chmod(&foreign, 0o777);
            let r = image(&ctx, &foreign, &["ls"]);
            assert_one_line_error(
                &r,
                "a store owned by root",
                &[foreign.to_str().unwrap(), "owned by uid 0"],
            );
        }
        ctx.assert_clean("bad input");
    }
}
