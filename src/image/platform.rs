//! Image platforms (`os/arch[/variant]`, Go's GOOS/GOARCH names) and the
//! choice of one manifest out of a multi-platform index.

use std::fmt;

/// An image platform, in Go's names: `linux/amd64`, `linux/arm/v7`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("platform {input:?}: {why}")]
pub struct PlatformError {
    pub input: String,
    pub why: String,
}

/// The GOARCH name of a Rust `target_arch` (`std::env::consts::ARCH`), with
/// the variant a binary built for this target implies. `None` for targets
/// no image is published for.
pub fn goarch(rust_arch: &str) -> Option<(&'static str, Option<&'static str>)> {
    Some(match rust_arch {
        "x86_64" => ("amd64", None),
        "x86" => ("386", None),
        "aarch64" => ("arm64", Some("v8")),
        "arm" => (
            "arm",
            Some(if cfg!(target_feature = "v7") {
                "v7"
            } else {
                "v6"
            }),
        ),
        "powerpc64" if cfg!(target_endian = "little") => ("ppc64le", None),
        "powerpc64" => ("ppc64", None),
        "powerpc" => ("ppc", None),
        "riscv64" => ("riscv64", None),
        "s390x" => ("s390x", None),
        "loongarch64" => ("loong64", None),
        "mips" if cfg!(target_endian = "little") => ("mipsle", None),
        "mips" => ("mips", None),
        "mips64" if cfg!(target_endian = "little") => ("mips64le", None),
        "mips64" => ("mips64", None),
        "sparc64" => ("sparc64", None),
        "wasm32" => ("wasm", None),
        _ => return None,
    })
}

/// Common non-Go spellings of architectures, mapped to GOARCH (and variant).
fn normalize_arch(arch: &str, variant: Option<&str>) -> (String, Option<String>) {
    let (a, v): (&str, Option<&str>) = match arch {
        "x86_64" | "x86-64" | "x64" => ("amd64", variant),
        "i386" | "i486" | "i586" | "i686" | "x86" => ("386", variant),
        "aarch64" => ("arm64", variant),
        "armhf" => ("arm", variant.or(Some("v7"))),
        "armel" => ("arm", variant.or(Some("v6"))),
        "armv5" | "armv5l" => ("arm", Some("v5")),
        "armv6" | "armv6l" => ("arm", Some("v6")),
        "armv7" | "armv7l" => ("arm", Some("v7")),
        other => (other, variant),
    };
    // `arm64/v8` is what plain `arm64` means.
    let v = match (a, v) {
        ("arm64", Some("v8")) => None,
        (_, v) => v,
    };
    (a.to_owned(), v.map(str::to_owned))
}

impl Platform {
    pub fn new(os: &str, architecture: &str, variant: Option<&str>) -> Platform {
        let (architecture, variant) =
            normalize_arch(architecture, variant.filter(|v| !v.is_empty()));
        Platform {
            os: os.to_owned(),
            architecture,
            variant,
        }
    }

    /// The platform of binaries built for this host: `linux/<GOARCH>[/<variant>]`.
    pub fn host() -> Platform {
        match goarch(std::env::consts::ARCH) {
            Some((arch, variant)) => Platform::new("linux", arch, variant),
            None => Platform::new("linux", std::env::consts::ARCH, None),
        }
    }

