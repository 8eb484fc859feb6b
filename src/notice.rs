//! Messages library code has to give while it is still working, before it
//! has anything to return them in: a sandbox's limits warnings as it starts
//! (a trial may then run for hours), a cgroup that a destructor could not
//! remove, a trial record that could not be written, phase timings. The
//! library never prints them itself: it hands them to the sink the command
//! line installs ([`set_sink`]), which prints them its way. With no sink
//! (the library used on its own, unit tests) they are dropped; what belongs
//! in a result (an outcome's or a record's `warnings`) is returned there as
//! well.

use std::fmt::Display;
use std::sync::OnceLock;

/// What is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice<'a> {
    /// Something the user should know: `cbrun: warning: ...` on the CLI.
    Warning(&'a str),
    /// `CBRUN_TIMING=1` phase times, for profiling start-up.
    Timing(&'a str),
}

static SINK: OnceLock<fn(Notice<'_>)> = OnceLock::new();

/// Installs where notices go, once per process (a second call is ignored).
pub fn set_sink(sink: fn(Notice<'_>)) {
    let _ = SINK.set(sink);
}

/// Hands a warning to the sink.
pub fn warning(msg: impl Display) {
    if let Some(sink) = SINK.get() {
        sink(Notice::Warning(&msg.to_string()));
    }
}

/// Hands a timing line to the sink.
pub fn timing(msg: impl Display) {
    if let Some(sink) = SINK.get() {
        sink(Notice::Timing(&msg.to_string()));
    }
}
