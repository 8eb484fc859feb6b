//! The run's display, on stderr. On a terminal (with `indicatif`): one
//! live line per running trial (its phase and elapsed time) above an
//! overall bar (done of total, passes, infrastructure failures, ETA), and
//! a line per finished trial scrolling above them. Off a terminal: plain
//! timestamped lines. `--quiet`: nothing.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, SystemTime};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::trial::clock;
use crate::trial::record::PipelineStatus;

use super::plan::Task;
use super::state::TrialState;
use super::summary::Counts;
use super::supervise::{Observer, RunningView, TaskEnd};

/// How the display looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Live,
    Plain,
    Quiet,
}

/// Live on a terminal, plain lines elsewhere.
pub fn style_for_stderr(quiet: bool) -> Style {
    use std::io::IsTerminal;
    if quiet {
        Style::Quiet
    } else if std::io::stderr().is_terminal() {
        Style::Live
    } else {
        Style::Plain
    }
}

/// The display for `style`.
pub fn display(style: Style) -> Box<dyn Observer> {
    match style {
        Style::Live => Box::new(Live::new()),
        Style::Plain => Box::new(Plain::default()),
        Style::Quiet => Box::new(Quiet),
    }
}

/// Tallies shared by both displays.
#[derive(Default)]
struct Tally {
    total: u64,
    done: u64,
    passed: u64,
    infra: u64,
}

impl Tally {
    fn begin(&mut self, total: u64, before: &Counts) {
        self.total = total;
        // What already stands counts as done; interrupted trials and
        // infrastructure failures are about to run again.
        self.done = before.done.saturating_sub(before.infrastructure);
        self.passed = before.passed;
        self.infra = 0;
    }

    /// Counts a finished trial in; its one-word outcome.
    fn finished(&mut self, end: &TaskEnd) -> String {
        match &end.state {
            TrialState::Finished(v) => {
                if !end.retried && !v.interrupted() {
                    self.done += 1;
                }
                if v.reward == 1 {
                    self.passed += 1;
                }
                if v.infrastructure() && !v.interrupted() {
                    self.infra += 1;
                }
                let what = match v.pipeline_status.unwrap_or(PipelineStatus::Error) {
                    PipelineStatus::Evaluated => "evaluated",
                    PipelineStatus::NotSubmitted => "not_submitted",
                    PipelineStatus::Rejected => "rejected",
                    PipelineStatus::Error if v.interrupted() => "interrupted",
                    PipelineStatus::Error => "error",
                };
                let why = v
                    .error
                    .as_deref()
                    .or(v.judge_error.as_deref())
                    .filter(|_| v.reward == 0 && what != "evaluated")
                    .map(|e| format!(": {}", cut(e, 160)))
                    .unwrap_or_default();
                format!(
                    "{what} reward {}{}{why}",
                    v.reward,
                    if end.retried { " (retrying)" } else { "" }
                )
            }
            _ => match (end.code, end.signal) {
                (Some(c), _) => format!("unfinished (worker exit {c})"),
                (_, Some(s)) => format!("unfinished (worker killed by signal {s})"),
                _ => "unfinished".into(),
            },
        }
    }

    fn line(&self) -> String {
        format!(
            "{}/{} done, {} passed, {} infrastructure",
            self.done, self.total, self.passed, self.infra
        )
    }
}

fn cut(s: &str, n: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= n {
        one
    } else {
        format!("{}...", one.chars().take(n).collect::<String>())
    }
}

