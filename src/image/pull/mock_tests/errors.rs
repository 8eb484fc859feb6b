//! Registry errors, pinned digests, redirects and TLS.

use super::*;

#[test]
fn registry_errors_are_one_line() {
    let img = Image::new(13, "amd64", OCI_MANIFEST);
    let mut content = Content::with_image("1", &img, OCI_MANIFEST);
    // A layer served with the wrong bytes.
    let bad_layer = Digest::of_bytes(&img.layers[1]).to_string();
    content.blobs.insert(bad_layer.clone(), noise(1000, 999));
    let reg = Mock::start(move |req, s| {
        if req.path.ends_with("/manifests/lying") {
            return respond(
                s,
                "200 OK",
                &[
                    ("Content-Type", OCI_MANIFEST.into()),
                    (
                        "Docker-Content-Digest",
                        Digest::of_bytes(b"other").to_string(),
                    ),
                ],
                &content.manifests["1"].1,
            );
        }
        if req.path.ends_with("/manifests/huge") {
            let mut big = br#"{"schemaVersion":2,"x":""#.to_vec();
            big.resize(5 << 20, b'a');
            return respond(s, "200 OK", &[], &big);
        }
        if req.path.ends_with("/manifests/noblob") {
            let m = String::from_utf8(content.manifests["1"].1.clone())
                .unwrap()
                .replace(
                    &Digest::of_bytes(&img.layers[0]).to_string(),
                    &Digest::of_bytes(b"gone").to_string(),
                );
            return respond(
                s,
                "200 OK",
                &[("Content-Type", OCI_MANIFEST.into())],
                m.as_bytes(),
            );
        }
        content.serve(req, s);
    });
    let h = reg.host();

    let e = pull_with(
        &format!("{h}/test/img:huge"),
        &DirSink::new("ehuge", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pull {h}/test/img:huge: manifest: larger than 4 MiB")
    );

    let sink = DirSink::new("enoblob", false);
    let e = pull_with(&format!("{h}/test/img:noblob"), &sink, &insecure(), fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "pull {h}/test/img:noblob: layer {}: 404 Not Found (BLOB_UNKNOWN: blob unknown)",
            Digest::of_bytes(b"gone")
        )
    );
    assert_eq!(sink.count(), 1, "only the config was stored");

    let e = pull_with(
        &format!("{h}/test/img:nope"),
        &DirSink::new("e404", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "pull {h}/test/img:nope: manifest: 404 Not Found (MANIFEST_UNKNOWN: manifest unknown)"
        )
    );

    let sink = DirSink::new("ebad", false);
    let e = pull_with(&format!("{h}/test/img:1"), &sink, &insecure(), fast()).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Digest(_)), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "pull {h}/test/img:1: layer {bad_layer}: content digest mismatch"
        )),
        "{e}"
    );
    assert!(
        !sink.has_blob(&Digest::parse(&bad_layer).unwrap()),
        "bad blob not stored"
    );
    assert!(!e.to_string().contains('\n'));

    let e = pull_with(
        &format!("{h}/test/img:lying"),
        &DirSink::new("elie", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Digest(_)), "{e}");

    let wrong = format!("{h}/test/img@{}", Digest::of_bytes(b"x"));
    let e = pull_with(&wrong, &DirSink::new("edig", false), &insecure(), fast()).unwrap_err();
    assert_eq!(e.status(), Some(404));
}

#[test]
fn digest_pinned_manifest_is_verified() {
    let img = Image::new(14, "amd64", OCI_MANIFEST);
    let other = Image::new(15, "amd64", OCI_MANIFEST);
    let pinned = img.digest();
    let mut content = Content::with_image("1", &img, OCI_MANIFEST);
    // The registry answers the pinned digest with other bytes (and no header).
    let other_bytes = other.manifest.clone();
    content.manifests.clear();
    let reg = Mock::start(move |req, s| {
        if req.path.contains("/manifests/") {
            return respond(
                s,
                "200 OK",
                &[("Content-Type", OCI_MANIFEST.into())],
                &other_bytes,
            );
        }
        content.serve(req, s);
    });
    let e = pull_with(
        &format!("{}/test/img@{pinned}", reg.host()),
        &DirSink::new("pin", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Digest(_)), "{e}");
}

#[test]
fn redirect_to_plain_http_elsewhere_is_refused() {
    // Under --insecure, a loopback registry redirecting to http on another
    // (non-loopback) host is refused before connecting.
    let reg = Mock::start(|req, s| {
        if req.path.contains("/manifests/") {
            respond(
                s,
                "302 Found",
                &[("Location", "http://storage.invalid/m".into())],
                b"",
            );
        }
    });
    let e = pull_with(
        &format!("{}/test/img:1", reg.host()),
        &DirSink::new("redir", false),
        &insecure(),
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Insecure(_)), "{e}");
    assert!(
        e.to_string()
            .contains("refusing plain http to storage.invalid"),
        "{e}"
    );
}

#[test]
fn https_is_the_default_even_on_loopback() {
    // Without --insecure a loopback registry is spoken to over TLS: this
    // plain-http server fails the handshake, and nothing is pulled.
    let raw = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = raw.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut c in raw.incoming().take(1).flatten() {
            let mut buf = [0u8; 512];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
        }
    });
    let opts = PullOptions {
        retries: 0,
        ..PullOptions::default()
    };
    let r = format!("127.0.0.1:{port}/test/img:1");
    let e = pull_with(&r, &DirSink::new("tls", false), &opts, fast()).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Transport(_)), "{e}");
    assert!(
        e.to_string().starts_with(&format!("pull {r}: manifest: ")),
        "{e}"
    );
    assert!(!e.to_string().contains('\n'), "{e}");
}

#[test]
fn untrusted_certificates_are_refused_and_not_retried() {
    let Some(openssl) = ["/usr/bin/openssl", "/usr/local/bin/openssl"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
    else {
        crate::testing::missing("openssl (to make a test certificate)");
        return;
    };
    use ureq::rustls;
    let dir = temp_dir("tls");
    let run = |args: &[&str]| {
        let st = std::process::Command::new(openssl)
            .args(args)
            .current_dir(&dir)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "openssl {args:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "key.pem",
        "-outform",
        "DER",
        "-out",
        "cert.der",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
    ]);
    run(&[
        "pkcs8", "-topk8", "-nocrypt", "-in", "key.pem", "-outform", "DER", "-out", "key.der",
    ]);
    let cert = rustls::pki_types::CertificateDer::from(fs::read(dir.join("cert.der")).unwrap());
    let key =
        rustls::pki_types::PrivateKeyDer::Pkcs8(fs::read(dir.join("key.der")).unwrap().into());
    let _ = fs::remove_dir_all(&dir);
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap(),
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let conns = Arc::new(AtomicUsize::new(0));
    let conns2 = conns.clone();
    thread::spawn(move || {
        for c in l.incoming().take(10).flatten() {
            conns2.fetch_add(1, Ordering::SeqCst);
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, c);
            let mut buf = [0u8; 64];
            let _ = tls.read(&mut buf);
        }
    });
    let opts = PullOptions {
        retries: 3,
        ..PullOptions::default()
    };
    let e = pull_with(
        &format!("127.0.0.1:{port}/test/img:1"),
        &DirSink::new("tls-cert", false),
        &opts,
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Transport(_)), "{e}");
    assert!(e.to_string().contains("certificate"), "{e}");
    assert_eq!(
        conns.load(Ordering::SeqCst),
        1,
        "a certificate failure is not retried: {e}"
    );
}
