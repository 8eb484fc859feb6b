//! `cbrun image unpack NAME`: unpack an image's layers into its shared
//! root now (otherwise done on first use); `--for-user UID[:GID]` (real
//! root, the owner of a shared store) makes a root of that user's own.

use anyhow::{bail, Result};

use cbrun::image::unpacked::{ensure_unpacked, owner_mode, unpack_for_user};
use cbrun::sandbox::run::HostView;

use super::{store, ExitStatus};
use crate::cli::messages;

#[derive(clap::Args)]
pub struct Args {
    /// The image: `NAME[:TAG]` or `NAME@sha256:...`.
    name: String,
    /// Unpack for this user of a shared store (files theirs, for their rootless sandboxes).
    #[arg(long, value_name = "UID[:GID]")]
    for_user: Option<String>,
}

pub fn exec(a: Args) -> Result<ExitStatus> {
    let s = store()?;
    let img = s.resolve(&a.name)?;
    let u = match &a.for_user {
        Some(spec) => {
            let (uid, gid) = user_ids(spec)?;
            unpack_for_user(&s, &img, uid, gid)?
        }
        None => {
            let mapping = HostView::detect().mapping;
            ensure_unpacked(&s, &img, owner_mode(&mapping))?
        }
    };
    if let Some(r) = &u.report {
        messages::status(format_args!("unpacked: {}", serde_json::to_string(r)?));
    }
    println!("{}", u.path.display());
    Ok(ExitStatus::Success)
}

/// `UID`, `UID:GID`, or a user name (its passwd entry gives both).
fn user_ids(spec: &str) -> Result<(u32, u32)> {
    let (u, g) = spec.split_once(':').unwrap_or((spec, ""));
    let (uid, pw_gid) = match u.parse::<u32>() {
        Ok(n) => (
            n,
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(n))
                .ok()
                .flatten()
                .map(|p| p.gid.as_raw()),
        ),
        Err(_) => match nix::unistd::User::from_name(u).ok().flatten() {
            Some(p) => (p.uid.as_raw(), Some(p.gid.as_raw())),
            None => bail!("--for-user {spec}: no such user"),
        },
    };
    let gid = if g.is_empty() {
        pw_gid.unwrap_or(uid)
    } else {
        match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => bail!("--for-user {spec}: GID must be a number"),
        }
    };
    if uid == 0 {
        bail!("--for-user {spec}: root uses the store's own root");
    }
    Ok((uid, gid))
}
