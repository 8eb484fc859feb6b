//! Agent specs: declarative JSON or TOML files saying how to install and run
//! one coding-agent CLI in the solve sandbox.
//!
//! Specs are cbrun's own format, so unlike case files they are strict:
//! an unknown field is an error (a typo must not silently fall back to a
//! default). Every error is one line, `FILE: field FIELD: reason`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::render::parse_template;
use crate::usage::UsageFormat;

pub const DEFAULT_INSTALL_TIMEOUT_SEC: u64 = 600;
pub const DEFAULT_SETUP_TIMEOUT_SEC: u64 = 300;
pub const DEFAULT_HOME: &str = "/home/agent";
/// Longest accepted `name` (it names folders and records).
pub const MAX_NAME_LEN: usize = 128;

/// Which identity the agent runs as inside the solve sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunAs {
    Root,
    #[default]
    Nonroot,
}

/// What to do with a `provider/` prefix on the model name before it reaches
/// the agent's command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelPrefix {
    /// Pass the model through unchanged (`anthropic/claude-x`).
    #[default]
    Keep,
    /// Drop everything up to and including the first `/` (`claude-x`).
    Strip,
}

/// One agent spec, with defaults filled in.
///
/// Only `command` is a template (see [`render_command`](super::render_command));
/// the scripts and `version_command` are plain shell, so `${VAR}` needs no
/// escaping there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// `[A-Za-z0-9._-]+`.
    pub name: String,
    /// Shell command line with `{placeholder}`s; `{{`/`}}` are literal braces.
    pub command: String,
    /// Names of variables forwarded from cbrun's environment. Only the names
    /// are ever recorded.
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// Run in the solve sandbox before the agent (e.g. install the CLI).
    #[serde(default)]
    pub install_script: Option<String>,
    /// Run after `install_script`, before the agent.
    #[serde(default)]
    pub setup_script: Option<String>,
    #[serde(default = "default_install_timeout")]
    pub install_timeout_sec: u64,
    #[serde(default = "default_setup_timeout")]
    pub setup_timeout_sec: u64,
    #[serde(default)]
    pub run_as: RunAs,
    #[serde(default)]
    pub model_prefix: ModelPrefix,
    /// Absolute; the agent's `$HOME`, where it installs itself (the rootfs
    /// is read-only).
    #[serde(default = "default_home")]
    pub home: String,
    /// Prints the agent's version, for records.
    #[serde(default)]
    pub version_command: Option<String>,
    /// Fixed variables set for the agent.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The CLI version `install_script` installs, as
    /// `$CBRUN_AGENT_VERSION` (`--agent-version` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Relative to `home`: the folder `install_script` fills with the CLI.
    /// It is what the install cache keeps and binds read-only into later
    /// trials' homes (see [`crate::agent::cache`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_dir: Option<String>,
    /// The format of the usage the CLI prints into the agent log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_format: Option<UsageFormat>,
    /// Globs relative to `home` (`*`, `?`, `**`) naming the CLI's session
    /// transcripts; the record lists what they match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transcripts: Vec<String>,
    /// Host names of the CLI's model API, besides the hosts of any
    /// `*_BASE_URL` variable it gets: failed connections to them are
    /// infrastructure signals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_hosts: Vec<String>,
}

fn default_install_timeout() -> u64 {
    DEFAULT_INSTALL_TIMEOUT_SEC
}

fn default_setup_timeout() -> u64 {
    DEFAULT_SETUP_TIMEOUT_SEC
}

fn default_home() -> String {
    DEFAULT_HOME.to_string()
}

/// Every field a spec may have, in the order they are checked.
pub const FIELDS: &[&str] = &[
    "name",
    "command",
    "env_passthrough",
    "install_script",
    "setup_script",
    "install_timeout_sec",
    "setup_timeout_sec",
    "run_as",
    "model_prefix",
    "home",
    "version_command",
    "env",
    "version",
    "install_dir",
    "usage_format",
    "transcripts",
    "api_hosts",
];

