//! The judge's view of the stored workspace (`src/trial/view.rs`): an
//! overlay on the workspace by default, the copy as fallback. Each test
//! runs as root and as `nobody`: the overlay gives the same verdicts as the
//! copy on every sample control; a hostile workspace (planted symlinks to
//! host files, FIFOs, device nodes, setuid files, a sparse 10 GiB file,
//! writes by the judged code) is as harmless on the overlay as on the copy;
//! the copy takes over where the overlay cannot be had.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

const REPO: &str = env!("CARGO_MANIFEST_DIR");
const USERS: [Who; 2] = [Who::Root, Who::Delegated];

fn sh(c: &mut Command) {
    let st = c.status().unwrap();
    assert!(st.success(), "{c:?}: {st}");
}

/// A world-readable copy of a sample case inside the test's folder.
fn case(ctx: &Ctx, name: &str) -> PathBuf {
    let dst = ctx.dir.join("cases").join(name);
    if !dst.exists() {
        fs::create_dir_all(dst.parent().unwrap()).unwrap();
        sh(Command::new("cp")
            .arg("-r")
            .arg(Path::new(REPO).join("cases").join(name))
            .arg(&dst));
        sh(Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(ctx.dir.join("cases")));
    }
    dst
}

/// The host uid a solve sandbox's root writes the workspace as.
fn solve_owner(who: Who) -> u32 {
    match who {
        Who::Root => ROOT_RANGE_START,
        other => other.uid(),
    }
}

/// A stored workspace as a solve leaves it: `src` copied, owned by the
/// solve sandbox's root.
fn workspace(ctx: &Ctx, name: &str, src: &Path) -> PathBuf {
    let ws = ctx.dir.join(name);
    sh(Command::new("cp").arg("-r").arg(src).arg(&ws));
    sh(Command::new("chmod").args(["-R", "a+rX"]).arg(&ws));
    own(ctx, &ws);
    ws
}

fn own(ctx: &Ctx, p: &Path) {
    let o = solve_owner(ctx.who);
    sh(Command::new("chown")
        .arg("-R")
        .arg("-h")
        .arg(format!("{o}:{o}"))
        .arg(p));
}

