//! Builds captured as layers and cached, case recipes on mapped bases, the build sandbox's capabilities, a CA bundle during the build.

use super::*;

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
             build_command = \"touch /opt/tool/built-by-build-command\"\n\
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
        assert_eq!(rep["ran"], "install_command");
        assert_eq!(rep["attempts"].as_array().unwrap().len(), 1, "{}", r.show());
        assert!(
            r.stderr.contains("build_command is not run"),
            "{}",
            r.show()
        );
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

        let run = cb(&ctx, &h, &[
                "sandbox", "run", "--image", &image, "--",
                "sh", "-c", "cat /opt/tool/version; cat /etc/tool-version; echo $TOOL_HOME; test -e /etc/group && echo group-present || echo group-gone; ls /opt/tool/built-by-build-command /etc/apt 2>&1 | grep -c 'No such'",
            ]);
        run.assert_code(0, "run on the built image");
        assert_eq!(
            run.stdout,
            "v1\nv1\n/opt/tool\ngroup-gone\n2\n",
            "{}",
            run.show()
        );

        // A failing build: retried on a fresh layer (each attempt sees
        // none of the last one's writes), then a readable log and a
        // record, no image.
        let bad = ctx.dir.join("bad.toml");
        fs::write(
            &bad,
            "base = \"busybox:latest\"\ninstall_command = \"test -e /leftover && echo saw-leftover; touch /leftover; echo about-to-fail; exit 7\"\n",
        )
        .unwrap();
        world_readable(&bad);
        let r = cb(
            &ctx,
            &h,
            &[
                "image",
                "build",
                bad.to_str().unwrap(),
                "--attempts",
                "2",
                "--retry-delay",
                "0",
            ],
        );
        r.assert_code(125, "failing build");
        assert!(r.stderr.contains("after 2 attempt(s)"), "{}", r.show());
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains("log:"))
            .unwrap_or_else(|| panic!("{}", r.show()));
        let log = PathBuf::from(line.rsplit("log: ").next().unwrap().trim());
        let text = fs::read_to_string(&log).unwrap();
        assert_eq!(text.matches("about-to-fail").count(), 2, "{text}");
        assert!(!text.contains("saw-leftover"), "{text}");
        assert!(
            text.contains("attempt 1/2 failed (exit 7); retrying"),
            "{text}"
        );
        let record: Value =
            serde_json::from_str(&fs::read_to_string(log.with_extension("json")).unwrap()).unwrap();
        assert_eq!(record["attempts"].as_array().unwrap().len(), 2, "{record}");
        assert_eq!(record["attempts"][1]["status"], "exit 7");
        let ls = cb(&ctx, &h, &["image", "ls", "--json"]);
        let names: Vec<String> = ls
            .stdout_json()
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
    let run = cb(
        &ctx,
        &h,
        &[
            "sandbox",
            "run",
            "--image",
            image,
            "--",
            "cat",
            "/opt/case/marker",
        ],
    );
    assert_eq!(run.stdout, "built\n", "{}", run.show());
    // Without a mapping the published base name is reported, not guessed.
    let r = cb(&ctx, &h, &["image", "build", case.to_str().unwrap()]);
    r.assert_code(125, "unmapped base");
    assert!(r.stderr.contains("debian-bookworm-dev"), "{}", r.show());
}

