//! Plain root filesystems, a tarball (plain, gzip or zstd) or a directory:
//! one layer, and a generated config without a timestamp, so the same
//! content always gives the same digests.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::Serialize;

use super::archive::TarIndex;
use super::tar_dir::{tar_directory, Ownership};
use super::{ImportError, ImportReport, Importer, ManifestOut, DEFAULT_PATH};
use crate::image::digest::Digest;
use crate::image::layout;
use crate::image::platform::Platform;
use crate::image::store::BlobWriter;

impl Importer<'_> {
    pub(super) fn rootfs_tar(
        &mut self,
        scan: TarIndex,
        decompressed: Option<BlobWriter>,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        if scan.entries == 0 {
            return Err(self.ctx.bad("the tarball has no entries"));
        }
        let (digest, size) = match decompressed {
            Some(w) => w.finish(None),
            None => {
                let mut file = scan.file;
                io::Seek::seek(&mut file, io::SeekFrom::Start(0))
                    .map_err(|e| self.ctx.bad(e.to_string()))?;
                self.store.put_blob(file, None)
            }
        }
        .map_err(self.ctx.store("layer"))?;
        self.single_layer(digest, size, wanted, "rootfs tarball")
    }

    pub(super) fn rootfs_dir(
        &mut self,
        dir: &Path,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        let owner = if nix::unistd::geteuid().is_root() {
            Ownership::AsOnDisk
        } else {
            Ownership::Root
        };
        let mut w = self.store.blob_writer().map_err(self.ctx.store("layer"))?;
        let skip = fs::metadata(self.store.root())
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let warnings = tar_directory(dir, &mut w, owner, skip).map_err(|e| self.ctx.bad(e))?;
        self.warnings.extend(warnings);
        let (digest, size) = w.finish(None).map_err(self.ctx.store("layer"))?;
        self.single_layer(digest, size, wanted, "root filesystem directory")
    }

    fn single_layer(
        &mut self,
        layer: Digest,
        size: u64,
        wanted: &Platform,
        what: &str,
    ) -> Result<ImportReport, ImportError> {
        let config_bytes = generated_config(&layer, wanted, what);
        let config = layout::parse_config(&config_bytes).expect("generated config parses");
        let (config_digest, config_size) = self
            .store
            .put_blob(&config_bytes[..], None)
            .map_err(self.ctx.store("config"))?;
        let manifest = ManifestOut {
            schema_version: 2,
            media_type: layout::MT_OCI_MANIFEST,
            config: layout::descriptor(layout::MT_OCI_CONFIG, &config_digest, config_size),
            layers: vec![layout::descriptor(layout::MT_OCI_LAYER, &layer, size)],
        };
        let manifest_bytes = serde_json::to_vec(&manifest).expect("serializable");
        self.finish(
            &manifest_bytes,
            config_digest,
            &config,
            1,
            size + config_size,
        )
    }
}

/// The config of a one-layer image made from a plain root filesystem: no
/// timestamp, so the same content always gives the same digests.
fn generated_config(layer: &Digest, platform: &Platform, what: &str) -> Vec<u8> {
    #[derive(Serialize)]
    struct Cfg<'a> {
        architecture: &'a str,
        os: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        variant: Option<&'a str>,
        config: Exec,
        rootfs: RootFs,
        history: [History; 1],
    }
    #[derive(Serialize)]
    struct Exec {
        #[serde(rename = "Env")]
        env: [&'static str; 1],
    }
    #[derive(Serialize)]
    struct RootFs {
        #[serde(rename = "type")]
        typ: &'static str,
        diff_ids: [String; 1],
    }
    #[derive(Serialize)]
    struct History {
        created_by: String,
    }
    serde_json::to_vec(&Cfg {
        architecture: &platform.architecture,
        os: &platform.os,
        variant: platform.variant.as_deref(),
        config: Exec {
            env: [DEFAULT_PATH],
        },
        rootfs: RootFs {
            typ: "layers",
            diff_ids: [layer.to_string()],
        },
        history: [History {
            created_by: format!("cbrun image import ({what})"),
        }],
    })
    .expect("serializable")
}