impl AgentSpec {
    /// `sha256:<hex>` of the spec's canonical JSON (keys sorted, defaults
    /// filled in), so the JSON and TOML forms of one spec hash the same.
    pub fn hash(&self) -> String {
        let value = serde_json::to_value(self).expect("an AgentSpec always serialises");
        let mut canon = String::new();
        canonical_json(&value, &mut canon);
        let digest = Sha256::digest(canon.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    /// The model name as the agent's command line gets it.
    pub fn model_for_agent<'m>(&self, model: &'m str) -> &'m str {
        match self.model_prefix {
            ModelPrefix::Keep => model,
            ModelPrefix::Strip => model.split_once('/').map_or(model, |(_, rest)| rest),
        }
    }

    /// Checks the rules serde cannot express; `Err((field, reason))`.
    fn validate(&self) -> Result<(), (String, String)> {
        let err = |f: &str, r: String| Err((f.to_string(), r));
        if let Err(r) = check_name(&self.name) {
            return err("name", r);
        }
        if self.command.trim().is_empty() {
            return err("command", "must not be empty".into());
        }
        if self.command.contains('\0') {
            return err("command", "contains a NUL byte".into());
        }
        if let Err(r) = parse_template(&self.command) {
            return err("command", r);
        }
        for (field, script) in [
            ("install_script", &self.install_script),
            ("setup_script", &self.setup_script),
            ("version_command", &self.version_command),
        ] {
            match script {
                Some(s) if s.trim().is_empty() => {
                    return err(field, "must not be empty (leave it out instead)".into())
                }
                Some(s) if s.contains('\0') => return err(field, "contains a NUL byte".into()),
                _ => {}
            }
        }
        for (field, secs) in [
            ("install_timeout_sec", self.install_timeout_sec),
            ("setup_timeout_sec", self.setup_timeout_sec),
        ] {
            if secs == 0 {
                return err(field, "must be at least 1".into());
            }
        }
        if let Err(r) = check_home(&self.home) {
            return err("home", r);
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, n) in self.env_passthrough.iter().enumerate() {
            let at = format!("env_passthrough[{i}]");
            if let Err(r) = check_env_name(n) {
                return err(&at, r);
            }
            if !seen.insert(n.as_str()) {
                return err(&at, format!("{n} is listed more than once"));
            }
            if self.env.contains_key(n) {
                return err(&at, format!("{n} is also set in env; keep one"));
            }
        }
        for (k, v) in &self.env {
            let at = format!("env.{k}");
            if let Err(r) = check_env_name(k) {
                return err(&at, r);
            }
            if v.contains('\0') {
                return err(&at, "value contains a NUL byte".into());
            }
        }
        if let Some(v) = &self.version {
            if let Err(r) = check_version(v) {
                return err("version", r);
            }
        }
        if let Some(d) = &self.install_dir {
            if let Err(r) = check_relative(d, false) {
                return err("install_dir", r);
            }
            if self.install_script.is_none() {
                return err("install_dir", "needs an install_script to fill it".into());
            }
        }
        for (i, g) in self.transcripts.iter().enumerate() {
            if let Err(r) = check_relative(g, true) {
                return err(&format!("transcripts[{i}]"), r);
            }
        }
        for (i, h) in self.api_hosts.iter().enumerate() {
            match crate::net::policy::Host::parse(h) {
                Ok(crate::net::policy::Host::Name(_)) => {}
                Ok(_) => {
                    return err(
                        &format!("api_hosts[{i}]"),
                        format!("{h:?}: a host name, not an address"),
                    )
                }
                Err(why) => return err(&format!("api_hosts[{i}]"), format!("{h:?}: {why}")),
            }
        }
        Ok(())
    }
}

/// Serialises `v` with object keys sorted at every level, whatever order the
/// map type keeps.
fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn check_name(s: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if s.is_empty() || s.len() > MAX_NAME_LEN || !s.chars().all(ok) {
        return Err(format!(
            "{s:?} is not a valid name (1-{MAX_NAME_LEN} of A-Z a-z 0-9 . _ -)"
        ));
    }
    Ok(())
}

/// A variable name an agent's environment may set or pass through, in a
/// spec, a plan or on the command line.
pub fn check_env_name(s: &str) -> Result<(), String> {
    let mut chars = s.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "{s:?}: not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    if s == "HOME" {
        return Err("HOME: the agent's home is its spec's `home`".into());
    }
    Ok(())
}

/// Characters allowed in paths that are pasted into the command unquoted
/// (`{home}`, `{workdir}`, `{instruction_file}`).
pub(crate) fn is_plain_path(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./+@%:,=-".contains(c))
}

