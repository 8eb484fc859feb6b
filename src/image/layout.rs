//! OCI image-format names and helpers shared by the store, import, export
//! and pull: media types, the image-layout files, descriptor conversion,
//! compression sniffing, and strict parsing of manifests and indexes.

use std::collections::HashMap;
use std::str::FromStr;

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest, MediaType};

use super::digest::Digest;

/// The `oci-layout` marker file of an image layout.
pub const OCI_LAYOUT_FILE: &str = "oci-layout";
/// The top-level index of an image layout.
pub const INDEX_FILE: &str = "index.json";
/// The `imageLayoutVersion` cbrun writes (and the major version it reads).
pub const LAYOUT_VERSION: &str = "1.0.0";
/// Index annotation naming a manifest (`skopeo`'s `oci:DIR:NAME`, `umoci`'s tag).
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";

pub const MT_OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MT_OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MT_OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MT_OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
pub const MT_OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const MT_OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
pub const MT_DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const MT_DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const MT_DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const MT_DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
pub const MT_DOCKER_FOREIGN_LAYER_GZIP: &str =
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";

/// Cap on JSON documents read into memory (manifests, configs, indexes).
pub const MAX_JSON_SIZE: u64 = 16 << 20;

/// What a manifest-level media type denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestKind {
    /// One image (OCI manifest or Docker schema 2 manifest).
    Image,
    /// A list of images (OCI index or Docker manifest list).
    Index,
}

pub fn manifest_kind(media_type: &str) -> Option<ManifestKind> {
    match media_type {
        MT_OCI_MANIFEST | MT_DOCKER_MANIFEST => Some(ManifestKind::Image),
        MT_OCI_INDEX | MT_DOCKER_LIST => Some(ManifestKind::Index),
        _ => None,
    }
}

pub fn is_config_media_type(media_type: &str) -> bool {
    matches!(media_type, MT_OCI_CONFIG | MT_DOCKER_CONFIG)
}

/// OCI layer types (distributable or not, any compression) and Docker's.
pub fn is_layer_media_type(media_type: &str) -> bool {
    media_type.starts_with("application/vnd.oci.image.layer.")
        || matches!(
            media_type,
            MT_DOCKER_LAYER_GZIP | MT_DOCKER_FOREIGN_LAYER_GZIP
        )
}

/// Compression of a layer or tarball, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    /// Recognized but unsupported (xz, bzip2).
    Other(&'static str),
}

impl Compression {
    /// Sniff from the first bytes (6 are enough).
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Compression::Other("xz")
        } else if head.starts_with(b"BZh") {
            Compression::Other("bzip2")
        } else {
            Compression::None
        }
    }

    /// The OCI layer media type for a layer compressed this way.
    pub fn layer_media_type(self) -> Option<&'static str> {
        match self {
            Compression::None => Some(MT_OCI_LAYER),
            Compression::Gzip => Some(MT_OCI_LAYER_GZIP),
            Compression::Zstd => Some(MT_OCI_LAYER_ZSTD),
            Compression::Other(_) => None,
        }
    }
}

/// The store digest of a descriptor; only sha256 is supported.
pub fn descriptor_digest(d: &Descriptor) -> Result<Digest, String> {
    let s = d.digest().to_string();
    Digest::parse(&s)
        .map_err(|_| format!("digest {s:?}: only sha256:<64 hex> digests are supported"))
}

/// An oci-spec descriptor for a blob of the store.
pub fn descriptor(media_type: &str, digest: &Digest, size: u64) -> Descriptor {
    let d = oci_spec::image::Digest::from_str(&digest.to_string())
        .expect("a store digest is a valid OCI digest");
    Descriptor::new(MediaType::from(media_type), size, d)
}

/// The path of a blob inside an image layout: `blobs/sha256/<hex>`.
pub fn blob_path(digest: &Digest) -> String {
    format!("blobs/{}/{}", digest.algorithm(), digest.hex())
}

/// The digest named by an image-layout path `blobs/sha256/<hex>`.
pub fn digest_of_blob_path(path: &str) -> Option<Digest> {
    let hex = path.strip_prefix("blobs/sha256/")?;
    Digest::parse(&format!("sha256:{hex}")).ok()
}

