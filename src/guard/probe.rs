//! Is the banned upstream importable in the sandbox's root? Probed before
//! the agent starts (and before the judge runs), and masked where it is.
//!
//! A root that has a banned package installed (a host with `tomli` in its
//! system Python, an image whose recipe pulled it in as a dependency)
//! hands the agent the answer. The published runner strips such packages
//! from its agent image and then probes the image in a throw-away
//! container; cbrun's images are read-only and `--rootfs host` is the
//! host's own `/usr`, so nothing is deleted: what the probe finds is
//! covered for the sandbox's life instead.
//!
//! The probe runs in a sandbox of its own on the same root (no network, no
//! binds, 60 s): for every probeable `import_ban` root ([`import_roots`]),
//! `importlib.util.find_spec` in each Python found (`/opt/conda/bin`,
//! `/usr/bin`, `/usr/local/bin`, `python3` on the root's `PATH`), started
//! with `-I` so only the interpreter's default `sys.path` counts, standard
//! library modules skipped (`tomllib` is not the upstream); and, where the
//! root has `node`, `require.resolve` plus the global `node_modules`
//! folders. Each location found gets a bind:
//!
//! - a Python package directory: a directory whose `__init__.py` raises
//!   `ModuleNotFoundError` (an empty directory would still import, as a
//!   namespace package);
//! - a Python module file (`.py`, `.pyc`, `.so`): a file that raises it;
//! - a Node package directory: an empty directory (no `package.json`, no
//!   `index.js`: `require` fails).
//!
//! What is masked goes into the records as `masked_imports`. The probe's
//! output is the sandbox's: each line is parsed as JSON, capped, and a
//! path is taken only when it is absolute, clean, and outside the folders
//! the phase binds itself.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sandbox::config::{BindMount, RootfsSource, Stdio};
use crate::sandbox::run::{self, HostView};
use crate::trial::phase::{self, PhaseLimits};

/// How long the probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this much of the probe's output is read.
const MAX_OUTPUT: u64 = 1 << 20;
/// At most this many locations are masked (a root that reports more is
/// not believed beyond them).
const MAX_MASKS: usize = 256;

/// One banned module found in the root and covered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaskedImport {
    pub module: String,
    /// Where it was, inside the sandbox.
    pub path: String,
}

/// What a phase adds for the masks.
#[derive(Debug, Clone, Default)]
pub struct Masks {
    pub binds: Vec<BindMount>,
    pub masked: Vec<MaskedImport>,
    pub warnings: Vec<String>,
    /// A stop-signal ended the probe's sandbox (which read it from its
    /// signalfd): the caller's phase is interrupted, not to be started.
    pub interrupted: bool,
}

/// The probe's error when a stop-signal ended its sandbox.
const INTERRUPTED: &str = "interrupted";

