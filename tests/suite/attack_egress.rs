//! Attacks on the solve sandbox's egress, through the real binary:
//!
//! - names pointed (by a hosts file the test controls, standing in for a
//!   DNS server the agent controls) at the host's own address and at
//!   private, CGNAT and link-local ranges, under `--allow '*'`, against a
//!   server bound to 0.0.0.0 on the host: refused and logged; an exact
//!   `--allow` of the address or a `--resolve` pin gets through;
//! - the registry index as the wall: with mock PyPI and npm registries on
//!   loopback (real wheels and tarballs, built here), a banned package is
//!   kept out however it is asked for (a dependency of an allowed package,
//!   `python -I -m pip`, an emptied `PYTHONPATH`, the pristine tools under
//!   `/.cbrun/real`, the file fetched by URL, the registry host directly),
//!   while an allowed package installs. A control run without bans shows
//!   the same agent does get the package in when nothing stops it.
//!
//! Each runs as root and as nobody with delegated cgroups.


use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(300);
const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A missing prerequisite: a failure in CI, a note and a skip elsewhere.
fn missing(what: &str) -> bool {
    assert!(!in_ci(), "CI: {what}");
    eprintln!("note: {what}; test skipped");
    true
}

/// A world-readable copy of a sample case, with its install ban replaced
/// when `ban` is given.
fn case(ctx: &Ctx, name: &str, ban: Option<&[&str]>) -> PathBuf {
    let dst = ctx.dir.join("cases").join(format!(
        "{name}-{}",
        if ban.is_some() { "reban" } else { "orig" }
    ));
    fs::create_dir_all(dst.parent().unwrap()).unwrap();
    let st = Command::new("cp")
        .arg("-r")
        .arg(Path::new(REPO).join("cases").join(name))
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    if let Some(ban) = ban {
        let p = dst.join("source/denylist.json");
        let mut d: Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
        d["install_ban"] = serde_json::json!(ban);
        fs::write(&p, serde_json::to_string_pretty(&d).unwrap()).unwrap();
    }
    let st = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(ctx.dir.join("cases"))
        .status()
        .unwrap();
    assert!(st.success());
    dst
}

/// An agent spec whose command runs `script` (sh), carried in base64.
fn agent(ctx: &Ctx, name: &str, script: &str) -> PathBuf {
    let p = ctx.dir.join(format!("{name}.toml"));
    let b64 = base64(script.as_bytes());
    fs::write(
        &p,
        format!(
            "name = \"{name}\"\ncommand = \"echo {b64} | base64 -d > /tmp/a.sh && sh /tmp/a.sh\"\n"
        ),
    )
    .unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    p
}

