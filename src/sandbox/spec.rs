//! The OCI runtime spec for one sandbox, built in code from a
//! `SandboxConfig`. Only what we ask for is in it: no defaults inherited
//! from elsewhere.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use libcontainer::oci_spec::runtime::{
    Capability, LinuxBuilder, LinuxCapabilitiesBuilder, LinuxIdMapping, LinuxIdMappingBuilder,
    LinuxNamespaceBuilder, LinuxNamespaceType, Mount, MountBuilder, PosixRlimitBuilder,
    PosixRlimitType, ProcessBuilder, RootBuilder, Spec, SpecBuilder, UserBuilder,
};

use super::config::{self, NetworkPolicy, SandboxConfig};
use super::idmap::IdPlan;
use super::rootfs::PreparedRoot;

#[derive(Debug, thiserror::Error)]
#[error("building the runtime spec: {0}")]
pub struct SpecError(String);

fn e<E: std::fmt::Display>(err: E) -> SpecError {
    SpecError(err.to_string())
}

/// /proc entries hidden from the sandbox when the host has them (each
/// costs a bind mount per start, so only what tells more than `uname`):
///
/// - `cmdline`, `bootconfig`: the host's boot arguments, which may carry
///   credentials, storage layout and the hypervisor's settings;
/// - `config.gz`: the kernel's exact build configuration, a map of the
///   reachable subsystems for whoever looks for a kernel bug;
/// - `kallsyms`, `modules`: addresses already read as zeros without
///   CAP_SYSLOG, but the symbol and module lists still name the loaded
///   drivers (the host's hardware, its hypervisor) and the build;
/// - the rest: keys, timers and scheduler internals of the whole host.
///
/// Left visible, with their reason: `iomem`/`ioports` (addresses read as
/// zeros without CAP_SYS_ADMIN; the names say no more than `cpuinfo`);
/// `interrupts`, `softirqs`, `loadavg`, `stat` (timing side channels,
/// which cbrun does not claim to close, and tools read them); `kcore`,
/// `kmsg`, `vmallocinfo`, `slabinfo`, `kpage*` are host-root-only and
/// unreadable inside anyway.
const MASKED_PATHS: &[&str] = &[
    "/proc/cmdline",
    "/proc/bootconfig",
    "/proc/config.gz",
    "/proc/kallsyms",
    "/proc/modules",
    "/proc/keys",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/acpi",
    "/proc/scsi",
    "/proc/latency_stats",
];

pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Inputs the spec needs beyond the user's config.
pub struct SpecInputs<'a> {
    pub config: &'a SandboxConfig,
    pub root: &'a PreparedRoot,
    pub ids: &'a IdPlan,
    /// Cgroup path for libcontainer's (scratch) view; cbrun applies the
    /// real limits itself.
    pub cgroup: Option<PathBuf>,
    /// rlimits actually applied (clamped to what we may set).
    pub nofile: u64,
    pub nproc: u64,
}

