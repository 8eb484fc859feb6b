//! Tests of every import format; [`Fixture`], [`layer_tar`] and
//! [`host_arch`] serve the export tests too.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;

use serde_json::{json, Value};

use super::archive::{normalize_member, resolve_relative};
use super::docker::docker_short_tag;
use super::*;
use crate::image::layout::{
    MAX_JSON_SIZE, MT_OCI_CONFIG, MT_OCI_INDEX, MT_OCI_LAYER, MT_OCI_LAYER_GZIP, MT_OCI_MANIFEST,
};
use crate::image::store::tests::TempDir;

/// A tar of (name, content) regular files.
pub(crate) fn layer_tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_ustar();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_mtime(1_700_000_000);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// An OCI image layout built by hand.
#[derive(Default)]
pub(crate) struct Fixture {
    pub blobs: BTreeMap<Digest, Vec<u8>>,
    pub manifests: Vec<Value>,
}

impl Fixture {
    pub(crate) fn blob(&mut self, bytes: Vec<u8>) -> (Digest, u64) {
        let d = Digest::of_bytes(&bytes);
        let n = bytes.len() as u64;
        self.blobs.insert(d.clone(), bytes);
        (d, n)
    }

    /// An image for `arch` (`amd64`, `arm/v7`) with the given layers
    /// (gzip'd when `gz`); returns the manifest descriptor.
    pub(crate) fn image(&mut self, arch: &str, layers: &[Vec<u8>], gz: bool) -> Value {
        let (a, v) = arch
            .split_once('/')
            .map(|(a, v)| (a, Some(v)))
            .unwrap_or((arch, None));
        let diff_ids: Vec<String> = layers
            .iter()
            .map(|l| Digest::of_bytes(l).to_string())
            .collect();
        let mut cfg = json!({"architecture": a, "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids},
                             "config": {"Cmd": ["/bin/sh"]}});
        if let Some(v) = v {
            cfg["variant"] = json!(v);
        }
        let (cd, cn) = self.blob(serde_json::to_vec(&cfg).unwrap());
        let ls: Vec<Value> = layers
            .iter()
            .map(|l| {
                let (bytes, mt) = if gz {
                    (gzip(l), MT_OCI_LAYER_GZIP)
                } else {
                    (l.clone(), MT_OCI_LAYER)
                };
                let (d, n) = self.blob(bytes);
                json!({"mediaType": mt, "digest": d.to_string(), "size": n})
            })
            .collect();
        let m = json!({"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
            "config": {"mediaType": MT_OCI_CONFIG, "digest": cd.to_string(), "size": cn}, "layers": ls});
        let (md, mn) = self.blob(serde_json::to_vec(&m).unwrap());
        json!({"mediaType": MT_OCI_MANIFEST, "digest": md.to_string(), "size": mn})
    }

    pub(crate) fn add(&mut self, mut desc: Value, ref_name: Option<&str>, platform: Option<&str>) {
        if let Some(r) = ref_name {
            desc["annotations"] = json!({ layout::ANNOTATION_REF_NAME: r });
        }
        if let Some(p) = platform {
            let parts: Vec<&str> = p.split('/').collect();
            desc["platform"] = json!({"os": parts[0], "architecture": parts[1]});
            if parts.len() == 3 {
                desc["platform"]["variant"] = json!(parts[2]);
            }
        }
        self.manifests.push(desc);
    }

    /// An index blob over `descs` (for nesting); returns its descriptor.
    pub(crate) fn index_blob(&mut self, descs: Vec<Value>) -> Value {
        let (d, n) = self.blob(
            serde_json::to_vec(
                &json!({"schemaVersion": 2, "mediaType": MT_OCI_INDEX, "manifests": descs}),
            )
            .unwrap(),
        );
        json!({"mediaType": MT_OCI_INDEX, "digest": d.to_string(), "size": n})
    }

