//! Attacks from inside a sandbox on cbrun itself: descriptors cbrun might
//! leave open in the sandbox (and the `--init` pid 1, a fork of cbrun that
//! never execs), socket families network namespaces do not confine, host
//! information under /proc, and escaping the sandbox's cgroup. (Forged
//! owner records against `cbrun gc` are in lifecycle.rs.)
//!
//! Each attack runs as root, as `nobody` with delegated cgroups and as uid
//! 65533 without delegation, unless it needs cgroups.

use crate::common;

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::{Ctx, Who, PY};
use serde_json::{json, Value};

fn busybox() -> PathBuf {
    ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("busybox-static must be installed (.ci/run installs it)")
}

/// A busybox-only root filesystem in the test dir, readable by every user.
fn busybox_rootfs(ctx: &Ctx) -> PathBuf {
    let root = ctx.dir.join("bbroot");
    for d in ["bin", "proc", "dev", "sys", "tmp"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::copy(busybox(), root.join("bin/busybox")).unwrap();
    fs::set_permissions(root.join("bin/busybox"), fs::Permissions::from_mode(0o755)).unwrap();
    for a in ["sh", "ls", "cat", "echo", "head", "wc"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(a)).unwrap();
    }
    fs::set_permissions(root.join("tmp"), fs::Permissions::from_mode(0o1777)).unwrap();
    root
}

// ------------------------------------------------------------ descriptors

/// Lists the descriptors of the probe itself (by fstat over 0..4096: the
/// listing of /proc/self/fd would show its own) and of every other process
/// in the sandbox (pid 1 among them), then tries to copy descriptors 3..64
/// out of each with pidfd_open + pidfd_getfd (from a forked child, so the
/// probe's parent holds nothing the child could mistake for a leak).
const FD_PROBE: &str = r#"
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR_PIDFD_OPEN, NR_PIDFD_GETFD = 434, 438
def en(e):
    return errno.errorcode.get(e, str(e))
def sc(*a):
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_long(x) for x in a])
    return r, (ctypes.get_errno() if r < 0 else 0)
def fds_of(pid):
    d = "/proc/%d/fd" % pid
    try:
        names = os.listdir(d)
    except OSError as e:
        return en(e.errno)
    out = {}
    for n in names:
        try:
            out[n] = os.readlink(d + "/" + n)
        except OSError as e:
            out[n] = en(e.errno)
    return out
r = {"me": os.getpid()}
own = []
for fd in range(0, 4096):
    try:
        os.fstat(fd)
        own.append(fd)
    except OSError:
        pass
r["own"] = own
r["own_links"] = {str(fd): os.readlink("/proc/self/fd/%d" % fd) for fd in own}
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
r["others"] = {str(p): fds_of(p) for p in pids if p != os.getpid()}
out = "/tmp/fd-probe-%d.json" % os.getpid()
child = os.fork()
if child == 0:
    stolen, errs, opened = [], set(), {}
    for p in pids:
        if p == os.getpid():
            continue
        pfd, e = sc(NR_PIDFD_OPEN, p, 0)
        opened[str(p)] = "ok" if pfd >= 0 else en(e)
        if pfd < 0:
            continue
        for n in range(3, 64):
            got, e = sc(NR_PIDFD_GETFD, pfd, n, 0)
            if got >= 0:
                try:
                    stolen.append([p, n, os.readlink("/proc/self/fd/%d" % got)])
                except OSError:
                    stolen.append([p, n, "?"])
                os.close(got)
            else:
                errs.add(en(e))
        os.close(pfd)
    with open(out, "w") as f:
        json.dump({"stolen": stolen, "errnos": sorted(errs), "pidfd_open": opened}, f)
    os._exit(0)
os.waitpid(child, 0)
with open(out) as f:
    r["getfd"] = json.load(f)
print(json.dumps(r))
"#;