pub fn build(inp: &SpecInputs) -> Result<Spec, SpecError> {
    let cfg = inp.config;
    let (uid, _) = inp.ids.inside();
    let (spec_uid, spec_gid) = inp.ids.spec_user();
    let mut env: Vec<String> = vec![
        format!("PATH={DEFAULT_PATH}"),
        format!("HOME={}", if uid == 0 { "/root" } else { "/tmp" }),
    ];
    for v in &cfg.env {
        env.retain(|x| !x.starts_with(&format!("{}=", v.key)));
        env.push(format!("{}={}", v.key, v.value));
    }

    // Kept only for the executor's last steps (bring `lo` up; map the
    // sandbox's root into a nested user namespace for `--user`, which the
    // kernel allows only to a process that held CAP_SETFCAP); it empties
    // every set before exec.
    let mut kept: HashSet<Capability> = [
        Capability::NetAdmin,
        Capability::Setpcap,
        Capability::Setfcap,
    ]
    .into();
    // What the command itself keeps (an image build's root); the executor
    // drops the rest.
    kept.extend(cfg.caps.iter().map(oci_capability));
    let caps = LinuxCapabilitiesBuilder::default()
        .bounding(kept.clone())
        .effective(kept.clone())
        .permitted(kept)
        .inheritable(HashSet::new())
        .ambient(HashSet::new())
        .build()
        .map_err(e)?;

    let rl = |typ, v: u64| {
        PosixRlimitBuilder::default()
            .typ(typ)
            .soft(v)
            .hard(v)
            .build()
            .map_err(e)
    };
    let rlimits = vec![
        rl(PosixRlimitType::RlimitNofile, inp.nofile)?,
        rl(PosixRlimitType::RlimitNproc, inp.nproc)?,
        rl(PosixRlimitType::RlimitCore, 0)?,
    ];

    let process = ProcessBuilder::default()
        .terminal(false)
        .user(
            UserBuilder::default()
                .uid(spec_uid)
                .gid(spec_gid)
                .build()
                .map_err(e)?,
        )
        .args(cfg.command.clone())
        .env(env)
        .cwd(cfg.workdir.clone())
        .capabilities(caps)
        .rlimits(rlimits)
        .no_new_privileges(true)
        .build()
        .map_err(e)?;

    let mut mounts = vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"])?,
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        )?,
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
            ],
        )?,
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        )?,
        mount("/tmp", "tmpfs", "tmpfs", &["nosuid", "nodev", "mode=1777"])?,
    ];
    // No /sys at all: nothing in a benchmark sandbox needs it, and a fresh
    // sysfs would cost a mount on every start.
    for (host, inside) in &inp.root.system_binds {
        mounts.push(bind(host, inside, true)?);
    }
    for b in &inp.root.binds {
        mounts.push(bind(&b.src, &b.dst, b.readonly)?);
    }

    let mut namespaces = Vec::new();
    let mut ns_types = vec![
        LinuxNamespaceType::User,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Cgroup,
    ];
    if cfg.network == NetworkPolicy::None {
        ns_types.push(LinuxNamespaceType::Network);
    }
    for t in ns_types {
        namespaces.push(LinuxNamespaceBuilder::default().typ(t).build().map_err(e)?);
    }

    let mut linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .uid_mappings(mappings(&inp.ids.uid_map)?)
        .gid_mappings(mappings(&inp.ids.gid_map)?)
        // Host information /proc still shows inside a user namespace.
        // Paths the kernel already denies there (kcore, sysrq-trigger) or
        // that this kernel lacks cost a mount each for nothing.
        .masked_paths(
            MASKED_PATHS
                .iter()
                .filter(|p| Path::new(p).exists())
                .map(|p| p.to_string())
                .collect::<Vec<_>>(),
        )
        .readonly_paths(vec!["/proc/sys".to_string()]);
    if let Some(cg) = &inp.cgroup {
        linux = linux.cgroups_path(cg.clone());
    }
    let mut linux = linux.build().map_err(e)?;
    // No resources for libcontainer: its defaults carry device rules that
    // would demand a devices cgroup. cbrun applies limits itself.
    linux.set_resources(None);
    // No device nodes beyond libcontainer's defaults (null, zero, ...).
    linux.set_devices(None);

    SpecBuilder::default()
        .version("1.0.2")
        .root(
            RootBuilder::default()
                .path(inp.root.path.clone())
                .readonly(!inp.root.writable)
                .build()
                .map_err(e)?,
        )
        .hostname(cfg.hostname.clone())
        .process(process)
        .mounts(mounts)
        .linux(linux)
        .build()
        .map_err(e)
}

/// The runtime spec's name for a capability the command may keep.
pub fn oci_capability(c: config::Capability) -> Capability {
    use config::Capability as C;
    match c {
        C::CapChown => Capability::Chown,
        C::CapDacOverride => Capability::DacOverride,
        C::CapFowner => Capability::Fowner,
        C::CapFsetid => Capability::Fsetid,
        C::CapKill => Capability::Kill,
        C::CapSetuid => Capability::Setuid,
        C::CapSetgid => Capability::Setgid,
    }
}

fn mount(dst: &str, typ: &str, src: &str, opts: &[&str]) -> Result<Mount, SpecError> {
    MountBuilder::default()
        .destination(dst)
        .typ(typ)
        .source(src)
        .options(opts.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .build()
        .map_err(e)
}

fn bind(src: &std::path::Path, dst: &std::path::Path, ro: bool) -> Result<Mount, SpecError> {
    let mut opts = vec!["bind".to_owned(), "nosuid".to_owned(), "nodev".to_owned()];
    opts.push(if ro { "ro" } else { "rw" }.to_owned());
    MountBuilder::default()
        .destination(dst)
        .typ("bind")
        .source(src)
        .options(opts)
        .build()
        .map_err(e)
}

fn mappings(m: &[(u32, u32, u32)]) -> Result<Vec<LinuxIdMapping>, SpecError> {
    m.iter()
        .map(|(inside, host, len)| {
            LinuxIdMappingBuilder::default()
                .container_id(*inside)
                .host_id(*host)
                .size(*len)
                .build()
                .map_err(e)
        })
        .collect()
}
