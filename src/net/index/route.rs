//! What an index request asks for: the path layout the sandbox sees, and
//! the package names each request must be checked under.
//!
//! ```text
//! /pypi/simple/<project>/                      PEP 503/691 project page
//! /pypi/pypi/<project>[/<version>]/json        PyPI JSON API
//! /pypi/files/packages/...                     a distribution file
//! /npm/<name> | /npm/@scope%2fname | /npm/@scope/name    package document
//! /npm/<name>/<version-or-tag>                 version document
//! /npm/<name>/-/<name>-<version>.tgz           tarball
//! ```

use crate::guard::names::{names_from_location, pep503, Family};

/// A request the index serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A PEP 503/691 project page (`project` normalised).
    PypiSimple { project: String },
    /// The PyPI JSON API for a project or one release.
    PypiJson {
        project: String,
        version: Option<String>,
    },
    /// A file under the file host; `path` starts with `packages/` and is
    /// forwarded as the client wrote it.
    PypiFile {
        path: String,
        /// The project names the file may belong to (from its name).
        names: Vec<String>,
    },
    /// An npm package document, or with `spec` one version's document.
    NpmDoc { name: String, spec: Option<String> },
    /// An npm tarball; `file` is checked to be `<name>-<version>.tgz`.
    NpmTarball { name: String, file: String },
}

/// Why a path is not one the index serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// 404: not an index path.
    NotFound(String),
    /// 400: an index path with a malformed part.
    Bad(String),
}

impl Route {
    /// The naming family the names are checked in.
    pub fn family(&self) -> Family {
        match self {
            Route::PypiSimple { .. } | Route::PypiJson { .. } | Route::PypiFile { .. } => {
                Family::Python
            }
            Route::NpmDoc { .. } | Route::NpmTarball { .. } => Family::Npm,
        }
    }

    /// Every package name this request would fetch something of.
    pub fn names(&self) -> Vec<&str> {
        match self {
            Route::PypiSimple { project } | Route::PypiJson { project, .. } => vec![project],
            Route::PypiFile { names, .. } => names.iter().map(String::as_str).collect(),
            Route::NpmDoc { name, .. } | Route::NpmTarball { name, .. } => vec![name],
        }
    }

    /// A document (its URLs are rewritten to the index) rather than a file.
    pub fn is_document(&self) -> bool {
        !matches!(self, Route::PypiFile { .. } | Route::NpmTarball { .. })
    }
}

/// Decodes `%XX` escapes; `None` for a malformed escape or non-UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn py_name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A path segment of a file URL: URL-safe characters only, and never `.`
/// or `..` once decoded.
fn file_segment_ok(raw: &str) -> bool {
    !raw.is_empty()
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@%".contains(&b))
        && percent_decode(raw).is_some_and(|d| d != "." && d != ".." && !d.contains('/'))
}

/// The names a distribution file may belong to. A wheel's name is exact
/// (PEP 427 escapes `-` in names). An sdist or older format is
/// `name-version`, and the version starts with a digit; a legacy name may
/// itself hold `-digit` parts, so every such split is a candidate.
pub fn python_file_names(file: &str) -> Vec<String> {
    let f = file.strip_suffix(".metadata").unwrap_or(file);
    if let Some(stem) = f.strip_suffix(".whl") {
        return stem
            .split('-')
            .next()
            .filter(|n| !n.is_empty())
            .map(|n| vec![n.to_string()])
            .unwrap_or_default();
    }
    let mut out = Vec::new();
    let stem = match names_from_location(f, Family::Python).pop() {
        // The longest digit-free prefix: where the stem's name part ends at
        // the latest; the version (and any `-digit` name parts) follow.
        Some(longest) => longest,
        None => return out,
    };
    let rest = &f[stem.len().min(f.len())..];
    // Without `-<version>` after it, the name is only a guess.
    if !rest
        .strip_prefix('-')
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    {
        return out;
    }
    out.push(stem.clone());
    // `name-2x-1.0.tar.gz`: `name` is the longest prefix, `name-2x` another
    // candidate.
    let mut acc = stem;
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let parts: Vec<&str> = rest.split('-').collect();
    for (i, p) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            break;
        }
        acc = format!("{acc}-{p}");
        if parts[i + 1].starts_with(|c: char| c.is_ascii_digit()) {
            out.push(acc.clone());
        }
    }
    out
}

fn npm_part_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 214
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'~'))
}

/// Parses an index path (the part after the proxy's address; any query is
/// dropped).
pub fn route(path: &str) -> Result<Route, RouteError> {
    let path = path.split('?').next().unwrap_or("");
    if let Some(rest) = path.strip_prefix("/pypi/") {
        return pypi(rest);
    }
    if let Some(rest) = path.strip_prefix("/npm/") {
        return npm(rest);
    }
    Err(RouteError::NotFound(format!(
        "{path:?} is not a registry index path (/pypi/simple/, /pypi/files/, /npm/)"
    )))
}

