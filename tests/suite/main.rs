//! cbrun's integration tests, as one test binary.
//!
//! Each file is a module named for what it tests; `common` holds the
//! furniture they share (users, contexts, running cbrun, temporary
//! folders). One binary links once: with the release profile's fat LTO,
//! a binary per file cost about four minutes of CI each.
//!
//! Run one module with a filter: `cargo test --profile ci --test suite --
//! --test-threads=1 attack_hostfs::`.

mod common;

mod agents;
mod attack_egress;
mod attack_hostfs;
mod attack_sandbox;
mod attack_verdict;
mod case_check;
mod cli;
mod doctor_userns;
mod error_lines;
mod image;
mod image_build;
mod imgkit;
mod isolation;
mod judge_view;
mod lifecycle;
mod limits;
mod published_shapes;
mod report;
mod run;
mod run_plan;
mod sif;
mod slurm;
mod trial;