/// Asserts what [`FD_PROBE`] found: only 0-2 (and `passed`) in the probe,
/// nothing more in any other process of the sandbox (or not readable at
/// all: the `--init` pid 1 is not dumpable), nothing copied out.
fn check_fd_probe(r: &common::Run, what: &str, passed: &[u64], seccomp: bool) {
    r.assert_code(0, what);
    let v = r.stdout_json();
    let show = r.show();
    let mut want: Vec<u64> = vec![0, 1, 2];
    want.extend_from_slice(passed);
    assert_eq!(
        v["own"],
        json!(want),
        "attack ({what}): the command holds descriptors beyond 0-2 and the passed ones: {}\n{show}",
        v["own_links"]
    );
    let others = v["others"].as_object().unwrap();
    for (pid, fds) in others {
        match fds {
            Value::String(e) => assert_eq!(
                e, "EACCES",
                "({what}) pid {pid}'s descriptors: unexpected error\n{show}"
            ),
            Value::Object(m) => {
                let mut nums: Vec<u64> = m.keys().filter_map(|k| k.parse().ok()).collect();
                nums.sort_unstable();
                assert!(
                    nums.iter().all(|n| *n <= 2 || passed.contains(n)),
                    "attack ({what}): pid {pid} of the sandbox holds descriptors {m:?}\n{show}"
                );
            }
            other => panic!("({what}) odd probe output {other}"),
        }
    }
    let g = &v["getfd"];
    assert_eq!(
        g["stolen"],
        json!([]),
        "attack ({what}): pidfd_getfd copied descriptors out of another process of the sandbox\n{show}"
    );
    let errnos = g["errnos"].as_array().unwrap();
    if seccomp {
        assert_eq!(
            errnos,
            &vec![json!("EPERM")],
            "({what}) pidfd_getfd must be refused by the filter\n{show}"
        );
    } else {
        // No filter: the kernel answers. Nothing is open above 2 (EBADF);
        // the --init pid 1 refuses a non-dumpable target (EPERM).
        assert!(
            errnos.iter().all(|e| e == "EBADF" || e == "EPERM") && !errnos.is_empty(),
            "({what}) pidfd_getfd without the filter: {errnos:?}\n{show}"
        );
    }
}

