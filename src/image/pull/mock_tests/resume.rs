//! Broken downloads resumed or restarted, partial files, stalls and retries.

use super::*;

/// A registry whose first answer for the big layer breaks off after
/// `cut` bytes; later answers honour Range or not.
fn flaky_registry(img: &Image, ranges: bool, cut: usize) -> (Mock, Arc<AtomicUsize>) {
    let content = Content::with_image("1", img, OCI_MANIFEST);
    let big = img.layers[0].clone();
    let big_path = format!("/v2/test/img/blobs/{}", Digest::of_bytes(&big));
    let first = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicUsize::new(0));
    let calls2 = calls.clone();
    let reg = Mock::start(move |req, s| {
        if req.path == big_path {
            calls2.fetch_add(1, Ordering::SeqCst);
            if first.swap(false, Ordering::SeqCst) {
                respond_truncated(s, &big, cut);
            } else {
                serve_blob(req, s, &big, ranges);
            }
            return;
        }
        content.serve(req, s);
    });
    (reg, calls)
}

#[test]
fn broken_download_resumes_with_range() {
    let img = Image::new(8, "amd64", OCI_MANIFEST);
    let cut = 120_000;
    let (reg, calls) = flaky_registry(&img, true, cut);
    let sink = DirSink::new("resume", false);
    let p = pull_with(
        &format!("{}/test/img:1", reg.host()),
        &sink,
        &insecure(),
        fast(),
    )
    .unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let big = reg.requests(&Digest::of_bytes(&img.layers[0]).to_string());
    assert_eq!(big[0].header("range"), None);
    assert_eq!(
        big[1].header("range"),
        Some(format!("bytes={cut}-").as_str())
    );
    // Nothing downloaded twice.
    assert_eq!(p.bytes_downloaded, total(&img) + img.manifest.len() as u64);
}

#[test]
fn broken_download_restarts_when_range_is_ignored() {
    let img = Image::new(9, "amd64", OCI_MANIFEST);
    let cut = 50_000;
    let (reg, calls) = flaky_registry(&img, false, cut);
    let sink = DirSink::new("restart", false);
    let p = pull_with(
        &format!("{}/test/img:1", reg.host()),
        &sink,
        &insecure(),
        fast(),
    )
    .unwrap();
    check_pulled(&p, &img, &sink);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        p.bytes_downloaded,
        total(&img) + img.manifest.len() as u64 + cut as u64
    );
}

#[test]
fn partial_file_is_resumed_and_removed() {
    let img = Image::new(10, "amd64", OCI_MANIFEST);
    let big = img.layers[0].clone();
    let d = Digest::of_bytes(&big);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let reg = Mock::start(move |req, s| {
        content.serve(req, s);
    });
    let r = format!("{}/test/img:1", reg.host());

    // A previous run left the first 100 000 bytes.
    let sink = DirSink::new("partial", true);
    let part = sink.partial_path(&d).unwrap();
    fs::create_dir_all(part.parent().unwrap()).unwrap();
    fs::write(&part, &big[..100_000]).unwrap();
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    check_pulled(&p, &img, &sink);
    let reqs = reg.requests(&d.to_string());
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("range"), Some("bytes=100000-"));
    assert!(!part.exists(), "partial removed once stored");
    assert!(!Path::new(
        &sink
            .root
            .join("partial")
            .join(Digest::of_bytes(&img.config).hex())
    )
    .exists());

    // A corrupt partial: the digest check fails, it is dropped, the blob is fetched whole.
    let sink = DirSink::new("partial-bad", true);
    let part = sink.partial_path(&d).unwrap();
    fs::create_dir_all(part.parent().unwrap()).unwrap();
    fs::write(&part, vec![0u8; 1000]).unwrap();
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    check_pulled(&p, &img, &sink);
    assert!(!part.exists());
    let reqs = reg.requests(&d.to_string());
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[1].header("range"), Some("bytes=1000-"));
    assert_eq!(reqs[2].header("range"), None);
}

