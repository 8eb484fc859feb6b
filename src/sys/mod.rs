//! Raw system calls, in one place. Everything here wraps `libc` calls that
//! the standard library does not offer (or offers only by path), each with
//! its `// SAFETY:` reasoning, so the rest of the crate stays free of
//! `unsafe` for system work.
//!
//! Two kinds stay at their callers, each with its own `// SAFETY:`: `fork`
//! (what the child may then do, in a process that may have other threads,
//! is the caller's code and argument, so the `unsafe` stays beside it), and
//! code that runs between fork and exec (`pre_exec` closures, a test's
//! forked child) where only async-signal-safe raw calls are allowed.

pub mod at;
pub mod dir;
pub mod fd;
pub mod fdpass;
pub mod mount;
pub mod net;
pub mod proc;
pub mod seccomp;
pub mod sparse;
pub mod stop;
pub mod xattr;
