//! The result reporter, driven directly: a real interpreter with cbrun's
//! judge files, the record and token pipes at their fixed numbers, and a
//! hostile "workspace" doing its tampering in the test process itself.
//! These exercise the checks made inside the (would-be) sandbox, which the
//! host-side pre-check (`shadow`) never sees.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use super::{judge_python_env_at, judge_python_files_at};
use crate::judge::channel::{tally, Channel, ChannelReport, REPORT_FD, TOKEN_FD};

struct World {
    root: PathBuf,
    env: Vec<(String, String)>,
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn write(p: &Path, s: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, s).unwrap();
}

const RUNNER: &str = r#"
import importlib.util, sys, unittest
suite = unittest.TestSuite()
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("t_" + str(len(suite._tests)), path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(m))
r = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
sys.exit(0 if r.wasSuccessful() else 1)
"#;

const TESTS: &str = r#"
import unittest
import prod
class T(unittest.TestCase):
    def test_pass(self): self.assertEqual(prod.add(1, 1), 2)
    def test_fail(self): self.assertEqual(prod.add(2, 2), 4)
    @unittest.skip("later")
    def test_skip(self): pass
"#;

impl World {
    fn new(tag: &str, prod: &str) -> World {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "cbrun-reporter-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&root);
        let guard = root.join("guard");
        for f in judge_python_files_at(&guard.to_string_lossy()) {
            write(&guard.join(&f.name), &f.contents);
        }
        let env = judge_python_env_at(
            &guard.to_string_lossy(),
            &root.join("app").to_string_lossy(),
            &[],
            &[] as &[&str],
        );
        write(&root.join("app/src/prod.py"), prod);
        write(&root.join("tests/run.py"), RUNNER);
        write(&root.join("tests/test_t.py"), TESTS);
        World { root, env }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Runs `python` with the judge's environment and the test command's
    /// own `PYTHONPATH=app/src`, the channel attached; the verified channel.
    fn run(&self, python: &str, args: &[&str]) -> (Output, ChannelReport) {
        let mut ch = Channel::open().unwrap();
        let pass = ch.take_pass_fds();
        let (rec, tok) = (pass[0].fd.as_raw_fd(), pass[1].fd.as_raw_fd());
        let mut c = Command::new(python);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.p("home"));
        for (k, v) in self.env.iter().cloned().chain(Channel::env()) {
            c.env(k, v);
        }
        c.env("PYTHONPATH", self.p("app/src"))
            .current_dir(self.p("app"))
            .args(args);
        // SAFETY: only dup2 between fork and exec (async-signal-safe, no
        // allocation); dup2 clears close-on-exec on the new numbers.
        unsafe {
            c.pre_exec(move || {
                if libc::dup2(rec, REPORT_FD) < 0 || libc::dup2(tok, TOKEN_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = c.output().unwrap();
        drop(pass);
        (out, ch.finish(Duration::from_secs(5)))
    }

    fn unittest(&self) -> (Output, ChannelReport) {
        let run = self.p("tests/run.py");
        let t = self.p("tests/test_t.py");
        self.run("python3", &[run.to_str().unwrap(), t.to_str().unwrap()])
    }
}

fn python_ok() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import sys; assert sys.version_info >= (3, 8)"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        crate::testing::missing("python3 >= 3.8 (the reporter tests)");
    }
    ok
}

/// A named way to plant something in a world.
type Form<'a> = (&'a str, &'a dyn Fn(&World));

const GOOD: &str = "def add(a, b):\n    return a + b\n";
const STUB: &str = "def add(a, b):\n    return 0\n";

fn show(o: &Output, r: &ChannelReport) -> String {
    format!(
        "stdout: {}\nstderr: {}\nchannel: {r:#?}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_clean_unittest_run_reports_every_test() {
    if !python_ok() {
        return;
    }
    let w = World::new("clean", GOOD);
    let (o, r) = w.unittest();
    assert!(r.tampered.is_empty(), "{}", show(&o, &r));
    assert_eq!(r.sessions.len(), 1, "{}", show(&o, &r));
    let s = &r.sessions[0];
    assert!(s.exited);
    assert_eq!(s.runs.len(), 1);
    assert_eq!(s.runs[0].total, 3);
    let t = tally(&r);
    assert_eq!(
        (t.counts.passed, t.counts.skipped, t.counts.total),
        (2, 1, 3)
    );
    assert!(t.problems.is_empty(), "{:?}", t.problems);
    // A stub fails in the channel whatever it prints.
    let w = World::new(
        "stub",
        &format!("{STUB}print('Ran 3 tests in 0.0s')\nprint('OK')\n"),
    );
    let (o, r) = w.unittest();
    let t = tally(&r);
    assert_eq!(t.counts.failed, 2, "{}", show(&o, &r));
}

/// Each in-process attack and the finding it must produce.
#[test]
fn in_process_tampering_is_reported() {
    if !python_ok() {
        return;
    }
    let cases: &[(&str, &str, &str)] = &[
        (
            "TestCase.run patched",
            "import unittest\ndef run(self, result=None):\n    result.startTest(self); result.addSuccess(self); result.stopTest(self)\nunittest.TestCase.run = run\n",
            "unittest.case.TestCase.run was replaced",
        ),
        (
            "addFailure swallowed",
            "import unittest\nunittest.TestResult.addFailure = lambda *a: None\nunittest.TextTestResult.addFailure = lambda *a: None\n",
            "addFailure was replaced",
        ),
        (
            "a method added to a result class",
            "import unittest\nunittest.TextTestResult.wasSuccessful = lambda self: True\n",
            "TextTestResult.wasSuccessful was added",
        ),
        (
            "code object swapped in place",
            "import unittest\nunittest.case.TestCase._callTestMethod.__code__ = (lambda self, method: None).__code__\n",
            "_callTestMethod was replaced or patched",
        ),
        (
            "test method replaced",
            "def add(a, b):\n    import sys\n    T = sys._getframe(1).f_globals.get('T')\n    if T is not None: T.test_pass = lambda self: None\n    return 0\n",
            "runs code from",
        ),
        (
            "stdlib shadow through sys.path at import time",
            "import os, sys\nd = os.path.join(os.path.dirname(__file__), 'evil')\nos.makedirs(d, exist_ok=True)\nopen(os.path.join(d, 'difflib.py'), 'w').write('X = 1\\n')\nsys.path.insert(0, d)\nsys.modules.pop('difflib', None)\nimport difflib\n",
            "module difflib is loaded from",
        ),
        (
            "a planted sys.modules entry",
            "import sys, types\nsys.modules['pprint'] = types.ModuleType('pprint')\n",
            "module pprint has no file",
        ),
    ];
    for (what, patch, finding) in cases {
        let w = World::new("tamper", &format!("{STUB}{patch}"));
        let (o, r) = w.unittest();
        assert!(
            r.tampered.iter().any(|t| t.contains(finding)),
            "{what}: want {finding:?}\n{}",
            show(&o, &r)
        );
    }
}

#[test]
fn shadows_on_sys_path_are_found_inside_in_every_form() {
    if !python_ok() {
        return;
    }
    use std::os::unix::fs::symlink;
    let forms: &[Form] = &[
        ("sourceless .pyc", &|w| {
            let o = Command::new("python3")
                .args([
                    "-c",
                    "import py_compile,sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2])",
                ])
                .arg(w.p("app/fake.py"))
                .arg(w.p("app/src/unittest.pyc"))
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }),
        ("extension module", &|w| {
            write(
                &w.p("app/src/difflib.cpython-311-x86_64-linux-gnu.so"),
                "not an ELF",
            )
        }),
        ("namespace package", &|w| {
            fs::create_dir_all(w.p("app/src/unittest")).unwrap()
        }),
        ("absolute symlink", &|w| {
            fs::create_dir_all(w.p("app/.x")).unwrap();
            write(&w.p("app/.x/__init__.py"), "");
            symlink(w.p("app/.x"), w.p("app/src/traceback")).unwrap();
        }),
    ];
    for (what, make) in forms {
        let w = World::new("shadow", STUB);
        write(&w.p("app/fake.py"), "print('fake')\n");
        make(&w);
        let (o, r) = w.unittest();
        assert!(
            r.tampered
                .iter()
                .any(|t| t.contains("on sys.path shadows the")),
            "{what}\n{}",
            show(&o, &r)
        );
        // The real module won: the run itself still reported.
        assert_eq!(tally(&r).counts.total, 3, "{what}\n{}", show(&o, &r));
    }
}

#[test]
fn exits_that_skip_the_exit_record_and_workspace_programs() {
    if !python_ok() {
        return;
    }
    // os._exit after a fake summary: the session never exits.
    let w = World::new(
        "exit",
        &format!("{STUB}import os, sys\nsys.stdout.write('Ran 3 tests in 0.0s\\n\\nOK\\n'); sys.stdout.flush(); os._exit(0)\n"),
    );
    let (o, r) = w.unittest();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(r.sessions.len(), 1, "{}", show(&o, &r));
    // The reporter's os._exit sends the exit record first: no run.
    assert_eq!(
        r.sessions[0].exit_via.as_deref(),
        Some("os._exit(0)"),
        "{}",
        show(&o, &r)
    );
    assert!(r.sessions[0].runs.is_empty());
    // ...unless the product leaves through the real one.
    let w = World::new(
        "posix-exit",
        &format!("{STUB}import posix\nposix._exit(0)\n"),
    );
    let (o, r) = w.unittest();
    assert_eq!(o.status.code(), Some(0));
    assert!(!r.sessions[0].exited, "{}", show(&o, &r));
    // An atexit hook of the product's runs before the reporter's; its
    // os._exit(0) after the failing run says so.
    let w = World::new(
        "atexit",
        &format!("{STUB}import atexit, os\natexit.register(lambda: (print('OK'), os._exit(0)))\n"),
    );
    let (o, r) = w.unittest();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        r.sessions[0].exit_via.as_deref(),
        Some("os._exit(0)"),
        "{}",
        show(&o, &r)
    );
    assert!(r.sessions[0].runs[0].ended);
    assert_eq!(r.sessions[0].runs[0].ok, Some(false));
    // exec into an interpreter without the reporter: the channel is
    // close-on-exec, the new program cannot report.
    let w = World::new(
        "exec",
        &format!("{STUB}import os, sys\nos.execv(sys.executable, [sys.executable, '-I', '-c', 'import os; print(\"OK\", os.path.exists(\"/proc/self/fd/61\"))'])\n"),
    );
    let (o, r) = w.unittest();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "OK False",
        "{}",
        show(&o, &r)
    );
    assert!(!r.sessions[0].exited);
    // Forged lines straight into the channel descriptor.
    let w = World::new(
        "forge",
        &format!("{STUB}import os\nos.write(61, b'0000 {{\"k\":\"abc\",\"n\":0,\"t\":\"hello\"}}\\n')\nos.write(61, b'Ran 3 tests\\n')\n"),
    );
    let (o, r) = w.unittest();
    assert!(
        r.tampered.iter().any(|t| t.contains("never issued")),
        "{}",
        show(&o, &r)
    );
    assert!(
        r.tampered.iter().any(|t| t.contains("is not JSON")),
        "{}",
        show(&o, &r)
    );
    // A CLI product (main program in the workspace) never reports, and
    // cannot take a key: its descriptors are closed before its code runs.
    let w = World::new("cli", "import os\nprint(os.path.exists('/proc/self/fd/62'), os.path.exists('/proc/self/fd/61'))\n");
    let (o, r) = w.run("python3", &[w.p("app/src/prod.py").to_str().unwrap()]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "False False",
        "{}",
        show(&o, &r)
    );
    assert!(
        r.sessions.is_empty() && r.tampered.is_empty(),
        "{}",
        show(&o, &r)
    );
    let (o, r) = w.run("python3", &["-m", "prod"]);
    assert!(r.sessions.is_empty(), "{}", show(&o, &r));
    // A helper run with -c reports (an idle session, no run).
    let (o, r) = w.run("python3", &["-c", "pass"]);
    assert_eq!(r.sessions.len(), 1, "{}", show(&o, &r));
    assert!(r.sessions[0].exited && r.sessions[0].runs.is_empty());
}

/// The Debian interpreter, which has pytest (python3-pytest).
const PYTEST_PY: &str = "/usr/bin/python3";

fn pytest_ok() -> bool {
    let ok = Command::new(PYTEST_PY)
        .args(["-c", "import pytest"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        crate::testing::missing(&format!(
            "pytest for {PYTEST_PY} (apt-get install python3-pytest)"
        ));
    }
    ok
}

const PYTESTS: &str = r#"
import pytest
import prod
def test_a(): assert prod.add(1, 1) == 2
def test_b(): assert prod.add(2, 2) == 4
@pytest.mark.parametrize("n", [1, 2])
def test_p(n): assert prod.add(n, 0) == n
"#;

#[test]
fn pytest_runs_report_per_test_and_plugin_tampering_is_found() {
    if !pytest_ok() {
        return;
    }
    let run = |prod: &str| {
        let mut w = World::new("pytest", prod);
        write(&w.p("tests/test_p.py"), PYTESTS);
        // Without cbrun's -p: the reporter adds it for a pytest process.
        let rootdir = format!("--rootdir={} -p no:cacheprovider", w.p("tests").display());
        w.env.retain(|(k, _)| k != "PYTEST_ADDOPTS");
        w.env.push(("PYTEST_ADDOPTS".into(), rootdir));
        let t = w.p("tests/test_p.py");
        let (o, r) = w.run(PYTEST_PY, &["-m", "pytest", "-q", t.to_str().unwrap()]);
        (w, o, r)
    };
    let (_w, o, r) = run(GOOD);
    assert!(r.tampered.is_empty(), "{}", show(&o, &r));
    let t = tally(&r);
    assert_eq!(
        (t.counts.total, t.counts.passed),
        (4, 4),
        "{}",
        show(&o, &r)
    );
    assert!(t
        .tests
        .iter()
        .any(|x| x.id.ends_with("test_p.py::test_p[2]")));
    assert_eq!(t.runner.as_deref(), Some("pytest"));

    let (_w, o, r) = run(&format!("{STUB}print('===== 4 passed in 0.01s =====')\n"));
    let t = tally(&r);
    assert_eq!(t.counts.failed, 4, "{}", show(&o, &r));

    let forcer = "import gc, _pytest.config\nclass _F:\n    def pytest_runtest_logreport(self, report):\n        report.outcome = 'passed'\nfor o in gc.get_objects():\n    if isinstance(o, _pytest.config.Config):\n        o.pluginmanager.register(_F(), 'helper')\n";
    let (_w, o, r) = run(&format!("{STUB}{forcer}"));
    assert!(
        r.tampered
            .iter()
            .any(|t| t.contains("pytest hook pytest_runtest_logreport is implemented in")),
        "{}",
        show(&o, &r)
    );
    let unreg = "import gc, _pytest.config\nfor o in gc.get_objects():\n    if isinstance(o, _pytest.config.Config):\n        o.pluginmanager.unregister(name='_cbrun_pytest')\n";
    let (_w, o, r) = run(&format!("{STUB}{unreg}"));
    assert!(
        r.tampered
            .iter()
            .any(|t| t.contains("plugin was unregistered")),
        "{}",
        show(&o, &r)
    );
    let exit = "import os, sys\nsys.stdout.write('== 4 passed in 0.01s ==\\n'); sys.stdout.flush(); os._exit(0)\n";
    let (_w, o, r) = run(&format!("{STUB}{exit}"));
    assert_eq!(o.status.code(), Some(0));
    assert!(r.sessions[0].runs.is_empty(), "{}", show(&o, &r));
    assert_eq!(
        r.sessions[0].exit_via.as_deref(),
        Some("os._exit(0)"),
        "{}",
        show(&o, &r)
    );
}
