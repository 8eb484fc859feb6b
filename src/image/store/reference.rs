//! Image names: parsing and checking `name[:tag][@sha256:<hex>]` (the OCI
//! distribution grammar), and the reference records kept under `images/`.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::image::digest::Digest;

/// A parsed image reference: `name[:tag][@sha256:<hex>]`. Parsing a bare
/// name gives the tag `latest`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ImageRef {
    pub name: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

impl ImageRef {
    /// Parse `name[:tag][@digest]` (tag `latest` when neither is given).
    pub fn parse(input: &str) -> Result<ImageRef, StoreError> {
        let bad = |why: String| StoreError::BadReference {
            input: input.to_owned(),
            why,
        };
        let (rest, digest) = match input.split_once('@') {
            Some((rest, d)) => {
                let d = Digest::parse(d).map_err(|_| {
                    bad(format!(
                        "digest {d:?}: expected sha256:<64 lowercase hex digits>"
                    ))
                })?;
                (rest, Some(d))
            }
            None => (input, None),
        };
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        check_name(name).map_err(bad)?;
        if let Some(t) = tag {
            check_tag(t).map_err(bad)?;
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_owned()),
            (None, Some(_)) => None,
            (None, None) => Some("latest".to_owned()),
        };
        Ok(ImageRef {
            name: name.to_owned(),
            tag,
            digest,
        })
    }

    /// `name:tag` from separate parts, both validated.
    pub fn with_tag(name: &str, tag: &str) -> Result<ImageRef, StoreError> {
        let bad = |why: String| StoreError::BadReference {
            input: format!("{name}:{tag}"),
            why,
        };
        check_name(name).map_err(bad)?;
        check_tag(tag).map_err(bad)?;
        Ok(ImageRef {
            name: name.to_owned(),
            tag: Some(tag.to_owned()),
            digest: None,
        })
    }

    /// The file of this reference under `images/<escaped name>/`: `<tag>.json`,
    /// or `@<hex>.json` for a reference by digest only.
    pub(super) fn file_name(&self) -> String {
        match (&self.tag, &self.digest) {
            (Some(t), _) => format!("{t}.json"),
            (None, Some(d)) => format!("@{}.json", d.hex()),
            (None, None) => unreachable!("a parsed reference has a tag or a digest"),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// Validate a repository name: optional `registry[:port]/` prefix, then
/// `/`-separated path components of lowercase letters and digits joined by
/// `.`, `_`, `__` or runs of `-` (the OCI distribution grammar).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".to_owned());
    }
    if name.len() > 255 {
        return Err(format!(
            "the name is {} characters long (at most 255)",
            name.len()
        ));
    }
    let parts: Vec<&str> = name.split('/').collect();
    let first = parts[0];
    let has_registry =
        parts.len() > 1 && (first.contains('.') || first.contains(':') || first == "localhost");
    let path = if has_registry {
        check_registry(first)?;
        &parts[1..]
    } else {
        &parts[..]
    };
    for c in path {
        check_path_component(c)?;
    }
    Ok(())
}

fn check_registry(reg: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "registry {reg:?}: expected host[:port] (letters, digits, '-' and '.', port 1-65535)"
        )
    };
    let (host, port) = match reg.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (reg, None),
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !host.split('.').all(label_ok) {
        return Err(bad());
    }
    if let Some(p) = port {
        if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        if !(1..=65535).contains(&p.parse::<u32>().unwrap_or(0)) {
            return Err(bad());
        }
    }
    Ok(())
}

/// One `/`-separated component of a repository path (see [`check_name`]).
pub(crate) fn check_path_component(c: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "path component {c:?}: must be lowercase letters and digits, \
             separated by '.', '_', '__' or '-'"
        )
    };
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return Err(bad());
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // a separator: '.', '_', '__' or '-'+, followed by an alphanumeric
        let start = i;
        match b[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < b.len() && b[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < b.len() && b[i] == b'-' {
                    i += 1;
                }
            }
            _ => return Err(bad()),
        }
        if i == start || i >= b.len() || !alnum(b[i]) {
            return Err(bad());
        }
    }
    Ok(())
}

/// Validate a tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
pub fn check_tag(tag: &str) -> Result<(), String> {
    let b = tag.as_bytes();
    let ok_first = |x: u8| x.is_ascii_alphanumeric() || x == b'_';
    let ok_rest = |x: u8| ok_first(x) || x == b'.' || x == b'-';
    if b.is_empty() || b.len() > 128 || !ok_first(b[0]) || !b[1..].iter().all(|&x| ok_rest(x)) {
        return Err(format!(
            "tag {tag:?}: must be 1-128 of letters, digits, '_', '.', '-', not starting with '.' or '-'"
        ));
    }
    Ok(())
}

/// Directory name for a repository name: `/` and `:` percent-escaped
/// (neither `%` nor any other special character occurs in valid names).
pub(super) fn escape_name(name: &str) -> String {
    name.replace('%', "%25")
        .replace('/', "%2F")
        .replace(':', "%3A")
}

/// The contents of `images/<escaped name>/<tag>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefRecord {
    pub name: String,
    /// Absent for a reference by digest only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Digest of the image manifest.
    pub manifest: Digest,
    /// When the reference was written (RFC 3339, UTC).
    pub created: String,
    /// Where the image came from, e.g. `import oci-archive /path/x.tar`.
    pub source: String,
}

impl RefRecord {
    pub fn reference(&self) -> ImageRef {
        ImageRef {
            name: self.name.clone(),
            tag: self.tag.clone(),
            digest: if self.tag.is_none() {
                Some(self.manifest.clone())
            } else {
                None
            },
        }
    }
}
