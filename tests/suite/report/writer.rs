//! A test-side writer of run folders in the shapes of the run-folder contract
//! (plan.toml, trials/<case>/<config>/<repeat>/trial.json, claims,
//! results.jsonl).

use super::*;

/// One trial as the run contract lays it out.
#[derive(Clone)]
pub struct T {
    pub case: &'static str,
    pub config: &'static str,
    pub repeat: u32,
    pub reward: u8,
    pub terminal: &'static str,
    pub pipeline: Option<&'static str>,
    pub class: Option<&'static str>,
    pub tests: Option<(u64, u64)>,
    /// `None`: the field is null (never submitted).
    pub tts: Option<f64>,
    pub cost: Option<f64>,
    pub tokens: Option<(u64, u64)>,
    pub judge_error: Option<&'static str>,
    pub denylist: Option<&'static str>,
}

pub fn pass(case: &'static str, config: &'static str, repeat: u32, n: u64, tts: f64) -> T {
    T {
        case,
        config,
        repeat,
        reward: 1,
        terminal: "completed",
        pipeline: Some("evaluated"),
        class: None,
        tests: Some((n, n)),
        tts: Some(tts),
        cost: None,
        tokens: None,
        judge_error: None,
        denylist: None,
    }
}

pub fn fail(
    case: &'static str,
    config: &'static str,
    repeat: u32,
    passed: u64,
    n: u64,
    tts: f64,
) -> T {
    T {
        reward: 0,
        tests: Some((passed, n)),
        class: Some("implementation"),
        ..pass(case, config, repeat, n, tts)
    }
}

pub fn not_submitted(case: &'static str, config: &'static str, repeat: u32) -> T {
    T {
        reward: 0,
        terminal: "not_submitted",
        pipeline: Some("not_submitted"),
        class: Some("implementation"),
        tests: None,
        tts: None,
        ..pass(case, config, repeat, 0, 0.0)
    }
}

impl T {
    pub fn cost(mut self, c: f64) -> T {
        self.cost = Some(c);
        self
    }
    pub fn tokens(mut self, i: u64, o: u64) -> T {
        self.tokens = Some((i, o));
        self
    }

    pub fn record(&self, run_id: &str) -> Value {
        let submitted = self.tts.is_some();
        json!({
            "schema_version": 1,
            "run_id": run_id,
            "case_id": self.case,
            "config": self.config,
            "repeat": self.repeat,
            "attempt": 1,
            "agent_spec_name": format!("agent-{}", self.config),
            "model": format!("model-{}", self.config),
            "reward": self.reward,
            "terminal_status": self.terminal,
            "pipeline_status": self.pipeline,
            "failure_class": self.class,
            "judge_error": self.judge_error,
            "denylist_violation": self.denylist,
            "test_count": self.tests.map(|t| t.1),
            "passed": self.tests.map(|t| t.0),
            "failed": self.tests.map(|t| t.1 - t.0),
            "errors": self.tests.map(|_| 0),
            "skipped": self.tests.map(|_| 0),
            "submission": if submitted { json!({"state": "submitted"}) }
                          else { json!({"state": "not_submitted", "detail": "no submit file"}) },
            "setup_seconds": 5.0,
            "solve_seconds": self.tts.unwrap_or(7200.0) + 10.0,
            "judge_seconds": 2.0,
            "time_to_submit_seconds": self.tts,
            "cost_usd": self.cost,
            "cost_source": self.cost.map(|_| "pricing-table:2026-11-01"),
            "token_usage": self.tokens.map(|(i, o)| json!({
                "input": i, "output": o, "cache_read": null, "cache_write": null, "reasoning": null
            })),
            "started_at": "2026-12-01T23:00:00Z",
            "finished_at": "2026-12-01T23:30:00Z",
        })
    }
}

pub struct Run {
    pub dir: PathBuf,
    pub id: String,
}

impl Run {
    /// `plan.toml` with `cases` (id, language) x `configs` x `repeats`.
    pub fn new(
        dir: &Path,
        id: &str,
        repeats: u32,
        cases: &[(&str, &str)],
        configs: &[&str],
    ) -> Run {
        fs::create_dir_all(dir.join("trials")).unwrap();
        let mut plan = format!(
            "run_id = \"{id}\"\ncreated_at = \"2026-12-01T23:00:00Z\"\nrepeats = {repeats}\n"
        );
        for (c, lang) in cases {
            plan.push_str(&format!(
                "[[case]]\nid = \"{c}\"\npath = \"/cases/{c}\"\nsha256 = \"00\"\nlanguage = \"{lang}\"\n"
            ));
        }
        for k in configs {
            plan.push_str(&format!(
                "[[config]]\nname = \"{k}\"\nagent = \"agent-{k}\"\nmodel = \"model-{k}\"\nsolve_timeout = 7200.0\nmemory = \"8G\"\npids = 4096\nnet = \"none\"\nallow = []\nallow_registries = false\n"
            ));
        }
        fs::write(dir.join("plan.toml"), plan).unwrap();
        Run {
            dir: dir.to_owned(),
            id: id.to_owned(),
        }
    }

    pub fn trial_dir(&self, case: &str, config: &str, repeat: u32) -> PathBuf {
        self.dir
            .join("trials")
            .join(case)
            .join(config)
            .join(repeat.to_string())
    }

    /// The trial folder with its record, and its line in results.jsonl.
    pub fn put(&self, t: &T) {
        let d = self.trial_dir(t.case, t.config, t.repeat);
        fs::create_dir_all(d.join("logs/agent")).unwrap();
        let rec = t.record(&self.id);
        fs::write(
            d.join("trial.json"),
            serde_json::to_vec_pretty(&rec).unwrap(),
        )
        .unwrap();
        let line = json!({
            "run_id": self.id, "case": t.case, "config": t.config, "repeat": t.repeat,
            "attempt": 1, "trial_dir": format!("trials/{}/{}/{}", t.case, t.config, t.repeat),
            "record": rec,
        });
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("results.jsonl"))
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    pub fn put_raw(&self, case: &str, config: &str, repeat: u32, record: &Value) {
        let d = self.trial_dir(case, config, repeat);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("trial.json"), serde_json::to_vec(record).unwrap()).unwrap();
    }

    pub fn claim(&self, case: &str, config: &str, repeat: u32, host: &str, pid: u32) {
        let p = self
            .dir
            .join("trials")
            .join(case)
            .join(config)
            .join(format!("{repeat}.claim"));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(
            p,
            json!({"host": host, "pid": pid, "job": "local", "time": "2026-12-01T23:00:00Z"})
                .to_string(),
        )
        .unwrap();
    }
}

pub fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

/// An `interrupted` record: what every trial's record says until it ends.
pub fn interrupted(case: &'static str, config: &'static str, repeat: u32) -> T {
    T {
        reward: 0,
        terminal: "interrupted",
        pipeline: None,
        class: None,
        tests: None,
        tts: None,
        ..pass(case, config, repeat, 0, 0.0)
    }
}
