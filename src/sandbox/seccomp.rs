//! Seccomp profile applied to sandboxed processes.
//!
//! The default profile is a deny-list: everything is allowed except syscalls
//! that reach kernel attack surface a coding agent never needs (keyrings, BPF,
//! modules, mounts, namespaces, io_uring, ptrace and the other calls that
//! reach into another process's descriptors or memory, ...). Denied calls
//! fail with `EPERM` (`clone3` with `ENOSYS`) rather than killing the
//! process, so tools that probe for features degrade gracefully.
//!
//! Sockets are the one allow-list: `socket` and `socketpair` work only for
//! the families a network namespace confines (unix, IPv4, IPv6, netlink,
//! packet). The rest either ignore network namespaces (vsock reaches the
//! hypervisor's services from inside `--net none`) or are rarely used
//! kernel surface (Bluetooth, AF_ALG, AF_KEY, TIPC, RDS, ...); they fail with
//! `EAFNOSUPPORT`, what a kernel without them answers, so programs fall back.
//!
//! Compilation happens in the parent (it allocates); [`SeccompProgram::install`]
//! runs in the forked child right before `execve` and does not allocate.
//!
//! Layout of the single BPF program we build:
//!
//! ```text
//! hand-built prologue  arch != native        -> KILL_PROCESS
//!                      x32 nr (x86_64 only)  -> ERRNO(EPERM)   (nr >= 0x40000000 except -1)
//!                      clone3                -> ERRNO(ENOSYS)
//! hand-built deny      one compare per unconditional deny -> shared ERRNO(EPERM)
//! hand-built sockets   socket, socketpair: family allowed -> ALLOW
//!                                          other family   -> ERRNO(EAFNOSUPPORT)
//! seccompiler body     arch != native        -> KILL_PROCESS (its own check, now redundant)
//!                      argument rules        -> ERRNO(EPERM)   (clone, personality, ioctl)
//!                      everything else       -> ALLOW
//! ```
//!
//! Classic BPF only jumps forward, relative to the next instruction, so
//! prepending the hand-built parts leaves seccompiler's jump offsets valid.
//! Every syscall walks the prologue and the deny chain, so they are kept to
//! one instruction per check; the socket block costs other syscalls two.

#![cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code, unused_imports)
)]

use std::collections::BTreeMap;
use std::fmt;

use seccompiler::{
    BackendError, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Which seccomp profile a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SeccompMode {
    /// The deny-list profile built by [`SeccompProgram::default_profile`].
    Default,
    /// No filter at all.
    Off,
}

/// Errors from building or installing a seccomp program.
///
/// Display messages carry the underlying cause, so `source()` is not used
/// (avoids the cause being printed twice in error chains).
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// The host architecture has no profile (only x86_64 and aarch64 do).
    #[error("seccomp: no profile for target architecture {0}")]
    UnsupportedArch(&'static str),
    /// seccompiler rejected a condition or rule while building the profile.
    #[error("seccomp: building rule for {syscall}: {error}")]
    Rule {
        syscall: &'static str,
        error: BackendError,
    },
    /// seccompiler failed to build or translate the whole filter.
    #[error("seccomp: {step}: {error}")]
    Compile {
        step: &'static str,
        error: BackendError,
    },
    /// A syscall number that does not fit the 32 bits seccomp compares.
    #[error("seccomp: syscall {syscall} has no 32-bit number")]
    BadNumber { syscall: &'static str },
    /// More unconditional denies than one BPF jump (8-bit offset) spans.
    #[error("seccomp: {0} unconditional denies; one jump spans at most 255")]
    DenyListTooLong(usize),
    /// A filter exceeds the kernel's BPF_MAXINSNS.
    #[error("seccomp: filter {index} has {len} BPF instructions, kernel limit is {max}")]
    TooLong {
        index: usize,
        len: usize,
        max: usize,
    },
    /// Querying no_new_privs failed (raw errno).
    #[error("seccomp: install: prctl(PR_GET_NO_NEW_PRIVS) failed: {}", os_error(.errno))]
    NoNewPrivsQuery { errno: i32 },
    /// Precondition of [`SeccompProgram::install`] not met.
    #[error("seccomp: install: no_new_privs is not set; call prctl(PR_SET_NO_NEW_PRIVS, 1) first")]
    NoNewPrivsNotSet,
    /// The program holds no instructions.
    #[error("seccomp: install: refusing to install an empty program")]
    Empty,
    /// The seccomp(2) call itself failed (raw errno; filter index is 0-based).
    #[error(
        "seccomp: install: seccomp(SECCOMP_SET_MODE_FILTER) for filter {index} of {count} failed: {}",
        os_error(.errno)
    )]
    Install {
        index: usize,
        count: usize,
        errno: i32,
    },
}