/// The probe's roots of `import_ban`, as the published runner derives
/// them: a trailing `/` goes; `@scope/name` stays whole (Node); another
/// token with `/` becomes its last segment; one with `.` its first (`ada.h`
/// is `ada`). Only names of at least 3 characters made of letters, digits,
/// `_`, `.` and `-`, starting with a letter or `_`, and not `v<digits>`,
/// are probed (`ada::` is not).
pub fn import_roots(import_ban: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in import_ban {
        let t = t.trim().trim_end_matches('/');
        let root = if t.starts_with('@') && t.matches('/').count() >= 1 {
            let mut parts = t.splitn(3, '/');
            let scope = parts.next().unwrap_or("");
            let name = parts.next().unwrap_or("");
            if scope.len() > 1 && probeable(name) {
                Some(format!("{scope}/{name}"))
            } else {
                None
            }
        } else {
            let last = t.rsplit('/').next().unwrap_or(t);
            let first = last.split('.').next().unwrap_or(last);
            probeable(first).then(|| first.to_owned())
        };
        if let Some(r) = root {
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

fn probeable(s: &str) -> bool {
    let mut chars = s.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    let version = s.len() > 1 && s.starts_with('v') && s[1..].chars().all(|c| c.is_ascii_digit());
    first_ok && rest_ok && s.len() >= 3 && !version
}

/// The Python side: one JSON line per root found (or skipped as stdlib).
const PY_PROBE: &str = r#"
import importlib.util, json, os, sys, sysconfig
roots = json.loads(os.environ["CBRUN_PROBE_ROOTS"])
std = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
stdlib_dir = os.path.realpath(sysconfig.get_paths().get("stdlib", "/nonexistent"))
for r in roots:
    if "/" in r or "-" in r:
        continue
    try:
        spec = importlib.util.find_spec(r)
    except Exception:
        spec = None
    if spec is None:
        continue
    paths = [os.path.realpath(p) for p in (spec.submodule_search_locations or [])]
    if not paths and spec.origin and os.path.isabs(spec.origin):
        paths = [os.path.realpath(spec.origin)]
    if not paths:
        continue
    in_std = r in std or all(
        p.startswith(stdlib_dir + os.sep) and "-packages" not in p for p in paths)
    print(json.dumps({"lang": "python", "module": r, "interpreter": sys.executable,
                      "stdlib": in_std, "paths": paths}))
"#;

/// The Node side: `require.resolve` from `/app` and `/`, and the global
/// package folders.
const NODE_PROBE: &str = r#"
const fs = require('fs'), path = require('path'), builtin = require('module').builtinModules;
const roots = JSON.parse(process.env.CBRUN_PROBE_ROOTS);
const globals = ['/usr/local/lib/node_modules', '/usr/lib/node_modules', '/opt/nodejs/lib/node_modules',
  path.join(path.dirname(path.dirname(process.execPath)), 'lib', 'node_modules')];
for (const r of roots) {
  if (builtin.includes(r)) continue;
  const found = new Set();
  try {
    let d = path.dirname(require.resolve(r, { paths: ['/app', '/'] }));
    const tail = path.join('node_modules', r);
    while (d !== '/' && d !== '.') {
      if (d.endsWith(path.sep + tail)) { found.add(fs.realpathSync(d)); break; }
      d = path.dirname(d);
    }
  } catch (e) {}
  for (const g of globals) {
    const d = path.join(g, r);
    try { if (fs.statSync(d).isDirectory()) found.add(fs.realpathSync(d)); } catch (e) {}
  }
  if (found.size) console.log(JSON.stringify({ lang: 'node', module: r, interpreter: process.execPath,
    stdlib: false, paths: [...found] }));
}
"#;

/// Runs each interpreter the root has (deduplicated by real path).
const SH_PROBE: &str = r#"
seen=
for py in /opt/conda/bin/python3 /usr/bin/python3 /usr/local/bin/python3 "$(command -v python3)" "$(command -v python)"; do
  [ -n "$py" ] && [ -x "$py" ] || continue
  real=$(readlink -f "$py" 2>/dev/null || echo "$py")
  case " $seen " in *" $real "*) continue;; esac
  seen="$seen $real"
  "$py" -I -c "$CBRUN_PY_PROBE" || echo "{\"error\": \"python probe failed: $py\"}"
done
for node in "$(command -v node)" /usr/bin/node /usr/local/bin/node /opt/nodejs/bin/node; do
  [ -n "$node" ] && [ -x "$node" ] || continue
  real=$(readlink -f "$node" 2>/dev/null || echo "$node")
  case " $seen " in *" $real "*) continue;; esac
  seen="$seen $real"
  "$node" -e "$CBRUN_NODE_PROBE" || echo "{\"error\": \"node probe failed: $node\"}"
done
"#;

#[derive(Debug, Deserialize)]
struct Line {
    #[serde(default)]
    lang: String,
    #[serde(default)]
    module: String,
    #[serde(default)]
    stdlib: bool,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    error: Option<String>,
}

/// Probes `rootfs` for the roots of `import_ban` and prepares the masks
/// in `work` (a folder the sandbox can reach, e.g. a stage). `binds` are
/// the phase's own: locations under their destinations are left alone
/// (the phase puts its own folders there), and a location that one of
/// them shows a second time (the package-manager shims bind a tool's
/// whole prefix under `/.cbrun/real/`) is masked there too. Never fails:
/// a probe that cannot run is a warning.
pub fn probe_and_mask(
    import_ban: &[String],
    rootfs: &RootfsSource,
    image_env: &[(String, String)],
    host: &HostView,
    work: &Path,
    binds: &[BindMount],
) -> Masks {
    let mut masks = Masks::default();
    let roots = import_roots(import_ban);
    if roots.is_empty() {
        return masks;
    }
    let found = match run_probe(&roots, rootfs, image_env, host, work) {
        Ok(f) => f,
        Err(e) if e == INTERRUPTED => {
            masks.interrupted = true;
            return masks;
        }
        Err(e) => {
            masks.warnings.push(format!(
                "import probe: {e}; banned modules in the root are not masked"
            ));
            return masks;
        }
    };
    for (module, path, lang) in found {
        if masks.masked.len() >= MAX_MASKS {
            masks.warnings.push(format!(
                "import probe: more than {MAX_MASKS} locations; the rest are not masked"
            ));
            break;
        }
        if masks.masked.iter().any(|m| m.path == path) {
            continue;
        }
        let Some(dst) = clean_path(&path).filter(|p| !binds.iter().any(|b| p.starts_with(&b.dst)))
        else {
            masks.warnings.push(format!(
                "import probe: {module} at {path:?} is not masked (not a path cbrun covers)"
            ));
            continue;
        };
        match mask_source(work, &module, &dst, rootfs, &lang) {
            Ok(src) => {
                let on_host = rootfs
                    .host_root()
                    .join(dst.strip_prefix("/").unwrap_or(&dst));
                for b in binds {
                    if let Ok(rest) = on_host.strip_prefix(&b.src) {
                        masks.binds.push(BindMount {
                            src: src.clone(),
                            dst: b.dst.join(rest),
                            readonly: true,
                        });
                    }
                }
                masks.binds.push(BindMount {
                    src,
                    dst,
                    readonly: true,
                });
                masks.masked.push(MaskedImport { module, path });
            }
            Err(e) => masks
                .warnings
                .push(format!("import probe: masking {module} at {path}: {e}")),
        }
    }
    masks
}

/// `(module, path, lang)` for every non-stdlib location the probe found.
fn run_probe(
    roots: &[String],
    rootfs: &RootfsSource,
    image_env: &[(String, String)],
    host: &HostView,
    work: &Path,
) -> Result<Vec<(String, String, String)>, String> {
    fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let out = work.join("probe.out");
    let err = work.join("probe.err");
    let mut cfg = phase::base_config(
        vec!["/bin/sh".into(), "-c".into(), SH_PROBE.into()],
        rootfs,
        image_env,
        &PhaseLimits {
            memory: Some(crate::sandbox::config::ByteSize(1 << 30)),
            pids: Some(256),
            cpus: None,
            require: false,
        },
        PROBE_TIMEOUT,
        err.clone(),
    );
    cfg.hostname = "probe".into();
    cfg.stdout = Stdio::File(out.clone());
    cfg.stderr = Stdio::File(err.clone());
    let roots_json = serde_json::to_string(roots).map_err(|e| e.to_string())?;
    phase::set_env(&mut cfg, "CBRUN_PROBE_ROOTS", &roots_json);
    phase::set_env(&mut cfg, "CBRUN_PY_PROBE", PY_PROBE);
    phase::set_env(&mut cfg, "CBRUN_NODE_PROBE", NODE_PROBE);
    phase::set_env(&mut cfg, "HOME", "/nonexistent");
    let o = run::run(&cfg, host).map_err(|e| crate::error::chain(&e))?;
    if o.interrupted {
        return Err(INTERRUPTED.into());
    }
    if o.timed_out {
        return Err(format!("timed out after {} s", PROBE_TIMEOUT.as_secs()));
    }
    let text = read_capped(&out).map_err(|e| format!("reading its output: {e}"))?;
    let mut found = Vec::new();
    for l in text.lines().filter(|l| l.starts_with('{')) {
        let Ok(line) = serde_json::from_str::<Line>(l) else {
            continue;
        };
        if line.error.is_some() || line.stdlib || !roots.contains(&line.module) {
            continue;
        }
        for p in line.paths {
            found.push((line.module.clone(), p, line.lang.clone()));
        }
    }
    // A root with no shell at all runs nothing: nothing to mask there.
    if o.exit_code == Some(127) && found.is_empty() {
        return Ok(Vec::new());
    }
    Ok(found)
}

fn read_capped(p: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut s = String::new();
    fs::File::open(p)?.take(MAX_OUTPUT).read_to_string(&mut s)?;
    Ok(s)
}

/// `p` as a bind destination: absolute, no `.`/`..`, not `/`, no NUL.
fn clean_path(p: &str) -> Option<PathBuf> {
    let path = Path::new(p);
    // By the text, not by `components()`, which drops a `.` in the middle.
    let ok = path.is_absolute()
        && !p.contains('\0')
        && p.len() > 1
        && p.split('/')
            .skip(1)
            .all(|s| !s.is_empty() && s != "." && s != "..");
    ok.then(|| path.to_path_buf())
}

/// The host file or directory bound over `dst` for `module`.
fn mask_source(
    work: &Path,
    module: &str,
    dst: &Path,
    rootfs: &RootfsSource,
    lang: &str,
) -> io::Result<PathBuf> {
    // What is at `dst` in the root, seen from the host without following
    // a link at the end (the probe reported real paths).
    let root = rootfs.host_root();
    let rel = dst.strip_prefix("/").unwrap_or(dst);
    let is_dir = match rootfs {
        RootfsSource::Host => fs::symlink_metadata(dst)?.is_dir(),
        _ => crate::sys::dir::Dir::open(&root)
            .map_err(io::Error::other)?
            .entry(rel)
            .map_err(io::Error::other)?
            .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not in the root"))?,
    };
    let safe: String = module
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let masks = work.join("masks");
    fs::create_dir_all(&masks)?;
    let raise = format!(
        "raise ModuleNotFoundError(\"No module named '{module}' (the case bans it; cbrun hides the copy in this root)\", name='{module}')\n"
    );
    if lang == "node" {
        let d = masks.join("node-empty");
        fs::create_dir_all(&d)?;
        return Ok(d);
    }
    if is_dir {
        let d = masks.join(format!("py-{safe}"));
        fs::create_dir_all(&d)?;
        fs::write(d.join("__init__.py"), &raise)?;
        Ok(d)
    } else {
        let f = masks.join(format!("py-{safe}.py"));
        fs::write(&f, &raise)?;
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_follow_the_published_rules() {
        let bans: Vec<String> = [
            "tomli",
            "tomli/",
            "ada.h",
            "ada::",
            "github.com/spf13/cobra",
            "@scope/pkg/sub",
            "v8",
            "v2",
            "re",
            "python-dotenv",
            "9lives",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            import_roots(&bans),
            vec!["tomli", "ada", "cobra", "@scope/pkg", "python-dotenv"]
        );
    }

    #[test]
    fn only_clean_absolute_paths_are_masked() {
        assert!(clean_path("/usr/lib/python3/dist-packages/tomli").is_some());
        for bad in ["relative/x", "/", "/a/../etc", "/a/./b", "/a\0b", ""] {
            assert!(clean_path(bad).is_none(), "{bad:?}");
        }
    }
}
