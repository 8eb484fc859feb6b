//! Case validation: each file on its own ([`parse`](super::parse)), then
//! the rules that span files: ids, commands, test files, controls, leaks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::fields::{Doc, Presence};
use super::files::{read_capped, read_json, Entry, Root, MAX_DOC_BYTES};
use super::layout::*;
use super::load::{Case, Control, PublicDocs};
use super::parse;
use super::problem::{Problem, Sink};
use super::schema::{Manifest, Recipe, Reward, TestManifest};

/// Every problem found in the case folder `case_dir`, errors and warnings,
/// in a stable order. Never panics and never reads outside the folder.
pub fn check(case_dir: &Path) -> Vec<Problem> {
    inspect(case_dir).problems
}

pub(crate) struct Inspection {
    /// Present when there is no error.
    pub case: Option<Case>,
    pub problems: Vec<Problem>,
}

pub(crate) fn inspect(case_dir: &Path) -> Inspection {
    let root = match Root::open(case_dir) {
        Ok(r) => r,
        Err(reason) => {
            let mut sink = Sink::new(case_dir.display().to_string());
            sink.error(".", "", &reason);
            return Inspection {
                case: None,
                problems: sink.problems,
            };
        }
    };
    let name = root.canon.file_name().map_or_else(
        || root.canon.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut sink = Sink::new(name.clone());
    let s = &mut sink;

    let prd = require(&root, s, FULL_PRD, false);
    let contract = require(&root, s, INTERFACE_CONTRACT, false);
    let hardware = match root.resolve(HARDWARE_REQUIREMENTS) {
        Entry::Missing => None,
        Entry::File(p) => Some(p),
        other => {
            s.error(
                HARDWARE_REQUIREMENTS,
                "",
                &other.defect(false).unwrap_or_default(),
            );
            None
        }
    };
    let final_dir = require(&root, s, FINAL_DIR, true);
    require(&root, s, TESTS_DIR, true);

    let manifest = json(&root, s, MANIFEST, Presence::Required, parse::manifest);
    let recipe = json(&root, s, RECIPE, Presence::Required, parse::recipe);
    let denylist = json(&root, s, DENYLIST, Presence::Required, parse::denylist);
    let tm = json(
        &root,
        s,
        TEST_MANIFEST,
        Presence::Required,
        parse::test_manifest,
    );
    let resources = json(&root, s, RESOURCES, Presence::Optional, parse::resources);

    let ids = [
        (MANIFEST, manifest.as_ref().map(|m| m.case_id.as_str())),
        (RECIPE, recipe.as_ref().map(|r| r.case_id.as_str())),
        (DENYLIST, denylist.as_ref().map(|d| d.case_id.as_str())),
    ];
    case_ids(s, &name, &ids);
    if let (Some(m), Some(r)) = (&manifest, &recipe) {
        recipe_commands(s, m, r);
    }
    let script = match root.resolve(ACCEPTANCE_SCRIPT) {
        Entry::File(p) => Some(p),
        _ => None,
    };
    if let Some(m) = &manifest {
        template(
            s,
            MANIFEST,
            "runner.test_command_template",
            &m.runner.test_command_template,
            script.is_some(),
        );
    }
    if let Some(tm) = &tm {
        test_files(&root, s, tm);
        test_commands(s, manifest.as_ref(), tm, script.is_some());
    }
    let controls = controls(&root, s);
    leak_guard(&root, s, tm.as_ref());

    let problems = std::mem::take(&mut sink.problems);
    let case = match (manifest, recipe, denylist, tm, prd, contract, final_dir) {
        (
            Some(manifest),
            Some(recipe),
            Some(denylist),
            Some(test_manifest),
            Some(full_prd),
            Some(ic),
            Some(final_dir),
        ) if !problems.iter().any(Problem::is_error) => Some(Case {
            id: manifest.case_id.clone(),
            dir: root.canon.clone(),
            public: PublicDocs {
                full_prd,
                interface_contract: ic,
                hardware_requirements: hardware,
            },
            manifest,
            recipe,
            denylist,
            test_manifest,
            resources,
            controls,
            final_dir,
            acceptance_script: script,
            warnings: problems.clone(),
        }),
        _ => None,
    };
    Inspection { case, problems }
}

/// A required file or directory; its resolved path.
fn require(root: &Root, s: &mut Sink, rel: &str, dir: bool) -> Option<PathBuf> {
    let e = root.resolve(rel);
    if let Some(reason) = e.defect(dir) {
        s.error(rel, "", &reason);
        return None;
    }
    match e {
        Entry::File(p) | Entry::Dir(p) => Some(p),
        _ => None,
    }
}

fn json<T>(
    root: &Root,
    s: &mut Sink,
    rel: &str,
    presence: Presence,
    parse: fn(&mut Doc, &Value) -> Option<T>,
) -> Option<T> {
    let mut doc = Doc::new(s, rel);
    let v = read_json(root, rel, presence, &mut doc)?;
    parse(&mut doc, &v)
}

/// `case_id` must agree across files; the folder name should match too.
fn case_ids(s: &mut Sink, folder: &str, ids: &[(&str, Option<&str>)]) {
    let Some((first_file, first)) = ids.iter().find_map(|(f, id)| id.map(|id| (*f, id))) else {
        return;
    };
    for (file, id) in ids {
        if let Some(id) = id {
            if *id != first {
                s.error(
                    file,
                    "case_id",
                    &format!("{id:?} differs from {first_file} case_id {first:?}"),
                );
            }
        }
    }
    if first != folder {
        s.warn(
            first_file,
            "case_id",
            &format!("{first:?} differs from the folder name {folder:?}"),
        );
    }
}

fn recipe_commands(s: &mut Sink, m: &Manifest, r: &Recipe) {
    let pairs = [
        (
            "install_command",
            &m.runner.install_command,
            &r.runner.install_command,
        ),
        (
            "build_command",
            &m.runner.build_command,
            &r.runner.build_command,
        ),
    ];
    for (key, want, got) in pairs {
        if want != got {
            s.error(
                RECIPE,
                &format!("runner.{key}"),
                &format!("{got:?} differs from {MANIFEST} runner.{key} {want:?}"),
            );
        }
    }
}

/// A template must name the tests unless the acceptance script is the entry point.
fn template(s: &mut Sink, file: &str, field: &str, t: &str, has_script: bool) {
    if !has_script && !t.contains("{test_files}") && !t.contains("{test_dir}") {
        s.error(
            file,
            field,
            &format!("contains neither {{test_files}} nor {{test_dir}} (and there is no {ACCEPTANCE_SCRIPT})"),
        );
    }
}

/// `test_files[]`/`support_files[]` exist under `milestones/final/`;
/// execution groups only name listed test files.
fn test_files(root: &Root, s: &mut Sink, tm: &TestManifest) {
    for (key, list) in [
        ("test_files", &tm.test_files),
        ("support_files", &tm.support_files),
    ] {
        for (i, f) in list.iter().enumerate() {
            let rel = format!("{FINAL_DIR}/{f}");
            if let Some(reason) = root.resolve(&rel).defect(false) {
                s.error(
                    TEST_MANIFEST,
                    &format!("{key}[{i}]"),
                    &format!("{rel}: {reason}"),
                );
            }
        }
    }
    let listed: BTreeSet<&str> = tm.test_files.iter().map(|f| f.as_str()).collect();
    for (g, group) in tm.execution_groups.iter().enumerate() {
        for (i, f) in group.test_files.iter().enumerate() {
            if !listed.contains(f.as_str()) {
                s.error(
                    TEST_MANIFEST,
                    &format!("execution_groups[{g}].test_files[{i}]"),
                    &format!("{f} is not listed in test_files"),
                );
            }
        }
    }
}

fn test_commands(s: &mut Sink, m: Option<&Manifest>, tm: &TestManifest, has_script: bool) {
    let t = &tm.test_command_template;
    if !t.is_empty() {
        template(s, TEST_MANIFEST, "test_command_template", t, has_script);
        if m.is_some_and(|m| m.runner.test_command_template != *t) {
            s.warn(
                TEST_MANIFEST,
                "test_command_template",
                &format!("differs from {MANIFEST} runner.test_command_template"),
            );
        }
        let expanded = tm.expand_command(t, "/tests/final");
        if !tm.test_command.is_empty() && tm.test_command != expanded {
            s.warn(
                TEST_MANIFEST,
                "test_command",
                "differs from test_command_template expanded with /tests/final",
            );
        }
    }
    if tm.expected_count().is_none() {
        s.warn(
            TEST_MANIFEST,
            "expected_test_count",
            "no frozen test count (expected_test_count or test_count)",
        );
    }
}

fn controls(root: &Root, s: &mut Sink) -> Vec<Control> {
    match root.resolve(CONTROLS_DIR) {
        Entry::Dir(_) => {}
        Entry::Missing => {
            s.warn(CONTROLS_DIR, "", "no controls");
            return Vec::new();
        }
        other => {
            s.error(CONTROLS_DIR, "", &other.defect(true).unwrap_or_default());
            return Vec::new();
        }
    }
    let mut out = Vec::new();
    for name in root
        .list(CONTROLS_DIR)
        .into_iter()
        .filter(|n| !n.starts_with('.'))
    {
        let rel = format!("{CONTROLS_DIR}/{name}");
        match root.resolve(&rel) {
            Entry::Dir(_) => {}
            Entry::File(_) => {
                s.warn(&rel, "", "not a directory; ignored");
                continue;
            }
            other => {
                s.error(&rel, "", &other.defect(true).unwrap_or_default());
                continue;
            }
        }
        let app = require(root, s, &format!("{rel}/app"), true);
        let expect = json(
            root,
            s,
            &format!("{rel}/expect.json"),
            Presence::Required,
            parse::expect,
        );
        if let (Some(app_dir), Some(expect)) = (app, expect) {
            out.push(Control {
                name,
                app_dir,
                expect,
            });
        }
    }
    if !out.is_empty() && !out.iter().any(|c| c.expect.reward == Reward::One) {
        s.warn(CONTROLS_DIR, "", "no control expects reward 1");
    }
    out
}

/// Names too common to mean a leak when a public document mentions them.
const GENERIC_NAMES: &[&str] = &[
    "__init__.py",
    "conftest.py",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "pytest.ini",
    "tox.ini",
    "requirements.txt",
    "package.json",
    "tsconfig.json",
    "Makefile",
    "CMakeLists.txt",
    "Cargo.toml",
    "README.md",
    "README",
    ".gitignore",
];

/// Hidden test material must not reach `public/`: no canary marker, no
/// hidden test file name, no symlink into the hidden tests.
fn leak_guard(root: &Root, s: &mut Sink, tm: Option<&TestManifest>) {
    let mut names = BTreeSet::new();
    let declared = tm.map(|tm| tm.test_files.iter().chain(&tm.support_files));
    for f in declared.into_iter().flatten() {
        names.insert(basename(f.as_str()).to_string());
    }
    for (rel, e) in root.walk(TESTS_DIR) {
        if matches!(e, Entry::File(_)) {
            names.insert(basename(&rel).to_string());
        }
    }
    names.retain(|n| n.len() >= 4 && !GENERIC_NAMES.contains(&n.as_str()));

    let hidden = root.canon.join("milestones");
    for (rel, e) in root.walk(PUBLIC_DIR) {
        let path = match e {
            Entry::File(p) => p,
            Entry::Outside(_) => {
                s.error(&rel, "", &e.defect(false).unwrap_or_default());
                continue;
            }
            other => {
                s.warn(
                    &rel,
                    "",
                    &format!("not scanned: {}", other.defect(false).unwrap_or_default()),
                );
                continue;
            }
        };
        if path.starts_with(&hidden) {
            s.error(&rel, "", "symlink into milestones/ (hidden tests)");
            continue;
        }
        if names.contains(basename(&rel)) {
            s.error(&rel, "", "has the name of a hidden test file");
        }
        let bytes = match read_capped(&path, MAX_DOC_BYTES) {
            Ok(b) => b,
            Err(e) => {
                s.error(&rel, "", &format!("cannot scan for leaks: {e}"));
                continue;
            }
        };
        if let Some(token) = canary(&bytes) {
            s.error(
                &rel,
                "",
                &format!("contains the hidden-test canary {token}"),
            );
        }
        for n in &names {
            if contains(&bytes, n.as_bytes()) {
                s.error(&rel, "", &format!("mentions hidden test file {n}"));
            }
        }
    }
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The first canary token (`CBRUN-CANARY...`) in `bytes`.
fn canary(bytes: &[u8]) -> Option<String> {
    let m = CANARY.as_bytes();
    let at = bytes.windows(m.len()).position(|w| w == m)?;
    let token: String = bytes[at..]
        .iter()
        .take(80)
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        .map(|&b| b as char)
        .collect();
    Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_token() {
        assert_eq!(
            canary(b"x # CBRUN-CANARY-case003-7f3a9c\n").as_deref(),
            Some("CBRUN-CANARY-case003-7f3a9c")
        );
        assert_eq!(canary(b"nothing"), None);
        assert!(contains(b"see test_a.py", b"test_a.py"));
        assert!(!contains(b"", b"x"));
    }

    #[test]
    fn missing_folder() {
        let p = check(Path::new("/nonexistent/case-x"));
        assert_eq!(p.len(), 1);
        assert!(p[0].is_error());
        assert!(p[0]
            .to_string()
            .starts_with("/nonexistent/case-x/.: -: case folder unreadable"));
    }
}
