//! A private CA over real TLS, and banned modules masked in a host-style root.

use super::*;

/// A TLS-intercepting proxy, in small: an HTTPS server on 127.0.0.1 whose
/// certificate a private CA signed. Python inside the build sandbox
/// refuses it without `--ca-bundle` (the install fails, once: no retry
/// asked) and fetches from it with the bundle; in a solve sandbox, a real
/// TLS handshake on the sandbox's own loopback succeeds only with the
/// bundle, which the trial record mentions. Root and rootless.
#[test]
fn a_private_ca_is_trusted_over_real_tls_only_with_the_bundle() {
    if !imgkit::require_tool("openssl", "test CA") || !imgkit::require_tool("python3", "TLS client")
    {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "ca-tls");
        let h = home(&ctx);
        let ca = imgkit::TestCa::new(&ctx.dir.join("ca"));
        let Some(pyroot) = imgkit::python_rootfs(&ctx.dir.join("pyroot")) else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no host Python root"
            );
            eprintln!("note: no /usr/bin/python3 with its standard library; skipped");
            return;
        };
        // A user's own root folder (cbrun makes its mount points in it).
        imgkit::sh(&format!(
            "chown -R {0}:{0} '{1}'",
            who.uid(),
            pyroot.display()
        ));
        cb(
            &ctx,
            &h,
            &[
                "image",
                "import",
                pyroot.to_str().unwrap(),
                "--tag",
                "pyroot:latest",
            ],
        )
        .assert_code(0, "import the Python root");
        let server = imgkit::HttpsServer::start(&ca);
        let recipe = ctx.dir.join("fetch.toml");
        fs::write(
            &recipe,
            format!(
                "base = \"pyroot:latest\"\nname = \"ca/fetch\"\n\
                 install_command = \"mkdir -p /opt && python3 -c 'import urllib.request as u; print(u.urlopen(\\\"https://127.0.0.1:{}/\\\", timeout=20).status)' > /opt/fetched\"\n",
                server.port
            ),
        )
        .unwrap();
        world_readable(&recipe);
        let r = cb(
            &ctx,
            &h,
            &[
                "image",
                "build",
                recipe.to_str().unwrap(),
                "--attempts",
                "1",
                "--json",
            ],
        );
        assert_ne!(r.code, Some(0), "trusted without the bundle\n{}", r.show());
        let log = fs::read_dir(Path::new(&h).join("logs"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .map(|e| fs::read_to_string(e.path()).unwrap())
            .collect::<String>();
        assert!(
            log.contains("CERTIFICATE_VERIFY_FAILED"),
            "refused for the certificate\n{log}"
        );
        let r = cb(
            &ctx,
            &h,
            &[
                "image",
                "build",
                recipe.to_str().unwrap(),
                "--attempts",
                "1",
                "--json",
                "--ca-bundle",
                ca.ca().to_str().unwrap(),
            ],
        );
        r.assert_code(0, "build with the CA");
        let rep = r.stdout_json();
        assert_eq!(rep["ca_bundle"]["certificates"], 1, "{}", r.show());
        let img = rep["image"].as_str().unwrap().to_owned();
        let seen = cb(
            &ctx,
            &h,
            &[
                "sandbox",
                "run",
                "--image",
                &img,
                "--",
                "cat",
                "/opt/fetched",
            ],
        );
        assert_eq!(seen.stdout, "200\n", "{}", seen.show());
        drop(server);

        // The solve sandbox: its own loopback, a server there, a client.
        let case = imgkit::case_copy(&ctx.dir, "ok-minimal");
        let pem = fs::read_to_string(ca.dir.join("srv.pem")).unwrap();
        let key = fs::read_to_string(ca.dir.join("srv.key")).unwrap();
        let agent = ctx.dir.join("tls-agent.toml");
        fs::write(
            &agent,
            format!(
                "name = \"tls-agent\"\n\
                 command = \"python3 -c \\\"$TLS_TEST\\\" > /app/tls.txt 2>&1; echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n\
                 [env]\nSRV_PEM = '''\n{pem}'''\nSRV_KEY = '''\n{key}'''\nTLS_TEST = '''\n{TLS_TEST}'''\n"
            ),
        )
        .unwrap();
        world_readable(&agent);
        for (with, want) in [(false, "refused"), (true, "fetched ok")] {
            let out = ctx.out.join(format!("trial-{with}"));
            let mut args = vec![
                "solve",
                case.to_str().unwrap(),
                "--rootfs",
                pyroot.to_str().unwrap(),
                "--agent",
                agent.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--json",
            ];
            let ca_s = ca.ca().display().to_string();
            if with {
                args.extend(["--ca-bundle", ca_s.as_str()]);
            }
            let r = cb(&ctx, &h, &args);
            let got = fs::read_to_string(out.join("workspace/tls.txt")).unwrap_or_default();
            assert!(
                got.starts_with(want),
                "with bundle: {with}\n{got}\n{}",
                r.show()
            );
            // `solve --json` prints only its report (the record's solve half).
            let rep = r.stdout_json();
            let said: Vec<&str> = rep["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|w| w.as_str())
                .filter(|w| w.contains("CA bundle") && w.contains(&ca_s))
                .collect();
            assert_eq!(said.len(), usize::from(with), "recorded\n{}", r.show());
        }
        ctx.assert_clean("CA over TLS");
    }
}

/// The solve sandbox's TLS check: a server on its own 127.0.0.1 with the
/// test certificate, a client with Python's default trust.
const TLS_TEST: &str = r#"
import os, socket, ssl, threading, urllib.request
open('/tmp/s.pem', 'w').write(os.environ['SRV_PEM'])
open('/tmp/s.key', 'w').write(os.environ['SRV_KEY'])
sc = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
sc.load_cert_chain('/tmp/s.pem', '/tmp/s.key')
ls = socket.socket()
ls.bind(('127.0.0.1', 0))
ls.listen(1)
def serve():
    c, _ = ls.accept()
    try:
        s = sc.wrap_socket(c, server_side=True)
        s.recv(4096)
        s.sendall(b'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok')
        s.close()
    except Exception:
        c.close()
threading.Thread(target=serve, daemon=True).start()
try:
    r = urllib.request.urlopen('https://127.0.0.1:%d/' % ls.getsockname()[1], timeout=10)
    print('fetched', r.read().decode())
except Exception as e:
    print('refused', type(e).__name__, e)
"#;

/// The import probe on a host-style root (`--rootfs DIR`, a system Python
/// with the banned upstream installed system-wide, as a host with `tomli`
/// would be): importable in a plain sandbox on that root (the attack
/// works without the mask), not importable by the agent, and recorded in
/// trial.json with where it was. Root and rootless.
#[test]
fn a_banned_module_installed_in_a_host_style_root_is_masked_and_recorded() {
    if !imgkit::require_tool("python3", "the Python root") {
        return;
    }
    for who in [Who::Root, Who::Delegated] {
        let ctx = Ctx::new(who, "import-probe");
        let Some(pyroot) = imgkit::python_rootfs(&ctx.dir.join("pyroot")) else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no host Python root"
            );
            eprintln!("note: no /usr/bin/python3 with its standard library; skipped");
            return;
        };
        let site = imgkit::plant_fake_banned(&pyroot);
        imgkit::sh(&format!(
            "chown -R {0}:{0} '{1}'",
            who.uid(),
            pyroot.display()
        ));
        let site_in = Path::new("/").join(site.strip_prefix(&pyroot).unwrap());
        let run = |args: &[&str]| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            ctx.spawn_args(&args, &[], None)
                .wait(Duration::from_secs(300))
        };
        // Without the mask: the banned upstream imports.
        let r = run(&[
            "sandbox",
            "run",
            "--rootfs",
            pyroot.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            "import fakeban, fakebanmod; print(fakeban.ANSWER + fakebanmod.ANSWER)",
        ]);
        r.assert_code(0, "plain sandbox on the root");
        assert_eq!(r.stdout, "84\n", "{}", r.show());
        // The agent: imports both by computed names (past the static scan).
        let case = imgkit::case_copy(&ctx.dir, "img-apt-pip");
        let agent = ctx.dir.join("importer.toml");
        fs::write(
            &agent,
            "name = \"importer\"\n\
             command = \"for m in fakeban fakebanmod; do python3 -c \\\"import importlib; importlib.import_module('$m'); print('$m imported')\\\" >> /app/probe.txt 2>&1; done; \
             echo CODINGBENCH_SUBMIT > /logs/agent/submit\"\n",
        )
        .unwrap();
        world_readable(&agent);
        let out = ctx.out.join("trial");
        let r = run(&[
            "trial",
            case.to_str().unwrap(),
            "--rootfs",
            pyroot.to_str().unwrap(),
            "--agent",
            agent.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let probe = fs::read_to_string(out.join("workspace/probe.txt")).unwrap_or_default();
        assert!(
            !probe.contains("imported")
                && probe
                    .lines()
                    .filter(|l| l.starts_with("ModuleNotFoundError: No module named"))
                    .count()
                    == 2,
            "the agent imported the banned upstream:\n{probe}\n{}",
            r.show()
        );
        let rec: Value = serde_json::from_str(
            &fs::read_to_string(out.join("trial.json"))
                .unwrap_or_else(|e| panic!("trial.json: {e}\n{}", r.show())),
        )
        .unwrap();
        let masked: Vec<(String, String)> = rec["masked_imports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["module"].as_str().unwrap().to_owned(),
                    m["path"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            masked,
            [
                (
                    "fakeban".to_owned(),
                    site_in.join("fakeban").display().to_string()
                ),
                (
                    "fakebanmod".to_owned(),
                    site_in.join("fakebanmod.py").display().to_string()
                )
            ],
            "{rec}"
        );
        // The root folder itself is untouched: the mask is a bind.
        assert_eq!(
            fs::read_to_string(site.join("fakeban/__init__.py")).unwrap(),
            "ANSWER = 42\n"
        );
        ctx.assert_clean("import probe");
    }
}