fn check_home(s: &str) -> Result<(), String> {
    if !s.starts_with('/') {
        return Err(format!("{s:?} must be an absolute path"));
    }
    if !is_plain_path(s) {
        return Err(format!(
            "{s:?} may only hold A-Z a-z 0-9 _ . / + @ % : , = - (it is pasted into shell commands unquoted)"
        ));
    }
    if s.split('/').any(|c| c == "..") {
        return Err(format!("{s:?} must not contain `..`"));
    }
    if s.trim_end_matches('/').is_empty() {
        return Err("must not be `/`".into());
    }
    Ok(())
}

/// A version pin: `latest`, a tag, or a version number.
pub fn check_version(s: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+');
    if s.is_empty() || s.len() > 64 || !s.chars().all(ok) {
        return Err(format!(
            "{s:?}: not a version (1-64 of A-Z a-z 0-9 . _ - +)"
        ));
    }
    Ok(())
}

/// A path relative to the home (globs allowed with `glob`).
fn check_relative(s: &str, glob: bool) -> Result<(), String> {
    if s.is_empty() || s.len() > 256 {
        return Err(format!("{s:?} must be 1-256 characters"));
    }
    if s.starts_with('/') {
        return Err(format!("{s:?} must be relative to the home"));
    }
    let allowed = |c: char| is_plain_path(&c.to_string()) || (glob && matches!(c, '*' | '?'));
    if !s.chars().all(allowed) {
        return Err(format!(
            "{s:?} may only hold A-Z a-z 0-9 _ . / + @ % : , = -{}",
            if glob { " * ?" } else { "" }
        ));
    }
    if s.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(format!("{s:?} must not have empty, `.` or `..` components"));
    }
    Ok(())
}

/// The file format of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Json,
    Toml,
}

impl Format {
    /// By extension: `.json` or `.toml` (any case).
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Format::Json),
            "toml" => Some(Format::Toml),
            _ => None,
        }
    }
}

/// Why a spec (or an agent argument) was refused. Displays as one line:
/// `ORIGIN: field FIELD: reason`, or `ORIGIN: reason` when no single field
/// is at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    /// The spec's file, `shipped:NAME`, or the argument being resolved.
    pub origin: String,
    pub field: Option<String>,
    pub reason: String,
}

impl SpecError {
    pub(crate) fn new(origin: &str, field: Option<&str>, reason: &str) -> Self {
        SpecError {
            origin: one_line(origin),
            field: field.map(one_line),
            reason: one_line(reason),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}: field {}: {}", self.origin, field, self.reason),
            None => write!(f, "{}: {}", self.origin, self.reason),
        }
    }
}

/// Keeps messages on one line whatever the input (paths, parser output).
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for part in s
        .split(|c: char| c.is_control())
        .filter(|p| !p.trim().is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part.trim());
    }
    out
}

/// Reads and checks a spec file; the format comes from its extension.
pub fn load(path: &Path) -> Result<AgentSpec, SpecError> {
    let origin = path.display().to_string();
    let format = Format::from_path(path).ok_or_else(|| {
        SpecError::new(
            &origin,
            None,
            "unsupported file type: an agent spec ends in .json or .toml",
        )
    })?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| SpecError::new(&origin, None, &format!("cannot read: {e}")))?;
    parse(&text, format, &origin)
}

/// Parses and checks spec text. `origin` names it in errors.
pub fn parse(text: &str, format: Format, origin: &str) -> Result<AgentSpec, SpecError> {
    let doc: Value = match format {
        Format::Json => serde_json::from_str(text)
            .map_err(|e| SpecError::new(origin, None, &format!("invalid JSON: {e}")))?,
        Format::Toml => {
            let table: toml::Table = toml::from_str(text)
                .map_err(|e| SpecError::new(origin, None, &toml_error(text, &e)))?;
            serde_json::to_value(table)
                .map_err(|e| SpecError::new(origin, None, &format!("invalid TOML: {e}")))?
        }
    };
    let Value::Object(map) = doc else {
        return Err(SpecError::new(
            origin,
            None,
            &format!("expected a table of fields, found {}", kind(&doc)),
        ));
    };
    check_fields(&map).map_err(|(f, r)| SpecError::new(origin, Some(&f), &r))?;
    // Every key and type was checked above, so this only fills defaults.
    let spec: AgentSpec = serde_json::from_value(Value::Object(map))
        .map_err(|e| SpecError::new(origin, None, &e.to_string()))?;
    spec.validate()
        .map_err(|(f, r)| SpecError::new(origin, Some(&f), &r))?;
    Ok(spec)
}

