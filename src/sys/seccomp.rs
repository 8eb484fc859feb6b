//! The one `seccomp(2)` call cbrun makes: attaching a classic-BPF filter.

/// One `seccomp(SECCOMP_SET_MODE_FILTER)` call for `filter[..len]`;
/// returns the syscall's result (0, or -1 with errno set). Allocates
/// nothing: it runs between fork and exec.
pub fn install_filter(filter: &[libc::sock_filter], len: u16) -> libc::c_long {
    let len = len.min(u16::try_from(filter.len()).unwrap_or(u16::MAX));
    let prog = libc::sock_fprog {
        len,
        // The kernel copies the program and never writes through it.
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at a live instruction array of at least `len`
    // entries for the duration of the call; the kernel copies it.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &prog as *const libc::sock_fprog,
        )
    }
}
