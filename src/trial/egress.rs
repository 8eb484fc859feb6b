//! `--net allowlist`: cbrun's proxy, outside the sandbox, listening on
//! 127.0.0.1:3128 *inside* the sandbox's network namespace, with the
//! registry index at the same address (`/pypi/simple/`, `/npm/`), and a
//! loopback forward ([`crate::net::forward`]) for each `--allow` entry
//! naming a loopback address and port.
//!
//! The proxy runs in a forked child so that cbrun itself stays
//! single-threaded (libcontainer forks from it); the child may use threads.
//! The index lives in that child too: it is part of the proxy's request
//! handling, one thread per connection like the tunnels.
//!
//! Read from cbrun's environment (never the sandbox's): `CBRUN_PYPI_URL`,
//! `CBRUN_PYPI_FILES_URL`, `CBRUN_NPM_REGISTRY_URL` replace the index's
//! upstreams ([`crate::net::index::upstream`]); `CBRUN_EGRESS_HOSTS` names
//! a hosts file the proxy resolves with before DNS ([`crate::net::resolve`]).

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, pipe, read, ForkResult, Pid};

use crate::net::forward::{self, ForwardSpec};
use crate::net::index::upstream::Upstreams;
use crate::net::index::{Index, IndexLimits};
use crate::net::log::ConnLog;
use crate::net::netns::listen_in_userns_netns;
use crate::net::policy::EgressPolicy;
use crate::net::proxy::Proxy;
use crate::net::resolve::{Resolver, ENV_HOSTS};
use crate::trial::solve::Egress;

/// The ids the proxy child runs as when cbrun is root.
const NOBODY: u32 = 65534;

/// The proxy's address inside the sandbox (its netns is fresh and empty).
pub const PROXY_ADDR: &str = "127.0.0.1:3128";

/// Environment that points HTTP clients at the proxy, and package
/// managers at the registry index.
pub fn proxy_env() -> Vec<(&'static str, String)> {
    let url = format!("http://{PROXY_ADDR}");
    let simple = format!("{url}/pypi/simple/");
    let npm = format!("{url}/npm/");
    vec![
        ("HTTP_PROXY", url.clone()),
        ("HTTPS_PROXY", url.clone()),
        ("http_proxy", url.clone()),
        ("https_proxy", url.clone()),
        ("ALL_PROXY", url.clone()),
        ("all_proxy", url),
        ("NO_PROXY", "localhost,127.0.0.1,::1".into()),
        ("no_proxy", "localhost,127.0.0.1,::1".into()),
        // pip, uv (old and new names), pdm, pipenv.
        ("PIP_INDEX_URL", simple.clone()),
        ("UV_INDEX_URL", simple.clone()),
        ("UV_DEFAULT_INDEX", simple.clone()),
        ("PDM_PYPI_URL", simple.clone()),
        ("PIPENV_PYPI_MIRROR", simple),
        // npm and pnpm (and yarn 1), yarn 2+ (which refuses plain http
        // unless the host is whitelisted), bun.
        ("npm_config_registry", npm.clone()),
        ("NPM_CONFIG_REGISTRY", npm.clone()),
        ("YARN_REGISTRY", npm.clone()),
        (
            "YARN_NPM_REGISTRY_SERVER",
            npm.trim_end_matches('/').to_owned(),
        ),
        ("YARN_UNSAFE_HTTP_WHITELIST", "127.0.0.1".into()),
        ("BUN_CONFIG_REGISTRY", npm),
        // npm's update check fetches npm's own (large) document each run.
        ("npm_config_update_notifier", "false".into()),
    ]
}

impl Egress {
    /// The same egress with the case's install ban, which the registry
    /// index enforces.
    pub fn with_install_ban(&self, install_ban: &[String]) -> Egress {
        match self {
            Egress::None => Egress::None,
            Egress::Allowlist(p) => Egress::Allowlist(p.clone().with_install_ban(install_ban)),
        }
    }
}

/// The loopback forwards `policy` asks for, and warnings about loopback
/// entries that get none; an entry naming the proxy's own address is an
/// error.
pub fn forwards(policy: &EgressPolicy) -> Result<(Vec<ForwardSpec>, Vec<String>), String> {
    let proxy: SocketAddr = PROXY_ADDR.parse().map_err(|e| format!("{e}"))?;
    forward::forwards_for(policy, proxy)
}

/// A running proxy child; stopped (and reaped) when dropped.
pub struct ProxyChild {
    pid: Pid,
    stop: Option<OwnedFd>,
}

