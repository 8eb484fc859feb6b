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

        let run = ctx.spawn_args(
            &[
                "sandbox", "run", "--image", &image, "--",
                "sh", "-c", "cat /opt/tool/version; cat /etc/tool-version; echo $TOOL_HOME; test -e /etc/group && echo group-present || echo group-gone; ls /opt/tool/built-by-build-command /etc/apt 2>&1 | grep -c 'No such'",
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
        let seen = ctx
            .spawn_args(
                &[
                    "sandbox", "run", "--image", &img_b, "--", "sh", "-c",
                    "cat /opt/caps /opt/chown /opt/dac /opt/setuid; echo apt:$(cat /opt/aptconf); \
                     test -e /etc/apt && echo etc-apt-left; grep -E '^Cap(Eff|Bnd|Prm)' /proc/self/status; \
                     echo x > /var/lib/x/partial/g 2>/dev/null && echo run-wrote || echo run-denied",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
                &[("CBRUN_HOME", h.as_str())],
                None,
            )
            .wait(Duration::from_secs(60));
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
        let seen = ctx
            .spawn_args(
                &[
                    "sandbox", "run", "--image", &img, "--", "sh", "-c",
                    "cat /opt/env /opt/bundle-certs /opt/bundle-head /opt/store-certs; echo ---; cat /etc/ssl/certs/ca-certificates.crt; ls -a / | grep -c cbrun-ca",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
                &[("CBRUN_HOME", h.as_str())],
                None,
            )
            .wait(Duration::from_secs(60));
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

/// The benchmark's recipe shape on a real Debian base, offline: a base
/// bootstrapped with mmdebstrap from a loopback apt repository (cached
/// between runs), then the `img-apt-pip` case's install command (`apt-get
/// update`, `apt-get install python3-pip python3-pytest`, `/etc/pip.conf`,
/// pinned pip installs from a loopback index through `PIP_INDEX_URL`, the
/// case's `source/env` at `/env-assets`), as root and rootless; then
/// `validate` on the image (reference 1, off_by_one 0). The recipe's pip
/// install brings in `fakeban`, the case's banned upstream: importable on
/// the image itself, masked (and recorded) in the solve and judge
/// sandboxes.
#[test]
fn a_published_shape_recipe_builds_on_a_bootstrapped_debian_base_and_validates() {
    if !imgkit::debian::tools_present() {
        return;
    }
    let Some(debs) = imgkit::debian::debs_dir() else {
        return;
    };
    let t0 = std::time::Instant::now();
    let work = PathBuf::from(format!("/tmp/cbrun-it-{}-debian-index", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    let index = imgkit::debian::LoopbackIndex::start(&debs, &work.join("www"));
    let (archive, cached) = imgkit::debian::cached_base(Path::new(CBRUN), &debs, &index, &work);
    eprintln!(
        "note: Debian base {} ({}) in {:.0} s",
        archive.display(),
        if cached { "cached" } else { "bootstrapped now" },
        t0.elapsed().as_secs_f64()
    );
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "image-build-debian");
        let h = home(&ctx);
        let case = imgkit::case_copy(&ctx.dir, "img-apt-pip");
        let slow = |args: &[&str], env: &[(&str, &str)]| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let mut e = vec![("CBRUN_HOME", h.as_str())];
            e.extend_from_slice(env);
            ctx.spawn_args(&args, &e, None)
                .wait(Duration::from_secs(600))
        };
        slow(
            &[
                "image",
                "import",
                archive.to_str().unwrap(),
                "--tag",
                "debian-apt-test:latest",
            ],
            &[],
        )
        .assert_code(0, "import the cached base");
        // The site's mirror (this run's port), as a corporate base has it.
        let mirror = ctx.dir.join("mirror.toml");
        fs::write(
            &mirror,
            format!(
                "base = \"debian-apt-test:latest\"\nname = \"site/debian\"\n\
                 install_command = \"echo 'deb [trusted=yes] {} bookworm main' > /etc/apt/sources.list\"\n",
                index.apt_mirror()
            ),
        )
        .unwrap();
        world_readable(&mirror);
        let r = slow(&["image", "build", mirror.to_str().unwrap()], &[]);
        r.assert_code(0, "mirror layer");
        let site = r.stdout.split_whitespace().next().unwrap().to_owned();

        let pip_index = index.pip_index();
        let r = slow(
            &[
                "image",
                "build",
                case.to_str().unwrap(),
                "--base",
                &site,
                "--json",
            ],
            &[("PIP_INDEX_URL", &pip_index)],
        );
        r.assert_code(0, "build the case's image");
        let rep = r.stdout_json();
        assert_eq!(rep["ran"], "install_command", "{}", r.show());
        assert_eq!(rep["attempts"].as_array().unwrap().len(), 1, "{}", r.show());
        assert_eq!(rep["attempts"][0]["status"], "ok", "{}", r.show());
        assert_eq!(rep["shell"], "bash -o pipefail -lc", "{}", r.show());
        assert_eq!(rep["env_assets"], true, "{}", r.show());
        assert_eq!(rep["pass_env"], serde_json::json!(["PIP_INDEX_URL"]));
        assert_eq!(
            rep["apt_sandbox_user"],
            if who == Who::Root { "_apt" } else { "root" },
            "{}",
            r.show()
        );
        let img = rep["image"].as_str().unwrap().to_owned();
        let log = fs::read_to_string(rep["log"].as_str().unwrap()).unwrap();
        assert!(
            log.contains("Setting up python3-pip") && log.contains(&index.apt_mirror()),
            "apt installed from the loopback mirror\n{log}"
        );
        assert!(
            log.contains(
                "Successfully installed fakeban-0.3.0 numeral-tables-2.1.0 romanum-testkit-1.4.2"
            ),
            "pip resolved the pins and the range on the loopback index\n{log}"
        );

        // What the image holds, seen from a plain sandbox on it.
        let seen = slow(
            &[
                "sandbox", "run", "--image", &img, "--", "sh", "-c",
                "cat /etc/pip.conf; python3 -m pytest --version 2>&1 | cut -d' ' -f1; \
                 python3 -c 'import numeral_tables, romanum_testkit; print(numeral_tables.VERSION)'; \
                 cat /opt/img-apt-pip.NOTICE | head -c 11; echo; \
                 ls /var/lib/apt/lists | grep -v -x -e lock -e partial | wc -l; \
                 test -e /etc/apt/apt.conf.d/00cbrun-build-sandbox && echo build-setting-left; \
                 test -e /env-assets && echo env-assets-left; \
                 python3 -c 'import fakeban; print(\"fakeban\", fakeban.ANSWER)'",
            ],
            &[],
        );
        seen.assert_code(0, "run on the built image");
        assert_eq!(
            seen.stdout,
            "[global]\nbreak-system-packages = true\npytest\n2.1.0\nFiles under\n0\nfakeban 42\n",
            "the image: pip.conf, pytest from apt, the pip pins, env assets copied, apt lists cleaned, \
             no build-only files; fakeban importable on the bare image (what the mask is for)\n{}",
            seen.show()
        );

        // validate on the image: both controls as expected; the judge masked fakeban.
        let vout = ctx.out.join("validate");
        let r = slow(
            &[
                "validate",
                case.to_str().unwrap(),
                "--image",
                &img,
                "--json",
                "--out",
                vout.to_str().unwrap(),
            ],
            &[],
        );
        r.assert_code(0, "validate on the image");
        let rows = r.stdout_json();
        let got: Vec<(String, i64, i64, bool)> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                (
                    row["control"].as_str().unwrap().to_owned(),
                    row["reward"].as_i64().unwrap(),
                    row["passed"].as_i64().unwrap(),
                    row["ok"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("off_by_one".to_owned(), 0, 7, true),
                ("reference".to_owned(), 1, 8, true)
            ],
            "{}",
            r.show()
        );
        let fr: Value = serde_json::from_str(
            &fs::read_to_string(vout.join("img-apt-pip/reference/logs/verifier/final_report.json"))
                .unwrap(),
        )
        .unwrap();
        let masked: Vec<&str> = fr["masked_imports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["module"].as_str().unwrap())
            .collect();
        assert_eq!(masked, ["fakeban", "fakebanmod"], "{fr}");

        // The attack: an agent on the image imports the banned upstream
        // (by a computed name, past the static scan). The probe masked it,
        // in the solve sandbox and in the judge's; trial.json says so.
        let agent = ctx.dir.join("importer.toml");
        fs::write(
            &agent,
            "name = \"importer\"\n\
             command = \"for m in fakeban fakebanmod; do python3 -c \\\"import importlib; importlib.import_module('$m'); print('$m imported')\\\" >> /app/probe.txt 2>&1; done; \
             grep -h -o 'ModuleNotFoundError' /app/probe.txt > /app/seen.txt; echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n",
        )
        .unwrap();
        world_readable(&agent);
        let tdir = ctx.out.join("trial");
        let r = slow(
            &[
                "trial",
                case.to_str().unwrap(),
                "--image",
                &img,
                "--agent",
                agent.to_str().unwrap(),
                "--out",
                tdir.to_str().unwrap(),
            ],
            &[],
        );
        let probe = fs::read_to_string(tdir.join("workspace/probe.txt")).unwrap_or_default();
        assert!(
            !probe.contains("imported")
                && probe
                    .lines()
                    .filter(|l| l.starts_with("ModuleNotFoundError: No module named"))
                    .count()
                    == 2,
            "the agent could import the banned upstream:\n{probe}\n{}",
            r.show()
        );
        let rec: Value =
            serde_json::from_str(&fs::read_to_string(tdir.join("trial.json")).unwrap()).unwrap();
        let masked: Vec<&str> = rec["masked_imports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["module"].as_str().unwrap())
            .collect();
        assert_eq!(masked, ["fakeban", "fakebanmod"], "{rec}");
        ctx.assert_clean("Debian image builds");
    }
    drop(index);
    let _ = fs::remove_dir_all(&work);
    eprintln!(
        "note: the Debian test took {:.0} s",
        t0.elapsed().as_secs_f64()
    );
}

/// `$CBRUN_IMAGE_STORE`: root builds into a shared store; nobody lists it,
/// runs sandboxes on its images, and cannot change it (import, build, tag,
/// rm, gc are refused, its blobs and roots are untouched by a sandbox
/// that writes everywhere). Root's private store is refused to nobody
/// outright. A root unpacked `--for-user nobody` is nobody's own: the
/// image's files can then be changed inside (on the overlay).
#[test]
fn a_shared_store_built_by_root_is_used_read_only_by_nobody() {
    if !busybox_present() {
        eprintln!("note: busybox missing; skipped");
        return;
    }
    // Outside the tests' own folders: those go when each Ctx is dropped.
    let stores = PathBuf::from(format!(
        "/tmp/cbrun-it-{}-shared-stores",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&stores);
    fs::create_dir_all(&stores).unwrap();
    fs::set_permissions(&stores, fs::Permissions::from_mode(0o755)).unwrap();
    let root = Ctx::new(Who::Root, "shared-store-root");
    let shared = stores.join("shared-store");
    let shared_s = shared.display().to_string();
    let as_root = |args: &[&str], env: &[(&str, &str)]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        root.spawn_args(&args, env, None)
            .wait(Duration::from_secs(120))
    };
    let store_env = [("CBRUN_IMAGE_STORE", shared_s.as_str())];
    let recipe_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rootfs/busybox");
    as_root(
        &["image", "bootstrap", recipe_dir.to_str().unwrap()],
        &store_env,
    )
    .assert_code(0, "bootstrap into the shared store");
    let recipe = root.dir.join("tool.toml");
    fs::write(
        &recipe,
        "base = \"busybox:latest\"\nname = \"group/tool\"\n\
         install_command = \"mkdir -p /opt/tool && echo v1 > /opt/tool/version\"\n",
    )
    .unwrap();
    world_readable(&recipe);
    let r = as_root(&["image", "build", recipe.to_str().unwrap()], &store_env);
    r.assert_code(0, "build into the shared store");
    let img = r.stdout.split_whitespace().next().unwrap().to_owned();
    // Unpacked (as root's sandboxes see it) by a first use.
    as_root(&["image", "unpack", &img], &store_env).assert_code(0, "unpack");
    assert!(shared.join("shared").is_file(), "the shared marker");
    // A private store of root's, for the refusal below.
    let private = stores.join("private-store");
    let private_s = private.display().to_string();
    as_root(
        &["image", "bootstrap", recipe_dir.to_str().unwrap()],
        &[("CBRUN_HOME", private_s.as_str())],
    )
    .assert_code(0, "root's private store");
    let snapshot = || {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "cd '{}' && find . -path ./tmp -prune -o -path ./logs -prune -o -name lock -prune -o -name gc.lock -prune -o -printf '%p %m %U %s\\n' | sort | sha256sum",
                shared.display()
            ))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = snapshot();
    drop(root);

    let nb = Ctx::new(Who::Delegated, "shared-store-nobody");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        nb.spawn_args(&args, env, None)
            .wait(Duration::from_secs(120))
    };
    let r = run(&["image", "ls"], &store_env);
    r.assert_code(0, "nobody lists the shared store");
    assert!(r.stdout.contains("group/tool"), "{}", r.show());
    // The attack: write everywhere from a sandbox on the shared image.
    let r = run(
        &[
            "sandbox",
            "run",
            "--image",
            &img,
            "--",
            "sh",
            "-c",
            "cat /opt/tool/version; echo pwned > /opt/tool/version; echo pwned >> /etc/group; \
             rm -rf /bin/ls; echo status=$?",
        ],
        &store_env,
    );
    r.assert_code(0, "nobody's sandbox on the owner's root");
    assert!(r.stdout.starts_with("v1\n"), "{}", r.show());
    assert!(
        r.stderr.contains("--for-user"),
        "the note says how to get a root of one's own\n{}",
        r.show()
    );
    // Store changes from nobody: each refused, naming the store.
    let recipe2 = nb.dir.join("mine.toml");
    fs::write(
        &recipe2,
        format!("base = \"{img}\"\ninstall_command = \"true\"\n"),
    )
    .unwrap();
    world_readable(&recipe2);
    for (what, args) in [
        ("build", vec!["image", "build", recipe2.to_str().unwrap()]),
        ("tag", vec!["image", "tag", &img, "mine/tool:1"]),
        ("rm", vec!["image", "rm", &img]),
        ("gc", vec!["image", "gc"]),
        (
            "bootstrap",
            vec!["image", "bootstrap", recipe_dir.to_str().unwrap()],
        ),
    ] {
        let r = run(&args, &store_env);
        assert_ne!(
            r.code,
            Some(0),
            "{what} into the shared store\n{}",
            r.show()
        );
        assert!(
            r.stderr.contains(&shared_s) && r.stderr.contains("read-only"),
            "{what}\n{}",
            r.show()
        );
    }
    assert_eq!(snapshot(), before, "the shared store is unchanged");
    // Root's private store: refused outright.
    let r = run(
        &["image", "ls"],
        &[("CBRUN_IMAGE_STORE", private_s.as_str())],
    );
    assert_ne!(r.code, Some(0), "{}", r.show());
    assert!(r.stderr.contains("not shared"), "{}", r.show());
    drop(nb);

    // A root of nobody's own: made by the owner, used without a note.
    let root = Ctx::new(Who::Root, "shared-store-root2");
    root.spawn_args(
        &["image", "unpack", &img, "--for-user", "nobody"]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
        &store_env,
        None,
    )
    .wait(Duration::from_secs(120))
    .assert_code(0, "unpack --for-user nobody");
    drop(root);
    let nb = Ctx::new(Who::Delegated, "shared-store-nobody2");
    let r = nb
        .spawn_args(
            &[
                "sandbox",
                "run",
                "--image",
                &img,
                "--",
                "sh",
                "-c",
                "echo changed > /opt/tool/version && cat /opt/tool/version",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
            &store_env,
            None,
        )
        .wait(Duration::from_secs(120));
    r.assert_code(0, "nobody's own root");
    assert_eq!(r.stdout, "changed\n", "{}", r.show());
    assert!(!r.stderr.contains("--for-user"), "{}", r.show());
    nb.assert_clean("shared store");
    let v = fs::read_dir(shared.join("rootfs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    assert!(v.iter().any(|n| n.ends_with(".u65534g65534")), "{v:?}");
    let _ = fs::remove_dir_all(&stores);
}

/// A TLS-intercepting proxy, in small: an HTTPS server on 127.0.0.1 whose
/// certificate a private CA signed. Python inside the build sandbox
/// refuses it without `--ca-bundle` (the install fails, once: no retry
/// asked) and fetches from it with the bundle; in a solve sandbox, a real
/// TLS handshake on the sandbox's own loopback succeeds only with the
/// bundle, which the trial record mentions. Root and rootless.
#[test]
fn a_private_ca_is_trusted_over_real_tls_only_with_the_bundle() {
    if !imgkit::require_tool("openssl", "test CA") || !imgkit::require_tool("python3", "TLS client")
    {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "ca-tls");
        let h = home(&ctx);
        let ca = imgkit::TestCa::new(&ctx.dir.join("ca"));
        let Some(pyroot) = imgkit::python_rootfs(&ctx.dir.join("pyroot")) else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no host Python root"
            );
            eprintln!("note: no /usr/bin/python3 with its standard library; skipped");
            return;
        };
        // A user's own root folder (cbrun makes its mount points in it).
        imgkit::sh(&format!(
            "chown -R {0}:{0} '{1}'",
            who.uid(),
            pyroot.display()
        ));
        cb(
            &ctx,
            &h,
            &[
                "image",
                "import",
                pyroot.to_str().unwrap(),
                "--tag",
                "pyroot:latest",
            ],
        )
        .assert_code(0, "import the Python root");
        let server = imgkit::HttpsServer::start(&ca);
        let recipe = ctx.dir.join("fetch.toml");
        fs::write(
            &recipe,
            format!(
                "base = \"pyroot:latest\"\nname = \"ca/fetch\"\n\
                 install_command = \"mkdir -p /opt && python3 -c 'import urllib.request as u; print(u.urlopen(\\\"https://127.0.0.1:{}/\\\", timeout=20).status)' > /opt/fetched\"\n",
                server.port
            ),
        )
        .unwrap();
        world_readable(&recipe);
        let r = cb(
            &ctx,
            &h,
            &[
                "image",
                "build",
                recipe.to_str().unwrap(),
                "--attempts",
                "1",
                "--json",
            ],
        );
        assert_ne!(r.code, Some(0), "trusted without the bundle\n{}", r.show());
        let log = fs::read_dir(Path::new(&h).join("logs"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .map(|e| fs::read_to_string(e.path()).unwrap())
            .collect::<String>();
        assert!(
            log.contains("CERTIFICATE_VERIFY_FAILED"),
            "refused for the certificate\n{log}"
        );
        let r = cb(
            &ctx,
            &h,
            &[
                "image",
                "build",
                recipe.to_str().unwrap(),
                "--attempts",
                "1",
                "--json",
                "--ca-bundle",
                ca.ca().to_str().unwrap(),
            ],
        );
        r.assert_code(0, "build with the CA");
        let rep = r.stdout_json();
        assert_eq!(rep["ca_bundle"]["certificates"], 1, "{}", r.show());
        let img = rep["image"].as_str().unwrap().to_owned();
        let seen = ctx
            .spawn_args(
                &[
                    "sandbox",
                    "run",
                    "--image",
                    &img,
                    "--",
                    "cat",
                    "/opt/fetched",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
                &[("CBRUN_HOME", h.as_str())],
                None,
            )
            .wait(Duration::from_secs(60));
        assert_eq!(seen.stdout, "200\n", "{}", seen.show());
        drop(server);

        // The solve sandbox: its own loopback, a server there, a client.
        let case = imgkit::case_copy(&ctx.dir, "ok-minimal");
        let pem = fs::read_to_string(ca.dir.join("srv.pem")).unwrap();
        let key = fs::read_to_string(ca.dir.join("srv.key")).unwrap();
        let agent = ctx.dir.join("tls-agent.toml");
        fs::write(
            &agent,
            format!(
                "name = \"tls-agent\"\n\
                 command = \"python3 -c \\\"$TLS_TEST\\\" > /app/tls.txt 2>&1; echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n\
                 [env]\nSRV_PEM = '''\n{pem}'''\nSRV_KEY = '''\n{key}'''\nTLS_TEST = '''\n{TLS_TEST}'''\n"
            ),
        )
        .unwrap();
        world_readable(&agent);
        for (with, want) in [(false, "refused"), (true, "fetched ok")] {
            let out = ctx.out.join(format!("trial-{with}"));
            let mut args = vec![
                "solve",
                case.to_str().unwrap(),
                "--rootfs",
                pyroot.to_str().unwrap(),
                "--agent",
                agent.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--json",
            ];
            let ca_s = ca.ca().display().to_string();
            if with {
                args.extend(["--ca-bundle", ca_s.as_str()]);
            }
            let r = cb(&ctx, &h, &args);
            let got = fs::read_to_string(out.join("workspace/tls.txt")).unwrap_or_default();
            assert!(
                got.starts_with(want),
                "with bundle: {with}\n{got}\n{}",
                r.show()
            );
            // `solve --json` prints only its report (the record's solve half).
            let rep = r.stdout_json();
            let said: Vec<&str> = rep["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|w| w.as_str())
                .filter(|w| w.contains("CA bundle") && w.contains(&ca_s))
                .collect();
            assert_eq!(said.len(), usize::from(with), "recorded\n{}", r.show());
        }
        ctx.assert_clean("CA over TLS");
    }
}

/// The solve sandbox's TLS check: a server on its own 127.0.0.1 with the
/// test certificate, a client with Python's default trust.
const TLS_TEST: &str = r#"
import os, socket, ssl, threading, urllib.request
open('/tmp/s.pem', 'w').write(os.environ['SRV_PEM'])
open('/tmp/s.key', 'w').write(os.environ['SRV_KEY'])
sc = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
sc.load_cert_chain('/tmp/s.pem', '/tmp/s.key')
ls = socket.socket()
ls.bind(('127.0.0.1', 0))
ls.listen(1)
def serve():
    c, _ = ls.accept()
    try:
        s = sc.wrap_socket(c, server_side=True)
        s.recv(4096)
        s.sendall(b'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok')
        s.close()
    except Exception:
        c.close()
threading.Thread(target=serve, daemon=True).start()
try:
    r = urllib.request.urlopen('https://127.0.0.1:%d/' % ls.getsockname()[1], timeout=10)
    print('fetched', r.read().decode())
except Exception as e:
    print('refused', type(e).__name__, e)
"#;

/// The import probe on a host-style root (`--rootfs DIR`, a system Python
/// with the banned upstream installed system-wide, as a host with `tomli`
/// would be): importable in a plain sandbox on that root (the attack
/// works without the mask), not importable by the agent, and recorded in
/// trial.json with where it was. Root and rootless.
#[test]
fn a_banned_module_installed_in_a_host_style_root_is_masked_and_recorded() {
    if !imgkit::require_tool("python3", "the Python root") {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "import-probe");
        let Some(pyroot) = imgkit::python_rootfs(&ctx.dir.join("pyroot")) else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no host Python root"
            );
            eprintln!("note: no /usr/bin/python3 with its standard library; skipped");
            return;
        };
        let site = imgkit::plant_fake_banned(&pyroot);
        imgkit::sh(&format!(
            "chown -R {0}:{0} '{1}'",
            who.uid(),
            pyroot.display()
        ));
        let site_in = Path::new("/").join(site.strip_prefix(&pyroot).unwrap());
        let run = |args: &[&str]| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            ctx.spawn_args(&args, &[], None)
                .wait(Duration::from_secs(300))
        };
        // Without the mask: the banned upstream imports.
        let r = run(&[
            "sandbox",
            "run",
            "--rootfs",
            pyroot.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            "import fakeban, fakebanmod; print(fakeban.ANSWER + fakebanmod.ANSWER)",
        ]);
        r.assert_code(0, "plain sandbox on the root");
        assert_eq!(r.stdout, "84\n", "{}", r.show());
        // The agent: imports both by computed names (past the static scan).
        let case = imgkit::case_copy(&ctx.dir, "img-apt-pip");
        let agent = ctx.dir.join("importer.toml");
        fs::write(
            &agent,
            "name = \"importer\"\n\
             command = \"for m in fakeban fakebanmod; do python3 -c \\\"import importlib; importlib.import_module('$m'); print('$m imported')\\\" >> /app/probe.txt 2>&1; done; \
             echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n",
        )
        .unwrap();
        world_readable(&agent);
        let out = ctx.out.join("trial");
        let r = run(&[
            "trial",
            case.to_str().unwrap(),
            "--rootfs",
            pyroot.to_str().unwrap(),
            "--agent",
            agent.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let probe = fs::read_to_string(out.join("workspace/probe.txt")).unwrap_or_default();
        assert!(
            !probe.contains("imported")
                && probe
                    .lines()
                    .filter(|l| l.starts_with("ModuleNotFoundError: No module named"))
                    .count()
                    == 2,
            "the agent imported the banned upstream:\n{probe}\n{}",
            r.show()
        );
        let rec: Value = serde_json::from_str(
            &fs::read_to_string(out.join("trial.json"))
                .unwrap_or_else(|e| panic!("trial.json: {e}\n{}", r.show())),
        )
        .unwrap();
        let masked: Vec<(String, String)> = rec["masked_imports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["module"].as_str().unwrap().to_owned(),
                    m["path"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            masked,
            [
                (
                    "fakeban".to_owned(),
                    site_in.join("fakeban").display().to_string()
                ),
                (
                    "fakebanmod".to_owned(),
                    site_in.join("fakebanmod.py").display().to_string()
                )
            ],
            "{rec}"
        );
        // The root folder itself is untouched: the mask is a bind.
        assert_eq!(
            fs::read_to_string(site.join("fakeban/__init__.py")).unwrap(),
            "ANSWER = 42\n"
        );
        ctx.assert_clean("import probe");
    }
}
