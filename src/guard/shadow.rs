//! Workspace entries that would take over the judge's own test tooling.
//!
//! The judge runs the hidden tests against a copy of the agent's workspace,
//! and test commands commonly put workspace directories on the module
//! search path (`cd /app && PYTHONPATH=src python3 -m pytest ...`). A
//! workspace file that the interpreter would load *instead of* the test
//! runner (or before it) lets the product grade itself. This reports such
//! files, one line each; it does not decide what to do about them.
//!
//! Python (any `python*`, `pytest` or `py.test` in the command):
//! - module search path: each `PYTHONPATH` entry inside the workspace, plus
//!   the working directory for `python -m`/`-c` (it becomes `sys.path[0]`,
//!   ahead of the standard library) and a workspace script's directory;
//! - in those directories: `pytest`, `_pytest`, `py`, `pluggy`, `iniconfig`
//!   when pytest runs; `unittest`, `runpy` for any Python run;
//!   `sitecustomize`/`usercustomize` on `PYTHONPATH` (they run at
//!   interpreter start-up, before any test). Found by name in every form
//!   the import system loads: `.py`, a sourceless `.pyc`, an extension
//!   module (`.so`), a package or namespace directory, or a symlink to any
//!   of them, dangling or not;
//! - a test runner or interpreter that itself lives in the workspace
//!   (`.venv/bin/pytest`): the whole harness is then agent-controlled (its
//!   `site-packages/*.pth` files included);
//! - pytest configuration (`pytest.ini`, `pyproject.toml`, `tox.ini`,
//!   `setup.cfg`, `conftest.py`) in the working directory only when pytest
//!   is given no test path, or one inside the workspace: otherwise pytest
//!   looks for configuration and `conftest.py` only along the test paths
//!   (`/tests/final/...`) and cbrun pins `--rootdir=/tests/final`, so a
//!   workspace-root `conftest.py` or `pytest.ini` is inert and not reported.
//!   A `*.pth` in the workspace root or on `PYTHONPATH` is inert too (only
//!   site directories process them).
//!
//! Paths are resolved as the sandbox resolves them, never on the host: a
//! symlink in the copy is followed inside the copy (an absolute target
//! under `/app` lands in the copy, not in the host's `/app`), and one that
//! leads out of the workspace ends the search there. This is a pre-check:
//! cbrun's reporter repeats the module checks inside the sandbox, on the
//! `sys.path` the interpreter really has.
//!
//! Node (`jest`, `vitest`, `mocha`, or a package-manager script):
//! - `npm test`, `npm run X`, `yarn X`, `pnpm X`, `bun run X`: the command
//!   runs a script from the workspace's `package.json`;
//! - a runner started by bare name, `npx`/`pnpm exec`/`yarn`/`bunx`, or by a
//!   workspace path resolves to the workspace's `node_modules` first:
//!   reported when `node_modules/<runner>` exists there;
//! - the runner's configuration files in the working directory (they can
//!   add setup files and transforms) unless `--config`/`-c` is given.

use std::path::{Path, PathBuf};

use super::WORKSPACE;

const PYTEST_MODULES: &[&str] = &["pytest", "_pytest", "py", "pluggy", "iniconfig"];
const PYTHON_MODULES: &[&str] = &["unittest", "runpy"];
const STARTUP_MODULES: &[&str] = &["sitecustomize", "usercustomize"];
const PYTEST_CONFIG: &[&str] = &[
    "pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
    "conftest.py",
];
const JS_RUNNERS: &[&str] = &["jest", "vitest", "mocha"];
const JS_CONFIG_STEMS: &[&str] = &[
    "jest.config",
    "vitest.config",
    "vite.config",
    "babel.config",
    ".babelrc",
    ".mocharc",
];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Sep,
}

/// Shell-ish words: quotes group, `;`, `&&`, `||`, `|`, `&` separate.
fn tokenize(cmd: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = cmd.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                has = true;
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    cur.push(d);
                }
            }
            '"' => {
                has = true;
                while let Some(d) = chars.next() {
                    match d {
                        '"' => break,
                        '\\' => {
                            if let Some(e) = chars.next() {
                                cur.push(e);
                            }
                        }
                        _ => cur.push(d),
                    }
                }
            }
            '\\' => {
                if let Some(e) = chars.next() {
                    cur.push(e);
                    has = true;
                }
            }
            ';' | '&' | '|' | '\n' | '(' | ')' => {
                if has {
                    out.push(Tok::Word(std::mem::take(&mut cur)));
                    has = false;
                }
                if out.last() != Some(&Tok::Sep) {
                    out.push(Tok::Sep);
                }
            }
            c if c.is_whitespace() => {
                if has {
                    out.push(Tok::Word(std::mem::take(&mut cur)));
                    has = false;
                }
            }
            c => {
                cur.push(c);
                has = true;
            }
        }
    }
    if has {
        out.push(Tok::Word(cur));
    }
    out
}

