//! What a sandbox run is asked to do, as typed values. Parsing of the
//! user-facing strings (`--bind`, `--memory`, ...) lives here so every bad
//! value gets the same kind of one-line error.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use super::seccomp::SeccompMode;

#[derive(Debug, thiserror::Error)]
#[error("{what}: {value:?}: {why}")]
pub struct ParseError {
    pub what: &'static str,
    pub value: String,
    pub why: String,
}

fn perr(what: &'static str, value: &str, why: impl Into<String>) -> ParseError {
    ParseError {
        what,
        value: value.to_owned(),
        why: why.into(),
    }
}

/// Where the sandbox's `/` comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootfsSource {
    /// The host's system directories, read-only.
    Host,
    /// A directory used read-only as `/`.
    Dir(PathBuf),
    /// An unpacked image with a writable layer on top.
    Image(ImageRoot),
}

/// An image's shared read-only rootfs and where its writable layer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRoot {
    /// The unpacked rootfs, shared by every sandbox of the image; never written.
    pub lower: PathBuf,
    /// Keep the writable layer here (image builds capture it); `None` puts
    /// it in the run's state directory, removed with it.
    pub upper: Option<PathBuf>,
    /// `name:tag@sha256:...`, for outcomes and records.
    pub label: String,
}

impl RootfsSource {
    /// How outcomes name it.
    pub fn describe(&self) -> String {
        match self {
            RootfsSource::Host => "host".into(),
            RootfsSource::Dir(d) => d.display().to_string(),
            RootfsSource::Image(i) => i.label.clone(),
        }
    }

    /// The host directory holding the sandbox's `/` as the image or
    /// directory gives it (`/` for the host rootfs).
    pub fn host_root(&self) -> PathBuf {
        match self {
            RootfsSource::Host => PathBuf::from("/"),
            RootfsSource::Dir(d) => d.clone(),
            RootfsSource::Image(i) => i.lower.clone(),
        }
    }
}

impl FromStr for RootfsSource {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        if s == "host" {
            return Ok(RootfsSource::Host);
        }
        if s.is_empty() {
            return Err(perr("--rootfs", s, "expected `host` or a directory"));
        }
        Ok(RootfsSource::Dir(PathBuf::from(s)))
    }
}

/// `--bind SRC:DST[:ro]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub src: PathBuf,
    pub dst: PathBuf,
    pub readonly: bool,
}

impl FromStr for BindMount {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let parts: Vec<&str> = s.split(':').collect();
        let (src, dst, readonly) = match parts.as_slice() {
            [src, dst] => (*src, *dst, false),
            [src, dst, "ro"] => (*src, *dst, true),
            [src, dst, "rw"] => (*src, *dst, false),
            [_, _, opt] => {
                return Err(perr(
                    "--bind",
                    s,
                    format!("unknown option {opt:?} (expected ro or rw)"),
                ))
            }
            _ => return Err(perr("--bind", s, "expected SRC:DST[:ro]")),
        };
        if src.is_empty() || dst.is_empty() {
            return Err(perr("--bind", s, "SRC and DST must not be empty"));
        }
        let dst = Path::new(dst);
        if !dst.is_absolute() {
            return Err(perr("--bind", s, "DST must be an absolute path"));
        }
        if dst
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(perr("--bind", s, "DST must not contain `..`"));
        }
        if dst == Path::new("/") {
            return Err(perr("--bind", s, "DST must not be `/`"));
        }
        Ok(BindMount {
            src: PathBuf::from(src),
            dst: dst.to_path_buf(),
            readonly,
        })
    }
}

