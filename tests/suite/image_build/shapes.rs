//! A published-shape recipe on a bootstrapped Debian base, and a shared store built by root used read-only by nobody.

use super::*;

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