/// toml's own message spans several lines with a source excerpt; keep the
/// message and its line number.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("invalid TOML at line {line}: {}", e.message())
        }
        None => format!("invalid TOML: {}", e.message()),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

/// Unknown and missing fields, and each field's type, reported at the field
/// (serde alone would name neither the field nor the list element).
fn check_fields(m: &Map<String, Value>) -> Result<(), (String, String)> {
    if let Some(k) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err((
            k.clone(),
            format!("unknown field (known: {})", FIELDS.join(", ")),
        ));
    }
    for required in ["name", "command"] {
        if m.get(required).is_none_or(Value::is_null) {
            return Err((required.to_string(), "missing (required)".into()));
        }
    }
    for key in ["name", "command", "home"] {
        of_type::<String>(m, key)?;
    }
    for key in ["install_script", "setup_script", "version_command"] {
        of_type::<Option<String>>(m, key)?;
    }
    for key in ["install_timeout_sec", "setup_timeout_sec"] {
        of_type::<u64>(m, key)?;
    }
    of_type::<RunAs>(m, "run_as")?;
    for key in ["version", "install_dir"] {
        of_type::<Option<String>>(m, key)?;
    }
    of_type::<Option<UsageFormat>>(m, "usage_format")?;
    for key in ["transcripts", "api_hosts"] {
        match m.get(key) {
            None => {}
            Some(Value::Array(items)) => {
                for (i, v) in items.iter().enumerate() {
                    if !v.is_string() {
                        return Err((
                            format!("{key}[{i}]"),
                            format!("expected a string, found {}", kind(v)),
                        ));
                    }
                }
            }
            Some(v) => {
                return Err((
                    key.into(),
                    format!("expected a list of strings, found {}", kind(v)),
                ))
            }
        }
    }
    of_type::<ModelPrefix>(m, "model_prefix")?;
    match m.get("env_passthrough") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                if !v.is_string() {
                    return Err((
                        format!("env_passthrough[{i}]"),
                        format!("expected a string, found {}", kind(v)),
                    ));
                }
            }
        }
        Some(v) => {
            return Err((
                "env_passthrough".into(),
                format!("expected a list of names, found {}", kind(v)),
            ))
        }
    }
    match m.get("env") {
        None => {}
        Some(Value::Object(vars)) => {
            for (k, v) in vars {
                if !v.is_string() {
                    return Err((
                        format!("env.{k}"),
                        format!("expected a string, found {}", kind(v)),
                    ));
                }
            }
        }
        Some(v) => {
            return Err((
                "env".into(),
                format!("expected a table of NAME = \"value\", found {}", kind(v)),
            ))
        }
    }
    Ok(())
}