/// A size in bytes: `512M`, `2G`, `1048576`, `64k`. Binary multiples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(what: &'static str, s: &str) -> Result<Self, ParseError> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(perr(
                what,
                s,
                "expected a number with an optional unit (K, M, G, T)",
            ));
        }
        let n: u64 = num.parse().map_err(|_| perr(what, s, "number too large"))?;
        let mult: u64 = match unit.to_ascii_uppercase().as_str() {
            "" | "B" => 1,
            "K" | "KB" | "KI" | "KIB" => 1 << 10,
            "M" | "MB" | "MI" | "MIB" => 1 << 20,
            "G" | "GB" | "GI" | "GIB" => 1 << 30,
            "T" | "TB" | "TI" | "TIB" => 1 << 40,
            _ => {
                return Err(perr(
                    what,
                    s,
                    format!("unknown unit {unit:?} (use K, M, G or T)"),
                ))
            }
        };
        let v = n
            .checked_mul(mult)
            .ok_or_else(|| perr(what, s, "size overflows 64 bits"))?;
        if v < 1 << 20 {
            return Err(perr(what, s, "must be at least 1M"));
        }
        Ok(ByteSize(v))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0)
    }
}

/// `--cpus 1.5`: a CFS quota in CPUs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(transparent)]
pub struct Cpus(pub f64);

impl FromStr for Cpus {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let v: f64 = s
            .parse()
            .map_err(|_| perr("--cpus", s, "expected a number of CPUs, e.g. 1.5"))?;
        if !v.is_finite() || !(0.01..=4096.0).contains(&v) {
            return Err(perr("--cpus", s, "must be between 0.01 and 4096"));
        }
        Ok(Cpus(v))
    }
}

/// `--user UID:GID` inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
}

impl FromStr for Identity {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (u, g) = s.split_once(':').unwrap_or((s, s));
        let uid: u32 = u
            .parse()
            .map_err(|_| perr("--user", s, "expected numeric UID:GID"))?;
        let gid: u32 = g
            .parse()
            .map_err(|_| perr("--user", s, "expected numeric UID:GID"))?;
        if uid >= 65536 || gid >= 65536 {
            return Err(perr(
                "--user",
                s,
                "ids inside the sandbox must be below 65536",
            ));
        }
        Ok(Identity { uid, gid })
    }
}

/// `--env K=V`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    pub key: String,
    pub value: String,
}

impl FromStr for EnvVar {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| perr("--env", s, "expected KEY=VALUE"))?;
        validate_env_key("--env", k)?;
        Ok(EnvVar {
            key: k.to_owned(),
            value: v.to_owned(),
        })
    }
}

pub fn validate_env_key(what: &'static str, k: &str) -> Result<(), ParseError> {
    let ok = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(perr(what, k, "not a valid variable name"))
    }
}

/// What network the sandbox gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkPolicy {
    /// A fresh network namespace with only `lo`, brought up.
    None,
    /// The host's network namespace (image builds only; stated loudly).
    Host,
}

impl FromStr for NetworkPolicy {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "none" => Ok(NetworkPolicy::None),
            "host" => Ok(NetworkPolicy::Host),
            _ => Err(perr("--net", s, "expected `none` or `host`")),
        }
    }
}

impl FromStr for SeccompMode {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "default" => Ok(SeccompMode::Default),
            "off" => Ok(SeccompMode::Off),
            _ => Err(perr("--seccomp", s, "expected `default` or `off`")),
        }
    }
}

/// Resource limits asked for. `None` means "no cgroup limit"; rlimits always
/// have a value.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Limits {
    pub memory: Option<ByteSize>,
    pub pids: Option<u64>,
    pub cpus: Option<Cpus>,
    pub nofile: u64,
    pub nproc: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: None,
            pids: None,
            cpus: None,
            nofile: 4096,
            nproc: 4096,
        }
    }
}

/// Where a standard stream goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stdio {
    Inherit,
    /// Created or truncated.
    File(PathBuf),
    /// Appended to (stdout and stderr may share one file this way).
    Append(PathBuf),
}

/// A host file descriptor handed to the sandbox's command at a fixed number.
/// Nothing else of cbrun's is open in the sandbox: every other descriptor
/// above 2 is closed before the command (and the `--init` pid 1) runs.
#[derive(Debug, Clone)]
pub struct PassFd {
    pub fd: std::sync::Arc<std::os::fd::OwnedFd>,
    /// The number it has inside (3 or above).
    pub target: std::os::fd::RawFd,
}

