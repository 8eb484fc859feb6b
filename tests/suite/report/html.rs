//! The HTML page in headless Chromium.

use super::*;

/// The HTML page of run A in headless Chromium: the DOM has exactly one
/// circle per trial with a record in the time-to-submission chart (and
/// none in the pass-rate chart), and the screenshot shows them: the page
/// with its marks has many more coloured pixels than the same page with
/// the marks taken out, among them the full hue of the costliest trial.
#[test]
fn html_report_renders_in_chromium() {
    let Some(bin) = chromium() else { return };
    let tmp = Tmp::new("html");
    let run = run_a(tmp.path());
    let page = tmp.path().join("report.html");
    ok(cbrun(&[&"report", &run.dir, &"--html", &page]));
    let html = fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script"), "no script in the page");
    assert!(
        !html.contains("http://") || !html.contains("src=\"http"),
        "no external resource"
    );

    let profile = tmp.path().join("profile");
    let dom = stdout(&run_chromium(&bin, &profile, &page, &["--dump-dom"]));
    // 24 trials: 1 pending (no record) and 1 unreadable have no mark.
    assert_eq!(figure(&dom, "fig-time").matches("<circle").count(), 22);
    assert_eq!(figure(&dom, "fig-pass").matches("<circle").count(), 0);
    assert!(figure(&dom, "fig-pass").matches("<rect").count() >= 2);
    for title in [T2, T6, T7, T8, TR] {
        assert!(dom.contains(&format!("<h2>{title}</h2>")), "{title}");
    }
    assert!(
        dom.contains("<td>$15.10 (+2 unpriced)</td>") || dom.contains(">$15.10 (+2 unpriced)</td>")
    );

    // The same page with the marks taken out, as a control.
    let bare_page = tmp.path().join("bare.html");
    let (head, rest) = html.split_at(html.find("<figure id=\"fig-time\"").unwrap());
    let end = rest.find("</figure>").unwrap();
    let fig: String = rest[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("<circle"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(fig.len(), end, "the marks were found and removed");
    fs::write(&bare_page, format!("{head}{fig}{}", &rest[end..])).unwrap();

    let shot = |p: &Path, png: &Path| {
        run_chromium(
            &bin,
            &profile,
            p,
            &[
                "--window-size=1200,700",
                &format!("--screenshot={}", png.display()),
            ],
        );
        pixels(png)
    };
    let (w, h, full) = shot(&page, &tmp.path().join("full.png"));
    let (_, _, bare) = shot(&bare_page, &tmp.path().join("bare.png"));
    assert_eq!((w, h), (1200, 700));
    // Coloured: clearly not grey (the axes, grid and text are grey).
    let coloured = |px: &[[u8; 3]]| {
        px.iter()
            .filter(|[r, g, b]| {
                let (mx, mn) = ((*r).max(*g).max(*b), (*r).min(*g).min(*b));
                mx - mn > 40
            })
            .count()
    };
    let (with_marks, without) = (coloured(&full), coloured(&bare));
    assert!(
        with_marks > without + 22 * 30,
        "marks add coloured pixels: {with_marks} vs {without}"
    );
    // alpha's costliest trials ($3.00, the maximum) are drawn in the full hue #0072b2.
    let hue = full
        .iter()
        .filter(|[r, g, b]| r.abs_diff(0x00) < 16 && g.abs_diff(0x72) < 16 && b.abs_diff(0xb2) < 16)
        .count();
    let hue_bare = bare
        .iter()
        .filter(|[r, g, b]| r.abs_diff(0x00) < 16 && g.abs_diff(0x72) < 16 && b.abs_diff(0xb2) < 16)
        .count();
    assert!(
        hue > hue_bare + 3 * 40,
        "full-hue marks: {hue} vs {hue_bare}"
    );
}