/// `cbrun judge --json`, `view` in CBRUN_JUDGE_VIEW (when given).
fn judge(ctx: &Ctx, label: &str, case_dir: &Path, ws: &Path, view: Option<&str>) -> Value {
    let out = ctx.out.join(label);
    let args: Vec<String> = [
        "judge",
        case_dir.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let env: Vec<(&str, &str)> = view.map(|v| ("CBRUN_JUDGE_VIEW", v)).into_iter().collect();
    let run = ctx
        .spawn_args(&args, &env, None)
        .wait(Duration::from_secs(120));
    run.assert_code(0, label);
    let mut report = run.stdout_json();
    report["_log"] = Value::String(
        fs::read_to_string(out.join("logs/verifier/final_tests.log")).unwrap_or_default(),
    );
    report
}

/// What decides a verdict, for comparing two judges.
fn verdict(r: &Value) -> Value {
    serde_json::json!({
        "reward": r["reward"],
        "reason": r["reason"],
        "counts": r["counts"],
        "failed_tests": r["failed_tests"],
        "judge_error": r["judge_error"],
        "infrastructure": r["infrastructure"],
    })
}

#[test]
fn the_overlay_and_the_copy_agree_on_every_sample_control() {
    for who in USERS {
        let ctx = Ctx::new(who, "view-controls");
        let mut judged = 0;
        for name in ["case001", "case002", "case003"] {
            let c = case(&ctx, name);
            let mut controls: Vec<PathBuf> = fs::read_dir(c.join("controls"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            controls.sort();
            for control in controls {
                let cname = control.file_name().unwrap().to_str().unwrap().to_owned();
                let label = format!("{name}-{cname}");
                let ws = workspace(&ctx, &format!("ws-{label}"), &control.join("app"));
                let ov = judge(&ctx, &format!("{label}-overlay"), &c, &ws, None);
                let cp = judge(&ctx, &format!("{label}-copy"), &c, &ws, Some("copy"));
                assert_eq!(
                    ov["workspace_view"],
                    "overlay",
                    "{}: {label}: {ov}",
                    who.label()
                );
                assert_eq!(cp["workspace_view"], "copy", "{label}: {cp}");
                assert_eq!(
                    cp["workspace_copy"]["files"].as_u64().map(|f| f > 0),
                    Some(true)
                );
                assert_eq!(
                    verdict(&ov),
                    verdict(&cp),
                    "{}: {label}: overlay and copy disagree",
                    who.label()
                );
                assert!(
                    ov["counts"]["total"].as_u64().unwrap_or(0) > 0,
                    "{label}: {ov}"
                );
                judged += 1;
            }
            // The reference passes on the overlay, as `validate` expects.
            let ws = ctx.dir.join(format!("ws-{name}-reference"));
            let again = judge(&ctx, &format!("{name}-ref-again"), &c, &ws, None);
            assert_eq!(again["reward"], 1, "{}: {name}: {again}", who.label());
        }
        assert_eq!(judged, 11);
        ctx.assert_clean("judging every control twice");
    }
}

/// Judged code (the reference's module, with a prologue run at import)
/// that probes its `/app` and fails with what it found as its message.
const PROBE: &str = r##"
import json, os
r = {"uid": os.getuid()}
r["fifo_seen"] = os.path.lexists("/app/a/fifo")
r["dev_seen"] = os.path.lexists("/app/a/b/null")
r["sock_seen"] = os.path.lexists("/app/sock")
r["a_listing"] = sorted(os.listdir("/app/a"))
r["suid_mode"] = os.stat("/app/suid").st_mode & 0o7777
f = os.statvfs("/app").f_flag
r["nosuid"] = bool(f & os.ST_NOSUID)
r["nodev"] = bool(f & os.ST_NODEV)
r["app_owner"] = os.stat("/app/src").st_uid
r["a_owner"] = os.stat("/app/a").st_uid
def attempt(name, fn):
    try:
        fn()
        r[name] = "ok"
    except Exception as e:
        r[name] = type(e).__name__
def through_link():
    with open("/app/evil", "w") as f:
        f.write("pwned by the judge")
attempt("through_link", through_link)
def new_file():
    with open("/app/new.txt", "w") as f:
        f.write("judge was here")
attempt("new_file", new_file)
def edit():
    with open("/app/src/versionkit/__init__.py", "a") as f:
        f.write("# judge was here")
attempt("edit", edit)
def sparse():
    with open("/app/data.img", "r+b") as f:
        f.seek(5 << 30)
        f.write(b"judge")
attempt("sparse", sparse)
def fill():
    with open("/app/fill", "wb") as f:
        for _ in range(80):
            f.write(b"x" * (1 << 20))
attempt("fill_80m", fill)
raise ImportError("PRO" "BE<" + json.dumps(r) + ">PRO" "BE")
"##;

fn probe_result(report: &Value) -> Value {
    let log = report["_log"].as_str().unwrap();
    let start = log
        .find("PROBE<")
        .unwrap_or_else(|| panic!("the probe did not run:\n{log}\n{report}"))
        + 6;
    let end = start + log[start..].find(">PROBE").unwrap();
    // The traceback shows the message with its quotes escaped.
    serde_json::from_str(&log[start..end].replace("\\\"", "\"")).unwrap_or_else(|e| {
        panic!("probe output {:?}: {e}", &log[start..end]);
    })
}

#[test]
fn a_hostile_workspace_is_as_harmless_on_the_overlay_as_on_the_copy() {
    for who in USERS {
        let ctx = Ctx::new(who, "view-hostile");
        let c = case(&ctx, "case001");
        let host_file = ctx.out.join("precious");
        fs::write(&host_file, "precious host data\n").unwrap();
        std::os::unix::fs::chown(&host_file, Some(who.uid()), Some(who.uid())).unwrap();
        fs::set_permissions(&host_file, fs::Permissions::from_mode(0o666)).unwrap();

        let ws = ctx.dir.join("ws");
        sh(Command::new("cp")
            .arg("-r")
            .arg(c.join("controls/reference/app"))
            .arg(&ws));
        let module = ws.join("src/versionkit/__init__.py");
        let reference = fs::read_to_string(&module).unwrap();
        fs::write(&module, format!("{PROBE}\n{reference}")).unwrap();
        fs::create_dir_all(ws.join("a/b")).unwrap();
        std::os::unix::fs::symlink(&host_file, ws.join("evil")).unwrap();
        sh(Command::new("mkfifo").arg(ws.join("a/fifo")));
        sh(Command::new("mknod")
            .arg(ws.join("a/b/null"))
            .args(["c", "1", "3"]));
        let sock = std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
        drop(sock);
        fs::copy("/usr/bin/id", ws.join("suid")).unwrap();
        let f = fs::File::create(ws.join("data.img")).unwrap();
        f.set_len(10 << 30).unwrap();
        drop(f);
        sh(Command::new("chmod").args(["-R", "a+rX"]).arg(&ws));
        own(&ctx, &ws);
        // After the chown, which clears it.
        fs::set_permissions(ws.join("suid"), fs::Permissions::from_mode(0o4755)).unwrap();
        let before = tree_state(&ws);

        let ov = judge(&ctx, "overlay", &c, &ws, None);
        assert_eq!(ov["workspace_view"], "overlay", "{}: {ov}", who.label());
        let mut masked: Vec<&str> = ov["workspace_scan"]["masked_special"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        masked.sort();
        assert_eq!(masked, ["a/b/null", "a/fifo", "sock"], "{ov}");
        let p = probe_result(&ov);
        let cp = judge(&ctx, "copy", &c, &ws, Some("copy"));
        assert_eq!(cp["workspace_view"], "copy");
        let q = probe_result(&cp);
        let label = who.label();

        for (view, r) in [("overlay", &p), ("copy", &q)] {
            // The judge owns its /app, and sees no special file.
            assert_eq!(r["uid"], 1000, "{label} {view}: {r}");
            assert_eq!(r["app_owner"], 1000, "{label} {view}: {r}");
            assert_eq!(r["a_owner"], 1000, "{label} {view}: {r}");
            for k in ["fifo_seen", "dev_seen", "sock_seen"] {
                assert_eq!(r[k], false, "{label} {view}: {k}: {r}");
            }
            assert_eq!(
                r["a_listing"],
                serde_json::json!(["b"]),
                "{label} {view}: {r}"
            );
            // Its writes work, in its own view.
            for k in ["new_file", "edit", "sparse", "fill_80m"] {
                assert_eq!(r[k], "ok", "{label} {view}: {k}: {r}");
            }
        }
        // On the overlay setuid bits are visible but inert (the copy
        // drops them).
        assert_eq!(p["suid_mode"], 0o4755, "{p}");
        assert_eq!(p["nosuid"], true, "{p}");
        assert_eq!(p["nodev"], true, "{p}");
        assert_eq!(q["suid_mode"], 0o755, "{q}");

        // Nothing reached the host: not the linked file, not the stored
        // workspace (its specials, its sparse file, its modes).
        assert_eq!(
            fs::read_to_string(&host_file).unwrap(),
            "precious host data\n"
        );
        assert_eq!(
            tree_state(&ws),
            before,
            "{label}: the stored workspace changed"
        );
        assert!(!ws.join("new.txt").exists() && !ws.join("fill").exists());
        assert!(fs::metadata(ws.join("data.img")).unwrap().blocks() < 64);
        ctx.assert_clean("a hostile workspace on the overlay");
    }
}

/// Every entry below `root`: path, kind and mode bits, owner, size, mtime,
/// content hash for small regular files.
fn tree_state(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for p in names {
            let m = fs::symlink_metadata(&p).unwrap();
            let content = if m.is_file() && m.len() < 1 << 20 {
                format!("{:?}", fs::read(&p).unwrap())
            } else {
                String::new()
            };
            out.push(format!(
                "{} {:o} {}:{} {} {} {}",
                p.strip_prefix(root).unwrap().display(),
                m.mode(),
                m.uid(),
                m.gid(),
                m.len(),
                m.mtime_nsec() + m.mtime() * 1_000_000_000,
                content.len() + content.bytes().map(u64::from).sum::<u64>() as usize
            ));
            if m.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

#[test]
fn the_copy_takes_over_where_the_overlay_cannot_be_had() {
    for who in USERS {
        let ctx = Ctx::new(who, "view-fallback");
        let c = case(&ctx, "case001");
        let reference = c.join("controls/reference/app");

        // Forced.
        let ws = workspace(&ctx, "ws", &reference);
        let r = judge(&ctx, "forced", &c, &ws, Some("copy"));
        assert_eq!(
            (r["workspace_view"].as_str(), r["reward"].as_u64()),
            (Some("copy"), Some(1)),
            "{r}"
        );
        assert!(r["workspace_view_note"].is_null(), "{r}");

        // A directory of another owner: the judge would not own it.
        let stray = ws.join("src/stray");
        fs::create_dir(&stray).unwrap();
        std::os::unix::fs::chown(&stray, Some(12345), Some(12345)).unwrap();
        let r = judge(&ctx, "mixed", &c, &ws, None);
        assert_eq!(
            (r["workspace_view"].as_str(), r["reward"].as_u64()),
            (Some("copy"), Some(1)),
            "{}: {r}",
            who.label()
        );
        let note = r["workspace_view_note"].as_str().unwrap();
        assert!(note.contains("src/stray has another owner"), "{note}");
        fs::remove_dir(&stray).unwrap();

        // A workspace owned by host root: as root the idmapped lower layer
        // shows it as the judge's; rootless, the caller does not own it.
        let root_owned = ctx.dir.join("root-owned");
        sh(Command::new("cp")
            .arg("-r")
            .arg(&reference)
            .arg(&root_owned));
        sh(Command::new("chmod").args(["-R", "a+rX"]).arg(&root_owned));
        let r = judge(&ctx, "root-owned", &c, &root_owned, None);
        assert_eq!(r["reward"], 1, "{r}");
        if who == Who::Root {
            assert_eq!(r["workspace_view"], "overlay", "{r}");
        } else {
            assert_eq!(r["workspace_view"], "copy", "{r}");
            assert!(
                r["workspace_view_note"]
                    .as_str()
                    .unwrap()
                    .contains("not to the user cbrun runs as"),
                "{r}"
            );
        }

        // The tree's limits are the copy's, and the submission's fault.
        let deep = workspace(&ctx, "deep", &reference);
        let mut p = deep.clone();
        for _ in 0..70 {
            p.push("d");
        }
        fs::create_dir_all(&p).unwrap();
        own(&ctx, &deep);
        for view in [None, Some("copy")] {
            let r = judge(&ctx, &format!("deep-{view:?}"), &c, &deep, view);
            assert_eq!(r["reward"], 0, "{r}");
            assert_eq!(r["infrastructure"], false, "{r}");
            assert!(
                r["judge_error"]
                    .as_str()
                    .unwrap()
                    .contains("nested more than 64 levels deep"),
                "{r}"
            );
        }
        ctx.assert_clean("fallbacks");
    }
}