/// Everything one sandbox run needs.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub rootfs: RootfsSource,
    pub binds: Vec<BindMount>,
    pub workdir: PathBuf,
    pub env: Vec<EnvVar>,
    pub user: Option<Identity>,
    pub hostname: String,
    pub network: NetworkPolicy,
    pub limits: Limits,
    pub require_limits: bool,
    pub seccomp: SeccompMode,
    pub timeout: Option<Duration>,
    pub kill_grace: Duration,
    pub stdout: Stdio,
    pub stderr: Stdio,
    /// Run a reaping init as pid 1 and the command as pid 2.
    pub init: bool,
    /// Descriptors the command gets besides 0, 1 and 2.
    pub pass_fds: Vec<PassFd>,
    pub command: Vec<String>,
}

impl SandboxConfig {
    pub fn new(command: Vec<String>) -> Self {
        SandboxConfig {
            rootfs: RootfsSource::Host,
            binds: Vec::new(),
            workdir: PathBuf::from("/"),
            env: Vec::new(),
            user: None,
            hostname: "cbrun".to_owned(),
            network: NetworkPolicy::None,
            limits: Limits::default(),
            require_limits: false,
            seccomp: SeccompMode::Default,
            timeout: None,
            kill_grace: Duration::from_secs(2),
            stdout: Stdio::Inherit,
            stderr: Stdio::Inherit,
            init: false,
            pass_fds: Vec::new(),
            command,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(ByteSize::parse("--memory", "256M").unwrap().0, 256 << 20);
        assert_eq!(ByteSize::parse("--memory", "2g").unwrap().0, 2 << 30);
        assert_eq!(ByteSize::parse("--memory", "1048576").unwrap().0, 1 << 20);
        let e = ByteSize::parse("--memory", "12XB").unwrap_err().to_string();
        assert!(
            e.contains("--memory") && e.contains("12XB") && e.contains("unit"),
            "{e}"
        );
        assert!(ByteSize::parse("--memory", "").is_err());
        assert!(ByteSize::parse("--memory", "M").is_err());
        assert!(ByteSize::parse("--memory", "99999999999999999999T").is_err());
        assert!(ByteSize::parse("--memory", "100").is_err(), "below 1M");
    }

    #[test]
    fn binds() {
        let b: BindMount = "/a:/b:ro".parse().unwrap();
        assert_eq!(
            (b.src.to_str(), b.dst.to_str(), b.readonly),
            (Some("/a"), Some("/b"), true)
        );
        let b: BindMount = "rel:/b".parse().unwrap();
        assert!(!b.readonly);
        for bad in [
            "/a",
            "/a:b",
            "/a:/b:rx",
            ":/b",
            "/a:/x/../y",
            "/a:/",
            "a:b:c:d",
        ] {
            let e = bad.parse::<BindMount>().unwrap_err().to_string();
            assert!(e.starts_with("--bind"), "{bad}: {e}");
        }
    }

    #[test]
    fn users_envs_cpus() {
        assert_eq!(
            "1000:1000".parse::<Identity>().unwrap(),
            Identity {
                uid: 1000,
                gid: 1000
            }
        );
        assert_eq!(
            "7".parse::<Identity>().unwrap(),
            Identity { uid: 7, gid: 7 }
        );
        assert!("root".parse::<Identity>().is_err());
        assert!("70000:1".parse::<Identity>().is_err());
        assert!("A=1".parse::<EnvVar>().is_ok());
        assert!("=1".parse::<EnvVar>().is_err());
        assert!("A-B=1".parse::<EnvVar>().is_err());
        assert!("NOEQ".parse::<EnvVar>().is_err());
        assert_eq!("1.5".parse::<Cpus>().unwrap(), Cpus(1.5));
        assert!("0".parse::<Cpus>().is_err());
        assert!("nan".parse::<Cpus>().is_err());
    }
}