fn mmss(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

/// Plain timestamped lines.
#[derive(Default)]
struct Plain {
    tally: Tally,
}

impl Plain {
    fn say(&self, msg: &str) {
        let text = format!("{} cbrun run: {msg}\n", clock::rfc3339(SystemTime::now()));
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

impl Observer for Plain {
    fn begin(&mut self, total: u64, before: &Counts, queued: usize, jobs: usize) {
        self.tally.begin(total, before);
        self.say(&format!(
            "{total} trials, {} done before, {queued} to run, {jobs} at a time",
            self.tally.done
        ));
    }
    fn started(&mut self, task: &Task, slot: usize) {
        self.say(&format!(
            "start {} (task {}, slot {})",
            task.label(),
            task.n,
            slot + 1
        ));
    }
    fn phase(&mut self, task: &Task, phase: &str) {
        self.say(&format!("{} {phase}", task.label()));
    }
    fn finished(&mut self, task: &Task, end: &TaskEnd) {
        let what = self.tally.finished(end);
        self.say(&format!(
            "done {}: {what} in {:.1} s [{}]",
            task.label(),
            end.wall.as_secs_f64(),
            self.tally.line()
        ));
    }
    fn interrupt(&mut self, signal: i32, first: bool) {
        self.say(&if first {
            format!("signal {signal}: interrupting the running trials; no new ones start (again to kill)")
        } else {
            format!("signal {signal}: killing the workers")
        });
    }
    fn warning(&mut self, msg: &str) {
        self.say(&format!("warning: {msg}"));
    }
    fn end(&mut self) {
        self.say(&format!("finished: {}", self.tally.line()));
    }
}

/// The live display.
struct Live {
    multi: MultiProgress,
    overall: ProgressBar,
    lines: HashMap<usize, ProgressBar>,
    tally: Tally,
}

impl Live {
    fn new() -> Live {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10));
        let overall = multi.add(ProgressBar::new(0));
        overall.set_style(
            ProgressStyle::with_template("{bar:30.cyan/blue} {pos}/{len} done · {msg} · ETA {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Live {
            multi,
            overall,
            lines: HashMap::new(),
            tally: Tally::default(),
        }
    }

    fn refresh(&self) {
        self.overall.set_position(self.tally.done);
        self.overall.set_message(format!(
            "{} passed · {} infrastructure",
            self.tally.passed, self.tally.infra
        ));
    }
}

impl Observer for Live {
    fn begin(&mut self, total: u64, before: &Counts, _queued: usize, _jobs: usize) {
        self.tally.begin(total, before);
        self.overall.set_length(total);
        self.refresh();
        // What ran before does not speed up the estimate.
        self.overall.reset_eta();
    }
    fn started(&mut self, task: &Task, _slot: usize) {
        let line = self
            .multi
            .insert_before(&self.overall, ProgressBar::new_spinner());
        line.set_style(
            ProgressStyle::with_template("  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        line.set_message(format!("{}  starting", task.label()));
        self.lines.insert(task.n, line);
    }
    fn finished(&mut self, task: &Task, end: &TaskEnd) {
        if let Some(line) = self.lines.remove(&task.n) {
            line.finish_and_clear();
            self.multi.remove(&line);
        }
        let what = self.tally.finished(end);
        let _ = self.multi.println(format!(
            "{} {what} ({:.1} s)",
            task.label(),
            end.wall.as_secs_f64()
        ));
        self.refresh();
    }
    fn interrupt(&mut self, signal: i32, first: bool) {
        let _ = self.multi.println(if first {
            format!("signal {signal}: interrupting the running trials (again to kill)")
        } else {
            format!("signal {signal}: killing the workers")
        });
    }
    fn warning(&mut self, msg: &str) {
        let _ = self.multi.println(format!("warning: {msg}"));
    }
    fn tick(&mut self, running: &[RunningView]) {
        for r in running {
            if let Some(line) = self.lines.get(&r.task.n) {
                line.set_message(format!(
                    "{}  {}  {}{}",
                    r.task.label(),
                    r.phase.unwrap_or("starting"),
                    mmss(r.elapsed),
                    r.attempt
                        .filter(|a| *a > 1)
                        .map(|a| format!("  (attempt {a})"))
                        .unwrap_or_default()
                ));
            }
        }
        self.overall.tick();
    }
    fn end(&mut self) {
        self.overall.finish_and_clear();
        let _ = self.multi.clear();
        let text = format!("{}\n", self.tally.line());
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

struct Quiet;
impl Observer for Quiet {}