/// Starts the proxy for the sandbox whose init is `init`.
pub fn start(init: Pid, policy: &EgressPolicy, log: &Path) -> Result<ProxyChild, String> {
    let netns = PathBuf::from(format!("/proc/{}/ns/net", init.as_raw()));
    let userns = PathBuf::from(format!("/proc/{}/ns/user", init.as_raw()));
    let addr: SocketAddr = PROXY_ADDR.parse().map_err(|e| format!("{e}"))?;
    // Configuration errors surface here, before the sandbox runs on.
    let upstreams = Upstreams::from_env(|k| std::env::var(k).ok()).map_err(|e| e.to_string())?;
    let resolver = match std::env::var_os(ENV_HOSTS).filter(|v| !v.is_empty()) {
        Some(p) => Resolver::from_hosts_file(Path::new(&p))?,
        None => Resolver::default(),
    };
    // Entering the netns needs CAP_SYS_ADMIN over its owner: the sandbox's
    // user namespace is joined first (in a short-lived child).
    let listener = listen_in_userns_netns(&userns, &netns, addr)
        .map_err(|e| format!("proxy listener in {}: {e}", netns.display()))?;
    let mut fwd_listeners = Vec::new();
    for f in forwards(policy)?.0 {
        match listen_in_userns_netns(&userns, &netns, f.listen) {
            Ok(l) => fwd_listeners.push((l, f.target)),
            Err(_) if f.optional => {}
            Err(e) => {
                return Err(format!(
                    "loopback forward {} in {}: {e}",
                    f.listen,
                    netns.display()
                ))
            }
        }
    }
    let (stop_r, stop_w) = pipe().map_err(|e| format!("pipe: {e}"))?;
    // SAFETY: cbrun is single-threaded here, so the child may allocate and start threads freely.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Child => {
            drop(stop_w);
            let proxy = Proxy::new(policy.clone(), ConnLog::disabled())
                .with_resolver(resolver)
                .with_index(Index::new(upstreams, IndexLimits::default()));
            let code = child_main(listener, fwd_listeners, proxy, log, stop_r);
            crate::sys::proc::exit_child(code)
        }
        ForkResult::Parent { child } => {
            drop(stop_r);
            drop(listener);
            drop(fwd_listeners);
            Ok(ProxyChild {
                pid: child,
                stop: Some(stop_w),
            })
        }
    }
}

/// The proxy process's `main`: a fork of cbrun that never returns to it,
/// so it prints its own failures on the stderr it inherited (cbrun's) and
/// exits 1; cbrun sees the exit when it reaps the proxy.
fn child_main(
    listener: TcpListener,
    forwards: Vec<(TcpListener, SocketAddr)>,
    proxy: Proxy,
    log: &Path,
    stop_r: OwnedFd,
) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::prctl::set_name(c"cbrun-proxy");
    let log = match ConnLog::open(log) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cbrun: proxy: network log {}: {e}", log.display());
            return 1;
        }
    };
    // The proxy parses what the sandbox sends: it keeps nothing of cbrun's
    // (state file, cgroup directories, signalfd) and, when cbrun is root,
    // runs as nobody. Its sockets, the log and the stop pipe are all it
    // needs; upstream connections and CA files are opened afresh. A
    // forward needs no privilege either: it connects to the host's
    // loopback.
    let mut keep = vec![listener.as_raw_fd(), stop_r.as_raw_fd()];
    keep.extend(forwards.iter().map(|(l, _)| l.as_raw_fd()));
    keep.extend(log.raw_fd());
    let pairs: Vec<(i32, i32)> = keep.iter().map(|fd| (*fd, *fd)).collect();
    if let Err(e) = crate::sys::fd::keep_only(&pairs) {
        eprintln!("cbrun: proxy: closing cbrun's descriptors: {e}");
        return 1;
    }
    if crate::host::userns::is_real_root() {
        if let Err(e) = crate::sys::proc::drop_to(NOBODY, NOBODY) {
            eprintln!("cbrun: proxy: dropping root: {e}");
            return 1;
        }
    } else if nix::unistd::geteuid().is_root() {
        // A rootless cbrun is "root" of its own user namespace, where only
        // its caller is mapped: there is no other user to become, so it
        // gives up the namespace's capabilities instead.
        for set in [
            caps::CapSet::Ambient,
            caps::CapSet::Inheritable,
            caps::CapSet::Effective,
            caps::CapSet::Permitted,
        ] {
            if let Err(e) = caps::clear(None, set) {
                eprintln!("cbrun: proxy: dropping capabilities: {e}");
                return 1;
            }
        }
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    // EOF on the pipe (cbrun closed it, or died) asks for shutdown.
    std::thread::spawn(move || {
        let mut b = [0u8; 1];
        while let Ok(n) = read(stop_r.as_raw_fd(), &mut b) {
            if n == 0 {
                break;
            }
        }
        flag.store(true, Ordering::SeqCst);
    });
    let fwd_log = log.clone();
    let fwd_stop = shutdown.clone();
    let fwd = (!forwards.is_empty())
        .then(|| std::thread::spawn(move || forward::serve(forwards, fwd_log, &fwd_stop)));
    let result = proxy.with_log(log).run(listener, &shutdown);
    shutdown.store(true, Ordering::SeqCst);
    let fwd_result = fwd.map(|t| t.join());
    match (result, fwd_result) {
        (Err(e), _) => {
            eprintln!("cbrun: proxy: {e}");
            1
        }
        (Ok(()), Some(Ok(Err(e)))) => {
            eprintln!("cbrun: proxy: loopback forward: {e}");
            1
        }
        _ => 0,
    }
}

impl Drop for ProxyChild {
    fn drop(&mut self) {
        // Closing the pipe asks the proxy to finish its records and exit.
        drop(self.stop.take());
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(WaitStatus::StillAlive) => {
                    let _ = kill(self.pid, Signal::SIGKILL);
                    let _ = waitpid(self.pid, None);
                    return;
                }
                _ => return,
            }
        }
    }
}
