//! Package-name normalisation and requirement-spec parsing.
//!
//! The shell shims (`scripts/pkgshim.sh`) and the solve-time Python hook
//! implement the same rules; the Rust side computes the hashed ban keys they
//! compare against, so the two must agree. Tests in `pkgshim.rs` run the
//! shims on the specs tested here to keep them in step.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

/// A naming scheme: how one package manager spells and compares names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// PyPI (pip, uv, pipx, poetry, pdm): PEP 503.
    Python,
    /// conda, mamba, micromamba. Compared with PEP 503 rules too: conda-forge
    /// spells the same project `semantic_version` or `semantic-version`.
    Conda,
    /// npm, npx, pnpm, yarn, bun: lowercase, `@scope/name` kept as a unit.
    Npm,
    /// Go module paths: lowercase, a ban also covers paths below it.
    Go,
    /// Cargo crates: lowercase, `-` and `_` equivalent.
    Cargo,
    /// Debian packages (apt, apt-get, dpkg): lowercase.
    Deb,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::Python,
        Family::Conda,
        Family::Npm,
        Family::Go,
        Family::Cargo,
        Family::Deb,
    ];

    /// Short tag used for the shim's hash-list variable names.
    pub fn tag(self) -> &'static str {
        match self {
            Family::Python => "py",
            Family::Conda => "conda",
            Family::Npm => "npm",
            Family::Go => "go",
            Family::Cargo => "cargo",
            Family::Deb => "deb",
        }
    }
}

/// PEP 503: `re.sub(r"[-_.]+", "-", name).lower()` (ASCII lowercase, as the
/// shims' `tr`/`sed` do in the C locale).
pub fn pep503(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_run = false;
        }
    }
    out
}

/// The comparable form of one package name in `family`.
pub fn normalize(family: Family, name: &str) -> String {
    match family {
        Family::Python | Family::Conda => pep503(name),
        Family::Cargo => name.to_ascii_lowercase().replace('_', "-"),
        Family::Npm | Family::Go | Family::Deb => name.to_ascii_lowercase(),
    }
}

/// The key a ban name is stored under (hashed in the shims). `None` for a ban
/// that is empty after normalisation.
pub fn ban_key(family: Family, ban: &str) -> Option<String> {
    let ban = trim_ws(ban);
    let key = match family {
        Family::Npm => {
            let b = ban.to_ascii_lowercase();
            // `@scope/*` and `@scope` both ban the whole scope.
            b.strip_suffix("/*").map(str::to_string).unwrap_or(b)
        }
        Family::Go => {
            let b = ban.to_ascii_lowercase();
            let b = b.split('@').next().unwrap_or("");
            let b = b.strip_suffix("/...").unwrap_or(b);
            b.trim_end_matches('/').to_string()
        }
        _ => normalize(family, ban),
    };
    (!key.is_empty()).then_some(key)
}

/// Every key a candidate name is checked under: itself, plus the scope of a
/// scoped npm name, plus every `/`-prefix of a Go module path.
pub fn candidate_keys(family: Family, name: &str) -> Vec<String> {
    let n = normalize(family, name);
    if n.is_empty() {
        return Vec::new();
    }
    match family {
        Family::Npm => {
            let mut v = vec![n.clone()];
            if n.starts_with('@') {
                if let Some((scope, _)) = n.split_once('/') {
                    v.push(scope.to_string());
                }
            }
            v
        }
        Family::Go => {
            let mut v = Vec::new();
            for (i, c) in n.char_indices() {
                if c == '/' && i > 0 {
                    v.push(n[..i].to_string());
                }
            }
            v.push(n);
            v
        }
        _ => vec![n],
    }
}

/// The first name in `spec` that a ban in `bans` covers, as spelled in the
/// spec (this is what the shims print).
pub fn banned_name(family: Family, spec: &str, bans: &[String]) -> Option<String> {
    let keys: Vec<String> = bans.iter().filter_map(|b| ban_key(family, b)).collect();
    requirement_names(family, spec).into_iter().find(|name| {
        candidate_keys(family, name)
            .iter()
            .any(|k| keys.iter().any(|b| b == k))
    })
}

