//! The specs shipped inside the binary, and what an `--agent` argument
//! names: a shipped spec, a spec file, a replay folder, a case's own
//! control (`replay:@NAME`), or no agent.

use std::fmt;
use std::path::{Path, PathBuf};

use super::spec::{load, parse, AgentSpec, Format, SpecError};
use crate::case::Case;

/// The shipped specs, by name (`agents/NAME.toml` at the repository top).
const SHIPPED: [(&str, &str); 4] = [
    ("codex", include_str!("../../agents/codex.toml")),
    ("claude-code", include_str!("../../agents/claude-code.toml")),
    ("opencode", include_str!("../../agents/opencode.toml")),
    ("cursor", include_str!("../../agents/cursor.toml")),
];

/// Where a spec came from; displays as the path or `shipped:NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecSource {
    File(PathBuf),
    Shipped(&'static str),
}

impl fmt::Display for SpecSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecSource::File(p) => write!(f, "{}", p.display()),
            SpecSource::Shipped(name) => write!(f, "shipped:{name}"),
        }
    }
}

/// What an agent argument resolved to.
// One per run: boxing the spec would only make matching clumsier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentRef {
    /// Run this spec.
    Spec(AgentSpec, SpecSource),
    /// Replay a recorded workspace from this folder instead of running an agent.
    Replay(PathBuf),
    /// Replay each case's own control of this name (`controls/NAME/app`):
    /// resolved against the case with [`for_case`] before the trial runs.
    ReplayControl(String),
    /// No agent: judge `/app` as it is.
    None,
}

/// The names of the shipped specs.
pub fn shipped_names() -> Vec<&'static str> {
    SHIPPED.iter().map(|(n, _)| *n).collect()
}

/// Every shipped spec, parsed. They are checked by the tests, so a parse
/// failure here is a build defect.
pub fn shipped() -> Vec<(&'static str, AgentSpec)> {
    SHIPPED
        .iter()
        .map(|(name, _)| (*name, shipped_spec(name).expect("shipped spec exists")))
        .collect()
}

/// One shipped spec by name.
pub fn shipped_spec(name: &str) -> Option<AgentSpec> {
    let (name, text) = SHIPPED.iter().find(|(n, _)| *n == name)?;
    let spec = parse(text, Format::Toml, &format!("shipped:{name}"))
        .unwrap_or_else(|e| panic!("shipped agent spec is invalid: {e}"));
    Some(spec)
}

/// Resolves an agent argument:
/// - `none`: no agent;
/// - `replay:@NAME`: each case's control `NAME` (checked per case by
///   [`for_case`]);
/// - `replay:DIR`: DIR must be an existing directory;
/// - a path to a `.json`/`.toml` spec (anything with a `/` or one of those
///   extensions is taken as a path);
/// - the name of a shipped spec (`codex`, `claude-code`, `opencode`,
///   `cursor`), also accepted as `shipped:NAME`.
pub fn resolve(arg: &str) -> Result<AgentRef, SpecError> {
    if arg.trim().is_empty() {
        return Err(SpecError::new(
            "agent",
            None,
            "empty agent argument (give a shipped name, a spec file, replay:DIR or none)",
        ));
    }
    if arg == "none" {
        return Ok(AgentRef::None);
    }
    if let Some(dir) = arg.strip_prefix("replay:") {
        if dir.is_empty() {
            return Err(SpecError::new(
                arg,
                None,
                "replay: needs a directory (replay:DIR)",
            ));
        }
        if let Some(name) = dir.strip_prefix('@') {
            return if valid_control_name(name) {
                Ok(AgentRef::ReplayControl(name.to_owned()))
            } else {
                Err(SpecError::new(
                    arg,
                    None,
                    "replay:@NAME needs a control name (letters, digits, . _ -)",
                ))
            };
        }
        let path = PathBuf::from(dir);
        return match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => Ok(AgentRef::Replay(path)),
            Ok(_) => Err(SpecError::new(
                arg,
                None,
                &format!("{dir} is not a directory"),
            )),
            Err(e) => Err(SpecError::new(arg, None, &format!("cannot use {dir}: {e}"))),
        };
    }
    let shipped_name = arg.strip_prefix("shipped:").unwrap_or(arg);
    if let Some((name, _)) = SHIPPED.iter().find(|(n, _)| *n == shipped_name) {
        let spec = shipped_spec(name).expect("listed above");
        return Ok(AgentRef::Spec(spec, SpecSource::Shipped(name)));
    }
    let path = Path::new(arg);
    if arg.contains('/') || Format::from_path(path).is_some() {
        let spec = load(path)?;
        return Ok(AgentRef::Spec(spec, SpecSource::File(path.to_path_buf())));
    }
    Err(SpecError::new(
        arg,
        None,
        &format!(
            "unknown agent: not a shipped spec ({}), nor a path to a .json or .toml spec; use replay:DIR or none for no agent",
            shipped_names().join(", ")
        ),
    ))
}

