//! Run A and what every table of it must hold, worked out by hand.

use super::*;

/// Run A: two configurations, four cases in three languages, three
/// repeats, every kind of outcome. The numbers the tests expect are worked
/// out by hand from this list (see each test).
pub fn run_a(root: &Path) -> Run {
    let run = Run::new(
        &root.join("runA"),
        "runA",
        3,
        &[
            ("c1", "Python"),
            ("c2", "Python"),
            ("c3", "Go"),
            ("c4", "Rust"),
        ],
        &["alpha", "beta"],
    );
    let trials = [
        // alpha
        pass("c1", "alpha", 1, 10, 100.0)
            .cost(1.00)
            .tokens(1000, 100),
        pass("c1", "alpha", 2, 10, 200.0)
            .cost(1.50)
            .tokens(1000, 100),
        fail("c1", "alpha", 3, 7, 10, 300.0)
            .cost(2.00)
            .tokens(1000, 100),
        fail("c2", "alpha", 1, 4, 8, 400.0).cost(0.50),
        not_submitted("c2", "alpha", 2).cost(0.25),
        pass("c2", "alpha", 3, 8, 600.0).cost(0.75),
        not_submitted("c3", "alpha", 1),
        T {
            terminal: "error",
            pipeline: Some("error"),
            class: Some("infrastructure"),
            ..not_submitted("c3", "alpha", 2)
        },
        T {
            pipeline: Some("rejected"),
            tts: Some(50.0),
            tests: None,
            denylist: Some("app/x.py: import banned"),
            ..fail("c3", "alpha", 3, 0, 0, 50.0)
        }
        .cost(0.10),
        pass("c4", "alpha", 1, 5, 1000.0).cost(3.00),
        pass("c4", "alpha", 2, 5, 2000.0).cost(3.00),
        pass("c4", "alpha", 3, 5, 3000.0).cost(3.00),
        // beta (a run still going: one pending, one running)
        pass("c1", "beta", 1, 10, 50.0),
        pass("c1", "beta", 2, 10, 70.0),
        fail("c2", "beta", 1, 6, 8, 100.0),
        interrupted("c2", "beta", 2),
        interrupted("c2", "beta", 3),
        pass("c3", "beta", 1, 3, 30.0),
        pass("c3", "beta", 3, 3, 90.0),
        T {
            terminal: "error",
            pipeline: Some("error"),
            class: Some("implementation"),
            ..not_submitted("c4", "beta", 1)
        },
        fail("c4", "beta", 2, 0, 5, 500.0),
        T {
            tests: None,
            judge_error: Some("no test results in the log"),
            ..fail("c4", "beta", 3, 0, 0, 400.0)
        },
    ];
    for t in &trials {
        run.put(t);
    }
    // c2/beta/3 is owned by a live worker (this test process).
    run.claim("c2", "beta", 3, &hostname(), std::process::id());
    // c3/beta/2: a record that is not a record.
    let mut bad = pass("c3", "beta", 2, 3, 60.0).record("runA");
    bad["reward"] = json!(2);
    run.put_raw("c3", "beta", 2, &bad);
    // c1/beta/3: no folder yet (pending).
    run
}

pub const T2: &str = "Table 2: per configuration";
pub const T6: &str = "Table 6: per case and configuration";
pub const T7: &str = "Table 7: by language";
pub const T8: &str = "Table 8: hidden tests passed by failing submissions";
pub const T8D: &str = "Table 8 (detail): each failing submission";
pub const TR: &str = "Repeats: pass@k and pass^k";