/// Lowercase hex SHA-256 of `s`.
pub fn sha256_hex(s: &str) -> String {
    let d = Sha256::digest(s.as_bytes());
    let mut out = String::with_capacity(64);
    for b in d {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Hashes of the ban keys of `bans` in `family`, sorted and deduplicated.
pub fn hashed_bans(family: Family, bans: &[String]) -> Vec<String> {
    let mut v: Vec<String> = bans
        .iter()
        .filter_map(|b| ban_key(family, b))
        .map(|k| sha256_hex(&k))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The hashed ban keys of one family, for checking names outside the
/// shims (cbrun's registry index): a name is covered when the hash of any
/// of its [`candidate_keys`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashedBans {
    family: Family,
    keys: BTreeSet<String>,
}

impl HashedBans {
    pub fn new(family: Family, bans: &[String]) -> Self {
        HashedBans {
            family,
            keys: hashed_bans(family, bans).into_iter().collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether a ban covers `name` (as spelled anywhere: it is normalised).
    pub fn covers(&self, name: &str) -> bool {
        !self.keys.is_empty()
            && candidate_keys(self.family, name)
                .iter()
                .any(|k| self.keys.contains(&sha256_hex(k)))
    }
}

/// Python module matching: `packaging` bans `packaging` and `packaging.*`;
/// `packaging.version` bans only that module and below.
pub fn module_banned(module: &str, bans: &[String]) -> bool {
    bans.iter().any(|b| {
        let b = b.trim();
        !b.is_empty()
            && (module == b
                || (module.starts_with(b) && module.as_bytes().get(b.len()) == Some(&b'.')))
    })
}

/// npm `require`/`import` specifier matching: the specifier (minus `node:`)
/// equals the ban or lies below it (`semver/functions/parse`); `@scope` or
/// `@scope/*` bans the whole scope.
pub fn npm_specifier_banned(spec: &str, bans: &[String]) -> bool {
    let s = spec.to_ascii_lowercase();
    let s = s.strip_prefix("node:").unwrap_or(&s);
    bans.iter()
        .filter_map(|b| ban_key(Family::Npm, b))
        .any(|b| s == b || (s.starts_with(&b) && s.as_bytes().get(b.len()) == Some(&b'/')))
}

// ------------------------------------------------------------ spec parsing

/// Archive suffixes stripped from file names, compound ones first.
const ARCHIVE_EXTS: &[&str] = &[
    ".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst", ".tgz", ".tbz2", ".tbz", ".txz", ".tar", ".whl",
    ".zip", ".egg", ".conda", ".deb", ".crate", ".git",
];

/// Hosts whose URLs name the repository in the second path segment.
const FORGES: &[&str] = &["github.com", "gitlab.com", "bitbucket.org"];

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

fn trim_ws(s: &str) -> &str {
    s.trim_matches(is_ws)
}

/// The longest prefix of `s` made of `ok` characters, up to the first line
/// break (the shims look at the first line only).
fn leading(s: &str, ok: impl Fn(char) -> bool) -> &str {
    let end = s.find(|c: char| !ok(c)).unwrap_or(s.len());
    &s[..end]
}

fn py_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn ends_with_archive(s: &str) -> bool {
    ARCHIVE_EXTS.iter().any(|e| *e != ".git" && s.ends_with(e))
}

/// Name(s) derived from a file, directory, URL or VCS location:
/// `./dist/semver-3.0.0-py3-none-any.whl` → `semver`,
/// `git+https://github.com/o/node-semver.git@v1` → `node-semver`.
pub fn names_from_location(s: &str, family: Family) -> Vec<String> {
    let mut out = Vec::new();
    // The repository of a forge URL (`…github.com/owner/repo/archive/x.zip`).
    if family != Family::Deb {
        for host in FORGES {
            if let Some(i) = s.find(host) {
                let rest = &s[i + host.len()..];
                let Some(rest) = rest.strip_prefix('/').or_else(|| rest.strip_prefix(':')) else {
                    continue;
                };
                let Some((_owner, rest)) = rest.split_once('/') else {
                    continue;
                };
                let repo = rest.split(['/', '#', '?', '@']).next().unwrap_or("");
                let repo = repo.strip_suffix(".git").unwrap_or(repo);
                if !repo.is_empty() {
                    out.push(repo.to_string());
                }
                break;
            }
        }
    }
    let s = s.split(['?', '#']).next().unwrap_or("");
    let s = s.trim_end_matches('/');
    let base = s.rsplit('/').next().unwrap_or("");
    let base = base.rsplit(':').next().unwrap_or("");
    // A VCS URL's `@ref` (`repo.git@v1.0`) is not part of the name.
    let base = base.split('@').next().unwrap_or("");
    if base.is_empty() || base == "." || base == ".." {
        return out;
    }
    let mut stem = base;
    for e in ARCHIVE_EXTS {
        if let Some(x) = stem.strip_suffix(e) {
            stem = x;
            break;
        }
    }
    let name = if family == Family::Deb {
        stem.split('_').next().unwrap_or("").to_string()
    } else {
        // `name-version…`: dash-separated parts up to the first that starts
        // with a digit (wheels, sdists, npm tarballs, conda packages).
        let mut parts = Vec::new();
        for p in stem.split('-') {
            if p.starts_with(|c: char| c.is_ascii_digit()) {
                break;
            }
            parts.push(p);
        }
        parts.join("-")
    };
    if !name.is_empty() && !out.contains(&name) {
        out.push(name);
    }
    out
}

/// The package name(s) a requirement spec asks a `family` tool to install,
/// as spelled in the spec. Empty when the spec names nothing we can tell
/// (`.`, a flag, a bare version).
pub fn requirement_names(family: Family, spec: &str) -> Vec<String> {
    let s = trim_ws(spec);
    if s.is_empty() {
        return Vec::new();
    }
    match family {
        Family::Python => python_names(s),
        Family::Conda => {
            let s = s.rsplit("::").next().unwrap_or("");
            if s.contains("://")
                || s.starts_with(['.', '/', '~'])
                || s.ends_with(".conda")
                || s.ends_with(".tar.bz2")
            {
                names_from_location(s, family)
            } else {
                one(leading(s, py_name_char))
            }
        }
        Family::Npm => npm_names(s),
        Family::Cargo => {
            if s.contains("://") || s.starts_with(['.', '/', '~']) {
                names_from_location(s, family)
            } else {
                let head = s.split('@').next().unwrap_or("");
                one(leading(head, |c| {
                    c.is_ascii_alphanumeric() || matches!(c, '_' | '-')
                }))
            }
        }
        Family::Go => go_names(s),
        Family::Deb => {
            if s.ends_with(".deb") || s.starts_with(['.', '/', '~']) {
                names_from_location(s, family)
            } else {
                one(leading(s, |c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-')
                }))
            }
        }
    }
}

fn one(s: &str) -> Vec<String> {
    if s.is_empty() {
        Vec::new()
    } else {
        vec![s.to_string()]
    }
}

fn push_unique(v: &mut Vec<String>, more: Vec<String>) {
    for m in more {
        if !v.contains(&m) {
            v.push(m);
        }
    }
}

fn python_names(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `…#egg=name` names the project of a VCS or URL requirement.
    if let Some(i) = s.find("#egg=") {
        let egg = &s[i + 5..];
        let egg = egg.split(['&', ' ', '\t', '\n']).next().unwrap_or("");
        push_unique(&mut out, one(egg));
    }
    let name = leading(s, py_name_char);
    // PEP 508 direct reference: `name [extras] @ url`.
    if !name.is_empty() {
        let rest = s[name.len()..].trim_start_matches(is_ws);
        let rest = match rest.strip_prefix('[') {
            Some(r) => match r.find(']') {
                Some(j) => r[j + 1..].trim_start_matches(is_ws),
                None => rest,
            },
            None => rest,
        };
        if rest.starts_with('@') {
            push_unique(&mut out, one(name));
            return out;
        }
    }
    // Judge by the first word: markers after `;` may contain anything.
    let w = s
        .split([';', ' ', '\t', '\n', '\r', '\x0b', '\x0c'])
        .next()
        .unwrap_or("");
    let location = w.contains("://")
        || w.starts_with("git+")
        || w.starts_with("hg+")
        || w.starts_with("svn+")
        || w.starts_with("bzr+")
        || w.starts_with("file:")
        || w.starts_with(['.', '/', '~'])
        || w.contains('/')
        || ends_with_archive(w);
    if location {
        push_unique(&mut out, names_from_location(s, Family::Python));
    } else {
        push_unique(&mut out, one(name));
    }
    out
}

/// Whether an npm spec (or the part after `name@`) is a location rather than
/// a version range or tag.
fn npm_location(s: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "git+",
        "git:",
        "github:",
        "gitlab:",
        "bitbucket:",
        "gist:",
        "file:",
        "link:",
        ".",
        "/",
        "~",
    ];
    s.contains("://")
        || PREFIXES.iter().any(|p| s.starts_with(p))
        || s.ends_with(".tgz")
        || s.ends_with(".tar.gz")
        || s.ends_with(".tar")
        || (!s.starts_with('@') && s.contains('/'))
}

fn npm_names(s: &str) -> Vec<String> {
    if let Some(rest) = s.strip_prefix("npm:") {
        return npm_names(trim_ws(rest));
    }
    // Split `name@rest`; a scoped name's own `@` is at index 0.
    let at = if let Some(r) = s.strip_prefix('@') {
        r.find('@').map(|i| i + 1)
    } else {
        s.find('@')
    };
    let (head, rest) = match at {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let plausible = !head.is_empty()
        && !head.contains(':')
        && !head.starts_with(['.', '~', '/'])
        && !head.contains(is_ws)
        && if head.starts_with('@') {
            head.matches('/').count() == 1 && !head.ends_with('/') && !head.starts_with("@/")
        } else {
            !head.contains('/')
        };
    let mut out = Vec::new();
    if plausible {
        out.push(head.to_string());
        if let Some(rest) = rest {
            if let Some(target) = rest.strip_prefix("npm:") {
                push_unique(&mut out, npm_names(target));
            } else if npm_location(rest) {
                push_unique(&mut out, names_from_location(rest, Family::Npm));
            }
        }
    } else if npm_location(s) {
        push_unique(&mut out, names_from_location(s, Family::Npm));
    }
    out
}

fn go_names(s: &str) -> Vec<String> {
    if s.starts_with(['.', '/', '-']) || s.ends_with(".go") || matches!(s, "all" | "std" | "cmd") {
        return Vec::new();
    }
    let (path, version) = match s.split_once('@') {
        Some((p, v)) => (p, Some(v)),
        None => (s, None),
    };
    if version == Some("none") {
        return Vec::new(); // `go get mod@none` removes a module
    }
    let path = path.strip_suffix("...").unwrap_or(path);
    let path = path.trim_end_matches('/');
    one(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(f: Family, s: &str) -> Vec<String> {
        requirement_names(f, s)
    }

    #[test]
    fn pep503_rules() {
        assert_eq!(pep503("Semantic_Version"), "semantic-version");
        assert_eq!(pep503("a.-_b"), "a-b");
        assert_eq!(pep503("zope.interface"), "zope-interface");
        assert_eq!(normalize(Family::Cargo, "Serde_JSON"), "serde-json");
        assert_eq!(normalize(Family::Npm, "@Scope/Pkg"), "@scope/pkg");
        assert_eq!(
            normalize(Family::Conda, "Semantic_Version"),
            "semantic-version"
        );
    }

    #[test]
    fn python_specs() {
        let p = Family::Python;
        assert_eq!(names(p, "pkg==1.0"), ["pkg"]);
        assert_eq!(names(p, "pkg>=1,<2"), ["pkg"]);
        assert_eq!(names(p, "pkg[extra,other]"), ["pkg"]);
        assert_eq!(names(p, "pkg @ https://host/x/pkg-1.0.tar.gz"), ["pkg"]);
        assert_eq!(names(p, "pkg[x]@https://host/y.whl"), ["pkg"]);
        assert_eq!(names(p, "Pkg~=1.0; python_version<\"3.9\""), ["Pkg"]);
        assert_eq!(names(p, "  Semver==2 \n"), ["Semver"]);
        assert_eq!(names(p, "pkg (>=1.0)"), ["pkg"]);
        assert_eq!(
            names(p, "git+https://example.org/o/pkg.git#egg=pkg"),
            ["pkg"]
        );
        assert_eq!(
            names(
                p,
                "git+https://github.com/python-semver/python-semver.git@3.0.0#egg=semver"
            ),
            ["semver", "python-semver"]
        );
        assert_eq!(names(p, "./dist/x-1.0-py3-none-any.whl"), ["x"]);
        assert_eq!(
            names(p, "/tmp/semantic_version-2.10.0.tar.gz"),
            ["semantic_version"]
        );
        assert_eq!(names(p, "https://host/pkg-1.0.tar.gz"), ["pkg"]);
        assert_eq!(names(p, "semantic-version-2.8.0.zip"), ["semantic-version"]);
        assert_eq!(names(p, "./vendor/semver/"), ["semver"]);
        assert!(names(p, ".").is_empty());
        assert!(names(p, "").is_empty());
        assert_eq!(names(p, "file:///tmp/semver-1.0.whl"), ["semver"]);
    }

    #[test]
    fn npm_specs() {
        let n = Family::Npm;
        assert_eq!(names(n, "pkg@^1.2"), ["pkg"]);
        assert_eq!(names(n, "@scope/pkg@latest"), ["@scope/pkg"]);
        assert_eq!(names(n, "@Scope/Pkg@1"), ["@Scope/Pkg"]);
        assert_eq!(names(n, "@scope/pkg"), ["@scope/pkg"]);
        assert_eq!(names(n, "myalias@npm:semver@7"), ["myalias", "semver"]);
        assert_eq!(names(n, "x@npm:@s/y@1"), ["x", "@s/y"]);
        assert_eq!(names(n, "npm:semver@7"), ["semver"]);
        assert_eq!(names(n, "npm/node-semver"), ["node-semver"]);
        assert_eq!(names(n, "github:npm/node-semver#v7"), ["node-semver"]);
        assert_eq!(
            names(n, "git+ssh://git@github.com:npm/node-semver.git#semver:^7"),
            ["node-semver"]
        );
        assert_eq!(
            names(n, "https://registry.npmjs.org/semver/-/semver-7.5.4.tgz"),
            ["semver"]
        );
        assert_eq!(names(n, "./semver-7.5.4.tgz"), ["semver"]);
        assert_eq!(names(n, "file:../semver"), ["semver"]);
        assert_eq!(names(n, "semver@file:../lib/x"), ["semver", "x"]);
        assert_eq!(
            names(n, "semver@github:npm/node-semver"),
            ["semver", "node-semver"]
        );
    }

    #[test]
    fn other_specs() {
        assert_eq!(
            names(Family::Go, "example.com/mod@v1.2.3"),
            ["example.com/mod"]
        );
        assert_eq!(
            names(Family::Go, "example.com/mod/..."),
            ["example.com/mod"]
        );
        assert!(names(Family::Go, "example.com/mod@none").is_empty());
        assert!(names(Family::Go, "./...").is_empty());
        assert!(names(Family::Go, "main.go").is_empty());
        assert_eq!(names(Family::Cargo, "serde@1.0"), ["serde"]);
        assert_eq!(names(Family::Cargo, "serde_json"), ["serde_json"]);
        assert_eq!(
            names(Family::Conda, "conda-forge::semver=2.10=py_0"),
            ["semver"]
        );
        assert_eq!(names(Family::Conda, "semver>=2"), ["semver"]);
        assert_eq!(names(Family::Conda, "semver[version='>=2']"), ["semver"]);
        assert_eq!(
            names(
                Family::Conda,
                "/tmp/semantic_version-2.10.0-pyhd8ed1ab_0.conda"
            ),
            ["semantic_version"]
        );
        assert_eq!(names(Family::Deb, "libssl-dev=3.0.2"), ["libssl-dev"]);
        assert_eq!(names(Family::Deb, "libssl-dev:amd64"), ["libssl-dev"]);
        assert_eq!(names(Family::Deb, "libssl-dev/jammy"), ["libssl-dev"]);
        assert_eq!(
            names(Family::Deb, "./libssl-dev_3.0.2-0ubuntu1_amd64.deb"),
            ["libssl-dev"]
        );
    }

    #[test]
    fn ban_matching() {
        let bans: Vec<String> = [
            "semver",
            "semantic-version",
            "@evil/*",
            "@bad",
            "example.com/m",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let hit = |f, s| banned_name(f, s, &bans);
        assert_eq!(hit(Family::Python, "Semver==2").as_deref(), Some("Semver"));
        assert_eq!(
            hit(Family::Python, "semantic_version").as_deref(),
            Some("semantic_version")
        );
        assert_eq!(
            hit(Family::Python, "Semantic.Version>=2").as_deref(),
            Some("Semantic.Version")
        );
        assert_eq!(hit(Family::Python, "semver2"), None);
        assert_eq!(
            hit(Family::Npm, "@Evil/Pkg@1").as_deref(),
            Some("@Evil/Pkg")
        );
        assert_eq!(hit(Family::Npm, "@bad/x").as_deref(), Some("@bad/x"));
        assert_eq!(hit(Family::Npm, "@good/semver"), None);
        assert_eq!(hit(Family::Npm, "semantic_version"), None); // npm does not fold `_`
        assert_eq!(
            hit(Family::Go, "example.com/m/v2@v2.0.0").as_deref(),
            Some("example.com/m/v2")
        );
        assert_eq!(hit(Family::Go, "example.com/mx"), None);
        assert_eq!(
            hit(Family::Conda, "semantic_version=2").as_deref(),
            Some("semantic_version")
        );
    }

    #[test]
    fn module_and_specifier_matching() {
        let bans: Vec<String> = vec!["packaging.version".into(), "semver".into()];
        assert!(module_banned("semver", &bans));
        assert!(module_banned("semver.x", &bans));
        assert!(!module_banned("semver2", &bans));
        assert!(module_banned("packaging.version", &bans));
        assert!(!module_banned("packaging", &bans));
        assert!(!module_banned("packaging.specifiers", &bans));
        let nb: Vec<String> = vec!["semver".into(), "@s/*".into(), "fs".into()];
        assert!(npm_specifier_banned("semver/functions/parse", &nb));
        assert!(npm_specifier_banned("@s/anything/deep", &nb));
        assert!(npm_specifier_banned("node:fs", &nb));
        assert!(!npm_specifier_banned("semver-utils", &nb));
        assert!(!npm_specifier_banned("./semver", &nb));
    }

    #[test]
    fn hashed_bans_cover_normalised_names() {
        let bans: Vec<String> = ["Semantic_Version", "@evil/*", "semver"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let py = HashedBans::new(Family::Python, &bans);
        assert!(py.covers("semantic.version") && py.covers("SEMVER"));
        assert!(!py.covers("semver2") && !py.covers(""));
        let npm = HashedBans::new(Family::Npm, &bans);
        assert!(npm.covers("@Evil/pkg") && npm.covers("semver"));
        assert!(!npm.covers("semantic-version"), "npm does not fold `_`");
        assert!(!npm.covers("@good/semver"));
        assert!(HashedBans::new(Family::Npm, &[]).is_empty());
        assert!(!HashedBans::new(Family::Npm, &[]).covers("x"));
    }

    #[test]
    fn hashes_are_sha256_of_keys() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let h = hashed_bans(Family::Python, &["Semantic_Version".to_string()]);
        assert_eq!(h, vec![sha256_hex("semantic-version")]);
    }
}
