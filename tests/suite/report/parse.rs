//! Reading the Markdown and terminal tables back into cells.

use super::*;

/// Markdown tables by their `## title`: header row first.
pub fn md_tables(text: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut out = BTreeMap::new();
    let mut title = None;
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("## ") {
            title = Some(md_unescape(t));
            out.insert(md_unescape(t), Vec::new());
        } else if line.starts_with('|') && !line.starts_with("|---") {
            let row = md_cells(line);
            if row.iter().all(|c| c.starts_with("---")) {
                continue;
            }
            out.get_mut(title.as_ref().unwrap()).unwrap().push(row);
        }
    }
    out
}

/// Cells of a Markdown row, split at unescaped pipes.
pub fn md_cells(line: &str) -> Vec<String> {
    let inner = line
        .trim()
        .strip_prefix('|')
        .unwrap()
        .strip_suffix('|')
        .unwrap();
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push('\\');
                cur.push(chars.next().unwrap());
            }
            '|' => cells.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    cells.push(cur);
    cells.iter().map(|c| md_unescape(c.trim())).collect()
}

pub fn md_unescape(s: &str) -> String {
    let s = s
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.push(chars.next().unwrap());
        } else {
            out.push(c);
        }
    }
    out
}

/// Terminal tables by title: header row first, notes left out. Cells are
/// split at runs of two or more spaces (no cell holds two).
pub fn term_tables(text: &str) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut out = BTreeMap::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines();
        let Some(title) = lines.next() else { continue };
        let mut rows = Vec::new();
        for (i, l) in lines.enumerate() {
            if i == 1 || l.starts_with("  ") {
                continue; // the rule under the header; notes
            }
            rows.push(split2(l));
        }
        out.insert(title.to_owned(), rows);
    }
    out
}

pub fn split2(l: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut spaces = 0;
    for c in l.trim().chars() {
        if c == ' ' {
            spaces += 1;
            continue;
        }
        if spaces >= 2 {
            cells.push(std::mem::take(&mut cur));
        } else if spaces == 1 {
            cur.push(' ');
        }
        spaces = 0;
        cur.push(c);
    }
    cells.push(cur);
    cells
}

pub fn rows(v: &[&[&str]]) -> Vec<Vec<String>> {
    v.iter()
        .map(|r| r.iter().map(|c| c.to_string()).collect())
        .collect()
}
