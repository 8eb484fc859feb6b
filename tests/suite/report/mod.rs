//! `cbrun report`: every cell of every table checked against run folders
//! built here with known rewards, times, costs, test counts and repeats
//! (in the shapes of the run-folder contract); pass@k and pass^k against
//! hand-computed values; the baseline comparison; partial, concurrently
//! written and hostile run folders; hostile names in every format; the
//! HTML page rendered in headless Chromium (screenshot pixels and the DOM's
//! marks); a record written by a real `cbrun trial`.
//!
//! Needs no sandbox but for `a_real_trial_record_is_reported` (root, as CI
//! runs) and Chromium for the HTML tests (Debian package `chromium`; in CI
//! its absence is a failure).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const CBRUN: &str = env!("CARGO_BIN_EXE_cbrun");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report");
const REPO: &str = env!("CARGO_MANIFEST_DIR");

mod chromium;
mod expected;
mod html;
mod parse;
mod robust;
mod tables;
mod util;
mod writer;

use chromium::*;
use expected::*;
use parse::*;
use util::*;
use writer::*;
