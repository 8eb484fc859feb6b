//! Headless Chromium and PNG pixels.

use super::*;

/// Chromium, or `None` outside CI when it is not installed (in CI a
/// missing browser fails the test).
pub fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("chromium is not installed (Debian package `chromium`); CI needs it");
        }
        eprintln!("skipped: chromium is not installed");
    }
    found
}

/// Headless Chromium on `page` with `args`, a fresh profile each time.
pub fn run_chromium(bin: &Path, profile: &Path, page: &Path, args: &[&str]) -> Output {
    let _ = fs::remove_dir_all(profile);
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium hung on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "chromium: {}", stderr(&o));
    o
}

/// Pixels of a PNG as RGB.
pub fn pixels(png_path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let mut dec = png::Decoder::new(std::io::BufReader::new(fs::File::open(png_path).unwrap()));
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let px = buf[..info.line_size * info.height as usize]
        .chunks(info.line_size)
        .flat_map(|line| {
            line[..info.width as usize * step]
                .chunks(step)
                .map(|p| [p[0], p[1], p[2]])
        })
        .collect();
    (info.width, info.height, px)
}

/// The part of a page between `<figure id="ID"` and its `</figure>`.
pub fn figure<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<figure id=\"{id}\""))
        .unwrap_or_else(|| panic!("no figure {id}"));
    let len = page[start..].find("</figure>").unwrap();
    &page[start..start + len]
}
