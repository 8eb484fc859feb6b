//! Every cell of every table, the baseline, pooled runs.

use super::*;

#[test]
fn json_holds_every_number_of_the_records() {
    let tmp = Tmp::new("json");
    let run = run_a(tmp.path());
    let (r, err) = report_json(&[&run.dir], &[]);
    assert_eq!(r["format"], "cbrun-report/1");
    assert_eq!(r["runs"][0]["run_id"], "runA");
    assert_eq!(r["runs"][0]["planned"], 24);
    assert_eq!(
        r["runs"][0]["recorded"], 22,
        "24 planned, less 1 pending and 1 unreadable"
    );
    assert_eq!(r["trials"].as_array().unwrap().len(), 24);
    assert_eq!(r["unpriced_trials"], 12);
    let cases: Vec<(&str, &str)> = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c["language"].as_str().unwrap()))
        .collect();
    assert_eq!(
        cases,
        [
            ("c1", "Python"),
            ("c2", "Python"),
            ("c3", "Go"),
            ("c4", "Rust")
        ]
    );

    // Table 2.
    let a = &r["table2"][0];
    assert_eq!(a["config"], "alpha");
    assert_eq!(a["agent"], "agent-alpha");
    assert_eq!(a["model"], "model-alpha");
    for (k, v) in [
        ("cases", 4),
        ("solved", 3),
        ("trials", 12),
        ("valid", 11),
        ("passed", 6),
        ("submitted", 9),
    ] {
        assert_eq!(a[k], v, "alpha {k}");
    }
    assert_close(&a["pass_rate"], 6.0 / 11.0);
    assert_close(&a["pass_rate_ci"][0], 0.280_091_537_409_322);
    assert_close(&a["pass_rate_ci"][1], 0.787_287_283_775_402);
    assert_close(&a["time_to_submit"]["mean_s"], 850.0);
    assert_eq!(a["time_to_submit"]["known"], 9);
    assert_eq!(a["time_to_submit"]["unknown"], 0);
    assert_close(&a["cost"]["total_usd"], 15.10);
    assert_eq!(a["cost"]["priced"], 10);
    assert_eq!(a["cost"]["unpriced"], 2);
    assert_eq!(
        a["tokens"],
        json!({"input": 3000, "output": 300, "cache_read": null, "cache_write": null,
               "reasoning": null, "reported": 3, "unreported": 9})
    );
    assert_eq!(
        a["excluded"],
        json!({"infrastructure": 1, "interrupted": 0, "running": 0, "pending": 0, "unreadable": 0})
    );
    let b = &r["table2"][1];
    assert_eq!(b["config"], "beta");
    for (k, v) in [
        ("cases", 4),
        ("solved", 2),
        ("trials", 12),
        ("valid", 8),
        ("passed", 4),
        ("submitted", 7),
    ] {
        assert_eq!(b[k], v, "beta {k}");
    }
    assert_close(&b["pass_rate"], 0.5);
    assert_close(&b["pass_rate_ci"][0], 0.215_216_062_213_877);
    assert_close(&b["pass_rate_ci"][1], 0.784_783_937_786_122);
    assert_close(&b["time_to_submit"]["mean_s"], 1240.0 / 7.0);
    assert_eq!(
        b["cost"],
        json!({"total_usd": null, "priced": 0, "unpriced": 10}),
        "unknown cost is null, never 0"
    );
    assert_eq!(b["tokens"]["input"], Value::Null);
    assert_eq!(b["tokens"]["unreported"], 10);
    assert_eq!(
        b["excluded"],
        json!({"infrastructure": 0, "interrupted": 1, "running": 1, "pending": 1, "unreadable": 1})
    );

    // Table 6: the cells and what they are made of.
    let t6 = r["table6"].as_array().unwrap();
    let expected = &expected_run_a()[T6];
    assert_eq!(t6.len(), expected.len() - 1);
    for (row, want) in t6.iter().zip(&expected[1..]) {
        assert_eq!(row["case"], want[0].as_str());
        assert_eq!(row["language"], want[1].as_str());
        assert_eq!(row["config"], want[2].as_str());
        assert_eq!(row["result"], want[3].as_str());
        assert_eq!(
            format!("{}/{}", row["passed"], row["valid"]),
            want[4],
            "{row}"
        );
    }
    let c1a = &t6[0];
    assert_close(&c1a["time_to_submit"]["mean_s"], 200.0);
    assert_close(&c1a["cost"]["total_usd"], 4.5);
    let statuses: Vec<&str> = c1a["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["pass", "pass", "fail"]);
    assert_eq!(c1a["repeats"][2]["tests_passed"], 7);
    assert_eq!(c1a["repeats"][2]["tests_total"], 10);
    let c3a = &t6[4];
    let statuses: Vec<&str> = c3a["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["not_submitted", "infrastructure", "rejected"]);
    assert_close(&c3a["time_to_submit"]["mean_s"], 50.0);
    assert_eq!(c3a["cost"]["unpriced"], 2);
    let c2b = &t6[3];
    let statuses: Vec<&str> = c2b["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["fail", "interrupted", "running"]);

    // Table 7.
    let t7: Vec<(String, String, u64, u64, u64, u64)> = r["table7"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["language"].as_str().unwrap().to_owned(),
                x["config"].as_str().unwrap().to_owned(),
                x["cases"].as_u64().unwrap(),
                x["solved"].as_u64().unwrap(),
                x["passed"].as_u64().unwrap(),
                x["valid"].as_u64().unwrap(),
            )
        })
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        t7,
        [
            (s("Go"), s("alpha"), 1, 0, 0, 2),
            (s("Go"), s("beta"), 1, 1, 2, 2),
            (s("Python"), s("alpha"), 2, 2, 3, 6),
            (s("Python"), s("beta"), 2, 1, 2, 3),
            (s("Rust"), s("alpha"), 1, 1, 3, 3),
            (s("Rust"), s("beta"), 1, 0, 0, 3),
        ]
    );

    // Table 8.
    let t8 = &r["table8"]["by_config"];
    assert_eq!(t8[0]["failing"], 2);
    assert_eq!(t8[0]["with_counts"], 2);
    assert_eq!(t8[0]["tests_passed"], 11);
    assert_eq!(t8[0]["tests_total"], 18);
    assert_close(&t8[0]["share"], 11.0 / 18.0);
    assert_close(&t8[0]["mean_share"], 0.6);
    assert_eq!(t8[1]["failing"], 3);
    assert_eq!(t8[1]["with_counts"], 2);
    assert_eq!(t8[1]["tests_passed"], 6);
    assert_eq!(t8[1]["tests_total"], 13);
    assert_close(&t8[1]["mean_share"], 0.375);
    let subs: Vec<(String, String, u64, u64, u64)> = r["table8"]["submissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["case"].as_str().unwrap().to_owned(),
                x["config"].as_str().unwrap().to_owned(),
                x["repeat"].as_u64().unwrap(),
                x["tests_passed"].as_u64().unwrap(),
                x["tests_total"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        subs,
        [
            (s("c1"), s("alpha"), 3, 7, 10),
            (s("c2"), s("alpha"), 1, 4, 8),
            (s("c2"), s("beta"), 1, 6, 8),
            (s("c4"), s("beta"), 2, 0, 5),
        ]
    );

    // Repeats.
    let mut got = Vec::new();
    for stats in r["repeats"].as_array().unwrap() {
        for row in stats["rows"].as_array().unwrap() {
            got.push(row.clone());
        }
    }
    assert_eq!(got.len(), EXPECTED_REPEATS.len());
    for (row, (config, k, cases, at, hat)) in got.iter().zip(EXPECTED_REPEATS) {
        assert_eq!(row["config"], *config);
        assert_eq!(row["k"], *k);
        assert_eq!(row["cases"], *cases as u64);
        assert_close(&row["pass_at_k"], *at);
        assert_close(&row["pass_hat_k"], *hat);
    }
    let alpha_cases: Vec<(String, u64, u64)> = r["repeats"][0]["per_case"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["case"].as_str().unwrap().to_owned(),
                c["valid"].as_u64().unwrap(),
                c["passed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        alpha_cases,
        [
            (s("c1"), 3, 2),
            (s("c2"), 3, 1),
            (s("c3"), 2, 0),
            (s("c4"), 3, 3)
        ]
    );
    assert_eq!(r["repeats"][1]["rows"][2]["pass_at_k_ci"], Value::Null);

    // The trial rows.
    let t = r["trials"].as_array().unwrap();
    let pending = t.iter().find(|x| x["status"] == "pending").unwrap();
    assert_eq!(
        (
            pending["case"].as_str(),
            pending["config"].as_str(),
            pending["repeat"].as_u64()
        ),
        (Some("c1"), Some("beta"), Some(3))
    );
    assert_eq!(pending["cost_usd"], Value::Null);
    assert!(pending["path"]
        .as_str()
        .unwrap()
        .ends_with("trials/c1/beta/3"));
    let first = &t[0];
    assert_eq!(first["status"], "pass");
    assert_close(&first["cost_usd"], 1.0);
    assert_eq!(first["cost_source"], "pricing-table:2026-11-01");
    assert_eq!(first["tokens"]["input"], 1000);
    assert_close(&first["setup_s"], 5.0);
    assert_close(&first["solve_s"], 110.0);

    // The one bad record: named with its path and field, and skipped.
    let problems = r["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("trials/c3/beta/2/trial.json"));
    assert!(problems[0]["message"]
        .as_str()
        .unwrap()
        .starts_with("reward: 2"));
    assert!(
        err.contains("trials/c3/beta/2/trial.json: reward: 2"),
        "{err}"
    );
}

#[test]
fn markdown_and_terminal_show_the_same_cells() {
    let tmp = Tmp::new("md");
    let run = run_a(tmp.path());
    let expected = expected_run_a();
    let md = stdout(&ok(cbrun(&[&"report", &run.dir, &"--format", &"md"])));
    let term = stdout(&ok(cbrun(&[&"report", &run.dir])));
    for (what, tables) in [("md", md_tables(&md)), ("term", term_tables(&term))] {
        for (title, want) in &expected {
            let got = tables
                .get(*title)
                .unwrap_or_else(|| panic!("{what}: no table {title:?} in {tables:?}"));
            assert_eq!(got, want, "{what}: {title}");
        }
        check_repeat_rows(&tables[TR]);
        assert!(
            !tables.keys().any(|t| t.starts_with("Comparison")),
            "{what}"
        );
    }
    // The rule and the unpriced count are said, not implied.
    assert!(term.contains("rule: pass rates are over valid trials"));
    assert!(term.contains("12 trial(s) with a record have no cost_usd"));
    assert!(md.contains("## Problems"));
    assert!(md.contains("trials/c3/beta/2/trial.json: reward: 2"));
    // `--table` picks one.
    let only = stdout(&ok(cbrun(&[&"report", &run.dir, &"--table", &"table7"])));
    let tables = term_tables(&only);
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[T7], expected[T7]);
}

#[test]
fn csv_rows_are_data() {
    let tmp = Tmp::new("csv");
    let run = run_a(tmp.path());
    let csv = stdout(&ok(cbrun(&[&"report", &run.dir, &"--format", &"csv"])));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1 + 24, "a header and one row per trial");
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name} in {header:?}"))
    };
    let row = |i: usize| lines[i].split(',').collect::<Vec<_>>();
    let first = row(1);
    assert_eq!(first[col("case")], "c1");
    assert_eq!(first[col("config")], "alpha");
    assert_eq!(first[col("status")], "pass");
    assert_eq!(first[col("cost_usd")], "1.0");
    assert_eq!(first[col("tests_total")], "10");
    assert_eq!(first[col("tokens.input")], "1000");
    // Unknowns are n/a, never 0.
    let beta_first = lines[1..]
        .iter()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|r| r[col("config")] == "beta")
        .unwrap();
    assert_eq!(beta_first[col("cost_usd")], "n/a");
    assert_eq!(beta_first[col("tokens")], "n/a");

    let csv = stdout(&ok(cbrun(&[
        &"report",
        &run.dir,
        &"--format",
        &"csv",
        &"--table",
        &"summary",
    ])));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3);
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name} in {header:?}"))
    };
    let alpha: Vec<&str> = lines[1].split(',').collect();
    let beta: Vec<&str> = lines[2].split(',').collect();
    assert_eq!(alpha[col("passed")], "6");
    assert_eq!(alpha[col("valid")], "11");
    assert!((alpha[col("pass_rate")].parse::<f64>().unwrap() - 6.0 / 11.0).abs() < 1e-12);
    assert!((alpha[col("pass_rate_ci.0")].parse::<f64>().unwrap() - 0.280_091_537_4).abs() < 1e-9);
    assert!((alpha[col("cost.total_usd")].parse::<f64>().unwrap() - 15.1).abs() < 1e-9);
    assert_eq!(alpha[col("excluded.infrastructure")], "1");
    assert_eq!(beta[col("cost.total_usd")], "n/a");
    assert_eq!(beta[col("cost.unpriced")], "10");
    assert_eq!(beta[col("excluded.running")], "1");
}

