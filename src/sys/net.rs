//! Network interface flags (`SIOCGIFFLAGS`/`SIOCSIFFLAGS`): bringing `lo`
//! up in a fresh network namespace.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `lo`'s flags, plus `set`, in the calling thread's network namespace:
/// `ip link set lo up` with `libc::IFF_UP`. Says which step failed.
pub fn loopback_up(set: libc::c_short) -> io::Result<()> {
    loopback_up_steps(set).map_err(|(_, e)| e)
}

/// Which of the two ioctls failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfStep {
    Socket,
    GetFlags,
    SetFlags,
}

/// [`loopback_up`], saying which step failed.
pub fn loopback_up_steps(set: libc::c_short) -> Result<(), (IfStep, io::Error)> {
    // SAFETY: plain socket call; a returned descriptor is new and owned
    // below by nothing else.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err((IfStep::Socket, io::Error::last_os_error()));
    }
    // SAFETY: see above.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain integers and arrays: all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS writes only `req`, a live ifreq with a
    // NUL-terminated name.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) } != 0 {
        return Err((IfStep::GetFlags, io::Error::last_os_error()));
    }
    // SAFETY: ifru_flags is the union member SIOCGIFFLAGS just wrote.
    unsafe { req.ifr_ifru.ifru_flags |= set };
    // SAFETY: SIOCSIFFLAGS reads only `req`, whose ifru_flags it uses.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) } != 0 {
        return Err((IfStep::SetFlags, io::Error::last_os_error()));
    }
    Ok(())
}
