//! Isolation: each claim is checked by an attack from inside the sandbox
//! that must fail (network, files, processes, syscalls, privileges), as
//! root, as a delegated user and as a user without delegation.

use crate::common;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;

use crate::common::{Ctx, Who, PY};
use serde_json::Value;

// ---------------------------------------------------------------- network

/// Connects to a host TCP port and a host abstract unix socket.
const CONNECT_OUT: &str = r#"
import errno, json, socket, sys
port, name = int(sys.argv[1]), sys.argv[2]
r = {}
def attempt(key, fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr)
        r[key] = "connected"
    except OSError as e:
        r[key] = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
    finally:
        s.close()
attempt("tcp", socket.AF_INET, ("127.0.0.1", port))
attempt("abstract", socket.AF_UNIX, "\0" + name)
print(json.dumps(r))
"#;

/// Server and client inside the sandbox over 127.0.0.1.
const LOOPBACK_INSIDE: &str = r#"
import socket, threading
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
port = srv.getsockname()[1]
def serve():
    c, _ = srv.accept()
    c.sendall(c.recv(100)[::-1])
    c.close()
t = threading.Thread(target=serve)
t.start()
cl = socket.create_connection(("127.0.0.1", port), timeout=5)
cl.sendall(b"ping")
print(cl.recv(100).decode())
t.join()
"#;

fn interfaces(proc_net_dev: &str) -> Vec<String> {
    proc_net_dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once(':').map(|(i, _)| i.trim().to_owned()))
        .collect()
}

fn network(who: Who) {
    let ctx = Ctx::new(who, "network");
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port().to_string();
    let abs_name = ctx.marker("abstract");
    let uds =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(abs_name.as_bytes()).unwrap())
            .unwrap();
    uds.set_nonblocking(true).unwrap();

    // Attack: reach the host's loopback services from inside.
    let r = ctx.run(&[], &[PY, "-c", CONNECT_OUT, &port, &abs_name]);
    r.assert_code(0, "connect to host 127.0.0.1 from the sandbox");
    let v = r.stdout_json();
    assert_ne!(
        v["tcp"],
        "connected",
        "attack: TCP connect to a server on the host's 127.0.0.1:{port} succeeded\n{}",
        r.show()
    );
    assert_ne!(
        v["abstract"],
        "connected",
        "attack: connect to a host abstract unix socket succeeded\n{}",
        r.show()
    );
    assert_eq!(
        tcp.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock),
        "attack: the host's TCP server received a connection from the sandbox"
    );
    assert_eq!(
        uds.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock),
        "attack: the host's abstract unix socket received a connection from the sandbox"
    );
    let o = r.outcome();
    assert_eq!(o["isolation"]["network"], "none");
    assert!(
        o["isolation"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "net"),
        "outcome must list the net namespace"
    );

    // Control: with --net host the very same script does connect, so the
    // failure above is the isolation, not a broken test server.
    let r = ctx.run(
        &["--net", "host"],
        &[PY, "-c", CONNECT_OUT, &port, &abs_name],
    );
    r.assert_code(0, "control: --net host");
    let v = r.stdout_json();
    assert_eq!(
        v["tcp"],
        "connected",
        "control: with --net host the host server must be reachable\n{}",
        r.show()
    );
    assert!(
        tcp.accept().is_ok(),
        "control: the host server must have seen the --net host connection"
    );
    assert_eq!(r.outcome()["isolation"]["network"], "host");

    // lo inside is up: a server and a client inside talk over 127.0.0.1.
    let r = ctx.run(&[], &[PY, "-c", LOOPBACK_INSIDE]);
    r.assert_code(0, "server+client inside the sandbox on 127.0.0.1");
    assert_eq!(
        r.stdout.trim(),
        "gnip",
        "loopback inside the sandbox must work (lo up)\n{}",
        r.show()
    );
    assert_eq!(r.outcome()["isolation"]["loopback_up"], true);

    // Only lo exists, by default and with an explicit --net none.
    for opts in [&[][..], &["--net", "none"][..]] {
        let r = ctx.run(opts, &["cat", "/proc/net/dev"]);
        r.assert_code(0, "cat /proc/net/dev");
        assert_eq!(
            interfaces(&r.stdout),
            vec!["lo".to_owned()],
            "attack: network interfaces other than lo are visible with {opts:?}\n{}",
            r.show()
        );
    }
    ctx.assert_clean("network attacks");
}

