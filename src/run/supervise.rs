//! The local supervisor: starts `cbrun run --worker DIR --task N`
//! processes in its slots (see [`super::schedule`]), watches their phases,
//! reaps them, retries infrastructure failures, and rewrites the summary.
//! It never builds a sandbox itself, and it runs on one thread: one
//! `poll` on a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP), with a tick
//! for the display.
//!
//! Workers run in their own process group (a Ctrl-C on the terminal
//! reaches the supervisor alone, which decides what the workers get) and
//! die with the supervisor (parent-death signal), so a supervisor killed
//! with SIGKILL leaves no worker running; their sandboxes die with them.
//!
//! Interrupts: the first SIGINT, SIGTERM or SIGHUP stops starting trials
//! and forwards the signal to every worker, whose trials end as
//! `interrupted`; a second one kills the workers (SIGKILL) and removes
//! what their sandboxes left, as `cbrun gc` does.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::CpuSet;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::sys::stop;

use super::folder::RunFolder;
use super::plan::{ResolvedPlan, Task};
use super::schedule::Scheduler;
use super::state::{self, Next, TrialState};
use super::summary::{self, Counts};
use super::worker::read_status;

#[derive(Debug, Clone)]
pub struct SuperviseOptions {
    /// The cbrun binary the workers run.
    pub exe: PathBuf,
    pub jobs: usize,
    /// Bytes the running trials' memory limits may add up to.
    pub memory_budget: u64,
    /// One CPU set per slot, when slots are pinned.
    pub cpusets: Option<Vec<CpuSet>>,
    pub retry_infra: u32,
    /// How often the display is refreshed (and phases looked at).
    pub tick: Duration,
}

/// A running trial, for the display.
pub struct RunningView<'a> {
    pub task: &'a Task,
    pub slot: usize,
    pub attempt: Option<u32>,
    pub phase: Option<&'a str>,
    pub elapsed: Duration,
}

/// How a worker's trial ended, as its folder says.
#[derive(Debug)]
pub struct TaskEnd {
    pub state: TrialState,
    /// The worker's exit code (None: killed by a signal).
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub wall: Duration,
    /// Queued again for another attempt.
    pub retried: bool,
}

/// What the supervisor tells its display.
pub trait Observer {
    /// Before anything starts: the plan's size, what already stands, how
    /// many trials will run.
    fn begin(&mut self, _total: u64, _before: &Counts, _queued: usize, _jobs: usize) {}
    fn started(&mut self, _task: &Task, _slot: usize) {}
    fn phase(&mut self, _task: &Task, _phase: &str) {}
    fn finished(&mut self, _task: &Task, _end: &TaskEnd) {}
    /// A stop-signal: `first` stops starting, else the workers are killed.
    fn interrupt(&mut self, _signal: i32, _first: bool) {}
    fn warning(&mut self, _msg: &str) {}
    fn tick(&mut self, _running: &[RunningView]) {}
    fn end(&mut self) {}
}

/// How the supervision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supervised {
    /// A stop-signal came.
    pub interrupted: bool,
    /// A second one came, and the workers were killed.
    pub killed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    #[error("{0}")]
    Os(String),
}

struct Worker {
    task: Task,
    child: Child,
    slot: usize,
    started: Instant,
    status: Option<(u32, String)>,
    /// Its trial's sandboxes are done (phase `record`): the slot and its
    /// memory went to the next trial while this worker writes results.
    released: bool,
}

/// Runs the trials `queue` (task numbers, in order) of `plan` in `folder`.
pub fn supervise(
    folder: &RunFolder,
    plan: &ResolvedPlan,
    queue: &[usize],
    o: &SuperviseOptions,
    obs: &mut dyn Observer,
) -> Result<Supervised, SuperviseError> {
    let mut signals = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGCHLD,
        Signal::SIGUSR1,
    ] {
        signals.add(s);
    }
    signals
        .thread_block()
        .map_err(|e| SuperviseError::Os(format!("blocking signals: {e}")))?;
    let sfd = SignalFd::with_flags(&signals, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|e| SuperviseError::Os(format!("signalfd: {e}")));
    let result = sfd.map(|sfd| Loop::new(folder, plan, queue, o, obs).run(&sfd));
    let _ = signals.thread_unblock();
    result
}

