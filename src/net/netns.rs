//! Listening sockets created inside another network namespace.
//!
//! A socket belongs to the network namespace it was created in, whichever
//! namespace later uses it. So cbrun can create the proxy's listener on the
//! sandbox's loopback and still serve it, and dial upstreams, from the host
//! namespace.
//!
//! The kernel lets a thread join a network namespace only with
//! CAP_SYS_ADMIN both in the user namespace owning it and in its own. Root
//! has that: [`listen_in_netns`] switches a short-lived thread. A rootless
//! caller does not hold CAP_SYS_ADMIN in its own user namespace and must
//! first join the sandbox's user namespace, which a multithreaded process
//! cannot do: [`listen_in_userns_netns`] does it in a forked child and
//! receives the socket over a Unix socket.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::thread;

use nix::errno::Errno;
use nix::sched::{setns, CloneFlags};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::sys::wait::waitpid;
use nix::unistd::{fork, ForkResult};

fn ctx(what: &str, path: &Path, e: impl Into<io::Error>) -> io::Error {
    let e = e.into();
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Creates a TCP listener on `addr` inside the network namespace at `netns`
/// (e.g. `/proc/PID/ns/net`). Needs CAP_SYS_ADMIN in the caller's user
/// namespace as well as the namespace's owner (root, in practice).
pub fn listen_in_netns(netns: &Path, addr: SocketAddr) -> io::Result<TcpListener> {
    let ns = File::open(netns).map_err(|e| ctx("opening", netns, e))?;
    let path = netns.to_path_buf();
    // The thread ends right after binding, so its switched namespace never
    // leaks into other work; the calling thread is never switched.
    thread::Builder::new()
        .name("cbrun-netns".into())
        .spawn(move || {
            setns(&ns, CloneFlags::CLONE_NEWNET)
                .map_err(|e| ctx("joining network namespace", &path, e))?;
            TcpListener::bind(addr).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("binding {addr} in {}: {e}", path.display()),
                )
            })
        })?
        .join()
        .map_err(|_| io::Error::other("network namespace thread panicked"))?
}

/// Steps of the forked child, reported back on failure.
const STEP_USERNS: u8 = 1;
const STEP_NETNS: u8 = 2;
const STEP_BIND: u8 = 3;

/// Like [`listen_in_netns`], but first joins the user namespace at `userns`
/// (e.g. `/proc/PID/ns/user`) so that the owner of a rootless sandbox can do
/// it. If the caller is already in that user namespace it is not rejoined.
/// Works from a multithreaded process: the namespace changes happen in a
/// forked child that only makes system calls and then exits.
pub fn listen_in_userns_netns(
    userns: &Path,
    netns: &Path,
    addr: SocketAddr,
) -> io::Result<TcpListener> {
    let user = File::open(userns).map_err(|e| ctx("opening", userns, e))?;
    let net = File::open(netns).map_err(|e| ctx("opening", netns, e))?;
    // Joining one's own user namespace fails with EINVAL; skip it instead.
    let own = std::fs::metadata("/proc/self/ns/user")?;
    let target = user.metadata()?;
    let join_user = (own.dev(), own.ino()) != (target.dev(), target.ino());

    let (parent_end, child_end) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    // SAFETY: the child only makes system calls (setns, socket, bind,
    // listen, sendmsg) without allocating, then `_exit`s.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop(parent_end);
            let (step, res) = child_bind(&user, &net, join_user, addr);
            let fd = res.as_ref().map(|l| l.as_raw_fd()).ok();
            let errno = match &res {
                Ok(_) => 0,
                Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
            };
            let mut msg = [0u8; 5];
            msg[0] = step;
            msg[1..].copy_from_slice(&errno.to_le_bytes());
            let code = if crate::sys::fdpass::send_with_fd(child_end.as_raw_fd(), &msg, fd).is_ok()
            {
                0
            } else {
                1
            };
            crate::sys::proc::exit_child(code)
        }
        ForkResult::Parent { child } => {
            drop(child_end);
            let got = crate::sys::fdpass::recv_with_fd(parent_end.as_raw_fd());
            // Reap the helper so it does not linger as a zombie.
            while let Err(Errno::EINTR) = waitpid(child, None) {}
            let (msg, fd) = got?;
            if let Some(fd) = fd {
                return Ok(TcpListener::from(fd));
            }
            let errno = i32::from_le_bytes([msg[1], msg[2], msg[3], msg[4]]);
            let e = io::Error::from_raw_os_error(errno);
            Err(match msg[0] {
                STEP_USERNS => ctx("joining user namespace", userns, e),
                STEP_NETNS => ctx("joining network namespace", netns, e),
                STEP_BIND => io::Error::new(
                    e.kind(),
                    format!("binding {addr} in {}: {e}", netns.display()),
                ),
                _ => io::Error::other("namespace helper exited without an answer"),
            })
        }
    }
}

