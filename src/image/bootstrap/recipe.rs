//! Recipes (`rootfs/<name>/recipe.toml`): read, every field checked, one
//! line per problem naming the file and the field.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{
    BootstrapError, BusyboxSpec, ImageConfig, MmdebstrapSpec, Recipe, RecipeKind, DEFAULT_BUSYBOX,
    DEFAULT_MIRROR, DEFAULT_PATH_ENV, DEFAULT_VARIANT,
};
use crate::image::store::{check_name, check_tag};

/// mmdebstrap's variants (`--variant`).
const VARIANTS: &[&str] = &[
    "extract",
    "custom",
    "essential",
    "apt",
    "required",
    "minbase",
    "buildd",
    "important",
    "debootstrap",
    "-",
    "standard",
];

/// Debian architecture name -> OCI architecture name.
const ARCHITECTURES: &[(&str, &str)] = &[
    ("amd64", "amd64"),
    ("arm64", "arm64"),
    ("armhf", "arm"),
    ("i386", "386"),
    ("ppc64el", "ppc64le"),
    ("s390x", "s390x"),
    ("riscv64", "riscv64"),
];

/// The recipes shipped in `rootfs/`, embedded so that an installed binary
/// (cargo install, the static build, the .deb) has them too.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "busybox",
        include_str!("../../../rootfs/busybox/recipe.toml"),
    ),
    (
        "debian-bookworm-dev",
        include_str!("../../../rootfs/debian-bookworm-dev/recipe.toml"),
    ),
];

/// The shipped recipe `arg` names (`busybox`, `rootfs/busybox`), when
/// nothing exists at that path.
pub fn shipped(arg: &Path) -> Option<&'static str> {
    if arg.exists() {
        return None;
    }
    let s = arg.to_str()?.trim_end_matches('/');
    let name = s.strip_prefix("rootfs/").unwrap_or(s);
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Reads `path` (a `recipe.toml`, or a directory holding one), else the
/// shipped recipe of that name (see [`shipped`]).
pub fn load_recipe(path: &Path) -> Result<Recipe, BootstrapError> {
    if let Some(text) = shipped(path) {
        return parse_recipe(text, path);
    }
    let file = if path.is_dir() {
        path.join("recipe.toml")
    } else {
        path.to_path_buf()
    };
    let text = fs::read_to_string(&file).map_err(|e| BootstrapError::Recipe {
        path: file.clone(),
        msg: format!("cannot read: {e}"),
    })?;
    parse_recipe(&text, &file)
}

