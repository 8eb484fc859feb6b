//! The one place cbrun's commands print messages to stderr: errors
//! (`cbrun: error: ...`), warnings (`cbrun: warning: ...`) and status lines
//! (`cbrun: ...`); and the one `--json` envelope every command prints its
//! result in on stdout (see [`json_result`]). Other results on stdout are
//! printed by the command itself.

use std::cell::RefCell;
use std::fmt::Display;
use std::io::Write;

use serde::Serialize;

/// `cbrun: error: MSG`.
pub fn error(msg: impl Display) {
    let text = msg.to_string();
    JSON.with(|j| {
        if let Some(j) = j.borrow_mut().as_mut() {
            j.errors.push(text.clone());
        }
    });
    line(format_args!("error: {text}"));
}

/// What `--json` owes stdout: the command's name, whether its envelope was
/// printed, the errors said so far.
struct JsonMode {
    command: &'static str,
    printed: bool,
    errors: Vec<String>,
}

thread_local! {
    static JSON: RefCell<Option<JsonMode>> = const { RefCell::new(None) };
}

/// The command runs under `--json`: its result, or else its error, goes to
/// stdout as one envelope. Called first thing by each command that has the
/// flag.
pub fn json_mode(command: &'static str) {
    JSON.with(|j| {
        *j.borrow_mut() = Some(JsonMode {
            command,
            printed: false,
            errors: Vec::new(),
        })
    });
}

/// The envelope every `--json` command prints on success:
/// `{"cbrun": VERSION, "command": NAME, "ok": true, "result": ...}`. On
/// failure the same keys hold `"ok": false`, `"exit_code"` and `"error":
/// {"message", "errors"}` (see [`json_finish`]). `ok` says the command did its
/// job: a trial evaluated with reward 0 is `ok`.
pub fn json_result(command: &'static str, result: &impl Serialize) -> anyhow::Result<()> {
    let env = serde_json::json!({
        "cbrun": env!("CARGO_PKG_VERSION"),
        "command": command,
        "ok": true,
        "result": result,
    });
    let text = serde_json::to_string_pretty(&env)?;
    println!("{text}");
    JSON.with(|j| {
        let mut j = j.borrow_mut();
        match j.as_mut() {
            Some(m) => m.printed = true,
            None => {
                *j = Some(JsonMode {
                    command,
                    printed: true,
                    errors: Vec::new(),
                })
            }
        }
    });
    Ok(())
}

/// At exit: under `--json`, a command that printed no result prints the
/// failure envelope with its errors, so stdout is JSON whatever happened.
pub fn json_finish(exit_code: u8) {
    let Some(m) = JSON.with(|j| j.borrow_mut().take()) else {
        return;
    };
    if m.printed {
        return;
    }
    let env = serde_json::json!({
        "cbrun": env!("CARGO_PKG_VERSION"),
        "command": m.command,
        "ok": false,
        "exit_code": exit_code,
        "error": {
            "message": m.errors.last().cloned().unwrap_or_else(|| "failed".into()),
            "errors": m.errors,
        },
    });
    if let Ok(text) = serde_json::to_string_pretty(&env) {
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    }
}

/// `cbrun: warning: MSG`.
pub fn warning(msg: impl Display) {
    line(format_args!("warning: {msg}"));
}

/// What the library says while it works (see [`cbrun::notice`]).
pub fn notice(n: cbrun::notice::Notice<'_>) {
    match n {
        cbrun::notice::Notice::Warning(w) => warning(w),
        cbrun::notice::Notice::Timing(t) => status(t),
    }
}

/// `cbrun: MSG`: what a command is doing or did (`pulled ...`, `build: ...`).
pub fn status(msg: impl Display) {
    line(msg);
}

/// An error and its causes on one line, as `cbrun: error: ...`.
pub fn error_chain(e: &anyhow::Error) {
    error(one_line(e.as_ref()));
}

/// [`error_chain`] for a library error that did not go through anyhow.
pub fn error_of(e: &(dyn std::error::Error + 'static)) {
    error(one_line(e));
}

/// `e` and each of its causes joined by `: ` (cbrun's errors say each cause
/// once, in the message or as a source), any line breaks in them folded.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    cbrun::error::chain(e)
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whole lines go out in one write, so that messages of cbrun and of the
/// sandbox sharing the stream do not interleave mid-line. A closed stderr
/// is not an error worth dying for.
fn line(msg: impl Display) {
    let text = format!("cbrun: {msg}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_follows_its_error_on_one_line() {
        let e = anyhow::anyhow!("inner\nsecond line").context("outer");
        assert_eq!(one_line(e.as_ref()), "outer: inner second line");
        let e = anyhow::anyhow!("root").context("middle").context("top");
        assert_eq!(one_line(e.as_ref()), "top: middle: root");
        // A library error's source comes after its message.
        let e = cbrun::image::store::StoreError::Io {
            path: "/s/index.json".into(),
            op: "read",
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert_eq!(
            one_line(&e),
            "/s/index.json: read: No such file or directory (os error 2)"
        );
        let e = anyhow::Error::from(e).context("--image x");
        assert_eq!(
            one_line(e.as_ref()),
            "--image x: /s/index.json: read: No such file or directory (os error 2)"
        );
    }
}
