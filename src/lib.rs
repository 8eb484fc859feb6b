//! cbrun: a daemonless, rootless sandbox runtime for spec-to-repository
//! coding-agent benchmarks.

pub mod admin;
pub mod agent;
pub mod case;
pub mod doctor;
pub mod error;
pub mod fsutil;
pub mod guard;
pub mod host;
pub mod image;
pub mod judge;
pub mod net;
pub mod notice;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod scan;
pub mod sys;
pub mod trial;

/// What unit tests share.
#[cfg(test)]
pub(crate) mod testing {
    /// A test that cannot run here says so and returns; in CI (`CI=true`)
    /// the missing tool or privilege is a failure instead.
    pub fn missing(what: &str) {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI needs {what}");
        }
        eprintln!("skipped: {what} is not available");
    }
}
pub mod usage;
