//! The judge: runs a case's hidden acceptance tests against a submission
//! and turns their results into a reward.
//!
//! - [`channel`]: the result channel, cbrun's own reporter's records from
//!   inside the sandbox, authenticated and checked against the inventory.
//! - [`parse`]: test-runner output into counts and outcomes (human-readable
//!   counts, and the verdict for runners cbrun has no reporter for).
//! - [`reward`]: the reward gate over those counts and the run's exit.
//! - [`verdict`]: which evidence decides, and tampering.

pub mod channel;
pub mod parse;
pub mod reward;
pub mod verdict;