/// Run B, the baseline of run A's alpha: c1 failed (A: 2/3, gained), c2
/// passed (A: 1/3, lost), c3 failed (A: 0/2, unchanged), c4 passed (A:
/// 3/3, unchanged), c5 only here (not comparable). Rates over c1-c4:
/// A mean(2/3, 1/3, 0, 1) = 0.5, B mean(0, 1, 0, 1) = 0.5, difference 0;
/// sign test over 1 gained and 1 lost: p = 1.
fn run_b(root: &Path) -> Run {
    let run = Run::new(
        &root.join("runB"),
        "runB",
        1,
        &[
            ("c1", "Python"),
            ("c2", "Python"),
            ("c3", "Go"),
            ("c4", "Rust"),
            ("c5", "Go"),
        ],
        &["alpha"],
    );
    for t in [
        fail("c1", "alpha", 1, 9, 10, 100.0),
        pass("c2", "alpha", 1, 8, 100.0),
        not_submitted("c3", "alpha", 1),
        pass("c4", "alpha", 1, 5, 100.0),
        pass("c5", "alpha", 1, 2, 100.0),
    ] {
        run.put(&t);
    }
    run
}

#[test]
fn baseline_comparison_case_by_case() {
    let tmp = Tmp::new("baseline");
    let a = run_a(tmp.path());
    let b = run_b(tmp.path());
    let bdir = b.dir.to_str().unwrap().to_owned();
    let (r, _) = report_json(&[&a.dir], &["--baseline", &bdir]);
    let c = &r["comparison"];
    assert_eq!(c["baseline_runs"][0]["run_id"], "runB");
    assert_eq!(c["unpaired_current"], json!(["beta"]));
    assert_eq!(c["unpaired_baseline"], json!([]));
    let p = &c["pairs"][0];
    assert_eq!(p["config"], "alpha");
    assert_eq!(p["baseline_config"], "alpha");
    assert_eq!(
        (
            &p["gained"],
            &p["lost"],
            &p["unchanged"],
            &p["not_comparable"]
        ),
        (&json!(1), &json!(1), &json!(2), &json!(1))
    );
    assert_close(&p["current_rate"], 0.5);
    assert_close(&p["baseline_rate"], 0.5);
    assert_close(&p["difference"], 0.0);
    assert_close(&p["sign_test_p"], 1.0);
    let changes: Vec<(&str, &str, u64, u64, u64, u64)> = p["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["case"].as_str().unwrap(),
                k["change"].as_str().unwrap(),
                k["current"]["passed"].as_u64().unwrap(),
                k["current"]["valid"].as_u64().unwrap(),
                k["baseline"]["passed"].as_u64().unwrap(),
                k["baseline"]["valid"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("c1", "gained", 2, 3, 0, 1),
            ("c2", "lost", 1, 3, 1, 1),
            ("c3", "unchanged", 0, 2, 0, 1),
            ("c4", "unchanged", 3, 3, 1, 1),
            ("c5", "not_comparable", 0, 0, 1, 1),
        ]
    );

    let md = stdout(&ok(cbrun(&[
        &"report",
        &a.dir,
        &"--baseline",
        &b.dir,
        &"--format",
        &"md",
        &"--table",
        &"compare",
    ])));
    let t = md_tables(&md);
    assert_eq!(
        t["Comparison with the baseline"],
        rows(&[
            &[
                "config",
                "baseline",
                "gained",
                "lost",
                "unchanged",
                "not comparable",
                "pass rate",
                "baseline rate",
                "difference",
                "95% CI",
                "sign test p"
            ],
            &[
                "alpha",
                "alpha",
                "1",
                "1",
                "2",
                "1",
                "50.0%",
                "50.0%",
                "+0.0 pts",
                t["Comparison with the baseline"][1][9].as_str(),
                "1.000"
            ],
        ])
    );
    assert_eq!(
        t["Comparison: per case"],
        rows(&[
            &["config", "case", "passes", "baseline passes", "change"],
            &["alpha", "c1", "2/3", "0/1", "gained"],
            &["alpha", "c2", "1/3", "1/1", "lost"],
            &["alpha", "c3", "0/2", "0/1", "unchanged"],
            &["alpha", "c4", "3/3", "1/1", "unchanged"],
            &["alpha", "c5", "-", "1/1", "not comparable"],
        ])
    );
    assert!(md.contains("no baseline for: beta"));
}

