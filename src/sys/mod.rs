//! Raw system calls, in one place. Everything here wraps `libc` calls that
//! the standard library does not offer (or offers only by path), each with
//! its `// SAFETY:` reasoning, so the rest of the crate stays free of
//! `unsafe` for system work.

pub mod at;
pub mod dir;
pub mod fd;
pub mod mount;
pub mod proc;
pub mod sparse;
pub mod stop;