#[test]
fn slow_progress_keeps_resuming_and_a_stall_keeps_the_partial() {
    let img = Image::new(11, "amd64", OCI_MANIFEST);
    let big = img.layers[0].clone();
    let d = Digest::of_bytes(&big);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let big2 = big.clone();
    let d2 = d.clone();
    // Every answer breaks off after 10 000 more bytes; while `stuck`, no
    // byte past 200 000 is ever sent.
    let stuck = Arc::new(AtomicBool::new(true));
    let stuck2 = stuck.clone();
    let reg = Mock::start(move |req, s| {
        if req.path.ends_with(&d2.to_string()) {
            let start: usize = req
                .header("range")
                .and_then(|r| {
                    r.trim_start_matches("bytes=")
                        .trim_end_matches('-')
                        .parse()
                        .ok()
                })
                .unwrap_or(0);
            let limit = if stuck2.load(Ordering::SeqCst) {
                200_000
            } else {
                big2.len()
            };
            let end = (start + 10_000).min(limit).max(start);
            let head = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{}/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                big2.len() - 1,
                big2.len(),
                big2.len() - start
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&big2[start..end]);
            return;
        }
        content.serve(req, s);
    });
    let r = format!("{}/test/img:1", reg.host());
    let sink = DirSink::new("stall", true);
    let e = pull_with(&r, &sink, &insecure(), fast()).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Transport(_)), "{e}");
    assert!(e.to_string().contains("at byte 200000 of 300000"), "{e}");
    assert!(e.to_string().ends_with("(after 5 attempts)"), "{e}");
    let part = sink.partial_path(&d).unwrap();
    assert_eq!(fs::read(&part).unwrap(), big[..200_000]);
    assert!(!sink.has_blob(&d));

    // Next run: resumes from the partial file, and progress (10 000 bytes
    // an answer) keeps resetting the retry budget.
    stuck.store(false, Ordering::SeqCst);
    let before = reg.requests(&d.to_string()).len();
    let p = pull_with(&r, &sink, &insecure(), fast()).unwrap();
    check_pulled(&p, &img, &sink);
    let reqs = reg.requests(&d.to_string());
    assert_eq!(reqs[before].header("range"), Some("bytes=200000-"));
    assert_eq!(reqs.len() - before, 10);
    assert!(!part.exists());
}

#[test]
fn transient_errors_are_retried_then_reported() {
    let img = Image::new(12, "amd64", OCI_MANIFEST);
    let content = Content::with_image("1", &img, OCI_MANIFEST);
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let reg = Mock::start(move |req, s| {
        if req.path.contains("/manifests/") {
            match n2.fetch_add(1, Ordering::SeqCst) {
                0 => return respond(s, "503 Service Unavailable", &[], b""),
                1 => {
                    return respond(
                        s,
                        "429 Too Many Requests",
                        &[("Retry-After", "3600".into())],
                        b"",
                    )
                }
                2 => return respond(s, "502 Bad Gateway", &[], b""),
                _ => {}
            }
        }
        content.serve(req, s);
    });
    let r = format!("{}/test/img:1", reg.host());
    let sink = DirSink::new("retry", false);
    let t0 = std::time::Instant::now();
    check_pulled(
        &pull_with(&r, &sink, &insecure(), fast()).unwrap(),
        &img,
        &sink,
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "Retry-After is capped"
    );

    let always = Mock::start(|_, s| {
        respond(
            s,
            "503 Service Unavailable",
            &[],
            &error_json("UNAVAILABLE", "try later"),
        )
    });
    let r = format!("{}/test/img:1", always.host());
    let opts = PullOptions {
        retries: 2,
        ..insecure()
    };
    let e = pull_with(&r, &DirSink::new("retry-fail", false), &opts, fast()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pull {r}: manifest: 503 Service Unavailable (UNAVAILABLE: try later) (after 3 attempts)")
    );
    assert_eq!(always.requests("/manifests/").len(), 3);

    // Nothing listening: connection refused is retried, then reported.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = pull_with(
        &format!("127.0.0.1:{port}/x:1"),
        &DirSink::new("refused", false),
        &opts,
        fast(),
    )
    .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Transport(_)), "{e}");
    assert_eq!(e.attempts, 3, "{e}");
}