    /// `os/arch[/variant]`, e.g. `linux/arm64`, `linux/arm/v7`. Common aliases
    /// (`x86_64`, `aarch64`, `armhf`) are accepted and normalized.
    pub fn parse(s: &str) -> Result<Platform, PlatformError> {
        let bad = |why: &str| PlatformError {
            input: s.to_owned(),
            why: why.to_owned(),
        };
        let parts: Vec<&str> = s.split('/').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err(bad("expected os/arch or os/arch/variant"));
        }
        for p in &parts {
            if p.is_empty()
                || !p
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            {
                return Err(bad(
                    "each part must be lowercase letters, digits, '_' or '-'",
                ));
            }
        }
        Ok(Platform::new(parts[0], parts[1], parts.get(2).copied()))
    }

    /// How well an image for `self` fits a request for `wanted`: `None` when it
    /// cannot run there, higher is better. A request without a variant takes
    /// any variant; an `arm/v7` request also takes `v6` and `v5` images.
    pub fn fitness_for(&self, wanted: &Platform) -> Option<u32> {
        let (me, want) = (self.normalized(), wanted.normalized());
        if me.os != want.os || me.architecture != want.architecture {
            return None;
        }
        match (&want.variant, &me.variant) {
            (None, None) => Some(3),
            (None, Some(_)) => Some(2),
            (Some(w), Some(m)) if w == m => Some(3),
            (Some(_), None) => Some(1),
            (Some(w), Some(m)) if me.architecture == "arm" => {
                let level = |v: &str| v.strip_prefix('v').and_then(|n| n.parse::<u32>().ok());
                match (level(w), level(m)) {
                    (Some(w), Some(m)) if m < w => Some(2),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn normalized(&self) -> Platform {
        Platform::new(&self.os, &self.architecture, self.variant.as_deref())
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

impl From<&oci_spec::image::Platform> for Platform {
    fn from(p: &oci_spec::image::Platform) -> Platform {
        Platform::new(
            &p.os().to_string(),
            &p.architecture().to_string(),
            p.variant().as_deref(),
        )
    }
}

impl From<&oci_spec::image::ImageConfiguration> for Platform {
    fn from(c: &oci_spec::image::ImageConfiguration) -> Platform {
        Platform::new(
            &c.os().to_string(),
            &c.architecture().to_string(),
            c.variant().as_deref(),
        )
    }
}

/// Index of the candidate that fits `wanted` best; an error when none fits
/// or when two fit equally well (the caller reports which).
pub fn choose(candidates: &[Platform], wanted: &Platform) -> Result<usize, ChoiceError> {
    let mut best: Option<(u32, usize)> = None;
    let mut tie = false;
    for (i, c) in candidates.iter().enumerate() {
        if let Some(score) = c.fitness_for(wanted) {
            match best {
                Some((b, _)) if b > score => {}
                Some((b, _)) if b == score => tie = true,
                _ => {
                    best = Some((score, i));
                    tie = false;
                }
            }
        }
    }
    match best {
        None => Err(ChoiceError::NoMatch),
        Some(_) if tie => Err(ChoiceError::Ambiguous),
        Some((_, i)) => Ok(i),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChoiceError {
    NoMatch,
    Ambiguous,
}

/// `linux/amd64, linux/arm64` for error messages (sorted, deduplicated).
pub fn list(platforms: &[Platform]) -> String {
    let mut names: Vec<String> = platforms.iter().map(|p| p.to_string()).collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_arches_map_to_goarch() {
        assert_eq!(goarch("x86_64"), Some(("amd64", None)));
        assert_eq!(goarch("aarch64"), Some(("arm64", Some("v8"))));
        assert_eq!(goarch("x86"), Some(("386", None)));
        assert_eq!(goarch("riscv64"), Some(("riscv64", None)));
        assert_eq!(goarch("s390x"), Some(("s390x", None)));
        assert_eq!(goarch("loongarch64"), Some(("loong64", None)));
        assert!(goarch("avr").is_none());
        let host = Platform::host();
        assert_eq!(host.os, "linux");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(host.to_string(), "linux/amd64");
        }
        if cfg!(target_arch = "aarch64") {
            // v8 is the default arm64 variant and is not spelled out.
            assert_eq!(host.to_string(), "linux/arm64");
        }
    }

    #[test]
    fn parse_and_aliases() {
        assert_eq!(
            Platform::parse("linux/amd64").unwrap().to_string(),
            "linux/amd64"
        );
        assert_eq!(
            Platform::parse("linux/x86_64").unwrap().to_string(),
            "linux/amd64"
        );
        assert_eq!(
            Platform::parse("linux/aarch64").unwrap().to_string(),
            "linux/arm64"
        );
        assert_eq!(
            Platform::parse("linux/arm64/v8").unwrap().to_string(),
            "linux/arm64"
        );
        assert_eq!(
            Platform::parse("linux/armhf").unwrap().to_string(),
            "linux/arm/v7"
        );
        assert_eq!(
            Platform::parse("linux/arm/v6").unwrap().to_string(),
            "linux/arm/v6"
        );
        for bad in [
            "",
            "linux",
            "linux/",
            "/amd64",
            "linux/amd64/v1/x",
            "Linux/amd64",
            "linux/am d64",
        ] {
            let e = Platform::parse(bad).unwrap_err();
            assert!(e.to_string().starts_with("platform "), "{e}");
        }
    }

    #[test]
    fn matching_prefers_exact_variants() {
        let p = |s: &str| Platform::parse(s).unwrap();
        let cands = vec![
            p("linux/amd64"),
            p("linux/arm/v6"),
            p("linux/arm/v7"),
            p("linux/arm64"),
        ];
        assert_eq!(choose(&cands, &p("linux/amd64")), Ok(0));
        assert_eq!(choose(&cands, &p("linux/arm/v7")), Ok(2));
        assert_eq!(choose(&cands[..2], &p("linux/arm/v7")), Ok(1), "v7 runs v6");
        assert_eq!(
            choose(&cands[..2], &p("linux/arm/v5")),
            Err(ChoiceError::NoMatch)
        );
        assert_eq!(choose(&cands, &p("linux/arm64/v8")), Ok(3));
        assert_eq!(choose(&cands, &p("linux/s390x")), Err(ChoiceError::NoMatch));
        assert_eq!(
            choose(&[p("linux/amd64"), p("linux/amd64")], &p("linux/amd64")),
            Err(ChoiceError::Ambiguous)
        );
        // a request without variant takes an image with one
        assert_eq!(
            choose(&[p("linux/arm/v7")], &Platform::new("linux", "arm", None)),
            Ok(0)
        );
        assert_eq!(
            list(&cands),
            "linux/amd64, linux/arm/v6, linux/arm/v7, linux/arm64"
        );
        assert_eq!(list(&[]), "none");
    }

    #[test]
    fn from_oci_types() {
        let p: oci_spec::image::Platform =
            serde_json::from_str(r#"{"architecture":"arm","os":"linux","variant":"v7"}"#).unwrap();
        assert_eq!(Platform::from(&p).to_string(), "linux/arm/v7");
        let c: oci_spec::image::ImageConfiguration = serde_json::from_str(
            r#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#,
        )
        .unwrap();
        assert_eq!(Platform::from(&c).to_string(), "linux/amd64");
    }
}