fn base(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

fn is_python(w: &str) -> bool {
    let b = base(w);
    b == "python"
        || b.strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.') && !v.is_empty())
}

/// Maps a sandbox path (absolute, or relative to `cwd`) into the workspace
/// copy on the host; `None` when it is outside the workspace.
struct Mapper<'a> {
    host: &'a Path,
    sandbox: &'a Path,
}

impl Mapper<'_> {
    fn map(&self, cwd: &Path, p: &str) -> Option<PathBuf> {
        let sp = if p.starts_with('/') {
            PathBuf::from(p)
        } else {
            cwd.join(p)
        };
        self.resolve(&sp)
    }

    /// The host path of sandbox path `sp`, every symlink on the way
    /// resolved inside the workspace copy; `None` when it is (or leads)
    /// outside the workspace.
    fn resolve(&self, sp: &Path) -> Option<PathBuf> {
        use std::path::Component;
        let mut todo: Vec<std::ffi::OsString> = Vec::new();
        let push_all = |todo: &mut Vec<std::ffi::OsString>, p: &Path| {
            for c in p.components().rev() {
                match c {
                    Component::Normal(n) => todo.push(n.to_owned()),
                    Component::ParentDir => todo.push("..".into()),
                    _ => {}
                }
            }
        };
        push_all(&mut todo, sp);
        let mut cur = PathBuf::from("/");
        let mut hops = 0;
        while let Some(c) = todo.pop() {
            if c == ".." {
                cur.pop();
                continue;
            }
            let next = cur.join(&c);
            let Ok(rel) = next.strip_prefix(self.sandbox) else {
                // Above the workspace: only its ancestors may be crossed.
                if self.sandbox.starts_with(&next) {
                    cur = next;
                    continue;
                }
                return None;
            };
            let host = self.host.join(rel);
            match std::fs::symlink_metadata(&host) {
                Ok(md) if md.file_type().is_symlink() => {
                    hops += 1;
                    if hops > 40 {
                        return None;
                    }
                    let target = std::fs::read_link(&host).ok()?;
                    if target.is_absolute() {
                        cur = PathBuf::from("/");
                    }
                    push_all(&mut todo, &target);
                }
                _ => cur = next,
            }
        }
        let rel = cur.strip_prefix(self.sandbox).ok()?;
        Some(self.host.join(rel))
    }
    /// The sandbox spelling of a host path inside the workspace.
    fn show(&self, host: &Path) -> String {
        match host.strip_prefix(self.host) {
            Ok(r) if r.as_os_str().is_empty() => self.sandbox.display().to_string(),
            Ok(r) => self.sandbox.join(r).display().to_string(),
            Err(_) => host.display().to_string(),
        }
    }
}

/// Whether `command` starts a Python interpreter or a pytest launcher
/// anywhere (after `cd`, assignments or a wrapper such as `timeout 60`).
pub fn runs_python(command: &str) -> bool {
    tokenize(command).iter().any(|t| match t {
        Tok::Word(w) => is_python(w) || matches!(base(w), "pytest" | "py.test"),
        Tok::Sep => false,
    })
}

/// Findings for a judge `command` run against the workspace copy at host
/// path `workspace` (mounted at `/app`), one line each.
pub fn shadowed_test_tools(workspace: &Path, command: &str) -> Vec<String> {
    shadowed_test_tools_at(
        workspace,
        Path::new(WORKSPACE),
        Path::new(WORKSPACE),
        command,
    )
}

