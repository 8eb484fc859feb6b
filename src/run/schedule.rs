//! Which trial starts next, in which slot: at most `jobs` at once, and
//! never more memory promised than the host has, counting each running
//! trial's memory limit (its solve and judge sandboxes run one after the
//! other, so a trial holds one limit's worth at a time). Trials start in
//! plan order; one that does not fit waits for memory to free (it is not
//! overtaken, so big trials do not starve).
//!
//! Slots may be pinned to CPU sets: slot `s` gets the `s`-th group of
//! `per_slot` CPUs among those this process may use.

use std::collections::VecDeque;

use nix::sched::CpuSet;

/// What the host offers a run.
#[derive(Debug, Clone)]
pub struct HostResources {
    /// CPUs this process may run on.
    pub cpus: Vec<usize>,
    /// Bytes: the host's memory, or this process's cgroup limit if lower.
    pub memory: u64,
}

impl HostResources {
    pub fn detect() -> HostResources {
        let cpus = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
            .map(|set| {
                (0..CpuSet::count())
                    .filter(|c| set.is_set(*c).unwrap_or(false))
                    .collect()
            })
            .unwrap_or_else(|_| vec![0]);
        let total = meminfo_total().unwrap_or(u64::MAX);
        let memory = cgroup_memory_limit().map_or(total, |l| l.min(total));
        HostResources { cpus, memory }
    }

    /// The default number of slots: one per CPU, as many as the largest
    /// trial's memory allows, at least one.
    pub fn default_jobs(&self, trial_memory: u64) -> usize {
        let by_mem = self.memory.checked_div(trial_memory).unwrap_or(u64::MAX);
        (self.cpus.len() as u64).min(by_mem).max(1) as usize
    }

    /// CPU sets for `jobs` slots of `per_slot` CPUs each.
    pub fn cpusets(&self, jobs: usize, per_slot: usize) -> Result<Vec<CpuSet>, String> {
        if per_slot == 0 || jobs * per_slot > self.cpus.len() {
            return Err(format!(
                "--cpuset-per-slot {per_slot}: {jobs} slots need {} CPUs, this process may use {}",
                jobs * per_slot,
                self.cpus.len()
            ));
        }
        Ok(self
            .cpus
            .chunks(per_slot)
            .take(jobs)
            .map(|chunk| {
                let mut set = CpuSet::new();
                for c in chunk {
                    let _ = set.set(*c);
                }
                set
            })
            .collect())
    }
}

fn meminfo_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The memory limit of this process's cgroup (v2 `memory.max`, v1
/// `memory.limit_in_bytes`), when it has one.
fn cgroup_memory_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<u64> = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        let file = if ctrls.is_empty() {
            format!("/sys/fs/cgroup{path}/memory.max")
        } else if ctrls.split(',').any(|c| c == "memory") {
            format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")
        } else {
            continue;
        };
        if let Some(v) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
    }
    best
}

/// The queue and the slots.
#[derive(Debug)]
pub struct Scheduler {
    queue: VecDeque<(usize, u64)>,
    slots: Vec<Option<(usize, u64)>>,
    budget: u64,
    used: u64,
}

impl Scheduler {
    /// `jobs` slots over `budget` bytes; `queue` holds (task, memory).
    pub fn new(jobs: usize, budget: u64, queue: impl IntoIterator<Item = (usize, u64)>) -> Self {
        Scheduler {
            queue: queue.into_iter().collect(),
            slots: vec![None; jobs.max(1)],
            budget,
            used: 0,
        }
    }

    /// The next trial to start and its slot, when one fits now. A trial
    /// bigger than the whole budget runs alone.
    pub fn take_next(&mut self) -> Option<(usize, usize)> {
        let slot = self.slots.iter().position(Option::is_none)?;
        let &(task, mem) = self.queue.front()?;
        let alone = self.used == 0;
        if !alone && self.used + mem > self.budget {
            return None;
        }
        self.queue.pop_front();
        self.slots[slot] = Some((task, mem));
        self.used += mem;
        Some((slot, task))
    }

    /// The trial in `slot` ended.
    pub fn finished(&mut self, slot: usize) {
        if let Some((_, mem)) = self.slots[slot].take() {
            self.used -= mem;
        }
    }

    /// Queues `task` again (a retry), at the end.
    pub fn requeue(&mut self, task: usize, mem: u64) {
        self.queue.push_back((task, mem));
    }

    /// Drops everything not started.
    pub fn clear_queue(&mut self) {
        self.queue.clear();
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn running(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    pub fn used(&self) -> u64 {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1 << 30;

    #[test]
    fn never_more_slots_or_memory_than_there_are() {
        // 3 slots, 20 GiB; trials of 8, 8, 8, 4, 4 GiB.
        let mut s = Scheduler::new(
            3,
            20 * G,
            [(0, 8 * G), (1, 8 * G), (2, 8 * G), (3, 4 * G), (4, 4 * G)],
        );
        assert_eq!(s.take_next(), Some((0, 0)));
        assert_eq!(s.take_next(), Some((1, 1)));
        // 24 GiB would be promised: task 2 waits, and 3 does not overtake it.
        assert_eq!(s.take_next(), None);
        assert_eq!(s.used(), 16 * G);
        s.finished(0);
        assert_eq!(s.take_next(), Some((0, 2)));
        // 16 + 4 = 20 GiB: fits exactly.
        assert_eq!(s.take_next(), Some((2, 3)));
        assert_eq!(s.used(), 20 * G);
        assert_eq!(s.running(), 3);
        assert_eq!(s.take_next(), None);
        s.finished(1);
        assert_eq!(s.take_next(), Some((1, 4)));
        assert_eq!(s.used(), 16 * G);
        assert_eq!(s.take_next(), None);
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn a_trial_bigger_than_the_host_runs_alone() {
        let mut s = Scheduler::new(2, 4 * G, [(0, 8 * G), (1, G)]);
        assert_eq!(s.take_next(), Some((0, 0)));
        assert_eq!(s.take_next(), None);
        s.finished(0);
        assert_eq!(s.take_next(), Some((0, 1)));
    }

    #[test]
    fn default_jobs_from_cores_and_memory() {
        let h = HostResources {
            cpus: vec![0, 1, 2, 3],
            memory: 24 * G,
        };
        assert_eq!(h.default_jobs(8 * G), 3);
        assert_eq!(h.default_jobs(2 * G), 4);
        assert_eq!(h.default_jobs(32 * G), 1);
        let sets = h.cpusets(2, 2).unwrap();
        assert!(sets[0].is_set(0).unwrap() && sets[0].is_set(1).unwrap());
        assert!(sets[1].is_set(2).unwrap() && !sets[1].is_set(1).unwrap());
        assert!(h.cpusets(3, 2).unwrap_err().contains("need 6 CPUs"));
    }

    #[test]
    fn the_host_is_read() {
        let h = HostResources::detect();
        assert!(!h.cpus.is_empty());
        assert!(h.memory > 64 << 20);
    }
}