fn fd_hygiene(who: Who) {
    let ctx = Ctx::new(who, "fds");
    let mut modes: Vec<Vec<&str>> = vec![
        vec![],
        vec!["--init"],
        vec!["--user", "1000:1000"],
        vec!["--init", "--user", "1000:1000"],
        vec!["--net", "none"],
        vec!["--net", "host"],
        vec!["--net", "host", "--init"],
        // The filter off: only the descriptor table itself protects.
        vec!["--seccomp", "off"],
        vec!["--seccomp", "off", "--init"],
    ];
    if who.has_cgroup() {
        // With limits cbrun holds cgroup directories of the sandbox.
        modes.push(vec!["--memory", "256M", "--pids", "500", "--cpus", "1"]);
        modes.push(vec!["--memory", "256M", "--pids", "500", "--init"]);
    }
    for opts in &modes {
        let r = ctx.run(opts, &[PY, "-c", FD_PROBE]);
        let seccomp = !opts.contains(&"off");
        check_fd_probe(&r, &format!("{} {opts:?}", who.label()), &[], seccomp);
        if opts.contains(&"--init") {
            let v = r.stdout_json();
            assert_eq!(
                v["others"]["1"],
                "EACCES",
                "attack: the --init pid 1's descriptors are readable ({opts:?})\n{}",
                r.show()
            );
        }
    }

    // A busybox directory as `/`: the shell's and pid 1's descriptor lists.
    let root = busybox_rootfs(&ctx);
    let root_s = root.to_str().unwrap().to_owned();
    // Listed from a forked `ls` (busybox runs some applets inside the
    // shell itself, whose own descriptors would then show).
    let script = "(exec ls /proc/1/fd) 2>&1; echo ==; (exec ls /proc/$$/fd); :";
    for init in [false, true] {
        let mut opts = vec!["--rootfs", root_s.as_str()];
        if init {
            opts.push("--init");
        }
        let r = ctx.run(&opts, &["/bin/sh", "-c", script]);
        check_busybox_fds(&r, &format!("--rootfs DIR {opts:?}"), init);
    }

    // An image from the store (root and the delegated user own a store).
    if who != Who::Undelegated {
        let home = ctx.out.join("store");
        fs::create_dir(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(who.uid()), Some(who.uid())).unwrap();
        let home_s = home.to_str().unwrap().to_owned();
        let env = [("CBRUN_HOME", home_s.as_str())];
        let args: Vec<String> = ["image", "import", &root_s, "--tag", "fdprobe:1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let imp = ctx
            .spawn_args(&args, &env, None)
            .wait(common::DEFAULT_DEADLINE);
        imp.assert_code(0, "cbrun image import of the busybox root");
        for init in [false, true] {
            let mut opts = vec!["--image", "fdprobe:1"];
            if init {
                opts.push("--init");
            }
            let r = ctx.run_env(&opts, &["/bin/sh", "-c", script], &env);
            check_busybox_fds(&r, &format!("--image {opts:?}"), init);
        }
    }
    ctx.assert_clean("descriptor attacks");
}

/// `ls /proc/1/fd`, `==`, `ls /proc/$$/fd` from busybox: only 0 1 2.
fn check_busybox_fds(r: &common::Run, what: &str, init: bool) {
    r.assert_code(0, what);
    let (pid1, shell) = r
        .stdout
        .split_once("==")
        .unwrap_or_else(|| panic!("{what}: odd output\n{}", r.show()));
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        words(shell),
        ["0", "1", "2"],
        "attack ({what}): the shell holds descriptors beyond 0-2\n{}",
        r.show()
    );
    if init {
        assert!(
            pid1.contains("Permission denied"),
            "attack ({what}): the --init pid 1's descriptors are listable\n{}",
            r.show()
        );
    } else {
        assert_eq!(
            words(pid1),
            ["0", "1", "2"],
            "attack ({what}): pid 1 holds descriptors beyond 0-2\n{}",
            r.show()
        );
    }
}

#[test]
fn only_stdio_reaches_the_sandbox_root() {
    fd_hygiene(Who::Root);
}

#[test]
fn only_stdio_reaches_the_sandbox_delegated_user() {
    fd_hygiene(Who::Delegated);
}

#[test]
fn only_stdio_reaches_the_sandbox_undelegated_user() {
    fd_hygiene(Who::Undelegated);
}

// ------------------------------------------------- the --init pid 1's memory

/// What the sandbox can read of the `--init` pid 1, a fork of cbrun.
const INIT_PROBE: &str = r#"
import errno, json, os
r = {}
for f in ["environ", "mem", "maps", "auxv", "stack", "syscall", "cwd", "root", "exe"]:
    p = "/proc/1/" + f
    try:
        if f in ("cwd", "root", "exe"):
            r[f] = os.readlink(p)
        else:
            with open(p, "rb") as fh:
                r[f] = fh.read(4096).decode("latin-1")
    except OSError as e:
        r[f] = errno.errorcode.get(e.errno, str(e.errno))
r["cmdline"] = open("/proc/1/cmdline", "rb").read().decode("latin-1")
r["comm"] = open("/proc/1/comm").read().strip()
print(json.dumps(r))
"#;