/// [`shadowed_test_tools`] with the workspace mounted at `sandbox_ws` and
/// the command starting in `workdir` (sandbox paths).
pub fn shadowed_test_tools_at(
    workspace: &Path,
    sandbox_ws: &Path,
    workdir: &Path,
    command: &str,
) -> Vec<String> {
    let m = Mapper {
        host: workspace,
        sandbox: sandbox_ws,
    };
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    let toks = tokenize(command);
    let segments: Vec<Vec<String>> = toks
        .split(|t| *t == Tok::Sep)
        .map(|s| {
            s.iter()
                .filter_map(|t| match t {
                    Tok::Word(w) => Some(w.clone()),
                    Tok::Sep => None,
                })
                .collect()
        })
        .collect();

    let mut cwd = workdir.to_path_buf();
    let mut exported_pp: Option<String> = None;
    for seg in segments {
        let mut i = 0;
        let mut seg_pp: Option<String> = None;
        let mut export = false;
        // Leading assignments, `export`, `env`.
        while i < seg.len() {
            let w = &seg[i];
            if w == "export" || w == "env" {
                export |= w == "export";
                i += 1;
                continue;
            }
            match w.split_once('=') {
                Some((k, v))
                    if !k.is_empty()
                        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    if k == "PYTHONPATH" {
                        if export {
                            exported_pp = Some(v.to_string());
                        } else {
                            seg_pp = Some(v.to_string());
                        }
                    }
                    i += 1;
                }
                _ => break,
            }
        }
        let words = &seg[i..];
        let Some(first) = words.first() else {
            continue;
        };
        if first == "cd" {
            if let Some(d) = words.get(1) {
                cwd = if d.starts_with('/') {
                    PathBuf::from(d)
                } else {
                    cwd.join(d)
                };
            }
            continue;
        }
        let pp = seg_pp.or_else(|| exported_pp.clone());
        let cwd_host = m.map(&cwd, ".");
        python_findings(
            &m,
            &cwd,
            cwd_host.as_deref(),
            pp.as_deref(),
            words,
            &mut push,
        );
        node_findings(&m, &cwd, cwd_host.as_deref(), words, &mut push);
    }
    out
}