fn os_error(errno: &i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(*errno)
}

/// A compiled, ready-to-install program (one or more BPF filters).
#[derive(Clone)]
pub struct SeccompProgram {
    /// Installed in order. With several filters the kernel runs all of them
    /// and the most severe action wins (KILL > TRAP > ERRNO > ... > ALLOW).
    filters: Vec<Vec<libc::sock_filter>>,
    rules: Vec<String>,
}

impl fmt::Debug for SeccompProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lens: Vec<usize> = self.filters.iter().map(Vec::len).collect();
        f.debug_struct("SeccompProgram")
            .field("filter_lens", &lens)
            .field("rules", &self.rules)
            .finish()
    }
}

// Classic BPF opcodes (linux/bpf_common.h); libc exposes them as u32, but
// sock_filter.code is u16.
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
#[cfg(target_arch = "x86_64")]
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_RET_K: u16 = 0x06;
const BPF_JMP_JA: u16 = 0x05; // BPF_JMP | BPF_JA

// Offsets into struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;

/// Kernel limit on instructions per filter (BPF_MAXINSNS).
const BPF_MAXINSNS: usize = 4096;

/// `__X32_SYSCALL_BIT`: x32-ABI syscalls arrive with AUDIT_ARCH_X86_64 and
/// this bit set in nr. seccompiler compares exact x86_64 numbers, so an
/// x32 `unshare` (0x40000000 | 272) would slip past its rules.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Low 32 bits of `args[0]`. seccomp_data's args are native-endian u64s at
/// offset 16; the socket family is an `int`, so the kernel looks at those
/// 32 bits only (and so must the filter, or high bits would dodge it).
#[cfg(target_endian = "little")]
const OFF_ARG0_LO: u32 = 16;

/// Socket families `socket`/`socketpair` may create: each lives in a
/// network namespace (unix: abstract names are per netns, paths per mount
/// namespace; netlink sockets talk to their own netns; packet sockets also
/// need CAP_NET_RAW, which no sandbox process holds). Everything else gets
/// EAFNOSUPPORT.
const SOCKET_FAMILIES: &[(&str, u32)] = &[
    ("AF_UNIX", libc::AF_UNIX as u32),
    ("AF_INET", libc::AF_INET as u32),
    ("AF_INET6", libc::AF_INET6 as u32),
    ("AF_NETLINK", libc::AF_NETLINK as u32),
    ("AF_PACKET", libc::AF_PACKET as u32),
];

const CLONE_NS_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWTIME", 0x0000_0080),
    ("CLONE_NEWNS", 0x0002_0000),
    ("CLONE_NEWCGROUP", 0x0200_0000),
    ("CLONE_NEWUTS", 0x0400_0000),
    ("CLONE_NEWIPC", 0x0800_0000),
    ("CLONE_NEWUSER", 0x1000_0000),
    ("CLONE_NEWPID", 0x2000_0000),
    ("CLONE_NEWNET", 0x4000_0000),
];

/// personality() values we let through: PER_LINUX, PER_LINUX32, UNAME26,
/// PER_LINUX32|UNAME26 and 0xffffffff (query only). Everything else, e.g.
/// ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC, weakens exploit mitigations.
const PERSONALITY_ALLOWED: &[u64] = &[0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];

/// Terminal ioctls that inject input / act on the console (sandbox escape via
/// a shared tty).
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;

/// open_tree_attr (Linux 6.15): same number on x86_64 and aarch64, not yet
/// in the libc crate. It can clone mount trees like open_tree.
const SYS_OPEN_TREE_ATTR: i64 = 467;

#[cfg(target_arch = "x86_64")]
mod arch {
    pub const NAME: &str = "x86_64";
    pub const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
    /// AUDIT_ARCH_X86_64 = EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
    pub const AUDIT: u32 = 0xC000_003E;
    /// Syscalls that only exist on this arch.
    pub const EXTRA_DENY: &[(&str, i64)] = &[
        // Raw port I/O.
        ("iopl", libc::SYS_iopl),
        ("ioperm", libc::SYS_ioperm),
    ];
}

