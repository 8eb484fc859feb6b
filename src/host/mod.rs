//! Facts about the host: what it lets the current user do.

pub mod cgroup;
pub mod idmap;
pub mod probe;
pub mod userns;