/// The forked child's work: returns the step reached and the outcome.
fn child_bind(
    user: &File,
    net: &File,
    join_user: bool,
    addr: SocketAddr,
) -> (u8, io::Result<TcpListener>) {
    if join_user {
        if let Err(e) = setns(user, CloneFlags::CLONE_NEWUSER) {
            return (STEP_USERNS, Err(e.into()));
        }
    }
    if let Err(e) = setns(net, CloneFlags::CLONE_NEWNET) {
        return (STEP_NETNS, Err(e.into()));
    }
    (STEP_BIND, TcpListener::bind(addr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, TcpStream};
    use std::os::fd::{AsFd, OwnedFd};
    use std::path::PathBuf;
    use std::sync::atomic::AtomicBool;
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use nix::sched::unshare;
    use nix::unistd::{geteuid, Gid, Pid, Uid};

    use crate::net::log::ConnLog;
    use crate::net::policy::EgressPolicy;
    use crate::net::proxy;

    fn is_root() -> bool {
        if geteuid().is_root() {
            return true;
        }
        crate::testing::missing("root (creating network namespaces)");
        false
    }

    /// Brings `lo` up in the calling thread's network namespace, as the
    /// sandbox does for its own.
    fn bring_lo_up() -> io::Result<()> {
        crate::sys::net::loopback_up(libc::IFF_UP as libc::c_short)
    }

    /// A fresh network namespace with `lo` up, kept alive by the returned
    /// descriptor; its path is `/proc/self/fd/N`.
    fn new_netns() -> (File, PathBuf) {
        let ns = thread::spawn(|| {
            unshare(CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
            bring_lo_up().expect("bringing lo up");
            File::open("/proc/thread-self/ns/net").expect("opening own netns")
        })
        .join()
        .unwrap();
        let path = PathBuf::from(format!("/proc/self/fd/{}", ns.as_raw_fd()));
        (ns, path)
    }

    /// Runs `f` on a thread that has joined the network namespace `ns`.
    fn in_netns<T: Send + 'static>(ns: &File, f: impl FnOnce() -> T + Send + 'static) -> T {
        let ns = ns.try_clone().unwrap();
        thread::spawn(move || {
            setns(ns.as_fd(), CloneFlags::CLONE_NEWNET).unwrap();
            f()
        })
        .join()
        .unwrap()
    }

    /// The listener must be reachable from its namespace, and not from
    /// the host's loopback.
    fn assert_isolated(ns: &File, listener: &TcpListener) {
        let addr = listener.local_addr().unwrap();
        assert!(addr.ip().is_loopback());
        listener.set_nonblocking(true).unwrap();
        // From the host namespace the port is someone else's (almost surely
        // no one's): either refused, or at least not our listener.
        if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
            thread::sleep(Duration::from_millis(50));
            assert_eq!(
                listener.accept().unwrap_err().kind(),
                io::ErrorKind::WouldBlock,
                "a host-namespace connect reached the sandbox listener"
            );
        }
        in_netns(ns, move || {
            let mut s = TcpStream::connect(addr).expect("connect inside the netns");
            s.write_all(b"ping").unwrap();
        });
        listener.set_nonblocking(false).unwrap();
        let (mut s, _) = listener.accept().unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        assert_eq!(got, "ping");
    }

    #[test]
    fn listener_lives_in_the_target_netns() {
        if !is_root() {
            return;
        }
        let (ns, path) = new_netns();
        let listener = listen_in_netns(&path, (Ipv4Addr::LOCALHOST, 0).into()).unwrap();
        assert_isolated(&ns, &listener);
    }

    #[test]
    fn missing_namespace_is_a_clear_error() {
        let err = listen_in_netns(
            Path::new("/nonexistent/ns/net"),
            (Ipv4Addr::LOCALHOST, 0).into(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ns/net"), "{err}");
        let err = listen_in_userns_netns(
            Path::new("/proc/self/ns/user"),
            Path::new("/nonexistent/ns/net"),
            (Ipv4Addr::LOCALHOST, 0).into(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ns/net"), "{err}");
    }

    #[test]
    fn userns_variant_works_in_own_userns() {
        if !is_root() {
            return;
        }
        // Same user namespace as ours: the join is skipped, only the netns
        // switch happens in the child.
        let (ns, path) = new_netns();
        let listener = listen_in_userns_netns(
            Path::new("/proc/self/ns/user"),
            &path,
            (Ipv4Addr::LOCALHOST, 0).into(),
        )
        .unwrap();
        assert_isolated(&ns, &listener);
    }

    fn exit_code(pid: Pid) -> Option<i32> {
        match waitpid(pid, None) {
            Ok(nix::sys::wait::WaitStatus::Exited(_, c)) => Some(c),
            _ => None,
        }
    }

    /// The rootless case: an unprivileged uid owns a sandbox's user and
    /// network namespaces. It cannot join the netns directly (EPERM), and
    /// can through [`listen_in_userns_netns`].
    #[test]
    fn unprivileged_owner_needs_the_userns_join() {
        if !is_root() {
            return;
        }
        const UID: u32 = 65534;
        let drop_to_uid = || -> bool {
            let g = Gid::from_raw(UID);
            let u = Uid::from_raw(UID);
            nix::unistd::setgroups(&[]).is_ok()
                && nix::unistd::setresgid(g, g, g).is_ok()
                && nix::unistd::setresuid(u, u, u).is_ok()
                // Changing uid clears "dumpable", which would hide our
                // /proc/PID/ns from the other (same-uid) process.
                && nix::sys::prctl::set_dumpable(true).is_ok()
        };

        // The "sandbox": new user+net namespaces owned by UID.
        let (ready_r, ready_w) = nix::unistd::pipe().unwrap();
        let (hold_r, hold_w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child makes syscalls only and `_exit`s.
        let sandbox = match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                drop(ready_r);
                drop(hold_w);
                let ok = drop_to_uid()
                    && unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).is_ok()
                    && bring_lo_up().is_ok();
                let _ = nix::unistd::write(&ready_w, if ok { b"1" } else { b"0" });
                let mut b = [0u8; 1];
                let _ = nix::unistd::read(hold_r.as_raw_fd(), &mut b);
                crate::sys::proc::exit_child(0)
            }
            ForkResult::Parent { child } => child,
        };
        drop(ready_w);
        drop(hold_r);
        // Ends the sandbox process however the test ends (closing the
        // pipe releases it), so a failed assertion leaves no process behind.
        struct Reap(Option<OwnedFd>, Pid);
        impl Drop for Reap {
            fn drop(&mut self) {
                drop(self.0.take());
                let _ = waitpid(self.1, None);
            }
        }
        let _reap = Reap(Some(hold_w), sandbox);
        let mut b = [0u8; 1];
        let _ = nix::unistd::read(ready_r.as_raw_fd(), &mut b);
        if b[0] != b'1' {
            crate::testing::missing("unprivileged user namespaces");
            return;
        }
        let user_path = PathBuf::from(format!("/proc/{sandbox}/ns/user"));
        let net_path = PathBuf::from(format!("/proc/{sandbox}/ns/net"));

        // The "rootless cbrun": same uid, host namespaces.
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let (up, np) = (user_path.clone(), net_path.clone());
        // SAFETY: the child makes syscalls (and glibc-safe allocation) only
        // and `_exit`s.
        let owner = match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                drop(ours);
                let mut code = 10;
                if drop_to_uid() {
                    code = 11;
                    let direct = listen_in_netns(&np, (Ipv4Addr::LOCALHOST, 0).into());
                    if direct.err().map(|e| e.kind()) == Some(io::ErrorKind::PermissionDenied) {
                        code = 12;
                        if let Ok(l) =
                            listen_in_userns_netns(&up, &np, (Ipv4Addr::LOCALHOST, 0).into())
                        {
                            if crate::sys::fdpass::send_with_fd(
                                theirs.as_raw_fd(),
                                b"okok!",
                                Some(l.as_raw_fd()),
                            )
                            .is_ok()
                            {
                                code = 0;
                            }
                        }
                    }
                }
                crate::sys::proc::exit_child(code)
            }
            ForkResult::Parent { child } => child,
        };
        drop(theirs);
        let got = crate::sys::fdpass::recv_with_fd(ours.as_raw_fd());
        let code = exit_code(owner);
        let ns = File::open(&net_path).unwrap();
        assert_eq!(
            code,
            Some(0),
            "10: drop uid, 11: direct setns not EPERM, 12: userns path failed"
        );
        let (_, fd) = got.unwrap();
        let listener = TcpListener::from(fd.expect("listener fd"));
        assert_isolated(&ns, &listener);
    }

    /// The whole arrangement: a proxy listening on the sandbox's loopback,
    /// dialing out from the host namespace.
    #[test]
    fn proxy_serves_a_sandbox_from_the_host() {
        if !is_root() {
            return;
        }
        let (ns, path) = new_netns();
        // An upstream on the host's loopback, unreachable from the sandbox.
        let upstream = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let up_addr = upstream.local_addr().unwrap();
        let up_thread = thread::spawn(move || {
            let (mut s, _) = upstream.accept().unwrap();
            let mut b = [0u8; 5];
            s.read_exact(&mut b).unwrap();
            s.write_all(b"pong!").unwrap();
        });

        let listener = listen_in_netns(&path, (Ipv4Addr::LOCALHOST, 0).into()).unwrap();
        let proxy_addr = listener.local_addr().unwrap();
        let policy = EgressPolicy::parse(
            &[format!("127.0.0.1:{}", up_addr.port())],
            false,
            &[] as &[&str],
        )
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let server =
            thread::spawn(move || proxy::serve(listener, policy, ConnLog::disabled(), stop2));

        let (tx, rx) = mpsc::channel();
        in_netns(&ns, move || {
            // No direct route to the host's upstream...
            let direct = TcpStream::connect_timeout(&up_addr, Duration::from_secs(1));
            tx.send(direct.is_err()).unwrap();
            // ...but the proxy on the sandbox's own loopback gets there.
            let mut s = TcpStream::connect(proxy_addr).unwrap();
            write!(
                s,
                "CONNECT {up_addr} HTTP/1.1\r\nHost: {up_addr}\r\n\r\nping!"
            )
            .unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            tx.send(
                String::from_utf8(got).unwrap()
                    == "HTTP/1.1 200 Connection established\r\n\r\npong!",
            )
            .unwrap();
        });
        assert!(
            rx.recv().unwrap(),
            "sandbox reached the host upstream directly"
        );
        assert!(rx.recv().unwrap(), "tunnel through the proxy failed");
        up_thread.join().unwrap();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        server.join().unwrap().unwrap();
    }
}