fn init_memory(who: Who) {
    let ctx = Ctx::new(who, "init-memory");
    for opts in [&["--init"][..], &["--init", "--user", "1000:1000"][..]] {
        let r = ctx.run(opts, &[PY, "-c", INIT_PROBE]);
        r.assert_code(0, "reading the --init pid 1");
        let v = r.stdout_json();
        let show = r.show();
        for f in [
            "environ", "mem", "maps", "auxv", "stack", "syscall", "cwd", "root", "exe",
        ] {
            assert_eq!(
                v[f], "EACCES",
                "attack: /proc/1/{f} of the --init pid 1 (a fork of cbrun) is readable ({opts:?})\n{show}"
            );
        }
        let cmdline = v["cmdline"].as_str().unwrap();
        assert!(
            !cmdline.contains(common::CANARY_VALUE)
                && !cmdline.contains("sandbox")
                && !cmdline.contains(ctx.bin.to_str().unwrap())
                && cmdline.trim_end_matches('\0') == "cbrun-init",
            "attack: /proc/1/cmdline shows cbrun's host command line: {cmdline:?}\n{show}"
        );
        assert_eq!(v["comm"], "cbrun-init");
        assert!(
            !r.stdout.contains(common::CANARY_VALUE),
            "attack: cbrun's host environment leaked\n{show}"
        );
    }
    ctx.assert_clean("--init memory");
}

#[test]
fn init_hides_cbrun_memory_root() {
    init_memory(Who::Root);
}

#[test]
fn init_hides_cbrun_memory_delegated_user() {
    init_memory(Who::Delegated);
}

#[test]
fn init_hides_cbrun_memory_undelegated_user() {
    init_memory(Who::Undelegated);
}

// ------------------------------------------- pass_fds, through the library

/// Inside: its descriptors, and a line written to each passed one.
const PASS_PROBE: &str = r#"
import json, os
own = []
for fd in range(0, 4096):
    try:
        os.fstat(fd)
        own.append(fd)
    except OSError:
        pass
os.write(5, b"through-5\n")
os.write(7, b"through-7\n")
pid1 = None
try:
    pid1 = sorted(int(x) for x in os.listdir("/proc/1/fd"))
except OSError as e:
    pid1 = e.errno
print(json.dumps({"own": own, "pid1": pid1}))
"#;

