//! Turns a spec's `command` template into the shell command line the solve
//! sandbox runs.
//!
//! Placeholders:
//! - `{instruction_quoted}`: the instruction text, single-quoted.
//! - `{instruction_file}`: path of the file holding the instruction.
//! - `{model_quoted}`: the model after `model_prefix`, single-quoted.
//! - `{log_quoted}`: path of the agent log, single-quoted.
//! - `{workdir}`, `{home}`: directories.
//!
//! The three unquoted ones are pasted as they are, so their values must be
//! plain paths (letters, digits and `_./+@%:,=-`); that keeps them usable
//! inside double quotes too (`"{home}/.local/bin"`).

use super::spec::{is_plain_path, AgentSpec};

/// A placeholder a command template may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    InstructionQuoted,
    InstructionFile,
    ModelQuoted,
    LogQuoted,
    Workdir,
    Home,
}

impl Placeholder {
    pub const ALL: [Placeholder; 6] = [
        Placeholder::InstructionQuoted,
        Placeholder::InstructionFile,
        Placeholder::ModelQuoted,
        Placeholder::LogQuoted,
        Placeholder::Workdir,
        Placeholder::Home,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Placeholder::InstructionQuoted => "instruction_quoted",
            Placeholder::InstructionFile => "instruction_file",
            Placeholder::ModelQuoted => "model_quoted",
            Placeholder::LogQuoted => "log_quoted",
            Placeholder::Workdir => "workdir",
            Placeholder::Home => "home",
        }
    }

    fn from_name(s: &str) -> Option<Placeholder> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    Text(&'a str),
    /// A doubled brace, standing for one.
    Brace(char),
    Slot(Placeholder),
}

/// Splits a template into text and placeholders. The error names the
/// offending placeholder or brace.
pub(crate) fn parse_template(s: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut rest = s;
    let mut offset = 0;
    while let Some(i) = rest.find(['{', '}']) {
        if i > 0 {
            pieces.push(Piece::Text(&rest[..i]));
        }
        let tail = &rest[i..];
        let at = offset + i;
        let used = if let Some(t) = tail.strip_prefix("{{") {
            pieces.push(Piece::Brace('{'));
            tail.len() - t.len()
        } else if let Some(t) = tail.strip_prefix("}}") {
            pieces.push(Piece::Brace('}'));
            tail.len() - t.len()
        } else if tail.starts_with('}') {
            return Err(format!(
                "unmatched `}}` at byte {at}; write `}}}}` for a literal brace"
            ));
        } else {
            let Some(end) = tail.find('}') else {
                return Err(format!(
                    "unclosed `{{` at byte {at}; write `{{{{` for a literal brace"
                ));
            };
            let name = &tail[1..end];
            if name.contains('{') {
                return Err(format!(
                    "unclosed `{{` at byte {at}; write `{{{{` for a literal brace"
                ));
            }
            match Placeholder::from_name(name) {
                Some(p) => pieces.push(Piece::Slot(p)),
                None => {
                    let known: Vec<String> = Placeholder::ALL
                        .iter()
                        .map(|p| format!("{{{}}}", p.name()))
                        .collect();
                    return Err(format!(
                        "unknown placeholder {{{name}}} (known: {}; write `{{{{`/`}}}}` for literal braces)",
                        known.join(", ")
                    ));
                }
            }
            end + 1
        };
        rest = &tail[used..];
        offset = at + used;
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    Ok(pieces)
}

/// Values for the placeholders.
#[derive(Debug, Clone, Copy)]
pub struct RenderInputs<'a> {
    /// The instruction text itself.
    pub instruction: &'a str,
    /// Where the instruction is stored inside the sandbox.
    pub instruction_file: &'a str,
    /// The model as given to cbrun (before `model_prefix`).
    pub model: Option<&'a str>,
    /// Agent log path inside the sandbox, e.g. `/logs/agent/agent.log`.
    pub log: &'a str,
    pub workdir: &'a str,
    pub home: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The command template is invalid (a spec that skipped [`load`](super::load)).
    #[error("agent {agent}: field command: {reason}")]
    Template { agent: String, reason: String },
    #[error("agent {agent}: its command uses {{model_quoted}} but no model was given")]
    MissingModel { agent: String },
    /// The model is empty, as given or once `model_prefix = "strip"` drops
    /// its provider.
    #[error("agent {agent}: model {model:?} leaves an empty model name")]
    EmptyModel { agent: String, model: String },
    #[error("agent {agent}: {{{placeholder}}} value {value:?} is not a plain path (allowed: A-Z a-z 0-9 _ . / + @ % : , = -)")]
    NotPlainPath {
        agent: String,
        placeholder: &'static str,
        value: String,
    },
    #[error("agent {agent}: {{{placeholder}}} value contains a NUL byte")]
    Nul {
        agent: String,
        placeholder: &'static str,
    },
}

