//! A Debian base bootstrapped with mmdebstrap from a loopback apt
//! repository, and a PyPI "simple" index, both served by one static HTTP
//! server on 127.0.0.1 (the tests touch nothing else).
//!
//! The apt repository is made from `.deb` files that CI downloads
//! beforehand (`tests/suite/imgkit/fetch-debs.sh`, run by `.ci/run`; the
//! directory is `$CBRUN_TEST_DEBS`, else `/var/cache/cbrun-ci/debs`). The
//! wheels are written by `mkwheels.py` (pure-Python wheels are zip files).
//! The bootstrapped base is kept as an OCI archive in `$CBRUN_TEST_CACHE`
//! (else `/var/cache/cbrun-ci/images`), keyed by the .deb file names and
//! the recipe, so a second run imports it in seconds instead of running
//! mmdebstrap again.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{require_tool, sh, world_readable};

const KIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/suite/imgkit");

/// The recipe of the base (`@MIRROR@` is the loopback mirror). Debian's
/// essential set and apt: what `apt-get install` in a recipe needs.
const BASE_RECIPE: &str = "name = \"debian-apt-test\"\ntag = \"latest\"\nkind = \"mmdebstrap\"\n\
suite = \"bookworm\"\nmirror = \"@MIRROR@\"\ntrusted_mirror = true\nvariant = \"apt\"\n\
source_date_epoch = 1700000000\n\
env = [\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\", \"LANG=C.UTF-8\"]\n\
cmd = [\"/bin/bash\"]\n";

fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// The downloaded .debs, or `None` (a failure in CI) when they are not there.
pub fn debs_dir() -> Option<PathBuf> {
    let d = std::env::var_os("CBRUN_TEST_DEBS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/cbrun-ci/debs"));
    let has = |prefix: &str| {
        fs::read_dir(&d)
            .map(|r| {
                r.flatten().any(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.starts_with(prefix) && n.ends_with(".deb")
                })
            })
            .unwrap_or(false)
    };
    let ok = has("apt_") && has("python3-pip_") && has("python3-pytest_") && has("dpkg_");
    if !ok {
        assert!(
            !in_ci(),
            "{}: no .debs for the loopback apt repository; .ci/run must run tests/suite/imgkit/fetch-debs.sh",
            d.display()
        );
        eprintln!(
            "note: {} lacks the .debs (run tests/suite/imgkit/fetch-debs.sh); skipped",
            d.display()
        );
        return None;
    }
    Some(d)
}

/// Whether the tools the Debian tests need are here (in CI: must be).
pub fn tools_present() -> bool {
    require_tool("mmdebstrap", "bootstrapping the Debian base")
        & require_tool("dpkg-deb", "indexing the apt repository")
        & require_tool("python3", "the loopback HTTP server and the wheels")
}

/// `python3 -m http.server` on 127.0.0.1 (a port the kernel picks),
/// serving `root/debian` (the apt repository) and `root/simple` (the
/// index); killed on drop.
pub struct LoopbackIndex {
    child: Child,
    pub port: u16,
    pub root: PathBuf,
}

impl LoopbackIndex {
    pub fn start(debs: &Path, root: &Path) -> LoopbackIndex {
        fs::create_dir_all(root).unwrap();
        sh(&format!(
            "'{KIT}/mkrepo.sh' '{}' '{}' && python3 '{KIT}/mkwheels.py' '{}'",
            debs.display(),
            root.display(),
            root.display()
        ));
        world_readable(root);
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("http.server said {line:?}"));
        let end = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < end, "http.server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        LoopbackIndex {
            child,
            port,
            root: root.to_path_buf(),
        }
    }

    pub fn apt_mirror(&self) -> String {
        format!("http://127.0.0.1:{}/debian", self.port)
    }

    pub fn pip_index(&self) -> String {
        format!("http://127.0.0.1:{}/simple/", self.port)
    }
}

impl Drop for LoopbackIndex {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bootstrapped base as an OCI archive (world-readable): from the
/// cache, or made now with `cbrun` (root) and stored in the cache.
/// Returns the archive and whether it came from the cache.
pub fn cached_base(
    cbrun: &Path,
    debs: &Path,
    index: &LoopbackIndex,
    work: &Path,
) -> (PathBuf, bool) {
    let cache = std::env::var_os("CBRUN_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/cbrun-ci/images"));
    fs::create_dir_all(&cache).unwrap();
    let mut names: Vec<String> = fs::read_dir(debs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".deb"))
        .collect();
    names.sort();
    let key = {
        let out = Command::new("sha256sum")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                let mut i = c.stdin.take().unwrap();
                i.write_all(names.join("\n").as_bytes())?;
                i.write_all(BASE_RECIPE.as_bytes())?;
                drop(i);
                c.wait_with_output()
            })
            .unwrap();
        String::from_utf8_lossy(&out.stdout)[..16].to_owned()
    };
    let archive = cache.join(format!("debian-apt-test-{key}.oci.tar"));
    if archive.is_file() {
        return (archive, true);
    }
    let home = work.join("bootstrap-store");
    let recipe = work.join("debian-apt-test.toml");
    fs::create_dir_all(&home).unwrap();
    fs::write(
        &recipe,
        BASE_RECIPE.replace("@MIRROR@", &index.apt_mirror()),
    )
    .unwrap();
    let tmpdir = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let run = |args: &[&str]| {
        let out = Command::new(cbrun)
            .args(args)
            .env("CBRUN_HOME", &home)
            .env_remove("CBRUN_STATE_DIR")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cbrun {args:?}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "image",
        "bootstrap",
        recipe.to_str().unwrap(),
        "--tmpdir",
        tmpdir,
    ]);
    let partial = cache.join(format!(".debian-apt-test-{key}.{}.tmp", std::process::id()));
    run(&[
        "image",
        "export",
        "debian-apt-test:latest",
        "--format",
        "oci-archive",
        "-o",
        partial.to_str().unwrap(),
    ]);
    fs::rename(&partial, &archive).unwrap();
    world_readable(&cache);
    (archive, false)
}