/// Two single-configuration runs with different names are paired; six
/// cases all gained give the exact sign test p = 2 * 2^-6 = 0.03125 and a
/// difference of +100 points.
#[test]
fn baseline_pairs_lone_configurations_and_tests_the_sign() {
    let tmp = Tmp::new("sign");
    let cases: Vec<(&str, &str)> = ["d1", "d2", "d3", "d4", "d5", "d6"]
        .iter()
        .map(|c| (*c, "Python"))
        .collect();
    let now = Run::new(&tmp.path().join("now"), "now", 1, &cases, &["new"]);
    let then = Run::new(&tmp.path().join("then"), "then", 1, &cases, &["old"]);
    for (c, _) in &cases {
        now.put(&pass(c, "new", 1, 4, 10.0));
        then.put(&fail(c, "old", 1, 1, 4, 10.0));
    }
    let then_dir = then.dir.to_str().unwrap().to_owned();
    let (r, _) = report_json(&[&now.dir], &["--baseline", &then_dir]);
    let p = &r["comparison"]["pairs"][0];
    assert_eq!(
        (p["config"].as_str(), p["baseline_config"].as_str()),
        (Some("new"), Some("old"))
    );
    assert_eq!(p["gained"], 6);
    assert_eq!(p["lost"], 0);
    assert_close(&p["sign_test_p"], 0.03125);
    assert_close(&p["difference"], 1.0);
    assert_eq!(p["difference_ci"], json!([1.0, 1.0]));
    let term = stdout(&ok(cbrun(&[
        &"report",
        &now.dir,
        &"--baseline",
        &then.dir,
        &"--table",
        &"compare",
    ])));
    let t = term_tables(&term);
    assert_eq!(
        t["Comparison with the baseline"][1],
        [
            "new",
            "old",
            "6",
            "0",
            "0",
            "0",
            "100.0%",
            "0.0%",
            "+100.0 pts",
            "+100.0–+100.0 pts",
            "0.031"
        ]
    );
}