struct Loop<'a> {
    folder: &'a RunFolder,
    plan: &'a ResolvedPlan,
    o: &'a SuperviseOptions,
    obs: &'a mut dyn Observer,
    sched: Scheduler,
    workers: Vec<Worker>,
    stopping: bool,
    killed: bool,
    me: libc::pid_t,
    summary: summary::Cache,
}

impl<'a> Loop<'a> {
    fn new(
        folder: &'a RunFolder,
        plan: &'a ResolvedPlan,
        queue: &[usize],
        o: &'a SuperviseOptions,
        obs: &'a mut dyn Observer,
    ) -> Self {
        let mem =
            |n: usize| plan.configs[plan.task(n).map(|t| t.config).unwrap_or(0)].memory_bytes();
        Loop {
            folder,
            plan,
            o,
            obs,
            sched: Scheduler::new(o.jobs, o.memory_budget, queue.iter().map(|&n| (n, mem(n)))),
            workers: Vec::new(),
            stopping: false,
            killed: false,
            me: std::process::id() as libc::pid_t,
            summary: summary::Cache::default(),
        }
    }

    fn run(mut self, sfd: &SignalFd) -> Supervised {
        let mut interrupted = false;
        loop {
            while !self.stopping {
                let Some((slot, n)) = self.sched.take_next() else {
                    break;
                };
                self.start(slot, n);
            }
            if self.workers.is_empty() && (self.stopping || self.sched.queued() == 0) {
                break;
            }
            let mut fds = [PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
            let ms = self.o.tick.as_millis().clamp(10, 60_000) as u16;
            let _ = poll(&mut fds, PollTimeout::from(ms));
            while let Ok(Some(info)) = sfd.read_signal() {
                let sig = info.ssi_signo as i32;
                if sig == libc::SIGCHLD || sig == libc::SIGUSR1 {
                    continue;
                }
                interrupted = true;
                self.interrupt(sig);
            }
            let released = self.look_at_phases();
            if self.reap() || released {
                // Trials finished: the next ones start first, then the
                // summary is rewritten while they get going.
                while !self.stopping {
                    let Some((slot, n)) = self.sched.take_next() else {
                        break;
                    };
                    self.start(slot, n);
                }
                self.write_summary();
            }
            let views: Vec<RunningView> = self
                .workers
                .iter()
                .map(|w| RunningView {
                    task: &w.task,
                    slot: w.slot,
                    attempt: w.status.as_ref().map(|s| s.0),
                    phase: w.status.as_ref().map(|s| s.1.as_str()),
                    elapsed: w.started.elapsed(),
                })
                .collect();
            self.obs.tick(&views);
        }
        if self.killed {
            // What the killed workers' sandboxes left (their processes died
            // with them): run directories and cgroups, as `cbrun gc` does.
            let host = crate::sandbox::run::HostView::detect();
            let _ = crate::sandbox::state::gc(&host.state_root, host.roots.as_deref(), true);
        }
        self.write_summary();
        self.obs.end();
        Supervised {
            interrupted,
            killed: self.killed,
        }
    }

    /// Starts trial `n` in `slot`; false (and the slot freed) when the
    /// worker could not be started.
    fn start(&mut self, slot: usize, n: usize) -> bool {
        let Some(task) = self.plan.task(n) else {
            self.sched.finished(slot);
            return false;
        };
        match self.spawn(&task, slot) {
            Ok(child) => {
                self.obs.started(&task, slot);
                self.workers.push(Worker {
                    task,
                    child,
                    slot,
                    started: Instant::now(),
                    status: None,
                    released: false,
                });
                true
            }
            Err(e) => {
                self.obs
                    .warning(&format!("{}: the worker did not start: {e}", task.label()));
                self.sched.finished(slot);
                false
            }
        }
    }

    fn spawn(&self, task: &Task, slot: usize) -> std::io::Result<Child> {
        let log: File = self.folder.task_log(task.n)?;
        let mut cmd = Command::new(&self.o.exe);
        cmd.arg("run")
            .arg("--worker")
            .arg(&self.folder.root)
            .arg("--task")
            .arg(task.n.to_string())
            .arg("--retry-infra")
            .arg(self.o.retry_infra.to_string())
            .arg("--job-id")
            .arg(format!("local-{}", self.me))
            .arg("--no-summary")
            .arg("--notify")
            .arg(self.me.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        let cpus = self.o.cpusets.as_ref().and_then(|s| s.get(slot).copied());
        stop::worker_setup(&mut cmd, self.me, cpus);
        cmd.spawn()
    }

    fn interrupt(&mut self, sig: i32) {
        let first = !self.stopping;
        self.obs.interrupt(sig, first);
        self.stopping = true;
        self.sched.clear_queue();
        let (to, kill) = if first {
            (Signal::try_from(sig).unwrap_or(Signal::SIGTERM), false)
        } else {
            (Signal::SIGKILL, true)
        };
        if kill {
            self.killed = true;
        }
        for w in &self.workers {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(w.child.id() as i32), to);
        }
    }

    /// Reaps finished workers; true when any was.
    fn reap(&mut self) -> bool {
        let mut any = false;
        let mut i = 0;
        while i < self.workers.len() {
            let status = match self.workers[i].child.try_wait() {
                Ok(Some(s)) => s,
                Ok(None) => {
                    i += 1;
                    continue;
                }
                Err(e) => {
                    self.obs.warning(&format!("waiting for a worker: {e}"));
                    i += 1;
                    continue;
                }
            };
            let w = self.workers.swap_remove(i);
            any = true;
            if !w.released {
                self.sched.finished(w.slot);
            }
            // A worker removes its status file itself, unless it was killed.
            let _ = std::fs::remove_file(self.folder.root.join(super::worker::status_rel(&w.task)));
            let dir = self.folder.existing_config_dir(&w.task);
            let st = dir
                .as_ref()
                .map(|d| state::read_state(d, &w.task.repeat.to_string()))
                .unwrap_or(TrialState::Missing);
            let mut retried = false;
            if let TrialState::Finished(v) = &st {
                if !self.stopping && v.infrastructure() && !v.interrupted() {
                    if let Next::Run { .. } =
                        state::next(dir.as_ref(), w.task.repeat, self.o.retry_infra)
                    {
                        let mem = self.plan.configs[w.task.config].memory_bytes();
                        self.sched.requeue(w.task.n, mem);
                        retried = true;
                    }
                }
            }
            let end = TaskEnd {
                state: st,
                code: status.code(),
                signal: status.signal(),
                wall: w.started.elapsed(),
                retried,
            };
            self.obs.finished(&w.task, &end);
        }
        any
    }

    /// Reads the running trials' phases; true when a trial's sandboxes
    /// are done and its slot was released.
    fn look_at_phases(&mut self) -> bool {
        let mut released = false;
        for w in &mut self.workers {
            let Some(s) = read_status(self.folder, &w.task) else {
                continue;
            };
            let changed = w
                .status
                .as_ref()
                .map(|(_, p)| p != &s.phase)
                .unwrap_or(true);
            if changed {
                self.obs.phase(&w.task, &s.phase);
                if s.phase == "record" && !w.released {
                    self.sched.finished(w.slot);
                    w.released = true;
                    released = true;
                }
                w.status = Some((s.attempt, s.phase));
            }
        }
        released
    }

    fn write_summary(&mut self) {
        if let Err(e) = summary::write_with(self.folder, self.plan, &mut self.summary) {
            self.obs.warning(&format!(
                "writing {}: {e}",
                self.folder.root.join(super::folder::SUMMARY).display()
            ));
        }
    }
}
