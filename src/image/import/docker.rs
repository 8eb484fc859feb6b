//! docker-archives (what `docker save` writes): `manifest.json` with
//! `Config`, `RepoTags` and `Layers`, turned into an OCI manifest.

use std::collections::BTreeSet;
use std::io::Read;

use serde::Deserialize;

use super::archive::{resolve_relative, Source};
use super::{read_full, ImportError, ImportOptions, ImportReport, Importer, ManifestOut};
use crate::image::digest::Digest;
use crate::image::layout::{self, Compression};
use crate::image::platform::Platform;

impl Importer<'_> {
    pub(super) fn docker(
        &mut self,
        src: &Source,
        opts: &ImportOptions,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Entry {
            config: String,
            #[serde(default)]
            repo_tags: Option<Vec<String>>,
            layers: Vec<String>,
        }
        let ctx = self.ctx;
        let bytes = src
            .read_small("manifest.json")
            .map_err(|e| ctx.bad(format!("manifest.json: {e}")))?;
        let entries: Vec<Entry> = serde_json::from_slice(&bytes)
            .map_err(|e| ctx.bad(format!("manifest.json: not a docker-archive manifest: {e}")))?;
        let tags_of = |es: &[&Entry]| {
            let t: BTreeSet<&str> = es
                .iter()
                .flat_map(|e| e.repo_tags.iter().flatten().map(String::as_str))
                .collect();
            if t.is_empty() {
                "none".to_owned()
            } else {
                t.into_iter().collect::<Vec<_>>().join(", ")
            }
        };
        let all: Vec<&Entry> = entries.iter().collect();
        let (i, entry) = match &opts.select {
            Some(sel) => {
                let want = docker_short_tag(sel);
                entries
                    .iter()
                    .enumerate()
                    .find(|(_, e)| {
                        e.repo_tags
                            .iter()
                            .flatten()
                            .any(|t| docker_short_tag(t) == want)
                    })
                    .ok_or_else(|| {
                        ctx.bad(format!(
                            "manifest.json: no image tagged {sel:?} (RepoTags: {})",
                            tags_of(&all)
                        ))
                    })?
            }
            None if entries.len() == 1 => (0, &entries[0]),
            None if entries.is_empty() => return Err(ctx.bad("manifest.json: no images")),
            None => {
                return Err(ctx.bad(format!(
                    "manifest.json: {} images (RepoTags: {}); choose one with --ref",
                    entries.len(),
                    tags_of(&all)
                )))
            }
        };
        let member = |field: &str, p: &str| -> Result<(String, Option<Digest>), ImportError> {
            let name = resolve_relative("", p)
                .map_err(|why| ctx.bad(format!("manifest.json: {field}: {p:?}: {why}")))?;
            // `blobs/sha256/<hex>` (Docker 25+) and `<hex>.json` (older
            // configs) name their digest; `<id>/layer.tar` does not.
            let expected = layout::digest_of_blob_path(&name).or_else(|| {
                name.strip_suffix(".json")
                    .filter(|h| !h.contains('/'))
                    .and_then(|h| Digest::parse(&format!("sha256:{h}")).ok())
            });
            Ok((name, expected))
        };
        // `Layers[1]` for the usual one-image archive, `[2].Layers[1]` otherwise.
        let at = if entries.len() == 1 {
            String::new()
        } else {
            format!("[{i}].")
        };
        let cfield = format!("{at}Config");
        let (cname, cexpected) = member(&cfield, &entry.config)?;
        let config_bytes = src
            .read_small(&cname)
            .map_err(|e| ctx.bad(format!("manifest.json: {cfield}: {e}")))?;
        let config_digest = Digest::of_bytes(&config_bytes);
        if let Some(exp) = &cexpected {
            if exp != &config_digest {
                return Err(ctx.bad(format!(
                    "manifest.json: {cfield}: {cname:?}: content digest mismatch: expected {exp}, content is {config_digest}"
                )));
            }
        }
        let config = layout::parse_config(&config_bytes)
            .map_err(|e| ctx.bad(format!("manifest.json: {cfield}: {cname:?}: {e}")))?;
        self.check_platform(&config, wanted)?;
        let diff_ids = config.rootfs().diff_ids().clone();
        if diff_ids.len() != entry.layers.len() {
            self.warnings.push(format!(
                "config lists {} diff_ids for {} layers",
                diff_ids.len(),
                entry.layers.len()
            ));
        }
        let mut layers = Vec::new();
        let mut size = config_bytes.len() as u64;
        for (j, p) in entry.layers.iter().enumerate() {
            let lfield = format!("{at}Layers[{j}]");
            let (name, expected) = member(&lfield, p)?;
            let (mut reader, _) = src
                .open(&name)
                .map_err(|e| ctx.bad(format!("manifest.json: {lfield}: {e}")))?;
            let mut head = [0u8; 6];
            let n = read_full(&mut reader, &mut head)
                .map_err(|e| ctx.bad(format!("manifest.json: {lfield}: {name:?}: {e}")))?;
            let compression = Compression::detect(&head[..n]);
            let media_type = compression.layer_media_type().ok_or_else(|| {
                ctx.bad(format!("manifest.json: {lfield}: {name:?}: {compression:?}-compressed layers are not supported"))
            })?;
            let full = (&head[..n]).chain(reader);
            let (digest, len) = self
                .store
                .put_blob(full, expected.as_ref())
                .map_err(ctx.store(&format!("manifest.json: {lfield}: {name:?}")))?;
            if compression == Compression::None {
                if let Some(id) = diff_ids.get(j) {
                    if *id != digest.to_string() {
                        self.warnings.push(format!(
                            "{lfield}: content is {digest}, the config's rootfs.diff_ids[{j}] says {id}"
                        ));
                    }
                }
            }
            size += len;
            layers.push(layout::descriptor(media_type, &digest, len));
        }
        let manifest = ManifestOut {
            schema_version: 2,
            media_type: layout::MT_OCI_MANIFEST,
            config: layout::descriptor(
                layout::MT_OCI_CONFIG,
                &config_digest,
                config_bytes.len() as u64,
            ),
            layers,
        };
        let manifest_bytes = serde_json::to_vec(&manifest).expect("serializable");
        self.store
            .put_blob(&config_bytes[..], Some(&config_digest))
            .map_err(ctx.store("config"))?;
        let n = manifest.layers.len();
        self.finish(&manifest_bytes, config_digest, &config, n, size)
    }
}

/// A docker tag without Docker Hub's implied parts: `docker.io/library/a:1`
/// and `a` (→ `a:latest`) compare equal to `a:1` / `a:latest`.
pub(super) fn docker_short_tag(t: &str) -> String {
    let t = t
        .strip_prefix("docker.io/library/")
        .or_else(|| t.strip_prefix("docker.io/"))
        .unwrap_or(t);
    let last = t.rsplit('/').next().unwrap_or(t);
    if last.contains(':') {
        t.to_owned()
    } else {
        format!("{t}:latest")
    }
}
