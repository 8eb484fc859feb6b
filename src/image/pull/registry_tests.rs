//! Pulls from a real registry: Debian's `docker-registry` on 127.0.0.1,
//! images pushed with `skopeo` from OCI layouts written here by hand.
//! Skipped (with a note) when either tool is missing; CI installs them
//! (`apt-get install -y docker-registry skopeo`).

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::mock_tests::{fast, temp_dir, DirSink};
use super::*;
use crate::image::digest::Digest;

const REGISTRY: &str = "/usr/bin/docker-registry";

fn tool(name: &str) -> Option<PathBuf> {
    let candidates = [PathBuf::from(name)].into_iter().chain(
        ["/usr/bin", "/usr/local/bin", "/usr/sbin"]
            .iter()
            .map(|d| Path::new(d).join(name)),
    );
    candidates
        .into_iter()
        .find(|p| p.is_absolute() && p.is_file())
}

/// `docker-registry serve` on 127.0.0.1:<free port>, killed on drop.
struct Registry {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Registry {
    fn start(bin: &Path) -> Registry {
        let dir = temp_dir("registry");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.join("config.yml");
        fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.join("storage").display()
            ),
        )
        .unwrap();
        let log = fs::File::create(dir.join("registry.log")).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let mut r = Registry { child, port, dir };
        r.wait_ready();
        r
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!(
                    "docker-registry exited ({st}): {}",
                    fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
                );
            }
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.write_all(b"GET /v2/ HTTP/1.0\r\n\r\n");
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                if out.starts_with("HTTP/1.") && out.contains(" 200 ") {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry did not come up on port {}", self.port);
    }

    fn host(&self) -> String {
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

/// An OCI image layout written by hand.
struct Layout {
    dir: PathBuf,
    refs: Vec<String>,
}

struct Built {
    manifest: Vec<u8>,
    config: Digest,
    layers: Vec<Digest>,
}

impl Layout {
    fn new() -> Layout {
        let dir = temp_dir("layout");
        fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        Layout {
            dir,
            refs: Vec::new(),
        }
    }

    fn blob(&self, data: &[u8]) -> (Digest, usize) {
        let d = Digest::of_bytes(data);
        fs::write(self.dir.join("blobs/sha256").join(d.hex()), data).unwrap();
        (d, data.len())
    }

    /// A gzip'd tar of a small tree holding `marker`.
    fn layer(&self, marker: &str) -> (Digest, usize, Digest) {
        let tree = temp_dir("tree");
        fs::create_dir_all(tree.join("etc")).unwrap();
        fs::write(tree.join("etc/marker"), marker).unwrap();
        fs::write(tree.join("hello.txt"), "hello from cbrun\n").unwrap();
        let tar = Command::new("tar")
            .args([
                "--sort=name",
                "--mtime=@0",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "-C",
            ])
            .arg(&tree)
            .args(["-cf", "-", "."])
            .output()
            .expect("tar");
        assert!(
            tar.status.success(),
            "tar: {}",
            String::from_utf8_lossy(&tar.stderr)
        );
        let _ = fs::remove_dir_all(&tree);
        let mut gz = Command::new("gzip")
            .args(["-n", "-c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("gzip");
        let mut stdin = gz.stdin.take().unwrap();
        let raw = tar.stdout.clone();
        let writer = std::thread::spawn(move || stdin.write_all(&raw));
        let out = gz.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(out.status.success());
        let (d, n) = self.blob(&out.stdout);
        (d, n, Digest::of_bytes(&tar.stdout))
    }

    fn image(&self, arch: &str, marker: &str) -> Built {
        let (ld, ln, diff_id) = self.layer(marker);
        let config = format!(
            r#"{{"architecture":"{arch}","os":"linux","config":{{"Cmd":["/bin/sh"]}},"rootfs":{{"type":"layers","diff_ids":["{diff_id}"]}}}}"#
        );
        let (cd, cn) = self.blob(config.as_bytes());
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"{OCI_CONFIG}","digest":"{cd}","size":{cn}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{ld}","size":{ln}}}]}}"#
        );
        self.blob(manifest.as_bytes());
        Built {
            manifest: manifest.into_bytes(),
            config: cd,
            layers: vec![ld],
        }
    }

    /// Name `bytes` (a manifest or an index) `tag` in index.json.
    fn tag(&mut self, tag: &str, media_type: &str, bytes: &[u8]) {
        let (d, n) = self.blob(bytes);
        self.refs.push(format!(
            r#"{{"mediaType":"{media_type}","digest":"{d}","size":{n},"annotations":{{"org.opencontainers.image.ref.name":"{tag}"}}}}"#
        ));
        fs::write(
            self.dir.join("index.json"),
            format!(
                r#"{{"schemaVersion":2,"manifests":[{}]}}"#,
                self.refs.join(",")
            ),
        )
        .unwrap();
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn skopeo_copy(skopeo: &Path, extra: &[&str], src: String, dst: String) {
    let out = Command::new(skopeo)
        .args([
            "--insecure-policy",
            "copy",
            "--dest-tls-verify=false",
            "--retry-times",
            "2",
        ])
        .args(extra)
        .arg(&src)
        .arg(&dst)
        .stdin(Stdio::null())
        .output()
        .expect("run skopeo");
    assert!(
        out.status.success(),
        "skopeo copy {src} {dst}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn pull_from_docker_registry_pushed_with_skopeo() {
    let (Some(reg_bin), Some(skopeo)) = (tool(REGISTRY), tool("skopeo")) else {
        crate::testing::missing(
            "docker-registry and skopeo (apt-get install -y docker-registry skopeo)",
        );
        return;
    };
    let reg = Registry::start(&reg_bin);
    let mut layout = Layout::new();
    let single = layout.image("amd64", "single");
    layout.tag("1", OCI_MANIFEST, &single.manifest);
    let amd = layout.image("amd64", "amd");
    let arm = layout.image("arm64", "arm");
    let index = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[{{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":{},"platform":{{"architecture":"amd64","os":"linux"}}}},{{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":{},"platform":{{"architecture":"arm64","os":"linux","variant":"v8"}}}}]}}"#,
        Digest::of_bytes(&amd.manifest),
        amd.manifest.len(),
        Digest::of_bytes(&arm.manifest),
        arm.manifest.len()
    );
    layout.tag("multi", OCI_INDEX, index.as_bytes());
    let oci = |tag: &str| format!("oci:{}:{tag}", layout.dir.display());
    let dst = |tag: &str| format!("docker://{}/test/tiny:{tag}", reg.host());
    skopeo_copy(&skopeo, &[], oci("1"), dst("1"));
    skopeo_copy(&skopeo, &["--all"], oci("multi"), dst("multi"));
    skopeo_copy(&skopeo, &["--format", "v2s2"], oci("1"), dst("docker"));
    let opts = PullOptions {
        insecure: true,
        ..PullOptions::default()
    };
    let h = reg.host();

    // A single-platform OCI image, byte for byte.
    let sink = DirSink::new("real", false);
    let p = pull_with(&format!("{h}/test/tiny:1"), &sink, &opts, fast()).unwrap();
    assert_eq!(p.manifest_bytes, single.manifest);
    assert_eq!(p.manifest_digest, Digest::of_bytes(&single.manifest));
    assert_eq!(p.manifest_media_type, OCI_MANIFEST);
    assert_eq!(p.config_digest, single.config);
    assert_eq!(p.layers, single.layers);
    assert_eq!(p.blobs_skipped, 0);
    for d in std::iter::once(&p.config_digest).chain(&p.layers) {
        let stored = sink.blob(d);
        assert_eq!(Digest::of_bytes(&stored), *d);
        assert_eq!(
            stored,
            fs::read(layout.dir.join("blobs/sha256").join(d.hex())).unwrap()
        );
    }

    // Again: everything already there.
    let again = pull_with(&format!("{h}/test/tiny:1"), &sink, &opts, fast()).unwrap();
    assert_eq!(again.blobs_skipped, 2);
    assert_eq!(again.bytes_downloaded, single.manifest.len() as u64);

    // A partial download left by an earlier run is resumed (the registry
    // honours Range: only the rest of the layer comes over the wire).
    let sink = DirSink::new("real-partial", true);
    let layer = fs::read(layout.dir.join("blobs/sha256").join(single.layers[0].hex())).unwrap();
    let part = sink.partial_path(&single.layers[0]).unwrap();
    fs::create_dir_all(part.parent().unwrap()).unwrap();
    let half = layer.len() / 2;
    fs::write(&part, &layer[..half]).unwrap();
    let p3 = pull_with(&format!("{h}/test/tiny:1"), &sink, &opts, fast()).unwrap();
    assert_eq!(sink.blob(&single.layers[0]), layer);
    let config_len = sink.blob(&single.config).len();
    assert_eq!(
        p3.bytes_downloaded,
        (single.manifest.len() + config_len + layer.len() - half) as u64
    );
    assert!(!part.exists());

    // By digest.
    let by_digest = format!("{h}/test/tiny@{}", p.manifest_digest);
    let p2 = pull_with(&by_digest, &sink, &opts, fast()).unwrap();
    assert_eq!(p2.manifest_digest, p.manifest_digest);

    // The multi-arch index: the host's platform, or the one asked for.
    let sink = DirSink::new("real-multi", false);
    let p = pull_with(&format!("{h}/test/tiny:multi"), &sink, &opts, fast()).unwrap();
    assert_eq!(p.index_digest, Some(Digest::of_bytes(index.as_bytes())));
    let want = if host_arch() == "arm64" { &arm } else { &amd };
    if ["amd64", "arm64"].contains(&host_arch()) {
        assert_eq!(p.manifest_bytes, want.manifest);
        assert_eq!(p.config_digest, want.config);
    }
    let arm_opts = PullOptions {
        platform: Some(("linux".into(), "arm64".into(), Some("v8".into()))),
        ..opts.clone()
    };
    let p = pull_with(&format!("{h}/test/tiny:multi"), &sink, &arm_opts, fast()).unwrap();
    assert_eq!(p.manifest_bytes, arm.manifest);
    assert_eq!(p.layers, arm.layers);
    assert!(sink.has_blob(&arm.layers[0]));

    // Docker schema 2, as skopeo converted it.
    let sink = DirSink::new("real-docker", false);
    let p = pull_with(&format!("{h}/test/tiny:docker"), &sink, &opts, fast()).unwrap();
    assert_eq!(p.manifest_media_type, DOCKER_MANIFEST);
    assert_eq!(p.layers.len(), 1);
    for d in std::iter::once(&p.config_digest).chain(&p.layers) {
        assert_eq!(Digest::of_bytes(&sink.blob(d)), *d);
    }

    // Errors from a real registry read as one line.
    let e = pull_with(&format!("{h}/test/tiny:nope"), &sink, &opts, fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "pull {h}/test/tiny:nope: manifest: 404 Not Found (MANIFEST_UNKNOWN: manifest unknown)"
        )
    );
    let e = pull_with(&format!("{h}/test/missing:1"), &sink, &opts, fast()).unwrap_err();
    assert_eq!(e.status(), Some(404), "{e}");
}