/// Runs a sandbox through `cbrun::sandbox::run` in a forked child of the
/// test (single-threaded after the fork, as cbrun requires), as `who`,
/// passing a pipe's write end at 5 and a file at 7 while the child also
/// holds a host directory and a read-write host file without close-on-exec.
fn pass_fds(who: Who) {
    use cbrun::sandbox::config::{PassFd, SandboxConfig, Stdio as SStdio};
    let ctx = Ctx::new(who, "pass-fds");
    let secret = ctx.dir.join("host-secret");
    fs::write(&secret, "secret").unwrap();
    for init in [false, true] {
        let stdout = ctx.out_file(&format!("pass-{init}.out"));
        let via7 = ctx.out_file(&format!("via7-{init}.txt"));
        let status_file = ctx.out_file(&format!("status-{init}.json"));
        let (pipe_r, pipe_w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child only runs cbrun's library code (which is how
        // cbrun itself forks sandboxes: single-threaded) and _exits.
        let child = unsafe { libc::fork() };
        assert!(child >= 0);
        if child == 0 {
            drop(pipe_r);
            let code = (|| -> Result<i32, String> {
                // Descriptors the child holds that must not arrive, opened
                // while still root: a read-write handle on a root-owned file.
                let dir = fs::File::open(&ctx.dir).map_err(|e| e.to_string())?;
                let rw = fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&secret)
                    .map_err(|e| e.to_string())?;
                for f in [dir.as_raw_fd(), rw.as_raw_fd()] {
                    // SAFETY: clearing FD_CLOEXEC on descriptors we own.
                    unsafe { libc::fcntl(f, libc::F_SETFD, 0) };
                }
                if who != Who::Root {
                    let id = who.uid();
                    // SAFETY: plain identity changes in the forked child.
                    unsafe {
                        if libc::setgroups(0, std::ptr::null()) != 0
                            || libc::setgid(id) != 0
                            || libc::setuid(id) != 0
                        {
                            return Err("dropping to the test user".into());
                        }
                        // The uid change left the process non-dumpable (its
                        // /proc files root's), which an exec would undo.
                        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
                    }
                }
                std::env::remove_var("CBRUN_STATE_DIR");
                std::env::remove_var("XDG_RUNTIME_DIR");
                let file = fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .open(&via7)
                    .map_err(|e| e.to_string())?;
                let mut cfg =
                    SandboxConfig::new(vec![PY.to_owned(), "-c".to_owned(), PASS_PROBE.to_owned()]);
                cfg.init = init;
                cfg.stdout = SStdio::File(stdout.clone());
                cfg.pass_fds = vec![
                    PassFd {
                        fd: std::sync::Arc::new(pipe_w),
                        target: 5,
                    },
                    PassFd {
                        fd: std::sync::Arc::new(OwnedFd::from(file)),
                        target: 7,
                    },
                ];
                let host = cbrun::sandbox::run::HostView::detect();
                let o = cbrun::sandbox::run::run(&cfg, &host).map_err(|e| e.to_string())?;
                let st = json!({"exit": o.exit_code, "id": o.id});
                fs::write(&status_file, st.to_string()).map_err(|e| e.to_string())?;
                drop((dir, rw));
                Ok(0)
            })()
            .unwrap_or_else(|e| {
                let _ = fs::write(&status_file, json!({ "error": e }).to_string());
                3
            });
            // SAFETY: leave the forked child without the harness.
            unsafe { libc::_exit(code) };
        }
        drop(pipe_w);
        let end = Instant::now() + Duration::from_secs(60);
        let mut status = 0;
        loop {
            // SAFETY: polling the child forked above.
            let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
            if r == child {
                break;
            }
            if Instant::now() > end {
                // SAFETY: our own child.
                unsafe { libc::kill(child, libc::SIGKILL) };
                panic!("the pass_fds child did not finish");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let st: Value = serde_json::from_str(&fs::read_to_string(&status_file).unwrap_or_default())
            .unwrap_or(Value::Null);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the pass_fds child failed ({status}): {st}"
        );
        assert_eq!(st["exit"], 0, "{st}");
        let mut piped = String::new();
        std::io::Read::read_to_string(&mut fs::File::from(pipe_r), &mut piped).unwrap();
        assert_eq!(
            piped, "through-5\n",
            "the pipe passed at 5 did not carry the line"
        );
        assert_eq!(fs::read_to_string(&via7).unwrap(), "through-7\n");
        let v: Value = serde_json::from_str(fs::read_to_string(&stdout).unwrap().trim())
            .unwrap_or_else(|e| panic!("probe output: {e}"));
        assert_eq!(
            v["own"],
            json!([0, 1, 2, 5, 7]),
            "attack (init={init}): the command holds more than 0-2 and the passed 5 and 7: {v}"
        );
        // Without --init pid 1 is the probe itself (counted above).
        if init {
            assert_eq!(v["pid1"], libc::EACCES, "the --init pid 1 is listable: {v}");
        }
        assert_eq!(fs::read_to_string(&secret).unwrap(), "secret");
        let id = st["id"].as_str().unwrap();
        ctx.assert_run_gone(id, "a library run with passed descriptors");
    }
}

#[test]
fn pass_fds_arrive_alone_root() {
    pass_fds(Who::Root);
}

#[test]
fn pass_fds_arrive_alone_delegated_user() {
    pass_fds(Who::Delegated);
}

#[test]
fn pass_fds_arrive_alone_undelegated_user() {
    pass_fds(Who::Undelegated);
}

// ---------------------------------------------------------- socket families

/// Every family 0..=45 (and vsock with junk in the upper 32 bits): what
/// socket() and socketpair() answer.
const FAMILIES: &str = r#"
import ctypes, errno, json, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR_SOCKET, NR_SOCKETPAIR = 41, 53
def en(e):
    return errno.errorcode.get(e, str(e))
def sc(*a):
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_ulong(x & 0xFFFFFFFFFFFFFFFF) for x in a])
    return r, (ctypes.get_errno() if r < 0 else 0)
