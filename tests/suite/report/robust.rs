//! Partial, concurrently written and hostile run folders; hostile names;
//! bad invocations; records written by a real `cbrun trial`.

use super::*;

/// A plan with one configuration `x` and the cases given, one repeat.
fn plan_x(dir: &Path, cases: &[&str]) -> Run {
    let c: Vec<(&str, &str)> = cases.iter().map(|c| (*c, "Python")).collect();
    Run::new(dir, "hostile", 1, &c, &["x"])
}

fn trial_json(run: &Run, case: &str) -> PathBuf {
    let d = run.trial_dir(case, "x", 1);
    fs::create_dir_all(&d).unwrap();
    d.join("trial.json")
}

/// Hostile run folders: records that are links, FIFOs, devices,
/// directories, sparse giants, deep nesting, wrong types; repeat and case
/// folders that are links; names that are not UTF-8 or not folders. Each
/// is named with its path and skipped; the one good record still counts,
/// nothing hangs, nothing is followed (a followed link would count a
/// second pass).
#[test]
fn hostile_run_folders_are_reported_and_skipped() {
    let tmp = Tmp::new("hostile");
    let run = plan_x(&tmp.path().join("run"), &["good"]);
    let good = pass("good", "x", 1, 3, 10.0).record("hostile");
    run.put_raw("good", "x", 1, &good);
    let good_json = run.trial_dir("good", "x", 1).join("trial.json");
    let rec = |case: &str| {
        let mut r = good.clone();
        r["case_id"] = json!(case);
        r
    };

    symlink(&good_json, trial_json(&run, "link")).unwrap();
    symlink("/dev/zero", trial_json(&run, "zerolink")).unwrap();
    let fifo = trial_json(&run, "fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let dev = trial_json(&run, "device");
    assert!(Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "5"])
        .status()
        .unwrap()
        .success());
    fs::File::create(trial_json(&run, "sparse"))
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let mut big = rec("big");
    big["failed_tests"] = json!(vec!["t".repeat(1000); 5000]);
    fs::write(trial_json(&run, "big"), serde_json::to_vec(&big).unwrap()).unwrap();
    fs::create_dir_all(trial_json(&run, "dir")).unwrap();
    fs::write(trial_json(&run, "deep"), "[".repeat(200_000)).unwrap();
    let mut r = rec("strreward");
    r["reward"] = json!("1");
    fs::write(trial_json(&run, "strreward"), r.to_string()).unwrap();
    let mut r = rec("negcost");
    r["cost_usd"] = json!(-3.5);
    fs::write(trial_json(&run, "negcost"), r.to_string()).unwrap();
    fs::write(
        trial_json(&run, "hugenum"),
        r#"{"case_id":"hugenum","reward":1e999}"#,
    )
    .unwrap();
    fs::write(trial_json(&run, "binary"), [0xffu8, 0xfe, 0x00, 0x7b]).unwrap();
    let mut r = rec("passnosubmit");
    r["terminal_status"] = json!("not_submitted");
    fs::write(trial_json(&run, "passnosubmit"), r.to_string()).unwrap();
    // Folders that are links, files or badly named.
    fs::create_dir_all(run.dir.join("trials/linkrepeat/x")).unwrap();
    symlink(
        run.trial_dir("good", "x", 1),
        run.dir.join("trials/linkrepeat/x/1"),
    )
    .unwrap();
    symlink(run.dir.join("trials/good"), run.dir.join("trials/linkcase")).unwrap();
    fs::write(run.dir.join("trials/notadir"), "x").unwrap();
    fs::create_dir_all(run.dir.join("trials/good/x/junk")).unwrap();
    let bad_name = std::ffi::OsStr::from_bytes(b"bad\xffname");
    fs::create_dir_all(run.dir.join("trials").join(bad_name).join("x/1")).unwrap();

    let started = Instant::now();
    let (r, err) = report_json(&[&run.dir], &[]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let x = &r["table2"][0];
    assert_eq!(x["config"], "x");
    assert_eq!(x["valid"], 1, "only the good record counts: {x}");
    assert_eq!(x["passed"], 1);
    let unreadable = [
        "link",
        "zerolink",
        "fifo",
        "device",
        "sparse",
        "big",
        "dir",
        "deep",
        "strreward",
        "negcost",
        "hugenum",
        "binary",
        "passnosubmit",
        "linkrepeat",
    ];
    assert_eq!(x["excluded"]["unreadable"], unreadable.len(), "{x}");
    let problems: Vec<(String, String)> = r["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let find = |needle: &str| {
        problems
            .iter()
            .find(|(p, _)| p.contains(needle))
            .unwrap_or_else(|| panic!("no problem for {needle}: {problems:#?}"))
            .1
            .clone()
    };
    for (case, says) in [
        ("trials/link/x/1/trial.json", "symbolic link"),
        ("trials/zerolink/x/1/trial.json", "symbolic link"),
        ("trials/fifo/x/1/trial.json", "FIFO"),
        ("trials/device/x/1/trial.json", "character device"),
        ("trials/sparse/x/1/trial.json", "larger than"),
        ("trials/big/x/1/trial.json", "larger than"),
        ("trials/dir/x/1/trial.json", "directory"),
        ("trials/deep/x/1/trial.json", "(json)"),
        ("trials/strreward/x/1/trial.json", "reward"),
        ("trials/negcost/x/1/trial.json", "cost_usd"),
        ("trials/hugenum/x/1/trial.json", "(json)"),
        ("trials/binary/x/1/trial.json", "(json)"),
        (
            "trials/passnosubmit/x/1/trial.json",
            "reward: 1, but terminal_status is not_submitted",
        ),
        ("trials/linkrepeat/x/1", "symbolic link"),
        ("trials/linkcase", "symbolic link"),
        ("trials/notadir", "regular file"),
        ("trials/good/x/junk", "not a repeat folder"),
        ("trials/bad\\xffname", "not UTF-8"),
    ] {
        let msg = find(case);
        assert!(msg.contains(says), "{case}: {msg}");
        assert!(err.contains(case), "stderr names {case}: {err}");
    }
    // The same folder in every text format: no crash, the good trial shown.
    for f in ["term", "md", "csv"] {
        let o = ok(cbrun(&[&"report", &run.dir, &"--format", &f]));
        assert!(stdout(&o).contains("good"), "{f}");
    }
}