/// Every table of run A, cell by cell, worked out by hand from
/// [`run_a`]. alpha: valid 11 (c3/2 is infra), passed 6, submitted 9,
/// times 100+200+300+400+600+50+1000+2000+3000 = 7650 s / 9 = 850 s,
/// cost 1+1.5+2+0.5+0.25+0.75+0.10+3*3 = $15.10 with 2 unpriced; Wilson
/// 6/11 = 28.0-78.7%. beta: valid 8 (an interrupted, a running, a pending
/// and an unreadable trial left out), passed 4, submitted 7, times
/// 50+70+100+30+90+500+400 = 1240 s / 7 = 177.1 s, nothing priced (10
/// records), Wilson 4/8 = 21.5-78.5%.
pub fn expected_run_a() -> BTreeMap<&'static str, Vec<Vec<String>>> {
    let mut m = BTreeMap::new();
    m.insert(
        T2,
        rows(&[
            &[
                "config",
                "solved",
                "pass rate",
                "95% CI",
                "submitted",
                "mean time to submit",
                "total cost",
                "tokens",
                "invalid",
                "not done",
            ],
            &[
                "alpha",
                "3 of 4",
                "6/11 54.5%",
                "28.0–78.7%",
                "9/11",
                "14m 10s",
                "$15.10 (+2 unpriced)",
                "3000 in / 300 out (+9 n/a)",
                "1 infra",
                "0",
            ],
            &[
                "beta",
                "2 of 4",
                "4/8 50.0%",
                "21.5–78.5%",
                "7/8",
                "2m 57s",
                "n/a (10 unpriced)",
                "n/a",
                "1 interrupted, 1 unreadable",
                "1 running, 1 pending",
            ],
        ]),
    );
    m.insert(
        T6,
        rows(&[
            &[
                "case",
                "language",
                "config",
                "result",
                "passes",
                "time to submit",
                "cost",
            ],
            &[
                "c1",
                "Python",
                "alpha",
                "Pass, Pass, 7/10",
                "2/3",
                "3m 20s",
                "$4.50",
            ],
            &[
                "c1",
                "Python",
                "beta",
                "Pass, Pass, pending",
                "2/2",
                "1m 00s",
                "n/a (2 unpriced)",
            ],
            &[
                "c2",
                "Python",
                "alpha",
                "4/8, not submitted, Pass",
                "1/3",
                "8m 20s",
                "$1.50",
            ],
            &[
                "c2",
                "Python",
                "beta",
                "6/8, interrupted, running",
                "0/1",
                "1m 40s",
                "n/a (3 unpriced)",
            ],
            &[
                "c3",
                "Go",
                "alpha",
                "not submitted, infra, rejected",
                "0/2",
                "50.0s",
                "$0.10 (+2 unpriced)",
            ],
            &[
                "c3",
                "Go",
                "beta",
                "Pass, unreadable, Pass",
                "2/2",
                "1m 00s",
                "n/a (2 unpriced)",
            ],
            &[
                "c4",
                "Rust",
                "alpha",
                "Pass, Pass, Pass",
                "3/3",
                "33m 20s",
                "$9.00",
            ],
            &[
                "c4",
                "Rust",
                "beta",
                "error, 0/5, fail",
                "0/3",
                "7m 30s",
                "n/a (3 unpriced)",
            ],
        ]),
    );
    m.insert(
        T7,
        rows(&[
            &["language", "config", "cases", "solved", "pass rate"],
            &["Go", "alpha", "1", "0", "0/2 0.0%"],
            &["Go", "beta", "1", "1", "2/2 100.0%"],
            &["Python", "alpha", "2", "2", "3/6 50.0%"],
            &["Python", "beta", "2", "1", "2/3 66.7%"],
            &["Rust", "alpha", "1", "1", "3/3 100.0%"],
            &["Rust", "beta", "1", "0", "0/3 0.0%"],
        ]),
    );
    m.insert(
        T8,
        rows(&[
            &[
                "config",
                "failing submissions",
                "with test counts",
                "hidden tests passed",
                "mean per submission",
            ],
            &["alpha", "2", "2", "11/18 61.1%", "60.0%"],
            &["beta", "3", "2", "6/13 46.2%", "37.5%"],
        ]),
    );
    m.insert(
        T8D,
        rows(&[
            &["case", "config", "repeat", "tests passed", "share"],
            &["c1", "alpha", "3", "7/10", "70.0%"],
            &["c2", "alpha", "1", "4/8", "50.0%"],
            &["c2", "beta", "1", "6/8", "75.0%"],
            &["c4", "beta", "2", "0/5", "0.0%"],
        ]),
    );
    m
}

/// pass@k and pass^k of run A by hand. Valid repeats (n) and passes (c):
/// alpha c1 (3,2) c2 (3,1) c3 (2,0) c4 (3,3); beta c1 (2,2) c2 (1,0)
/// c3 (2,2) c4 (3,0).
/// - alpha k=1: mean(2/3, 1/3, 0, 1) = 0.5 for both.
/// - alpha k=2: pass@2 = 1 - C(n-c,2)/C(n,2): c1 1-0 = 1, c2 1-1/3 = 2/3,
///   c3 0, c4 1: mean 2/3; pass^2 = C(c,2)/C(n,2): c1 1/3, c2 0, c3 0,
///   c4 1: mean 1/3.
/// - alpha k=3 (c3 has only 2): pass@3 1,1,1 = 1; pass^3 0,0,1 = 1/3.
/// - beta k=1: mean(1, 0, 1, 0) = 0.5; k=2 (c1, c3, c4): pass@2 = pass^2 =
///   mean(1, 1, 0) = 2/3; k=3 (c4 only): 0 and 0.
pub const EXPECTED_REPEATS: &[(&str, u64, usize, f64, f64)] = &[
    ("alpha", 1, 4, 0.5, 0.5),
    ("alpha", 2, 4, 2.0 / 3.0, 1.0 / 3.0),
    ("alpha", 3, 3, 1.0, 1.0 / 3.0),
    ("beta", 1, 4, 0.5, 0.5),
    ("beta", 2, 3, 2.0 / 3.0, 2.0 / 3.0),
    ("beta", 3, 1, 0.0, 0.0),
];

/// `30.6–86.3%` as (0.306, 0.863).
pub fn parse_ci(s: &str) -> Option<(f64, f64)> {
    let s = s.strip_suffix('%')?;
    let (a, b) = s.split_once('–')?;
    Some((
        a.parse::<f64>().ok()? / 100.0,
        b.parse::<f64>().ok()? / 100.0,
    ))
}

/// The repeat rows of a text table against [`EXPECTED_REPEATS`]; the
/// bootstrap intervals must bracket their estimate (to the printed
/// precision), lie in 0..1 and be `n/a` over a single case.
pub fn check_repeat_rows(table: &[Vec<String>]) {
    assert_eq!(
        table[0],
        ["config", "k", "cases", "pass@k", "95% CI", "pass^k", "95% CI"]
    );
    assert_eq!(table.len() - 1, EXPECTED_REPEATS.len(), "{table:?}");
    for (row, (config, k, cases, at, hat)) in table[1..].iter().zip(EXPECTED_REPEATS) {
        assert_eq!(row[0], *config);
        assert_eq!(row[1], k.to_string());
        assert_eq!(row[2], cases.to_string());
        assert_eq!(row[3], format!("{:.1}%", at * 100.0), "{row:?}");
        assert_eq!(row[5], format!("{:.1}%", hat * 100.0), "{row:?}");
        for (ci, point) in [(&row[4], at), (&row[6], hat)] {
            if *cases < 2 {
                assert_eq!(ci, "n/a", "{row:?}");
                continue;
            }
            let (lo, hi) = parse_ci(ci).unwrap_or_else(|| panic!("{row:?}"));
            assert!(
                0.0 <= lo && lo <= *point + 5e-4 && *point <= hi + 5e-4 && hi <= 1.0,
                "{row:?}"
            );
        }
    }
}