    fn files(&self) -> Vec<(String, Vec<u8>)> {
        let mut v = vec![
            ("oci-layout".to_owned(), layout::oci_layout_bytes()),
            (
                "index.json".to_owned(),
                serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": self.manifests}))
                    .unwrap(),
            ),
        ];
        for (d, b) in &self.blobs {
            v.push((layout::blob_path(d), b.clone()));
        }
        v
    }

    pub(crate) fn write_dir(&self, dir: &Path) {
        fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        for (name, bytes) in self.files() {
            fs::write(dir.join(name), bytes).unwrap();
        }
    }

    pub(crate) fn tar(&self) -> Vec<u8> {
        let files = self.files();
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        layer_tar(&refs)
    }

    pub(crate) fn manifest_digest(desc: &Value) -> Digest {
        Digest::parse(desc["digest"].as_str().unwrap()).unwrap()
    }
}

pub(crate) fn host_arch() -> String {
    let h = Platform::host();
    match h.variant {
        Some(v) => format!("{}/{v}", h.architecture),
        None => h.architecture,
    }
}

fn other_arch() -> &'static str {
    if Platform::host().architecture == "s390x" {
        "riscv64"
    } else {
        "s390x"
    }
}

fn opts() -> ImportOptions {
    ImportOptions::default()
}

fn err(r: Result<ImportReport, ImportError>) -> String {
    let e = r.unwrap_err().to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    e
}

fn assert_no_refs(store: &Store) {
    assert!(store.list().unwrap().is_empty());
    assert_eq!(
        fs::read_dir(store.tmp_dir()).unwrap().count(),
        0,
        "tmp/ left over"
    );
}

fn setup(tag: &str) -> (TempDir, Store) {
    let t = TempDir::new(tag);
    let store = Store::open(t.path().join("store")).unwrap();
    (t, store)
}

#[test]
fn oci_dir_and_archives_import_to_the_same_digest() {
    let (t, store) = setup("imp-oci");
    let mut fx = Fixture::default();
    let layers = [
        layer_tar(&[("etc/hello", b"hi")]),
        layer_tar(&[("bin/x", b"x")]),
    ];
    let desc = fx.image(&host_arch(), &layers, true);
    let want = Fixture::manifest_digest(&desc);
    fx.add(desc, Some("v1"), None);
    let dir = t.path().join("layout");
    fx.write_dir(&dir);
    let r = import(&store, &dir, "img:dir", &opts()).unwrap();
    assert_eq!(
        (r.format, &r.manifest_digest, r.layers),
        (Format::OciDir, &want, 2)
    );
    assert_eq!(r.reference, "img:dir");
    let ar = t.path().join("x.tar");
    fs::write(&ar, fx.tar()).unwrap();
    let r = import(&store, &ar, "img:tar", &opts()).unwrap();
    assert_eq!((r.format, &r.manifest_digest), (Format::OciArchive, &want));
    let gz = t.path().join("x.tar.gz");
    fs::write(&gz, gzip(&fx.tar())).unwrap();
    let r = import(&store, &gz, "img:gz", &opts()).unwrap();
    assert_eq!((r.format, &r.manifest_digest), (Format::OciArchive, &want));
    let zst = t.path().join("x.tar.zst");
    fs::write(&zst, zstd::encode_all(&fx.tar()[..], 3).unwrap()).unwrap();
    let r = import(&store, &zst, "img", &opts()).unwrap();
    assert_eq!(r.reference, "img:latest");
    let img = store.resolve("img").unwrap();
    assert_eq!(img.manifest_digest, want);
    assert_eq!(img.layers[0].media_type().as_ref(), MT_OCI_LAYER_GZIP);
    assert_eq!(store.list().unwrap().len(), 4);
    assert_eq!(fs::read_dir(store.tmp_dir()).unwrap().count(), 0);
    let info = &store.list().unwrap()[0];
    assert!(
        info.source.starts_with("import oci-dir /"),
        "{}",
        info.source
    );
}