/// `cbrun solve` with `extra` flags and `env`; returns the trial folder.
fn solve(
    ctx: &Ctx,
    label: &str,
    case: &Path,
    spec: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Run, PathBuf) {
    let dir = ctx.out.join(label);
    let mut args: Vec<String> = vec![
        "solve".into(),
        case.display().to_string(),
        "--agent".into(),
        spec.display().to_string(),
        "--out".into(),
        dir.display().to_string(),
        "--solve-timeout".into(),
        "240".into(),
        "--net".into(),
        "allowlist".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let run = ctx.spawn_args(&args, env, None).wait(DEADLINE);
    (run, dir)
}

fn network_log(dir: &Path) -> Vec<Value> {
    fs::read_to_string(dir.join("logs/cbrun/network.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

// ------------------------------------------------------------ servers

type Answer = (u16, String, Vec<u8>);

/// An HTTP server in the test process: fixed answers by path (set after
/// it starts, since documents hold its address), the requests it saw.
struct Mock {
    port: u16,
    routes: Arc<Mutex<HashMap<String, Answer>>>,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Mock {
    fn start(bind: &str) -> Mock {
        let l = TcpListener::bind(bind).unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let routes: Arc<Mutex<HashMap<String, Answer>>> = Arc::default();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s, st) = (routes.clone(), seen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let Ok((c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (r, s) = (r.clone(), s.clone());
                std::thread::spawn(move || Mock::answer(c, &r, &s));
            }
        });
        Mock {
            port,
            routes,
            seen,
            stop,
        }
    }

    fn answer(
        mut c: TcpStream,
        routes: &Mutex<HashMap<String, Answer>>,
        seen: &Mutex<Vec<String>>,
    ) {
        let _ = c.set_nonblocking(false);
        let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let head = String::from_utf8_lossy(&buf).into_owned();
        let line = head.lines().next().unwrap_or("");
        let mut parts = line.split(' ');
        let method = parts.next().unwrap_or("").to_owned();
        let path = parts.next().unwrap_or("").to_owned();
        seen.lock().unwrap().push(path.clone());
        let (status, ctype, body) = routes.lock().unwrap().get(&path).cloned().unwrap_or((
            404,
            "text/plain".into(),
            b"not here".to_vec(),
        ));
        let _ = write!(
            c,
            "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        if method != "HEAD" {
            let _ = c.write_all(&body);
        }
    }

    fn set(&self, path: &str, ctype: &str, body: Vec<u8>) {
        self.routes
            .lock()
            .unwrap()
            .insert(path.to_owned(), (200, ctype.to_owned(), body));
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

// ------------------------------------------------------------ addresses

/// The host's first global (non-loopback) IPv4 address.
fn host_address() -> Option<IpAddr> {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show", "scope", "global"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let mut w = l.split_whitespace();
        w.position(|x| x == "inet")?;
        w.next()?.split('/').next()?.parse().ok()
    })
}

#[test]
fn names_pointing_at_the_host_or_private_ranges_are_refused_and_exact_listings_pass() {
    let Some(host_ip) = host_address() else {
        missing("the host has no global IPv4 address (`ip -o -4 addr show scope global`)");
        return;
    };
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "egress-addr");
        let c = case(&ctx, "case001", None);
        // A service bound to every address of the host, as host daemons are.
        let server = Mock::start("0.0.0.0:0");
        server.set("/", "text/plain", b"host-service-secret".to_vec());
        let port = server.port;
        let hosts = ctx.dir.join("hosts");
        let names = [
            ("self.test", host_ip.to_string(), "an address of this host"),
            ("ten.test", "10.1.2.3".into(), "private (RFC 1918)"),
            ("sixteen.test", "172.16.5.4".into(), "private (RFC 1918)"),
            (
                "oneninetwo.test",
                "192.168.7.8".into(),
                "private (RFC 1918)",
            ),
            ("cgnat.test", "100.64.1.2".into(), "CGNAT"),
            ("metadata.test", "169.254.169.254".into(), "link-local"),
            (
                "mapped.test",
                "::ffff:10.1.2.3".into(),
                "private (RFC 1918)",
            ),
            ("ula.test", "fd00::2".into(), "unique local"),
            ("loop.test", "127.0.0.2".into(), "loopback"),
        ];
        let mut text = String::from("# what a DNS server the agent controls would answer\n");
        for (n, ip, _) in &names {
            text.push_str(&format!("{ip} {n}\n"));
        }
        fs::write(&hosts, text).unwrap();
        fs::set_permissions(&hosts, fs::Permissions::from_mode(0o644)).unwrap();

        let mut probe = String::from(
            "import urllib.request, urllib.error\nout = open('/logs/agent/net', 'w')\n\
             def get(tag, url):\n    try:\n        r = urllib.request.urlopen(url, timeout=15)\n        out.write(f'{tag} {r.status} {r.read().decode()}\\n')\n    except urllib.error.HTTPError as e:\n        out.write(f'{tag} {e.code} {e.read().decode().strip()}\\n')\n    except Exception as e:\n        out.write(f'{tag} error {type(e).__name__}\\n')\n    out.flush()\n",
        );
        for (n, _, _) in &names {
            probe.push_str(&format!("get('{n}', 'http://{n}:{port}/')\n"));
        }
        probe.push_str(&format!(
            "get('literal-private', 'http://10.1.2.3:{port}/')\nget('exact-ip', 'http://{host_ip}:{port}/')\nget('pinned', 'http://pinned.test:{port}/')\nout.close()\n"
        ));
        let spec = agent(
            &ctx,
            "addr-probe",
            &format!("cat > /tmp/p.py <<'EOF'\n{probe}EOF\npython3 /tmp/p.py\n"),
        );
        let exact = format!("{host_ip}:{port}");
        let pin = format!("pinned.test={host_ip}");
        let (run, dir) = solve(
            &ctx,
            "addr",
            &c,
            &spec,
            &["--allow", "*", "--allow", &exact, "--resolve", &pin],
            &[("CBRUN_EGRESS_HOSTS", hosts.to_str().unwrap())],
        );
        let net = fs::read_to_string(dir.join("logs/agent/net"))
            .unwrap_or_else(|_| panic!("{}: the probe wrote nothing\n{}", who.label(), run.show()));
        let line = |tag: &str| -> String {
            net.lines()
                .find(|l| l.split(' ').next() == Some(tag))
                .unwrap_or_else(|| panic!("no {tag} in {net}"))
                .to_owned()
        };
        for (n, ip, what) in &names {
            let l = line(n);
            assert!(
                l.starts_with(&format!("{n} 403 ")) && l.contains(what),
                "{}: {n} -> {ip} must be refused as {what}: {l}\n{net}",
                who.label()
            );
            assert!(!l.contains("host-service-secret"), "{l}");
        }
        assert!(
            line("literal-private").starts_with("literal-private 403 "),
            "{net}"
        );
        // Exact listings reach the same service.
        assert_eq!(
            line("exact-ip"),
            "exact-ip 200 host-service-secret",
            "{net}"
        );
        assert_eq!(line("pinned"), "pinned 200 host-service-secret", "{net}");
        assert_eq!(
            server.seen().len(),
            2,
            "{}: only the two exact listings reached the service: {:?}",
            who.label(),
            server.seen()
        );
        // Every refusal is in the connection log with its reason.
        let log = network_log(&dir);
        for (n, ip, what) in &names {
            let shown = ip.strip_prefix("::ffff:").unwrap_or(ip);
            assert!(
                log.iter().any(|r| r["host"] == *n
                    && r["decision"] == "denied"
                    && r["reason"]
                        .as_str()
                        .is_some_and(|s| s.contains(shown) && s.contains(what))),
                "{}: no denied record for {n}: {log:?}",
                who.label()
            );
        }
        let allowed = log.iter().filter(|r| r["decision"] == "allowed").count();
        assert_eq!(allowed, 2, "{log:?}");
        ctx.assert_clean("address attacks");
    }
}

// ------------------------------------------------------------ registries

/// Builds real wheels and npm tarballs with the host's Python, writes the
/// mock registries' answers, and returns the banned files' paths.
struct Registries {
    pypi: Mock,
    files: Mock,
    npm: Mock,
    banned_wheel: String,
    banned_tgz: String,
}

const BUILD: &str = r#"
import base64, hashlib, io, json, sys, tarfile, zipfile
out = sys.argv[1]
def b64(d): return base64.urlsafe_b64encode(d).rstrip(b"=").decode()
def wheel(name, ver, requires=()):
    files = {f"{name}/__init__.py": f"NAME = {name!r}\n".encode()}
    di = f"{name}-{ver}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    files[f"{di}/METADATA"] = meta.encode()
    files[f"{di}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: cbrun-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(f"{p},sha256={b64(hashlib.sha256(d).digest())},{len(d)}\n" for p, d in files.items())
    files[f"{di}/RECORD"] = (record + f"{di}/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
    return f"{name}-{ver}-py3-none-any.whl", buf.getvalue()
def tgz(name, ver, deps):
    pj = json.dumps({"name": name, "version": ver, "main": "index.js", "dependencies": deps}).encode()
    js = f"module.exports = {name!r};\n".encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for p, d in (("package/package.json", pj), ("package/index.js", js)):
            i = tarfile.TarInfo(p); i.size = len(d); i.mode = 0o644
            t.addfile(i, io.BytesIO(d))
    data = buf.getvalue()
    return data, hashlib.sha1(data).hexdigest(), "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
result = {"wheels": [], "tgz": []}
for name, ver, req in (("okpkg", "1.0", ()), ("hasdep", "1.0", ("semver",)), ("semver", "3.0.2", ())):
    fn, data = wheel(name, ver, req)
    open(f"{out}/{fn}", "wb").write(data)
    result["wheels"].append({"project": name, "file": fn, "sha256": hashlib.sha256(data).hexdigest()})
for name, ver, deps in (("okjs", "1.0.0", {}), ("usesbanned", "1.0.0", {"semver": "^7.0.0"}), ("semver", "7.5.4", {})):
    data, sha1, integrity = tgz(name, ver, deps)
    fn = f"{name}-{ver}.tgz"
    open(f"{out}/{fn}", "wb").write(data)
    result["tgz"].append({"name": name, "version": ver, "file": fn, "shasum": sha1, "integrity": integrity, "deps": deps})
json.dump(result, open(f"{out}/manifest.json", "w"))
"#;

impl Registries {
    fn start(ctx: &Ctx) -> Registries {
        let build = ctx.dir.join("build");
        fs::create_dir_all(&build).unwrap();
        let st = Command::new(PY)
            .arg("-c")
            .arg(BUILD)
            .arg(&build)
            .status()
            .unwrap();
        assert!(st.success(), "building the fixtures");
        let m: Value =
            serde_json::from_str(&fs::read_to_string(build.join("manifest.json")).unwrap())
                .unwrap();
        let (pypi, files, npm) = (
            Mock::start("127.0.0.1:0"),
            Mock::start("127.0.0.1:0"),
            Mock::start("127.0.0.1:0"),
        );
        let mut banned_wheel = String::new();
        for (i, w) in m["wheels"].as_array().unwrap().iter().enumerate() {
            let (project, file) = (w["project"].as_str().unwrap(), w["file"].as_str().unwrap());
            let path = format!("/packages/{i:02x}/ab/{file}");
            files.set(
                &path,
                "application/octet-stream",
                fs::read(build.join(file)).unwrap(),
            );
            let page = format!(
                "<!DOCTYPE html><html><body><a href=\"{}{path}#sha256={}\">{file}</a></body></html>\n",
                files.base(),
                w["sha256"].as_str().unwrap()
            );
            pypi.set(
                &format!("/simple/{project}/"),
                "text/html",
                page.into_bytes(),
            );
            if project == "semver" {
                banned_wheel = path;
            }
        }
        let mut banned_tgz = String::new();
        for t in m["tgz"].as_array().unwrap() {
            let (name, ver, file) = (
                t["name"].as_str().unwrap(),
                t["version"].as_str().unwrap(),
                t["file"].as_str().unwrap(),
            );
            let path = format!("/{name}/-/{file}");
            npm.set(
                &path,
                "application/octet-stream",
                fs::read(build.join(file)).unwrap(),
            );
            let doc = serde_json::json!({
                "name": name,
                "dist-tags": {"latest": ver},
                "versions": {ver: {
                    "name": name, "version": ver, "dependencies": t["deps"],
                    "dist": {"tarball": format!("{}{path}", npm.base()), "shasum": t["shasum"], "integrity": t["integrity"]},
                }},
            });
            npm.set(
                &format!("/{name}"),
                "application/json",
                doc.to_string().into_bytes(),
            );
            if name == "semver" {
                banned_tgz = path;
            }
        }
        Registries {
            pypi,
            files,
            npm,
            banned_wheel,
            banned_tgz,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CBRUN_PYPI_URL", self.pypi.base()),
            ("CBRUN_PYPI_FILES_URL", self.files.base()),
            ("CBRUN_NPM_REGISTRY_URL", self.npm.base()),
        ]
    }

    /// Whether anything of the banned packages was asked of the mocks.
    fn banned_requests(&self) -> Vec<String> {
        self.pypi
            .seen()
            .into_iter()
            .chain(self.files.seen())
            .chain(self.npm.seen())
            .filter(|p| p.contains("semver"))
            .collect()
    }
}

/// The attacks, one step each: `STEP <name> rc=<code>` lines in
/// /logs/agent/results, each step's output in /logs/agent/<name>.log.
/// `direct` adds the steps that go to the real registry hosts (which the
/// wall refuses before any connection; without it they would leave the
/// machine, so the control run leaves them out).
fn attack_script(banned_wheel: &str, banned_tgz: &str, direct: bool) -> String {
    let skip = if direct { "" } else { ": " };
    let pip = "--no-cache-dir --disable-pip-version-check --retries 0 --timeout 20";
    let npm = "--no-audit --no-fund --no-update-notifier --fetch-retries=0";
    format!(
        r#"cd /tmp
step() {{ n=$1; shift; "$@" > /logs/agent/$n.log 2>&1; echo "STEP $n rc=$?" >> /logs/agent/results; }}
real_pip=$(ls /.cbrun/real/p*/bin/pip3 2>/dev/null | head -n 1)
real_npm=$(ls /.cbrun/real/p*/bin/npm-cli.js 2>/dev/null | head -n 1)
echo "real_pip=$real_pip real_npm=$real_npm" > /logs/agent/tools
step pip-dep pip3 install {pip} --target /app/py-dep hasdep
step pip-ok pip3 install {pip} --target /app/py-ok okpkg
step pip-isolated python3 -I -m pip install {pip} --target /app/py-iso semver
step pip-nopath env -u PYTHONPATH python3 -m pip install {pip} --target /app/py-nopath semver
step pip-real env -u PYTHONPATH "${{real_pip:-/nonexistent}}" install {pip} --target /app/py-real semver
{skip}step pip-direct-index env -u PYTHONPATH python3 -m pip install {pip} --index-url https://pypi.org/simple --target /app/py-direct semver
step curl-file sh -c 'code=$(curl -sS -o /app/curl.whl -w "%{{http_code}}" "http://127.0.0.1:3128/pypi/files{banned_wheel}"); echo "$code"; [ "$code" = 200 ]'
step urllib-file python3 -c 'import urllib.request; d = urllib.request.urlopen("http://127.0.0.1:3128/pypi/files{banned_wheel}").read(); open("/app/urllib.whl", "wb").write(d)'
{skip}step curl-direct curl -sS -f -o /app/direct.whl "https://files.pythonhosted.org{banned_wheel}"
step npm-dep npm install {npm} --prefix /app/js-dep usesbanned
step npm-ok npm install {npm} --prefix /app/js-ok okjs
step npm-real node "${{real_npm:-/nonexistent}}" install {npm} --prefix /app/js-real semver
{skip}step npm-direct node "${{real_npm:-/nonexistent}}" install {npm} --registry https://registry.npmjs.org/ --prefix /app/js-direct semver
step curl-tgz sh -c 'code=$(curl -sS -o /app/curl.tgz -w "%{{http_code}}" "http://127.0.0.1:3128/npm{banned_tgz}"); echo "$code"; [ "$code" = 200 ]'
echo done >> /logs/agent/results
"#
    )
}

fn results(dir: &Path) -> HashMap<String, i32> {
    let text = fs::read_to_string(dir.join("logs/agent/results")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("STEP ")?;
            let (name, rc) = rest.split_once(" rc=")?;
            Some((name.to_owned(), rc.parse().ok()?))
        })
        .collect()
}

/// Every `semver` file or directory under `root`.
fn banned_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("semver") {
                out.push(p.clone());
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(p);
            }
        }
    }
    out
}

