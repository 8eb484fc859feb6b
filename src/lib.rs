//! cbrun: a daemonless, rootless sandbox runtime for spec-to-repository
//! coding-agent benchmarks.

pub mod admin;
pub mod case;
pub mod doctor;
pub mod host;
pub mod sandbox;