r = {"socket": {}, "socketpair": {}}
for fam in list(range(0, 46)) + [(1 << 32) | 40]:
    best = None
    for typ in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW):
        fd, e = sc(NR_SOCKET, fam, typ, 0)
        if fd >= 0:
            ctypes.CDLL(None).close(int(fd))
            best = "OK"
            break
        if best is None or best == "EAFNOSUPPORT":
            best = en(e)
    r["socket"][str(fam)] = best
    pair = (ctypes.c_int * 2)()
    ctypes.set_errno(0)
    rc = libc.socketpair(ctypes.c_int(fam & 0xFFFFFFFF), socket.SOCK_STREAM, 0, pair)
    r["socketpair"][str(fam)] = "OK" if rc == 0 else en(ctypes.get_errno())
# vsock towards the host (CID 2), the hypervisor's services.
try:
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((2, 22))
        r["vsock_connect"] = "connected"
    except OSError as e:
        r["vsock_connect"] = en(e.errno) if e.errno else type(e).__name__
except OSError as e:
    r["vsock_connect"] = "socket: " + en(e.errno)
print(json.dumps(r))
"#;

const ALLOWED: &[u64] = &[1, 2, 10, 16, 17];

fn host_has_vsock() -> bool {
    // SAFETY: socket takes plain integers.
    let fd = unsafe { libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0) };
    if fd >= 0 {
        // SAFETY: socket just returned this descriptor; it is ours and
        // closed once.
        unsafe { libc::close(fd) };
    }
    fd >= 0
}

fn socket_families(who: Who) {
    let ctx = Ctx::new(who, "families");
    for net in ["none", "host"] {
        let r = ctx.run(&["--net", net], &[PY, "-c", FAMILIES]);
        r.assert_code(0, "socket family probe");
        let v = r.stdout_json();
        let show = r.show();
        for (fam, res) in v["socket"].as_object().unwrap() {
            let n: u64 = fam.parse().unwrap();
            if ALLOWED.contains(&n) {
                assert_ne!(
                    res, "EAFNOSUPPORT",
                    "socket family {n} must stay usable (--net {net})\n{show}"
                );
            } else {
                assert_eq!(
                    res, "EAFNOSUPPORT",
                    "attack: socket(family {n}) was not refused (--net {net})\n{show}"
                );
            }
        }
        for (fam, res) in v["socketpair"].as_object().unwrap() {
            let n: u64 = fam.parse().unwrap();
            if !ALLOWED.contains(&n) {
                assert_eq!(
                    res, "EAFNOSUPPORT",
                    "attack: socketpair(family {n}) was not refused (--net {net})\n{show}"
                );
            }
        }
        for ok in ["1", "2", "10", "16"] {
            assert_eq!(v["socket"][ok], "OK", "family {ok} must work\n{show}");
        }
        assert_eq!(v["socketpair"]["1"], "OK", "socketpair(AF_UNIX)\n{show}");
        assert_eq!(
            v["vsock_connect"], "socket: EAFNOSUPPORT",
            "attack: vsock reachable from inside (--net {net})\n{show}"
        );
    }
    // Control: without the filter, vsock works inside --net none on this
    // host, so the refusal above is the filter's.
    if host_has_vsock() {
        let r = ctx.run(&["--seccomp", "off"], &[PY, "-c", FAMILIES]);
        r.assert_code(0, "socket family probe, --seccomp off");
        let v = r.stdout_json();
        assert_eq!(
            v["socket"]["40"],
            "OK",
            "control: AF_VSOCK should be creatable without the filter\n{}",
            r.show()
        );
    }
    ctx.assert_clean("socket families");
}

#[test]
fn socket_families_are_confined_root() {
    socket_families(Who::Root);
}

#[test]
fn socket_families_are_confined_delegated_user() {
    socket_families(Who::Delegated);
}

#[test]
fn socket_families_are_confined_undelegated_user() {
    socket_families(Who::Undelegated);
}

// ------------------------------------------------------------- /proc masks

