//! Error lines through the real binary: each says what cbrun was doing,
//! names the file and field, and gives its cause exactly once, on one
//! `cbrun: error: ...` line; the `--json` envelope and the `--outcome` file
//! carry the same line. Paths covered: a broken case file, malformed image
//! archives, a bad agent spec, bad plans, a report folder that is not
//! there, a trial `--out` that exists, a sandbox output file that cannot be
//! created. (`image::error_lines_say_each_cause_once` covers unpacking.)
//!
//! cbrun's error types put a cause either in their message or in
//! `source()`, never both, and the command line prints the chain once; a
//! type that did both printed the cause twice (`report` on a missing folder
//! did, before).

use std::fs;
use std::path::Path;

use crate::common::*;

/// Exit `code`, one line on stderr, `cbrun: error: ...`, naming each of
/// `naming` and holding `cause` exactly once. Returns the message (the
/// line without its prefix).
fn assert_cause_once(r: &Run, code: i32, naming: &[&str], cause: &str) -> String {
    r.assert_code(code, cause);
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr\n{}", r.show());
    let msg = lines[0]
        .strip_prefix("cbrun: error: ")
        .unwrap_or_else(|| panic!("no `cbrun: error: ` prefix\n{}", r.show()));
    for n in naming {
        assert!(
            msg.contains(n),
            "the error does not name {n:?}\n{}",
            r.show()
        );
    }
    assert_eq!(
        msg.matches(cause).count(),
        1,
        "the cause {cause:?} is not said exactly once\n{}",
        r.show()
    );
    msg.to_owned()
}

fn write(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
}

/// An image store of the test's own (`CBRUN_HOME`).
fn image_import(ctx: &Ctx, src: &Path, tag: &str) -> Run {
    let home = ctx.dir.join("store");
    let _ = fs::create_dir(&home);
    let args: Vec<String> = ["image", "import", src.to_str().unwrap(), "--tag", tag]
        .map(str::to_owned)
        .to_vec();
    ctx.spawn_args(&args, &[("CBRUN_HOME", home.to_str().unwrap())], None)
        .wait(DEFAULT_DEADLINE)
}

/// A tar archive of `(name, bytes)` files, made by tar(1).
fn tar_of(ctx: &Ctx, name: &str, files: &[(&str, &[u8])]) -> std::path::PathBuf {
    let src = ctx.dir.join(format!("{name}.d"));
    fs::create_dir(&src).unwrap();
    for (n, data) in files {
        fs::write(src.join(n), data).unwrap();
    }
    let out = ctx.dir.join(name);
    let st = std::process::Command::new("tar")
        .arg("cf")
        .arg(&out)
        .arg("-C")
        .arg(&src)
        .args(files.iter().map(|(n, _)| *n))
        .status()
        .unwrap();
    assert!(st.success(), "tar cf {name}");
    out
}