/// The bytes of an `oci-layout` file.
pub fn oci_layout_bytes() -> Vec<u8> {
    format!("{{\"imageLayoutVersion\":\"{LAYOUT_VERSION}\"}}").into_bytes()
}

/// Check an `oci-layout` file: JSON with an `imageLayoutVersion` of major 1.
pub fn check_oci_layout(bytes: &[u8]) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Layout {
        #[serde(rename = "imageLayoutVersion")]
        version: String,
    }
    let l: Layout = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    if l.version.split('.').next() != Some("1") {
        return Err(format!(
            "imageLayoutVersion {:?} is not supported (1.x is)",
            l.version
        ));
    }
    Ok(())
}

/// An `index.json` naming one manifest, with its ref name.
pub fn index_bytes(manifest: &Descriptor, ref_name: Option<&str>) -> Vec<u8> {
    let mut d = manifest.clone();
    if let Some(r) = ref_name {
        d.set_annotations(Some(HashMap::from([(
            ANNOTATION_REF_NAME.to_owned(),
            r.to_owned(),
        )])));
    }
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MT_OCI_INDEX,
        "manifests": [d],
    });
    serde_json::to_vec(&index).expect("serializable")
}

/// Parse an image manifest strictly: schemaVersion 2, an image manifest media
/// type (when given), a config and layers with supported media types and
/// sha256 digests.
pub fn parse_manifest(bytes: &[u8]) -> Result<ImageManifest, String> {
    check_size(bytes)?;
    let m: ImageManifest =
        serde_json::from_slice(bytes).map_err(|e| format!("not an image manifest: {e}"))?;
    if m.schema_version() != 2 {
        return Err(format!(
            "schemaVersion: {} (expected 2)",
            m.schema_version()
        ));
    }
    if let Some(mt) = m.media_type() {
        if manifest_kind(mt.as_ref()) != Some(ManifestKind::Image) {
            return Err(format!(
                "mediaType: {:?} is not an image manifest",
                mt.as_ref()
            ));
        }
    }
    let c = m.config();
    if !is_config_media_type(c.media_type().as_ref()) {
        return Err(format!(
            "config.mediaType: {:?} is not an image config",
            c.media_type().as_ref()
        ));
    }
    descriptor_digest(c).map_err(|e| format!("config.{e}"))?;
    if c.size() > MAX_JSON_SIZE {
        return Err(format!(
            "config.size: {} is over the {} byte limit",
            c.size(),
            MAX_JSON_SIZE
        ));
    }
    for (i, l) in m.layers().iter().enumerate() {
        if !is_layer_media_type(l.media_type().as_ref()) {
            return Err(format!(
                "layers[{i}].mediaType: {:?} is not an image layer",
                l.media_type().as_ref()
            ));
        }
        descriptor_digest(l).map_err(|e| format!("layers[{i}].{e}"))?;
    }
    Ok(m)
}

/// Parse an image index (or Docker manifest list).
pub fn parse_index(bytes: &[u8]) -> Result<ImageIndex, String> {
    check_size(bytes)?;
    let i: ImageIndex =
        serde_json::from_slice(bytes).map_err(|e| format!("not an image index: {e}"))?;
    if i.schema_version() != 2 {
        return Err(format!(
            "schemaVersion: {} (expected 2)",
            i.schema_version()
        ));
    }
    Ok(i)
}

/// Parse an image configuration (Docker's config JSON is compatible).
pub fn parse_config(bytes: &[u8]) -> Result<ImageConfiguration, String> {
    check_size(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| format!("not an image config: {e}"))
}

fn check_size(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() as u64 > MAX_JSON_SIZE {
        return Err(format!(
            "{} bytes is over the {} byte limit for JSON",
            bytes.len(),
            MAX_JSON_SIZE
        ));
    }
    Ok(())
}

