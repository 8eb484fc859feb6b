//! The published runner's release checks that span files: upstream
//! identity (`sensitive_terms`) must not reach what the agent reads, the
//! denylist must be usable, and an install that reads the operator cache
//! must say what it needs from it.

use std::path::Path;

use super::files::{read_capped, MAX_DOC_BYTES};
use super::layout::*;
use super::problem::Sink;
use super::schema::{Denylist, Manifest, Resources};
use super::terms::Haystack;

/// Where the agent reads sensitive terms, as the published check scans:
/// the PRD, the Interface Contract and `runner.build_command` (the agent
/// runs it). The hardware document is not scanned by the published check,
/// so a hit there is only a warning; the install command runs at image
/// build time and never reaches the agent.
pub(crate) fn sensitive_terms(
    s: &mut Sink,
    m: &Manifest,
    prd: Option<&Path>,
    contract: Option<&Path>,
    hardware: Option<&Path>,
) {
    let terms: Vec<&str> = m
        .sensitive_terms
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .collect();
    if terms.is_empty() {
        return;
    }
    let docs = [
        (FULL_PRD, prd, true),
        (INTERFACE_CONTRACT, contract, true),
        (HARDWARE_REQUIREMENTS, hardware, false),
    ];
    for (rel, path, blocking) in docs {
        let Some(path) = path else { continue };
        let text = match read_capped(path, MAX_DOC_BYTES) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => {
                s.error(rel, "", &format!("cannot scan for sensitive terms: {e}"));
                continue;
            }
        };
        report(s, rel, "", &Haystack::new(&text), &terms, blocking);
    }
    let build = Haystack::new(&m.runner.build_command);
    report(s, MANIFEST, "runner.build_command", &build, &terms, true);
}

fn report(s: &mut Sink, file: &str, field: &str, hay: &Haystack, terms: &[&str], blocking: bool) {
    for t in terms {
        let n = hay.count(t);
        if n == 0 {
            continue;
        }
        let times = if n == 1 {
            String::new()
        } else {
            format!(" ({n} times)")
        };
        let reason = format!("mentions the sensitive term {t:?}{times}");
        if blocking {
            s.error(file, field, &reason);
        } else {
            s.warn(file, field, &format!("{reason}; the agent reads this file"));
        }
    }
}

/// Import tokens no case may ban: banning them breaks ordinary toolchains
/// (the published release check refuses them).
const INFRASTRUCTURE_TOKENS: &[&str] = &[
    "cuda::", "cuda/", "std::", "numpy", "numpy/", "torch", "torch::",
];

/// Runtimes `runtime_equivalents[].runtime` may name.
const RUNTIMES: &[&str] = &["python3", "node", "system"];

/// The published denylist rules beyond the schema. Banning an
/// infrastructure token rejects every submission, so it is an error; the
/// others only mean the denylist guards less than intended. (The published
/// check also wants a token that overlaps the case's identity; cbrun does
/// not: a denylist may rightly ban alternatives to the upstream rather
/// than the upstream itself, as cbrun's sample cases do.)
pub(crate) fn denylist(s: &mut Sink, d: &Denylist) {
    for (key, list) in [
        ("install_ban", &d.install_ban),
        ("import_ban", &d.import_ban),
    ] {
        for (i, t) in list.iter().enumerate() {
            if INFRASTRUCTURE_TOKENS.contains(&t.trim()) {
                s.error(
                    DENYLIST,
                    &format!("{key}[{i}]"),
                    &format!("{t:?} is infrastructure every toolchain needs; it cannot be banned"),
                );
            }
        }
    }
    if d.install_ban.is_empty() && d.import_ban.is_empty() {
        s.warn(
            DENYLIST,
            "",
            "bans nothing (no install_ban or import_ban tokens)",
        );
    }
    for (i, e) in d.runtime_equivalents.iter().enumerate() {
        let at = format!("runtime_equivalents[{i}]");
        if !d
            .import_ban
            .iter()
            .any(|b| b.trim() == e.import_root.trim())
        {
            s.warn(
                DENYLIST,
                &format!("{at}.import_root"),
                &format!("{:?} is not in import_ban", e.import_root),
            );
        }
        if !RUNTIMES.contains(&e.runtime.as_str()) {
            s.warn(
                DENYLIST,
                &format!("{at}.runtime"),
                &format!("{:?} is none of {}", e.runtime, RUNTIMES.join(", ")),
            );
        }
        if e.evidence.trim().is_empty() {
            s.warn(DENYLIST, &format!("{at}.evidence"), "empty");
        }
    }
}

/// The operator's build cache, mounted at image build time by the
/// published runner; cbrun mounts nothing there.
const OPERATOR_CACHE: &str = "/opt/cb-cache";

/// An install that copies from the operator cache needs the resources it
/// copies described in `source/env/resources.json` to be reproducible.
pub(crate) fn operator_cache(s: &mut Sink, m: &Manifest, resources: Option<&Resources>) {
    if m.runner.install_command.contains(OPERATOR_CACHE) && resources.is_none() {
        s.warn(
            MANIFEST,
            "runner.install_command",
            &format!(
                "reads {OPERATOR_CACHE} (an operator cache mount) but there is no {RESOURCES}; \
                 `cbrun image build` does not provide {OPERATOR_CACHE}"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(extra: serde_json::Value) -> Manifest {
        let mut v = json!({"schema_version": 3, "case_id": "case008",
            "runner": {"install_command": "", "build_command": "", "test_command_template": "t {test_files}"}});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    fn denylist(v: serde_json::Value) -> Denylist {
        let mut base = json!({"schema_version": 1, "case_id": "case008", "ecosystem": "source"});
        base.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn run(d: &Denylist) -> Vec<String> {
        let mut s = Sink::new("c".into());
        super::denylist(&mut s, d);
        s.problems.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn runtime_equivalents_and_token_forms() {
        let d = denylist(json!({"import_ban": ["ada/", "ada::", "ada.h", "ada_c.h"],
            "runtime_equivalents": [{"import_root": "ada", "runtime": "node", "evidence": "process.versions.ada"}]}));
        assert_eq!(
            run(&d),
            ["c/source/denylist.json: runtime_equivalents[0].import_root: \"ada\" is not in import_ban"]
        );
        let d = denylist(
            json!({"import_ban": ["zlib"], "runtime_equivalents": [{"import_root": "zlib", "runtime": "jvm"}]}),
        );
        let msgs = run(&d);
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs[0].contains("runtime: \"jvm\" is none of"));
        assert!(msgs[1].contains("evidence: empty"));
    }

    #[test]
    fn infrastructure_tokens_are_errors() {
        let d = denylist(json!({"import_ban": ["case008", "std::", " numpy "]}));
        let mut s = Sink::new("c".into());
        super::denylist(&mut s, &d);
        let errs: Vec<String> = s
            .problems
            .iter()
            .filter(|p| p.is_error())
            .map(|p| p.to_string())
            .collect();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("c/source/denylist.json: import_ban[1]: \"std::\""));
        let empty = denylist(json!({}));
        assert_eq!(run(&empty).len(), 1);
    }

    #[test]
    fn sensitive_terms_in_the_build_command() {
        let mut m = manifest(json!({"sensitive_terms": ["ada", "", "  "]}));
        m.runner.build_command = "cmake -DADA_X=1 && make ada".into();
        let mut s = Sink::new("c".into());
        sensitive_terms(&mut s, &m, None, None, None);
        let msgs: Vec<String> = s.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            msgs,
            ["c/source/manifest.json: runner.build_command: mentions the sensitive term \"ada\""]
        );
    }
}