fn pypi(rest: &str) -> Result<Route, RouteError> {
    let bad = |why: &str| RouteError::Bad(format!("/pypi/{rest}: {why}"));
    if let Some(p) = rest.strip_prefix("simple/") {
        let project = p.strip_suffix('/').unwrap_or(p);
        if project.is_empty() {
            return Err(RouteError::NotFound(
                "the index does not serve the list of all projects".into(),
            ));
        }
        if !py_name_ok(project) {
            return Err(bad("not a project name"));
        }
        return Ok(Route::PypiSimple {
            project: pep503(project),
        });
    }
    if let Some(p) = rest.strip_prefix("pypi/") {
        let parts: Vec<&str> = p.trim_end_matches('/').split('/').collect();
        let (project, version) = match parts.as_slice() {
            [project, "json"] => (*project, None),
            [project, version, "json"] => (*project, Some(*version)),
            _ => {
                return Err(RouteError::NotFound(format!(
                    "/pypi/{rest}: not a JSON API path"
                )))
            }
        };
        if !py_name_ok(project) {
            return Err(bad("not a project name"));
        }
        if let Some(v) = version {
            if !py_name_ok(&v.replace(['+', '!'], "")) {
                return Err(bad("not a version"));
            }
        }
        return Ok(Route::PypiJson {
            project: pep503(project),
            version: version.map(str::to_owned),
        });
    }
    if let Some(p) = rest.strip_prefix("files/") {
        let segs: Vec<&str> = p.split('/').collect();
        if segs.first() != Some(&"packages") || segs.len() < 2 {
            return Err(RouteError::NotFound(format!(
                "/pypi/{rest}: files live under /pypi/files/packages/"
            )));
        }
        if !segs.iter().all(|s| file_segment_ok(s)) {
            return Err(bad("not a file path"));
        }
        let file = percent_decode(segs[segs.len() - 1]).unwrap_or_default();
        let mut names = python_file_names(&file);
        // The legacy layout names the project too:
        // packages/source/s/semver/semver-1.0.tar.gz.
        if segs.len() == 5 && segs[2].len() == 1 {
            if let Some(p) = percent_decode(segs[3]) {
                names.push(p);
            }
        }
        if names.is_empty() {
            return Err(RouteError::Bad(format!(
                "/pypi/{rest}: cannot tell which project {file:?} belongs to"
            )));
        }
        return Ok(Route::PypiFile {
            path: p.to_owned(),
            names,
        });
    }
    Err(RouteError::NotFound(format!(
        "/pypi/{rest} is not a registry index path (/pypi/simple/, /pypi/files/)"
    )))
}

