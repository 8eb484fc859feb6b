//! One self-contained HTML page: the charts (inline SVG from
//! [`crate::report::chart`]), then every table, the rule and the problems.
//! No script, no external resource: a Content-Security-Policy that allows
//! only inline styles says so to the browser too, so a name that slipped
//! past escaping still could not run or fetch anything.

use super::grids::{self, Grid};
use super::{RenderError, Section};
use crate::fsutil::{escape_controls, quote_path};
use crate::report::{chart, Report};

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}\
h1{font-size:1.4em;margin:0 0 .4em}h2{font-size:1.1em;margin:1.4em 0 .4em}\
figure{margin:0 0 1.2em}figcaption{font-weight:bold;margin-bottom:.3em}\
.chart{overflow-x:auto}.legend{list-style:none;padding:0;margin:.3em 0;font-size:.9em}\
.legend li{display:inline-block;margin-right:1.2em}\
.sw{display:inline-block;width:.9em;height:.9em;border-radius:50%;margin-right:.3em;vertical-align:middle}\
table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #ccc;padding:.2em .5em}\
th{background:#f3f3f3;text-align:left}td.r{text-align:right}\
.notes{font-size:.85em;color:#555}.runs{font-size:.9em;color:#444}";

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in escape_controls(s).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

pub fn render(r: &Report) -> Result<String, RenderError> {
    let time = chart::time_chart(r).map_err(RenderError::Chart)?;
    let pass = chart::pass_chart(r).map_err(RenderError::Chart)?;
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
<title>cbrun report</title><style>",
    );
    out.push_str(STYLE);
    out.push_str("</style></head><body>\n<h1>cbrun report</h1>\n<p class=\"runs\">");
    for (i, run) in r.runs.iter().enumerate() {
        if i > 0 {
            out.push_str("<br>");
        }
        out.push_str(&format!(
            "run {} in {}: {} recorded of {} planned",
            escape(run.run_id.as_deref().unwrap_or("(no id)")),
            escape(&quote_path(&run.dir)),
            run.recorded,
            run.planned
        ));
    }
    out.push_str("</p>\n");
    let max_cost = r
        .trials
        .iter()
        .filter_map(|t| t.cost_usd)
        .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
    out.push_str(
        "<figure id=\"fig-time\"><figcaption>Time to submission per case and configuration, \
shaded by cost</figcaption>\n<div class=\"chart\">",
    );
    out.push_str(&time);
    out.push_str("</div>\n<ul class=\"legend\">");
    for (i, c) in r.configs.iter().enumerate() {
        out.push_str(&format!(
            "<li><span class=\"sw\" style=\"background:{}\"></span>{}</li>",
            chart::hex(i),
            escape(&c.name)
        ));
    }
    out.push_str(&format!(
        "<li>pale to full colour: cheapest to costliest trial ({})</li>\
<li>ring: no cost recorded</li><li>top band: no submission, or no time recorded</li></ul>",
        match max_cost {
            Some(c) => format!("up to {}", escape(&super::cells::usd(c))),
            None => "no trial has a cost".into(),
        }
    ));
    out.push_str(&format!(
        "<p class=\"notes\">{} mark(s), one per trial with a record; {} of them unpriced</p></figure>\n",
        r.trials.iter().filter(|t| t.reward.is_some()).count(),
        r.unpriced_trials
    ));
    out.push_str(
        "<figure id=\"fig-pass\"><figcaption>Pass rate per configuration \
(Wilson 95% interval)</figcaption>\n<div class=\"chart\">",
    );
    out.push_str(&pass);
    out.push_str("</div></figure>\n");
    let mut sections = super::DEFAULT_SECTIONS.to_vec();
    sections.push(Section::Trials);
    for g in grids::grids(r, &sections) {
        table(&mut out, &g);
    }
    if !r.problems.is_empty() {
        out.push_str("<section id=\"problems\"><h2>Problems</h2><ul>");
        for p in &r.problems {
            out.push_str(&format!("<li>{}</li>", escape(&p.to_string())));
        }
        out.push_str("</ul></section>\n");
    }
    out.push_str("</body></html>\n");
    Ok(out)
}

fn table(out: &mut String, g: &Grid) {
    out.push_str(&format!(
        "<section class=\"table\"><h2>{}</h2>\n<table><thead><tr>",
        escape(&g.title)
    ));
    for h in &g.headers {
        out.push_str(&format!("<th>{}</th>", escape(h)));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in &g.rows {
        out.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if g.right[i] { " class=\"r\"" } else { "" };
            out.push_str(&format!("<td{class}>{}</td>", escape(c)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    if !g.notes.is_empty() {
        out.push_str("<ul class=\"notes\">");
        for n in &g.notes {
            out.push_str(&format!("<li>{}</li>", escape(n)));
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>\n");
}
