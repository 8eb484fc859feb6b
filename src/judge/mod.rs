//! The judge: runs a case's hidden acceptance tests against a submission
//! and turns what they printed into a reward.
//!
//! - [`parse`]: test-runner output (and JUnit XML) into counts and outcomes.
//! - [`reward`]: the reward gate over those counts and the run's exit.

pub mod parse;
pub mod reward;