/// An entry of `dir` the import system could load as module `name`: a
/// package or namespace directory, `.py`, `.pyc`, `.pyw`, an extension
/// module (`name.so`, `name.cpython-311-x86_64-linux-gnu.so`), or a symlink
/// named like one (its target is not followed: inside the sandbox it may
/// mean something else).
fn module_in(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let Some(n) = n.to_str() else {
                return false;
            };
            n == name
                || [".py", ".pyc", ".pyw"]
                    .iter()
                    .any(|x| n.strip_suffix(x) == Some(name))
                || (n.ends_with(".so") && n.split('.').next() == Some(name))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Whether `p` exists as any kind of entry (a symlink is not followed).
fn present(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

fn python_findings(
    m: &Mapper,
    cwd: &Path,
    cwd_host: Option<&Path>,
    pp: Option<&str>,
    words: &[String],
    push: &mut impl FnMut(String),
) {
    // Find the interpreter or pytest launcher, possibly after a wrapper
    // (`timeout 60 python3 ...`, `uv run pytest`).
    let Some(at) = words
        .iter()
        .position(|w| is_python(w) || matches!(base(w), "pytest" | "py.test"))
    else {
        return;
    };
    let launcher = &words[at];
    let args = &words[at + 1..];
    let mut pytest = matches!(base(launcher), "pytest" | "py.test");
    let mut dash_m_or_c = false;
    let mut script: Option<&String> = None;
    let mut rest: &[String] = &[];
    if !pytest {
        let mut j = 0;
        while j < args.len() {
            let a = &args[j];
            if a == "-m" {
                dash_m_or_c = true;
                pytest = matches!(
                    args.get(j + 1).map(String::as_str),
                    Some("pytest" | "py.test")
                );
                rest = &args[(j + 2).min(args.len())..];
                break;
            }
            if a == "-c" {
                dash_m_or_c = true;
                break;
            }
            if a.starts_with('-') {
                j += 1;
                continue;
            }
            script = Some(a);
            rest = &args[j + 1..];
            break;
        }
    } else {
        rest = args;
    }

    if let Some(h) = m.map(cwd, launcher).filter(|_| launcher.contains('/')) {
        push(format!(
            "{} is in the workspace: the test harness itself is agent-controlled",
            m.show(&h)
        ));
    }

    // The module search path ahead of the standard library.
    let mut dirs: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(pp) = pp {
        for e in pp.split(':') {
            let e = if e.is_empty() { "." } else { e };
            if let Some(h) = m.map(cwd, e) {
                dirs.push((h, "PYTHONPATH"));
            }
        }
    }
    let pp_dirs = dirs.len();
    if dash_m_or_c {
        if let Some(h) = cwd_host {
            dirs.push((
                h.to_path_buf(),
                "the working directory (sys.path[0] for -m/-c)",
            ));
        }
    } else if let Some(s) = script {
        if let Some(h) = m.map(cwd, s) {
            if let Some(parent) = h.parent() {
                dirs.push((parent.to_path_buf(), "the script's directory (sys.path[0])"));
            }
        }
    }
    for (k, (dir, why)) in dirs.iter().enumerate() {
        let mut names: Vec<&str> = PYTHON_MODULES.to_vec();
        if pytest {
            names.extend_from_slice(PYTEST_MODULES);
        }
        if k < pp_dirs {
            names.extend_from_slice(STARTUP_MODULES);
        }
        for n in names {
            if let Some(f) = module_in(dir, n) {
                let role = if STARTUP_MODULES.contains(&n) {
                    "runs at interpreter start-up".to_string()
                } else {
                    format!("shadows the `{n}` module")
                };
                push(format!(
                    "{} {role} ({} is on sys.path via {why})",
                    m.show(&f),
                    m.show(dir)
                ));
            }
        }
    }

    if pytest {
        let paths: Vec<&String> = rest.iter().filter(|a| !a.starts_with('-')).collect();
        let in_ws: Vec<&&String> = paths.iter().filter(|p| m.map(cwd, p).is_some()).collect();
        if paths.is_empty() || !in_ws.is_empty() {
            if let Some(h) = cwd_host {
                for c in PYTEST_CONFIG {
                    let f = h.join(c);
                    if present(&f) {
                        let why = if paths.is_empty() {
                            "pytest is given no test path, so it configures itself from the working directory"
                        } else {
                            "pytest collects from the workspace"
                        };
                        push(format!(
                            "{} applies to the hidden tests ({why})",
                            m.show(&f)
                        ));
                    }
                }
            }
        }
    }
}

fn node_findings(
    m: &Mapper,
    cwd: &Path,
    cwd_host: Option<&Path>,
    words: &[String],
    push: &mut impl FnMut(String),
) {
    let first = base(&words[0]);
    let pm = matches!(first, "npm" | "yarn" | "pnpm" | "bun");
    // A package.json script.
    if pm {
        let sub = words.get(1).map(String::as_str).unwrap_or("");
        let script = match (first, sub) {
            ("npm", "test" | "t" | "tst" | "start") => Some(sub.to_string()),
            ("npm" | "pnpm" | "bun", "run" | "run-script") => words.get(2).cloned(),
            ("bun", "test") => None, // bun's own runner
            ("yarn" | "pnpm", s)
                if !s.is_empty()
                    && !s.starts_with('-')
                    && !matches!(s, "exec" | "dlx" | "node") =>
            {
                Some(if s == "run" {
                    words.get(2).cloned().unwrap_or_default()
                } else {
                    s.to_string()
                })
            }
            _ => None,
        };
        if let (Some(script), Some(h)) = (script, cwd_host) {
            let pj = h.join("package.json");
            if present(&pj) {
                push(format!(
                    "`{} {}` runs the script `{script}` from the workspace's {}",
                    first,
                    sub,
                    m.show(&pj)
                ));
            }
        }
    }
    // A runner by name.
    for (k, w) in words.iter().enumerate() {
        let b = base(w);
        if !JS_RUNNERS.contains(&b) {
            continue;
        }
        let via_path = w.contains('/');
        let resolves_locally = via_path
            || k == 0
            || matches!(base(&words[0]), "npx" | "yarn" | "pnpm" | "bunx" | "pnpx")
            || (k >= 2 && matches!(words[k - 1].as_str(), "exec" | "x" | "dlx"));
        if via_path {
            if let Some(h) = m.map(cwd, w) {
                push(format!(
                    "{} is in the workspace: the test runner is agent-controlled",
                    m.show(&h)
                ));
            }
        } else if resolves_locally {
            if let Some(h) = cwd_host {
                let nm = h.join("node_modules");
                for p in [nm.join(b), nm.join(".bin").join(b)] {
                    if present(&p) {
                        push(format!(
                            "{} is the `{b}` that `{}` resolves first: the test runner is agent-controlled",
                            m.show(&p),
                            words[..=k].join(" ")
                        ));
                        break;
                    }
                }
            }
        }
        let has_config = words
            .iter()
            .any(|a| a == "-c" || a == "--config" || a.starts_with("--config="));
        if !has_config {
            if let Some(h) = cwd_host {
                if let Ok(rd) = std::fs::read_dir(h) {
                    let mut found: Vec<String> = rd
                        .filter_map(|e| e.ok())
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|n| {
                            JS_CONFIG_STEMS
                                .iter()
                                .any(|s| n == s || n.starts_with(&format!("{s}.")))
                        })
                        .collect();
                    found.sort();
                    for n in found {
                        push(format!(
                            "{} configures `{b}` (setup files, transforms) from the workspace",
                            m.show(&h.join(n))
                        ));
                    }
                }
                let pj = h.join("package.json");
                // A regular file only (a FIFO would block), resolved as
                // the sandbox would, and no more than 4 MiB of it.
                let text = m
                    .map(cwd, "package.json")
                    .filter(|p| {
                        std::fs::symlink_metadata(p)
                            .map(|md| md.is_file() && md.len() <= 4 << 20)
                            .unwrap_or(false)
                    })
                    .and_then(|p| std::fs::read_to_string(p).ok());
                if let Some(text) = text {
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                        if v.get(b).is_some() {
                            push(format!(
                                "{} has a `{b}` section that configures the runner",
                                m.show(&pj)
                            ));
                        }
                    }
                }
            }
        }
        break;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn ws(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("cbrun-shadow-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        p
    }
    fn touch(p: &Path) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "").unwrap();
    }

    #[test]
    fn tokenizer() {
        let t = tokenize("cd /app && PYTHONPATH='a b' python3 -m pytest \"x y\";echo");
        let w = |s: &str| Tok::Word(s.into());
        assert_eq!(
            t,
            vec![
                w("cd"),
                w("/app"),
                Tok::Sep,
                w("PYTHONPATH=a b"),
                w("python3"),
                w("-m"),
                w("pytest"),
                w("x y"),
                Tok::Sep,
                w("echo")
            ]
        );
    }

    #[test]
    fn python_shadowing() {
        let w = ws("py");
        touch(&w.join("src/pytest.py"));
        touch(&w.join("src/sitecustomize.py"));
        touch(&w.join("_pytest/__init__.py"));
        touch(&w.join("unittest/__init__.py"));
        touch(&w.join("conftest.py"));
        touch(&w.join("pytest.ini"));
        touch(&w.join("usercustomize.py"));
        let f = shadowed_test_tools(
            &w,
            "cd /app && PYTHONPATH=src python3 -m pytest /tests/final/tests/test_a.py",
        );
        assert!(
            f.iter()
                .any(|s| s.starts_with("/app/src/pytest.py shadows the `pytest` module")),
            "{f:#?}"
        );
        assert!(
            f.iter()
                .any(|s| s.starts_with("/app/src/sitecustomize.py runs at interpreter start-up")),
            "{f:#?}"
        );
        assert!(
            f.iter().any(|s| s.starts_with("/app/_pytest shadows")),
            "{f:#?}"
        );
        assert!(
            f.iter().any(|s| s.starts_with("/app/unittest shadows")),
            "{f:#?}"
        );
        // Inert: conftest/pytest.ini at the root (tests are under /tests),
        // usercustomize in a directory that is not on PYTHONPATH.
        assert!(
            !f.iter().any(|s| s.contains("conftest")
                || s.contains("pytest.ini")
                || s.contains("usercustomize")),
            "{f:#?}"
        );
        assert_eq!(f.len(), 4, "{f:#?}");

        // The `pytest` script does not put the working directory on sys.path.
        let f = shadowed_test_tools(&w, "cd /app && pytest /tests/final/t.py");
        assert!(f.is_empty(), "{f:#?}");
        // No test path: the workspace configures pytest.
        let f = shadowed_test_tools(&w, "cd /app && pytest");
        assert!(
            f.iter().any(|s| s.starts_with("/app/conftest.py applies")),
            "{f:#?}"
        );
        assert!(
            f.iter().any(|s| s.starts_with("/app/pytest.ini applies")),
            "{f:#?}"
        );
        // case001's command: unittest harness from /tests, PYTHONPATH=src.
        let f = shadowed_test_tools(
            &w,
            "cd /app && PYTHONPATH=src python3 /tests/final/tests/run_unittests.py {test_files}",
        );
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].starts_with("/app/src/sitecustomize.py"));
        let f = shadowed_test_tools(&w, "cd /app && .venv/bin/python -m pytest /tests/final");
        assert!(
            f.iter()
                .any(|s| s.starts_with("/app/.venv/bin/python is in the workspace")),
            "{f:#?}"
        );
        // Export persists; an empty entry is the working directory.
        let f = shadowed_test_tools(
            &w,
            "export PYTHONPATH=:src; cd /app; python3 /tests/final/run.py",
        );
        assert!(
            f.iter().any(|s| s.contains("/app/usercustomize.py")),
            "{f:#?}"
        );
        let _ = fs::remove_dir_all(&w);
    }

    /// A named way to plant a shadow in a workspace.
    type Form<'a> = (&'a str, &'a dyn Fn(&Path));

    #[test]
    fn shadows_in_every_form_and_symlinks_resolved_inside_the_copy() {
        use std::os::unix::fs::symlink;
        let cmd = "cd /app && PYTHONPATH=src python3 /tests/final/run.py";
        let forms: &[Form] = &[
            ("sourceless .pyc", &|w| touch(&w.join("src/unittest.pyc"))),
            ("extension module", &|w| {
                touch(&w.join("src/unittest.cpython-311-x86_64-linux-gnu.so"))
            }),
            ("namespace dir", &|w| {
                fs::create_dir_all(w.join("src/unittest")).unwrap()
            }),
            // Dangling on the host, a package inside the sandbox.
            ("absolute symlink", &|w| {
                fs::create_dir_all(w.join(".x/ut")).unwrap();
                touch(&w.join(".x/ut/__init__.py"));
                fs::create_dir_all(w.join("src")).unwrap();
                symlink("/app/.x/ut", w.join("src/unittest")).unwrap();
            }),
            ("dangling symlink", &|w| {
                fs::create_dir_all(w.join("src")).unwrap();
                symlink("/nowhere/unittest.py", w.join("src/unittest.py")).unwrap();
            }),
        ];
        for (what, make) in forms {
            let w = ws("forms");
            make(&w);
            let f = shadowed_test_tools(&w, cmd);
            assert_eq!(f.len(), 1, "{what}: {f:#?}");
            assert!(
                f[0].contains("shadows the `unittest` module"),
                "{what}: {f:#?}"
            );
            let _ = fs::remove_dir_all(&w);
        }
        // The PYTHONPATH directory itself is an absolute symlink within the
        // workspace: followed inside the copy, not on the host.
        let w = ws("linkdir");
        touch(&w.join("lib/runpy.py"));
        symlink("/app/lib", w.join("src")).unwrap();
        let f = shadowed_test_tools(&w, cmd);
        assert!(
            f.iter().any(|s| s.starts_with("/app/lib/runpy.py shadows")),
            "{f:#?}"
        );
        // A symlink out of the workspace leads nowhere cbrun looks.
        let _ = fs::remove_file(w.join("src"));
        symlink("/usr/lib", w.join("src")).unwrap();
        assert!(shadowed_test_tools(&w, cmd).is_empty());
        // Names that only start like a module do not count.
        let _ = fs::remove_file(w.join("src"));
        touch(&w.join("src/unittest_helpers.py"));
        touch(&w.join("src/pytest_plugin.pyc"));
        assert!(shadowed_test_tools(&w, cmd).is_empty());
        let _ = fs::remove_dir_all(&w);
        assert!(runs_python(
            "cd /app && timeout 60 /usr/bin/python3.11 x.py"
        ));
        assert!(runs_python("pytest -q"));
        assert!(!runs_python("bash /tests/final/tests/run_acceptance.sh"));
    }

    #[test]
    fn node_shadowing() {
        let w = ws("node");
        touch(&w.join("node_modules/jest/package.json"));
        touch(&w.join("jest.config.js"));
        fs::write(
            w.join("package.json"),
            r#"{"scripts": {"test": "jest"}, "jest": {}}"#,
        )
        .unwrap();
        let f = shadowed_test_tools(&w, "cd /app && npx jest /tests/final");
        assert!(
            f.iter()
                .any(|s| s.starts_with("/app/node_modules/jest is the `jest` that `npx jest`")),
            "{f:#?}"
        );
        assert!(
            f.iter()
                .any(|s| s.starts_with("/app/jest.config.js configures `jest`")),
            "{f:#?}"
        );
        assert!(
            f.iter().any(|s| s.contains("has a `jest` section")),
            "{f:#?}"
        );
        let f = shadowed_test_tools(
            &w,
            "cd /app && /tests/final/node_modules/.bin/jest -c /tests/final/jest.config.js",
        );
        assert!(f.is_empty(), "{f:#?}");
        let f = shadowed_test_tools(&w, "cd /app && npm test");
        assert_eq!(
            f,
            vec![
                "`npm test` runs the script `test` from the workspace's /app/package.json"
                    .to_string()
            ]
        );
        let f = shadowed_test_tools(&w, "cd /app && node /tests/final/run.js");
        assert!(f.is_empty(), "{f:#?}");
        let _ = fs::remove_dir_all(&w);
    }
}
