//! The command line: exit statuses, bad input, clap's messages, help,
//! version, completions and manual pages, identities, output files, the
//! outcome JSON, the environment, and `doctor`.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::{
    live_procs_with_arg, wait_until, Ctx, Proc, Who, CANARY_KEY, CANARY_VALUE, PY, ROOT_RANGE_LEN,
    ROOT_RANGE_START,
};
use serde_json::{json, Value};

// The tests, by topic; the helpers above are theirs.
mod env_json_init;
mod exits;
mod help;
mod identity_io;