/// Parses recipe text; `path` is only used in messages.
pub fn parse_recipe(text: &str, path: &Path) -> Result<Recipe, BootstrapError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let msg = e.message().replace('\n', " ");
        BootstrapError::Recipe {
            path: path.to_path_buf(),
            msg: match line {
                Some(l) => format!("line {l}: {}", msg.trim()),
                None => msg.trim().to_owned(),
            },
        }
    })?;
    let mut f = Fields {
        table,
        path,
        taken: BTreeSet::new(),
    };

    let name = f.string("name")?.ok_or_else(|| f.err("name", "missing"))?;
    check_name(&name).map_err(|m| f.err("name", &m))?;
    let tag = f.string("tag")?.ok_or_else(|| f.err("tag", "missing"))?;
    check_tag(&tag).map_err(|m| f.err("tag", &m))?;
    let kind_s = f.string("kind")?.ok_or_else(|| f.err("kind", "missing"))?;

    const MMDEBSTRAP_ONLY: &[&str] = &[
        "suite",
        "mirror",
        "variant",
        "packages",
        "components",
        "customize",
        "architecture",
        "trusted_mirror",
    ];
    const BUSYBOX_ONLY: &[&str] = &["busybox"];

    let (kind, architecture) = match kind_s.as_str() {
        "busybox" => {
            f.not_for(MMDEBSTRAP_ONLY, "busybox")?;
            let binary = match f.string("busybox")? {
                Some(p) => {
                    if !p.starts_with('/') {
                        return Err(f.err("busybox", "expected an absolute path"));
                    }
                    PathBuf::from(p)
                }
                None => PathBuf::from(DEFAULT_BUSYBOX),
            };
            (
                RecipeKind::Busybox(BusyboxSpec { binary }),
                host_oci_arch().to_owned(),
            )
        }
        "mmdebstrap" => {
            f.not_for(BUSYBOX_ONLY, "mmdebstrap")?;
            let suite = f
                .string("suite")?
                .ok_or_else(|| f.err("suite", "missing"))?;
            check_word(&suite, "a suite or codename such as bookworm")
                .map_err(|m| f.err("suite", &m))?;
            let mirror = f
                .string("mirror")?
                .unwrap_or_else(|| DEFAULT_MIRROR.to_owned());
            check_mirror(&mirror).map_err(|m| f.err("mirror", &m))?;
            let trusted_mirror = f.boolean("trusted_mirror")?.unwrap_or(false);
            if trusted_mirror && !is_local_mirror(&mirror) {
                return Err(f.err(
                    "trusted_mirror",
                    &format!("{mirror:?}: only a file:// mirror or one on 127.0.0.1, [::1] or localhost may skip signature checks"),
                ));
            }
            let variant = f
                .string("variant")?
                .unwrap_or_else(|| DEFAULT_VARIANT.to_owned());
            if !VARIANTS.contains(&variant.as_str()) {
                return Err(f.err(
                    "variant",
                    &format!("{variant:?}: expected one of {}", VARIANTS.join(", ")),
                ));
            }
            let packages = f.strings("packages")?.unwrap_or_default();
            for (i, p) in packages.iter().enumerate() {
                check_package(p).map_err(|m| f.err("packages", &format!("item {i}: {m}")))?;
            }
            let components = f
                .strings("components")?
                .unwrap_or_else(|| vec!["main".to_owned()]);
            if components.is_empty() {
                return Err(f.err("components", "empty (leave it out for [\"main\"])"));
            }
            for (i, c) in components.iter().enumerate() {
                check_word(c, "a component such as main")
                    .map_err(|m| f.err("components", &format!("item {i}: {m}")))?;
            }
            let customize = f.strings("customize")?.unwrap_or_default();
            for (i, c) in customize.iter().enumerate() {
                if c.trim().is_empty() {
                    return Err(f.err("customize", &format!("item {i}: empty command")));
                }
            }
            let (debian_architecture, architecture) = match f.string("architecture")? {
                None => (None, host_oci_arch().to_owned()),
                Some(a) => match ARCHITECTURES.iter().find(|(deb, _)| *deb == a) {
                    Some((deb, oci)) => (Some((*deb).to_owned()), (*oci).to_owned()),
                    None => {
                        let known: Vec<&str> = ARCHITECTURES.iter().map(|(d, _)| *d).collect();
                        return Err(f.err(
                            "architecture",
                            &format!(
                                "{a:?}: expected a Debian architecture ({})",
                                known.join(", ")
                            ),
                        ));
                    }
                },
            };
            (
                RecipeKind::Mmdebstrap(MmdebstrapSpec {
                    suite,
                    mirror,
                    trusted_mirror,
                    variant,
                    packages,
                    components,
                    customize,
                    debian_architecture,
                }),
                architecture,
            )
        }
        other => {
            return Err(f.err(
                "kind",
                &format!("{other:?}: expected \"busybox\" or \"mmdebstrap\""),
            ))
        }
    };

    let env = match f.strings("env")? {
        Some(env) => {
            for (i, e) in env.iter().enumerate() {
                check_env(e).map_err(|m| f.err("env", &format!("item {i}: {m}")))?;
            }
            env
        }
        None => vec![DEFAULT_PATH_ENV.to_owned()],
    };
    let workdir = f.string("workdir")?;
    if let Some(w) = &workdir {
        if !w.starts_with('/') {
            return Err(f.err("workdir", "expected an absolute path"));
        }
    }
    let user = f.string("user")?;
    if let Some(u) = &user {
        if u.is_empty() || u.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(f.err(
                "user",
                "expected a user name or id, optionally with :group (no spaces)",
            ));
        }
    }
    let cmd = f.strings("cmd")?.unwrap_or_default();
    let entrypoint = f.strings("entrypoint")?.unwrap_or_default();
    let source_date_epoch = f.epoch("source_date_epoch")?;

    f.no_unknown()?;
    Ok(Recipe {
        path: path.to_path_buf(),
        name,
        tag,
        kind,
        architecture,
        source_date_epoch,
        config: ImageConfig {
            env,
            workdir,
            user,
            cmd,
            entrypoint,
        },
    })
}