#[test]
fn multi_platform_indexes_pick_the_host_or_the_requested_platform() {
    let (t, store) = setup("imp-multi");
    let mut fx = Fixture::default();
    let mut descs = Vec::new();
    let mut by_arch = BTreeMap::new();
    for arch in ["amd64", "arm64", "arm/v7", "ppc64le"] {
        let d = fx.image(arch, &[layer_tar(&[("arch", arch.as_bytes())])], false);
        by_arch.insert(arch, Fixture::manifest_digest(&d));
        let mut d2 = d.clone();
        let p: Vec<&str> = arch.split('/').collect();
        d2["platform"] = json!({"os": "linux", "architecture": p[0]});
        if p.len() > 1 {
            d2["platform"]["variant"] = json!(p[1]);
        }
        descs.push(d2);
    }
    // nested: index.json -> index blob -> per-platform manifests
    let nested = fx.index_blob(descs);
    fx.add(nested, Some("latest"), None);
    let dir = t.path().join("multi");
    fx.write_dir(&dir);
    if let Some(d) = by_arch.get(host_arch().as_str()) {
        let r = import(&store, &dir, "m:host", &opts()).unwrap();
        assert_eq!(&r.manifest_digest, d);
    }
    let o = ImportOptions {
        platform: Some(Platform::parse("linux/arm/v7").unwrap()),
        ..opts()
    };
    let r = import(&store, &dir, "m:arm", &o).unwrap();
    assert_eq!(
        (&r.manifest_digest, r.platform.as_str()),
        (&by_arch["arm/v7"], "linux/arm/v7")
    );
    let o = ImportOptions {
        platform: Some(Platform::parse("linux/s390x").unwrap()),
        ..opts()
    };
    let e = err(import(&store, &dir, "m:s390x", &o));
    assert!(
        e.contains("no image for linux/s390x (available: linux/amd64, linux/arm/v7, linux/arm64, linux/ppc64le)"),
        "{e}"
    );
}

#[test]
fn platforms_come_from_configs_when_the_index_has_none() {
    let (t, store) = setup("imp-cfgplat");
    let mut fx = Fixture::default();
    let mine = fx.image(&host_arch(), &[layer_tar(&[("a", b"1")])], false);
    let theirs = fx.image(other_arch(), &[layer_tar(&[("a", b"2")])], false);
    let want = Fixture::manifest_digest(&mine);
    fx.add(theirs, None, None);
    fx.add(mine, None, None);
    let dir = t.path().join("l");
    fx.write_dir(&dir);
    assert_eq!(
        import(&store, &dir, "x", &opts()).unwrap().manifest_digest,
        want
    );
    // a single image for another platform is refused unless asked for
    let mut fx = Fixture::default();
    let theirs = fx.image(other_arch(), &[layer_tar(&[("a", b"2")])], false);
    fx.add(theirs, None, None);
    let dir = t.path().join("l2");
    fx.write_dir(&dir);
    let e = err(import(&store, &dir, "y", &opts()));
    assert!(e.contains("pick one with --platform"), "{e}");
    let o = ImportOptions {
        platform: Some(Platform::parse(&format!("linux/{}", other_arch())).unwrap()),
        ..opts()
    };
    import(&store, &dir, "y", &o).unwrap();
}

#[test]
fn several_named_images_need_a_choice() {
    let (t, store) = setup("imp-select");
    let mut fx = Fixture::default();
    let a = fx.image(&host_arch(), &[layer_tar(&[("a", b"a")])], false);
    let b = fx.image(&host_arch(), &[layer_tar(&[("b", b"b")])], false);
    let bd = Fixture::manifest_digest(&b);
    fx.add(a, Some("one"), None);
    fx.add(b, Some("two"), None);
    let dir = t.path().join("l");
    fx.write_dir(&dir);
    let e = err(import(&store, &dir, "x", &opts()));
    assert!(
        e.contains("several images for")
            && e.contains("ref names: one, two")
            && e.contains("--ref"),
        "{e}"
    );
    let o = ImportOptions {
        select: Some("two".into()),
        ..opts()
    };
    assert_eq!(import(&store, &dir, "x", &o).unwrap().manifest_digest, bd);
    let o = ImportOptions {
        select: Some("three".into()),
        ..opts()
    };
    let e = err(import(&store, &dir, "x2", &o));
    assert!(
        e.contains("no image named \"three\" (ref names: one, two)"),
        "{e}"
    );
}

