//! Checking a plan request and fixing what it depends on: case hashes,
//! spec hashes, image digests; configuration names.

use std::path::Path;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::agent::builtin::{self, AgentRef};
use crate::agent::render::needs_model;
use crate::case::Case;
use crate::image::unpacked::ImageUse;
use crate::net::policy::EgressPolicy;
use crate::sandbox::config::{ByteSize, Cpus};
use crate::sandbox::run::HostView;
use crate::trial::clock;
use crate::trial::provenance;
use crate::trial::solve::{DEFAULT_SOLVE_BUDGET, DEFAULT_STALL};

use super::agent_run;
use super::entry::{open_image, positive_secs};
use super::{err, CaseEntry, ConfigEntry, ConfigSpec, PlanError, PlanRequest, ResolvedPlan};

/// A configuration or control name: it names folders.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with(['.', '-'])
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A name for a configuration given by its agent alone (`--agent SPEC`).
pub fn default_name(agent: &str) -> String {
    let base = if let Some(name) = agent.strip_prefix("replay:@") {
        name.to_owned()
    } else if let Some(dir) = agent.strip_prefix("replay:") {
        let p = Path::new(dir);
        let last = p.file_name().map(|n| n.to_string_lossy().into_owned());
        match last.as_deref() {
            // controls/NAME/app: the control's name.
            Some("app") => p
                .parent()
                .and_then(|q| q.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "replay".into()),
            Some(n) => n.to_owned(),
            None => "replay".into(),
        }
    } else {
        let p = Path::new(agent);
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| agent.to_owned())
    };
    let clean: String = base
        .trim_start_matches(['.', '-'])
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if clean.is_empty() {
        "agent".into()
    } else {
        clean
    }
}

/// Checks `req` and fixes what it depends on. The images the plan names
/// are opened (and so held against `image gc`) for as long as the
/// returned uses live.
pub fn resolve(
    req: &PlanRequest,
    host: &HostView,
) -> Result<(ResolvedPlan, Vec<ImageUse>), PlanError> {
    let origin = &req.origin;
    if req.cases.is_empty() {
        return Err(err(format!("{origin}: cases: none given")));
    }
    if req.repeats == 0 || req.repeats > 100_000 {
        return Err(err(format!(
            "{origin}: repeats: {}: must be 1 to 100000",
            req.repeats
        )));
    }
    let mut cases: Vec<(Case, CaseEntry)> = Vec::new();
    for path in &req.cases {
        let case = crate::case::load(path).map_err(|e| err(crate::error::chain(&e)))?;
        if let Some((_, other)) = cases.iter().find(|(c, _)| c.id == case.id) {
            return Err(err(format!(
                "{origin}: cases: {} and {} are both case {}",
                other.path.display(),
                case.dir.display(),
                case.id
            )));
        }
        let prov = provenance::of_case(&case.dir).map_err(|e| err(crate::error::chain(&e)))?;
        let entry = CaseEntry {
            id: case.id.as_str().to_owned(),
            path: case.dir.clone(),
            sha256: prov.case_sha256,
            language: case.manifest.runner.language_label.clone(),
        };
        cases.push((case, entry));
    }
    let mut configs = Vec::new();
    let mut images = Vec::new();
    for (i, spec) in req.configs.iter().enumerate() {
        let (entry, image) = resolve_config(spec, i, &cases, origin, &req.base, host)?;
        if configs.iter().any(|c: &ConfigEntry| c.name == entry.name) {
            return Err(err(format!(
                "{origin}: config {}: name: used twice (name them: --agent NAME=SPEC, or name = in the plan)",
                entry.name
            )));
        }
        images.extend(image);
        configs.push(entry);
    }
    if configs.is_empty() {
        return Err(err(format!("{origin}: config: none given (--agent SPEC)")));
    }
    let now = SystemTime::now();
    Ok((
        ResolvedPlan {
            run_id: new_run_id(now),
            created_at: clock::rfc3339(now),
            cbrun_version: env!("CARGO_PKG_VERSION").into(),
            repeats: req.repeats,
            cases: cases.into_iter().map(|(_, e)| e).collect(),
            configs,
        },
        images,
    ))
}

