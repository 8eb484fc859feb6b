//! How a run is submitted: the plan file's `[slurm]` table, the flags
//! (which win), and `slurm/options.toml` in the run folder (what the first
//! submission used, so that `--resume` submits the same way).

use serde::{Deserialize, Serialize};

/// What `sbatch` is told besides the per-task resources.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// Array tasks at once (`--array=...%K`); none: as many as Slurm gives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel: Option<u32>,
    /// Minutes added to the trial's budget for `--time` (default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_margin_minutes: Option<u32>,
    /// The cbrun binary the nodes run (default: this one, by its path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cbrun: Option<String>,
    /// `CBRUN_STATE_DIR` on the nodes (default: cbrun's own, memory-backed,
    /// node-local choice). Must be node-local.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<String>,
    /// Raw `sbatch` options, one per entry (`--gres=gpu:1`), written after
    /// cbrun's own `#SBATCH` lines, so that they win.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sbatch_args: Vec<String>,
}

impl SlurmOptions {
    /// `self` with every field `over` sets replaced (raw args appended).
    pub fn overridden_by(&self, over: &SlurmOptions) -> SlurmOptions {
        let pick = |a: &Option<String>, b: &Option<String>| b.clone().or_else(|| a.clone());
        let mut sbatch_args = self.sbatch_args.clone();
        sbatch_args.extend(over.sbatch_args.iter().cloned());
        SlurmOptions {
            partition: pick(&self.partition, &over.partition),
            account: pick(&self.account, &over.account),
            qos: pick(&self.qos, &over.qos),
            constraint: pick(&self.constraint, &over.constraint),
            parallel: over.parallel.or(self.parallel),
            time_margin_minutes: over.time_margin_minutes.or(self.time_margin_minutes),
            cbrun: pick(&self.cbrun, &over.cbrun),
            state_dir: pick(&self.state_dir, &over.state_dir),
            sbatch_args,
        }
    }

    /// Checks what would break the batch script: a value with a newline
    /// (it would end the `#SBATCH` line and start a command), an option
    /// that is not one.
    pub fn check(&self) -> Result<(), String> {
        let fields = [
            ("partition", &self.partition),
            ("account", &self.account),
            ("qos", &self.qos),
            ("constraint", &self.constraint),
            ("cbrun", &self.cbrun),
            ("state_dir", &self.state_dir),
        ];
        for (name, v) in fields {
            if let Some(v) = v {
                if v.is_empty() || v.contains(['\n', '\r', '\0']) {
                    return Err(format!("slurm.{name}: {v:?}: empty or holds a line break"));
                }
            }
        }
        for a in &self.sbatch_args {
            if !a.starts_with('-') || a.contains(['\n', '\r', '\0']) {
                return Err(format!(
                    "slurm.sbatch_args: {a:?}: each entry is one option starting with - (no line breaks)"
                ));
            }
        }
        if self.parallel == Some(0) {
            return Err("slurm.parallel: 0: must be at least 1".into());
        }
        if let Some(d) = &self.state_dir {
            if !d.starts_with('/') {
                return Err(format!("slurm.state_dir: {d}: must be an absolute path"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_and_bad_values_are_refused() {
        let plan = SlurmOptions {
            partition: Some("short".into()),
            qos: Some("low".into()),
            sbatch_args: vec!["--gres=gpu:1".into()],
            ..Default::default()
        };
        let flags = SlurmOptions {
            partition: Some("long".into()),
            parallel: Some(4),
            ..Default::default()
        };
        let o = plan.overridden_by(&flags);
        assert_eq!(o.partition.as_deref(), Some("long"));
        assert_eq!(o.qos.as_deref(), Some("low"));
        assert_eq!(o.parallel, Some(4));
        assert!(o.check().is_ok());
        let bad = SlurmOptions {
            account: Some("a\nrm -rf /".into()),
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().contains("slurm.account"));
        let bad = SlurmOptions {
            sbatch_args: vec!["x; reboot".into()],
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().contains("sbatch_args"));
        let t: SlurmOptions =
            toml::from_str("partition = \"p\"\nsbatch_args = [\"--exclusive\"]").unwrap();
        assert_eq!(t.sbatch_args, ["--exclusive"]);
        assert!(toml::from_str::<SlurmOptions>("partitoin = \"p\"").is_err());
    }
}