#[test]
fn tampered_or_missing_blobs_fail_without_a_ref() {
    let (t, store) = setup("imp-tamper");
    let mut fx = Fixture::default();
    let desc = fx.image(&host_arch(), &[layer_tar(&[("a", b"good")])], false);
    fx.add(desc, None, None);
    let dir = t.path().join("l");
    fx.write_dir(&dir);
    // swap the layer's content for other bytes of the same size
    let layer = fx
        .blobs
        .iter()
        .find(|(_, b)| b.len() > 1000)
        .map(|(d, _)| d.clone())
        .unwrap();
    let p = dir.join(layout::blob_path(&layer));
    let mut bytes = fs::read(&p).unwrap();
    let i = bytes.iter().position(|&b| b == b'g').unwrap();
    bytes[i] = b'G';
    fs::write(&p, &bytes).unwrap();
    let e = err(import(&store, &dir, "x", &opts()));
    assert!(e.contains("layers[0]: content digest mismatch"), "{e}");
    assert!(
        e.starts_with(&format!(
            "oci-dir {}: index.json: manifests[0]",
            dir.display()
        )),
        "{e}"
    );
    assert_no_refs(&store);
    fs::remove_file(&p).unwrap();
    let e = err(import(&store, &dir, "x", &opts()));
    assert!(e.contains("not in the layout"), "{e}");
    assert_no_refs(&store);
    // a symlinked blob is refused
    std::os::unix::fs::symlink("/etc/passwd", &p).unwrap();
    let e = err(import(&store, &dir, "x", &opts()));
    assert!(e.contains("is a symlink"), "{e}");
    // a lying size in the descriptor
    let mut fx = Fixture::default();
    let mut desc = fx.image(&host_arch(), &[layer_tar(&[("a", b"x")])], false);
    desc["size"] = json!(desc["size"].as_u64().unwrap() + 1);
    fx.add(desc, None, None);
    let dir = t.path().join("l2");
    fx.write_dir(&dir);
    let e = err(import(&store, &dir, "x", &opts()));
    assert!(e.contains("size mismatch"), "{e}");
    assert_no_refs(&store);
}

type RawEntry<'a> = (&'a str, tar::EntryType, &'a [u8], Option<&'a str>);