fn resolve_config(
    spec: &ConfigSpec,
    index: usize,
    cases: &[(Case, CaseEntry)],
    origin: &str,
    base: &Path,
    host: &HostView,
) -> Result<(ConfigEntry, Option<ImageUse>), PlanError> {
    let name = spec
        .name
        .clone()
        .unwrap_or_else(|| default_name(&spec.agent));
    let shown = format!(
        "{origin}: config {}",
        if spec.name.is_some() {
            name.clone()
        } else {
            (index + 1).to_string()
        }
    );
    if !valid_name(&name) {
        return Err(err(format!(
            "{shown}: name: {name:?}: 1-64 of A-Z a-z 0-9 . _ -, not starting with . or -"
        )));
    }
    let at = |field: &str, e: &dyn std::fmt::Display| {
        err(format!("{origin}: config {name}: {field}: {e}"))
    };
    let mut agent_arg = spec.agent.clone();
    let agent = builtin::resolve(&spec.agent).map_err(|e| at("agent", &e))?;
    let mut spec_sha256 = None;
    match &agent {
        AgentRef::ReplayControl(control) => {
            for (case, _) in cases {
                if !case.controls.iter().any(|c| &c.name == control) {
                    return Err(at(
                        "agent",
                        &format!(
                            "replay:@{control}: case {} has no control {control}",
                            case.id
                        ),
                    ));
                }
            }
        }
        AgentRef::Replay(dir) => {
            let abs = std::fs::canonicalize(dir).map_err(|e| at("agent", &e))?;
            agent_arg = format!("replay:{}", abs.display());
        }
        AgentRef::Spec(s, src) => {
            if spec.model.is_none() && needs_model(s) {
                return Err(at(
                    "model",
                    &format!(
                        "missing: agent {}'s command passes a model ({{model_quoted}})",
                        spec.agent
                    ),
                ));
            }
            spec_sha256 = Some(s.hash());
            if let builtin::SpecSource::File(p) = src {
                let abs = std::fs::canonicalize(p).map_err(|e| at("agent", &e))?;
                agent_arg = abs.display().to_string();
            }
        }
        AgentRef::None => {}
    }
    let memory = spec.memory.clone().unwrap_or_else(|| "8G".into());
    ByteSize::parse("memory", &memory).map_err(|e| at("memory", &e))?;
    let pids = spec.pids.unwrap_or(4096);
    if pids == 0 {
        return Err(at("pids", &"0: must be at least 1"));
    }
    if let Some(c) = spec.cpus {
        c.to_string().parse::<Cpus>().map_err(|e| at("cpus", &e))?;
    }
    let net = spec.net.clone().unwrap_or_else(|| "none".into());
    let allow = spec.allow.clone().unwrap_or_default();
    let allow_registries = spec.allow_registries.unwrap_or(false);
    let resolve = spec.resolve.clone().unwrap_or_default();
    match net.as_str() {
        "none" => {
            if !allow.is_empty() || allow_registries || !resolve.is_empty() {
                return Err(at(
                    "net",
                    &"allow, allow_registries and resolve need net = \"allowlist\"",
                ));
            }
        }
        "allowlist" => {
            let p = EgressPolicy::parse(&allow, allow_registries, &resolve)
                .map_err(|e| at("allow", &e))?;
            // As `cbrun trial` refuses it: a loopback entry the proxy's own
            // address would shadow.
            crate::trial::egress::forwards(&p).map_err(|e| at("allow", &e))?;
        }
        other => return Err(at("net", &format!("{other:?}: expected none or allowlist"))),
    }
    for (field, v) in [
        ("solve_timeout", spec.solve_timeout),
        ("stall_timeout", spec.stall_timeout),
        ("judge_timeout", spec.judge_timeout),
    ] {
        if let Some(v) = v {
            if positive_secs(v).is_none() {
                return Err(at(
                    field,
                    &format!("{v}: must be a positive number of seconds"),
                ));
            }
        }
    }
    if spec.image.is_some() && spec.rootfs.is_some() {
        return Err(at("image", &"not with rootfs (an image is the root)"));
    }
    let rootfs = match spec.rootfs.as_deref() {
        None if spec.image.is_some() => None,
        None | Some("host") => Some("host".to_owned()),
        Some(d) => {
            let abs = std::fs::canonicalize(d).map_err(|e| at("rootfs", &e))?;
            if !abs.is_dir() {
                return Err(at("rootfs", &format!("{}: not a directory", abs.display())));
            }
            Some(abs.display().to_string())
        }
    };
    let field = |(f, e): (String, String)| at(&f, &e);
    let env = spec.env.clone().unwrap_or_default();
    agent_run::check_env(&env).map_err(field)?;
    let env_pass = spec.env_pass.clone().unwrap_or_default();
    agent_run::check_env_pass(&env_pass).map_err(field)?;
    if let Some(v) = &spec.agent_version {
        agent_run::check_version(v).map_err(|e| at("agent_version", &e))?;
    }
    let pricing = spec
        .pricing
        .as_deref()
        .map(|p| agent_run::pin_pricing(p, base))
        .transpose()
        .map_err(|e| at("pricing", &e))?;
    let ca_bundle =
        agent_run::pin_ca(spec.ca_bundle.as_deref().unwrap_or_default(), base).map_err(field)?;
    let (image_id, image) = match &spec.image {
        Some(n) => {
            let u = open_image(n, host).map_err(|e| at("image", &e))?;
            (Some(u.root.label.clone()), Some(u))
        }
        None => (None, None),
    };
    Ok((
        ConfigEntry {
            name,
            agent: agent_arg,
            spec_sha256,
            model: spec.model.clone(),
            solve_timeout: spec
                .solve_timeout
                .unwrap_or(DEFAULT_SOLVE_BUDGET.as_secs_f64()),
            stall_timeout: spec.stall_timeout.unwrap_or(DEFAULT_STALL.as_secs_f64()),
            judge_timeout: spec.judge_timeout,
            memory,
            pids,
            cpus: spec.cpus,
            require_limits: spec.require_limits.unwrap_or(false),
            net,
            allow,
            allow_registries,
            resolve,
            image: spec.image.clone(),
            image_id,
            rootfs,
            env,
            env_pass,
            agent_version: spec.agent_version.clone(),
            pricing,
            fresh_install: spec.fresh_install.unwrap_or(false),
            ca_bundle,
        },
        image,
    ))
}

