//! Pulling from a registry on loopback.

use super::*;

// ---------------------------------------------------------------------------
// 3. pull from a registry on loopback

/// docker/distribution serving on 127.0.0.1; killed on drop.
struct Registry {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Registry {
    fn start(bin: &Path) -> Registry {
        let dir = PathBuf::from(format!("/tmp/cbrun-it-registry-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("data")).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("data").display()
        );
        fs::write(dir.join("config.yml"), config).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(File::create(dir.join("log")).unwrap())
            .stderr(File::create(dir.join("log.err")).unwrap())
            .spawn()
            .expect("starting docker-registry");
        let mut reg = Registry { child, dir, port };
        let up = wait_until(Duration::from_secs(15), || {
            reg.get("/v2/")
                .map(|s| s.starts_with("HTTP/1.0 200") || s.starts_with("HTTP/1.1 200"))
                .unwrap_or(false)
        });
        if !up {
            let status = reg.child.try_wait().ok().flatten();
            panic!(
                "docker-registry did not answer GET /v2/ on 127.0.0.1:{port} (exited: {status:?}): {}",
                fs::read_to_string(reg.dir.join("log.err")).unwrap_or_default()
            );
        }
        reg
    }

    fn get(&self, path: &str) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// "N blob(s) already present" from a pull's stderr.
fn blobs_already_present(stderr: &str) -> Option<u64> {
    let i = stderr.find(" blob(s) already present")?;
    stderr[..i]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn pull_from_a_loopback_registry() {
    const T: &str = "pull_from_a_loopback_registry";
    let bb = need!(busybox(), T, "a static busybox");
    let skopeo = need!(find_tool("skopeo"), T, "skopeo");
    let regbin = need!(
        find_tool("docker-registry"),
        T,
        "docker-registry (Debian's docker/distribution)"
    );
    let reg = Registry::start(&regbin);
    let addr = reg.addr();
    let remote = format!("{addr}/test/bb:1");
    {
        let ctx = Ctx::new(Who::Root, "img-pull");
        let home = store_home(&ctx, "store");
        let root = busybox_rootfs(&ctx, "rootfs", &bb);
        import(&ctx, &home, &root, "bb:1", &[]);
        let layout = ctx.out.join("bb-oci");
        image_ok(
            &ctx,
            &home,
            &[
                "export",
                "bb:1",
                "--format",
                "oci-dir",
                "--output",
                layout.to_str().unwrap(),
            ],
        );
        let (ok, _, err) = host_cmd(
            &skopeo,
            &[
                "--insecure-policy",
                "copy",
                "-q",
                "--dest-tls-verify=false",
                &format!("oci:{}:1", layout.display()),
                &format!("docker://{remote}"),
            ],
        );
        assert!(ok, "skopeo push to the registry: {err}");
        assert!(reg
            .get("/v2/test/bb/tags/list")
            .unwrap_or_default()
            .contains("\"1\""));

        // Pull into a fresh store and run it.
        let home2 = store_home(&ctx, "store2");
        let p = image_ok(
            &ctx,
            &home2,
            &["pull", "--insecure", &remote, "--tag", "pulled:1"],
        );
        let (name, digest) = p.stdout.trim().split_once(' ').unwrap();
        assert_eq!(name, "pulled:1", "{}", p.show());
        assert!(is_digest(digest), "{}", p.show());
        assert!(p.stderr.contains("cbrun: pulled"), "{}", p.show());
        assert_eq!(blobs_already_present(&p.stderr), Some(0), "{}", p.show());
        let l = list(&ctx, &home2);
        assert_eq!(manifest_of(&l["pulled:1"]), digest);
        assert!(
            l["pulled:1"]["source"].as_str().unwrap().contains(&remote),
            "{l:?}"
        );
        let r = run_image(&ctx, &home2, "pulled:1", &[], &["echo", "ok"]);
        r.assert_code(0, "run the pulled image");
        assert_eq!(r.stdout, "ok\n", "{}", r.show());

        // Again, under the reference's own name: nothing but the manifest
        // is fetched.
        let p2 = image_ok(&ctx, &home2, &["pull", "--insecure", &remote]);
        assert_eq!(
            p2.stdout.trim(),
            format!("{remote} {digest}"),
            "{}",
            p2.show()
        );
        assert_eq!(
            blobs_already_present(&p2.stderr),
            Some(2),
            "config and layer: {}",
            p2.show()
        );
        assert_eq!(blobs(&home2).len(), 3);

        // A missing tag: one line, fast, nothing stored.
        let t = Instant::now();
        let miss = image(
            &ctx,
            &home2,
            &["pull", "--insecure", &format!("{addr}/test/bb:nope")],
        );
        assert_one_line_error(&miss, "pull of a missing tag", &["test/bb:nope"]);
        assert!(t.elapsed() < Duration::from_secs(20), "{}", miss.show());
        let miss = image(
            &ctx,
            &home2,
            &["pull", "--insecure", &format!("{addr}/test/nosuchrepo:1")],
        );
        assert_one_line_error(
            &miss,
            "pull of a missing repository",
            &["test/nosuchrepo:1"],
        );
        assert_eq!(list(&ctx, &home2).len(), 2);

        // Plain http to anything but loopback is refused before connecting.
        for bad in ["10.255.255.1:5000/x:1", "registry.example.invalid:5000/x:1"] {
            let t = Instant::now();
            let r = image(&ctx, &home2, &["pull", "--insecure", bad]);
            assert_one_line_error(&r, "pull --insecure from a remote host", &[bad, "loopback"]);
            assert!(
                t.elapsed() < Duration::from_secs(3),
                "not refused up front\n{}",
                r.show()
            );
        }
        ctx.assert_clean("pulls as root");
    }
    // Rootless: nobody pulls into its own store and runs the image.
    {
        let ctx = Ctx::new(Who::Delegated, "img-pull-nobody");
        let home = store_home(&ctx, "store");
        let p = image_ok(
            &ctx,
            &home,
            &["pull", "--insecure", &remote, "--tag", "mine:1"],
        );
        assert!(p.stdout.starts_with("mine:1 sha256:"), "{}", p.show());
        let r = run_image(&ctx, &home, "mine:1", &[], &["sh", "-c", "echo ok; id -u"]);
        r.assert_code(0, "nobody runs the pulled image");
        assert_eq!(r.stdout, "ok\n0\n", "{}", r.show());
        ctx.assert_clean("a pull and a run as nobody");
    }
    drop(reg);
}
