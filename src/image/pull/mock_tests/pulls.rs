//! Plain pulls, schema 2, indexes and authentication.

use super::*;

// -------------------------------------------------------------------- tests

#[test]
fn plain_pull_then_everything_skipped_then_by_digest() {
    let img = Image::new(1, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let reg = Mock::start(move |req, s| {
        assert!(content.serve(req, s), "unexpected {}", req.path);
    });
    let sink = DirSink::new("plain", false);
    let r = format!("{}/test/img:1", reg.host());
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(p.manifest_media_type, OCI_MANIFEST);
    assert_eq!(p.index_digest, None);
    assert_eq!(p.blobs_skipped, 0);
    assert_eq!(p.bytes_downloaded, total(&img) + img.manifest.len() as u64);
    assert_eq!(p.reference.tag.as_deref(), Some("1"));
    assert_eq!(sink.count(), 3);
    let accept = reg.requests("/manifests/")[0]
        .header("accept")
        .unwrap()
        .to_owned();
    for mt in [
        OCI_MANIFEST,
        OCI_INDEX,
        DOCKER_MANIFEST,
        DOCKER_MANIFEST_LIST,
    ] {
        assert!(accept.contains(mt), "{accept}");
    }
    assert!(reg
        .requests("/blobs/")
        .iter()
        .all(|r| r.header("authorization").is_none()));

    let again = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    assert_eq!(again.blobs_skipped, 3);
    assert_eq!(again.bytes_downloaded, img.manifest.len() as u64);
    assert_eq!(reg.requests("/blobs/").len(), 3, "no blob fetched twice");

    let by_digest = format!("{}/test/img@{}", reg.host(), img.digest());
    let p = pull_with(&by_digest, &sink, &insecure(), fast()).unwrap();
    assert_eq!(p.manifest_digest, img.digest());
    assert!(reg.requests(&format!("/manifests/{}", img.digest())).len() == 1);
}

#[test]
fn docker_schema2_is_accepted_as_is() {
    let img = Image::new(2, "amd64", DOCKER_MANIFEST);
    let content = Content::with_image("d", &img, DOCKER_MANIFEST);
    let reg = Mock::start(move |req, s| {
        content.serve(req, s);
    });
    let sink = DirSink::new("docker", false);
    let p = pull_with(
        &format!("{}/test/img:d", reg.host()),
        &sink,
        &insecure(),
        fast(),
    )
    .unwrap();
    assert_eq!(p.manifest_media_type, DOCKER_MANIFEST);
    check_pulled(&p, &img, &sink);
}

#[test]
fn index_picks_the_host_platform_or_the_asked_one() {
    let amd = Image::new(3, "amd64", OCI_MANIFEST);
    let arm = Image::new(4, "arm64", OCI_MANIFEST);
    let index = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[
        {{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":{},"platform":{{"architecture":"amd64","os":"linux"}}}},
        {{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":{},"platform":{{"architecture":"arm64","os":"linux","variant":"v8"}}}}]}}"#,
        amd.digest(),
        amd.manifest.len(),
        arm.digest(),
        arm.manifest.len()
    );
    let mut content = Content::default();
    content.add_manifest("multi", OCI_INDEX, index.as_bytes());
    content.add_manifest("amd", OCI_MANIFEST, &amd.manifest);
    content.add_manifest("arm", OCI_MANIFEST, &arm.manifest);
    content.blobs.extend(amd.blobs());
    content.blobs.extend(arm.blobs());
    let reg = Mock::start(move |req, s| {
        content.serve(req, s);
    });
    let r = format!("{}/test/img:multi", reg.host());

    let sink = DirSink::new("index", false);
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    let host = if host_arch() == "arm64" { &arm } else { &amd };
    if ["amd64", "arm64"].contains(&host_arch()) {
        check_pulled(&p, host, &sink);
    }
    assert_eq!(p.index_digest, Some(Digest::of_bytes(index.as_bytes())));

    let sink = DirSink::new("index-arm", false);
    let opts = PullOptions {
        platform: Some(("linux".into(), "arm64".into(), None)),
        ..insecure()
    };
    let p = pull_with(&r, &sink, &opts, fast()).unwrap();
    check_pulled(&p, &arm, &sink);

    let opts = PullOptions {
        platform: Some(("linux".into(), "s390x".into(), None)),
        ..insecure()
    };
    let e = pull_with(&r, &sink, &opts, fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pull {r}: manifest: no manifest for platform linux/s390x (available: linux/amd64, linux/arm64/v8)")
    );
}

#[test]
fn bearer_token_with_credentials_cached_and_not_leaked_on_redirect() {
    let img = Image::new(5, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let blobs = img.blobs();
    // Storage on another origin: must never see the registry's token.
    let storage = Mock::start(move |req, s| {
        assert!(
            req.header("authorization").is_none(),
            "token leaked to storage"
        );
        let d = req
            .path
            .trim_start_matches("/store/")
            .split('?')
            .next()
            .unwrap();
        serve_blob(req, s, &blobs[d], true);
    });
    let storage_url = storage.url();
    let token_hits = Arc::new(AtomicUsize::new(0));
    let hits = token_hits.clone();
    let reg_addr = Arc::new(Mutex::new(String::new()));
    let reg_addr2 = reg_addr.clone();
    let reg = Mock::start(move |req, s| {
        if req.path.starts_with("/token?") {
            hits.fetch_add(1, Ordering::SeqCst);
            if req.header("authorization") != Some(&super::auth::basic_header("alice", "s3cret")) {
                respond(s, "401 Unauthorized", &[], br#"{"details":"bad creds"}"#);
                return;
            }
            assert!(req.path.contains("service=mock-registry"), "{}", req.path);
            assert!(
                req.path.contains("scope=repository%3Atest%2Fimg%3Apull"),
                "{}",
                req.path
            );
            respond(s, "200 OK", &[], br#"{"token":"tok-1","expires_in":300}"#);
            return;
        }
        if req.header("authorization") != Some("Bearer tok-1") {
            let realm = format!("http://{}/token", reg_addr2.lock().unwrap());
            respond(
                s,
                "401 Unauthorized",
                &[(
                    "WWW-Authenticate",
                    format!(
                        r#"Bearer realm="{realm}",service="mock-registry",scope="repository:test/img:pull""#
                    ),
                )],
                &error_json("UNAUTHORIZED", "authentication required"),
            );
            return;
        }
        if let Some(d) = req.path.strip_prefix("/v2/test/img/blobs/") {
            respond(
                s,
                "307 Temporary Redirect",
                &[("Location", format!("{storage_url}/store/{d}?sig=x"))],
                b"",
            );
            return;
        }
        content.serve(req, s);
    });
    *reg_addr.lock().unwrap() = reg.host();
    let r = format!("{}/test/img:1", reg.host());

    let sink = DirSink::new("bearer", false);
    let opts = PullOptions {
        credentials: Some(("alice".into(), "s3cret".into())),
        ..insecure()
    };
    let p = pull_with(&r, &sink, &opts, fast()).unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(
        token_hits.load(Ordering::SeqCst),
        1,
        "token cached for the scope"
    );
    assert_eq!(storage.requests("/store/").len(), 3);
    // Once the token is known, blob requests carry it from the start.
    assert!(reg
        .requests("/blobs/")
        .iter()
        .all(|r| r.header("authorization") == Some("Bearer tok-1")));

    // Without credentials the token server refuses: one clear line.
    let sink = DirSink::new("bearer-anon", false);
    let e = pull_with(&r, &sink, &insecure(), fast()).unwrap_err();
    assert_eq!(e.status(), Some(401), "{e}");
    assert_eq!(
        e.to_string(),
        format!("pull {r}: manifest: token: 401 Unauthorized")
    );
    assert_eq!(sink.count(), 0);
}

#[test]
fn expired_token_is_refetched_once() {
    let img = Image::new(6, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let issued = Arc::new(AtomicUsize::new(0));
    let issued2 = issued.clone();
    let reg_addr = Arc::new(Mutex::new(String::new()));
    let reg_addr2 = reg_addr.clone();
    let reg = Mock::start(move |req, s| {
        if req.path.starts_with("/token") {
            let n = issued2.fetch_add(1, Ordering::SeqCst) + 1;
            respond(
                s,
                "200 OK",
                &[],
                format!(r#"{{"access_token":"t{n}"}}"#).as_bytes(),
            );
            return;
        }
        // Token t1 "expires" once the manifest has been served; t2 is good.
        let ok = match req.header("authorization") {
            Some("Bearer t1") => req.path.contains("/manifests/"),
            Some("Bearer t2") => true,
            _ => false,
        };
        if !ok {
            let realm = format!("http://{}/token", reg_addr2.lock().unwrap());
            respond(
                s,
                "401 Unauthorized",
                &[(
                    "WWW-Authenticate",
                    format!(r#"Bearer realm="{realm}",scope="repository:test/img:pull""#),
                )],
                b"",
            );
            return;
        }
        content.serve(req, s);
    });
    *reg_addr.lock().unwrap() = reg.host();
    let sink = DirSink::new("expired", false);
    let p = pull_with(
        &format!("{}/test/img:1", reg.host()),
        &sink,
        &insecure(),
        fast(),
    )
    .unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(issued.load(Ordering::SeqCst), 2);
}

#[test]
fn basic_challenge_uses_the_credentials() {
    let img = Image::new(7, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let reg = Mock::start(move |req, s| {
        if req.header("authorization") != Some(&super::auth::basic_header("bob", "pw")) {
            respond(
                s,
                "401 Unauthorized",
                &[("WWW-Authenticate", r#"Basic realm="reg""#.into())],
                b"",
            );
            return;
        }
        content.serve(req, s);
    });
    let r = format!("{}/test/img:1", reg.host());
    let sink = DirSink::new("basic", false);
    let opts = PullOptions {
        credentials: Some(("bob".into(), "pw".into())),
        ..insecure()
    };
    check_pulled(&pull_with(&r, &sink, &opts, fast()).unwrap(), &img, &sink);
    let e = pull_with(&r, &DirSink::new("basic-anon", false), &insecure(), fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pull {r}: manifest: 401 Unauthorized")
    );
    let wrong = PullOptions {
        credentials: Some(("bob".into(), "nope".into())),
        ..insecure()
    };
    let e = pull_with(&r, &DirSink::new("basic-wrong", false), &wrong, fast()).unwrap_err();
    assert_eq!(e.status(), Some(401));
}
