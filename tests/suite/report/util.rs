//! Temporary folders and running cbrun.

use super::*;

/// A temporary folder, removed on drop.
pub struct Tmp(PathBuf);

impl Tmp {
    pub fn new(tag: &str) -> Tmp {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "cbrun-report-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `cbrun ARGS`, killed after 60 s (a report that hangs is a failure).
pub fn cbrun(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut child = Command::new(CBRUN)
        .args(args.iter().map(|a| a.as_ref()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "cbrun {:?} hung; stderr: {}",
                args.iter()
                    .map(|a| a.as_ref().to_owned())
                    .collect::<Vec<_>>(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn ok(o: Output) -> Output {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    o
}

pub fn report_json(dirs: &[&Path], extra: &[&str]) -> (Value, String) {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"report"];
    for d in dirs {
        args.push(d);
    }
    args.push(&"--format");
    args.push(&"json");
    for e in extra {
        args.push(e);
    }
    let o = ok(cbrun(&args));
    (serde_json::from_slice(&o.stdout).unwrap(), stderr(&o))
}

pub fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

#[track_caller]
pub fn assert_close(a: &Value, b: f64) {
    assert!(close(a, b), "{a} != {b}");
}
