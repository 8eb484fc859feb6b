//! Tests of recipes, of both kinds and of the layouts they write.

use std::io::Read;
use std::process::Command;

use flate2::read::GzDecoder;

use super::busybox::elf_has_interp;
use super::*;

fn parse(text: &str) -> Result<Recipe, String> {
    parse_recipe(text, Path::new("rootfs/x/recipe.toml")).map_err(|e| e.to_string())
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cbrun-bootstrap-test-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn have_busybox() -> bool {
    if Path::new(DEFAULT_BUSYBOX).exists() {
        true
    } else {
        crate::testing::missing(&format!(
            "{DEFAULT_BUSYBOX} (apt-get install busybox-static)"
        ));
        false
    }
}

#[test]
fn parses_a_busybox_recipe_with_defaults() {
    let r = parse("name = \"busybox\"\ntag = \"latest\"\nkind = \"busybox\"\n").unwrap();
    assert_eq!(r.name, "busybox");
    assert_eq!(r.tag, "latest");
    assert_eq!(
        r.kind,
        RecipeKind::Busybox(BusyboxSpec {
            binary: PathBuf::from("/bin/busybox")
        })
    );
    assert_eq!(r.config.env, vec![DEFAULT_PATH_ENV.to_owned()]);
    assert_eq!(r.config.cmd, Vec::<String>::new());
    assert_eq!(r.source_date_epoch, None);
    assert_eq!(r.architecture, host_oci_arch());
}

#[test]
fn parses_an_mmdebstrap_recipe() {
    let r = parse(
        r#"
name = "debian-dev"
tag = "bookworm"
kind = "mmdebstrap"
suite = "bookworm"
variant = "minbase"
packages = ["python3", "libc6-dev=2.36-9", "git"]
components = ["main", "contrib"]
customize = ["useradd -m -u 1000 user", "echo 'a b' > /x"]
env = ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
workdir = "/app"
user = "1000:1000"
cmd = ["/bin/bash"]
source_date_epoch = 1700000000
"#,
    )
    .unwrap();
    let RecipeKind::Mmdebstrap(spec) = &r.kind else {
        panic!("kind {:?}", r.kind)
    };
    assert_eq!(spec.mirror, DEFAULT_MIRROR);
    assert_eq!(spec.variant, "minbase");
    assert_eq!(spec.components, ["main", "contrib"]);
    assert_eq!(r.config.workdir.as_deref(), Some("/app"));
    assert_eq!(r.config.user.as_deref(), Some("1000:1000"));
    assert_eq!(r.source_date_epoch, Some(1_700_000_000));

    let args = mmdebstrap_args(spec, &BootstrapOptions::default());
    assert_eq!(
        &args[..4],
        [
            "--variant=minbase",
            "--mode=auto",
            "--format=tar",
            "--components=main,contrib"
        ]
    );
    assert!(args.contains(&"--include=python3,libc6-dev=2.36-9,git".to_owned()));
    assert!(args.contains(
        &"--customize-hook=chroot \"$1\" /bin/sh -c 'useradd -m -u 1000 user'".to_owned()
    ));
    assert!(args.contains(
        &"--customize-hook=chroot \"$1\" /bin/sh -c 'echo '\\''a b'\\'' > /x'".to_owned()
    ));
    assert_eq!(&args[args.len() - 3..], ["bookworm", "-", DEFAULT_MIRROR]);
}

#[test]
fn recipe_errors_name_the_file_and_field_on_one_line() {
    let base = "name = \"x\"\ntag = \"t\"\nkind = \"mmdebstrap\"\nsuite = \"bookworm\"\n";
    let cases = [
        (
            format!("{base}packages = \"python3\"\n"),
            "field packages: expected an array of strings, got string",
        ),
        (
            format!("{base}packages = [\"ok\", 3]\n"),
            "field packages: item 1: expected a string, got integer",
        ),
        (
            format!("{base}packages = [\"a,b\"]\n"),
            "field packages: item 0: \"a,b\": expected a Debian package name",
        ),
        (
            format!("{base}variant = \"huge\"\n"),
            "field variant: \"huge\": expected one of",
        ),
        (format!("{base}mirror = \"ftp://x\"\n"), "field mirror:"),
        (
            format!("{base}components = []\n"),
            "field components: empty",
        ),
        (
            format!("{base}busybox = \"/bin/busybox\"\n"),
            "field busybox: not used by kind \"mmdebstrap\"",
        ),
        (
            format!("{base}env = [\"NOEQUALS\"]\n"),
            "field env: item 0: \"NOEQUALS\": expected KEY=VALUE",
        ),
        (
            format!("{base}workdir = \"app\"\n"),
            "field workdir: expected an absolute path",
        ),
        (
            format!("{base}source_date_epoch = -1\n"),
            "field source_date_epoch: expected seconds >= 0",
        ),
        (
            format!("{base}packagse = []\n"),
            "field packagse: unknown field",
        ),
        (
            format!("{base}architecture = \"vax\"\n"),
            "field architecture: \"vax\"",
        ),
        (
            "name = \"x\"\ntag = \"t\"\nkind = \"mmdebstrap\"\n".to_owned(),
            "field suite: missing",
        ),
        (
            "name = \"x\"\ntag = \"t\"\nkind = \"docker\"\n".to_owned(),
            "field kind: \"docker\": expected",
        ),
        (
            "tag = \"t\"\nkind = \"busybox\"\n".to_owned(),
            "field name: missing",
        ),
        (
            "name = \"X Y\"\ntag = \"t\"\nkind = \"busybox\"\n".to_owned(),
            "field name: path component \"X Y\"",
        ),
        (
            "name = \"x\"\ntag = \"-t\"\nkind = \"busybox\"\n".to_owned(),
            "field tag: tag \"-t\": must be",
        ),
        (
            "name = \"x\"\ntag = \"t\"\nkind = \"busybox\"\npackages = []\n".to_owned(),
            "field packages: not used by kind \"busybox\"",
        ),
        (
            "name = \"x\"\ntag = \"t\"\nkind = \"busybox\"\nbusybox = \"busybox\"\n".to_owned(),
            "field busybox: expected an absolute path",
        ),
        ("name = \"x\"\ntag = \n".to_owned(), "line 2:"),
    ];
    for (text, want) in cases {
        let err = parse(&text).expect_err(&text);
        assert!(
            err.starts_with("rootfs/x/recipe.toml: "),
            "{err:?} for {text:?}"
        );
        assert!(err.contains(want), "{err:?} does not contain {want:?}");
        assert!(!err.contains('\n'), "{err:?} is not one line");
    }
    let err = load_recipe(Path::new("/nonexistent/recipe.toml")).unwrap_err();
    assert!(err
        .to_string()
        .starts_with("/nonexistent/recipe.toml: cannot read"));
}

#[test]
fn shipped_recipes_parse() {
    let root = repo_root().join("rootfs");
    let bb = load_recipe(&root.join("busybox")).unwrap();
    assert!(matches!(bb.kind, RecipeKind::Busybox(_)));
    let dev = load_recipe(&root.join("debian-bookworm-dev/recipe.toml")).unwrap();
    let RecipeKind::Mmdebstrap(spec) = &dev.kind else {
        panic!("{:?}", dev.kind)
    };
    assert_eq!(spec.suite, "bookworm");
    // rootfs/base-images.toml maps the published cases' base image to it.
    assert_eq!(
        format!("{}:{}", dev.name, dev.tag),
        "debian-bookworm-dev:latest"
    );
    for p in [
        "python3",
        "python3-pytest",
        "build-essential",
        "git",
        "nodejs",
        "npm",
    ] {
        assert!(spec.packages.iter().any(|q| q == p), "{p}");
    }
}

#[test]
fn missing_mmdebstrap_says_how_to_install_it() {
    let r =
        parse("name = \"x\"\ntag = \"t\"\nkind = \"mmdebstrap\"\nsuite = \"bookworm\"\n").unwrap();
    let dir = tmpdir("nommdebstrap");
    let opts = BootstrapOptions {
        mmdebstrap: PathBuf::from("/nonexistent/mmdebstrap"),
        ..BootstrapOptions::default()
    };
    let err = bootstrap(&r, &dir.join("out"), &opts).unwrap_err();
    assert!(
        err.to_string().contains("apt-get install mmdebstrap"),
        "{err}"
    );
    assert!(!dir.join("out").exists());
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        0,
        "staging left behind"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_must_be_new_or_empty() {
    let r = parse("name = \"x\"\ntag = \"t\"\nkind = \"busybox\"\n").unwrap();
    let dir = tmpdir("nonempty");
    fs::write(dir.join("file"), b"x").unwrap();
    let err = bootstrap(&r, &dir, &BootstrapOptions::default()).unwrap_err();
    assert!(err.to_string().contains("exists and is not empty"), "{err}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rfc3339_dates() {
    assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339_utc(1_700_000_000), "2023-11-14T22:13:20Z");
    assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
}

#[test]
fn elf_interp_detection() {
    if Path::new("/bin/sh").exists() {
        let sh = fs::read(fs::canonicalize("/bin/sh").unwrap()).unwrap();
        if sh.starts_with(b"\x7fELF") {
            assert!(
                elf_has_interp(&sh),
                "/bin/sh is dynamically linked on Debian"
            );
        }
    }
    if have_busybox() {
        assert!(!elf_has_interp(&fs::read(DEFAULT_BUSYBOX).unwrap()));
    }
}

/// What a verified layout holds.
struct Layout {
    manifest_digest: Digest,
    layer_digest: Digest,
    config: serde_json::Value,
    tar: Vec<u8>,
}

fn read_blob(dir: &Path, d: &serde_json::Value) -> (Digest, Vec<u8>) {
    let digest = Digest::parse(d["digest"].as_str().unwrap()).unwrap();
    let data = fs::read(dir.join("blobs/sha256").join(digest.hex())).unwrap();
    digest.verify(&Digest::of_bytes(&data)).unwrap();
    assert_eq!(d["size"].as_u64().unwrap(), data.len() as u64);
    (digest, data)
}

/// Checks every digest and size from `index.json` down to the
/// uncompressed layer.
fn verify_layout(dir: &Path, tag: &str) -> Layout {
    let layout: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("oci-layout")).unwrap()).unwrap();
    assert_eq!(layout["imageLayoutVersion"], "1.0.0");
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["schemaVersion"], 2);
    let descs = index["manifests"].as_array().unwrap();
    assert_eq!(descs.len(), 1);
    assert_eq!(descs[0]["mediaType"], MEDIA_TYPE_MANIFEST);
    assert_eq!(descs[0]["annotations"][REF_NAME_ANNOTATION], tag);
    let (manifest_digest, m) = read_blob(dir, &descs[0]);
    let manifest: serde_json::Value = serde_json::from_slice(&m).unwrap();
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["config"]["mediaType"], MEDIA_TYPE_CONFIG);
    let (_, c) = read_blob(dir, &manifest["config"]);
    let config: serde_json::Value = serde_json::from_slice(&c).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], MEDIA_TYPE_LAYER_GZIP);
    let (layer_digest, gz) = read_blob(dir, &layers[0]);
    let mut tar = Vec::new();
    GzDecoder::new(gz.as_slice()).read_to_end(&mut tar).unwrap();
    let diff_ids = config["rootfs"]["diff_ids"].as_array().unwrap();
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(diff_ids.len(), 1);
    assert_eq!(
        diff_ids[0].as_str().unwrap(),
        Digest::of_bytes(&tar).to_string()
    );
    // Nothing but what the descriptors name.
    let mut blobs: Vec<String> = fs::read_dir(dir.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    blobs.sort();
    let mut want = vec![
        manifest_digest.hex().to_owned(),
        layer_digest.hex().to_owned(),
        Digest::of_bytes(&c).hex().to_owned(),
    ];
    want.sort();
    assert_eq!(blobs, want);
    Layout {
        manifest_digest,
        layer_digest,
        config,
        tar,
    }
}

