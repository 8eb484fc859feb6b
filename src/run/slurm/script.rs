//! The batch script of a run's job array, and the array's index list.
//!
//! The script's last line is `exec cbrun run --worker DIR --task
//! $SLURM_ARRAY_TASK_ID`: `scancel`, a preemption or the time limit then
//! signal cbrun itself (not a shell that would leave it running). Before
//! it, a node-local `cbrun gc` removes what earlier tasks killed on this
//! node left behind. Every value in it is single-quoted for the shell, and
//! `#SBATCH` values are refused when they hold a line break.

use std::path::Path;

use super::options::SlurmOptions;
use super::resources::TaskResources;

/// What the script is made of.
pub struct ScriptInput<'a> {
    pub run_id: &'a str,
    pub folder: &'a Path,
    pub cbrun: &'a str,
    pub array: &'a str,
    pub resources: &'a TaskResources,
    pub options: &'a SlurmOptions,
    pub retry_infra: u32,
}

/// `0-3,7,9-12%K`: the sorted indices as ranges, then the limit.
pub fn array_spec(indices: &[usize], parallel: Option<u32>) -> String {
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    let mut s = parts.join(",");
    if let Some(k) = parallel {
        s.push_str(&format!("%{k}"));
    }
    s
}

/// `'...'` with every `'` written as `'\''`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The batch script.
pub fn render(i: &ScriptInput) -> String {
    let dir = i.folder.display().to_string();
    let o = i.options;
    let mut s = String::new();
    s.push_str("#!/bin/sh\n");
    s.push_str(&format!(
        "# cbrun run --backend slurm: run {}, one array task per trial; the array\n\
         # index is the trial's number in plan.toml (slurm/tasks.json lists them).\n",
        i.run_id
    ));
    let mut opt = |k: &str, v: &str| s.push_str(&format!("#SBATCH --{k}={v}\n"));
    opt("job-name", &format!("cbrun-{}", i.run_id));
    opt("array", i.array);
    opt("cpus-per-task", &i.resources.cpus.to_string());
    opt("mem", &format!("{}M", i.resources.mem_mib));
    opt("time", &i.resources.time_arg());
    opt("output", &format!("{dir}/slurm/logs/%A_%a.log"));
    opt("open-mode", "append");
    opt("chdir", &dir);
    for (k, v) in [
        ("partition", &o.partition),
        ("account", &o.account),
        ("qos", &o.qos),
        ("constraint", &o.constraint),
    ] {
        if let Some(v) = v {
            opt(k, v);
        }
    }
    for a in &o.sbatch_args {
        s.push_str(&format!("#SBATCH {a}\n"));
    }
    s.push_str("\n# Node-local state: never the shared run folder.\n");
    match &o.state_dir {
        Some(d) => s.push_str(&format!("export CBRUN_STATE_DIR={}\n", shell_quote(d))),
        None => s.push_str("unset CBRUN_STATE_DIR\n"),
    }
    let exe = shell_quote(i.cbrun);
    s.push_str(&format!(
        "# What killed tasks left on this node (their sandboxes died with them).\n\
         {exe} gc >/dev/null 2>&1 || echo \"cbrun gc failed on $(hostname)\" >&2\n\
         exec {exe} run --worker {} --task \"$SLURM_ARRAY_TASK_ID\" --retry-infra {}\n",
        shell_quote(&dir),
        i.retry_infra
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_are_ranges() {
        assert_eq!(array_spec(&[0, 1, 2, 3], Some(2)), "0-3%2");
        assert_eq!(array_spec(&[9, 3, 7, 8, 0], None), "0,3,7-9");
        assert_eq!(array_spec(&[5], None), "5");
    }

    #[test]
    fn the_worker_is_execed_last_and_values_are_quoted() {
        let r = TaskResources {
            cpus: 2,
            mem_mib: 1536,
            minutes: 130,
        };
        let o = SlurmOptions {
            partition: Some("short".into()),
            sbatch_args: vec!["--exclusive".into()],
            ..Default::default()
        };
        let s = render(&ScriptInput {
            run_id: "r1",
            folder: Path::new("/shared/it's here"),
            cbrun: "/opt/cbrun/bin/cbrun",
            array: "0-3%2",
            resources: &r,
            options: &o,
            retry_infra: 1,
        });
        let last = s.lines().last().unwrap();
        assert_eq!(
            last,
            r#"exec '/opt/cbrun/bin/cbrun' run --worker '/shared/it'\''s here' --task "$SLURM_ARRAY_TASK_ID" --retry-infra 1"#
        );
        assert!(s.contains("#SBATCH --array=0-3%2\n"));
        assert!(s.contains("#SBATCH --mem=1536M\n"));
        assert!(s.contains("#SBATCH --time=0-02:10:00\n"));
        assert!(s.contains("#SBATCH --partition=short\n"));
        let raw = s.find("#SBATCH --exclusive").unwrap();
        assert!(
            raw > s.find("#SBATCH --time").unwrap(),
            "raw options come last"
        );
        assert!(s.contains("unset CBRUN_STATE_DIR\n"));
    }
}