#[test]
fn network_is_isolated_root() {
    network(Who::Root);
}

#[test]
fn network_is_isolated_delegated_user() {
    network(Who::Delegated);
}

#[test]
fn network_is_isolated_undelegated_user() {
    network(Who::Undelegated);
}

// ------------------------------------------------------------------ files

const FILES: &str = r#"
import errno, json, os, sys
run_folder, marker = sys.argv[1], sys.argv[2]
r = {}
def attempt(key, fn):
    try:
        fn()
        r[key] = "ok"
    except OSError as e:
        r[key] = errno.errorcode.get(e.errno, str(e.errno))
def read_file(p):
    with open(p, "rb") as f:
        f.read(1)
def write_file(p):
    with open(p, "w") as f:
        f.write("pwned")
for p in ["/home", "/root", "/work", run_folder, run_folder + "/host-secret.txt"]:
    r["exists " + p] = os.path.lexists(p)
    attempt("read " + p, lambda p=p: os.listdir(p) if os.path.isdir(p) else read_file(p))
for d in ["/", "/usr", "/etc", "/usr/bin", "/opt"]:
    attempt("write " + d, lambda d=d: write_file(os.path.join(d, marker)))
attempt("mkdir /" + marker, lambda: os.mkdir("/" + marker))
attempt("chmod /etc/passwd", lambda: os.chmod("/etc/passwd", 0o666))
attempt("read /etc/shadow", lambda: read_file("/etc/shadow"))
attempt("write /tmp", lambda: write_file("/tmp/" + marker))
r["tmp content"] = open("/tmp/" + marker).read() if r["write /tmp"] == "ok" else None
r["tmp listing"] = sorted(os.listdir("/tmp"))
attempt("write /dev/shm", lambda: write_file("/dev/shm/" + marker))
r["sys"] = sorted(os.listdir("/sys")) if os.path.isdir("/sys") else None
print(json.dumps(r))
"#;

fn files(who: Who) {
    let ctx = Ctx::new(who, "files");
    let run_folder = ctx.dir.display().to_string();
    std::fs::write(ctx.dir.join("host-secret.txt"), "secret").unwrap();
    let marker = ctx.marker("file");
    let r = ctx.run(&[], &[PY, "-c", FILES, &run_folder, &marker]);
    r.assert_code(0, "file attacks script");
    let v = r.stdout_json();
    let show = r.show();

    for p in [
        "/home",
        "/root",
        "/work",
        run_folder.as_str(),
        &format!("{run_folder}/host-secret.txt"),
    ] {
        assert_eq!(
            v[format!("exists {p}")],
            false,
            "attack: host path {p} is present inside the sandbox\n{show}"
        );
        assert_eq!(
            v[format!("read {p}")],
            "ENOENT",
            "attack: reading host path {p} from inside must fail as absent\n{show}"
        );
    }
    for d in ["/", "/usr", "/etc", "/usr/bin", "/opt"] {
        assert_ne!(
            v[format!("write {d}")],
            "ok",
            "attack: writing a file into {d} succeeded\n{show}"
        );
    }
    assert_ne!(
        v[format!("mkdir /{marker}")],
        "ok",
        "attack: mkdir in / succeeded\n{show}"
    );
    assert_ne!(
        v["chmod /etc/passwd"], "ok",
        "attack: chmod of /etc/passwd succeeded\n{show}"
    );
    assert_ne!(
        v["read /etc/shadow"], "ok",
        "attack: /etc/shadow is readable inside the sandbox\n{show}"
    );
    // /tmp is writable and private.
    assert_eq!(
        v["write /tmp"], "ok",
        "/tmp inside must be writable\n{show}"
    );
    assert_eq!(v["tmp content"], "pwned");
    assert_eq!(
        v["tmp listing"],
        serde_json::json!([marker]),
        "attack: /tmp inside shows host files\n{show}"
    );
    assert_eq!(
        v["write /dev/shm"], "ok",
        "/dev/shm inside must be writable\n{show}"
    );
    assert!(
        v["sys"].is_null() || v["sys"] == serde_json::json!([]),
        "attack: /sys is mounted inside\n{show}"
    );
    for host in ["/tmp", "/dev/shm", "/", "/usr", "/etc", "/opt", "/usr/bin"] {
        let p = Path::new(host).join(&marker);
        assert!(
            !p.exists(),
            "attack: a file written inside appeared on the host at {}",
            p.display()
        );
    }
    ctx.assert_clean("file attacks");
}