/// The build sandbox's root holds the package-manager capabilities (and
/// only it: a sandbox run on the result holds none). As real root that is
/// what apt needs: write `_apt`'s 0700 folders, chown to other ids,
/// switch to another user. Rootless, only one id is mapped: chown and
/// setuid to other ids fail, and apt is told to stay root.
#[test]
fn the_build_sandbox_holds_package_manager_capabilities_and_nothing_else_does() {
    if !busybox_present() {
        eprintln!("note: busybox missing; skipped");
        return;
    }
    for who in [Who::Root, Who::Delegated, Who::Undelegated] {
        let ctx = Ctx::new(who, "image-build-caps");
        let h = home(&ctx);
        let recipe_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rootfs/busybox");
        cb(
            &ctx,
            &h,
            &["image", "bootstrap", recipe_dir.to_str().unwrap()],
        )
        .assert_code(0, "bootstrap");
        // Step 1: a folder like apt's lists/partial (owned by `_apt`, 42, mode 0700).
        let a = ctx.dir.join("a.toml");
        fs::write(
            &a,
            "base = \"busybox:latest\"\nname = \"caps/a\"\n\
             install_command = \"mkdir -p /opt && grep -E '^Cap(Eff|Bnd|Prm)' /proc/self/status > /opt/caps; \
             cat /etc/apt/apt.conf.d/00cbrun-build-sandbox > /opt/aptconf 2>/dev/null; \
             mkdir -p /var/lib/x/partial && chmod 700 /var/lib/x/partial && \
             if chown 42:42 /var/lib/x/partial; then echo chowned; else echo chown-refused; fi > /opt/chown\"\n",
        )
        .unwrap();
        world_readable(&a);
        let r = cb(&ctx, &h, &["image", "build", a.to_str().unwrap(), "--json"]);
        r.assert_code(0, "build a");
        let rep = r.stdout_json();
        let caps: Vec<&str> = rep["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert_eq!(
            caps,
            [
                "CAP_CHOWN",
                "CAP_DAC_OVERRIDE",
                "CAP_FOWNER",
                "CAP_FSETID",
                "CAP_KILL",
                "CAP_SETUID",
                "CAP_SETGID"
            ]
        );
        let img_a = rep["image"].as_str().unwrap().to_owned();
        // Step 2: root writes into it and becomes another user, as apt does.
        let b = ctx.dir.join("b.toml");
        fs::write(
            &b,
            format!(
                "base = \"{img_a}\"\nname = \"caps/b\"\n\
                 install_command = \"if echo data > /var/lib/x/partial/f; then echo wrote; else echo denied; fi > /opt/dac; \
                 if su -s /bin/sh -c 'id -u' user > /opt/setuid; then :; else echo setuid-refused > /opt/setuid; fi\"\n"
            ),
        )
        .unwrap();
        world_readable(&b);
        let r = cb(&ctx, &h, &["image", "build", b.to_str().unwrap(), "--json"]);
        r.assert_code(0, "build b");
        let img_b = r.stdout_json()["image"].as_str().unwrap().to_owned();
        let seen = cb(&ctx, &h, &[
                    "sandbox", "run", "--image", &img_b, "--", "sh", "-c",
                    "cat /opt/caps /opt/chown /opt/dac /opt/setuid; echo apt:$(cat /opt/aptconf); \
                     test -e /etc/apt && echo etc-apt-left; grep -E '^Cap(Eff|Bnd|Prm)' /proc/self/status; \
                     echo x > /var/lib/x/partial/g 2>/dev/null && echo run-wrote || echo run-denied",
                ]);
        seen.assert_code(0, "run on the built image");
        let lines: Vec<&str> = seen.stdout.lines().collect();
        let build_caps = [
            "CapPrm:\t00000000000000fb",
            "CapEff:\t00000000000000fb",
            "CapBnd:\t00000000000000fb",
        ];
        let run_caps = [
            "CapPrm:\t0000000000000000",
            "CapEff:\t0000000000000000",
            "CapBnd:\t0000000000000000",
        ];
        assert_eq!(&lines[0..3], &build_caps, "{}", seen.show());
        if who == Who::Root {
            assert_eq!(
                &lines[3..7],
                ["chowned", "wrote", "1000", "apt:"],
                "root's build: chown, DAC override and setuid work; apt keeps `_apt`\n{}",
                seen.show()
            );
            // A plain sandbox on the same image has no capability: the
            // `_apt`-style folder is closed to its root.
            assert_eq!(lines.last(), Some(&"run-denied"), "{}", seen.show());
        } else {
            assert_eq!(
                &lines[3..7],
                [
                    "chown-refused",
                    "wrote",
                    "setuid-refused",
                    "apt:APT::Sandbox::User \"root\";"
                ],
                "rootless build: one id mapped\n{}",
                seen.show()
            );
        }
        assert!(
            !seen.stdout.contains("etc-apt-left"),
            "the build-only apt setting is not in the image\n{}",
            seen.show()
        );
        assert_eq!(
            &lines[lines.len() - 4..lines.len() - 1],
            &run_caps,
            "{}",
            seen.show()
        );
        ctx.assert_clean("capability builds");
    }
}