#[test]
fn busybox_layout_verifies_and_is_deterministic() {
    if !have_busybox() {
        return;
    }
    let recipe = load_recipe(&repo_root().join("rootfs/busybox")).unwrap();
    let dir = tmpdir("busybox");
    let opts = BootstrapOptions {
        source_date_epoch: Some(1_700_000_000),
        ..BootstrapOptions::default()
    };
    let a = bootstrap(&recipe, &dir.join("a"), &opts).unwrap();
    let b = bootstrap(&recipe, &dir.join("b"), &opts).unwrap();
    eprintln!("busybox image built in {:.3} s", a.seconds);
    assert!(a.seconds < 30.0, "took {} s", a.seconds);
    assert_eq!(a.manifest_digest, b.manifest_digest);
    assert_eq!(a.layer_digest, b.layer_digest);
    assert_eq!(a.diff_id, b.diff_id);

    let la = verify_layout(&dir.join("a"), &recipe.tag);
    assert_eq!(la.manifest_digest, a.manifest_digest);
    assert_eq!(la.layer_digest, a.layer_digest);
    assert_eq!(la.tar.len() as u64, a.uncompressed_bytes);
    assert_eq!(la.config["architecture"], host_oci_arch());
    assert_eq!(la.config["os"], "linux");
    assert_eq!(la.config["created"], "2023-11-14T22:13:20Z");
    assert!(la.config["config"]["Env"][0]
        .as_str()
        .unwrap()
        .starts_with("PATH="));
    assert_eq!(la.config["config"]["Cmd"][0], "/bin/sh");

    // Another epoch gives another layer, same tree.
    let c = bootstrap(
        &recipe,
        &dir.join("c"),
        &BootstrapOptions {
            source_date_epoch: Some(1),
            ..BootstrapOptions::default()
        },
    )
    .unwrap();
    assert_ne!(c.diff_id, a.diff_id);

    // The tar: sorted, owned by root (but /home/user), fixed mtime.
    let mut ar = tar::Archive::new(la.tar.as_slice());
    let mut paths = Vec::new();
    let mut kinds = BTreeMap::new();
    for e in ar.entries().unwrap() {
        let e = e.unwrap();
        let p = e.path().unwrap().to_string_lossy().into_owned();
        let h = e.header();
        assert_eq!(h.mtime().unwrap(), 1_700_000_000, "{p}");
        let owner = if p == "home/user/" { 1000 } else { 0 };
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (owner, owner), "{p}");
        if h.entry_type() == tar::EntryType::Symlink {
            kinds.insert(
                p.clone(),
                e.link_name()
                    .unwrap()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        } else {
            kinds.insert(
                p.clone(),
                format!("{:?} {:o}", h.entry_type(), h.mode().unwrap()),
            );
        }
        paths.push(p);
    }
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    assert_eq!(kinds["bin/busybox"], "Regular 755");
    assert_eq!(kinds["bin/sh"], "busybox");
    assert_eq!(kinds["tmp/"], "Directory 1777");
    for d in ["dev/", "proc/", "sys/", "etc/"] {
        assert_eq!(kinds[d], "Directory 755", "{d}");
    }
    if let Some(t) = kinds.get("usr/bin/env") {
        assert_eq!(t, "../../bin/busybox");
    }
    let mut ar = tar::Archive::new(la.tar.as_slice());
    let passwd = ar
        .entries()
        .unwrap()
        .map(|e| e.unwrap())
        .find(|e| e.path().unwrap().to_str() == Some("etc/passwd"))
        .map(|mut e| {
            let mut s = String::new();
            e.read_to_string(&mut s).unwrap();
            s
        })
        .unwrap();
    assert!(passwd.contains("user:x:1000:1000:"), "{passwd}");

    // Unpacked, the shell runs from the image.
    let root = dir.join("rootfs");
    tar::Archive::new(la.tar.as_slice()).unpack(&root).unwrap();
    let out = Command::new(root.join("bin/sh"))
        .args(["-c", "echo ok"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");

    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shipped_recipes_are_embedded() {
    for (name, text) in super::recipe::SHIPPED {
        let from_tree =
            std::fs::read_to_string(repo_root().join("rootfs").join(name).join("recipe.toml"))
                .unwrap();
        assert_eq!(*text, from_tree, "{name}");
    }
    // From anywhere (an installed binary has no source tree).
    let cwd = std::env::temp_dir();
    let r = super::recipe::shipped(&cwd.join("nonexistent-dir/busybox"));
    assert!(
        r.is_none(),
        "only bare names and rootfs/NAME are shipped names"
    );
    let r = load_recipe(Path::new("rootfs/debian-bookworm-dev/")).unwrap();
    assert_eq!(r.name, "debian-bookworm-dev");
    assert!(super::recipe::shipped(Path::new("busybox")).is_some());
}

#[test]
fn a_trusted_mirror_is_a_local_one_and_becomes_a_sources_line() {
    let base = "name = \"x\"\ntag = \"t\"\nkind = \"mmdebstrap\"\nsuite = \"bookworm\"\n";
    let r = parse(&format!(
        "{base}mirror = \"http://127.0.0.1:8123/debian\"\ntrusted_mirror = true\n"
    ))
    .unwrap();
    let RecipeKind::Mmdebstrap(spec) = &r.kind else {
        panic!("kind {:?}", r.kind)
    };
    let args = mmdebstrap_args(spec, &BootstrapOptions::default());
    assert_eq!(
        args.last().unwrap(),
        "deb [trusted=yes] http://127.0.0.1:8123/debian bookworm main"
    );
    for ok in [
        "file:///srv/repo",
        "http://localhost/d",
        "http://[::1]:80/d",
        "http://127.9.9.9/",
    ] {
        assert!(recipe::is_local_mirror(ok), "{ok}");
    }
    for bad in [
        "http://deb.debian.org/debian",
        "http://127.0.0.1.evil.example/d",
        "http://user@127.0.0.1/",
        "http://10.0.0.1/",
        "ftp://127.0.0.1/",
    ] {
        assert!(!recipe::is_local_mirror(bad), "{bad}");
        let e = parse(&format!(
            "{base}mirror = \"{bad}\"\ntrusted_mirror = true\n"
        ))
        .unwrap_err();
        assert!(
            e.contains("field mirror") || e.contains("field trusted_mirror"),
            "{e}"
        );
    }
    // An override of the mirror that is not local loses the trust.
    let opts = BootstrapOptions {
        mirror: Some("http://deb.debian.org/debian".into()),
        ..BootstrapOptions::default()
    };
    assert_eq!(
        mmdebstrap_args(spec, &opts).last().unwrap(),
        "http://deb.debian.org/debian"
    );
    let e = parse(&format!("{base}trusted_mirror = \"yes\"\n")).unwrap_err();
    assert!(e.contains("expected true or false"), "{e}");
}
