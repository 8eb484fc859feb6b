//! Import, ls, inspect, tag, rm and gc; export read back by skopeo and umoci, and the docker-archive round trip.

use super::*;

// ---------------------------------------------------------------------------
// 1. import, ls, inspect, tag, rm, gc

#[test]
fn import_list_inspect_tag_rm_and_gc() {
    let bb = need!(
        busybox(),
        "import_list_inspect_tag_rm_and_gc",
        "a static busybox"
    );
    for who in [Who::Root, Who::Undelegated] {
        let ctx = Ctx::new(who, "img-basic");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        let tgz = ctx.dir.join("rootfs.tar.gz");
        tar_gz_of(&root, &tgz, &[("etc/from-tarball", b"yes\n")]);

        // An empty store lists nothing.
        assert!(list(&ctx, &home).is_empty());
        let text = image_ok(&ctx, &home, &["ls"]);
        assert!(text.stdout.starts_with("IMAGE"), "{}", text.show());

        let d_dir = import(&ctx, &home, &root, "bb:dir", &[]);
        let d_tgz = import(&ctx, &home, &tgz, "bb:tgz", &[]);
        assert_ne!(d_dir, d_tgz, "different content, different manifests");
        // Importing the same directory again gives the same digest (the
        // tar of a directory is deterministic) and no new blob.
        let n_blobs = blobs(&home).len();
        assert_eq!(
            n_blobs,
            6,
            "manifest, config and layer of each image: {:?}",
            blobs(&home)
        );
        assert_eq!(import(&ctx, &home, &root, "bb:again", &[]), d_dir);
        assert_eq!(blobs(&home).len(), n_blobs);
        image_ok(&ctx, &home, &["rm", "bb:again"]);

        let l = list(&ctx, &home);
        assert_eq!(
            l.keys().cloned().collect::<Vec<_>>(),
            ["bb:dir", "bb:tgz"],
            "{l:?}"
        );
        for (name, digest) in [("bb:dir", &d_dir), ("bb:tgz", &d_tgz)] {
            let e = &l[name];
            assert_eq!(&manifest_of(e), digest, "{e}");
            assert!(is_digest(e["config"].as_str().unwrap_or("")), "{e}");
            assert_eq!(e["layers"], 1, "{e}");
            assert!(
                e["size"].as_u64().unwrap() > 1_000_000,
                "busybox is in it: {e}"
            );
            assert!(e["error"].is_null(), "{e}");
            assert!(e["source"].as_str().unwrap().contains("rootfs-"), "{e}");
            assert!(blobs(&home).contains(&digest[7..]), "{e}");
        }
        let text = image_ok(&ctx, &home, &["ls"]);
        assert!(
            text.stdout.contains("bb:dir") && text.stdout.contains("bb:tgz"),
            "{}",
            text.show()
        );

        // inspect: the manifest and the config, as stored.
        let ins = image_ok(&ctx, &home, &["inspect", "bb:dir"]).stdout_json();
        assert_eq!(
            ins["manifest_digest"].as_str(),
            Some(d_dir.as_str()),
            "{ins}"
        );
        assert_eq!(ins["manifest"]["schemaVersion"], 2, "{ins}");
        assert_eq!(
            ins["manifest"]["layers"].as_array().unwrap().len(),
            1,
            "{ins}"
        );
        assert_eq!(
            ins["manifest"]["config"]["digest"], ins["config_digest"],
            "{ins}"
        );
        assert_eq!(ins["config"]["os"], "linux", "{ins}");
        assert_eq!(ins["config"]["architecture"], oci_arch(), "{ins}");
        assert_eq!(
            ins["config"]["rootfs"]["diff_ids"]
                .as_array()
                .unwrap()
                .len(),
            1,
            "{ins}"
        );
        assert_eq!(
            ins["config"]["config"]["Env"],
            json!([format!("PATH={DEFAULT_PATH}")]),
            "{ins}"
        );
        // The stored blobs are what their names say.
        for d in [
            ins["manifest_digest"].as_str().unwrap(),
            ins["config_digest"].as_str().unwrap(),
            ins["manifest"]["layers"][0]["digest"].as_str().unwrap(),
        ] {
            let bytes = fs::read(home.join("blobs/sha256").join(&d[7..])).unwrap();
            assert_eq!(sha256_hex(&bytes), d[7..], "blob {d}");
        }
        // The tarball's extra file made it into the layer, as a rootless
        // unpack shows.
        let un = image_ok(&ctx, &home, &["unpack", "bb:tgz"]);
        let unpacked = PathBuf::from(un.stdout.trim());
        assert_eq!(
            unpacked,
            home.join("rootfs").join(&d_tgz[7..]),
            "{}",
            un.show()
        );
        assert_eq!(
            fs::read_to_string(unpacked.join("etc/from-tarball")).unwrap(),
            "yes\n"
        );
        assert!(unpacked.join("bin/busybox").is_file());

        // tag, then rm one name: the other still works.
        let t = image_ok(&ctx, &home, &["tag", "bb:dir", "other/name:v2"]);
        assert_eq!(t.stdout.trim(), "other/name:v2", "{}", t.show());
        let l = list(&ctx, &home);
        assert_eq!(manifest_of(&l["other/name:v2"]), d_dir, "{l:?}");
        let rm = image_ok(&ctx, &home, &["rm", "bb:dir"]);
        assert!(rm.stdout.contains("removed bb:dir"), "{}", rm.show());
        let l = list(&ctx, &home);
        assert_eq!(
            l.keys().cloned().collect::<Vec<_>>(),
            ["bb:tgz", "other/name:v2"]
        );
        let ins = image_ok(&ctx, &home, &["inspect", "other/name:v2"]).stdout_json();
        assert_eq!(ins["manifest_digest"].as_str(), Some(d_dir.as_str()));
        assert_one_line_error(
            &image(&ctx, &home, &["inspect", "bb:dir"]),
            "inspect a removed tag",
            &["bb:dir"],
        );

        // gc frees nothing while every blob is referenced.
        let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
        assert_eq!(gc["removed_blobs"], 0, "{gc}");
        assert_eq!(gc["kept_blobs"], 6, "{gc}");
        assert_eq!(blobs(&home).len(), 6);

        // Last name of the directory image gone: its 3 blobs go with gc.
        image_ok(&ctx, &home, &["rm", "other/name:v2"]);
        assert_eq!(blobs(&home).len(), 6, "rm leaves blobs to gc");
        let gc = image_ok(&ctx, &home, &["gc", "--json"]).stdout_json();
        assert_eq!(gc["removed_blobs"], 3, "{gc}");
        assert_eq!(gc["kept_blobs"], 3, "{gc}");
        let left = blobs(&home);
        assert_eq!(left.len(), 3);
        assert!(
            !left.contains(&d_dir[7..]) && left.contains(&d_tgz[7..]),
            "{left:?}"
        );
        image_ok(&ctx, &home, &["inspect", "bb:tgz"]);

        // The last image: rm drops its unpacked root too; gc the blobs.
        image_ok(&ctx, &home, &["rm", "bb:tgz"]);
        let gc = image_ok(&ctx, &home, &["gc"]);
        assert!(
            gc.stdout.contains("cbrun image gc: removed 3 blob(s)"),
            "{}",
            gc.show()
        );
        assert!(blobs(&home).is_empty(), "{:?}", blobs(&home));
        assert!(dir_names(&home.join("rootfs")).is_empty());
        assert!(tmp_entries(&home).is_empty());
        assert!(list(&ctx, &home).is_empty());
        ctx.assert_clean("image import/ls/inspect/tag/rm/gc");
    }
}