fn raw_tar(entries: &[RawEntry]) -> Vec<u8> {
    // Names written raw into the header (tar::Builder refuses `..`).
    let mut out = Vec::new();
    for (name, kind, data, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            h.as_old_mut().linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

#[test]
fn hostile_archives_are_refused() {
    let (t, store) = setup("imp-hostile");
    let mut fx = Fixture::default();
    let desc = fx.image(&host_arch(), &[layer_tar(&[("a", b"a")])], false);
    fx.add(desc, None, None);
    let files = fx.files();
    let base: Vec<RawEntry> = files
        .iter()
        .map(|(n, b)| (n.as_str(), tar::EntryType::Regular, b.as_slice(), None))
        .collect();
    let cases: Vec<(Vec<RawEntry>, &str)> = vec![
        (
            vec![("../evil", tar::EntryType::Regular, b"x", None)],
            "entry \"../evil\": path leaves the archive",
        ),
        (
            vec![("/etc/evil", tar::EntryType::Regular, b"x", None)],
            "entry \"/etc/evil\": absolute path",
        ),
        (
            vec![("x", tar::EntryType::Link, b"", Some("../../etc/shadow"))],
            "hard link to \"../../etc/shadow\"",
        ),
        (
            vec![("oci-layout", tar::EntryType::Regular, b"{}", None)],
            "entry \"oci-layout\": appears twice",
        ),
    ];
    for (extra, want) in cases {
        let mut entries = base.clone();
        entries.extend(extra);
        let p = t.path().join("h.tar");
        fs::write(&p, raw_tar(&entries)).unwrap();
        let e = err(import(&store, &p, "x", &opts()));
        assert!(e.contains(want), "{want}: {e}");
    }
    // a blob that is a symlink out of the archive
    let layer = fx
        .blobs
        .keys()
        .find(|d| fx.blobs[*d].len() > 1000)
        .unwrap()
        .clone();
    let lp = layout::blob_path(&layer);
    let mut entries: Vec<_> = base.iter().filter(|e| e.0 != lp).cloned().collect();
    entries.push((
        lp.as_str(),
        tar::EntryType::Symlink,
        b"",
        Some("../../../etc/passwd"),
    ));
    let p = t.path().join("h.tar");
    fs::write(&p, raw_tar(&entries)).unwrap();
    let e = err(import(&store, &p, "x", &opts()));
    assert!(
        e.contains("symlink to \"../../../etc/passwd\": path leaves the archive"),
        "{e}"
    );
    // an index.json over the JSON size limit
    let big = vec![b' '; MAX_JSON_SIZE as usize + 10];
    let mut entries: Vec<_> = base
        .iter()
        .filter(|e| e.0 != "index.json")
        .cloned()
        .collect();
    entries.push(("index.json", tar::EntryType::Regular, &big, None));
    fs::write(&p, raw_tar(&entries)).unwrap();
    let e = err(import(&store, &p, "x", &opts()));
    assert!(e.contains("index.json") && e.contains("limit"), "{e}");
    // a header claiming more data than the file has
    let mut bytes = raw_tar(&base);
    let cut = bytes.len() - 1024 - 600;
    bytes.truncate(cut);
    fs::write(&p, &bytes).unwrap();
    let e = err(import(&store, &p, "x", &opts()));
    assert!(e.contains("tar") || e.contains("past the end"), "{e}");
    assert_no_refs(&store);
    // nothing was written outside the store
    assert!(!t.path().join("evil").exists());
}

/// A `docker save`-style archive: legacy `<id>/layer.tar` layers (one gzip'd,
/// one a symlink to another) and a `<hex>.json` config.
fn docker_archive(arch: &str, layers_json: Option<Value>) -> (Vec<u8>, Vec<Digest>) {
    let l1 = layer_tar(&[("etc/one", b"1")]);
    let l2 = layer_tar(&[("etc/two", b"2")]);
    let diff = vec![
        Digest::of_bytes(&l1),
        Digest::of_bytes(&l2),
        Digest::of_bytes(&l1),
    ];
    let cfg = serde_json::to_vec(&json!({"architecture": arch, "os": "linux",
        "container_config": {"Hostname": "x"}, "docker_version": "24.0.0",
        "rootfs": {"type": "layers", "diff_ids": diff.iter().map(|d| d.to_string()).collect::<Vec<_>>()}}))
    .unwrap();
    let cname = format!("{}.json", Digest::of_bytes(&cfg).hex());
    let layers = layers_json.unwrap_or(json!(["aaa/layer.tar", "bbb/layer.tar", "ccc/layer.tar"]));
    let manifest =
        serde_json::to_vec(&json!([{"Config": cname, "RepoTags": ["app:1"], "Layers": layers}]))
            .unwrap();
    let l2gz = gzip(&l2);
    let entries = vec![
        (
            "aaa/layer.tar",
            tar::EntryType::Regular,
            l1.as_slice(),
            None,
        ),
        (
            "bbb/layer.tar",
            tar::EntryType::Regular,
            l2gz.as_slice(),
            None,
        ),
        (
            "ccc/layer.tar",
            tar::EntryType::Symlink,
            &b""[..],
            Some("../aaa/layer.tar"),
        ),
        (
            cname.as_str(),
            tar::EntryType::Regular,
            cfg.as_slice(),
            None,
        ),
        (
            "manifest.json",
            tar::EntryType::Regular,
            manifest.as_slice(),
            None,
        ),
        ("repositories", tar::EntryType::Regular, b"{}", None),
    ];
    (raw_tar(&entries), diff)
}

#[test]
fn docker_archives_become_oci_manifests() {
    let (t, store) = setup("imp-docker");
    let (bytes, diff) = docker_archive(&Platform::host().architecture, None);
    let p = t.path().join("d.tar");
    fs::write(&p, &bytes).unwrap();
    let r = import(&store, &p, "app:1", &opts()).unwrap();
    assert_eq!((r.format, r.layers), (Format::DockerArchive, 3));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let img = store.resolve("app:1").unwrap();
    let mts: Vec<&str> = img.layers.iter().map(|l| l.media_type().as_ref()).collect();
    assert_eq!(mts, [MT_OCI_LAYER, MT_OCI_LAYER_GZIP, MT_OCI_LAYER]);
    assert_eq!(layout::descriptor_digest(&img.layers[0]).unwrap(), diff[0]);
    assert_eq!(img.layers[0].digest(), img.layers[2].digest());
    assert_eq!(img.manifest.config().media_type().as_ref(), MT_OCI_CONFIG);
    assert_eq!(img.config.rootfs().diff_ids().len(), 3);
    // the same archive gzip'd, selected by RepoTag: same manifest
    let gz = t.path().join("d.tar.gz");
    fs::write(&gz, gzip(&bytes)).unwrap();
    let o = ImportOptions {
        select: Some("app:1".into()),
        ..opts()
    };
    assert_eq!(
        import(&store, &gz, "app:2", &o).unwrap().manifest_digest,
        r.manifest_digest
    );
    let o = ImportOptions {
        select: Some("app:9".into()),
        ..opts()
    };
    assert!(err(import(&store, &gz, "app:3", &o))
        .contains("no image tagged \"app:9\" (RepoTags: app:1)"));
}

#[test]
fn hostile_docker_archives_are_refused() {
    let (t, store) = setup("imp-docker-bad");
    let p = t.path().join("x.tar");
    let host = Platform::host().architecture;
    for (layers, want) in [
        (
            json!(["aaa/layer.tar", "../../etc/passwd"]),
            format!("docker-archive {}: manifest.json: Layers[1]: \"../../etc/passwd\": path leaves the archive", p.display()),
        ),
        (json!(["/etc/passwd"]), "Layers[0]: \"/etc/passwd\": absolute path".to_owned()),
        (json!(["aaa"]), "Layers[0]: \"aaa\": is a directory".to_owned()),
        (json!(["nope/layer.tar"]), "Layers[0]: \"nope/layer.tar\": not in the archive".to_owned()),
    ] {
        let (mut bytes, _) = docker_archive(&host, Some(layers));
        // give "aaa" a directory entry
        let mut h = tar::Header::new_gnu();
        h.set_path("aaa/").unwrap();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        h.set_cksum();
        let mut with_dir = h.as_bytes().to_vec();
        with_dir.append(&mut bytes);
        fs::write(&p, &with_dir).unwrap();
        let e = err(import(&store, &p, "x", &opts()));
        assert!(e.contains(&want), "{want}\n{e}");
    }
    // wrong platform
    let (bytes, _) = docker_archive(other_arch(), None);
    fs::write(&p, &bytes).unwrap();
    let e = err(import(&store, &p, "x", &opts()));
    assert!(
        e.contains(&format!("the image is for linux/{}", other_arch())) && e.contains("--platform"),
        "{e}"
    );
    // a config whose content does not match its <hex>.json name
    let cfg = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let name = format!("{}.json", Digest::of_bytes(b"something else").hex());
    let manifest = serde_json::to_vec(&json!([{"Config": name, "Layers": []}])).unwrap();
    let tarb = raw_tar(&[
        (name.as_str(), tar::EntryType::Regular, &cfg[..], None),
        ("manifest.json", tar::EntryType::Regular, &manifest, None),
    ]);
    fs::write(&p, tarb).unwrap();
    let e = err(import(&store, &p, "x", &opts()));
    assert!(
        e.contains("Config") && e.contains("content digest mismatch"),
        "{e}"
    );
    assert_no_refs(&store);
}

#[test]
fn rootfs_tarballs_give_one_uncompressed_layer() {
    let (t, store) = setup("imp-rootfs-tar");
    let tarb = layer_tar(&[("bin/sh", b"#!"), ("etc/os-release", b"ID=test")]);
    let layer = Digest::of_bytes(&tarb);
    let mut digests = BTreeSet::new();
    for (name, bytes) in [
        ("r.tar", tarb.clone()),
        ("r.tar.gz", gzip(&tarb)),
        ("r.tar.zst", zstd::encode_all(&tarb[..], 3).unwrap()),
    ] {
        let p = t.path().join(name);
        fs::write(&p, bytes).unwrap();
        let r = import(&store, &p, name.replace('.', "-").as_str(), &opts()).unwrap();
        assert_eq!(r.format, Format::RootfsTar);
        digests.insert(r.manifest_digest);
    }
    assert_eq!(digests.len(), 1, "same content, same image");
    let img = store.resolve("r-tar").unwrap();
    assert_eq!(layout::descriptor_digest(&img.layers[0]).unwrap(), layer);
    assert_eq!(img.layers[0].media_type().as_ref(), MT_OCI_LAYER);
    assert_eq!(img.config.rootfs().diff_ids(), &vec![layer.to_string()]);
    assert_eq!(Platform::from(&img.config), Platform::host());
    let env = img.config.config().as_ref().unwrap().env().clone().unwrap();
    assert_eq!(env, [DEFAULT_PATH]);
    // not tar, xz, empty
    let p = t.path().join("junk");
    fs::write(&p, vec![b'x'; 2048]).unwrap();
    assert!(err(import(&store, &p, "j", &opts())).contains("not a tar archive"));
    fs::write(&p, b"\xfd7zXZ\0rest").unwrap();
    assert!(err(import(&store, &p, "j", &opts())).contains("xz-compressed input is not supported"));
    fs::write(&p, b"").unwrap();
    assert!(err(import(&store, &p, "j", &opts())).contains("no entries"));
    // a bad target name
    assert!(matches!(
        import(&store, &p, "Bad Name", &opts()),
        Err(ImportError::Name(_))
    ));
    assert!(matches!(
        import(&store, &p, &format!("a@{layer}"), &opts()),
        Err(ImportError::Name(_))
    ));
}

#[test]
fn rootfs_directories_are_tarred_deterministically() {
    use std::os::unix::fs::PermissionsExt;
    let (t, store) = setup("imp-rootfs-dir");
    let root = t.path().join("rootfs");
    fs::create_dir_all(root.join("usr/bin")).unwrap();
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::write(root.join("usr/bin/tool"), b"#!/bin/sh\n").unwrap();
    fs::set_permissions(
        root.join("usr/bin/tool"),
        fs::Permissions::from_mode(0o4755),
    )
    .unwrap();
    fs::write(root.join("etc/b"), b"b").unwrap();
    fs::write(root.join("etc/a"), b"a").unwrap();
    fs::hard_link(root.join("etc/a"), root.join("etc/a-link")).unwrap();
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    let long = "n".repeat(150);
    fs::write(root.join(&long), b"long").unwrap();
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let r1 = import(&store, &root, "fs:1", &opts()).unwrap();
    let r2 = import(&store, &root, "fs:2", &opts()).unwrap();
    assert_eq!(r1.format, Format::RootfsDir);
    assert_eq!(r1.manifest_digest, r2.manifest_digest, "deterministic");
    let img = store.resolve("fs:1").unwrap();
    let ld = layout::descriptor_digest(&img.layers[0]).unwrap();
    let mut ar = tar::Archive::new(store.open_blob(&ld).unwrap());
    let mut seen = Vec::new();
    let root_euid = nix::unistd::geteuid().is_root();
    for e in ar.entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        if root_euid {
            assert_eq!(
                h.uid().unwrap(),
                fs::symlink_metadata(root.join(&name)).unwrap().uid() as u64
            );
        } else {
            assert_eq!(
                (h.uid().unwrap(), h.gid().unwrap()),
                (0, 0),
                "rootless: owned by root"
            );
        }
        let kind = match h.entry_type() {
            tar::EntryType::Directory => "dir",
            tar::EntryType::Symlink => "symlink",
            tar::EntryType::Link => "hardlink",
            tar::EntryType::Fifo => "fifo",
            tar::EntryType::Regular => "file",
            _ => "other",
        };
        if name == "usr/bin/tool" {
            assert_eq!(h.mode().unwrap(), 0o4755);
            assert_eq!(
                h.mtime().unwrap() as i64,
                fs::metadata(root.join("usr/bin/tool")).unwrap().mtime()
            );
        }
        seen.push(format!("{kind} {name}"));
    }
    assert_eq!(
        seen,
        [
            "symlink bin",
            "dir etc/",
            "file etc/a",
            "hardlink etc/a-link",
            "file etc/b",
            "fifo fifo",
            &format!("file {long}"),
            "dir usr/",
            "dir usr/bin/",
            "file usr/bin/tool"
        ]
    );
    // a store inside the imported tree is skipped
    let inner = Store::open(root.join("store")).unwrap();
    let r = import(&inner, &root, "fs:3", &opts()).unwrap();
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("the image store itself")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn format_names_and_forced_formats() {
    for f in [
        Format::OciDir,
        Format::OciArchive,
        Format::DockerArchive,
        Format::RootfsTar,
        Format::RootfsDir,
    ] {
        assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
    }
    assert!("zip".parse::<Format>().is_err());
    let (t, store) = setup("imp-forced");
    let o = ImportOptions {
        format: Some(Format::OciArchive),
        ..opts()
    };
    let e = err(import(&store, t.path(), "x", &o));
    assert!(e.contains("is a directory, not a oci-archive"), "{e}");
    // forcing rootfs-tar on an oci-archive imports it as one layer
    let mut fx = Fixture::default();
    let d = fx.image(&host_arch(), &[layer_tar(&[("a", b"a")])], false);
    fx.add(d, None, None);
    let p = t.path().join("o.tar");
    fs::write(&p, fx.tar()).unwrap();
    let o = ImportOptions {
        format: Some(Format::RootfsTar),
        ..opts()
    };
    assert_eq!(
        import(&store, &p, "x", &o).unwrap().format,
        Format::RootfsTar
    );
}

#[test]
fn member_names_normalize() {
    assert_eq!(normalize_member("./a//b/./c").unwrap(), "a/b/c");
    assert_eq!(normalize_member("a/../b"), Err("path leaves the archive"));
    assert_eq!(normalize_member("/a"), Err("absolute path"));
    assert_eq!(resolve_relative("x/y", "../z").unwrap(), "x/z");
    assert_eq!(
        resolve_relative("x", "../../z"),
        Err("path leaves the archive")
    );
    assert_eq!(resolve_relative("", "a/../b").unwrap(), "b");
    assert_eq!(docker_short_tag("docker.io/library/a:1"), "a:1");
    assert_eq!(docker_short_tag("docker.io/u/a"), "u/a:latest");
    assert_eq!(docker_short_tag("reg:5000/a"), "reg:5000/a:latest");
}
