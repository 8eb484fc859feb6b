//! One sandboxed command: config -> rootfs -> spec -> libcontainer ->
//! wait -> outcome -> teardown.

pub mod cgroupfs_shim;
pub mod cgroups;
pub mod config;
pub mod executor;
pub mod gc;
pub mod idmap;
pub mod init;
pub mod outcome;
pub mod rootfs;
pub mod run;
pub mod seccomp;
pub mod spec;
pub mod state;
