//! The stall watchdog: an agent that neither prints nor changes anything
//! under its watched folders for the stall period is stopped.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::trial::copy::tree_fingerprint;

pub struct Watchdog {
    paths: Vec<PathBuf>,
    stall: Duration,
    last: Vec<Option<(u64, u64, i128)>>,
    last_change: Instant,
}

impl Watchdog {
    /// Watches `paths` (folders or files: the workspace, the agent's logs,
    /// the file its output goes to).
    pub fn new(paths: Vec<PathBuf>, stall: Duration) -> Self {
        let last = paths.iter().map(|p| tree_fingerprint(p).ok()).collect();
        Watchdog {
            paths,
            stall,
            last,
            last_change: Instant::now(),
        }
    }

    /// How often to look: often enough to stop within ~10% of the period.
    pub fn interval(&self) -> Duration {
        (self.stall / 10).clamp(Duration::from_millis(200), Duration::from_secs(15))
    }

    /// True once nothing changed for the whole stall period.
    pub fn stalled(&mut self) -> bool {
        let now: Vec<_> = self
            .paths
            .iter()
            .map(|p| tree_fingerprint(p).ok())
            .collect();
        if now != self.last {
            self.last = now;
            self.last_change = Instant::now();
            return false;
        }
        self.last_change.elapsed() >= self.stall
    }
}