#[test]
fn files_are_isolated_root() {
    files(Who::Root);
}

#[test]
fn files_are_isolated_delegated_user() {
    files(Who::Delegated);
}

#[test]
fn files_are_isolated_undelegated_user() {
    files(Who::Undelegated);
}

// ------------------------------------------------------------------- pids

const PIDS: &str = r#"
import errno, json, os, sys
hp = int(sys.argv[1])
r = {"pid": os.getpid(), "proc_hostpid": os.path.exists("/proc/%d" % hp)}
try:
    os.kill(hp, 0)
    r["kill0"] = "ok"
except OSError as e:
    r["kill0"] = errno.errorcode.get(e.errno, str(e.errno))
r["pids"] = sorted(int(x) for x in os.listdir("/proc") if x.isdigit())
r["init"] = open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode()
print(json.dumps(r))
"#;

fn pids(who: Who) {
    let ctx = Ctx::new(who, "pids");
    let hostpid = std::process::id().to_string();
    let r = ctx.run(&[], &[PY, "-c", PIDS, &hostpid]);
    r.assert_code(0, "pid attacks script");
    let v = r.stdout_json();
    let show = r.show();
    assert_eq!(
        v["proc_hostpid"], false,
        "attack: the test process (host pid {hostpid}) is visible in /proc inside\n{show}"
    );
    assert_eq!(
        v["kill0"], "ESRCH",
        "attack: kill(host pid {hostpid}, 0) from inside did not fail with ESRCH\n{show}"
    );
    assert_eq!(v["pid"], 1, "the sandbox's command must be pid 1\n{show}");
    assert_eq!(
        v["init"], PY,
        "pid 1 inside must be the command itself\n{show}"
    );
    assert_eq!(
        v["pids"],
        serde_json::json!([1]),
        "attack: processes other than the command are visible inside\n{show}"
    );

    // The same with the shell's kill -0.
    let script = format!("kill -0 {hostpid} 2>/dev/null && echo VISIBLE || echo HIDDEN; echo $$");
    let r = ctx.run(&[], &["sh", "-c", &script]);
    r.assert_code(0, "kill -0 from a shell");
    assert_eq!(
        r.stdout.split_whitespace().collect::<Vec<_>>(),
        ["HIDDEN", "1"],
        "attack: `kill -0 {hostpid}` inside succeeded, or sh is not pid 1\n{}",
        r.show()
    );
    ctx.assert_clean("pid attacks");
}

#[test]
fn pids_are_isolated_root() {
    pids(Who::Root);
}

#[test]
fn pids_are_isolated_delegated_user() {
    pids(Who::Delegated);
}

#[test]
fn pids_are_isolated_undelegated_user() {
    pids(Who::Undelegated);
}

// --------------------------------------------------------------- syscalls

/// Probes whose result differs from what was expected.
fn probe_failures(v: &Value) -> Vec<String> {
    let map = v.as_object().expect("probe output is a JSON object");
    let mut bad = Vec::new();
    for (name, res) in map {
        let expect = res["expect"].as_str().unwrap_or("?");
        let ok = if expect == "OK" {
            res["ret"].as_i64().unwrap_or(-1) >= 0
                && res["errno"] == 0
                && res.get("signal").is_none()
        } else {
            res["errname"] == expect
        };
        if !ok {
            bad.push(format!("{name}: expected {expect}, got {res}"));
        }
    }
    bad
}