const MASKED: &[&str] = &["cmdline", "bootconfig", "config.gz", "kallsyms", "modules"];

fn proc_masks(who: Who) {
    let ctx = Ctx::new(who, "proc-masks");
    let host_cmdline = fs::read("/proc/cmdline").unwrap();
    assert!(
        !host_cmdline.is_empty(),
        "control: the host's /proc/cmdline is empty"
    );
    let script = MASKED
        .iter()
        .map(|f| format!("printf '{f} '; cat /proc/{f} 2>/dev/null | wc -c"))
        .collect::<Vec<_>>()
        .join("; ");
    for opts in [&[][..], &["--init"][..], &["--user", "1000:1000"][..]] {
        let r = ctx.run(opts, &["sh", "-c", &script]);
        r.assert_code(0, "reading host information files");
        for line in r.stdout.lines() {
            let (f, n) = line.split_once(' ').unwrap();
            assert_eq!(
                n.trim(),
                "0",
                "attack: /proc/{f} shows host information inside ({opts:?})\n{}",
                r.show()
            );
        }
        assert_eq!(r.stdout.lines().count(), MASKED.len(), "{}", r.show());
    }
    ctx.assert_clean("/proc masks");
}

#[test]
fn proc_host_information_is_masked_root() {
    proc_masks(Who::Root);
}

#[test]
fn proc_host_information_is_masked_delegated_user() {
    proc_masks(Who::Delegated);
}

#[test]
fn proc_host_information_is_masked_undelegated_user() {
    proc_masks(Who::Undelegated);
}

// ------------------------------------------------------------ cgroup escape

/// Tries every way out of the sandbox's cgroup, then allocates 1 GiB. The
/// JSON line is printed before the allocation.
const CGROUP_ESCAPE: &str = r#"
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
me = str(os.getpid()).encode()
start = open("/proc/self/cgroup").read()
escaped = []
def en(e):
    return errno.errorcode.get(e, str(e))
def write_procs(path, dir_fd=None):
    # After the first move out, stop: the allocation below then shows
    # whether the limit still holds.
    if escaped:
        return "skipped"
    try:
        fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    except OSError as e:
        return en(e.errno)
    try:
        os.write(fd, me)
    except OSError as e:
        return en(e.errno)
    finally:
        os.close(fd)
    if open("/proc/self/cgroup").read() != start:
        escaped.append(path)
    return "ok"
REL = ["cgroup.procs", "../cgroup.procs", "../../cgroup.procs", "parking/cgroup.procs",
       "../parking/cgroup.procs", "tasks", "../tasks"]
def through(fd):
    return {rel: write_procs(rel, dir_fd=fd) for rel in REL}
r = {"cgroup_before": start}
r["sys_fs_cgroup"] = os.path.exists("/sys/fs/cgroup")
r["cgroup_mounts"] = [l for l in open("/proc/self/mountinfo") if " - cgroup" in l]
paths = {}
for h in ["", "memory", "pids", "cpu", "cpu,cpuacct", "unified"]:
    for rel in ["", "cbrun", "cbrun/u%d" % int(sys.argv[1]), "cbrun/u%d/parking" % int(sys.argv[1])]:
        p = os.path.join("/sys/fs/cgroup", h, rel, "cgroup.procs")
        paths[p] = write_procs(p)
r["paths"] = paths
# Mount a cgroup filesystem (v1 memory, v2) where one is writable.
os.makedirs("/tmp/cg", exist_ok=True)
mounts = {}
for fstype, opts in [(b"cgroup", b"memory"), (b"cgroup2", None)]:
    ctypes.set_errno(0)
    rc = libc.mount(b"none", b"/tmp/cg", fstype, 0, opts)
    mounts[fstype.decode()] = "ok" if rc == 0 else en(ctypes.get_errno())
    if rc == 0:
        r["through_mount_" + fstype.decode()] = through(os.open("/tmp/cg", os.O_RDONLY))