// ---------------------------------------------------------------------------
// 2. export, read back by skopeo and umoci; docker-archive round trip

#[test]
fn export_is_read_by_skopeo_and_umoci_and_round_trips() {
    const T: &str = "export_is_read_by_skopeo_and_umoci_and_round_trips";
    let bb = need!(busybox(), T, "a static busybox");
    let skopeo = need!(find_tool("skopeo"), T, "skopeo");
    let umoci = need!(find_tool("umoci"), T, "umoci");
    let ctx = Ctx::new(Who::Root, "img-export");
    let home = store_home(&ctx, "store");
    let root = busybox_rootfs(&ctx, "rootfs", &bb);
    let digest = import(&ctx, &home, &root, "bb:1", &[]);
    let n_blobs = blobs(&home).len();

    let archive = ctx.out.join("bb.tar");
    let layout = ctx.out.join("bb-oci");
    let a = archive.to_str().unwrap();
    let l = layout.to_str().unwrap();
    for (fmt, out) in [("oci-archive", a), ("oci-dir", l)] {
        let r = image_ok(
            &ctx,
            &home,
            &["export", "bb:1", "--format", fmt, "--output", out],
        );
        let rep = r.stdout_json();
        assert_eq!(
            rep["manifest_digest"].as_str(),
            Some(digest.as_str()),
            "{}",
            r.show()
        );
        assert_eq!(rep["ref_name"], "1", "{}", r.show());
        assert_eq!(rep["blobs"], 3, "{}", r.show());
    }
    assert!(archive.is_file() && layout.join("index.json").is_file());
    // The archive is deterministic: a second export gives the same bytes;
    // an existing output needs --force.
    let first = fs::read(&archive).unwrap();
    let again = image(&ctx, &home, &["export", "bb:1", "--output", a]);
    assert_one_line_error(&again, "export over an existing file", &[a]);
    image_ok(&ctx, &home, &["export", "bb:1", "--output", a, "--force"]);
    assert!(
        fs::read(&archive).unwrap() == first,
        "the same image exported twice differs"
    );

    // skopeo reads both, and sees our manifest.
    for src in [format!("oci-archive:{a}"), format!("oci:{l}:1")] {
        let (ok, out, err) = host_cmd(&skopeo, &["inspect", &src]);
        assert!(ok, "skopeo inspect {src}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["Digest"].as_str(),
            Some(digest.as_str()),
            "skopeo inspect {src}: {v}"
        );
        assert_eq!(v["Architecture"], oci_arch(), "{v}");
        let (ok, out, err) = host_cmd(&skopeo, &["inspect", "--raw", &src]);
        assert!(ok, "{err}");
        let raw = out.strip_suffix('\n').unwrap_or(&out);
        assert_eq!(
            format!("sha256:{}", sha256_hex(raw.as_bytes())),
            digest,
            "raw manifest"
        );
    }

    // umoci unpacks the layout to a runnable bundle.
    let bundle = ctx.dir.join("bundle");
    let (ok, _, err) = host_cmd(
        &umoci,
        &[
            "unpack",
            "--rootless",
            "--image",
            &format!("{l}:1"),
            bundle.to_str().unwrap(),
        ],
    );
    assert!(ok, "umoci unpack: {err}");
    let bbin = bundle.join("rootfs/bin/busybox");
    assert!(bbin.is_file(), "umoci's rootfs has no bin/busybox");
    assert_eq!(fs::read(&bbin).unwrap(), fs::read(&bb).unwrap());
    assert_eq!(
        fs::read_link(bundle.join("rootfs/bin/sh")).unwrap(),
        PathBuf::from("busybox")
    );
    assert!(bundle.join("config.json").is_file());

    // Our own export imports back to the same manifest, with no new blob.
    assert_eq!(import(&ctx, &home, &archive, "back:archive", &[]), digest);
    assert_eq!(import(&ctx, &home, &layout, "back:dir", &[]), digest);
    assert_eq!(blobs(&home).len(), n_blobs);
    let l2 = list(&ctx, &home);
    assert!(
        l2["back:archive"]["source"]
            .as_str()
            .unwrap()
            .contains("oci-archive"),
        "{l2:?}"
    );
    assert!(
        l2["back:dir"]["source"]
            .as_str()
            .unwrap()
            .contains("oci-dir"),
        "{l2:?}"
    );

    // skopeo converts to a docker-archive; that imports and runs.
    let dock = ctx.dir.join("bb-docker.tar");
    let (ok, _, err) = host_cmd(
        &skopeo,
        &[
            "--insecure-policy",
            "copy",
            "-q",
            &format!("oci-archive:{a}"),
            &format!("docker-archive:{}:conv/bb:docker", dock.display()),
        ],
    );
    assert!(ok, "skopeo copy to docker-archive: {err}");
    chmod(&dock, 0o644);
    let dd = import(&ctx, &home, &dock, "conv:1", &[]);
    let l3 = list(&ctx, &home);
    assert!(
        l3["conv:1"]["source"]
            .as_str()
            .unwrap()
            .contains("docker-archive"),
        "{l3:?}"
    );
    assert_eq!(l3["conv:1"]["layers"], 1);
    // Picking the image by its RepoTag works too.
    assert_eq!(
        import(&ctx, &home, &dock, "conv:2", &["--ref", "conv/bb:docker"]),
        dd
    );
    let r = run_image(
        &ctx,
        &home,
        "conv:1",
        &[],
        &["sh", "-c", "echo ok; cat /etc/motd"],
    );
    r.assert_code(0, "run the docker-archive image");
    assert_eq!(r.stdout, "ok\noriginal motd\n", "{}", r.show());
    ctx.assert_clean("export, skopeo, umoci, docker-archive");
}
