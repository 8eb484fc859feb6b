//! cbrun: a daemonless, rootless sandbox runtime for spec-to-repository
//! coding-agent benchmarks.

pub mod admin;
pub mod agent;
pub mod case;
pub mod doctor;
pub mod fsutil;
pub mod guard;
pub mod host;
pub mod image;
pub mod judge;
pub mod net;
pub mod sandbox;
pub mod scan;
pub mod sys;
pub mod trial;
pub mod usage;