r["mounts"] = mounts
# Descriptors: our own, pid 1's (open by /proc path, copy by pidfd_getfd).
leaks = {}
for fd in range(3, 1024):
    try:
        os.fstat(fd)
    except OSError:
        continue
    leaks["own %d" % fd] = through(fd)
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == os.getpid():
        continue
    try:
        names = os.listdir("/proc/%d/fd" % pid)
    except OSError as e:
        leaks["list %d" % pid] = en(e.errno)
        names = []
    for n in names:
        try:
            fd = os.open("/proc/%d/fd/%s" % (pid, n), os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        leaks["proc %d/%s" % (pid, n)] = through(fd)
    pfd = libc.syscall(ctypes.c_long(434), ctypes.c_long(pid), ctypes.c_long(0))
    if pfd >= 0:
        for n in range(3, 64):
            got = libc.syscall(ctypes.c_long(438), ctypes.c_long(pfd), ctypes.c_long(n), ctypes.c_long(0))
            if got >= 0:
                leaks["getfd %d/%d" % (pid, n)] = through(got)
r["leaks"] = leaks
r["cgroup_after"] = open("/proc/self/cgroup").read()
r["escaped_by"] = escaped
print(json.dumps(r), flush=True)
chunks = []
for i in range(1024):
    chunks.append(b"\x01" * (1 << 20))
print("ESCAPED", len(chunks), flush=True)
"#;

/// Every attempt's result in the escape probe's output that succeeded.
fn escape_successes(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(prefix: &str, v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    walk(&format!("{prefix}/{k}"), x, out);
                }
            }
            Value::String(s) if s == "ok" => out.push(prefix.to_owned()),
            _ => {}
        }
    }
    for key in [
        "paths",
        "leaks",
        "through_mount_cgroup",
        "through_mount_cgroup2",
    ] {
        walk(key, &v[key], &mut out);
    }
    out
}

fn cgroup_escape(who: Who) {
    let ctx = Ctx::new(who, "cgroup-escape");
    let uid = who.uid().to_string();
    for extra in [&[][..], &["--init"][..], &["--seccomp", "off"][..]] {
        let mut opts = vec!["--memory", "256M", "--timeout", "60"];
        opts.extend_from_slice(extra);
        let r = ctx.run(&opts, &[PY, "-c", CGROUP_ESCAPE, &uid]);
        let show = r.show();
        assert!(
            !r.stdout.contains("ESCAPED"),
            "attack: the sandbox used 1 GiB under --memory 256M ({extra:?})\n{show}"
        );
        let first = r.stdout.lines().next().unwrap_or("");
        let v: Value = serde_json::from_str(first)
            .unwrap_or_else(|e| panic!("escape probe printed no JSON ({e})\n{show}"));
        let wins = escape_successes(&v);
        assert!(
            wins.is_empty(),
            "attack: routes out of the sandbox's cgroup worked ({extra:?}): {wins:?}\n{show}"
        );
        assert_eq!(
            v["sys_fs_cgroup"], false,
            "a cgroup tree is visible inside\n{show}"
        );
        assert_eq!(v["cgroup_mounts"], json!([]), "{show}");
        assert_eq!(
            v["cgroup_before"], v["cgroup_after"],
            "attack: the sandbox changed its cgroup ({extra:?})\n{show}"
        );
        for fs_type in ["cgroup", "cgroup2"] {
            assert_ne!(
                v["mounts"][fs_type], "ok",
                "mounting {fs_type} worked\n{show}"
            );
        }
        r.assert_code(137, "the 1 GiB allocation must be OOM-killed");
        assert_eq!(r.outcome()["oom_killed"], true, "{show}");
    }
    ctx.assert_clean("cgroup escape");
}

#[test]
fn cgroup_cannot_be_escaped_root() {
    cgroup_escape(Who::Root);
}

#[test]
fn cgroup_cannot_be_escaped_delegated_user() {
    cgroup_escape(Who::Delegated);
}