/// A run in progress: trials without records, records still
/// `interrupted`, claims by live workers here and elsewhere (running) and
/// by a dead worker here (stale: interrupted), retries kept as attempts.
#[test]
fn a_partial_run_separates_what_is_not_done() {
    let tmp = Tmp::new("partial");
    let run = plan_x(
        &tmp.path().join("run"),
        &["p1", "p2", "p3", "p4", "p5", "p6"],
    );
    run.put(&pass("p1", "x", 1, 2, 30.0));
    // p2: a record still saying interrupted, a live claim here.
    run.put(&interrupted("p2", "x", 1));
    run.claim("p2", "x", 1, &hostname(), std::process::id());
    // p3: interrupted, claimed by a worker here that is gone.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    run.put(&interrupted("p3", "x", 1));
    run.claim("p3", "x", 1, &hostname(), dead_pid);
    // p4: a claim from another host and no folder yet.
    run.claim("p4", "x", 1, "node-17.cluster", 4242);
    // p5: a folder without a record; p6: nothing at all.
    fs::create_dir_all(run.trial_dir("p5", "x", 1)).unwrap();
    // p1 was retried once after an infrastructure failure.
    fs::create_dir_all(run.dir.join("trials/p1/x/1.attempt1")).unwrap();
    let (r, _) = report_json(&[&run.dir], &[]);
    let x = &r["table2"][0];
    assert_eq!(x["valid"], 1);
    assert_eq!(x["passed"], 1);
    assert_eq!(
        x["excluded"],
        json!({"infrastructure": 0, "interrupted": 1, "running": 2, "pending": 2, "unreadable": 0})
    );
    let status: BTreeMap<String, String> = r["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["case"].as_str().unwrap().to_owned(),
                t["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want: BTreeMap<String, String> = [
        ("p1", "pass"),
        ("p2", "running"),
        ("p3", "interrupted"),
        ("p4", "running"),
        ("p5", "pending"),
        ("p6", "pending"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(status, want);
    assert_eq!(r["trials"][0]["earlier_attempts"], 1);
    let term = stdout(&ok(cbrun(&[&"report", &run.dir, &"--table", &"summary"])));
    assert_eq!(
        term_tables(&term)[T2][1],
        [
            "x",
            "1 of 6",
            "1/1 100.0%",
            "20.7–100.0%",
            "1/1",
            "30.0s",
            "n/a (3 unpriced)",
            "n/a",
            "1 interrupted",
            "2 running, 2 pending"
        ]
    );
}

/// `cbrun report` on a folder that a run is writing: records replaced
/// atomically, claims coming and going, folders appearing. Every report
/// exits 0, sees every planned trial exactly once, never a half record,
/// and passes only grow; the last one has the final numbers.
#[test]
fn a_run_being_written_is_reported_consistently() {
    let tmp = Tmp::new("live");
    let cases: Vec<String> = (1..=6).map(|i| format!("k{i}")).collect();
    let case_refs: Vec<(&str, &str)> = cases.iter().map(|c| (c.as_str(), "Go")).collect();
    let run = Run::new(&tmp.path().join("run"), "live", 3, &case_refs, &["x", "y"]);
    let dir = run.dir.clone();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        let cases = cases.clone();
        std::thread::spawn(move || {
            let host = hostname();
            for (i, case) in cases.iter().enumerate() {
                for config in ["x", "y"] {
                    for repeat in 1..=3u32 {
                        let d = dir.join("trials").join(case).join(config);
                        fs::create_dir_all(&d).unwrap();
                        let claim = d.join(format!("{repeat}.claim"));
                        fs::write(
                            &claim,
                            json!({"host": host, "pid": std::process::id()}).to_string(),
                        )
                        .unwrap();
                        let t = d.join(repeat.to_string());
                        fs::create_dir_all(&t).unwrap();
                        let case: &'static str = Box::leak(case.clone().into_boxed_str());
                        let write = |rec: &Value| {
                            let tmp = t.join(".trial.json.tmp");
                            fs::write(&tmp, serde_json::to_vec_pretty(rec).unwrap()).unwrap();
                            fs::rename(&tmp, t.join("trial.json")).unwrap();
                        };
                        write(&interrupted(case, config, repeat).record("live"));
                        std::thread::sleep(Duration::from_millis(3));
                        let fin = if (i + repeat as usize).is_multiple_of(2) {
                            pass(case, config, repeat, 4, 60.0 * repeat as f64)
                        } else {
                            fail(case, config, repeat, 1, 4, 30.0)
                        };
                        write(&fin.record("live"));
                        fs::remove_file(&claim).unwrap();
                    }
                }
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut last_passed = 0;
    let mut reports = 0;
    loop {
        let finished = done.load(Ordering::SeqCst);
        let (r, _) = report_json(&[&run.dir], &[]);
        reports += 1;
        assert_eq!(r["trials"].as_array().unwrap().len(), 36);
        assert_eq!(r["problems"], json!([]), "a half-written record was read");
        let mut passed = 0;
        for c in r["table2"].as_array().unwrap() {
            let e = &c["excluded"];
            assert_eq!(e["unreadable"], 0);
            let total = c["valid"].as_u64().unwrap()
                + [
                    "infrastructure",
                    "interrupted",
                    "running",
                    "pending",
                    "unreadable",
                ]
                .iter()
                .map(|k| e[*k].as_u64().unwrap())
                .sum::<u64>();
            assert_eq!(total, 18, "{c}");
            passed += c["passed"].as_u64().unwrap();
        }
        assert!(
            passed >= last_passed,
            "passes went from {last_passed} to {passed}"
        );
        last_passed = passed;
        if finished {
            break;
        }
    }
    writer.join().unwrap();
    assert!(reports >= 2, "the report ran while the run was written");
    // Final: (case index + repeat) even passes; per config 9 of 18.
    let (r, _) = report_json(&[&run.dir], &[]);
    for c in r["table2"].as_array().unwrap() {
        assert_eq!(c["valid"], 18);
        assert_eq!(c["passed"], 9);
    }
}

/// Without `trials/`, `results.jsonl` is read: the latest attempt of each
/// trial wins, a malformed line is named, a cut last line (still being
/// written) is skipped.
#[test]
fn results_jsonl_alone_and_a_cut_last_line() {
    let tmp = Tmp::new("results");
    let run = plan_x(&tmp.path().join("run"), &["r1", "r2", "r3"]);
    let line = |t: &T, attempt: u32| {
        json!({"run_id": "hostile", "case": t.case, "config": t.config, "repeat": t.repeat,
               "attempt": attempt, "trial_dir": "x", "record": t.record("hostile")})
        .to_string()
    };
    let infra = T {
        terminal: "error",
        pipeline: Some("error"),
        class: Some("infrastructure"),
        ..not_submitted("r1", "x", 1)
    };
    let mut text = String::new();
    text.push_str(&line(&pass("r1", "x", 1, 2, 20.0).cost(0.5), 2));
    text.push('\n');
    text.push_str(&line(&infra, 1)); // an earlier attempt, written later
    text.push('\n');
    text.push_str("{\"run_id\": \"hostile\", \"case\": \"r2\"}\n");
    text.push_str(&line(&fail("r2", "x", 1, 1, 2, 40.0), 1));
    text.push('\n');
    let cut = line(&pass("r3", "x", 1, 2, 20.0), 1);
    text.push_str(&cut[..cut.len() / 2]);
    fs::remove_dir_all(run.dir.join("trials")).unwrap();
    fs::write(run.dir.join("results.jsonl"), text).unwrap();
    let (r, err) = report_json(&[&run.dir], &[]);
    assert_eq!(r["runs"][0]["kind"], "results");
    let x = &r["table2"][0];
    assert_eq!(
        (x["valid"].as_u64(), x["passed"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(
        x["excluded"]["pending"], 1,
        "r3's line is cut: still pending"
    );
    assert_close(&x["cost"]["total_usd"], 0.5);
    assert!(err.contains("line 3: record: missing"), "{err}");
    assert!(err.contains("line 5: cut short"), "{err}");
}

/// Names from run folders are data in every format: no terminal escape,
/// no row split by a newline or pipe, no HTML, no spreadsheet formula.
#[test]
fn hostile_names_are_escaped_in_every_format() {
    let tmp = Tmp::new("names");
    let dir = tmp.path().join("run");
    let names = [
        "<img src=x onerror=alert(1)>",
        "a|b",
        "=HYPERLINK(\"http:x\")",
        "\u{1b}[2J\u{1b}[31mred",
        "two\nlines",
        "\u{202e}txt.exe",
    ];
    let run = Run::new(&dir, "names", 1, &[], &[]);
    for n in names {
        let n: &'static str = Box::leak(n.to_owned().into_boxed_str());
        let mut rec = pass(n, "*bold*_[l](x)", 1, 1, 5.0).record("names");
        rec["case_id"] = json!(n);
        run.put_raw(n, "*bold*_[l](x)", 1, &rec);
    }
    let term = stdout(&ok(cbrun(&[&"report", &run.dir, &"--table", &"cases"])));
    assert!(
        !term.contains('\u{1b}') && !term.contains('\u{202e}'),
        "{term}"
    );
    let t = &term_tables(&term)[T6];
    assert_eq!(t.len(), 1 + names.len(), "{term}");
    let md = stdout(&ok(cbrun(&[
        &"report",
        &run.dir,
        &"--format",
        &"md",
        &"--table",
        &"cases",
    ])));
    assert!(!md.contains("<img") && !md.contains('\u{1b}'), "{md}");
    let t = &md_tables(&md)[T6];
    assert_eq!(t.len(), 1 + names.len(), "{md}");
    assert!(t.iter().all(|r| r.len() == 7), "{t:?}");
    assert!(
        t.iter().any(|r| r[0] == "a|b" && r[2] == "*bold*_[l](x)"),
        "{t:?}"
    );
    let html_path = tmp.path().join("names.html");
    ok(cbrun(&[&"report", &run.dir, &"--html", &html_path]));
    let html = fs::read_to_string(&html_path).unwrap();
    assert!(!html.contains("<img"), "raw markup from a name");
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    let csv = stdout(&ok(cbrun(&[&"report", &run.dir, &"--format", &"csv"])));
    assert!(csv.contains("\"'=HYPERLINK(\"\"http:x\"\")\""), "{csv}");
    assert!(!csv.contains(",=HYPERLINK"), "{csv}");
    let (r, _) = report_json(&[&run.dir], &[]);
    let ids: Vec<&str> = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for n in names {
        assert!(ids.contains(&n), "json keeps {n:?} exactly: {ids:?}");
    }
}

#[test]
fn bad_invocations_exit_125_with_one_line() {
    let tmp = Tmp::new("bad");
    let empty = tmp.path().join("empty");
    fs::create_dir_all(&empty).unwrap();
    for (args, says) in [
        (vec![empty.to_str().unwrap()], "not a run folder"),
        (vec!["/nonexistent/run"], "/nonexistent/run"),
        (
            vec![empty.to_str().unwrap(), "--table", "compare"],
            "needs --baseline",
        ),
    ] {
        let mut a: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"report"];
        for x in &args {
            a.push(x);
        }
        let o = cbrun(&a);
        assert_eq!(o.status.code(), Some(125), "{args:?}");
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.starts_with("cbrun: error: ") && e.contains(says), "{e}");
        assert!(o.stdout.is_empty());
    }
    let o = cbrun(&[&"report"]);
    assert_eq!(o.status.code(), Some(125));
}

/// A record `cbrun trial` writes today, as a trial folder of its own and
/// inside a run folder; and one written by a real trial (the replay
/// oracle on the sample case).
#[test]
fn a_real_trial_record_is_reported() {
    let tmp = Tmp::new("real");
    let single = tmp.path().join("single");
    fs::create_dir_all(&single).unwrap();
    fs::copy(
        Path::new(FIXTURES).join("trial-schema1.json"),
        single.join("trial.json"),
    )
    .unwrap();
    let (r, _) = report_json(&[&single], &[]);
    assert_eq!(r["runs"][0]["kind"], "trial");
    let k = &r["table2"][0];
    assert_eq!(k["config"], "replay:cases/case001/controls/reference/app");
    assert_eq!(
        (k["valid"].as_u64(), k["passed"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        k["time_to_submit"],
        json!({"mean_s": null, "known": 0, "unknown": 1}),
        "no time in a schema-1 record: unknown, not 0"
    );
    assert_eq!(
        k["cost"],
        json!({"total_usd": null, "priced": 0, "unpriced": 1})
    );
    assert_eq!(r["table6"][0]["result"], "Pass");
    let term = stdout(&ok(cbrun(&[&"report", &single, &"--table", &"summary"])));
    let row = &term_tables(&term)[T2][1];
    assert_eq!(row[5], "n/a");
    assert_eq!(row[6], "n/a (1 unpriced)");

    // A real trial, into a run folder whose plan the test writes.
    let run = Run::new(
        &tmp.path().join("run"),
        "real",
        1,
        &[("case001", "Python")],
        &["ref"],
    );
    let out = run.trial_dir("case001", "ref", 1);
    fs::create_dir_all(out.parent().unwrap()).unwrap();
    let o = cbrun(&[
        &"trial",
        &Path::new(REPO).join("cases/case001"),
        &"--agent",
        &format!("replay:{REPO}/cases/case001/controls/reference/app"),
        &"--out",
        &out,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (r, err) = report_json(&[&run.dir], &[]);
    assert_eq!(r["problems"], json!([]), "{err}");
    let k = &r["table2"][0];
    assert_eq!(k["config"], "ref");
    assert_eq!(
        (k["valid"].as_u64(), k["passed"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(r["table6"][0]["result"], "Pass");
    assert_eq!(r["table6"][0]["language"], "Python");
    assert_eq!(
        r["trials"][0]["tests_total"],
        r["trials"][0]["tests_passed"]
    );
    assert!(r["trials"][0]["tests_total"].as_u64().unwrap() > 0);
}