fn have_tools() -> bool {
    for t in [
        "/usr/bin/pip3",
        "/usr/bin/npm",
        "/usr/bin/node",
        "/usr/bin/curl",
    ] {
        if !Path::new(t).exists() {
            return !missing(&format!("{t} is missing"));
        }
    }
    true
}

#[test]
fn the_registry_index_keeps_banned_packages_out_of_pip_and_npm() {
    if !have_tools() {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "egress-index");
        let c = case(&ctx, "case001", None);
        let reg = Registries::start(&ctx);
        let spec = agent(
            &ctx,
            "installer",
            &attack_script(&reg.banned_wheel, &reg.banned_tgz, true),
        );
        let env = reg.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (run, dir) = solve(
            &ctx,
            "wall",
            &c,
            &spec,
            &["--allow", "*", "--allow-registries"],
            &env,
        );
        let rc = results(&dir);
        let show = |step: &str| {
            format!(
                "{}: step {step}: {}\n{}",
                who.label(),
                fs::read_to_string(dir.join(format!("logs/agent/{step}.log"))).unwrap_or_default(),
                run.show()
            )
        };
        assert_eq!(rc.len(), 14, "{rc:?}\n{}", run.show());
        let tools = fs::read_to_string(dir.join("logs/agent/tools")).unwrap();
        assert!(
            tools.contains("/.cbrun/real/") && tools.contains("npm-cli.js"),
            "pristine tools not found: {tools}"
        );
        // What is allowed installs, through the index.
        for step in ["pip-ok", "npm-ok"] {
            assert_eq!(rc[step], 0, "{}", show(step));
        }
        assert!(dir.join("workspace/py-ok/okpkg/__init__.py").is_file());
        assert!(dir
            .join("workspace/js-ok/node_modules/okjs/package.json")
            .is_file());
        // Every way of asking for the banned package fails...
        for step in [
            "pip-dep",
            "pip-isolated",
            "pip-nopath",
            "pip-real",
            "pip-direct-index",
            "curl-file",
            "urllib-file",
            "curl-direct",
            "npm-dep",
            "npm-real",
            "npm-direct",
            "curl-tgz",
        ] {
            assert_ne!(rc[step], 0, "{}", show(step));
            // ...at the wall, not at a tripwire.
            let log = fs::read_to_string(dir.join(format!("logs/agent/{step}.log"))).unwrap();
            assert!(!log.contains("[cbrun denylist]"), "{}", show(step));
        }
        for step in ["pip-dep", "pip-isolated", "pip-nopath", "pip-real"] {
            let log = fs::read_to_string(dir.join(format!("logs/agent/{step}.log"))).unwrap();
            assert!(
                log.contains("No matching distribution found for semver"),
                "{}",
                show(step)
            );
        }
        for step in ["npm-dep", "npm-real"] {
            let log = fs::read_to_string(dir.join(format!("logs/agent/{step}.log"))).unwrap();
            assert!(
                log.contains("404") && log.contains("/npm/semver"),
                "{}",
                show(step)
            );
        }
        for step in ["curl-file", "curl-tgz"] {
            let log = fs::read_to_string(dir.join(format!("logs/agent/{step}.log"))).unwrap();
            assert!(log.starts_with("404"), "{}", show(step));
        }
        // ...and nothing of it is in the workspace (the bodies of refused
        // fetches name the denylist instead).
        let ws = dir.join("workspace");
        let left: Vec<PathBuf> = banned_files(&ws);
        assert!(
            left.is_empty(),
            "{}: banned files in the workspace: {left:?}",
            who.label()
        );
        assert!(!ws.join("py-dep/hasdep").exists(), "hasdep half-installed");
        for f in ["curl.whl", "curl.tgz"] {
            let body = fs::read_to_string(ws.join(f)).unwrap_or_default();
            assert!(body.contains("install denylist"), "{f}: {body}");
        }
        for f in ["urllib.whl", "direct.whl"] {
            assert!(!ws.join(f).exists(), "{}: {f} was written", who.label());
        }
        // The index never asked the registries for it.
        assert!(
            reg.banned_requests().is_empty(),
            "{:?}",
            reg.banned_requests()
        );
        // The log has the refusals: by the index, and of the registry hosts.
        let log = network_log(&dir);
        let denied_index = log
            .iter()
            .filter(|r| {
                r["decision"] == "denied"
                    && r["index_path"]
                        .as_str()
                        .is_some_and(|p| p.contains("semver"))
                    && r["reason"]
                        .as_str()
                        .is_some_and(|s| s.contains("install denylist"))
            })
            .count();
        assert!(denied_index >= 8, "{}: {log:#?}", who.label());
        for h in ["pypi.org", "files.pythonhosted.org", "registry.npmjs.org"] {
            assert!(
                log.iter().any(|r| r["host"] == h
                    && r["decision"] == "denied"
                    && r["reason"]
                        .as_str()
                        .is_some_and(|s| s.contains("registry index"))),
                "{}: no refusal of {h}: {log:#?}",
                who.label()
            );
        }
        // No ban the agent did not ask for is written anywhere.
        for f in ["logs/cbrun/solve.json", "logs/cbrun/network.jsonl"] {
            let text = fs::read_to_string(dir.join(f)).unwrap();
            assert!(!text.contains("node-semver"), "{f}: {text}");
        }
        ctx.assert_clean("registry index attacks");
    }
}