/// The `media type` of a manifest document: its own `mediaType` field, else
/// what its shape says (`manifests` → index, `config` → image manifest).
pub fn sniff_manifest_media_type(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(rename = "mediaType")]
        media_type: Option<String>,
        manifests: Option<serde::de::IgnoredAny>,
        config: Option<serde::de::IgnoredAny>,
    }
    let p: Probe = serde_json::from_slice(bytes).ok()?;
    match (p.media_type, p.manifests, p.config) {
        (Some(mt), _, _) => Some(mt),
        (None, Some(_), None) => Some(MT_OCI_INDEX.to_owned()),
        (None, None, Some(_)) => Some(MT_OCI_MANIFEST.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn manifest_json(layer_mt: &str) -> String {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"{MT_OCI_MANIFEST}",
            "config":{{"mediaType":"{MT_OCI_CONFIG}","digest":"sha256:{HEX}","size":2}},
            "layers":[{{"mediaType":"{layer_mt}","digest":"sha256:{HEX}","size":0}}]}}"#
        )
    }

    #[test]
    fn compression_sniffing() {
        assert_eq!(Compression::detect(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(
            Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Compression::Zstd
        );
        assert_eq!(Compression::detect(b"\xfd7zXZ\0"), Compression::Other("xz"));
        assert_eq!(Compression::detect(b"BZh91"), Compression::Other("bzip2"));
        assert_eq!(Compression::detect(b"bin/"), Compression::None);
        assert_eq!(Compression::detect(b""), Compression::None);
        assert_eq!(
            Compression::Gzip.layer_media_type(),
            Some(MT_OCI_LAYER_GZIP)
        );
        assert_eq!(Compression::None.layer_media_type(), Some(MT_OCI_LAYER));
    }

    #[test]
    fn descriptors_round_trip_digests() {
        let d = Digest::of_bytes(b"x");
        let desc = descriptor(MT_OCI_CONFIG, &d, 1);
        assert_eq!(descriptor_digest(&desc).unwrap(), d);
        assert_eq!(blob_path(&d), format!("blobs/sha256/{}", d.hex()));
        assert_eq!(digest_of_blob_path(&blob_path(&d)), Some(d));
        assert_eq!(digest_of_blob_path("blobs/sha256/../x"), None);
        assert_eq!(digest_of_blob_path("blobs/sha512/ab"), None);
        let sha512: Descriptor = serde_json::from_str(&format!(
            r#"{{"mediaType":"{MT_OCI_CONFIG}","digest":"sha512:{}","size":1}}"#,
            "a".repeat(128)
        ))
        .unwrap();
        assert!(descriptor_digest(&sha512)
            .unwrap_err()
            .contains("only sha256"));
    }

    #[test]
    fn manifests_are_checked() {
        assert!(parse_manifest(manifest_json(MT_OCI_LAYER_GZIP).as_bytes()).is_ok());
        assert!(parse_manifest(manifest_json(MT_DOCKER_LAYER_GZIP).as_bytes()).is_ok());
        let e = parse_manifest(manifest_json("text/plain").as_bytes()).unwrap_err();
        assert_eq!(
            e,
            r#"layers[0].mediaType: "text/plain" is not an image layer"#
        );
        let e = parse_manifest(
            manifest_json(MT_OCI_LAYER)
                .replace("\"schemaVersion\":2", "\"schemaVersion\":1")
                .as_bytes(),
        )
        .unwrap_err();
        assert!(e.starts_with("schemaVersion"), "{e}");
        let idx = format!(r#"{{"schemaVersion":2,"mediaType":"{MT_OCI_INDEX}","manifests":[]}}"#);
        assert!(parse_manifest(idx.as_bytes()).is_err());
        assert!(parse_index(idx.as_bytes()).is_ok());
        assert_eq!(
            sniff_manifest_media_type(idx.as_bytes()).as_deref(),
            Some(MT_OCI_INDEX)
        );
        assert_eq!(
            sniff_manifest_media_type(br#"{"schemaVersion":2,"config":{}}"#).as_deref(),
            Some(MT_OCI_MANIFEST)
        );
        let big = vec![b' '; (MAX_JSON_SIZE + 1) as usize];
        assert!(parse_manifest(&big).unwrap_err().contains("limit"));
    }

    #[test]
    fn layout_files() {
        assert!(check_oci_layout(&oci_layout_bytes()).is_ok());
        assert!(check_oci_layout(br#"{"imageLayoutVersion":"2.0.0"}"#).is_err());
        assert!(check_oci_layout(b"nope").is_err());
        let d = descriptor(MT_OCI_MANIFEST, &Digest::of_bytes(b"m"), 1);
        let idx = parse_index(&index_bytes(&d, Some("v1"))).unwrap();
        let ann = idx.manifests()[0].annotations().clone().unwrap();
        assert_eq!(ann[ANNOTATION_REF_NAME], "v1");
    }
}