/// Quotes `s` for a POSIX shell: always single quotes, `'` as `'\''`.
pub fn shell_single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Renders `spec.command` with `inputs`.
pub fn render_command(spec: &AgentSpec, inputs: &RenderInputs<'_>) -> Result<String, RenderError> {
    let agent = || spec.name.clone();
    let pieces = parse_template(&spec.command).map_err(|reason| RenderError::Template {
        agent: agent(),
        reason,
    })?;
    let plain = |p: Placeholder, v: &str| {
        if is_plain_path(v) {
            Ok(v.to_string())
        } else {
            Err(RenderError::NotPlainPath {
                agent: agent(),
                placeholder: p.name(),
                value: v.to_string(),
            })
        }
    };
    let quoted = |p: Placeholder, v: &str| {
        if v.contains('\0') {
            Err(RenderError::Nul {
                agent: agent(),
                placeholder: p.name(),
            })
        } else {
            Ok(shell_single_quote(v))
        }
    };
    let mut out = String::with_capacity(spec.command.len() + inputs.instruction.len() + 64);
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Brace(c) => out.push(c),
            Piece::Slot(p) => {
                let value = match p {
                    Placeholder::InstructionQuoted => quoted(p, inputs.instruction)?,
                    Placeholder::InstructionFile => plain(p, inputs.instruction_file)?,
                    Placeholder::LogQuoted => quoted(p, inputs.log)?,
                    Placeholder::Workdir => plain(p, inputs.workdir)?,
                    Placeholder::Home => plain(p, inputs.home)?,
                    Placeholder::ModelQuoted => {
                        let given = inputs
                            .model
                            .ok_or_else(|| RenderError::MissingModel { agent: agent() })?;
                        let model = spec.model_for_agent(given);
                        if model.is_empty() {
                            return Err(RenderError::EmptyModel {
                                agent: agent(),
                                model: given.to_string(),
                            });
                        }
                        quoted(p, model)?
                    }
                };
                out.push_str(&value);
            }
        }
    }
    Ok(out)
}