/// The control: the same agent, a case that bans nothing. The wall is the
/// only thing that changed, and now the banned package gets in by every
/// route the index serves: so the assertions above cannot pass vacuously.
#[test]
fn without_bans_the_same_agent_gets_the_package_in() {
    if !have_tools() {
        return;
    }
    let ctx = Ctx::new(Who::Root, "egress-control");
    let c = case(&ctx, "case001", Some(&[]));
    let reg = Registries::start(&ctx);
    let spec = agent(
        &ctx,
        "installer",
        &attack_script(&reg.banned_wheel, &reg.banned_tgz, false),
    );
    let env = reg.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (run, dir) = solve(
        &ctx,
        "open",
        &c,
        &spec,
        &["--allow", "*", "--allow-registries"],
        &env,
    );
    let rc = results(&dir);
    for step in [
        "pip-dep",
        "pip-ok",
        "pip-isolated",
        "pip-nopath",
        "curl-file",
        "urllib-file",
        "npm-dep",
        "npm-ok",
        "curl-tgz",
    ] {
        assert_eq!(
            rc.get(step),
            Some(&0),
            "control step {step}: {}\n{}",
            fs::read_to_string(dir.join(format!("logs/agent/{step}.log"))).unwrap_or_default(),
            run.show()
        );
    }
    let ws = dir.join("workspace");
    assert!(
        ws.join("py-dep/semver/__init__.py").is_file(),
        "{:?}",
        banned_files(&ws)
    );
    assert!(ws.join("js-dep/node_modules/semver/package.json").is_file());
    assert!(!reg.banned_requests().is_empty());
    ctx.assert_clean("the control");
}
