//! The module-name rule: which entries *are* a banned module because of
//! their name and place (see the parent module's docs for the rule and
//! its reasons).

use std::path::Path;

/// The ban entries in the forms names are compared in.
pub(super) struct Names {
    /// Python: (entry with `-` read as `_`, entry as written), for entries
    /// that are plain identifiers.
    python: Vec<(String, String)>,
    /// JavaScript: package names (`name` or `@scope/name`).
    js: Vec<String>,
}

impl Names {
    pub(super) fn new(bans: &[String]) -> Names {
        let mut python = Vec::new();
        let mut js = Vec::new();
        for b in bans.iter().map(|b| b.trim()).filter(|b| !b.is_empty()) {
            let norm = b.replace('-', "_");
            if is_identifier(&norm) {
                python.push((norm, b.to_owned()));
            }
            if is_js_package(b) {
                js.push(b.to_owned());
            }
        }
        Names { python, js }
    }

    /// The ban (as written) that the file `name` is a Python module of:
    /// `X.py`, `X.pyw`, `X.pyc`, `X.so`, `X.pyd`, `X.<tag>.so`,
    /// `X.<tag>.pyd`. A tagged `.pyc` (`__pycache__`'s) is never imported
    /// by that name.
    pub(super) fn python_file(&self, name: &[u8]) -> Option<&str> {
        let name = std::str::from_utf8(name).ok()?;
        let (stem, rest) = name.split_once('.')?;
        let module = matches!(rest, "py" | "pyw" | "pyc" | "so" | "pyd")
            || rest.ends_with(".so")
            || rest.ends_with(".pyd");
        if !module {
            return None;
        }
        self.python_ban(stem)
    }

    /// The ban (as written) that a directory named `name` would be the
    /// package of.
    pub(super) fn python_dir(&self, name: &[u8]) -> Option<&str> {
        self.python_ban(std::str::from_utf8(name).ok()?)
    }

    fn python_ban(&self, module: &str) -> Option<&str> {
        self.python
            .iter()
            .find(|(norm, _)| norm == module)
            .map(|(_, written)| written.as_str())
    }

    /// The ban (as written) that `package` (`name` or `@scope/name` below
    /// a `node_modules`) is.
    pub(super) fn js_package(&self, package: &str) -> Option<&str> {
        self.js.iter().find(|b| *b == package).map(String::as_str)
    }
}

/// Whether Python can put the directory `rel` (below the workspace root;
/// `has_init` says whether it holds an `__init__.py`) on `sys.path`, so
/// that its entries import under their own names.
pub(super) fn python_path_dir(rel: &Path, has_init: bool) -> bool {
    if rel.as_os_str().is_empty() || rel == Path::new("src") || !has_init {
        return true;
    }
    matches!(
        rel.file_name().and_then(|n| n.to_str()),
        Some("site-packages" | "dist-packages")
    )
}

/// Whether a directory entry makes its directory a Python package (or
/// namespace package) worth the name: Python source or a compiled module.
pub(super) fn is_python_module_file(name: &[u8]) -> bool {
    let Ok(name) = std::str::from_utf8(name) else {
        return false;
    };
    [".py", ".pyw", ".pyc", ".so", ".pyd"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `name` or `@scope/name`, in npm's character set.
fn is_js_package(s: &str) -> bool {
    let ok = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
    };
    match s.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('/')
            .is_some_and(|(scope, name)| ok(scope) && ok(name)),
        None => ok(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Names {
        Names::new(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn python_module_files_and_dirs() {
        let n = names(&["semver", "semantic-version", "os.path", "left-pad", "@s/p"]);
        for f in [
            "semver.py",
            "semver.pyc",
            "semver.so",
            "semver.cpython-311-x86_64-linux-gnu.so",
            "semver.abi3.so",
            "semver.pyd",
        ] {
            assert_eq!(n.python_file(f.as_bytes()), Some("semver"), "{f}");
        }
        for f in [
            "semver.cpython-311.pyc",
            "semver.pyi",
            "semver.txt",
            "semver",
            "Semver.py",
            "semver_x.py",
            "path.py",
        ] {
            assert_eq!(n.python_file(f.as_bytes()), None, "{f}");
        }
        assert_eq!(
            n.python_file(b"semantic_version.py"),
            Some("semantic-version")
        );
        assert_eq!(n.python_dir(b"semver"), Some("semver"));
        assert_eq!(n.python_dir(b"os"), None, "dotted bans match imports only");
        // `left-pad` reads as `left_pad` for Python, as it does for imports.
        assert_eq!(n.python_dir(b"left_pad"), Some("left-pad"));
        assert_eq!(n.js_package("left-pad"), Some("left-pad"));
        assert_eq!(n.js_package("@s/p"), Some("@s/p"));
        assert_eq!(n.js_package("os.path"), Some("os.path"));
        assert_eq!(n.js_package("left"), None);
    }

    #[test]
    fn which_directories_are_on_sys_path() {
        assert!(python_path_dir(Path::new(""), true));
        assert!(python_path_dir(Path::new("src"), true));
        assert!(python_path_dir(Path::new("a/b"), false));
        assert!(python_path_dir(
            Path::new(".venv/lib/python3.11/site-packages"),
            true
        ));
        assert!(!python_path_dir(Path::new("pip/_vendor"), true));
        assert!(!python_path_dir(Path::new("pkg"), true));
    }
}
