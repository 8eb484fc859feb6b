//! The documents of the OCI layout a bootstrap writes (index, manifest,
//! config), with fields in a fixed order, and the helpers that write them.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::Serialize;

use super::{io_err, BootstrapError};
use crate::image::digest::Digest;

pub(super) fn non_empty(v: &[String]) -> Option<Vec<String>> {
    if v.is_empty() {
        None
    } else {
        Some(v.to_vec())
    }
}

pub(super) fn to_json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("serializing plain structs cannot fail")
}

pub(super) fn write_file(path: &Path, data: &[u8]) -> Result<(), BootstrapError> {
    fs::write(path, data).map_err(io_err("write", path))
}

pub(super) fn write_json_blob<T: Serialize>(
    blobs: &Path,
    media_type: &str,
    v: &T,
) -> Result<Descriptor, BootstrapError> {
    let data = to_json(v);
    let digest = Digest::of_bytes(&data);
    write_file(&blobs.join(digest.hex()), &data)?;
    Ok(Descriptor {
        media_type: media_type.to_owned(),
        digest,
        size: data.len() as u64,
        annotations: None,
        platform: None,
    })
}

/// `1970-01-01T00:00:00Z` style, from seconds since the epoch.
pub(super) fn rfc3339_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

// OCI documents, with fields in a fixed order so that the same input always
// gives the same bytes.

#[derive(Debug, Clone, Serialize)]
pub(super) struct Descriptor {
    #[serde(rename = "mediaType")]
    pub(super) media_type: String,
    pub(super) digest: Digest,
    pub(super) size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) annotations: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) platform: Option<Platform>,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct Platform {
    pub(super) architecture: String,
    pub(super) os: String,
}

#[derive(Serialize)]
pub(super) struct OciIndex {
    #[serde(rename = "schemaVersion")]
    pub(super) schema_version: u32,
    #[serde(rename = "mediaType")]
    pub(super) media_type: &'static str,
    pub(super) manifests: Vec<Descriptor>,
}

#[derive(Serialize)]
pub(super) struct OciManifest {
    #[serde(rename = "schemaVersion")]
    pub(super) schema_version: u32,
    #[serde(rename = "mediaType")]
    pub(super) media_type: &'static str,
    pub(super) config: Descriptor,
    pub(super) layers: Vec<Descriptor>,
}

#[derive(Serialize)]
pub(super) struct OciConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) created: Option<String>,
    pub(super) architecture: String,
    pub(super) os: String,
    pub(super) config: OciRuntimeConfig,
    pub(super) rootfs: OciRootfs,
    pub(super) history: Vec<OciHistory>,
}

#[derive(Serialize)]
pub(super) struct OciRuntimeConfig {
    #[serde(rename = "User", skip_serializing_if = "Option::is_none")]
    pub(super) user: Option<String>,
    #[serde(rename = "Env")]
    pub(super) env: Vec<String>,
    #[serde(rename = "Entrypoint", skip_serializing_if = "Option::is_none")]
    pub(super) entrypoint: Option<Vec<String>>,
    #[serde(rename = "Cmd", skip_serializing_if = "Option::is_none")]
    pub(super) cmd: Option<Vec<String>>,
    #[serde(rename = "WorkingDir", skip_serializing_if = "Option::is_none")]
    pub(super) working_dir: Option<String>,
    #[serde(rename = "Labels")]
    pub(super) labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
pub(super) struct OciRootfs {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) diff_ids: Vec<Digest>,
}

#[derive(Serialize)]
pub(super) struct OciHistory {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) created: Option<String>,
    pub(super) created_by: String,
}