/// Typed access to the recipe's top-level table, one field at a time.
struct Fields<'a> {
    table: toml::Table,
    path: &'a Path,
    taken: BTreeSet<String>,
}

impl Fields<'_> {
    fn err(&self, field: &str, msg: &str) -> BootstrapError {
        BootstrapError::Recipe {
            path: self.path.to_path_buf(),
            msg: format!("field {field}: {msg}"),
        }
    }

    fn take(&mut self, key: &str) -> Option<toml::Value> {
        self.taken.insert(key.to_owned());
        self.table.get(key).cloned()
    }

    fn string(&mut self, key: &str) -> Result<Option<String>, BootstrapError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => {
                if s.contains('\0') {
                    Err(self.err(key, "contains a NUL byte"))
                } else {
                    Ok(Some(s))
                }
            }
            Some(v) => Err(self.err(key, &format!("expected a string, got {}", v.type_str()))),
        }
    }

    fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, BootstrapError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, v) in items.into_iter().enumerate() {
                    match v {
                        toml::Value::String(s) if !s.contains('\0') => out.push(s),
                        toml::Value::String(_) => {
                            return Err(self.err(key, &format!("item {i}: contains a NUL byte")))
                        }
                        other => {
                            return Err(self.err(
                                key,
                                &format!("item {i}: expected a string, got {}", other.type_str()),
                            ))
                        }
                    }
                }
                Ok(Some(out))
            }
            Some(v) => Err(self.err(
                key,
                &format!("expected an array of strings, got {}", v.type_str()),
            )),
        }
    }

    fn boolean(&mut self, key: &str) -> Result<Option<bool>, BootstrapError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(b)),
            Some(v) => Err(self.err(
                key,
                &format!("expected true or false, got {}", v.type_str()),
            )),
        }
    }

    fn epoch(&mut self, key: &str) -> Result<Option<u64>, BootstrapError> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) if n >= 0 => Ok(Some(n as u64)),
            Some(toml::Value::Integer(_)) => Err(self.err(key, "expected seconds >= 0")),
            Some(v) => Err(self.err(key, &format!("expected an integer, got {}", v.type_str()))),
        }
    }

    /// Fields that belong to the other kind are an error when present.
    fn not_for(&mut self, keys: &[&str], kind: &str) -> Result<(), BootstrapError> {
        for k in keys {
            if self.table.contains_key(*k) {
                return Err(self.err(k, &format!("not used by kind \"{kind}\"")));
            }
        }
        Ok(())
    }

    fn no_unknown(&self) -> Result<(), BootstrapError> {
        match self.table.keys().find(|k| !self.taken.contains(*k)) {
            Some(k) => Err(self.err(k, "unknown field")),
            None => Ok(()),
        }
    }
}

fn check_word(s: &str, what: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/+".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("{s:?}: expected {what}"))
    }
}

fn check_mirror(s: &str) -> Result<(), String> {
    let scheme_ok = ["http://", "https://", "file://"]
        .iter()
        .any(|p| s.starts_with(p) && s.len() > p.len());
    if scheme_ok && !s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Ok(())
    } else {
        Err(format!(
            "{s:?}: expected an http://, https:// or file:// URL without spaces"
        ))
    }
}

/// A mirror on this machine: a `file://` path or an http(s) URL whose host
/// is a loopback address or `localhost`. Only such a mirror may be
/// `trusted_mirror` (its unsigned index is the tester's own).
pub fn is_local_mirror(s: &str) -> bool {
    if s.starts_with("file:///") {
        return true;
    }
    let Some(rest) = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return false;
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

/// A package as apt takes it: `name`, `name=version`, `name/release` or
/// `name:arch`. No commas or spaces: mmdebstrap splits `--include` on them.
fn check_package(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"+-.:~=/_".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!("{s:?}: expected a Debian package name"))
    }
}

fn check_env(s: &str) -> Result<(), String> {
    let Some((k, _)) = s.split_once('=') else {
        return Err(format!("{s:?}: expected KEY=VALUE"));
    };
    let kb = k.as_bytes();
    let ok = !kb.is_empty()
        && (kb[0].is_ascii_alphabetic() || kb[0] == b'_')
        && kb.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?}: expected KEY=VALUE with KEY of letters, digits and '_'"
        ))
    }
}

/// The OCI architecture name of the machine cbrun was built for.
pub fn host_oci_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
}
