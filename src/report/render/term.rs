//! The terminal table: aligned columns, a title line and notes under each
//! table. Cells are one line each: control and invisible characters are
//! written as `\u{..}`, so no name can move the cursor or fake a row.

use super::grids::Grid;
use crate::fsutil::escape_controls;

pub fn render(grids: &[Grid]) -> String {
    let mut out = String::new();
    for (i, g) in grids.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        table(&mut out, g);
    }
    out
}

fn table(out: &mut String, g: &Grid) {
    out.push_str(&escape_controls(&g.title));
    out.push('\n');
    let rows: Vec<Vec<String>> = g
        .rows
        .iter()
        .map(|r| r.iter().map(|c| escape_controls(c)).collect())
        .collect();
    let mut width: Vec<usize> = g.headers.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |out: &mut String, cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = width[i] - c.chars().count();
            if g.right[i] {
                s.extend(std::iter::repeat_n(' ', pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                s.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    let headers: Vec<String> = g.headers.iter().map(|h| h.to_string()).collect();
    line(out, &headers);
    let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
    line(out, &rule);
    if rows.is_empty() {
        out.push_str("(none)\n");
    }
    for r in &rows {
        line(out, r);
    }
    for n in &g.notes {
        out.push_str("  ");
        out.push_str(&escape_controls(n));
        out.push('\n');
    }
}
