//! OCI image layouts, as a directory or an oci-archive: `oci-layout`,
//! `index.json` (nested indexes followed), the chosen platform's manifest,
//! its config and layers.

use std::collections::BTreeSet;

use oci_spec::image::{Descriptor, ImageIndex};

use super::archive::Source;
use super::{ImportError, ImportOptions, ImportReport, Importer, MAX_INDEX_DEPTH};
use crate::image::digest::Digest;
use crate::image::layout::{self, ManifestKind, MAX_JSON_SIZE};
use crate::image::platform::{self, ChoiceError, Platform};

/// One image manifest an index offers.
struct Candidate {
    /// Where it was found, for messages: `index.json: manifests[1]`.
    field: String,
    desc: Descriptor,
    ref_name: Option<String>,
    platform: Option<Platform>,
}

impl Importer<'_> {
    /// A small blob of an OCI layout, checked against its descriptor.
    fn read_blob(
        &self,
        src: &Source,
        desc: &Descriptor,
        field: &str,
    ) -> Result<(Digest, Vec<u8>), ImportError> {
        let digest =
            layout::descriptor_digest(desc).map_err(|e| self.ctx.bad(format!("{field}: {e}")))?;
        if desc.size() > MAX_JSON_SIZE {
            return Err(self.ctx.bad(format!(
                "{field}: size {} is over the {MAX_JSON_SIZE} byte limit for JSON",
                desc.size()
            )));
        }
        let bytes = src
            .read_small(&layout::blob_path(&digest))
            .map_err(|e| self.ctx.bad(format!("{field}: {e}")))?;
        let actual = Digest::of_bytes(&bytes);
        if actual != digest {
            return Err(self.ctx.bad(format!(
                "{field}: content digest mismatch: expected {digest}, content is {actual}"
            )));
        }
        if bytes.len() as u64 != desc.size() {
            return Err(self.ctx.bad(format!(
                "{field}: size mismatch: the descriptor says {}, the blob has {} bytes",
                desc.size(),
                bytes.len()
            )));
        }
        Ok((digest, bytes))
    }

    fn collect(
        &self,
        src: &Source,
        index: &ImageIndex,
        field: &str,
        ref_name: Option<&str>,
        depth: usize,
        out: &mut Vec<Candidate>,
    ) -> Result<(), ImportError> {
        for (i, d) in index.manifests().iter().enumerate() {
            let f = format!("{field}: manifests[{i}]");
            let own_ref = d
                .annotations()
                .as_ref()
                .and_then(|a| a.get(layout::ANNOTATION_REF_NAME))
                .map(String::as_str);
            let r = if depth == 0 { own_ref } else { ref_name };
            match layout::manifest_kind(d.media_type().as_ref()) {
                Some(ManifestKind::Image) => out.push(Candidate {
                    field: f,
                    desc: d.clone(),
                    ref_name: r.map(str::to_owned),
                    platform: d.platform().as_ref().map(Platform::from),
                }),
                Some(ManifestKind::Index) => {
                    if depth >= MAX_INDEX_DEPTH {
                        return Err(self.ctx.bad(format!(
                            "{f}: indexes nested more than {MAX_INDEX_DEPTH} deep"
                        )));
                    }
                    let (digest, bytes) = self.read_blob(src, d, &f)?;
                    let nested = layout::parse_index(&bytes)
                        .map_err(|e| self.ctx.bad(format!("{f}: {e}")))?;
                    self.collect(src, &nested, &format!("{f} ({digest})"), r, depth + 1, out)?;
                }
                None => {} // artifacts and other content: not images
            }
        }
        Ok(())
    }

    pub(super) fn oci(
        &mut self,
        src: &Source,
        opts: &ImportOptions,
        wanted: &Platform,
    ) -> Result<ImportReport, ImportError> {
        let ctx = self.ctx;
        let marker = src
            .read_small(layout::OCI_LAYOUT_FILE)
            .map_err(|e| ctx.bad(format!("{}: {e}", layout::OCI_LAYOUT_FILE)))?;
        layout::check_oci_layout(&marker)
            .map_err(|e| ctx.bad(format!("{}: {e}", layout::OCI_LAYOUT_FILE)))?;
        let index_bytes = src
            .read_small(layout::INDEX_FILE)
            .map_err(|e| ctx.bad(format!("{}: {e}", layout::INDEX_FILE)))?;
        let index = layout::parse_index(&index_bytes)
            .map_err(|e| ctx.bad(format!("{}: {e}", layout::INDEX_FILE)))?;
        let mut cands = Vec::new();
        self.collect(src, &index, layout::INDEX_FILE, None, 0, &mut cands)?;
        if cands.is_empty() {
            return Err(ctx.bad("index.json: manifests: no image manifest"));
        }
        let ref_names = |cs: &[Candidate]| {
            let names: BTreeSet<&str> = cs.iter().filter_map(|c| c.ref_name.as_deref()).collect();
            names.into_iter().collect::<Vec<_>>().join(", ")
        };
        if let Some(sel) = &opts.select {
            let all = ref_names(&cands);
            cands.retain(|c| c.ref_name.as_deref() == Some(sel.as_str()));
            if cands.is_empty() {
                return Err(ctx.bad(format!(
                    "index.json: no image named {sel:?} (ref names: {})",
                    if all.is_empty() { "none" } else { &all }
                )));
            }
        }
        // Platforms not given in the index come from the configs.
        for c in cands.iter_mut().filter(|c| c.platform.is_none()) {
            let (_, m) = self.read_blob(src, &c.desc, &c.field)?;
            let manifest =
                layout::parse_manifest(&m).map_err(|e| ctx.bad(format!("{}: {e}", c.field)))?;
            let (_, cfg) =
                self.read_blob(src, manifest.config(), &format!("{}: config", c.field))?;
            let config = layout::parse_config(&cfg)
                .map_err(|e| ctx.bad(format!("{}: config: {e}", c.field)))?;
            c.platform = Some(Platform::from(&config));
        }
        let platforms: Vec<Platform> = cands
            .iter()
            .map(|c| c.platform.clone().expect("filled"))
            .collect();
        let chosen = match platform::choose(&platforms, wanted) {
            Ok(i) => &cands[i],
            Err(ChoiceError::NoMatch) => {
                return Err(ctx.bad(format!(
                    "index.json: no image for {wanted} (available: {}); pick one with --platform",
                    platform::list(&platforms)
                )))
            }
            Err(ChoiceError::Ambiguous) => {
                let names = ref_names(&cands);
                return Err(ctx.bad(format!(
                    "index.json: several images for {wanted} (ref names: {}); choose one with --ref",
                    if names.is_empty() { "none" } else { &names }
                )));
            }
        };
        let field = chosen.field.clone();
        let (_, manifest_bytes) = self.read_blob(src, &chosen.desc, &field)?;
        let manifest = layout::parse_manifest(&manifest_bytes)
            .map_err(|e| ctx.bad(format!("{field}: {e}")))?;
        let (config_digest, config_bytes) =
            self.read_blob(src, manifest.config(), &format!("{field}: config"))?;
        let config = layout::parse_config(&config_bytes)
            .map_err(|e| ctx.bad(format!("{field}: config: {e}")))?;
        let mut size = config_bytes.len() as u64;
        for (i, l) in manifest.layers().iter().enumerate() {
            let lf = format!("{field}: layers[{i}]");
            let digest = layout::descriptor_digest(l).map_err(|e| ctx.bad(format!("{lf}: {e}")))?;
            let name = layout::blob_path(&digest);
            let (reader, member_size) = src.open(&name).map_err(|e| {
                if l.urls().as_ref().is_some_and(|u| !u.is_empty()) {
                    ctx.bad(format!("{lf}: {e} (foreign layers are not downloaded)"))
                } else {
                    ctx.bad(format!("{lf}: {e}"))
                }
            })?;
            if member_size != l.size() {
                return Err(ctx.bad(format!(
                    "{lf}: size mismatch: the descriptor says {}, {name} has {member_size} bytes",
                    l.size()
                )));
            }
            let (_, n) = self
                .store
                .put_blob(reader, Some(&digest))
                .map_err(ctx.store(&lf))?;
            if n != l.size() {
                return Err(ctx.bad(format!(
                    "{lf}: size mismatch: the descriptor says {}, the blob has {n}",
                    l.size()
                )));
            }
            size += n;
        }
        self.store
            .put_blob(&config_bytes[..], Some(&config_digest))
            .map_err(ctx.store("config"))?;
        self.finish(
            &manifest_bytes,
            config_digest,
            &config,
            manifest.layers().len(),
            size,
        )
    }
}