/// `--ca-bundle`: the build sandbox trusts the extra CA (a bundle at
/// /.cbrun-ca, the TLS variables, the image's own store stood in for),
/// and the built image keeps none of it: its store is its own again, with
/// what the install command appended to it.
#[test]
fn a_ca_bundle_is_trusted_during_the_build_and_not_kept_in_the_image() {
    if !busybox_present() || !imgkit::require_tool("openssl", "test CA") {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "image-build-ca");
        let h = home(&ctx);
        let ca = imgkit::TestCa::new(&ctx.dir.join("ca"));
        let recipe_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rootfs/busybox");
        cb(
            &ctx,
            &h,
            &["image", "bootstrap", recipe_dir.to_str().unwrap()],
        )
        .assert_code(0, "bootstrap");
        let own = ctx.dir.join("own.toml");
        fs::write(
            &own,
            "base = \"busybox:latest\"\nname = \"ca/own\"\n\
             install_command = \"mkdir -p /etc/ssl/certs && echo IMAGE-OWN-STORE > /etc/ssl/certs/ca-certificates.crt\"\n",
        )
        .unwrap();
        world_readable(&own);
        let r = cb(
            &ctx,
            &h,
            &["image", "build", own.to_str().unwrap(), "--json"],
        );
        r.assert_code(0, "base with a store");
        let base = r.stdout_json()["image"].as_str().unwrap().to_owned();
        let use_it = ctx.dir.join("use.toml");
        fs::write(
            &use_it,
            format!(
                "base = \"{base}\"\nname = \"ca/use\"\n\
                 install_command = \"mkdir -p /opt; for v in SSL_CERT_FILE PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO; do eval echo $v=\\\\$$v; done > /opt/env; \
                 grep -c 'BEGIN CERTIFICATE' /.cbrun-ca/ca-certificates.crt > /opt/bundle-certs; \
                 head -1 /.cbrun-ca/ca-certificates.crt > /opt/bundle-head; \
                 grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt > /opt/store-certs; \
                 echo APPENDED-BY-RECIPE >> /etc/ssl/certs/ca-certificates.crt\"\n"
            ),
        )
        .unwrap();
        world_readable(&use_it);
        let r = cb(
            &ctx,
            &h,
            &[
                "image",
                "build",
                use_it.to_str().unwrap(),
                "--json",
                "--ca-bundle",
                ca.ca().to_str().unwrap(),
            ],
        );
        r.assert_code(0, "build with a CA");
        let rep = r.stdout_json();
        assert_eq!(rep["ca_bundle"]["certificates"], 1, "{}", r.show());
        assert_eq!(rep["ca_bundle"]["system_store"], true, "{}", r.show());
        let img = rep["image"].as_str().unwrap().to_owned();
        let inspect = cb(&ctx, &h, &["image", "inspect", &img]);
        assert!(
            inspect.stdout.contains("io.cbrun.build.ca-bundle"),
            "{}",
            inspect.show()
        );
        let seen = cb(&ctx, &h, &[
                    "sandbox", "run", "--image", &img, "--", "sh", "-c",
                    "cat /opt/env /opt/bundle-certs /opt/bundle-head /opt/store-certs; echo ---; cat /etc/ssl/certs/ca-certificates.crt; ls -a / | grep -c cbrun-ca",
                ]);
        let want_env: String = [
            "SSL_CERT_FILE",
            "PIP_CERT",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
            "GIT_SSL_CAINFO",
        ]
        .iter()
        .map(|v| format!("{v}=/.cbrun-ca/ca-certificates.crt\n"))
        .collect();
        assert_eq!(
            seen.stdout,
            format!("{want_env}1\nIMAGE-OWN-STORE\n1\n---\nIMAGE-OWN-STORE\nAPPENDED-BY-RECIPE\n0\n"),
            "the bundle: the image's own store, then the CA; the store stood in for during the build, its own afterwards\n{}",
            seen.show()
        );
        // A bad bundle is refused up front, naming the file.
        let bad = ctx.dir.join("not-a-ca.pem");
        fs::write(&bad, "hello\n").unwrap();
        world_readable(&bad);
        let r = cb(
            &ctx,
            &h,
            &[
                "image",
                "build",
                use_it.to_str().unwrap(),
                "--ca-bundle",
                bad.to_str().unwrap(),
            ],
        );
        assert_ne!(r.code, Some(0));
        assert!(
            r.stderr.contains("not-a-ca.pem") && r.stderr.contains("no PEM"),
            "{}",
            r.show()
        );
        ctx.assert_clean("CA builds");
    }
}
