//! The exit statuses of every cbrun command, in one type, so that a
//! command says what happened (`Failure`, `Usage`, ...) and this file says
//! which number that is.

use std::process::ExitCode;

use cbrun::sandbox::outcome::exit;

/// How a cbrun command ended. Every command returns one; `main` turns it
/// into the process's exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: the command did its job. For `trial`: the trial was evaluated,
    /// whatever its reward.
    Success,
    /// 1: the command ran and the answer is no: `validate` found a
    /// mismatch, `case check` an error, `gc` or `admin` could not remove or
    /// change something; a trial was incomplete (error) or failed for
    /// infrastructure.
    Failure,
    /// 2: `trial` was called wrongly (a bad flag or value, a broken case, an
    /// `--out` that exists, an image that is not in the store). Nothing ran
    /// and nothing was written.
    Usage,
    /// 2: `doctor` found that no sandbox can run on this host.
    NoSandbox,
    /// 125: cbrun's own error (bad input, setup failure) in every command
    /// but `trial`; `sandbox run` documents it.
    Error,
    /// 130: a trial was interrupted (SIGINT, SIGTERM or SIGHUP to cbrun).
    Interrupted,
    /// The status `sandbox run` passes on: the command's own, 128+N for a
    /// signal, 124 timeout, 126/127 not executable/not found, 130/143 when
    /// cbrun itself was stopped.
    Code(u8),
}

impl ExitStatus {
    /// A status `sandbox run` computed (out of range values are clamped).
    pub fn code(code: i32) -> ExitStatus {
        ExitStatus::Code(code.clamp(0, 255) as u8)
    }

    pub fn as_u8(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Usage => 2,
            ExitStatus::NoSandbox => cbrun::doctor::EXIT_IMPOSSIBLE as u8,
            ExitStatus::Error => exit::CBRUN_ERROR as u8,
            ExitStatus::Interrupted => 130,
            ExitStatus::Code(c) => c,
        }
    }

    /// `Success` when `ok`, else `Failure`.
    pub fn from_ok(ok: bool) -> ExitStatus {
        if ok {
            ExitStatus::Success
        } else {
            ExitStatus::Failure
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        ExitCode::from(s.as_u8())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(ExitStatus::Success.as_u8(), 0);
        assert_eq!(ExitStatus::Failure.as_u8(), 1);
        assert_eq!(ExitStatus::Usage.as_u8(), 2);
        assert_eq!(ExitStatus::NoSandbox.as_u8(), 2);
        assert_eq!(ExitStatus::Error.as_u8(), 125);
        assert_eq!(ExitStatus::Interrupted.as_u8(), 130);
        assert_eq!(ExitStatus::code(137).as_u8(), 137);
        assert_eq!(ExitStatus::code(-1).as_u8(), 0);
        assert_eq!(ExitStatus::code(300).as_u8(), 255);
    }
}
