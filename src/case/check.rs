//! Case validation: each file on its own ([`parse`](super::parse)), then
//! the rules that span files: ids, commands, test files, controls, the
//! published release checks ([`release`](super::release)) and leaks of
//! hidden tests ([`leaks`](super::leaks)).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::fields::{Doc, Presence};
use super::files::{read_json, Entry, Root};
use super::layout::*;
use super::leaks::leak_guard;
use super::load::{Case, Control, PublicDocs};
use super::parse;
use super::problem::{Problem, Sink};
use super::release;
use super::schema::{Denylist, Manifest, Recipe, Reward, TestManifest};

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
    // The published runner treats the denylist as private: many published
    // cases come without one, and then nothing is banned.
    let has_denylist = !matches!(root.resolve(DENYLIST), Entry::Missing);
    let denylist = json(&root, s, DENYLIST, Presence::Optional, parse::denylist);
    if !has_denylist {
        s.warn(
            DENYLIST,
            "",
            "no denylist: no install or import is banned in this case",
        );
    }
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
    let script_at = ACCEPTANCE_SCRIPTS
        .iter()
        .find_map(|rel| match root.resolve(rel) {
            Entry::File(p) => Some((p, *rel)),
            _ => None,
        });
    let script = script_at.as_ref().map(|(p, _)| p.clone());
    let acceptance_entry = script_at.map(|(_, rel)| &rel[FINAL_DIR.len() + 1..]);
    if let Some(m) = &manifest {
        template(
            s,
            MANIFEST,
            "runner.test_command_template",
            &m.runner.test_command_template,
            script.is_some(),
        );
        release::sensitive_terms(
            s,
            m,
            prd.as_deref(),
            contract.as_deref(),
            hardware.as_deref(),
        );
        release::operator_cache(s, m, resources.as_ref());
    }
    if let Some(d) = &denylist {
        release::denylist(s, d);
    }
    if let Some(tm) = &tm {
        test_files(&root, s, tm);
        test_commands(s, manifest.as_ref(), tm, script.is_some());
    }
    let controls = controls(&root, s);
    leak_guard(&root, s, tm.as_ref());

    let problems = std::mem::take(&mut sink.problems);
    let denylist = match (denylist, &manifest) {
        (Some(d), _) => Some(d),
        (None, Some(m)) if !has_denylist => Some(Denylist::none(m.case_id.clone())),
        _ => None,
    };
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
            has_denylist,
            test_manifest,
            resources,
            controls,
            final_dir,
            acceptance_script: script,
            acceptance_entry,
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

/// The image is built from the recipe's commands and the agent is told
/// the manifest's: they must agree (surrounding blanks aside, as the
/// published runner compares them).
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
        if want.trim() != got.trim() {
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

/// `test_files[]` are files and `support_files[]` files or directories
/// under `milestones/final/`; execution groups only name listed files.
fn test_files(root: &Root, s: &mut Sink, tm: &TestManifest) {
    for (key, list, dir_ok) in [
        ("test_files", &tm.test_files, false),
        ("support_files", &tm.support_files, true),
    ] {
        for (i, f) in list.iter().enumerate() {
            let rel = format!("{FINAL_DIR}/{f}");
            let e = root.resolve(&rel);
            let defect = match e {
                Entry::Dir(_) if dir_ok => None,
                other => other.defect(false),
            };
            if let Some(reason) = defect {
                s.error(
                    TEST_MANIFEST,
                    &format!("{key}[{i}]"),
                    &format!("{rel}: {reason}"),
                );
            }
        }
    }
    let listed: BTreeSet<&str> = tm
        .test_files
        .iter()
        .chain(&tm.support_files)
        .map(|f| f.as_str())
        .collect();
    for (at, _, files) in tm.execution_groups.groups() {
        for (i, f) in files.iter().enumerate() {
            if !listed.contains(f.as_str()) {
                s.error(
                    TEST_MANIFEST,
                    &format!("{at}[{i}]"),
                    &format!("{f} is not listed in test_files"),
                );
            }
        }
    }
}

/// Blanks collapsed, for comparing commands.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn test_commands(s: &mut Sink, m: Option<&Manifest>, tm: &TestManifest, has_script: bool) {
    let t = &tm.test_command_template;
    let runner_t = m.map(|m| m.runner.test_command_template.as_str());
    if !t.is_empty() {
        template(s, TEST_MANIFEST, "test_command_template", t, has_script);
        // Published cases differ here (runner `node --test`/`ctest` and a
        // pytest test manifest); their judge, like cbrun's, runs the test
        // manifest's, so the case stays usable.
        if runner_t.is_some_and(|r| squash(r) != squash(t)) {
            s.warn(
                TEST_MANIFEST,
                "test_command_template",
                &format!(
                    "differs from {MANIFEST} runner.test_command_template; the judge runs this one"
                ),
            );
        }
    }
    // The template the judge expands (see `Case::judge_command`).
    let judged = [t.as_str(), runner_t.unwrap_or("")]
        .into_iter()
        .find(|t| !t.trim().is_empty());
    if let (Some(judged), false) = (judged, tm.test_command.trim().is_empty() || has_script) {
        // Published test manifests hold the template expanded with the
        // relative paths; cbrun's own samples the /tests/final form.
        let frozen = squash(&tm.test_command);
        let forms = [
            tm.expand_command(judged, ""),
            tm.expand_command(judged, "/tests/final"),
        ];
        if !forms.iter().any(|f| squash(f) == frozen) {
            s.warn(
                TEST_MANIFEST,
                "test_command",
                "is not the template the judge runs, expanded with the test files \
                 (relative or under /tests/final)",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_folder() {
        let p = check(Path::new("/nonexistent/case-x"));
        assert_eq!(p.len(), 1);
        assert!(p[0].is_error());
        assert!(p[0]
            .to_string()
            .starts_with("/nonexistent/case-x/.: -: case folder unreadable"));
    }

    #[test]
    fn squash_blanks() {
        assert_eq!(squash("  a \t b\nc "), "a b c");
    }
}