/// `20261201T230000Z-ab12cd`: the time and six hex digits of a hash of
/// the time, the pid and the host.
fn new_run_id(now: SystemTime) -> String {
    let nanos = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let host = nix::unistd::gethostname().unwrap_or_default();
    let mut h = Sha256::new();
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(host.as_encoded_bytes());
    let d = h.finalize();
    format!(
        "{}-{:02x}{:02x}{:02x}",
        clock::compact(now),
        d[0],
        d[1],
        d[2]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_derived_from_agents_and_must_name_folders() {
        assert_eq!(default_name("replay:@reference"), "reference");
        assert_eq!(default_name("replay:/c/case001/controls/stub/app"), "stub");
        assert_eq!(default_name("replay:/x/my ws"), "my-ws");
        assert_eq!(default_name("codex"), "codex");
        assert_eq!(default_name("/specs/mine.toml"), "mine");
        assert_eq!(default_name("none"), "none");
        for bad in ["", ".x", "-x", "a/b", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(valid_name("ref-1.2_b"));
    }

    const PEM_A: &str = "-----BEGIN CERTIFICATE-----\nQUFB\n-----END CERTIFICATE-----\n";

    /// A folder with a copy-free plan: the repo's case001, a spec agent,
    /// a CA file; `body` is the plan file after its `cases` line.
    struct PlanDir(std::path::PathBuf);

    impl PlanDir {
        fn new(tag: &str) -> PlanDir {
            let d =
                std::env::temp_dir().join(format!("cbrun-resolve-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("show.toml"), "name = \"show\"\ncommand = \"env\"\n").unwrap();
            std::fs::write(
                d.join("model.toml"),
                "name = \"model\"\ncommand = \"run {model_quoted}\"\n",
            )
            .unwrap();
            std::fs::write(d.join("a.pem"), PEM_A).unwrap();
            PlanDir(d)
        }

        fn resolve(&self, body: &str) -> Result<ResolvedPlan, String> {
            let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/case001");
            let f = self.0.join("p.toml");
            let spec = self.0.join("show.toml");
            let text = format!(
                "cases = [{case:?}]\n{}",
                body.replace("SHOW", &spec.display().to_string())
                    .replace("MODEL", &self.0.join("model.toml").display().to_string())
            );
            std::fs::write(&f, text).unwrap();
            let req = super::super::PlanFile::load(&f).map_err(|e| crate::error::chain(&e))?;
            resolve(&req, &HostView::detect())
                .map(|(p, _)| p)
                .map_err(|e| crate::error::chain(&e))
        }
    }

    impl Drop for PlanDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn agent_options_resolve_per_config_over_the_defaults() {
        let d = PlanDir::new("ok");
        let p = d
            .resolve(
                "[defaults]\nenv_pass = [\"SECRET_A\"]\nenv = { SHARED = \"1\" }\nfresh_install = true\n\
                 [[config]]\nname = \"a\"\nagent = \"SHOW\"\nca_bundle = [\"a.pem\"]\nagent_version = \"1.2.3\"\n\
                 [[config]]\nname = \"b\"\nagent = \"SHOW\"\nenv = { ONLY_B = \"x\" }\nenv_pass = [\"SECRET_B\", \"OTHER\"]\nfresh_install = false\n",
            )
            .unwrap();
        let (a, b) = (&p.configs[0], &p.configs[1]);
        assert_eq!(a.env_pass, ["SECRET_A"]);
        assert_eq!(a.env.get("SHARED").map(String::as_str), Some("1"));
        assert!(a.fresh_install && !b.fresh_install);
        assert_eq!(a.agent_version.as_deref(), Some("1.2.3"));
        // The pem is found next to the plan file, pinned by its certificates.
        let pem = d.0.canonicalize().unwrap().join("a.pem");
        assert_eq!(a.ca_bundle[0].source, pem.display().to_string());
        assert_eq!(
            a.ca_bundle[0].sha256.as_deref(),
            Some(format!("{:x}", Sha256::digest(PEM_A)).as_str())
        );
        // A config's field replaces the default's whole.
        assert_eq!(b.env_pass, ["SECRET_B", "OTHER"]);
        assert_eq!(b.env.keys().collect::<Vec<_>>(), ["ONLY_B"]);
        assert!(b.ca_bundle.is_empty() && b.agent_version.is_none());
        // Written and read back the same; what is unset is left out.
        let text = p.to_toml().unwrap();
        assert_eq!(ResolvedPlan::from_toml(&text, "plan.toml").unwrap(), p);
        let back: toml::Value = toml::from_str(&text).unwrap();
        assert!(back["config"][1].get("ca_bundle").is_none(), "{text}");
        assert!(back["config"][1].get("fresh_install").is_none(), "{text}");
        // The options the worker gets.
        let root = b.root(&HostView::detect()).unwrap();
        let o = a.trial_options(&root).unwrap();
        assert_eq!(o.solve.agent_run.env_pass, ["SECRET_A"]);
        assert_eq!(o.solve.agent_run.version.as_deref(), Some("1.2.3"));
        assert!(o.solve.agent_run.install_cache.is_none());
        assert_eq!(o.solve.ca.as_ref().map(|c| c.certificates), Some(1));
        let o = b.trial_options(&root).unwrap();
        assert_eq!(o.solve.agent_run.env, [("ONLY_B".into(), "x".into())]);
        assert!(o.solve.ca.is_none());
        // A changed env is another plan, named without its values.
        let mut c = p.clone();
        c.configs[0]
            .env
            .insert("SHARED".into(), "the-new-value".into());
        let diff = p.differs_from(&c).unwrap();
        assert_eq!(diff, "config a differs (env: SHARED has another value)");
        let mut c = p.clone();
        c.configs[1].env_pass.pop();
        assert!(p
            .differs_from(&c)
            .unwrap()
            .starts_with("config b differs (env_pass:"));
    }

    #[test]
    fn bad_agent_options_are_one_line_naming_the_file_config_and_field() {
        let d = PlanDir::new("bad");
        let f = d.0.join("p.toml").display().to_string();
        for (body, want) in [
            (
                "[[config]]\nname = \"s\"\nagent = \"SHOW\"\nenv_pass = [\"OK\", \"NO-DASH\"]\n",
                "config s: env_pass[1]: \"NO-DASH\": not a variable name",
            ),
            (
                "[[config]]\nname = \"s\"\nagent = \"SHOW\"\nenv = { HOME = \"/x\" }\n",
                "config s: env.HOME: HOME: the agent's home is its spec's `home`",
            ),
            (
                "[[config]]\nname = \"s\"\nagent = \"SHOW\"\nenv = { A = \"a\\u0000b\" }\n",
                "config s: env.A: the value holds a NUL byte",
            ),
            (
                "[[config]]\nname = \"s\"\nagent = \"SHOW\"\nca_bundle = [\"a.pem\", \"nope.pem\"]\n",
                "config s: ca_bundle[1]: ",
            ),
            (
                "[[config]]\nname = \"s\"\nagent = \"SHOW\"\nca_bundle = [\"show.toml\"]\n",
                "no PEM certificate",
            ),
            (
                "[[config]]\nname = \"s\"\nagent = \"SHOW\"\nagent_version = \"1 2\"\n",
                "config s: agent_version: \"1 2\": not a version",
            ),
            (
                "[[config]]\nname = \"s\"\nagent = \"SHOW\"\npricing = \"show.toml\"\n",
                "config s: pricing: ",
            ),
            (
                "[[config]]\nname = \"s\"\nagent = \"MODEL\"\n",
                "config s: model: missing: agent ",
            ),
            (
                "[[config]]\nname = \"s\"\nagent = \"SHOW\"\nnet = \"allowlist\"\nallow = [\"127.0.0.1:3128\"]\n",
                "config s: allow: ",
            ),
            (
                "[defaults]\nagent = \"SHOW\"\n[[config]]\nname = \"s\"\nagent = \"SHOW\"\n",
                "defaults: agent: not in [defaults]",
            ),
            (
                "[defaults]\nenv_pas = [\"X\"]\n[[config]]\nname = \"s\"\nagent = \"SHOW\"\n",
                "unknown field `env_pas`",
            ),
            ("[[config]]\nname = \"s\"\n", "config s: agent: missing"),
            (
                "[defaults]\nenv_pass = [\"1X\"]\n[[config]]\nname = \"s\"\nagent = \"SHOW\"\n",
                "config s: env_pass[0]: \"1X\"",
            ),
        ] {
            let e = d.resolve(body).unwrap_err();
            assert!(e.starts_with(&f), "{body}: {e}");
            assert!(e.contains(want), "{body}: want {want:?} in {e}");
            assert!(!e.contains('\n'), "{e}");
            for flag in ["--env", "--ca-bundle", "--agent-version", "--pricing"] {
                assert!(!e.contains(flag), "a flag named in a plan's error: {e}");
            }
        }
    }
}
