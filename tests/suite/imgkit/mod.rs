//! Helpers for the image-build, import-probe and shared-store tests: a test
//! CA with a server certificate (openssl), an HTTPS server on loopback
//! (`openssl s_server`), a small root filesystem holding the host's Python
//! (for probing without a network), and stores owned by a test user.
//!
//! In CI (`CI=true`) a missing tool is a failure, never a skip.

#![allow(dead_code)]

pub mod debian;

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `prog` can run here; in CI its absence fails the test.
pub fn require_tool(prog: &str, why: &str) -> bool {
    let ok = Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{prog} is missing ({why}); CI must have it"
        );
        eprintln!("note: {prog} missing ({why}); skipped");
    }
    ok
}

pub fn sh(script: &str) {
    let out = Command::new("sh").args(["-c", script]).output().unwrap();
    assert!(
        out.status.success(),
        "{script}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn world_readable(p: &Path) {
    sh(&format!("chmod -R a+rX '{}'", p.display()));
}

/// A CA and a server certificate for `localhost` and 127.0.0.1, in `dir`:
/// `ca.pem`, `srv.pem`, `srv.key` (all world-readable: test data).
pub struct TestCa {
    pub dir: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path) -> TestCa {
        fs::create_dir_all(dir).unwrap();
        let d = dir.display();
        sh(&format!(
            "cd '{d}' && \
             openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
               -subj /CN=cbrun-test-ca -addext basicConstraints=critical,CA:TRUE 2>/dev/null && \
             openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null && \
             printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext && \
             openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem \
               -days 2 -extfile ext 2>/dev/null && chmod 644 ca.pem srv.pem srv.key"
        ));
        world_readable(dir);
        TestCa {
            dir: dir.to_path_buf(),
        }
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The CA's PEM text.
    pub fn ca_pem(&self) -> String {
        fs::read_to_string(self.ca()).unwrap()
    }
}

/// `openssl s_server -www` on 127.0.0.1, killed on drop.
pub struct HttpsServer {
    child: Child,
    pub port: u16,
}

impl HttpsServer {
    pub fn start(ca: &TestCa) -> HttpsServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(ca.dir.join("srv.pem"))
            .arg("-key")
            .arg(ca.dir.join("srv.key"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server");
        let end = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < end, "s_server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        HttpsServer { child, port }
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A root filesystem holding the host's Python (binary, standard library,
/// the libraries they load) and a static busybox for `/bin/sh`: enough
/// for the import probe and small agents, made in a second, no network.
/// `None` (or a failure in CI) when the host lacks them.
pub fn python_rootfs(dir: &Path) -> Option<PathBuf> {
    let py = fs::canonicalize("/usr/bin/python3").ok()?;
    let ver = py.file_name()?.to_str()?.to_owned(); // python3.11
    let stdlib = Path::new("/usr/lib").join(&ver);
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())?;
    if !stdlib.is_dir() {
        return None;
    }
    let d = dir.display();
    sh(&format!(
        "set -e; mkdir -p '{d}' && cd '{d}' && \
         mkdir -p usr/bin usr/lib bin tmp proc dev sys etc root home/user app logs environment tests usr/local/lib/{ver}/dist-packages && \
         cp '{py}' usr/bin/{ver} && ln -s {ver} usr/bin/python3 && \
         cp -a '{std}' usr/lib/ && rm -rf usr/lib/{ver}/test usr/lib/{ver}/idlelib usr/lib/{ver}/tkinter && \
         (ldd '{py}'; for f in usr/lib/{ver}/lib-dynload/*.so; do ldd \"$f\"; done) 2>/dev/null \
           | grep -o '/[^ ]*' | sort -u | while read l; do mkdir -p \".$(dirname $l)\"; cp -L \"$l\" \".$l\"; done; \
         cp '{bb}' bin/busybox && for a in sh ls cat grep echo readlink env id find mkdir rm test head sed tr; do ln -s busybox bin/$a; done; \
         printf 'root:x:0:0:root:/root:/bin/sh\\nuser:x:1000:1000:user:/home/user:/bin/sh\\n' > etc/passwd; \
         printf 'root:x:0:\\nuser:x:1000:\\n' > etc/group",
        py = py.display(),
        std = stdlib.display(),
        bb = busybox.display()
    ));
    world_readable(dir);
    Some(dir.to_path_buf())
}

/// Plants the fake banned upstream of `img-apt-pip` (`fakeban`, a package,
/// and `fakebanmod`, a module) in a Python root's site directory.
pub fn plant_fake_banned(root: &Path) -> PathBuf {
    let site = fs::read_dir(root.join("usr/local/lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("dist-packages"))
        .find(|p| p.is_dir())
        .expect("a dist-packages folder");
    fs::create_dir_all(site.join("fakeban")).unwrap();
    fs::write(site.join("fakeban/__init__.py"), "ANSWER = 42\n").unwrap();
    fs::write(site.join("fakebanmod.py"), "ANSWER = 42\n").unwrap();
    world_readable(&site);
    site
}

/// A copy of a fixture case in `dir`, readable by every test user.
pub fn case_copy(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cases")
        .join(name);
    let dst = dir.join(name);
    let st = Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    world_readable(&dst);
    dst
}

/// A directory owned by `uid`, mode 0755.
pub fn owned_dir(p: &Path, uid: u32) -> PathBuf {
    fs::create_dir_all(p).unwrap();
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
    p.to_path_buf()
}