#[cfg(target_arch = "aarch64")]
mod arch {
    pub const NAME: &str = "aarch64";
    pub const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::aarch64;
    /// AUDIT_ARCH_AARCH64 = EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
    pub const AUDIT: u32 = 0xC000_00B7;
    pub const EXTRA_DENY: &[(&str, i64)] = &[];
}

/// Syscalls denied regardless of arguments (EPERM).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn deny_always() -> Vec<(&'static str, i64)> {
    let mut v: Vec<(&'static str, i64)> = vec![
        // Kernel keyrings: not namespaced, big attack surface.
        ("add_key", libc::SYS_add_key),
        ("request_key", libc::SYS_request_key),
        ("keyctl", libc::SYS_keyctl),
        // eBPF, perf: kernel attack surface / info leaks.
        ("bpf", libc::SYS_bpf),
        ("perf_event_open", libc::SYS_perf_event_open),
        // Replacing or extending the kernel.
        ("kexec_load", libc::SYS_kexec_load),
        ("kexec_file_load", libc::SYS_kexec_file_load),
        ("init_module", libc::SYS_init_module),
        ("finit_module", libc::SYS_finit_module),
        ("delete_module", libc::SYS_delete_module),
        // File handles bypass path-based confinement (the "shocker" escape).
        ("open_by_handle_at", libc::SYS_open_by_handle_at),
        ("name_to_handle_at", libc::SYS_name_to_handle_at),
        // Mount table changes: the sandbox's filesystem view is fixed.
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("fsopen", libc::SYS_fsopen),
        ("fsconfig", libc::SYS_fsconfig),
        ("fsmount", libc::SYS_fsmount),
        ("fspick", libc::SYS_fspick),
        ("open_tree", libc::SYS_open_tree),
        ("open_tree_attr", SYS_OPEN_TREE_ATTR),
        ("move_mount", libc::SYS_move_mount),
        ("mount_setattr", libc::SYS_mount_setattr),
        ("pivot_root", libc::SYS_pivot_root),
        ("chroot", libc::SYS_chroot),
        // New namespaces (esp. user namespaces) unlock lots of kernel code.
        ("unshare", libc::SYS_unshare),
        ("setns", libc::SYS_setns),
        // userfaultfd and io_uring: frequent exploit primitives.
        ("userfaultfd", libc::SYS_userfaultfd),
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("io_uring_enter", libc::SYS_io_uring_enter),
        ("io_uring_register", libc::SYS_io_uring_register),
        // Reaching into another process: its memory, its descriptors, its
        // kernel objects. Inside one sandbox every process is the same
        // principal, but the `--init` pid 1 is a fork of cbrun (it is made
        // non-dumpable, which already refuses these; this is the second
        // wall), and none of these has a use in a build or a test run.
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev),
        // Copies a descriptor out of another process: how a sandbox once
        // took cbrun's cgroup and state-file descriptors from pid 1.
        ("pidfd_getfd", libc::SYS_pidfd_getfd),
        // Advice on / reaping of another process's memory.
        ("process_madvise", libc::SYS_process_madvise),
        ("process_mrelease", libc::SYS_process_mrelease),
        // Compares two processes' files, memory maps and other kernel
        // objects: an oracle on another process's descriptor table (and,
        // on old kernels, on kernel pointer order); only checkpointing
        // tools use it.
        ("kcmp", libc::SYS_kcmp),
        // Kept, on purpose: pidfd_open, pidfd_send_signal, kill and the
        // other pid-taking calls are confined by the pid namespace like
        // kill(2); move_pages and migrate_pages only move another
        // process's pages between NUMA nodes (same ptrace-read check) and
        // hwloc/libnuma call them on the caller itself; get_robust_list
        // returns a pointer, not memory.
        // Host administration.
        ("swapon", libc::SYS_swapon),
        ("swapoff", libc::SYS_swapoff),
        ("reboot", libc::SYS_reboot),
        ("acct", libc::SYS_acct),
        ("syslog", libc::SYS_syslog),
        ("quotactl", libc::SYS_quotactl),
        ("quotactl_fd", libc::SYS_quotactl_fd),
        // Defence in depth: obsolete or host-global, never needed by builds.
        ("lookup_dcookie", libc::SYS_lookup_dcookie),
        ("settimeofday", libc::SYS_settimeofday),
        ("clock_settime", libc::SYS_clock_settime),
        ("clock_adjtime", libc::SYS_clock_adjtime),
        ("adjtimex", libc::SYS_adjtimex),
        ("vhangup", libc::SYS_vhangup),
        ("nfsservctl", libc::SYS_nfsservctl),
    ];
    v.extend_from_slice(arch::EXTRA_DENY);
    v
}

