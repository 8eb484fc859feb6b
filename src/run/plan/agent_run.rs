//! What a configuration gives its agent beyond the spec: variables
//! (`env`, `env_pass`), a version (`agent_version`), a price table
//! (`pricing`), extra CA certificates (`ca_bundle`). Each is checked the
//! way `cbrun trial` checks its flag; the files are pinned by hash, so a
//! resumed run uses what the plan was made with or refuses.
//!
//! Errors are `(field, reason)`: the caller puts the plan and the
//! configuration in front.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::image::ca::{CaBundle, CaError, CaSource};
use crate::usage::PriceTable;

/// A field (`env_pass[1]`, `env.KEY`, `pricing`) and what is wrong with it.
pub type FieldError = (String, String);

/// A file a configuration depends on, pinned by its content's hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinnedFile {
    /// Absolute.
    pub path: PathBuf,
    pub sha256: String,
}

/// One `ca_bundle` source as the plan fixed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaEntry {
    /// `system` (the bundle of the host the trial runs on, which is the
    /// point: nodes may differ) or an absolute file.
    pub source: String,
    /// For a file: the hash of its certificates (what is added to the
    /// trust, nothing else of the file).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sha256: Option<String>,
}

fn hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

// The same checks as a spec's and `cbrun trial`'s.
pub(crate) use crate::agent::spec::{check_env_name, check_version};

/// `env = { K = "V" }`: names and values.
pub fn check_env(env: &BTreeMap<String, String>) -> Result<(), FieldError> {
    for (k, v) in env {
        check_env_name(k).map_err(|e| (format!("env.{k}"), e))?;
        if v.contains('\0') {
            return Err((format!("env.{k}"), "the value holds a NUL byte".into()));
        }
    }
    Ok(())
}

/// `env_pass = ["NAME", ...]`: names only; the values are read from
/// cbrun's environment when each trial starts.
pub fn check_env_pass(names: &[String]) -> Result<(), FieldError> {
    for (i, n) in names.iter().enumerate() {
        check_env_name(n).map_err(|e| (format!("env_pass[{i}]"), e))?;
    }
    Ok(())
}

fn absolute(p: &Path, base: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// A `--ca-bundle` failure without the flag's name in it.
fn ca_reason(e: CaError) -> String {
    match e {
        CaError::Bad { path, why } => format!("{}: {why}", path.display()),
        CaError::NoSystemBundle => {
            "system: no system bundle on this host ($SSL_CERT_FILE unset, none of the usual places)"
                .into()
        }
    }
}

/// `ca_bundle = ["system", "corp.pem"]` (files relative to `base`):
/// each source loaded and checked, files pinned.
pub fn pin_ca(sources: &[String], base: &Path) -> Result<Vec<CaEntry>, FieldError> {
    let mut out = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        let field = || format!("ca_bundle[{i}]");
        let src: CaSource = s.parse().map_err(|e: String| (field(), e))?;
        let entry = match src {
            CaSource::System => {
                CaBundle::load(&CaSource::System).map_err(|e| (field(), ca_reason(e)))?;
                CaEntry {
                    source: "system".into(),
                    sha256: None,
                }
            }
            CaSource::File(p) => {
                let abs = absolute(&p, base);
                let abs = std::fs::canonicalize(&abs)
                    .map_err(|e| (field(), format!("{}: {e}", abs.display())))?;
                let b = CaBundle::load(&CaSource::File(abs.clone()))
                    .map_err(|e| (field(), ca_reason(e)))?;
                CaEntry {
                    source: abs.display().to_string(),
                    sha256: Some(hex(b.pem.as_bytes())),
                }
            }
        };
        out.push(entry);
    }
    Ok(out)
}

/// The bundle the pinned sources make now; a file whose certificates
/// changed since the plan was made is refused.
pub fn load_ca(entries: &[CaEntry]) -> Result<Option<CaBundle>, FieldError> {
    let mut out: Option<CaBundle> = None;
    for (i, e) in entries.iter().enumerate() {
        let field = || format!("ca_bundle[{i}]");
        let src = match e.source.as_str() {
            "system" => CaSource::System,
            p => CaSource::File(PathBuf::from(p)),
        };
        let b = CaBundle::load(&src).map_err(|e| (field(), ca_reason(e)))?;
        if let Some(want) = &e.sha256 {
            if &hex(b.pem.as_bytes()) != want {
                return Err((
                    field(),
                    format!(
                        "{}: its certificates changed since the plan was made",
                        e.source
                    ),
                ));
            }
        }
        out = Some(match out {
            None => b,
            Some(mut a) => {
                a.sources.extend(b.sources);
                a.pem.push_str(&b.pem);
                a.certificates += b.certificates;
                a
            }
        });
    }
    Ok(out)
}

