//! Markdown: a heading and a pipe table per table, notes as a list, the
//! runs read and the problems found. Cells escape what Markdown (and the
//! HTML it may pass through) would act on.

use super::grids::Grid;
use crate::fsutil::{escape_controls, quote_path};
use crate::report::Report;

pub fn render(r: &Report, grids: &[Grid]) -> String {
    let mut out = String::from("# cbrun report\n\n");
    for run in &r.runs {
        out.push_str(&format!(
            "- run {} in `{}`: {} recorded of {} planned\n",
            cell(run.run_id.as_deref().unwrap_or("(no id)")),
            quote_path(&run.dir).replace('`', "\\x60"),
            run.recorded,
            run.planned
        ));
    }
    out.push('\n');
    for g in grids {
        out.push_str(&format!("## {}\n\n", cell(&g.title)));
        out.push_str(&row(g.headers.iter().map(|h| h.to_string())));
        out.push_str(&format!(
            "|{}\n",
            g.right
                .iter()
                .map(|r| if *r { "---:|" } else { "---|" })
                .collect::<String>()
        ));
        for r in &g.rows {
            out.push_str(&row(r.iter().cloned()));
        }
        out.push('\n');
        for n in &g.notes {
            out.push_str(&format!("- {}\n", cell(n)));
        }
        if !g.notes.is_empty() {
            out.push('\n');
        }
    }
    if !r.problems.is_empty() {
        out.push_str("## Problems\n\n");
        for p in &r.problems {
            out.push_str(&format!("- {}\n", cell(&p.to_string())));
        }
        out.push('\n');
    }
    out
}

fn row(cells: impl Iterator<Item = String>) -> String {
    let mut s = String::from("|");
    for c in cells {
        s.push(' ');
        s.push_str(&cell(&c));
        s.push_str(" |");
    }
    s.push('\n');
    s
}

/// Text safe in a table cell: one line, no pipe that splits the cell, no
/// HTML, no emphasis, code or link syntax.
pub fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in escape_controls(s).chars() {
        match c {
            '|' | '\\' | '`' | '*' | '[' | ']' | '_' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            _ => out.push(c),
        }
    }
    out
}
