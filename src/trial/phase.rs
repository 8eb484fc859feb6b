//! What solve and judge sandboxes have in common: the base configuration,
//! limits, and which host ids the sandbox's user writes files as.

use std::path::PathBuf;
use std::time::Duration;

use crate::sandbox::config::{
    BindMount, ByteSize, Cpus, EnvVar, Identity, NetworkPolicy, RootfsSource, SandboxConfig, Stdio,
};
use crate::sandbox::idmap;
use crate::sandbox::rootfs::HOST_SYSTEM_DIRS;
use crate::sandbox::run::HostView;
use crate::trial::copy::Ownership;

pub const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The non-root identity the judge (and `run_as = "nonroot"` agents) use.
pub const NONROOT: Identity = Identity {
    uid: 1000,
    gid: 1000,
};

/// Cgroup limits for one phase; rlimits keep the sandbox defaults.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PhaseLimits {
    pub memory: Option<ByteSize>,
    pub pids: Option<u64>,
    pub cpus: Option<Cpus>,
    /// Refuse to run when a limit cannot be enforced.
    pub require: bool,
}

impl Default for PhaseLimits {
    fn default() -> Self {
        PhaseLimits {
            memory: Some(ByteSize(8 << 30)),
            pids: Some(4096),
            cpus: None,
            require: false,
        }
    }
}

/// A sandbox for a trial phase: host rootfs (until images land), no
/// network, a reaping init, both streams appended to `log`.
pub fn base_config(
    command: Vec<String>,
    rootfs: &RootfsSource,
    image_env: &[(String, String)],
    limits: &PhaseLimits,
    timeout: Duration,
    log: PathBuf,
) -> SandboxConfig {
    let mut cfg = SandboxConfig::new(command);
    cfg.rootfs = rootfs.clone();
    cfg.network = NetworkPolicy::None;
    cfg.limits.memory = limits.memory;
    cfg.limits.pids = limits.pids;
    cfg.limits.cpus = limits.cpus;
    cfg.require_limits = limits.require;
    cfg.timeout = Some(timeout);
    cfg.init = true;
    cfg.stdout = Stdio::Append(log.clone());
    cfg.stderr = Stdio::Append(log);
    cfg.env = vec![env("PATH", SANDBOX_PATH), env("LANG", "C.UTF-8")];
    // An image's own environment (its config's Env) comes first.
    for (k, v) in image_env {
        set_env(&mut cfg, k, v);
    }
    cfg
}

pub fn env(k: &str, v: &str) -> EnvVar {
    EnvVar {
        key: k.to_owned(),
        value: v.to_owned(),
    }
}

/// Sets `k` in `cfg`'s environment, replacing an earlier value.
pub fn set_env(cfg: &mut SandboxConfig, k: &str, v: &str) {
    cfg.env.retain(|e| e.key != k);
    cfg.env.push(env(k, v));
}

pub fn bind(src: impl Into<PathBuf>, dst: &str, readonly: bool) -> BindMount {
    BindMount {
        src: src.into(),
        dst: PathBuf::from(dst),
        readonly,
    }
}

/// The host ids that files written by `user` inside a sandbox belong to,
/// when they differ from cbrun's own: writable folders handed to the
/// sandbox must be theirs. Only real root maps the sandbox elsewhere; a
/// rootless sandbox's ids all land on the caller.
pub fn sandbox_owner(host: &HostView, user: Option<Identity>) -> Option<Ownership> {
    if host.euid != 0 {
        return None;
    }
    let plan = idmap::plan(&host.mapping, user);
    let (u, g) = if plan.nested.is_some() {
        (0, 0)
    } else {
        plan.inside()
    };
    let uid = plan.host_uid(u)?;
    let gid = plan.host_gid(g)?;
    (uid != 0).then_some(Ownership { uid, gid })
}

/// Host folders that a `--rootfs host` sandbox would show through its
/// read-only system binds (a case or trial folder under `/opt`, say) get an
/// empty folder bound over them, so they are never visible inside.
pub fn hide_host_paths(
    cfg: &mut SandboxConfig,
    paths: &[&std::path::Path],
    empty: &std::path::Path,
) -> std::io::Result<()> {
    if !matches!(cfg.rootfs, RootfsSource::Host) {
        return Ok(());
    }
    for p in paths {
        let Ok(abs) = std::fs::canonicalize(p) else {
            continue;
        };
        let top = abs
            .components()
            .nth(1)
            .and_then(|c| c.as_os_str().to_str().map(str::to_owned));
        if top.is_some_and(|t| HOST_SYSTEM_DIRS.contains(&t.as_str())) {
            std::fs::create_dir_all(empty)?;
            cfg.binds.push(BindMount {
                src: empty.to_path_buf(),
                dst: abs,
                readonly: true,
            });
        }
    }
    Ok(())
}