/// `pricing = "prices.toml"` (relative to `base`): read, checked, pinned.
pub fn pin_pricing(path: &Path, base: &Path) -> Result<PinnedFile, String> {
    let abs = absolute(path, base);
    let abs = std::fs::canonicalize(&abs).map_err(|e| format!("{}: {e}", abs.display()))?;
    PriceTable::load(&abs).map_err(|e| crate::error::chain(&e))?;
    let bytes = std::fs::read(&abs).map_err(|e| format!("{}: {e}", abs.display()))?;
    Ok(PinnedFile {
        path: abs,
        sha256: hex(&bytes),
    })
}

/// The pinned price table, refused when it changed since.
pub fn load_pricing(p: &PinnedFile) -> Result<PriceTable, String> {
    let bytes = std::fs::read(&p.path).map_err(|e| format!("{}: {e}", p.path.display()))?;
    if hex(&bytes) != p.sha256 {
        return Err(format!(
            "{}: changed since the plan was made",
            p.path.display()
        ));
    }
    PriceTable::load(&p.path).map_err(|e| crate::error::chain(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM_A: &str = "-----BEGIN CERTIFICATE-----\nQUFB\n-----END CERTIFICATE-----\n";
    const PEM_B: &str = "-----BEGIN CERTIFICATE-----\nQkJC\n-----END CERTIFICATE-----\n";

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cbrun-plan-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn variable_names_and_values_are_checked_as_trial_checks_them() {
        let mut env = BTreeMap::new();
        env.insert("OK_1".to_string(), "v".to_string());
        assert!(check_env(&env).is_ok());
        env.insert("1BAD".into(), "v".into());
        let (f, e) = check_env(&env).unwrap_err();
        assert_eq!(f, "env.1BAD");
        assert!(e.contains("not a variable name"), "{e}");
        let mut env = BTreeMap::new();
        env.insert("NUL".to_string(), "a\0b".to_string());
        assert_eq!(check_env(&env).unwrap_err().1, "the value holds a NUL byte");
        let names = vec!["A".to_string(), "HOME".to_string()];
        let (f, e) = check_env_pass(&names).unwrap_err();
        assert_eq!(f, "env_pass[1]");
        assert!(e.starts_with("HOME:"), "{e}");
        assert!(check_env_pass(&["B-C".to_string()]).is_err());
        assert!(check_version("1.2.3+b").is_ok());
        for bad in ["", "1 2", "a/b", &"9".repeat(65)] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ca_files_are_pinned_relative_to_the_plan_and_refused_once_changed() {
        let d = tmp("ca");
        std::fs::write(d.join("a.pem"), format!("junk\n{PEM_A}")).unwrap();
        std::fs::write(d.join("none.pem"), "no certificate here\n").unwrap();
        let pinned = pin_ca(&["a.pem".to_string()], &d).unwrap();
        assert_eq!(
            pinned[0].source,
            d.canonicalize()
                .unwrap()
                .join("a.pem")
                .display()
                .to_string()
        );
        assert_eq!(
            pinned[0].sha256.as_deref(),
            Some(hex(PEM_A.as_bytes()).as_str())
        );
        let b = load_ca(&pinned).unwrap().unwrap();
        assert_eq!(b.certificates, 1);
        // Only the certificates count: other text may change.
        std::fs::write(d.join("a.pem"), format!("other junk\n{PEM_A}")).unwrap();
        assert!(load_ca(&pinned).is_ok());
        std::fs::write(d.join("a.pem"), PEM_B).unwrap();
        let (f, e) = load_ca(&pinned).unwrap_err();
        assert_eq!(f, "ca_bundle[0]");
        assert!(
            e.ends_with("its certificates changed since the plan was made"),
            "{e}"
        );
        let (f, e) = pin_ca(&["a.pem".into(), "none.pem".into()], &d).unwrap_err();
        assert_eq!(f, "ca_bundle[1]");
        assert!(e.contains("no PEM certificate"), "{e}");
        assert!(!e.contains("--ca-bundle"), "{e}");
        let (f, e) = pin_ca(&["missing.pem".into()], &d).unwrap_err();
        assert_eq!(f, "ca_bundle[0]");
        assert!(e.contains("missing.pem"), "{e}");
        assert_eq!(pin_ca(&["".into()], &d).unwrap_err().0, "ca_bundle[0]");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_price_table_is_pinned_and_refused_once_changed() {
        let d = tmp("pricing");
        let table = "date = \"2026-01-01\"\ncurrency = \"USD\"\n";
        std::fs::write(d.join("p.toml"), table).unwrap();
        let p = pin_pricing(Path::new("p.toml"), &d).unwrap();
        assert_eq!(p.sha256, hex(table.as_bytes()));
        assert!(load_pricing(&p).is_ok());
        std::fs::write(
            d.join("p.toml"),
            "date = \"2026-01-02\"\ncurrency = \"USD\"\n",
        )
        .unwrap();
        assert!(load_pricing(&p)
            .unwrap_err()
            .ends_with("changed since the plan was made"));
        std::fs::write(d.join("bad.toml"), "date = \"soon\"\ncurrency = \"USD\"\n").unwrap();
        let e = pin_pricing(Path::new("bad.toml"), &d).unwrap_err();
        assert!(e.contains("bad.toml"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
