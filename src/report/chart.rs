//! The HTML page's charts, drawn with `plotters` into SVG text:
//!
//! - [`time_chart`] (the paper's Figure 4): time to submission of every
//!   trial with a record, one circle each, grouped by case along x and
//!   side by side by configuration (one hue each), filled darker the more
//!   it cost (the costliest trial in the full hue, the cheapest in a pale
//!   one); a trial with no `cost_usd` is a hollow ring. Trials with no
//!   submission, or no recorded time, sit in a band above the plot. Each
//!   trial is exactly one `<circle>`: nothing else in the chart is a
//!   circle, so the marks can be counted in the page.
//! - [`pass_chart`]: each configuration's pass rate as a bar with its
//!   Wilson 95% interval.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;

use super::tables::TrialRow;
use super::Report;

/// Okabe and Ito's colour-blind-safe palette, minus its yellow (too pale
/// on white).
pub const PALETTE: [(u8, u8, u8); 7] = [
    (0x00, 0x72, 0xB2),
    (0xE6, 0x9F, 0x00),
    (0x00, 0x9E, 0x73),
    (0xCC, 0x79, 0xA7),
    (0xD5, 0x5E, 0x00),
    (0x56, 0xB4, 0xE9),
    (0x33, 0x33, 0x33),
];