fn run_probe(ctx: &Ctx, extra: &[&str]) -> (common::Run, Value) {
    let probe = ctx.fixture("syscall_probe.py");
    let bind = format!("{}:/probe.py:ro", probe.display());
    let mut opts = vec!["--bind", bind.as_str()];
    opts.extend_from_slice(extra);
    let r = ctx.run(&opts, &[PY, "/probe.py"]);
    r.assert_code(0, "syscall probe script");
    let v = r.stdout_json();
    assert!(v.get("_error").is_none(), "probe refused to run: {v}");
    (r, v)
}

fn check_status(ctx: &Ctx, seccomp_mode: &str) {
    let mut opts = Vec::new();
    if seccomp_mode == "off" {
        opts.extend_from_slice(&["--seccomp", "off"]);
    }
    let r = ctx.run(&opts, &["cat", "/proc/self/status"]);
    r.assert_code(0, "cat /proc/self/status");
    let s = &r.stdout;
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(
            common::status_field(s, cap),
            Some("0000000000000000"),
            "attack surface: {cap} is not empty inside\n{}",
            r.show()
        );
    }
    assert_eq!(
        common::status_field(s, "NoNewPrivs"),
        Some("1"),
        "NoNewPrivs must be 1 inside\n{}",
        r.show()
    );
    let want = if seccomp_mode == "off" { "0" } else { "2" };
    assert_eq!(
        common::status_field(s, "Seccomp"),
        Some(want),
        "Seccomp mode inside (--seccomp {seccomp_mode})\n{}",
        r.show()
    );
}

fn syscalls(who: Who) {
    let ctx = Ctx::new(who, "syscalls");
    let (r, v) = run_probe(&ctx, &[]);
    let n = v.as_object().unwrap().len();
    assert!(n >= 70, "the probe ran only {n} probes");
    for key in [
        "mount",
        "unshare_newuser",
        "clone_newuser",
        "bpf",
        "ptrace_traceme",
        "clone3",
        "i386_getpid",
        "x32_getpid",
        "x32_unshare",
        "control_thread",
        "pidfd_getfd",
        "kcmp",
        "socket_vsock",
        "control_socket_inet",
    ] {
        assert!(v.get(key).is_some(), "probe {key} missing from the output");
    }
    // The brief's specific cases, checked by name for clear messages.
    assert_eq!(
        v["clone3"]["errname"],
        "ENOSYS",
        "clone3 must fail with ENOSYS\n{}",
        r.show()
    );
    assert_eq!(
        v["i386_getpid"]["errname"],
        "SIGSYS",
        "attack: a foreign-arch (int 0x80) syscall was not killed with SIGSYS\n{}",
        r.show()
    );
    assert_eq!(
        v["x32_unshare"]["errname"],
        "EPERM",
        "attack: an x32-ABI unshare slipped past the filter\n{}",
        r.show()
    );
    let bad = probe_failures(&v);
    assert!(
        bad.is_empty(),
        "attack: denied syscalls reachable or controls broken ({}):\n  {}",
        who.label(),
        bad.join("\n  ")
    );
    let o = r.outcome();
    assert_eq!(o["isolation"]["seccomp"], "default");
    assert!(o["isolation"]["seccomp_rules"]
        .as_array()
        .map(|a| !a.is_empty())
        .unwrap_or(false));
    check_status(&ctx, "default");
    ctx.assert_clean("syscall probes");
}

#[test]
fn syscalls_are_filtered_root() {
    syscalls(Who::Root);
}

#[test]
fn syscalls_are_filtered_delegated_user() {
    syscalls(Who::Delegated);
}

#[test]
fn syscalls_are_filtered_undelegated_user() {
    syscalls(Who::Undelegated);
}