#[test]
fn several_run_folders_are_pooled_once_each() {
    let tmp = Tmp::new("pool");
    let a = run_a(tmp.path());
    // Another run of alpha on c1: one more repeat, a fail.
    let more = Run::new(
        &tmp.path().join("more"),
        "more",
        1,
        &[("c1", "Python")],
        &["alpha"],
    );
    more.put(&fail("c1", "alpha", 1, 3, 10, 100.0).cost(1.0));
    // A copy of run A (same run_id) is skipped, and a folder given twice is read once.
    let copy = tmp.path().join("copyA");
    let st = Command::new("cp")
        .arg("-a")
        .arg(&a.dir)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    let (r, err) = report_json(&[&a.dir, &more.dir, &copy, &a.dir], &[]);
    assert_eq!(r["runs"].as_array().unwrap().len(), 2);
    let alpha = &r["table2"][0];
    assert_eq!(alpha["valid"], 12);
    assert_eq!(alpha["passed"], 6);
    assert_close(&alpha["cost"]["total_usd"], 16.10);
    let c1 = &r["repeats"][0]["per_case"][0];
    assert_eq!(
        (c1["valid"].as_u64(), c1["passed"].as_u64()),
        (Some(4), Some(2))
    );
    // pass@2 of c1 with n=4, c=2: 1 - C(2,2)/C(4,2) = 5/6.
    let k2 = &r["repeats"][0]["rows"][1];
    assert_close(&k2["pass_at_k"], (5.0 / 6.0 + 2.0 / 3.0 + 0.0 + 1.0) / 4.0);
    assert!(err.contains("was already read from"), "{err}");
    assert!(err.contains("given twice"), "{err}");
    // Pooled repeats are labelled with their run in table 8's detail.
    let term = stdout(&ok(cbrun(&[
        &"report", &a.dir, &more.dir, &"--table", &"partial",
    ])));
    assert!(term_tables(&term)[T8D].contains(&vec![
        "c1".to_string(),
        "alpha".into(),
        "more:1".into(),
        "3/10".into(),
        "30.0%".into()
    ]));
}