#[test]
fn a_broken_case_file_says_its_cause_once() {
    let ctx = Ctx::new(Who::Root, "err-case");
    let case = sample_case(&ctx, "case001");
    write(
        &case.join("source/manifest.json"),
        "{\"id\": \"case001\",\n",
    );
    let out = ctx.out.join("t");
    let r = ctx.cbrun(&[
        "trial",
        case.to_str().unwrap(),
        "--agent",
        "replay:@reference",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_cause_once(
        &r,
        2,
        &["source/manifest.json", "line 2"],
        "EOF while parsing",
    );
    assert!(!out.exists(), "nothing is written for a broken case");
    // A case file that is a directory: the kind, once.
    let m = case.join("source/manifest.json");
    fs::remove_file(&m).unwrap();
    fs::create_dir(&m).unwrap();
    let r = ctx.cbrun(&["case", "check", case.to_str().unwrap()]);
    assert_cause_once(&r, 1, &["source/manifest.json"], "found a directory");
    ctx.assert_clean("a broken case");
}

#[test]
fn malformed_image_archives_say_their_cause_once() {
    let ctx = Ctx::new(Who::Root, "err-image");
    // A docker-archive whose manifest.json is cut short.
    let da = tar_of(
        &ctx,
        "da.tar",
        &[(
            "manifest.json",
            b"[{\"Config\": \"c.json\", \"Layers\": [\"l.tar\"]\n",
        )],
    );
    let r = image_import(&ctx, &da, "da:1");
    assert_cause_once(
        &r,
        125,
        &["docker-archive", "da.tar", "manifest.json"],
        "EOF while parsing",
    );
    // A rootfs tar whose second header has a wrong checksum.
    let two = tar_of(&ctx, "two.tar", &[("a", b"a\n"), ("b", b"b\n")]);
    let mut bytes = fs::read(&two).unwrap();
    bytes[512 * 2 + 148..512 * 2 + 156].copy_from_slice(b"0000000\0");
    let bad = ctx.dir.join("bad.tar");
    fs::write(&bad, &bytes).unwrap();
    let r = image_import(&ctx, &bad, "bad:1");
    assert_cause_once(&r, 125, &["bad.tar"], "checksum mismatch");
    ctx.assert_clean("malformed archives");
}

#[test]
fn a_bad_agent_spec_says_its_cause_once() {
    let ctx = Ctx::new(Who::Root, "err-spec");
    let case = sample_case(&ctx, "case001");
    let spec = ctx.dir.join("agent.toml");
    write(&spec, "name = \"x\"\ncommand = 3\n");
    let out = ctx.out.join("t");
    let r = ctx.cbrun(&[
        "trial",
        case.to_str().unwrap(),
        "--agent",
        spec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_cause_once(
        &r,
        2,
        &["agent.toml", "field command"],
        "invalid type: integer `3`",
    );
    assert!(!out.exists());
    ctx.assert_clean("a bad agent spec");
}

#[test]
fn bad_plans_say_their_cause_once() {
    let ctx = Ctx::new(Who::Root, "err-plan");
    let case = sample_case(&ctx, "case001");
    let plan = ctx.dir.join("plan.toml");
    write(
        &plan,
        &format!(
            "cases = [{:?}]\nrepeats = \"two\"\n",
            case.to_str().unwrap()
        ),
    );
    let out = ctx.out.join("r");
    let run = |ctx: &Ctx| {
        ctx.cbrun(&[
            "run",
            "--plan",
            plan.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    assert_cause_once(
        &run(&ctx),
        2,
        &["plan.toml", "line 2"],
        "invalid type: string \"two\"",
    );
    // A configuration's image that is not in the store (an empty one).
    write(
        &plan,
        &format!(
            "cases = [{:?}]\n[[config]]\nname = \"a\"\nagent = \"replay:@reference\"\nimage = \"nosuch:1\"\n",
            case.to_str().unwrap()
        ),
    );
    let home = ctx.dir.join("store");
    fs::create_dir(&home).unwrap();
    let args: Vec<String> = [
        "run",
        "--plan",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]
    .map(str::to_owned)
    .to_vec();
    let r = ctx
        .spawn_args(&args, &[("CBRUN_HOME", home.to_str().unwrap())], None)
        .wait(DEFAULT_DEADLINE);
    assert_cause_once(
        &r,
        2,
        &["plan.toml", "config a", "image"],
        "is not in the store",
    );
    assert!(!out.exists(), "nothing is written for a bad plan");
    ctx.assert_clean("bad plans");
}

/// Regression: the report's folder error reworded its cause in its message
/// and also returned it as its source, so the line said it twice.
#[test]
fn a_missing_report_folder_says_its_cause_once() {
    let ctx = Ctx::new(Who::Root, "err-report");
    let gone = ctx.dir.join("no-such-run");
    let r = ctx.cbrun(&["report", gone.to_str().unwrap()]);
    assert_cause_once(&r, 125, &["no-such-run"], "No such file or directory");
    ctx.assert_clean("a missing report folder");
}

/// An error whose cause is its source (not in its message) is printed with
/// it, once, on stderr, in the `--json` envelope and in `--outcome`.
#[test]
fn sourced_causes_reach_stderr_json_and_outcome_once() {
    let ctx = Ctx::new(Who::Root, "err-source");
    let case = sample_case(&ctx, "case001");
    let out = ctx.out.join("exists");
    fs::create_dir(&out).unwrap();
    let r = ctx.cbrun(&[
        "trial",
        case.to_str().unwrap(),
        "--agent",
        "replay:@reference",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let msg = assert_cause_once(&r, 2, &["--out", "exists"], "File exists");
    let env = r.envelope_or_json();
    assert_eq!(env["ok"], false, "{}", r.show());
    assert_eq!(env["error"]["message"], msg.as_str(), "{}", r.show());
    assert_eq!(
        env["error"]["errors"],
        serde_json::json!([msg]),
        "{}",
        r.show()
    );

    let outcome = ctx.out.join("outcome.json");
    let r = ctx.cbrun_with_outcome(
        &[
            "sandbox",
            "run",
            "--stdout",
            "/nonexistent/dir/out",
            "--outcome",
            outcome.to_str().unwrap(),
            "--",
            "true",
        ],
        &outcome,
    );
    let msg = assert_cause_once(
        &r,
        125,
        &["--stdout", "/nonexistent/dir/out"],
        "No such file or directory",
    );
    assert_eq!(r.outcome()["error"], msg.as_str(), "{}", r.show());
    ctx.assert_clean("sourced causes");
}