fn cond(
    syscall: &'static str,
    arg: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, SeccompError> {
    // Dword: clone flags, personality and ioctl cmd are all truncated to 32
    // bits by the kernel, so upper bits must not let a call dodge the rule.
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|error| SeccompError::Rule { syscall, error })
}

fn rule(
    syscall: &'static str,
    conditions: Vec<SeccompCondition>,
) -> Result<SeccompRule, SeccompError> {
    SeccompRule::new(conditions).map_err(|error| SeccompError::Rule { syscall, error })
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn ret_errno(errno: i32) -> u32 {
    // errno values are small positive numbers; SECCOMP_RET_DATA keeps 16 bits.
    libc::SECCOMP_RET_ERRNO | (errno.unsigned_abs() & libc::SECCOMP_RET_DATA)
}

/// Hand-built instructions placed before seccompiler's program.
fn prologue(audit_arch: u32) -> Vec<libc::sock_filter> {
    let mut prog = vec![
        // A foreign arch (i386 via int 0x80 on x86_64, arm32 compat on
        // aarch64) has a different syscall table, so our numbers mean nothing
        // there: kill, exactly as seccompiler's own arch check does.
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JMP_JEQ_K, audit_arch, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFF_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    prog.extend([
        // Unsigned compare, so negative nr values land here too; nr == -1
        // is let through (the kernel answers ENOSYS; tracers use it to skip
        // a syscall).
        jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 2),
        jump(BPF_JMP_JEQ_K, u32::MAX, 1, 0),
        stmt(BPF_RET_K, ret_errno(libc::EPERM)),
    ]);
    // clone3 passes its flags in memory, which seccomp cannot read, so the
    // namespace check used for clone is impossible. ENOSYS makes glibc and
    // other runtimes fall back to clone(), where the flags are checked.
    let clone3 = u32::try_from(libc::SYS_clone3).unwrap_or(u32::MAX);
    prog.extend([
        jump(BPF_JMP_JEQ_K, clone3, 0, 1),
        stmt(BPF_RET_K, ret_errno(libc::ENOSYS)),
    ]);
    prog
}

/// The syscalls denied whatever their arguments, as one compare each with a
/// shared `ret`: seccompiler spends three instructions per syscall, and the
/// kernel's cost to install a filter (checking, converting and JIT-compiling
/// it, on every sandbox start) and to run it grows with its length.
/// Expects the syscall number in the accumulator (the prologue leaves it
/// there).
fn deny_chain(deny: &[(&'static str, i64)]) -> Result<Vec<libc::sock_filter>, SeccompError> {
    let count = deny.len();
    let mut prog = Vec::with_capacity(count + 2);
    for (i, (name, nr)) in deny.iter().enumerate() {
        let nr = u32::try_from(*nr).map_err(|_| SeccompError::BadNumber { syscall: name })?;
        // From compare i, the shared ret is count - i instructions ahead.
        let to_ret = u8::try_from(count - i).map_err(|_| SeccompError::DenyListTooLong(count))?;
        prog.push(jump(BPF_JMP_JEQ_K, nr, to_ret, 0));
    }
    prog.push(stmt(BPF_JMP_JA, 1));
    prog.push(stmt(BPF_RET_K, ret_errno(libc::EPERM)));
    Ok(prog)
}

/// `socket` and `socketpair` with an allowed family return ALLOW at once
/// (they have no other rule); any other family returns EAFNOSUPPORT. Other
/// syscalls pass through after two compares with the syscall number still
/// in the accumulator (seccompiler's body reloads what it needs anyway).
fn socket_block() -> Result<Vec<libc::sock_filter>, SeccompError> {
    let nr = |name: &'static str, v: i64| {
        u32::try_from(v).map_err(|_| SeccompError::BadNumber { syscall: name })
    };
    let families = SOCKET_FAMILIES.len();
    // Instructions after the two syscall compares: the load, one compare
    // per family, two returns.
    let rest = u8::try_from(families + 3).map_err(|_| SeccompError::DenyListTooLong(families))?;
    let mut prog = vec![
        jump(BPF_JMP_JEQ_K, nr("socket", libc::SYS_socket)?, 1, 0),
        jump(
            BPF_JMP_JEQ_K,
            nr("socketpair", libc::SYS_socketpair)?,
            0,
            rest,
        ),
        stmt(BPF_LD_W_ABS, OFF_ARG0_LO),
    ];
    for (i, (_, family)) in SOCKET_FAMILIES.iter().enumerate() {
        // From compare i, the ALLOW is families - i instructions ahead.
        let to_allow =
            u8::try_from(families - i).map_err(|_| SeccompError::DenyListTooLong(families))?;
        prog.push(jump(BPF_JMP_JEQ_K, *family, to_allow, 0));
    }
    prog.push(stmt(BPF_RET_K, ret_errno(libc::EAFNOSUPPORT)));
    prog.push(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW));
    Ok(prog)
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn native_arch() -> Result<(TargetArch, u32, &'static str), SeccompError> {
    Ok((arch::TARGET, arch::AUDIT, arch::NAME))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn native_arch() -> Result<(TargetArch, u32, &'static str), SeccompError> {
    Err(SeccompError::UnsupportedArch(std::env::consts::ARCH))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn deny_always() -> Vec<(&'static str, i64)> {
    Vec::new()
}

fn hex_list(values: &[u64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:#x}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl SeccompProgram {
    /// Compile the default profile for the host arch (x86_64 or aarch64).
    pub fn default_profile() -> Result<Self, SeccompError> {
        let (target, audit_arch, arch_name) = native_arch()?;
        let eperm = u32::try_from(libc::EPERM).unwrap_or(1);

        let mut describe = vec![format!("arch!={arch_name}: KILL_PROCESS")];
        if cfg!(target_arch = "x86_64") {
            describe.push("x32-abi(nr>=0x40000000): EPERM".to_string());
        }
        describe.push("clone3: ENOSYS".to_string());

        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        let deny = deny_always();
        for (name, _) in &deny {
            describe.push(format!("{name}: EPERM"));
        }
        let families: Vec<&str> = SOCKET_FAMILIES.iter().map(|(n, _)| *n).collect();
        describe.push(format!(
            "socket,socketpair(family not in {{{}}}): EAFNOSUPPORT",
            families.join(",")
        ));

        // clone: one rule per namespace flag; rules of a syscall are OR-ed,
        // so any single flag triggers the deny. (CLONE_NEWTIME, 0x80, lies in
        // clone()'s exit-signal byte, so clone() cannot request a time
        // namespace; the rule only refuses exit signals >= 128, which are not
        // real signals. Kept so the clone rule names the full CLONE_NEW* set.)
        let mut clone_rules = Vec::with_capacity(CLONE_NS_FLAGS.len());
        for &(_, flag) in CLONE_NS_FLAGS {
            let c = cond("clone", 0, SeccompCmpOp::MaskedEq(flag), flag)?;
            clone_rules.push(rule("clone", vec![c])?);
        }
        rules.insert(libc::SYS_clone, clone_rules);
        let flag_names: Vec<&str> = CLONE_NS_FLAGS.iter().map(|(n, _)| *n).collect();
        describe.push(format!("clone(flags&({})): EPERM", flag_names.join("|")));

        // personality: conditions of one rule are AND-ed, so "not equal to
        // every allowed value" = deny.
        let mut persona = Vec::with_capacity(PERSONALITY_ALLOWED.len());
        for &v in PERSONALITY_ALLOWED {
            persona.push(cond("personality", 0, SeccompCmpOp::Ne, v)?);
        }
        rules.insert(libc::SYS_personality, vec![rule("personality", persona)?]);
        describe.push(format!(
            "personality(persona not in {{{}}}): EPERM",
            hex_list(PERSONALITY_ALLOWED)
        ));

        // ioctl: only the two dangerous tty requests.
        let ioctl_rules = vec![
            rule("ioctl", vec![cond("ioctl", 1, SeccompCmpOp::Eq, TIOCSTI)?])?,
            rule(
                "ioctl",
                vec![cond("ioctl", 1, SeccompCmpOp::Eq, TIOCLINUX)?],
            )?,
        ];
        rules.insert(libc::SYS_ioctl, ioctl_rules);
        describe.push("ioctl(cmd=TIOCSTI|TIOCLINUX): EPERM".to_string());

        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(eperm),
            target,
        )
        .map_err(|error| SeccompError::Compile {
            step: "building seccompiler filter",
            error,
        })?;
        let body: seccompiler::BpfProgram =
            filter.try_into().map_err(|error| SeccompError::Compile {
                step: "translating filter to BPF",
                error,
            })?;

        let mut program = prologue(audit_arch);
        program.extend(deny_chain(&deny)?);
        program.extend(socket_block()?);
        program.extend(body.into_iter().map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        }));
        if program.len() > BPF_MAXINSNS {
            return Err(SeccompError::TooLong {
                index: 0,
                len: program.len(),
                max: BPF_MAXINSNS,
            });
        }

        Ok(SeccompProgram {
            filters: vec![program],
            rules: describe,
        })
    }

    /// Install the program in the calling thread (and, through inheritance,
    /// every process it later forks or execs).
    ///
    /// Preconditions:
    /// - `prctl(PR_SET_NO_NEW_PRIVS, 1)` has already been called on this
    ///   thread; this is checked and [`SeccompError::NoNewPrivsNotSet`] is
    ///   returned otherwise (without it the kernel only accepts filters from
    ///   CAP_SYS_ADMIN holders, and a setuid exec could shed them).
    /// - The caller is single-threaded (a freshly forked child): the filter
    ///   is not synchronised to other threads (no TSYNC).
    ///
    /// Meant to run between fork and execve: it performs no allocation and
    /// only calls `prctl` and `seccomp`; errors carry a raw errno.
    pub fn install(&self) -> Result<(), SeccompError> {
        match nix::sys::prctl::get_no_new_privs() {
            Err(e) => return Err(SeccompError::NoNewPrivsQuery { errno: e as i32 }),
            Ok(false) => return Err(SeccompError::NoNewPrivsNotSet),
            Ok(true) => {}
        }
        if self.filters.is_empty() {
            return Err(SeccompError::Empty);
        }
        let count = self.filters.len();
        for (index, filter) in self.filters.iter().enumerate() {
            let len = u16::try_from(filter.len()).map_err(|_| SeccompError::TooLong {
                index,
                len: filter.len(),
                max: BPF_MAXINSNS,
            })?;
            if len == 0 {
                return Err(SeccompError::Empty);
            }
            let rc = install_raw(filter, len);
            if rc != 0 {
                return Err(SeccompError::Install {
                    index,
                    count,
                    errno: last_errno(),
                });
            }
        }
        Ok(())
    }

    /// Names of denied syscalls / rules, for the run's outcome record.
    pub fn describe(&self) -> Vec<String> {
        self.rules.clone()
    }
}

/// See [`crate::sys::seccomp::install_filter`].
pub(crate) fn install_raw(filter: &[libc::sock_filter], len: u16) -> libc::c_long {
    crate::sys::seccomp::install_filter(filter, len)
}

fn last_errno() -> i32 {
    // Reads errno; no allocation.
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::*;

    const RET_ALLOW: u32 = 0x7fff_0000;

    /// Minimal classic-BPF interpreter covering the opcodes seccompiler and
    /// our prologue emit, run against a synthetic `struct seccomp_data`.
    fn eval(prog: &[libc::sock_filter], nr: i64, arch: u32, args: [u64; 6]) -> u32 {
        let mut data = Vec::with_capacity(64);
        data.extend_from_slice(&(nr as i32).to_ne_bytes());
        data.extend_from_slice(&arch.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for a in args {
            data.extend_from_slice(&a.to_ne_bytes());
        }
        let mut acc: u32 = 0;
        let mut pc = 0usize;
        loop {
            let insn = prog[pc];
            pc += 1;
            match insn.code {
                0x20 => {
                    let offset = insn.k as usize;
                    acc = u32::from_ne_bytes(data[offset..offset + 4].try_into().unwrap());
                }
                0x54 => acc &= insn.k,         // ALU AND K
                0x05 => pc += insn.k as usize, // JA
                0x15 | 0x25 | 0x35 | 0x45 => {
                    let taken = match insn.code {
                        0x15 => acc == insn.k,
                        0x25 => acc > insn.k,
                        0x35 => acc >= insn.k,
                        _ => acc & insn.k != 0,
                    };
                    pc += if taken { insn.jt } else { insn.jf } as usize;
                }
                0x06 => return insn.k,
                other => panic!("opcode {other:#x} not handled by test interpreter"),
            }
        }
    }

    fn prog() -> Vec<libc::sock_filter> {
        let p = SeccompProgram::default_profile().expect("profile compiles");
        assert_eq!(p.filters.len(), 1);
        p.filters[0].clone()
    }

    fn native(nr: i64, args: [u64; 6]) -> u32 {
        eval(&prog(), nr, arch::AUDIT, args)
    }

    #[test]
    fn compiles_and_fits() {
        let p = SeccompProgram::default_profile().unwrap();
        assert!(!p.filters[0].is_empty());
        assert!(p.filters[0].len() <= BPF_MAXINSNS);
        assert!(format!("{p:?}").contains("SeccompProgram"));
    }

    #[test]
    fn describe_lists_rules() {
        let d = SeccompProgram::default_profile().unwrap().describe();
        #[cfg(target_arch = "x86_64")]
        assert!(d.iter().any(|r| r.starts_with("x32-abi")), "{d:?}");
        for needle in [
            "clone3: ENOSYS",
            "keyctl: EPERM",
            "mount: EPERM",
            "unshare: EPERM",
        ] {
            assert!(d.iter().any(|r| r == needle), "missing {needle}: {d:?}");
        }
        assert!(d.iter().any(|r| r.starts_with("clone(flags&")));
        assert!(d.iter().any(|r| r.starts_with("personality(")));
        assert!(d.iter().any(|r| r.starts_with("ioctl(")));
        for needle in [
            "kcmp: EPERM",
            "pidfd_getfd: EPERM",
            "process_madvise: EPERM",
        ] {
            assert!(d.iter().any(|r| r == needle), "missing {needle}: {d:?}");
        }
        assert!(
            d.iter().any(|r| r
                == "socket,socketpair(family not in {AF_UNIX,AF_INET,AF_INET6,AF_NETLINK,AF_PACKET}): EAFNOSUPPORT"),
            "{d:?}"
        );
    }

    #[test]
    fn no_duplicate_syscalls() {
        let mut nrs: Vec<i64> = deny_always().into_iter().map(|(_, nr)| nr).collect();
        nrs.extend([
            libc::SYS_clone,
            libc::SYS_personality,
            libc::SYS_ioctl,
            libc::SYS_clone3,
        ]);
        let n = nrs.len();
        nrs.sort_unstable();
        nrs.dedup();
        assert_eq!(nrs.len(), n);
    }

    #[test]
    fn unconditional_denies() {
        let eperm = ret_errno(libc::EPERM);
        for (name, nr) in deny_always() {
            assert_eq!(native(nr, [0; 6]), eperm, "{name}");
        }
        assert_eq!(native(libc::SYS_clone3, [0; 6]), ret_errno(libc::ENOSYS));
    }

    #[test]
    fn ordinary_calls_allowed() {
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_getpid,
            libc::SYS_execve,
            libc::SYS_pidfd_open,
            libc::SYS_pidfd_send_signal,
            libc::SYS_move_pages,
            libc::SYS_seccomp,
            libc::SYS_prctl,
        ] {
            assert_eq!(native(nr, [0; 6]), RET_ALLOW, "nr {nr}");
        }
    }

    #[test]
    fn socket_families() {
        let allowed: Vec<u64> = SOCKET_FAMILIES.iter().map(|(_, f)| *f as u64).collect();
        let eafnosupport = ret_errno(libc::EAFNOSUPPORT);
        for nr in [libc::SYS_socket, libc::SYS_socketpair] {
            for family in 0..=64u64 {
                let want = if allowed.contains(&family) {
                    RET_ALLOW
                } else {
                    eafnosupport
                };
                assert_eq!(
                    native(nr, [family, 1, 0, 0, 0, 0]),
                    want,
                    "nr {nr} family {family}"
                );
                // The kernel reads an int: high bits must not change the verdict.
                assert_eq!(
                    native(nr, [(0xdead_u64 << 32) | family, 1, 0, 0, 0, 0]),
                    want,
                    "nr {nr} family {family} with high bits"
                );
            }
            assert_eq!(
                native(nr, [libc::AF_VSOCK as u64, 1, 0, 0, 0, 0]),
                eafnosupport
            );
            assert_eq!(native(nr, [0xffff_ffff, 1, 0, 0, 0, 0]), eafnosupport);
        }
        // Other calls taking a family-like first argument are untouched.
        assert_eq!(
            native(libc::SYS_bind, [libc::AF_VSOCK as u64, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
    }

    /// Every syscall runs the filter, and every sandbox start installs it
    /// (the kernel checks and JIT-compiles it each time): keep it short.
    #[test]
    fn filter_stays_short() {
        let p = prog();
        assert!(p.len() <= 168, "filter grew to {} instructions", p.len());
        // An ordinary call walks the prologue, the deny chain and the
        // socket block before seccompiler's body.
        let before_body = prologue(arch::AUDIT).len() + deny_always().len() + 2 + 2;
        assert!(before_body < 80, "{before_body}");
    }

    #[test]
    fn clone_flags() {
        let sigchld = libc::SIGCHLD as u64;
        // glibc fork() and pthread_create() flag sets.
        let fork = 0x0120_0000 | sigchld;
        let thread = 0x003d_0f00;
        assert_eq!(native(libc::SYS_clone, [fork, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(native(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), RET_ALLOW);
        for &(name, flag) in CLONE_NS_FLAGS {
            assert_eq!(
                native(libc::SYS_clone, [flag | sigchld, 0, 0, 0, 0, 0]),
                ret_errno(libc::EPERM),
                "{name}"
            );
        }
    }

    #[test]
    fn personality_values() {
        for &v in PERSONALITY_ALLOWED {
            assert_eq!(native(libc::SYS_personality, [v, 0, 0, 0, 0, 0]), RET_ALLOW);
        }
        // ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC.
        for v in [0x004_0000, 0x040_0000] {
            assert_eq!(
                native(libc::SYS_personality, [v, 0, 0, 0, 0, 0]),
                ret_errno(libc::EPERM)
            );
        }
    }

    #[test]
    fn ioctl_cmds() {
        let eperm = ret_errno(libc::EPERM);
        assert_eq!(native(libc::SYS_ioctl, [0, TIOCSTI, 0, 0, 0, 0]), eperm);
        assert_eq!(native(libc::SYS_ioctl, [0, TIOCLINUX, 0, 0, 0, 0]), eperm);
        // Upper 32 bits are ignored by the kernel, so by the filter too.
        assert_eq!(
            native(libc::SYS_ioctl, [0, (1 << 32) | TIOCSTI, 0, 0, 0, 0]),
            eperm
        );
        assert_eq!(native(libc::SYS_ioctl, [0, 0x5401, 0, 0, 0, 0]), RET_ALLOW);
        // TCGETS
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_and_foreign_arch() {
        let p = prog();
        let eperm = ret_errno(libc::EPERM);
        assert_eq!(eval(&p, 0x4000_0000 + 39, arch::AUDIT, [0; 6]), eperm);
        assert_eq!(eval(&p, 0x4000_0000 + 272, arch::AUDIT, [0; 6]), eperm);
        assert_eq!(eval(&p, -2, arch::AUDIT, [0; 6]), eperm);
        assert_eq!(eval(&p, -1, arch::AUDIT, [0; 6]), RET_ALLOW);
        // AUDIT_ARCH_I386: int 0x80 from a 64-bit process.
        assert_eq!(
            eval(&p, 20, 0x4000_0003, [0; 6]),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[test]
    fn install_requires_no_new_privs_flag_check_only() {
        // Must not install in the test process: only exercise the error path
        // when no_new_privs is unset (cargo test does not set it).
        if nix::sys::prctl::get_no_new_privs() == Ok(false) {
            let p = SeccompProgram::default_profile().unwrap();
            assert!(matches!(p.install(), Err(SeccompError::NoNewPrivsNotSet)));
        }
    }

    #[test]
    fn mode_serializes_lowercase() {
        assert_eq!(
            serde_json::to_string(&SeccompMode::Default).unwrap(),
            "\"default\""
        );
        assert_eq!(serde_json::to_string(&SeccompMode::Off).unwrap(), "\"off\"");
    }
}