fn npm(rest: &str) -> Result<Route, RouteError> {
    let bad = |why: &str| RouteError::Bad(format!("/npm/{rest}: {why}"));
    let segs: Vec<&str> = rest.split('/').collect();
    let first = percent_decode(segs[0]).ok_or_else(|| bad("bad escape"))?;
    // `@scope%2fname` arrives as one segment, `@scope/name` as two.
    let (name, tail) = if let Some(scoped) = first.strip_prefix('@') {
        let (scope, pkg, tail) = match scoped.split_once('/') {
            Some((s, p)) => (s.to_owned(), p.to_owned(), &segs[1..]),
            None => {
                let Some(p) = segs.get(1) else {
                    return Err(bad("a scoped name needs `@scope/name`"));
                };
                (scoped.to_owned(), (*p).to_owned(), &segs[2..])
            }
        };
        if !npm_part_ok(&scope) || !npm_part_ok(&pkg) {
            return Err(bad("not a package name"));
        }
        (format!("@{scope}/{pkg}"), tail)
    } else {
        if first.starts_with('-') {
            // Registry endpoints (`/-/v1/search`, audits, login): not served.
            return Err(RouteError::NotFound(format!(
                "/npm/{rest}: only package documents and tarballs are served"
            )));
        }
        if !npm_part_ok(&first) || first.starts_with(['.', '_']) {
            return Err(bad("not a package name"));
        }
        (first, &segs[1..])
    };
    match tail {
        [] | [""] => Ok(Route::NpmDoc { name, spec: None }),
        [spec] => {
            let spec = percent_decode(spec).ok_or_else(|| bad("bad escape"))?;
            if !npm_part_ok(&spec.replace('+', "")) {
                return Err(bad("not a version or tag"));
            }
            Ok(Route::NpmDoc {
                name,
                spec: Some(spec),
            })
        }
        ["-", file] => {
            let file = percent_decode(file).ok_or_else(|| bad("bad escape"))?;
            let base = name.rsplit('/').next().unwrap_or(&name);
            let version = file
                .strip_suffix(".tgz")
                .and_then(|f| f.strip_prefix(base))
                .and_then(|f| f.strip_prefix('-'));
            match version {
                Some(v)
                    if v.starts_with(|c: char| c.is_ascii_digit())
                        && npm_part_ok(&v.replace('+', "")) => {}
                _ => {
                    return Err(bad(&format!(
                        "tarball {file:?} is not {base}-<version>.tgz of package {name}"
                    )))
                }
            }
            Ok(Route::NpmTarball { name, file })
        }
        _ => Err(RouteError::NotFound(format!(
            "/npm/{rest}: not a package document or tarball"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(p: &str) -> Route {
        route(p).unwrap_or_else(|e| panic!("{p}: {e:?}"))
    }

    #[test]
    fn pypi_paths() {
        assert_eq!(
            ok("/pypi/simple/Semantic_Version/"),
            Route::PypiSimple {
                project: "semantic-version".into()
            }
        );
        assert_eq!(
            ok("/pypi/simple/semver"),
            Route::PypiSimple {
                project: "semver".into()
            }
        );
        assert_eq!(
            ok("/pypi/pypi/SemVer/3.0.2/json"),
            Route::PypiJson {
                project: "semver".into(),
                version: Some("3.0.2".into())
            }
        );
        assert!(matches!(
            ok("/pypi/pypi/x/json"),
            Route::PypiJson { version: None, .. }
        ));
        let r = ok("/pypi/files/packages/ab/cd/ef01/semver-3.0.2-py3-none-any.whl");
        assert_eq!(r.names(), ["semver"]);
        assert!(!r.is_document());
        let r = ok("/pypi/files/packages/ab/cd/ef01/semver-3.0.2-py3-none-any.whl.metadata");
        assert_eq!(r.names(), ["semver"]);
        let r = ok("/pypi/files/packages/source/s/semver/semver-2.0.tar.gz");
        assert_eq!(r.names(), ["semver", "semver"]);
        let r = ok("/pypi/files/packages/aa/bb/cc/semantic_version-2.10.0.tar.gz");
        assert_eq!(r.names(), ["semantic_version"]);
        let r = ok("/pypi/files/packages/aa/bb/cc/py-2x-1.0.tar.gz");
        assert_eq!(r.names(), ["py", "py-2x"]);
        let r = ok("/pypi/files/packages/aa/bb/cc/semver-tools-1.0.zip");
        assert_eq!(r.names(), ["semver-tools"]);
        let r = ok("/pypi/files/packages/aa/bb/cc/x-1.0%2Blocal-py3-none-any.whl");
        assert_eq!(r.names(), ["x"]);
        for (p, bad) in [
            ("/pypi/simple/", false),
            ("/pypi/simple/a%20b/", true),
            ("/pypi/files/packages/../../etc/passwd", true),
            ("/pypi/files/packages/%2e%2e/x-1.whl", true),
            ("/pypi/files/other/x-1.0.tar.gz", false),
            ("/pypi/files/packages/aa/bb/cc/README", true),
            ("/pypi/files/packages//x-1.0.tar.gz", true),
            ("/pypi/web/semver", false),
            ("/simple/semver/", false),
            ("/", false),
        ] {
            match route(p) {
                Err(RouteError::Bad(_)) if bad => {}
                Err(RouteError::NotFound(_)) if !bad => {}
                other => panic!("{p}: {other:?}"),
            }
        }
    }

    #[test]
    fn npm_paths() {
        assert_eq!(
            ok("/npm/semver"),
            Route::NpmDoc {
                name: "semver".into(),
                spec: None
            }
        );
        for p in [
            "/npm/@Scope%2fPkg",
            "/npm/%40Scope%2FPkg",
            "/npm/@Scope/Pkg",
        ] {
            assert_eq!(
                ok(p),
                Route::NpmDoc {
                    name: "@Scope/Pkg".into(),
                    spec: None
                },
                "{p}"
            );
        }
        assert_eq!(
            ok("/npm/semver/latest"),
            Route::NpmDoc {
                name: "semver".into(),
                spec: Some("latest".into())
            }
        );
        assert_eq!(
            ok("/npm/semver/-/semver-7.5.4.tgz"),
            Route::NpmTarball {
                name: "semver".into(),
                file: "semver-7.5.4.tgz".into()
            }
        );
        assert_eq!(ok("/npm/@s/p/-/p-1.0.0-beta.1.tgz").names(), ["@s/p"]);
        for (p, bad) in [
            ("/npm/semver-utils/-/semver-7.5.4.tgz", true),
            ("/npm/semver/-/semver-utils-1.0.0.tgz", true),
            ("/npm/semver/-/semver-7.5.4.tar", true),
            ("/npm/@s", true),
            ("/npm/..", true),
            ("/npm/a%2f..%2fb", true),
            ("/npm/-/v1/search", false),
            ("/npm/x/y/z", false),
            ("/npm/.hidden", true),
        ] {
            match route(p) {
                Err(RouteError::Bad(_)) if bad => {}
                Err(RouteError::NotFound(_)) if !bad => {}
                other => panic!("{p}: {other:?}"),
            }
        }
    }
}
