//! Passing one descriptor over a Unix socket (`SCM_RIGHTS`), with a short
//! message, without allocating: the sender runs in a forked child.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;

/// Room for one `SCM_RIGHTS` message carrying one descriptor, aligned for
/// `cmsghdr`.
#[repr(C)]
union CmsgBuf {
    _align: libc::cmsghdr,
    buf: [u8; 64],
}

/// Sends `msg`, plus `fd` as `SCM_RIGHTS` if given, without allocating
/// (this runs in a forked child of a possibly multithreaded process).
pub fn send_with_fd(sock: RawFd, msg: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut libc::c_void,
        iov_len: msg.len(),
    };
    let mut cbuf = CmsgBuf { buf: [0u8; 64] };
    // SAFETY: zeroed msghdr is a valid empty header; fields are set below.
    let mut hdr: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    if let Some(fd) = fd {
        let fd_len = std::mem::size_of::<RawFd>() as u32;
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure size computations; the buffer
        // is 64 bytes, more than CMSG_SPACE(4) on every Linux ABI, and
        // aligned for cmsghdr by the union.
        unsafe {
            hdr.msg_control = cbuf.buf.as_mut_ptr().cast();
            hdr.msg_controllen = libc::CMSG_SPACE(fd_len) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&hdr);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_len) as _;
            std::ptr::copy_nonoverlapping(
                (&fd as *const RawFd).cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                fd_len as usize,
            );
        }
    }
    loop {
        // SAFETY: hdr points at live buffers for the duration of the call.
        let n = unsafe { libc::sendmsg(sock, &hdr, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives the 5-byte answer and at most one descriptor.
pub fn recv_with_fd(sock: RawFd) -> io::Result<([u8; 5], Option<OwnedFd>)> {
    let mut msg = [0u8; 5];
    let mut iov = libc::iovec {
        iov_base: msg.as_mut_ptr().cast(),
        iov_len: msg.len(),
    };
    let mut cbuf = CmsgBuf { buf: [0u8; 64] };
    // SAFETY: zeroed msghdr is a valid empty header; fields are set below.
    let mut hdr: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    // SAFETY: the union's buffer is plain bytes.
    hdr.msg_control = unsafe { cbuf.buf.as_mut_ptr().cast() };
    hdr.msg_controllen = 64;
    let n = loop {
        // SAFETY: hdr points at live buffers; MSG_CMSG_CLOEXEC keeps the
        // received descriptor out of later exec'd children.
        let n = unsafe { libc::recvmsg(sock, &mut hdr, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fd = None;
    // SAFETY: walks the control messages the kernel wrote into cbuf.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let mut raw: RawFd = -1;
                std::ptr::copy_nonoverlapping(
                    libc::CMSG_DATA(cmsg),
                    (&mut raw as *mut RawFd).cast::<u8>(),
                    std::mem::size_of::<RawFd>(),
                );
                if raw >= 0 {
                    fd = Some(OwnedFd::from_raw_fd(raw));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&hdr, cmsg);
        }
    }
    if n < msg.len() && fd.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "namespace helper exited without an answer",
        ));
    }
    if hdr.msg_flags & libc::MSG_CTRUNC != 0 && fd.is_none() {
        return Err(Errno::EMSGSIZE.into());
    }
    Ok((msg, fd))
}
