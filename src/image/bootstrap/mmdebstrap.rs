//! `kind = "mmdebstrap"`: a Debian root filesystem from its packages; the
//! layer is the tarball mmdebstrap writes (sorted, numeric owners, pax),
//! streamed from its stdout through the compressor.

use std::io::{self, Read, Write};
use std::process::{Command, Stdio};

use super::{BootstrapError, BootstrapOptions, MmdebstrapSpec};

/// The mmdebstrap command line for `spec` (the tarball goes to stdout).
pub fn mmdebstrap_args(spec: &MmdebstrapSpec, opts: &BootstrapOptions) -> Vec<String> {
    let mut args = vec![
        format!("--variant={}", spec.variant),
        format!("--mode={}", opts.mode.as_str()),
        "--format=tar".to_owned(),
        format!("--components={}", spec.components.join(",")),
    ];
    if opts.quiet {
        args.push("--quiet".to_owned());
    }
    if let Some(arch) = &spec.debian_architecture {
        args.push(format!("--architectures={arch}"));
    }
    if !spec.packages.is_empty() {
        args.push(format!("--include={}", spec.packages.join(",")));
    }
    for c in &spec.customize {
        args.push(format!(
            "--customize-hook=chroot \"$1\" /bin/sh -c {}",
            sh_quote(c)
        ));
    }
    args.push(spec.suite.clone());
    args.push("-".to_owned());
    let mirror = opts.mirror.clone().unwrap_or_else(|| spec.mirror.clone());
    if spec.trusted_mirror && super::recipe::is_local_mirror(&mirror) {
        // A whole sources.list line: mmdebstrap takes it as it is.
        args.push(format!(
            "deb [trusted=yes] {mirror} {} {}",
            spec.suite,
            spec.components.join(" ")
        ));
    } else {
        args.push(mirror);
    }
    args
}

/// Single-quotes `s` for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub(super) fn run_mmdebstrap(
    spec: &MmdebstrapSpec,
    epoch: Option<u64>,
    opts: &BootstrapOptions,
    out: &mut impl Write,
) -> Result<(), BootstrapError> {
    let program = opts.mmdebstrap.to_string_lossy().into_owned();
    let mut cmd = Command::new(&opts.mmdebstrap);
    cmd.args(mmdebstrap_args(spec, opts))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    match epoch {
        Some(e) => cmd.env("SOURCE_DATE_EPOCH", e.to_string()),
        None => cmd.env_remove("SOURCE_DATE_EPOCH"),
    };
    if let Some(t) = &opts.tmpdir {
        cmd.env("TMPDIR", t);
    }
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            BootstrapError::MmdebstrapMissing {
                program: program.clone(),
            }
        } else {
            BootstrapError::Mmdebstrap(format!("cannot start {program}: {e}"))
        }
    })?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let copied = copy_stream(&mut stdout, out);
    drop(stdout);
    let status = child
        .wait()
        .map_err(|e| BootstrapError::Mmdebstrap(format!("waiting for {program}: {e}")))?;
    if !status.success() {
        return Err(BootstrapError::Mmdebstrap(format!(
            "{program} exited with {status} (mode {}; its messages are above)",
            opts.mode.as_str()
        )));
    }
    let n = copied.map_err(|e| BootstrapError::Mmdebstrap(format!("reading its tarball: {e}")))?;
    if n == 0 {
        return Err(BootstrapError::Mmdebstrap("it wrote no tarball".to_owned()));
    }
    Ok(())
}

fn copy_stream(r: &mut impl Read, w: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = match r.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..k])?;
        n += k as u64;
    }
}