/// Whether the command uses `{model_quoted}` (so a model must be given).
pub fn needs_model(spec: &AgentSpec) -> bool {
    parse_template(&spec.command)
        .map(|ps| ps.contains(&Piece::Slot(Placeholder::ModelQuoted)))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::spec::{parse, Format, ModelPrefix};
    use std::process::Command;

    fn spec(command: &str) -> AgentSpec {
        let text = serde_json::json!({"name": "t", "command": command}).to_string();
        parse(&text, Format::Json, "t.json").unwrap()
    }

    fn inputs<'a>(instruction: &'a str, model: Option<&'a str>, log: &'a str) -> RenderInputs<'a> {
        RenderInputs {
            instruction,
            instruction_file: "/logs/agent/instruction.md",
            model,
            log,
            workdir: "/app",
            home: "/home/agent",
        }
    }

    /// Runs `cmd` with /bin/sh and returns its stdout.
    fn sh(cmd: &str) -> String {
        let out = Command::new("/bin/sh").arg("-c").arg(cmd).output().unwrap();
        assert!(out.status.success(), "sh failed: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    const NASTY: &[&str] = &[
        "",
        "plain",
        "it's",
        "''''",
        "a'b\"c\\d",
        "$(touch /tmp/cbrun-pwned) `id` $HOME ${PATH} $((1+1))",
        "line one\nline two\n\n",
        "tab\there; echo injected && false || true | cat > /dev/null &",
        "glob * ? [a-z] ~ ~root {a,b} {instruction_quoted} {{",
        "-n",
        "--flag=value",
        "unicode: é ✓ 日本",
        "\x01\x1b[31mcontrol\x7f",
    ];

    #[test]
    fn quoting_round_trips_through_sh() {
        let s = spec("printf %s {instruction_quoted}");
        for text in NASTY {
            let cmd = render_command(&s, &inputs(text, None, "/l")).unwrap();
            assert_eq!(sh(&cmd), *text, "rendered: {cmd}");
        }
        // Model and log quoting too, in one command line (an empty model
        // is refused, so it gets a stand-in).
        let s = spec("printf '%s|%s|%s' {model_quoted} {log_quoted} {instruction_quoted}");
        for text in NASTY {
            let model = if text.is_empty() { "m" } else { text };
            let cmd = render_command(&s, &inputs(text, Some(model), text)).unwrap();
            assert_eq!(
                sh(&cmd),
                format!("{model}|{text}|{text}"),
                "rendered: {cmd}"
            );
        }
        assert!(!std::path::Path::new("/tmp/cbrun-pwned").exists());
    }

    #[test]
    fn substitutes_every_placeholder_once() {
        let s = spec(
            "cd {workdir} && {{ run {instruction_file} {model_quoted} {home}/x; }} > {log_quoted} # {instruction_quoted}",
        );
        let got = render_command(
            &s,
            &RenderInputs {
                instruction: "{home}",
                instruction_file: "/logs/agent/instruction.md",
                model: Some("m"),
                log: "/logs/agent/agent.log",
                workdir: "/app",
                home: "/home/agent",
            },
        )
        .unwrap();
        assert_eq!(
            got,
            "cd /app && { run /logs/agent/instruction.md 'm' /home/agent/x; } > '/logs/agent/agent.log' # '{home}'"
        );
    }

    #[test]
    fn model_prefix_strip_and_keep() {
        let mut s = spec("printf %s {model_quoted}");
        s.model_prefix = ModelPrefix::Strip;
        let r = |s: &AgentSpec, m| render_command(s, &inputs("", Some(m), "/l")).unwrap();
        assert_eq!(r(&s, "anthropic/claude-x"), "printf %s 'claude-x'");
        assert_eq!(r(&s, "claude-x"), "printf %s 'claude-x'");
        assert_eq!(r(&s, "openrouter/vendor/m"), "printf %s 'vendor/m'");
        for empty in ["anthropic/", ""] {
            assert!(matches!(
                render_command(&s, &inputs("", Some(empty), "/l")),
                Err(RenderError::EmptyModel { .. })
            ));
        }
        s.model_prefix = ModelPrefix::Keep;
        assert_eq!(
            r(&s, "anthropic/claude-x"),
            "printf %s 'anthropic/claude-x'"
        );
    }

    #[test]
    fn missing_model_is_an_error_only_when_used() {
        let s = spec("run {model_quoted}");
        assert!(needs_model(&s));
        let e = render_command(&s, &inputs("", None, "/l")).unwrap_err();
        assert_eq!(e, RenderError::MissingModel { agent: "t".into() });
        assert!(e.to_string().contains("{model_quoted}"), "{e}");
        let s = spec("run {instruction_quoted}");
        assert!(!needs_model(&s));
        render_command(&s, &inputs("", None, "/l")).unwrap();
    }

    #[test]
    fn unquoted_paths_must_be_plain() {
        let s = spec("cd {workdir}");
        let mut i = inputs("", None, "/l");
        i.workdir = "/app; rm -rf /";
        let e = render_command(&s, &i).unwrap_err();
        assert!(
            matches!(
                e,
                RenderError::NotPlainPath {
                    placeholder: "workdir",
                    ..
                }
            ),
            "{e}"
        );
        let s = spec("printf %s {log_quoted}");
        let e = render_command(&s, &inputs("", None, "/a\0b")).unwrap_err();
        assert!(
            matches!(
                e,
                RenderError::Nul {
                    placeholder: "log_quoted",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn template_errors() {
        let err = |t: &str| parse_template(t).unwrap_err();
        assert!(err("a {nope} b").starts_with("unknown placeholder {nope}"));
        assert!(err("a {} b").starts_with("unknown placeholder {}"));
        assert!(err("a { b").starts_with("unclosed `{` at byte 2"));
        assert!(err("a {{x} b").starts_with("unmatched `}` at byte 5"));
        assert!(err("a {x {home} b").starts_with("unclosed `{` at byte 2"));
        assert!(err("a } b").starts_with("unmatched `}` at byte 2"));
        assert_eq!(
            parse_template("{{{home}}}").unwrap(),
            vec![
                Piece::Brace('{'),
                Piece::Slot(Placeholder::Home),
                Piece::Brace('}')
            ]
        );
    }
}
