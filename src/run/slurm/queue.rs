//! What Slurm says about a run's job: `squeue` for its array tasks still
//! queued or running, `scontrol show config` for the largest array index
//! the cluster takes.

use std::collections::BTreeMap;
use std::process::Command;

/// The job's tasks that Slurm still knows as queued, running or ending,
/// by state (`PENDING`, `RUNNING`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueView {
    pub by_state: BTreeMap<String, usize>,
}

impl QueueView {
    pub fn total(&self) -> usize {
        self.by_state.values().sum()
    }

    /// `2 RUNNING, 5 PENDING`.
    pub fn describe(&self) -> String {
        if self.by_state.is_empty() {
            return "nothing queued or running".into();
        }
        self.by_state
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `squeue -h -r -j JOB -o '%i %T'`, one line per array task.
pub fn squeue(job: &str) -> Result<QueueView, String> {
    let out = Command::new("squeue")
        .args(["-h", "-r", "-j", job, "-o", "%i %T"])
        .output()
        .map_err(|e| format!("squeue: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // A job that left the controller's memory is simply gone.
        if err.contains("Invalid job id") {
            return Ok(QueueView::default());
        }
        return Err(format!(
            "squeue -j {job}: {}",
            err.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    Ok(parse_squeue(&text))
}

pub fn parse_squeue(text: &str) -> QueueView {
    let mut v = QueueView::default();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        if let (Some(_id), Some(state)) = (f.next(), f.next()) {
            *v.by_state.entry(state.to_owned()).or_default() += 1;
        }
    }
    v
}

/// `MaxArraySize` of the cluster, when `scontrol` tells it.
pub fn max_array_size() -> Option<usize> {
    let out = Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .ok()?;
    parse_max_array_size(&String::from_utf8_lossy(&out.stdout))
}

pub fn parse_max_array_size(text: &str) -> Option<usize> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "MaxArraySize").then(|| v.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_and_config_are_read() {
        let v = parse_squeue("12_3 RUNNING\n12_4 PENDING\n12_[5-9%2] PENDING\n");
        assert_eq!(v.total(), 3);
        assert_eq!(v.describe(), "2 PENDING, 1 RUNNING");
        assert_eq!(
            parse_max_array_size("MailProg = /bin/true\nMaxArraySize            = 1001\n"),
            Some(1001)
        );
    }
}