fn of_type<T: DeserializeOwned>(m: &Map<String, Value>, key: &str) -> Result<(), (String, String)> {
    match m.get(key) {
        None => Ok(()),
        Some(v) => serde_json::from_value::<T>(v.clone())
            .map(drop)
            .map_err(|e| (key.to_string(), e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = r#"
name = "demo"
command = "demo-cli --prompt {instruction_quoted} --model {model_quoted} > {log_quoted}"
env_passthrough = ["DEMO_API_KEY"]
install_script = "npm install -g --prefix \"$HOME/.local\" demo-cli"
run_as = "nonroot"
model_prefix = "strip"

[env]
DEMO_TELEMETRY = "0"
"#;

    const JSON: &str = r#"{
        "env": {"DEMO_TELEMETRY": "0"},
        "model_prefix": "strip",
        "command": "demo-cli --prompt {instruction_quoted} --model {model_quoted} > {log_quoted}",
        "name": "demo",
        "install_script": "npm install -g --prefix \"$HOME/.local\" demo-cli",
        "env_passthrough": ["DEMO_API_KEY"],
        "install_timeout_sec": 600
    }"#;

    fn toml_err(text: &str) -> String {
        parse(text, Format::Toml, "agents/x.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn json_and_toml_hash_equal() {
        let a = parse(TOML, Format::Toml, "a.toml").unwrap();
        let b = parse(JSON, Format::Json, "b.json").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.hash(), b.hash());
        assert!(a.hash().starts_with("sha256:") && a.hash().len() == 7 + 64);
        // Defaults are filled in.
        assert_eq!(a.home, DEFAULT_HOME);
        assert_eq!(a.setup_timeout_sec, DEFAULT_SETUP_TIMEOUT_SEC);
        assert_eq!(a.run_as, RunAs::Nonroot);
        // Any change shows in the hash.
        let mut c = a.clone();
        c.setup_timeout_sec += 1;
        assert_ne!(a.hash(), c.hash());
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let v: Value = serde_json::from_str(r#"{"b": [{"z": 1, "a": null}], "a": "x"}"#).unwrap();
        let mut s = String::new();
        canonical_json(&v, &mut s);
        assert_eq!(s, r#"{"a":"x","b":[{"a":null,"z":1}]}"#);
    }

    #[test]
    fn unknown_field_is_named() {
        let e = toml_err("name = \"x\"\ncommand = \"run\"\nrun_ass = \"root\"\n");
        assert!(
            e.starts_with("agents/x.toml: field run_ass: unknown field"),
            "{e}"
        );
        let e = parse(
            r#"{"name": "x", "command": "run", "extra": 1}"#,
            Format::Json,
            "s.json",
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("extra"));
    }

    #[test]
    fn bad_values_name_their_field() {
        let cases = [
            ("name = \"a b\"\ncommand = \"x\"", "name"),
            ("name = \"\"\ncommand = \"x\"", "name"),
            ("command = \"x\"", "name"),
            ("name = \"a\"", "command"),
            ("name = \"a\"\ncommand = \"  \"", "command"),
            (
                "name = \"a\"\ncommand = \"x\"\nrun_as = \"admin\"",
                "run_as",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nmodel_prefix = \"drop\"",
                "model_prefix",
            ),
            ("name = \"a\"\ncommand = \"x\"\nhome = \"agent\"", "home"),
            ("name = \"a\"\ncommand = \"x\"\nhome = \"/h/$(id)\"", "home"),
            (
                "name = \"a\"\ncommand = \"x\"\nhome = \"/h/../etc\"",
                "home",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\ninstall_timeout_sec = -1",
                "install_timeout_sec",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nsetup_timeout_sec = 0",
                "setup_timeout_sec",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nenv_passthrough = \"KEY\"",
                "env_passthrough",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nenv_passthrough = [\"A\", 1]",
                "env_passthrough[1]",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nenv_passthrough = [\"A-B\"]",
                "env_passthrough[0]",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nenv_passthrough = [\"A\", \"A\"]",
                "env_passthrough[1]",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nenv_passthrough = [\"HOME\"]",
                "env_passthrough[0]",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nenv_passthrough = [\"K\"]\n[env]\nK = \"v\"",
                "env_passthrough[0]",
            ),
            ("name = \"a\"\ncommand = \"x\"\n[env]\nK = 1", "env.K"),
            (
                "name = \"a\"\ncommand = \"x\"\n[env]\n\"1K\" = \"v\"",
                "env.1K",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nsetup_script = \"\"",
                "setup_script",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nversion = \"1 2\"",
                "version",
            ),
            ("name = \"a\"\ncommand = \"x\"\nversion = 2", "version"),
            (
                "name = \"a\"\ncommand = \"x\"\ninstall_script = \"i\"\ninstall_dir = \"../x\"",
                "install_dir",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\ninstall_script = \"i\"\ninstall_dir = \"/opt/x\"",
                "install_dir",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\ninstall_dir = \".cli\"",
                "install_dir",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nusage_format = \"claude-json\"",
                "usage_format",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\ntranscripts = [\"/abs/*.jsonl\"]",
                "transcripts[0]",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\ntranscripts = [\"a/../b\"]",
                "transcripts[0]",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\ntranscripts = \"a\"",
                "transcripts",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\napi_hosts = [\"10.0.0.1\"]",
                "api_hosts[0]",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\napi_hosts = [\"bad host\"]",
                "api_hosts[0]",
            ),
        ];
        for (text, field) in cases {
            let e = parse(text, Format::Toml, "agents/x.toml").unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{text:?} gave {e}");
            let line = e.to_string();
            assert!(
                line.starts_with(&format!("agents/x.toml: field {field}: ")),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn new_fields_parse_and_keep_old_hashes() {
        let base = "name = \"a\"\ncommand = \"x\"\n";
        let old = parse(base, Format::Toml, "a.toml").unwrap();
        // Fields left out are not serialised: a spec written before they
        // existed keeps its hash.
        let json = serde_json::to_string(&old).unwrap();
        for f in [
            "version",
            "install_dir",
            "usage_format",
            "transcripts",
            "api_hosts",
        ] {
            assert!(!json.contains(&format!("\"{f}\":")), "{json}");
        }
        let full = format!(
            "{base}install_script = \"i\"\nversion = \"2.1.197\"\ninstall_dir = \".cli\"\nusage_format = \"codex-json\"\ntranscripts = [\".codex/sessions/**/*.jsonl\"]\napi_hosts = [\"api.openai.com\"]\n"
        );
        let s = parse(&full, Format::Toml, "a.toml").unwrap();
        assert_eq!(s.version.as_deref(), Some("2.1.197"));
        assert_eq!(s.install_dir.as_deref(), Some(".cli"));
        assert_eq!(s.usage_format, Some(UsageFormat::CodexJson));
        assert_eq!(s.transcripts, [".codex/sessions/**/*.jsonl"]);
        assert_eq!(s.api_hosts, ["api.openai.com"]);
        assert_ne!(s.hash(), old.hash());
    }

    #[test]
    fn run_as_error_lists_choices() {
        let e = toml_err("name = \"a\"\ncommand = \"x\"\nrun_as = \"admin\"");
        assert!(e.contains("root") && e.contains("nonroot"), "{e}");
    }

    #[test]
    fn unknown_placeholder_is_named() {
        let e = toml_err("name = \"a\"\ncommand = \"run {instructions}\"");
        assert!(
            e.starts_with("agents/x.toml: field command: unknown placeholder {instructions}"),
            "{e}"
        );
        for bad in ["run {", "run }", "run {}", "echo ${HOME}"] {
            let text = format!("name = \"a\"\ncommand = {bad:?}");
            let e = parse(&text, Format::Toml, "x.toml").unwrap_err();
            assert_eq!(e.field.as_deref(), Some("command"), "{bad}: {e}");
        }
        // Doubled braces are literal, and scripts are not templates.
        let ok = "name = \"a\"\ncommand = \"{{ echo; }}\"\nsetup_script = \"echo ${HOME}\"";
        parse(ok, Format::Toml, "x.toml").unwrap();
    }

    #[test]
    fn syntax_errors_are_one_line() {
        let e = toml_err("name = \"a\"\ncommand = \n");
        assert!(
            e.starts_with("agents/x.toml: invalid TOML at line 2"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let e = parse("{\"name\": ", Format::Json, "s.json").unwrap_err();
        assert!(e.to_string().starts_with("s.json: invalid JSON"), "{e}");
        let e = parse("[1]", Format::Json, "s.json").unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.json: expected a table of fields, found an array"
        );
    }

    #[test]
    fn load_picks_format_by_extension() {
        let dir = std::env::temp_dir().join(format!("cbrun-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = dir.join("demo.toml");
        let j = dir.join("demo.JSON");
        std::fs::write(&t, TOML).unwrap();
        std::fs::write(&j, JSON).unwrap();
        assert_eq!(load(&t).unwrap().hash(), load(&j).unwrap().hash());
        let y = dir.join("demo.yaml");
        std::fs::write(&y, "name: x").unwrap();
        let e = load(&y).unwrap_err().to_string();
        assert!(e.contains("demo.yaml: unsupported file type"), "{e}");
        let e = load(&dir.join("missing.toml")).unwrap_err().to_string();
        assert!(e.contains("missing.toml: cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn model_prefix() {
        let mut s = parse(TOML, Format::Toml, "a.toml").unwrap();
        assert_eq!(s.model_for_agent("anthropic/claude-x"), "claude-x");
        assert_eq!(s.model_for_agent("openrouter/a/b"), "a/b");
        assert_eq!(s.model_for_agent("claude-x"), "claude-x");
        s.model_prefix = ModelPrefix::Keep;
        assert_eq!(
            s.model_for_agent("anthropic/claude-x"),
            "anthropic/claude-x"
        );
    }
}