fn seccomp_off(who: Who) {
    let ctx = Ctx::new(who, "seccomp-off");
    let (r, v) = run_probe(&ctx, &["--seccomp", "off"]);
    assert!(
        r.stderr.contains("seccomp is OFF") && r.stderr.contains("warning"),
        "--seccomp off must be announced loudly on stderr\n{}",
        r.show()
    );
    let o = r.outcome();
    assert_eq!(o["isolation"]["seccomp"], "off");
    assert_eq!(o["isolation"]["seccomp_rules"], serde_json::json!([]));
    assert!(
        o["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("seccomp is OFF")),
        "outcome warnings must say seccomp is off: {}",
        o["warnings"]
    );
    // The probe really discriminates: without the filter the kernel answers
    // differently (so the default-profile results above are the filter's).
    assert_ne!(
        v["clone3"]["errname"], "ENOSYS",
        "probe check: unfiltered clone3(NULL, 0) should be EINVAL"
    );
    assert_ne!(
        v["x32_getpid"]["errname"], "EPERM",
        "probe check: unfiltered x32 getpid should be ENOSYS"
    );
    assert_ne!(
        v["unshare_none"]["errname"], "EPERM",
        "probe check: unfiltered unshare(0) should succeed"
    );
    assert_eq!(
        v["pidfd_getfd"]["errname"], "EBADF",
        "probe check: unfiltered pidfd_getfd(own pidfd, -1) should be EBADF"
    );
    assert_eq!(
        v["kcmp"]["errname"], "",
        "probe check: unfiltered kcmp of a file with itself should succeed"
    );
    let differing = probe_failures(&v).len();
    assert!(
        differing >= 30,
        "probe check: only {differing} probes differ without the filter"
    );
    // Capabilities and no_new_privs do not depend on seccomp.
    check_status(&ctx, "off");
    ctx.assert_clean("seccomp off");
}

#[test]
fn seccomp_off_is_loud_root() {
    seccomp_off(Who::Root);
}

#[test]
fn seccomp_off_is_loud_delegated_user() {
    seccomp_off(Who::Delegated);
}

#[test]
fn seccomp_off_is_loud_undelegated_user() {
    seccomp_off(Who::Undelegated);
}

// ------------------------------------------------------------ --rootfs DIR

/// A directory as `/`: a busybox-only rootfs owned by the user cbrun runs
/// as. The sandbox sees that tree, not the host's, and cannot write to it.
fn rootfs_dir(who: Who) {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .expect("busybox-static must be installed (.ci/run installs it)");
    let ctx = Ctx::new(who, "rootfsdir");
    let root = ctx.dir.join("rootfs");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
    std::fs::write(root.join("marker"), "rootfs-dir-marker\n").unwrap();
    for p in [
        root.clone(),
        root.join("bin"),
        root.join("bin/busybox"),
        root.join("marker"),
    ] {
        std::os::unix::fs::lchown(&p, Some(who.uid()), Some(who.uid())).unwrap();
    }
    let root_s = root.to_str().unwrap();
    let r = ctx.run(
        &["--rootfs", root_s],
        &[
            "/bin/busybox",
            "sh",
            "-c",
            "cat /marker; ls /usr/bin/python3 2>/dev/null && echo HOST-VISIBLE; \
             /bin/busybox touch /written 2>/dev/null && echo WROTE-ROOT; \
             /bin/busybox touch /tmp/ok && echo tmp-ok",
        ],
    );
    r.assert_code(0, "busybox rootfs run");
    assert!(
        r.stdout.contains("rootfs-dir-marker"),
        "the rootfs dir is not `/`\n{}",
        r.show()
    );
    assert!(
        !r.stdout.contains("HOST-VISIBLE"),
        "attack: host /usr visible with --rootfs DIR\n{}",
        r.show()
    );
    assert!(
        !r.stdout.contains("WROTE-ROOT"),
        "attack: wrote to a --rootfs DIR `/`\n{}",
        r.show()
    );
    assert!(
        r.stdout.contains("tmp-ok"),
        "/tmp must be writable\n{}",
        r.show()
    );
    assert!(
        !root.join("written").exists(),
        "attack: a write reached the rootfs dir on the host"
    );
    ctx.assert_clean("--rootfs DIR");
}

#[test]
fn rootfs_dir_root() {
    rootfs_dir(Who::Root);
}

#[test]
fn rootfs_dir_undelegated_user() {
    rootfs_dir(Who::Undelegated);
}