/// A control's folder name: what `replay:@NAME` may name.
fn valid_control_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `agent` for one case: `replay:@NAME` becomes a replay of the case's
/// control `NAME`; every other agent is itself.
pub fn for_case(agent: &AgentRef, case: &Case) -> Result<AgentRef, SpecError> {
    let AgentRef::ReplayControl(name) = agent else {
        return Ok(agent.clone());
    };
    match case.controls.iter().find(|c| &c.name == name) {
        Some(c) => Ok(AgentRef::Replay(c.app_dir.clone())),
        None => {
            let have: Vec<&str> = case.controls.iter().map(|c| c.name.as_str()).collect();
            Err(SpecError::new(
                &format!("replay:@{name}"),
                None,
                &format!(
                    "case {} has no control {name} (its controls: {})",
                    case.id,
                    if have.is_empty() {
                        "none".to_owned()
                    } else {
                        have.join(", ")
                    }
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::render::{needs_model, render_command, RenderInputs};
    use crate::agent::spec::{ModelPrefix, RunAs};
    use std::process::Command;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cbrun-builtin-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// `sh -n`: the text parses as a POSIX shell script.
    fn assert_sh_syntax(what: &str, script: &str) {
        let out = Command::new("/bin/sh")
            .args(["-n", "-c", script])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{what} is not valid sh: {}\n{script}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn every_shipped_spec_loads_and_renders() {
        let all = shipped();
        assert_eq!(
            all.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            ["codex", "claude-code", "opencode", "cursor"]
        );
        for (name, spec) in all {
            assert_eq!(spec.name, name, "a shipped spec's name is its file name");
            assert_eq!(spec.run_as, RunAs::Nonroot, "{name}");
            assert!(spec.install_script.is_some(), "{name} installs itself");
            assert!(spec.version_command.is_some(), "{name}");
            assert!(needs_model(&spec), "{name} takes a model");
            let instruction = "Build it.\nIt's in /environment; don't `rm` $HOME.";
            let cmd = render_command(
                &spec,
                &RenderInputs {
                    instruction,
                    instruction_file: "/logs/agent/instruction.md",
                    model: Some("provider/some-model"),
                    log: "/logs/agent/agent.log",
                    workdir: "/app",
                    home: &spec.home,
                },
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let model = match spec.model_prefix {
                ModelPrefix::Strip => "'some-model'",
                ModelPrefix::Keep => "'provider/some-model'",
            };
            assert!(cmd.contains(model), "{name}: {cmd}");
            assert!(cmd.contains("'/logs/agent/agent.log'"), "{name}: {cmd}");
            assert!(cmd.contains(r"It'\''s in /environment"), "{name}: {cmd}");
            assert_sh_syntax(&format!("{name} command"), &cmd);
            for (what, script) in [
                ("install_script", &spec.install_script),
                ("setup_script", &spec.setup_script),
                ("version_command", &spec.version_command),
            ] {
                if let Some(s) = script {
                    assert_sh_syntax(&format!("{name} {what}"), s);
                }
            }
            // Recorded as names only: no value may sit in the spec.
            for var in &spec.env_passthrough {
                assert!(!spec.env.contains_key(var), "{name}: {var}");
            }
            // Every CLI's usage is read, and CA bundles reach its install.
            assert!(spec.usage_format.is_some(), "{name}");
            assert!(!spec.transcripts.is_empty(), "{name}");
            for ca in ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"] {
                assert!(spec.env_passthrough.iter().any(|v| v == ca), "{name}: {ca}");
            }
            // npm CLIs are pinned to a release and cached; the pin is what
            // the install script installs.
            let install = spec.install_script.as_deref().unwrap();
            if install.contains("npm install") {
                let v = spec
                    .version
                    .as_deref()
                    .unwrap_or_else(|| panic!("{name} is not pinned"));
                assert!(crate::agent::cache::pinned(v), "{name}: {v}");
                assert!(
                    install.contains("@$CBRUN_AGENT_VERSION\""),
                    "{name}: {install}"
                );
                assert_eq!(spec.install_dir.as_deref(), Some(".cli"), "{name}");
                assert!(!install.contains("@latest"), "{name}");
            }
        }
        let claude = shipped_spec("claude-code").unwrap();
        assert_eq!(
            claude.version.as_deref(),
            Some("2.1.197"),
            "the last release for node 20"
        );
    }

    /// Each shipped command, run by /bin/sh against a stub CLI: the stub gets
    /// the instruction and model as single arguments, its output reaches the
    /// log, and its exit status survives the pipe into `tee`.
    #[test]
    fn shipped_commands_run_against_a_stub_cli() {
        use std::os::unix::fs::PermissionsExt;
        let d = scratch("stub");
        let home = d.join("home");
        let work = d.join("app");
        std::fs::create_dir_all(&work).unwrap();
        // npm installs go to the cached install_dir, Cursor's to ~/.local.
        for dir in [".local/bin", ".cli/bin"] {
            let bin = home.join(dir);
            std::fs::create_dir_all(&bin).unwrap();
            for cli in ["codex", "claude", "opencode", "cursor-agent"] {
                let stub = bin.join(cli);
                std::fs::write(&stub, "#!/bin/sh\npwd\nprintf '<%s>\\n' \"$@\"\nexit 7\n").unwrap();
                std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let instruction = "two\nlines, a 'quote' and $(not run)";
        for (name, spec) in shipped() {
            let log = d.join(format!("{name}.log"));
            let cmd = render_command(
                &spec,
                &RenderInputs {
                    instruction,
                    instruction_file: "/logs/agent/instruction.md",
                    model: Some("prov/m-1"),
                    log: log.to_str().unwrap(),
                    workdir: work.to_str().unwrap(),
                    home: home.to_str().unwrap(),
                },
            )
            .unwrap();
            let out = Command::new("/bin/sh")
                .args(["-c", &cmd])
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(7), "{name}: {out:?}");
            let logged = std::fs::read_to_string(&log).unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), logged, "{name}");
            assert!(
                logged.starts_with(&format!("{}\n", work.display())),
                "{name}: {logged}"
            );
            assert!(
                logged.contains(&format!("<{instruction}>")),
                "{name}: {logged}"
            );
            let model = match spec.model_prefix {
                ModelPrefix::Strip => "<m-1>",
                ModelPrefix::Keep => "<prov/m-1>",
            };
            assert!(logged.contains(model), "{name}: {logged}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Codex's setup script turns OPENAI_BASE_URL into a provider of its
    /// own in ~/.codex/config.toml, and writes none without it.
    #[test]
    fn codex_setup_writes_a_provider_for_a_base_url() {
        let spec = shipped_spec("codex").unwrap();
        let script = spec.setup_script.clone().unwrap();
        let d = scratch("codexcfg");
        let run = |url: Option<&str>| {
            let mut c = Command::new("/bin/sh");
            c.args(["-c", &script])
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("HOME", &d);
            if let Some(u) = url {
                c.env("OPENAI_BASE_URL", u);
            }
            c.output().unwrap()
        };
        let cfg = d.join(".codex/config.toml");
        assert!(run(None).status.success());
        assert!(!cfg.exists(), "no base URL, no provider");
        assert!(run(Some("http://127.0.0.1:8080/v1")).status.success());
        let t: toml::Table = toml::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
        assert_eq!(t["model_provider"].as_str(), Some("cbrun"));
        let p = &t["model_providers"]["cbrun"];
        assert_eq!(p["base_url"].as_str(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(p["wire_api"].as_str(), Some("responses"));
        assert_eq!(p["env_key"].as_str(), Some("CODEX_API_KEY"));
        assert_eq!(p["supports_websockets"].as_bool(), Some(false));
        // A value that would break out of the TOML string is refused.
        let out = run(Some("http://x/\"\nmodel_provider = \"evil"));
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("quote"),
            "{out:?}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn shipped_specs_on_disk_match_the_embedded_ones() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
        for (name, spec) in shipped() {
            let on_disk = load(&dir.join(format!("{name}.toml"))).unwrap();
            assert_eq!(on_disk.hash(), spec.hash(), "{name}");
        }
    }

    #[test]
    fn resolve_shipped_names() {
        for name in ["codex", "claude-code", "opencode", "cursor"] {
            match resolve(name).unwrap() {
                AgentRef::Spec(spec, src) => {
                    assert_eq!(spec.name, name);
                    assert_eq!(src.to_string(), format!("shipped:{name}"));
                    assert_eq!(
                        resolve(&src.to_string()).unwrap(),
                        AgentRef::Spec(spec, src)
                    );
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn resolve_none_and_replay() {
        assert_eq!(resolve("none").unwrap(), AgentRef::None);
        let d = scratch("replay");
        let arg = format!("replay:{}", d.display());
        assert_eq!(resolve(&arg).unwrap(), AgentRef::Replay(d.clone()));

        let missing = d.join("nope");
        let e = resolve(&format!("replay:{}", missing.display())).unwrap_err();
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );
        let file = d.join("file");
        std::fs::write(&file, "x").unwrap();
        let e = resolve(&format!("replay:{}", file.display())).unwrap_err();
        assert!(
            e.to_string()
                .ends_with(&format!("{} is not a directory", file.display())),
            "{e}"
        );
        assert!(resolve("replay:").is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn replay_of_a_case_control() {
        assert_eq!(
            resolve("replay:@reference").unwrap(),
            AgentRef::ReplayControl("reference".into())
        );
        for bad in ["replay:@", "replay:@../x", "replay:@a/b", "replay:@.hidden"] {
            assert!(resolve(bad).is_err(), "{bad}");
        }
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/case001");
        let case = crate::case::load(&dir).unwrap();
        match for_case(&resolve("replay:@stub").unwrap(), &case).unwrap() {
            AgentRef::Replay(p) => assert!(p.ends_with("controls/stub/app"), "{p:?}"),
            other => panic!("{other:?}"),
        }
        let e = for_case(&AgentRef::ReplayControl("nope".into()), &case).unwrap_err();
        assert!(
            e.to_string().contains("case case001 has no control nope")
                && e.to_string().contains("reference"),
            "{e}"
        );
        // Other agents are themselves.
        assert_eq!(for_case(&AgentRef::None, &case).unwrap(), AgentRef::None);
    }

    #[test]
    fn resolve_paths() {
        let d = scratch("path");
        let p = d.join("mine.toml");
        std::fs::write(
            &p,
            "name = \"mine\"\ncommand = \"mine {instruction_quoted}\"\n",
        )
        .unwrap();
        match resolve(p.to_str().unwrap()).unwrap() {
            AgentRef::Spec(spec, SpecSource::File(f)) => {
                assert_eq!(spec.name, "mine");
                assert_eq!(f, p);
            }
            other => panic!("{other:?}"),
        }
        // A bad spec file reports its own path and field.
        std::fs::write(&p, "name = \"mine\"\ncommand = \"x\"\nmodel = \"y\"\n").unwrap();
        let e = resolve(p.to_str().unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: field model: {}", p.display(), e.reason)
        );
        // Missing files are errors, not unknown names.
        let e = resolve("./nope.json").unwrap_err();
        assert!(e.to_string().starts_with("./nope.json: cannot read"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn resolve_unknown_name() {
        let e = resolve("gemini").unwrap_err();
        assert_eq!(e.origin, "gemini");
        assert!(e.to_string().contains("unknown agent"), "{e}");
        assert!(e.to_string().contains("claude-code"), "{e}");
        assert!(resolve("shipped:gemini").is_err());
        assert!(resolve("").is_err());
    }
}