pub fn colour(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// `#0072b2`, for the legend.
pub fn hex(i: usize) -> String {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// `c` mixed with white: `t` = 1 is `c`, 0 is white.
fn shade(c: RGBColor, t: f64) -> RGBColor {
    let mix = |x: u8| (255.0 - (255.0 - x as f64) * t).round() as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// An x axis of `n` bands (cases, configurations), `[i, i+1)` each,
/// labelled at their centres.
struct Bands(usize);

impl Ranged for Bands {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = (limit.1 - limit.0) as f64;
        limit.0 + (v / self.0 as f64 * span).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        (0..self.0).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> Range<f64> {
        0.0..self.0 as f64
    }
}

/// Case labels longer than this are cut (the table has them whole).
const LABEL_CHARS: usize = 12;

fn label(s: &str) -> String {
    let s = crate::fsutil::escape_controls(s);
    if s.chars().count() <= LABEL_CHARS {
        s
    } else {
        let mut t: String = s.chars().take(LABEL_CHARS - 1).collect();
        t.push('…');
        t
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// One mark of the time chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub x: f64,
    /// Seconds; `None` goes in the band above the plot.
    pub seconds: Option<f64>,
    pub config: usize,
    /// Shade 0..1 by cost; `None`: unpriced (a ring).
    pub cost_shade: Option<f64>,
}

/// Where each trial with a record goes: case `i` spans x in [i, i+1);
/// configurations share its middle 80%, and a configuration's repeats
/// share its slot.
pub fn marks(r: &Report) -> Vec<Mark> {
    let recorded: Vec<&TrialRow> = r.trials.iter().filter(|t| t.reward.is_some()).collect();
    let max_cost = recorded
        .iter()
        .filter_map(|t| t.cost_usd)
        .fold(0.0f64, f64::max);
    let n_configs = r.configs.len().max(1);
    let slot = 0.8 / n_configs as f64;
    let mut out = Vec::new();
    for (i, case) in r.cases.iter().enumerate() {
        for (j, config) in r.configs.iter().enumerate() {
            let mine: Vec<&&TrialRow> = recorded
                .iter()
                .filter(|t| t.case == case.id && t.config == config.name)
                .collect();
            for (q, t) in mine.iter().enumerate() {
                let x = i as f64 + 0.1 + slot * (j as f64 + (q as f64 + 0.5) / mine.len() as f64);
                let seconds = if t.submitted == Some(true) {
                    t.time_to_submit_s
                } else {
                    None
                };
                let cost_shade = t.cost_usd.map(|c| {
                    if max_cost > 0.0 {
                        0.2 + 0.8 * c / max_cost
                    } else {
                        1.0
                    }
                });
                out.push(Mark {
                    x,
                    seconds,
                    config: j,
                    cost_shade,
                });
            }
        }
    }
    out
}

/// The time chart as an `<svg>` element.
pub fn time_chart(r: &Report) -> Result<String, String> {
    let marks = marks(r);
    let n_cases = r.cases.len().max(1);
    let per_case = (14 * r.configs.len().max(1)).max(90) as u32;
    let width = (120 + per_case * n_cases as u32).clamp(480, 20_000);
    let height = 440;
    let max_s = marks
        .iter()
        .filter_map(|m| m.seconds)
        .fold(0.0f64, f64::max);
    let (unit, div) = if max_s >= 5400.0 {
        ("h", 3600.0)
    } else if max_s >= 120.0 {
        ("min", 60.0)
    } else {
        ("s", 1.0)
    };
    let top = if max_s > 0.0 { max_s / div * 1.1 } else { 1.0 };
    let band_line = top * 1.05;
    let band = top * 1.12;
    let y_max = top * 1.2;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(Bands(n_cases), 0.0..y_max)
            .map_err(err)?;
        let case_label = |x: &f64| {
            let i = x.floor() as usize;
            r.cases.get(i).map(|c| label(&c.id)).unwrap_or_default()
        };
        let y_label = |y: &f64| {
            if *y > top * 1.001 {
                String::new()
            } else {
                format!("{y:.1}")
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&case_label)
            .y_label_formatter(&y_label)
            .y_desc(format!("time to submission ({unit})"))
            .x_desc("case")
            .max_light_lines(2)
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .draw()
            .map_err(err)?;
        // The band for trials that have no time to show.
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, band_line), (n_cases as f64, band_line)],
                RGBColor(0x99, 0x99, 0x99).stroke_width(1),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                "no submission / no time recorded",
                (0.02, y_max * 0.995),
                ("sans-serif", 12)
                    .into_font()
                    .color(&RGBColor(0x66, 0x66, 0x66)),
            )))
            .map_err(err)?;
        // Case separators.
        chart
            .draw_series((1..n_cases).map(|i| {
                PathElement::new(
                    vec![(i as f64, 0.0), (i as f64, y_max)],
                    RGBColor(0xe4, 0xe4, 0xe4).stroke_width(1),
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(marks.iter().map(|m| {
                let y = m.seconds.map(|s| s / div).unwrap_or(band);
                let hue = colour(m.config);
                let style = match m.cost_shade {
                    Some(t) => shade(hue, t).filled(),
                    None => hue.stroke_width(2),
                };
                Circle::new((m.x, y), 5, style)
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The pass-rate chart as an `<svg>` element.
pub fn pass_chart(r: &Report) -> Result<String, String> {
    let n = r.table2.len().max(1);
    let width = (120 + 110 * n as u32).clamp(420, 8000);
    let height = 320;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(Bands(n), 0.0..100.0)
            .map_err(err)?;
        let config_label = |x: &f64| {
            r.table2
                .get(x.floor() as usize)
                .map(|c| label(&c.config))
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&config_label)
            .y_desc("pass rate (%)")
            .max_light_lines(2)
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .draw()
            .map_err(err)?;
        for (j, c) in r.table2.iter().enumerate() {
            let x = j as f64;
            let Some(rate) = c.pass_rate else {
                chart
                    .draw_series(std::iter::once(Text::new(
                        "n/a",
                        (x + 0.42, 4.0),
                        ("sans-serif", 12).into_font(),
                    )))
                    .map_err(err)?;
                continue;
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x + 0.25, 0.0), (x + 0.75, rate * 100.0)],
                    colour(
                        r.configs
                            .iter()
                            .position(|k| k.name == c.config)
                            .unwrap_or(j),
                    )
                    .filled(),
                )))
                .map_err(err)?;
            if let Some([lo, hi]) = c.pass_rate_ci {
                let (lo, hi) = (lo * 100.0, hi * 100.0);
                let ink = BLACK.stroke_width(1);
                chart
                    .draw_series([
                        PathElement::new(vec![(x + 0.5, lo), (x + 0.5, hi)], ink),
                        PathElement::new(vec![(x + 0.44, lo), (x + 0.56, lo)], ink),
                        PathElement::new(vec![(x + 0.44, hi), (x + 0.56, hi)], ink),
                    ])
                    .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}
